"""Event-time windows without a bolt: items in with their event time, fired windows out.

The I/O-free core the event-time window bolts (``heron_spark.api.window``) and the streamlet's
event-time windows share. Times are int milliseconds since the epoch; the semantics are
``EVENT_TIME.md``'s (issue 34):

- A watermark W means every item still to come has ``ts >= W``; an item with ``ts < W`` is
  late for the watermark. A window ``[start, end)`` is complete, and fires, when ``W >= end``.
- Tumbling windows of size S: ``start = ts - ts % S``. Sliding windows of size D sliding by S:
  every ``start = k * S`` with ``start <= ts < start + D`` (D need not be a multiple of S, but
  D >= S: no gaps). Both aligned to the epoch.
- Session windows with gap G: an item at ``ts`` opens ``[ts, ts + G)``; sessions that overlap
  merge (two items are in one session when a chain of items less than G apart joins them), so
  a session is ``[first ts, last ts + G)``: it ends G ms after its last item.
- Windows are per key (``key=None`` when the caller does not key them).
- Allowed lateness L (ms, default 0): a window is kept until ``W >= end + L`` (then purged).
  An item late for the watermark whose window is still kept updates it; a window that had
  already fired fires again with its full new contents (on the next ``advance`` or
  ``fire_updated``). An item none of whose windows is kept any more is refused: ``add``
  returns False and the caller handles it (late stream, metric).

Items are kept in arrival order; a fired window hands out all of them, and ``released``: the
items whose every window has now fired with them in (what an at-least-once bolt may ack).
``snapshot()`` / ``restore()`` give the whole state as plain picklable data (the items must
be picklable) for checkpoints. Not thread-safe: one task's thread.
"""

from __future__ import annotations

import heapq
from typing import Any, Hashable, NamedTuple

from heron_spark.api.event_time import WATERMARK_MIN
from heron_spark.errors import TopologyValueError

TUMBLING = "tumbling"
SLIDING = "sliding"
SESSION = "session"
_KINDS = (TUMBLING, SLIDING, SESSION)
_SNAPSHOT_VERSION = 1


class FiredWindow(NamedTuple):
    """One firing of a window: its bounds (ms), its items, which of them may be acked now."""

    key: Hashable
    start: int
    end: int
    items: list
    """Every item the window holds, in arrival order."""
    timestamps: list
    """The event time (ms) of each of ``items``."""
    released: list
    """The items whose last window fired with them in (each item is released once)."""
    refire: bool
    """True when the window fired before (late items updated it, or a session grew)."""


class _Window:
    """One window's bounds and contents (internal)."""

    __slots__ = ("key", "start", "end", "entries", "new", "fired")

    def __init__(self, key: Hashable, start: int, end: int) -> None:
        self.key = key
        self.start = start
        self.end = end
        self.entries: list = []   # (seq, ts, item) in arrival order
        self.new: list = []       # seqs added since the last firing
        self.fired = False


def _positive_ms(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{name} must be a positive int of milliseconds"
        raise TopologyValueError(msg,
                                 value=value, kind="config", fix=f"give {name} as an int > 0")
    return value


class EventWindows:
    """The event-time windows of one task: ``add`` items, ``advance`` the watermark.

    Build with ``EventWindows.tumbling(size_ms)``, ``EventWindows.sliding(size_ms, slide_ms)``
    or ``EventWindows.session(gap_ms)``, each with ``lateness_ms=`` (default 0). Not
    thread-safe.
    """

    def __init__(self, kind: str, size_ms: int, slide_ms: int | None = None,
                 lateness_ms: int = 0) -> None:
        if kind not in _KINDS:
            msg = f"unknown window kind {kind!r}"
            raise TopologyValueError(msg, value=kind,
                                     fix=f"use one of {', '.join(_KINDS)}")
        self.kind = kind
        self.size_ms = _positive_ms(size_ms, "the window size" if kind != SESSION else
                                    "the session gap")
        self.slide_ms = self.size_ms if slide_ms is None else _positive_ms(slide_ms,
                                                                            "the slide")
        if self.slide_ms > self.size_ms:
            msg = "the window is shorter than its slide"
            raise TopologyValueError(msg, value=self.slide_ms,
                                     kind="config",
                                     fix=f"slide by at most the window size ({self.size_ms} ms)")
        if isinstance(lateness_ms, bool) or not isinstance(lateness_ms, int) or lateness_ms < 0:
            msg = "the allowed lateness must be an int of ms >= 0"
            raise TopologyValueError(msg,
                                     value=lateness_ms, kind="config",
                                     fix="give the allowed lateness as an int >= 0")
        self.lateness_ms = lateness_ms
        self.watermark = WATERMARK_MIN
        self._seq = 0
        self._wid = 0
        self._windows: dict[int, _Window] = {}
        self._by_start: dict[tuple, int] = {}        # (key, start) -> wid (tumbling, sliding)
        self._sessions: dict[Hashable, list] = {}    # key -> wids (session)
        self._to_fire: list = []                     # heap (end, start, wid): not fired yet
        self._to_purge: list = []                    # heap (end + lateness, wid)
        self._dirty: set = set()                     # wids: complete, then late items came
        self._pending: dict[int, int] = {}           # seq -> windows still to fire with it

    @classmethod
    def tumbling(cls, size_ms: int, *, lateness_ms: int = 0) -> EventWindows:
        """Return tumbling windows of ``size_ms``."""
        return cls(TUMBLING, size_ms, None, lateness_ms)

    @classmethod
    def sliding(cls, size_ms: int, slide_ms: int, *, lateness_ms: int = 0) -> EventWindows:
        """Return sliding windows of ``size_ms`` starting every ``slide_ms``."""
        return cls(SLIDING, size_ms, slide_ms, lateness_ms)

    @classmethod
    def session(cls, gap_ms: int, *, lateness_ms: int = 0) -> EventWindows:
        """Return session windows closed by ``gap_ms`` without items."""
        return cls(SESSION, gap_ms, None, lateness_ms)

    # --- assignment -----------------------------------------------------------------------

    def bounds_of(self, ts: int) -> list[tuple[int, int]]:
        """Return the (start, end) of every tumbling or sliding window holding ``ts``."""
        size, slide = self.size_ms, self.slide_ms
        last = ts - ts % slide
        first = (ts - size) // slide * slide + slide  # smallest k*S with k*S + size > ts
        return [(start, start + size) for start in range(first, last + 1, slide)]

    def _kept(self, end: int) -> bool:
        return end + self.lateness_ms > self.watermark

    def add(self, ts: int, item: Any, key: Hashable = None) -> bool:
        """Put ``item`` (event time ``ts`` ms) in its windows; False when it is too late.

        Return False, keeping nothing, when no window of ``item`` is kept any more (every one
        reached ``end + lateness <= watermark``): the caller handles the late item.
        """
        if self.kind == SESSION:
            return self._add_session(ts, item, key)
        if self.kind == TUMBLING:  # one window per item: the common case, inline
            size = self.size_ms
            start = ts - ts % size
            end = start + size
            watermark = self.watermark
            if end + self.lateness_ms <= watermark:
                return False
            wid = self._by_start.get((key, start))
            if wid is None:
                wid = self._by_start[(key, start)] = self._open(key, start, end)
            window = self._windows[wid]
            self._seq += 1
            seq = self._seq
            window.entries.append((seq, ts, item))
            window.new.append(seq)
            if end <= watermark:  # complete already: fires again (or late, first)
                self._dirty.add(wid)
            return True  # in one window only: released when it fires (no _pending count)
        wids = []
        for start, end in self.bounds_of(ts):
            if not self._kept(end):
                continue
            wid = self._by_start.get((key, start))
            if wid is None:
                wid = self._open(key, start, end)
                self._by_start[(key, start)] = wid
            wids.append(wid)
        if not wids:
            return False
        seq = self._next_seq()
        for wid in wids:
            self._put(wid, seq, ts, item)
        self._pending[seq] = len(wids)
        return True

    def _add_session(self, ts: int, item: Any, key: Hashable) -> bool:
        start, end = ts, ts + self.size_ms
        wids = self._sessions.get(key, [])
        overlapping = [w for w in wids if self._windows[w].start < end and ts < self._windows[w].end]
        for wid in overlapping:
            start = min(start, self._windows[wid].start)
            end = max(end, self._windows[wid].end)
        if not self._kept(end):
            return False
        if len(overlapping) == 1 and (start, end) == (self._windows[overlapping[0]].start,
                                                     self._windows[overlapping[0]].end):
            wid = overlapping[0]
        else:
            wid = self._open(key, start, end)
            merged = self._windows[wid]
            olds = sorted((self._windows.pop(w) for w in overlapping), key=lambda w: w.start)
            for old in olds:
                merged.entries.extend(old.entries)
                merged.new.extend(old.new)
                merged.fired = merged.fired or old.fired
            merged.entries.sort(key=lambda entry: entry[0])  # arrival order
            self._dirty -= set(overlapping)
            kept = [w for w in wids if w not in overlapping]
            kept.append(wid)
            self._sessions[key] = kept
        seq = self._next_seq()
        self._put(wid, seq, ts, item)
        self._pending[seq] = 1
        return True

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _open(self, key: Hashable, start: int, end: int) -> int:
        self._wid += 1
        wid = self._wid
        self._windows[wid] = _Window(key, start, end)
        self._schedule(wid)
        if self.kind == SESSION and key not in self._sessions:
            self._sessions[key] = [wid]
        return wid

    def _schedule(self, wid: int) -> None:
        window = self._windows[wid]
        heapq.heappush(self._to_fire, (window.end, window.start, wid))
        heapq.heappush(self._to_purge, (window.end + self.lateness_ms, wid))

    def _put(self, wid: int, seq: int, ts: int, item: Any) -> None:
        window = self._windows[wid]
        window.entries.append((seq, ts, item))
        window.new.append(seq)
        if window.end <= self.watermark:  # complete already: fires again (or late, first)
            self._dirty.add(wid)

    # --- firing -------------------------------------------------------------------------------

    def advance(self, watermark_ms: int) -> list[FiredWindow]:
        """Move the watermark to ``watermark_ms``; return the windows to fire, in end order.

        Return every window that is now complete and has not fired, and every fired one that
        late items updated, ordered by (end, start); then purge the windows with
        ``end + lateness <= watermark``. A watermark below the current one changes nothing
        (the updated windows still fire).
        """
        if watermark_ms > self.watermark:
            self.watermark = watermark_ms
        wids = set(self._dirty)
        self._dirty.clear()
        heap = self._to_fire
        while heap and heap[0][0] <= self.watermark:
            _, _, wid = heapq.heappop(heap)
            window = self._windows.get(wid)
            if window is not None and (not window.fired or window.new):
                wids.add(wid)
        fired = self._fire(wids)
        self._purge()
        return fired

    @property
    def updated(self) -> bool:
        """True when late items went into complete windows: ``fire_updated`` has some to fire."""
        return bool(self._dirty)

    def fire_updated(self) -> list[FiredWindow]:
        """Fire the complete windows late items went into since; return them in end order.

        Those are windows that had fired (they fire again with all their items) and windows a
        late item opened after the watermark passed their end (they fire for the first time).
        """
        if not self._dirty:  # the usual: the item went into a window still open
            return []
        wids = set(self._dirty)
        self._dirty.clear()
        return self._fire(wids)

    def _fire(self, wids: set) -> list[FiredWindow]:
        windows = sorted(((self._windows[w], w) for w in wids if w in self._windows),
                         key=lambda pair: (pair[0].end, pair[0].start, pair[1]))
        out = []
        tumbling = self.kind == TUMBLING
        for window, _ in windows:
            entries = window.entries
            if tumbling:  # each item in this window only: every new one is released
                fresh = set(window.new) if len(window.new) != len(entries) else None
                released = [entry[2] for entry in entries] if fresh is None \
                    else [item for seq, _, item in entries if seq in fresh]
                out.append(FiredWindow(window.key, window.start, window.end,
                                       [entry[2] for entry in entries],
                                       [entry[1] for entry in entries], released, window.fired))
                window.new = []
                window.fired = True
                continue
            released = []
            new = set(window.new)
            for seq, _, item in window.entries:
                if seq in new:
                    left = self._pending[seq] - 1
                    if left:
                        self._pending[seq] = left
                    else:
                        del self._pending[seq]
                        released.append(item)
            out.append(FiredWindow(window.key, window.start, window.end,
                                   [entry[2] for entry in window.entries],
                                   [entry[1] for entry in window.entries], released,
                                   window.fired))
            window.new = []
            window.fired = True
        return out

    def _purge(self) -> None:
        heap = self._to_purge
        while heap and heap[0][0] <= self.watermark:
            _, wid = heapq.heappop(heap)
            window = self._windows.get(wid)
            if window is None or window.end + self.lateness_ms > self.watermark:
                continue
            del self._windows[wid]
            self._dirty.discard(wid)
            if self.kind == SESSION:
                left = [w for w in self._sessions.get(window.key, []) if w != wid]
                if left:
                    self._sessions[window.key] = left
                else:
                    self._sessions.pop(window.key, None)
            else:
                self._by_start.pop((window.key, window.start), None)

    # --- introspection and checkpoints ----------------------------------------------------

    def __len__(self) -> int:
        """Return how many windows are kept (not purged yet)."""
        return len(self._windows)

    def snapshot(self) -> dict:
        """Return the whole state as plain picklable data (for ``restore``)."""
        return {
            "version": _SNAPSHOT_VERSION, "kind": self.kind, "size_ms": self.size_ms,
            "slide_ms": self.slide_ms, "lateness_ms": self.lateness_ms,
            "watermark": self.watermark, "seq": self._seq,
            "windows": [(w.key, w.start, w.end, list(w.entries), list(w.new), w.fired)
                        for _, w in sorted(self._windows.items())],
            "pending": dict(self._pending),
        }

    def restore(self, snapshot: dict) -> None:
        """Replace the state by ``snapshot`` (from ``snapshot()`` of windows set up the same).

        Raise ``TopologyValueError`` when the snapshot's windowing differs from this one's
        (kind, size, slide): the topology changed its windows between runs.
        """
        mine = (self.kind, self.size_ms, self.slide_ms)
        theirs = (snapshot.get("kind"), snapshot.get("size_ms"), snapshot.get("slide_ms"))
        if snapshot.get("version") != _SNAPSHOT_VERSION or mine != theirs:
            msg = "the checkpointed windows differ from this bolt's windows"
            raise TopologyValueError(
                msg, value=theirs,
                kind="state", fix=f"restore with the windows it was saved with {theirs} "
                                  "or start without the checkpoint")
        fresh = EventWindows(self.kind, self.size_ms, self.slide_ms, self.lateness_ms)
        self.__dict__.update(fresh.__dict__)
        self.watermark = snapshot["watermark"]
        self._seq = snapshot["seq"]
        # a tumbling window's items are counted by their window alone (older snapshots counted)
        self._pending = {} if self.kind == TUMBLING else dict(snapshot["pending"])
        for key, start, end, entries, new, fired in snapshot["windows"]:
            wid = self._open(key, start, end)
            window = self._windows[wid]
            window.entries = list(entries)
            window.new = list(new)
            window.fired = fired
            if self.kind == SESSION:
                if wid not in self._sessions[key]:
                    self._sessions[key].append(wid)
            else:
                self._by_start[(key, start)] = wid
            if new and end <= self.watermark:
                self._dirty.add(wid)


__all__ = ["SESSION", "SLIDING", "TUMBLING", "EventWindows", "FiredWindow", "WATERMARK_MIN"]

"""Watermarks inside a task, without I/O: a spout's per partition, a bolt's per upstream task.

``SourceWatermarks`` is a spout task's generator: per source partition the newest timestamp
seen minus the lag (bounded out-of-orderness; lag 0: monotonous timestamps), the task's
watermark the minimum over the partitions that are not idle. A partition is idle once it had no
event-time tuple for ``idle_ms`` while the spout could emit (``hold`` restarts every clock
while backpressure or a deactivation keeps it from emitting); a task that never had one is idle
``idle_ms`` after it started, so a spout without event time never holds anything back.

``InputWatermarks`` is a bolt task's merge: the minimum over its upstream tasks that have
neither ended nor gone idle (one that sent nothing yet holds it at ``WATERMARK_MIN``), never
going back. When every upstream task is idle the task is idle too; when every one has ended it
is ``WATERMARK_MAX``.

Both say what to tell downstream as a ``Status``: a watermark (int ms) or ``IDLE``. Times in
milliseconds; ``now`` is the caller's clock (monotonic seconds). Loop thread only.
"""

from __future__ import annotations

from typing import Hashable, Iterable

from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN

IDLE = "idle"
Status = int | str  # a watermark in ms, or IDLE


class SourceWatermarks:
    """A spout task's watermark: see the module docstring."""

    def __init__(self, lag_ms: int, idle_ms: int, now: float) -> None:
        self.lag_ms = lag_ms
        self.idle_secs = idle_ms / 1000.0
        self.newest: dict[Hashable, int] = {}      # partition -> newest timestamp seen
        self._last_seen: dict[Hashable, float] = {}  # partition -> when its last tuple came
        # partitions the spout reads (``track``) that had no tuple yet -> since when
        self._waiting: dict[Hashable, float] = {}
        self._seen: set = set()  # partitions with a tuple since the last ``status``
        self._quiet_since = now                     # the task: when it last had a timestamp
        self.watermark = WATERMARK_MIN              # what it last said (never goes back)

    def observe(self, timestamp: int, partition: Hashable) -> None:
        """Note a tuple of ``partition`` with event time ``timestamp`` (ms).

        Per tuple, so no clock: the partition counts as seen at the next ``status`` (its idle
        clock is off by at most the time between two, a watermark interval).
        """
        newest = self.newest.get(partition)
        if newest is None or timestamp > newest:
            self.newest[partition] = timestamp
            if newest is None:
                self._waiting.pop(partition, None)
        self._seen.add(partition)

    def advance(self, watermark: int, now: float) -> None:
        """Raise the watermark to ``watermark`` (the spout says so itself); it is not idle."""
        self.watermark = max(self.watermark, watermark)
        self._quiet_since = now

    def track(self, partitions: Iterable[Hashable], now: float) -> None:
        """Read exactly ``partitions`` from now on.

        One not seen yet holds the watermark back until its first tuple, or until it is idle;
        one no longer read stops counting.
        """
        wanted = set(partitions)
        for gone in [p for p in self.newest if p not in wanted]:
            del self.newest[gone]
            self._last_seen.pop(gone, None)
        for gone in [p for p in self._waiting if p not in wanted]:
            del self._waiting[gone]
        for partition in wanted:
            if partition not in self.newest and partition not in self._waiting:
                self._waiting[partition] = now

    def hold(self, now: float) -> None:
        """Restart every idle clock: the spout may not emit now (backpressure, deactivated)."""
        self._quiet_since = now
        for partition in self._last_seen:
            self._last_seen[partition] = now
        for partition in self._waiting:
            self._waiting[partition] = now

    @property
    def has_event_time(self) -> bool:
        """True once the task emitted a tuple with a timestamp (or restored one)."""
        return bool(self.newest)

    def status(self, now: float) -> Status:
        """Return the task's watermark now, or ``IDLE``."""
        if self._seen:
            for partition in self._seen:
                self._last_seen[partition] = now
            self._seen.clear()
            self._quiet_since = now
        idle = self.idle_secs
        if any(not idle or now - since < idle for since in self._waiting.values()):
            return self.watermark  # a partition read but not heard from yet holds it back
        active = [newest for partition, newest in self.newest.items()
                  if not idle or now - self._last_seen.get(partition, now) < idle]
        if not active:
            if idle and now - self._quiet_since >= idle:
                return IDLE
            return self.watermark
        self.watermark = max(self.watermark, min(active) - self.lag_ms)
        return self.watermark

    def snapshot(self) -> dict:
        """Return what a checkpoint keeps: each partition's newest timestamp, the watermark."""
        return {"newest": dict(self.newest), "watermark": self.watermark}

    def restore(self, saved: dict, now: float) -> None:
        """Start from ``snapshot()``'s ``saved``; every partition counts as just seen."""
        self.newest = dict(saved.get("newest", {}))
        self._last_seen = dict.fromkeys(self.newest, now)
        self._quiet_since = now
        self.watermark = int(saved.get("watermark", WATERMARK_MIN))


class InputWatermarks:
    """A bolt task's input watermark: see the module docstring."""

    def __init__(self, upstream: Iterable[int]) -> None:
        self.upstream = set(upstream)
        self.marks: dict[int, int] = dict.fromkeys(self.upstream, WATERMARK_MIN)
        self.idle: set[int] = set()
        self.watermark = WATERMARK_MIN if self.upstream else WATERMARK_MAX
        self.is_idle = False

    def on_watermark(self, task: int, watermark: int) -> bool:
        """Note ``task``'s watermark; return whether this task's watermark or idleness changed."""
        if task not in self.upstream:
            return False  # ended already, or not an upstream task
        self.idle.discard(task)
        if watermark > self.marks[task]:
            self.marks[task] = watermark
        return self._update()

    def on_idle(self, task: int) -> bool:
        """Note that ``task`` went idle; return whether this task's status changed."""
        if task not in self.upstream:
            return False
        self.idle.add(task)
        return self._update()

    def on_end(self, task: int) -> bool:
        """Note that ``task`` ended (+infinity); return whether this task's status changed."""
        if task not in self.upstream:
            return False
        self.upstream.discard(task)
        self.idle.discard(task)
        del self.marks[task]
        return self._update()

    def status(self) -> Status:
        """Return what downstream should hear: the watermark, or ``IDLE``."""
        return IDLE if self.is_idle else self.watermark

    def _update(self) -> bool:
        before = (self.watermark, self.is_idle)
        if not self.upstream:
            self.watermark, self.is_idle = WATERMARK_MAX, False
        else:
            active = [mark for task, mark in self.marks.items() if task not in self.idle]
            self.is_idle = not active
            if active:
                self.watermark = max(self.watermark, min(active))
        return (self.watermark, self.is_idle) != before

    def snapshot(self) -> dict:
        """Return what a checkpoint keeps: each upstream task's watermark, the task's."""
        return {"marks": dict(self.marks), "watermark": self.watermark}

    def restore(self, saved: dict) -> None:
        """Start from ``snapshot()``'s ``saved`` (upstream tasks it does not name stay MIN)."""
        for task, mark in saved.get("marks", {}).items():
            if task in self.marks:
                self.marks[task] = max(self.marks[task], int(mark))
        self.watermark = max(self.watermark, int(saved.get("watermark", WATERMARK_MIN)))


def encode(status: Status) -> bytes:
    """Return the stream-name slot of a WATERMARK frame saying ``status``."""
    return IDLE.encode() if status == IDLE else str(status).encode()


def decode(slot: str) -> Status:
    """Return the status a WATERMARK frame's stream-name slot says."""
    return IDLE if slot == IDLE else int(slot)

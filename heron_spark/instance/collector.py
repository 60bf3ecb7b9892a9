"""Output collector: ``emit`` appends to a per-stream buffer; the instance's loop sends it.

Runs on the instance's loop thread only. Per tuple, ``emit`` does a length check and one list
append (plus the tuple's roots under at-least-once, and a destination list when the stream has
direct/custom subscribers or the caller asks for task ids). The emitted values object is kept
as is until the batch leaves, as Storm does: do not change it after ``emit``. The loop flushes
a stream's buffer when the task has nothing more to add for now (the end of a turn), or at
``heron.batch.max.tuples``: the collector then builds one Arrow batch, partitions it per
destination task (``plan.grouping``) and sends one DATA frame per destination, which the stmgrs
relay without decoding. At-least-once, it draws each copy's edge id here and sends the XOR
updates (``edges``, or ``opened`` for a spout's new trees) ahead of the frames that carry them.
Whole record batches (the batch API) take the same way without a Python object per row.

Event time: a tuple emitted with a timestamp (``emit(..., timestamp=ms)``, or inherited from
the input a bolt is processing: ``current_ts``) keeps it beside its row; a batch with any
timestamp carries the ``__hs_ts`` column (``tuple_batch.with_timestamps``). While a stream
holds timestamps its emits leave the fast paths (it is out of ``_plain`` until its flush),
except ``emit_plain_stamped``, which the executor binds while it processes timestamped input.
"""

from __future__ import annotations

import time
from itertools import chain
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from heron_spark.api.serializer import IHeronSerializer
from heron_spark.api.tuple import HeronTuple
from heron_spark.errors import TopologyValueError
from heron_spark.plan import grouping
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import frames, tree_ids, tuple_batch

_U64_MAX = np.iinfo(np.uint64).max
_EDGE_POOL = 16384  # edge ids drawn ahead at once (128 KiB)
_ONE = {1}
_ONES = np.ones(4096, dtype=np.int32)  # read-only: each row's root count, one each
_ONES.flags.writeable = False
_DEFAULT = "default"


def _joined_roots(pending: list) -> tuple[np.ndarray, np.ndarray] | None:
    """Return the roots of batches sent as one: None if none of them is in a tree."""
    if all(roots is None for _, roots in pending):
        return None
    flats, counts = [], []
    for batch, roots in pending:
        if roots is None:
            flats.append(np.empty(0, dtype=np.uint64))
            counts.append(np.zeros(batch.num_rows, dtype=np.int64))
        else:
            flats.append(roots[0])
            counts.append(np.asarray(roots[1], dtype=np.int64))
    return np.concatenate(flats), np.concatenate(counts)


def _nothing() -> None:
    """No-op ``push`` (a collector whose ``send`` writes at once)."""


class _StreamOut:
    """Buffer and routing of one output stream."""

    __slots__ = ("name", "name_bytes", "fields", "width", "routing", "per_tuple",
                 "direct_tasks", "rows", "roots", "dests", "routed", "emitted", "batches",
                 "batch_rows", "stamps")

    def __init__(self, name: str, fields: tuple[str, ...], routing: grouping.StreamRouting) -> None:
        self.name = name
        self.name_bytes = name.encode()
        self.fields = fields
        self.width = len(fields)
        self.routing = routing
        self.per_tuple = bool(routing.per_tuple)
        self.direct_tasks = routing.direct_tasks
        self.rows: list = []
        self.roots: list | None = None   # at-least-once: each buffered row's root ids
        self.dests: list | None = None   # destinations chosen per tuple (None: by the batch)
        self.routed: list | None = None  # True: those are all of the row's destinations
        self.emitted = 0
        self.batches: list = []  # small record batches waiting to leave together (batch API)
        self.batch_rows = 0
        self.stamps: list | None = None  # event time: each buffered row's timestamp (or None)


class OutputCollector:
    """Collects the emitted tuples of one task and sends them to the stmgr as Arrow batches."""

    def __init__(self, plan: PlanView, task_id: int, context, send: Callable[[bytes | list], None],
                 batch_max_tuples: int, push: Callable[[], None] | None = None,
                 linger_secs: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.task_id = task_id
        self.component = plan.task_component[task_id]
        self._is_spout = plan.logical.components[self.component].is_spout
        self._send = send
        self._push = push or _nothing  # write what ``send`` queued now (a full batch leaves)
        self._max = batch_max_tuples
        self.linger = linger_secs
        self._clock = clock
        self.last_flush = -1e18  # when buffered tuples last left (size or turn)
        self._rng = np.random.default_rng()
        self._edge_pool = np.empty(0, dtype=np.uint64)  # random edge ids drawn ahead
        self._edge_next = 0
        decl = plan.logical.components[self.component]
        routing = grouping.stream_routing(plan, self.component, context)
        self._streams = {name: _StreamOut(name, stream.fields, routing[name])
                         for name, stream in decl.outputs.items()}
        # Streams whose rows are routed by the batch alone: the fast emit path's lookup.
        self._plain = {name: out for name, out in self._streams.items() if not out.per_tuple}
        self._outs = list(self._streams.values())
        # ``delegate_emit`` (the executor's general ``emit``, the fast paths' fallback) and
        # ``open_tree`` (a reliable spout's ``SpoutTrees.open``) are set by the executor before
        # any emit can call them, so they are typed as set: a None check on these per-tuple
        # paths would cost every tuple.
        self.delegate_emit: Callable[..., Any] = None  # type: ignore[assignment]
        self.open_tree: Callable[[Any, str], int] = None  # type: ignore[assignment]
        # topology.serializer.classname's serializer (None: pickle)
        self.serializer: IHeronSerializer | None = None
        self.sent = 0     # tuple copies handed to the stmgr connection (what it counts in)
        # event time: the timestamp of the input being processed (emit_plain_stamped's)
        self.current_ts: int | None = None
        # streams keeping timestamps whose rows are routed by the batch alone, no roots, no
        # batches waiting: emit_plain_stamped's lookup (as ``_plain`` is the plain paths')
        self._stamping: dict[str, _StreamOut] = {}

    # ---- emitting --------------------------------------------------------------------------
    def emit_plain(self, values, stream: str = _DEFAULT, anchors=None,
                   direct_task: int | None = None, need_task_ids: bool = False,
                   timestamp: int | None = None):
        """Emit at most once: ``Bolt.emit`` (same signature), bound as the bolt's ``emit``.

        Anchors mean nothing without trees. The common case is one dict lookup, a length check
        and one append.
        """
        out = self._plain.get(stream)
        if out is None or direct_task is not None or need_task_ids or len(values) != out.width \
                or out.dests is not None or out.roots is not None or timestamp is not None:
            return self.emit(values, stream, direct_task, need_task_ids, (), timestamp)
        rows = out.rows
        rows.append(values)
        if len(rows) >= self._max:
            self._flush(out)
            self._push()
        return None

    def emit_plain_stamped(self, values, stream: str = _DEFAULT, anchors=None,
                           direct_task: int | None = None, need_task_ids: bool = False,
                           timestamp: int | None = None):
        """Emit at most once with the input's timestamp (``current_ts``) unless given one.

        Bound as the bolt's ``emit`` while it processes timestamped input.
        """
        out = self._stamping.get(stream)
        if timestamp is None:
            timestamp = self.current_ts
        if out is None or direct_task is not None or need_task_ids or len(values) != out.width:
            return self.emit(values, stream, direct_task, need_task_ids, (), timestamp)
        rows = out.rows
        rows.append(values)
        out.stamps.append(timestamp)  # type: ignore[union-attr]  # kept while in _stamping
        if len(rows) >= self._max:
            self._flush(out)
            self._push()
        return None

    def spout_emit_plain(self, values, tup_id=None, stream: str = _DEFAULT,
                         direct_task: int | None = None, need_task_ids: bool = False,
                         timestamp: int | None = None, partition=None):
        """Emit at most once: ``Spout.emit`` (same signature), bound as the spout's ``emit``.

        A message id means nothing without trees; a timestamp goes to the executor's ``emit``,
        which moves the spout's watermark.
        """
        if timestamp is not None:
            return self.delegate_emit(values, stream, None, None, direct_task, need_task_ids,
                                      timestamp, partition)
        return self.emit_plain(values, stream, None, direct_task, need_task_ids)

    def emit(self, values, stream: str, direct_task: int | None, need_task_ids: bool,
             roots: tuple[int, ...] = (), timestamp: int | None = None):
        """Buffer one tuple in the trees ``roots``; return its target task ids when asked.

        ``timestamp``: its event time in ms, if it has one.
        """
        out = self._streams.get(stream)
        if out is None:
            msg = f"emit on undeclared stream {stream!r}"
            raise TopologyValueError(
                msg, component=self.component, value=stream, kind="stream",
                fix=f"declare it in outputs, or use one of {sorted(self._streams)}")
        if len(values) != out.width:
            msg = f"emit on stream {stream!r} got {len(values)} values for fields {list(out.fields)}"
            raise TopologyValueError(
                msg, component=self.component, value=values, kind="arity",
                fix="emit one value per declared field, in declared order")
        if direct_task is not None and direct_task not in out.direct_tasks:
            msg = f"direct_task on stream {stream!r} is not a task subscribed with Grouping.DIRECT"
            raise TopologyValueError(
                msg, component=self.component, value=direct_task, kind="direct",
                fix=f"use one of {sorted(out.direct_tasks)} (context.get_component_tasks)")
        if out.batches:
            self._flush_batches(out)
        result = None
        rows = out.rows
        if out.per_tuple or need_task_ids:
            chosen = self._choose(out, values, direct_task, need_task_ids)
            if out.dests is None:
                out.dests = [None] * len(rows)
                out.routed = [False] * len(rows)
                self._stamping.pop(out.name, None)
            out.dests.append(chosen)
            out.routed.append(need_task_ids)  # type: ignore[union-attr]  # set with dests
            result = chosen if need_task_ids else None
        elif out.dests is not None:
            out.dests.append(None)
            out.routed.append(False)  # type: ignore[union-attr]  # set with dests
        if roots:
            if out.roots is None:
                out.roots = [()] * len(rows)
                self._stamping.pop(out.name, None)
            out.roots.append(roots)
        elif out.roots is not None:
            out.roots.append(())
        if timestamp is not None:
            stamps = out.stamps
            if stamps is None:
                stamps = self._start_stamps(out)
            stamps.append(timestamp)
        elif out.stamps is not None:
            out.stamps.append(None)
        rows.append(values)
        if len(rows) >= self._max:
            self._flush(out)
            self._push()
        return result

    def _start_stamps(self, out: _StreamOut) -> list:
        """Start keeping timestamps on ``out``: the rows before have none; fast paths stop."""
        stamps = out.stamps = [None] * len(out.rows)
        self._plain.pop(out.name, None)
        if not out.per_tuple and out.dests is None and out.roots is None and not out.batches:
            self._stamping[out.name] = out
        return stamps

    def emit_anchored(self, values, stream: str = _DEFAULT, anchors=None,
                      direct_task: int | None = None, need_task_ids: bool = False,
                    timestamp: int | None = None):
        """Emit at least once: ``Bolt.emit`` (same signature), bound as the bolt's ``emit``.

        Bound unless the bolt auto-acks. The common case (one anchor, a stream routed by the
        batch alone) is one call; anything else goes through the executor's ``emit``.
        """
        out = self._plain.get(stream)
        try:
            (anchor,) = anchors  # one anchor, in a list or tuple: the common case
        except (TypeError, ValueError):
            anchor = None
        if anchor.__class__ is not HeronTuple or out is None or direct_task is not None \
                or need_task_ids or len(values) != out.width or out.dests is not None \
                or timestamp is not None or anchor[7] is not None:
            return self.delegate_emit(values, stream, None, anchors, direct_task, need_task_ids,
                                      timestamp)
        rows = out.rows
        roots = out.roots
        if roots is None:
            roots = out.roots = [()] * len(rows)
        roots.append(anchor[6])
        rows.append(values)
        if len(rows) >= self._max:
            self._flush(out)
            self._push()
        return None

    def spout_emit_tracked(self, values, tup_id=None, stream: str = _DEFAULT,
                           direct_task: int | None = None, need_task_ids: bool = False,
                           timestamp: int | None = None, partition=None):
        """Emit at least once: ``Spout.emit`` (same signature), bound as the spout's ``emit``.

        A message id opens a tree (``open_tree``, the spout's ``SpoutTrees.open``).
        """
        out = self._plain.get(stream)
        if tup_id is None or out is None or direct_task is not None or need_task_ids \
                or len(values) != out.width or out.dests is not None or timestamp is not None:
            return self.delegate_emit(values, stream, tup_id, None, direct_task, need_task_ids,
                                      timestamp, partition)
        rows = out.rows
        roots = out.roots
        if roots is None:
            roots = out.roots = [()] * len(rows)
        roots.append((self.open_tree(tup_id, stream),))
        rows.append(values)
        if len(rows) >= self._max:
            self._flush(out)
            self._push()
        return None

    def stream_fields(self, stream: str) -> tuple[str, ...]:
        """Return the declared fields of ``stream`` (raise if this task has no such stream)."""
        out = self._streams.get(stream)
        if out is None:
            msg = f"emit on undeclared stream {stream!r}"
            raise TopologyValueError(
                msg, component=self.component, value=stream, kind="stream",
                fix=f"declare it in outputs, or use one of {sorted(self._streams)}")
        return out.fields

    def emit_batch(self, batch: pa.RecordBatch, stream: str, roots=None) -> None:
        """Send a whole record batch (the batch API) after the stream's buffered rows.

        A big one now, a small one with the next flush, joined with the other small ones (so a
        bolt fed many small batches still sends few); ``roots``: each row's root ids as ``(flat
        uint64 array, count per row)``, or None outside tuple trees.
        """
        out = self._streams.get(stream)
        if out is None:
            msg = f"emit on undeclared stream {stream!r}"
            raise TopologyValueError(
                msg, component=self.component, value=stream, kind="stream",
                fix=f"declare it in outputs, or use one of {sorted(self._streams)}")
        if out.per_tuple:
            msg = f"stream {stream!r} has direct or custom subscribers, which choose per tuple"
            raise TopologyValueError(
                msg, component=self.component, value=stream, kind="batch",
                fix="emit its tuples one by one with emit(), or use another grouping")
        if out.rows:
            self._flush(out)
        rows = batch.num_rows
        if not rows:
            return
        if not out.batches and rows >= self._max:
            self._send_batch(out, batch, None, None, roots)
            self._push()
            return
        if not out.batches:  # per-tuple emits on this stream take emit(), which sends these first
            self._plain.pop(out.name, None)
        out.batches.append((batch, roots))
        out.batch_rows += rows
        if out.batch_rows >= self._max:
            self._flush_batches(out)
            self._push()

    def _choose(self, out: _StreamOut, values, direct_task, every: bool) -> list[int]:
        """Return one tuple's destinations.

        Under every subscription when ``every`` (the caller asked for task ids), else under the
        per-tuple ones (direct, custom).
        """
        chosen: list[int] = []
        for target in (out.routing.targets if every else out.routing.per_tuple):
            targets = target.choose(values, direct_task)
            if target.grouping == GroupingType.CUSTOM:
                bad = [t for t in targets if t not in target.task_set]
                if bad:
                    msg = f"custom grouping on stream {out.name!r} chose unknown task(s)"
                    raise TopologyValueError(
                        msg, component=self.component, value=bad, kind="custom",
                        fix=f"choose_tasks must return tasks from {sorted(target.task_set)}")
            chosen.extend(targets)
        return chosen

    # ---- flushing --------------------------------------------------------------------------
    def due(self) -> float | None:
        """When the buffered tuples must leave at the latest (None: nothing is buffered)."""
        for out in self._outs:
            if out.rows or out.batches:
                return self.last_flush + self.linger
        return None

    @property
    def buffered(self) -> int:
        """Tuples waiting in the buffers, all streams."""
        outs = self._outs
        if len(outs) == 1:  # the usual: read many times a turn (a spout's slice, its gate)
            out = outs[0]
            return len(out.rows) + out.batch_rows
        return sum(len(out.rows) + out.batch_rows for out in outs)

    def flush_all(self, acks: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Send every buffered tuple now.

        A bolt passes ``acks``, the (root, edge id) pairs of the inputs it acked this turn:
        they go in one XOR update with the edges of the anchored tuples flushed here, ahead of
        the frames carrying those tuples, so no tree ever sees an input's ack without the
        creation of the children emitted before it (its checksum cannot reach zero early).
        """
        if acks is None:
            for out in self._outs:
                if out.rows:
                    self._flush(out)
                if out.batches:
                    self._flush_batches(out)
            return
        gathered: tuple[list, list, list] = ([acks[0]], [acks[1]], [])
        for out in self._outs:
            if out.rows:
                self._flush(out, gathered)
            if out.batches:
                self._flush_batches(out, gathered)
        edge_roots, edge_values, frames_out = gathered
        roots, values = tree_ids.xor_runs_packed(edge_roots, edge_values)
        if roots:
            message = stmgr_pb2.InstanceToStmgr()
            message.edges.roots, message.edges.values = roots, values
            self._send(frames.control_frame(message))
        for frame in frames_out:
            self._send(frame)

    def _edge_ids(self, count: int) -> np.ndarray:
        """Return ``count`` fresh random edge ids (uint64, never 0), each used once.

        Drawn ahead in a pool of ``_EDGE_POOL`` (one generator call per pool instead of one per
        flush); a big request is drawn by itself.
        """
        if count > _EDGE_POOL // 4:
            return self._rng.integers(1, _U64_MAX, size=count, dtype=np.uint64, endpoint=True)
        start = self._edge_next
        if start + count > self._edge_pool.size:
            self._edge_pool = self._rng.integers(1, _U64_MAX, size=_EDGE_POOL, dtype=np.uint64,
                                                 endpoint=True)
            start = 0
        self._edge_next = start + count
        return self._edge_pool[start:start + count]

    def emitted(self) -> dict[str, int]:
        """Tuples emitted so far, per stream."""
        return {name: out.emitted for name, out in self._streams.items()}

    def _flush(self, out: _StreamOut, gathered: tuple | None = None) -> None:
        self.last_flush = self._clock()
        rows, dests, routed, roots = out.rows, out.dests, out.routed, out.roots
        out.rows, out.dests, out.routed, out.roots = [], None, None, None
        stamps = out.stamps
        if stamps is not None:
            out.stamps = None
            self._stamping.pop(out.name, None)
            if not out.per_tuple and not out.batches:
                self._plain[out.name] = out
        parts = None
        sorter = out.routing.sorter
        if sorter is not None and dests is None:  # fields grouping: rows ordered by task here
            order, parts = sorter.row_order(rows)
            if order is not None:
                rows = [rows[i] for i in order]
                if roots is not None:
                    roots = [roots[i] for i in order]
                if stamps is not None:
                    stamps = [stamps[i] for i in order]
        packed = None
        one_each = False
        if roots is not None:
            count = len(roots)
            # Every row in exactly one tree (the usual case): one flat array, no counts pass.
            one_each = set(map(len, roots)) == _ONE
            packed = (np.fromiter(chain.from_iterable(roots), dtype=np.uint64, count=count),
                      _ONES[:count] if count <= _ONES.size else np.ones(count, dtype=np.int32)) \
                if one_each else (np.fromiter(chain.from_iterable(roots), dtype=np.uint64),
                                  np.fromiter(map(len, roots), dtype=np.int32, count=count))
        batch, schema = tuple_batch.build_rows(out.fields, rows, self.serializer)
        if stamps is not None:  # not the fields' schema any more: no cached layout
            batch, schema = tuple_batch.with_timestamps(batch, stamps), None
        # A spout's per-tuple rows each open a tree of their own: their roots are distinct.
        self._send_batch(out, batch, dests, routed, packed, gathered, parts,
                         one_each, one_each and self._is_spout, schema)

    def _flush_batches(self, out: _StreamOut, gathered: tuple | None = None) -> None:
        """Send the stream's waiting small batches, joined into one where their columns agree."""
        pending, out.batches, out.batch_rows = out.batches, [], 0
        if not out.per_tuple:
            self._plain[out.name] = out
        self.last_flush = self._clock()
        try:
            joined = [(pa.concat_batches([b for b, _ in pending]), _joined_roots(pending))] \
                if len(pending) > 1 else pending
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # columns of other types: one by one
            joined = pending
        for batch, roots in joined:
            self._send_batch(out, batch, None, None, roots, gathered)

    def _send_batch(self, out: _StreamOut, batch: pa.RecordBatch, dests, routed, roots,
                    gathered: tuple | None = None, parts: dict | None = None,
                    one_each: bool | None = None, distinct: bool = False,
                    schema: pa.Schema | None = None) -> None:
        """Partition ``batch`` and send its parts (``parts``: given when ordered already).

        ``one_each``: whether every row is in exactly one tree (None: find out); ``distinct``:
        besides, no two rows share a tree (a spout's per-tuple emits); ``schema``: the one
        object for ``batch``'s schema (``tuple_batch.build_rows``), if known.
        """
        count = batch.num_rows
        out.emitted += count
        # each part's schema, for encode_parts (None: serialized for each frame)
        layout: tuple[pa.Schema, bool | None] | None = None if schema is None else (schema, None)
        if roots is not None:  # the roots column goes first: partitioning may reorder rows
            if one_each is None:
                one_each = tuple_batch.one_root_each(*roots)
            if schema is not None:
                layout = (schema, bool(one_each))
            batch = tuple_batch.with_roots(batch, roots[0], roots[1], one_each)
        if parts is None:
            rooted = batch
            batch, parts = out.routing.partition(batch, dests, routed)
            one_each = one_each and batch is rooted  # rows not reordered: roots[0] is theirs
        stream, task_id = out.name_bytes, self.task_id
        if roots is None:
            encoded_whole = None
            for task, rows in parts.items():
                if rows is None:  # all and lowest groupings: encode once for every task
                    if encoded_whole is None:
                        encoded_whole = tuple_batch.encode_parts(batch, layout)
                    payload, size = encoded_whole, count
                else:
                    part = grouping.take(batch, rows)
                    payload, size = tuple_batch.encode_parts(part, layout), part.num_rows
                self.sent += size
                self._send(frames.data_frame_parts(frames.TUPLES, task_id, task, size, stream,
                                                   payload))
            return
        frames_out, edge_roots, edge_values = [], [], []
        pieces = [(task, rows, grouping.take(batch, rows)) for task, rows in parts.items()]
        # tree members: a fresh edge id per copy, drawn for all copies at once
        edge_all = self._edge_ids(sum(p.num_rows for *_, p in pieces))
        start = 0
        for task, rows, part in pieces:
            size = part.num_rows
            edge_ids = edge_all[start:start + size]
            start += size
            if one_each:
                edge_roots.append(roots[0] if rows is None else roots[0][rows])
                edge_values.append(edge_ids)
            else:
                flat, counts = tuple_batch.root_lists(part)
                edge_roots.append(flat)
                edge_values.append(edge_ids if counts is None else np.repeat(edge_ids, counts))
            self.sent += size
            frames_out.append(frames.data_frame_parts(
                frames.TUPLES, task_id, task, size, stream,
                tuple_batch.encode_parts(tuple_batch.with_keys(part, edge_ids), layout)))
        if gathered is not None and not self._is_spout:  # sent by flush_all, with the acks
            gathered[0].extend(edge_roots)
            gathered[1].extend(edge_values)
            gathered[2].extend(frames_out)
            return
        if len(edge_roots) == 1 and distinct:  # no runs to combine: each root once
            roots_out, values_out = tree_ids.pack(edge_roots[0]), tree_ids.pack(edge_values[0])
        else:
            roots_out, values_out = tree_ids.xor_runs_packed(edge_roots, edge_values)
        # Sub-messages are filled in place: nested constructors copy each one.
        message = stmgr_pb2.InstanceToStmgr()
        if self._is_spout:  # the edges of new trees: announced before the copies leave
            opened = message.opened
            opened.roots = tree_ids.pack(
                roots[0] if distinct else tree_ids.distinct_runs(roots[0]))
            edges = opened.edges
        elif edge_roots:
            edges = message.edges
        else:
            edges = None
        if edges is not None:
            edges.roots, edges.values = roots_out, values_out
            self._send(frames.control_frame(message))
        for frame in frames_out:
            self._send(frame)

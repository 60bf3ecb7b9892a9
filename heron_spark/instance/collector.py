"""Output collector: ``emit`` appends to a per-stream buffer; batches leave on size or timer.

Runs on the task-execution thread only. Per tuple, ``emit`` does a length check and one list
append (plus a destination list when the stream has direct/custom subscribers, or when the
caller asks for task ids); Arrow encoding and the send happen once per batch.
"""

from __future__ import annotations

import random
import time
from typing import Callable

from heron_spark.errors import TopologyValueError
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import frames, tuple_batch


class _Subscriber:
    """One subscribing bolt of a stream, as the emitter needs it (for chosen destinations)."""

    def __init__(self, grouping: int, tasks: list[int], key_indices: list[int], chooser) -> None:
        self.grouping = grouping
        self.tasks = tasks
        self.task_set = frozenset(tasks)
        self.key_indices = key_indices
        self.chooser = chooser

    def destinations(self, values, direct_task: int | None) -> list[int]:
        """Return this subscriber's targets for one tuple (used when the emitter routes)."""
        if self.grouping == GroupingType.DIRECT:
            return [direct_task] if direct_task in self.task_set else []
        if self.grouping == GroupingType.CUSTOM:
            return list(self.chooser.choose_tasks(values))
        if self.grouping == GroupingType.ALL:
            return list(self.tasks)
        if self.grouping == GroupingType.LOWEST:
            return [self.tasks[0]]
        if self.grouping == GroupingType.FIELDS:
            digest = tuple_batch.key_hash(
                [tuple_batch.canonical_keys([values[i]]) for i in self.key_indices])[0]
            return [self.tasks[int(digest % len(self.tasks))]]
        return [random.choice(self.tasks)]  # SHUFFLE, NONE


class _StreamOut:
    """Buffer and routing facts of one output stream."""

    def __init__(self, name: str, fields: tuple[str, ...], subscribers: list[_Subscriber]) -> None:
        self.name = name
        self.fields = fields
        self.width = len(fields)
        self.subscribers = subscribers
        self.chosen = [s for s in subscribers if s.grouping in (GroupingType.DIRECT, GroupingType.CUSTOM)]
        self.direct_tasks = frozenset(t for s in subscribers if s.grouping == GroupingType.DIRECT
                                      for t in s.tasks)
        self.rows: list = []
        self.dests: list | None = None
        self.routed: list | None = None
        self.root_ids: list | None = None     # flat root ids of the buffered rows
        self.root_counts: list | None = None  # how many of them each row has
        self.first_at = 0.0
        self.emitted = 0


class OutputCollector:
    """Collects emitted tuples of one task and sends them to the stmgr as Arrow batches."""

    def __init__(self, plan: PlanView, task_id: int, context, send: Callable[[bytes], None],
                 batch_max_tuples: int, flush_interval_secs: float) -> None:
        self.task_id = task_id
        self.component = plan.task_component[task_id]
        self._send = send
        self._max = batch_max_tuples
        self._interval = flush_interval_secs
        self._streams: dict[str, _StreamOut] = {}
        decl = plan.logical.components[self.component]
        for name, stream in decl.outputs.items():
            subs = []
            for bolt, sub in plan.logical.subscribers(self.component, name):
                tasks = plan.component_tasks[bolt]
                chooser = None
                if sub.grouping == GroupingType.CUSTOM:
                    from heron_spark import _pickling

                    chooser = _pickling.loads(sub.custom)
                    chooser.prepare(context, self.component, name, list(tasks))
                keys = [stream.fields.index(f) for f in sub.fields]
                subs.append(_Subscriber(sub.grouping, tasks, keys, chooser))
            self._streams[name] = _StreamOut(name, stream.fields, subs)
        self.pending = 0  # tuples buffered, all streams
        self.sent = 0     # tuples handed to the stmgr connection, all streams

    def emit(self, values, stream: str, direct_task: int | None, need_task_ids: bool,
             roots: tuple[int, ...] = ()):
        """Buffer one tuple in the trees ``roots``; return its target task ids when asked."""
        out = self._streams.get(stream)
        if out is None:
            raise TopologyValueError(f"emit on undeclared stream {stream!r}",
                                     component=self.component, value=stream, kind="stream",
                                     fix=f"declare it in outputs, or use one of {sorted(self._streams)}")
        if len(values) != out.width:
            raise TopologyValueError(
                f"emit on stream {stream!r} got {len(values)} values for fields {list(out.fields)}",
                component=self.component, value=values, kind="arity",
                fix="emit one value per declared field, in declared order")
        if direct_task is not None and direct_task not in out.direct_tasks:
            raise TopologyValueError(
                f"direct_task on stream {stream!r} is not a task subscribed with Grouping.DIRECT",
                component=self.component, value=direct_task, kind="direct",
                fix=f"use one of {sorted(out.direct_tasks)} (context.get_component_tasks)")
        result = None
        if out.chosen or need_task_ids:
            subs = out.subscribers if need_task_ids else out.chosen
            chosen = self._choose(out, subs, values, direct_task)
            if out.dests is None:
                out.dests = [None] * len(out.rows)
                out.routed = [False] * len(out.rows)
            out.dests.append(chosen)
            out.routed.append(need_task_ids)
            result = chosen if need_task_ids else None
        elif out.dests is not None:
            out.dests.append(None)
            out.routed.append(False)
        if roots:
            if out.root_counts is None:
                out.root_ids, out.root_counts = [], [0] * len(out.rows)
            out.root_ids.extend(roots)
            out.root_counts.append(len(roots))
        elif out.root_counts is not None:
            out.root_counts.append(0)
        if not out.rows:
            out.first_at = time.monotonic()
        out.rows.append(values)
        self.pending += 1
        if len(out.rows) >= self._max:
            self._flush(out)
        return result

    def _choose(self, out: _StreamOut, subs: list[_Subscriber], values, direct_task) -> list[int]:
        chosen: list[int] = []
        for sub in subs:
            targets = sub.destinations(values, direct_task)
            if sub.grouping == GroupingType.CUSTOM:
                bad = [t for t in targets if t not in sub.task_set]
                if bad:
                    raise TopologyValueError(
                        f"custom grouping on stream {out.name!r} chose unknown task(s)",
                        component=self.component, value=bad, kind="custom",
                        fix=f"choose_tasks must return tasks from {sorted(sub.task_set)}")
            chosen.extend(targets)
        return chosen

    def flush_due(self, now: float) -> float | None:
        """Flush streams whose oldest tuple waited the flush interval; return next deadline."""
        deadline = None
        for out in self._streams.values():
            if out.rows:
                due = out.first_at + self._interval
                if due <= now:
                    self._flush(out)
                elif deadline is None or due < deadline:
                    deadline = due
        return deadline

    def flush_all(self) -> None:
        """Send every buffered tuple now."""
        for out in self._streams.values():
            if out.rows:
                self._flush(out)

    def emitted(self) -> dict[str, int]:
        """Tuples emitted so far, per stream."""
        return {name: out.emitted for name, out in self._streams.items()}

    def _flush(self, out: _StreamOut) -> None:
        roots = None if out.root_counts is None else (out.root_ids, out.root_counts)
        payload = tuple_batch.encode(out.fields, out.rows, out.dests, out.routed, roots)
        header = stmgr_pb2.DataHeader(kind=stmgr_pb2.TUPLES, src_task=self.task_id, stream=out.name)
        count = len(out.rows)
        out.rows, out.dests, out.routed = [], None, None
        out.root_ids = out.root_counts = None
        self.pending -= count
        self.sent += count
        out.emitted += count
        self._send(frames.data_frame(header, payload))

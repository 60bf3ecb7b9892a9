"""Vectorised routing: which rows of a tuple batch go to which destination task.

Routing is per batch with NumPy: shuffle is a round-robin offset, fields grouping hashes the
key columns (``tuple_batch.key_hash``) modulo the subscriber's task count, all/lowest are
constant, and direct/custom rows carry destinations the emitter chose (``__hs_dests``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from heron_spark.plan.view import PlanView
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import tuple_batch

_CHOSEN = (GroupingType.DIRECT, GroupingType.CUSTOM)


class _Target:
    """One subscriber of one stream."""

    def __init__(self, grouping: int, tasks: list[int], key_indices: list[int]) -> None:
        self.grouping = grouping
        self.tasks = np.asarray(tasks, dtype=np.int64)
        self.task_set = frozenset(tasks)
        self.key_indices = key_indices
        self.offset = 0  # shuffle round-robin position


class Router:
    """Routes batches of every (component, stream) of a plan. Used by one thread only."""

    def __init__(self, plan: PlanView) -> None:
        self._plan = plan
        self._targets: dict[tuple[str, str], list[_Target]] = {}
        for name, decl in plan.logical.components.items():
            for stream, schema in decl.outputs.items():
                self._targets[(name, stream)] = [
                    _Target(sub.grouping, plan.component_tasks[bolt],
                            [schema.fields.index(f) for f in sub.fields])
                    for bolt, sub in plan.logical.subscribers(name, stream)]

    def route(self, src_task: int, stream: str, batch: pa.RecordBatch) -> dict[int, np.ndarray | None]:
        """Return {destination task: row indices}, None meaning every row in order."""
        component = self._plan.task_component[src_task]
        targets = self._targets[(component, stream)]
        rows = batch.num_rows
        if not targets or rows == 0:
            return {}
        names = batch.schema.names
        dests = batch.column(tuple_batch.DESTS_COLUMN) if tuple_batch.DESTS_COLUMN in names else None
        routed = None
        if tuple_batch.ROUTED_COLUMN in names:
            mask = batch.column(tuple_batch.ROUTED_COLUMN).to_numpy(zero_copy_only=False)
            routed = mask.astype(bool) if mask.any() else None
        dest_parts: list[np.ndarray] = []
        row_parts: list[np.ndarray] = []
        whole: list[int] = []  # tasks that get every row
        all_rows = np.arange(rows, dtype=np.int64)
        for target in targets:
            if target.grouping in _CHOSEN:
                continue  # from the chosen-destinations column below
            selected = all_rows if routed is None else all_rows[~routed]
            if selected.size == 0:
                continue
            if target.grouping == GroupingType.ALL:
                if routed is None:
                    whole.extend(int(t) for t in target.tasks)
                else:
                    for task in target.tasks:
                        dest_parts.append(np.full(selected.size, task, dtype=np.int64))
                        row_parts.append(selected)
                continue
            if target.grouping == GroupingType.LOWEST:
                if routed is None:
                    whole.append(int(target.tasks[0]))
                    continue
                chosen = np.full(selected.size, target.tasks[0], dtype=np.int64)
            elif target.grouping == GroupingType.FIELDS:
                keys = tuple_batch.key_columns(batch, target.key_indices)
                digest = tuple_batch.key_hash(keys)
                if routed is not None:
                    digest = digest[selected]
                chosen = target.tasks[(digest % np.uint64(target.tasks.size)).astype(np.int64)]
            else:  # SHUFFLE, NONE
                k = target.tasks.size
                chosen = target.tasks[(target.offset + np.arange(selected.size)) % k]
                target.offset = (target.offset + selected.size) % k
            dest_parts.append(chosen)
            row_parts.append(selected)
        if dests is not None:
            self._chosen_destinations(dests, targets, dest_parts, row_parts)
        return _group(whole, dest_parts, row_parts)

    @staticmethod
    def _chosen_destinations(dests: pa.Array, targets: list[_Target], dest_parts: list,
                             row_parts: list) -> None:
        offsets = dests.offsets.to_numpy()
        flat = dests.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        if flat.size == 0:
            return
        row_of = np.repeat(np.arange(len(dests), dtype=np.int64), np.diff(offsets))
        dest_parts.append(flat)
        row_parts.append(row_of)


def _group(whole: list[int], dest_parts: list[np.ndarray],
           row_parts: list[np.ndarray]) -> dict[int, np.ndarray | None]:
    # A bolt subscribes to a stream once, so a task is either in ``whole`` or in the parts.
    out: dict[int, np.ndarray | None] = {task: None for task in whole}
    if not dest_parts:
        return out
    dest = np.concatenate(dest_parts)
    rows = np.concatenate(row_parts)
    order = np.argsort(dest, kind="stable")
    dest, rows = dest[order], rows[order]
    bounds = np.flatnonzero(np.diff(dest)) + 1
    for chunk_dest, chunk_rows in zip(np.split(dest, bounds), np.split(rows, bounds)):
        out[int(chunk_dest[0])] = np.sort(chunk_rows, kind="stable")  # keep emission order
    return out

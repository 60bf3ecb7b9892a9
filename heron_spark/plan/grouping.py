"""Stream groupings: which task(s) each emitted tuple goes to. The only place these rules live.

Routing happens where a tuple is created: the emitting instance partitions each output batch
per destination task, and its stmgr relays the resulting frames without decoding them. Two
entry points share the rules:

- ``Target.choose(values, direct_task)``: one tuple's destinations under one subscription,
  for what must be decided per tuple (direct and custom groupings, ``need_task_ids``);
- ``StreamRouting.partition(batch, chosen, routed)``: a whole Arrow batch at once, with NumPy.
  Shuffle sends a small batch whole to the task that got the fewest rows so far, and splits a
  big one into contiguous slices, one per task (zero-copy): balanced to within one small
  batch. Fields grouping hashes the key columns (``tuple_batch.key_hash``, through each
  value's ``str`` form, so equal keys meet in one task whatever process or column type they
  travel in) and sends a key to the task owning its key group (``contract.key_groups``:
  group = hash % ``topology.max.parallelism``, task = group * tasks // max parallelism, so
  a stateful task's keyed state is the key groups it owns); all and lowest are constant;
  rows whose destinations were chosen per tuple go exactly there. A fields grouping on one
  string field remembers each key's task (``KeySlots``), so a key of a small batch seen
  before costs one dict lookup instead of hashing its bytes; a big batch is hashed whole in
  NumPy (``hashing``) and, when it is the stream's only grouping, reordered by task with one
  ``take`` so that each task gets a zero-copy slice (``Target.sorted_partition``).
  An emitter that holds its tuples as Python rows orders them by destination before it
  builds the batch (``Target.row_order``), so a per-tuple instance never
  takes rows out of an Arrow batch (``RecordBatch.take`` imports ``pyarrow.compute``, a large
  module).
"""

from __future__ import annotations

import random
from itertools import chain
from typing import Sequence

import numpy as np
import pyarrow as pa

from heron_spark.api.serializer import load_serializer_named
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.contract import key_groups
from heron_spark.plan.view import PlanView
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import arrow_numpy, hashing, tuple_batch

# The grouping types as plain ints: each ``GroupingType.X`` is a Python-level attribute lookup
# on protobuf's enum wrapper, which the per-batch paths below would pay several times a call.
_ALL, _LOWEST, _FIELDS, _DIRECT, _CUSTOM = (
    GroupingType.ALL, GroupingType.LOWEST, GroupingType.FIELDS, GroupingType.DIRECT,
    GroupingType.CUSTOM)
CHOSEN_PER_TUPLE = (_DIRECT, _CUSTOM)
_KEY_SLOTS_MAX = 1 << 16  # keys remembered per fields grouping (then forgotten at once)
_FEW_KEYS = 8             # new keys hashed in plain Python; more take one NumPy pass
SHUFFLE_SLICE_ROWS = 32   # shuffle slices batches of at least this many rows per task
SMALL_BATCH_ROWS = 512    # an Arrow batch up to this size is hashed through KeySlots
_PASS_PER_TASK_MAX = 8    # ordering rows by task: a pass per task for up to this many, else a sort
_ROW_ORDER_PYTHON_MAX = 256  # Python rows ordered by task in plain Python up to this many
_STR_ONLY = {str}
_DEFAULT_MAX_PARALLELISM = TopologyConfig.max_parallelism


class KeySlots:
    """The remembered task slot of each key of a one-field fields grouping.

    The task slot (index into a target's tasks) of each key of a one-field fields grouping,
    remembered: the same answer as hashing (``tuple_batch.key_hash``), without the hashing for
    keys seen before. One thread only.
    """

    def __init__(self, task_count: int, max_parallelism: int) -> None:
        self._count = task_count
        self._max_parallelism = max_parallelism
        self._owners = key_groups.owners(task_count, max_parallelism)
        self._known: dict = {}

    def slots(self, keys: list) -> np.ndarray:
        """Return the slot of each of ``keys`` (the Python values of a string column)."""
        return np.array(self.slot_list(keys), dtype=np.int64)

    def slot_list(self, keys: list) -> list[int]:
        """Return ``slots`` as a list of ints (no NumPy call: for a few rows)."""
        get = self._known.get
        slots: list = [get(key) for key in keys]
        if None in slots:
            missing = list(dict.fromkeys(k for k, slot in zip(keys, slots) if slot is None))
            if len(self._known) + len(missing) > _KEY_SLOTS_MAX:
                self._known.clear()
            if len(missing) <= _FEW_KEYS:
                owners, most = self._owners, self._max_parallelism
                self._known.update((key, owners[hashing.text_hash(key_groups.value_bytes(key)) % most])
                                   for key in missing)
            else:
                digest = tuple_batch.key_hash([tuple_batch.canonical_keys(missing)], dedupe=False)
                slot = task_slots(digest, self._count, self._max_parallelism)
                self._known.update(zip(missing, slot.tolist()))
            known = self._known
            slots = [known[key] for key in keys]
        return slots


class Target:
    """One subscribing bolt of one stream: its grouping and tasks."""

    def __init__(self, grouping: int, tasks: Sequence[int], key_indices: Sequence[int],
                 chooser=None, max_parallelism: int = _DEFAULT_MAX_PARALLELISM) -> None:
        self.grouping = grouping
        self.task_list = list(tasks)
        self.tasks = np.asarray(tasks, dtype=np.int64)
        self.task_set = frozenset(tasks)
        self.key_indices = list(key_indices)
        self.chooser = chooser  # custom grouping: the user's CustomGrouping, prepared
        self.offset = random.randrange(max(1, len(self.task_list)))  # shuffle: next task first
        self.received = [0] * len(self.task_list)  # shuffle: rows per task
        self.max_parallelism = max_parallelism  # topology.max.parallelism: the key groups
        self.key_slots = KeySlots(len(self.task_list), max_parallelism) \
            if grouping == _FIELDS and len(self.key_indices) == 1 else None

    def choose(self, values, direct_task: int | None) -> list[int]:
        """Return this subscription's destinations for one tuple of ``values``."""
        if self.grouping == _DIRECT:
            return [direct_task] if direct_task in self.task_set else []
        if self.grouping == _CUSTOM:
            return list(self.chooser.choose_tasks(values))
        if self.grouping == _ALL:
            return list(self.task_list)
        if self.grouping == _LOWEST:
            return [self.task_list[0]]
        if self.grouping == _FIELDS:
            digest = tuple_batch.key_hash(
                [tuple_batch.canonical_keys([values[i]]) for i in self.key_indices])[0]
            group = key_groups.key_groups(int(digest), self.max_parallelism)
            return [self.task_list[key_groups.task_of_key_group(
                group, len(self.task_list), self.max_parallelism)]]
        return [random.choice(self.task_list)]  # SHUFFLE, NONE

    def partition(self, batch: pa.RecordBatch, selected: np.ndarray | None) -> dict:
        """Return {task: rows} for the rows ``selected`` (None: all) of ``batch``."""
        if self.grouping == _ALL:
            return {task: selected for task in self.task_list}
        if self.grouping == _LOWEST:
            return {self.task_list[0]: selected}
        if self.grouping == _FIELDS:
            slot = self.batch_slots(batch)
            chosen = self.tasks[slot if selected is None else slot[selected]]
            rows = np.arange(batch.num_rows) if selected is None else selected
            return split_by_task(chosen, rows)
        return self._shuffle(batch.num_rows if selected is None else selected.size, selected)

    def sorted_partition(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, dict]:
        """Fields grouping of a whole batch.

        Reorder it by destination (one ``take``, stable so each task's rows keep their order)
        and give each task a zero-copy slice.
        """
        keys = None
        if self.key_slots is not None and batch.num_rows <= SMALL_BATCH_ROWS:
            column = batch.column(self.key_indices[0])
            if pa.types.is_string(column.type) and column.null_count == 0:
                keys = column.to_pylist()  # few rows: remembered keys beat a NumPy hash pass
        if keys is not None and self.key_slots is not None:
            slot = self.key_slots.slots(keys)
        else:
            slot = self.batch_slots(batch)
        order, parts = self.slot_order(slot)
        return (batch if order is None else _take_rows(batch, order)), parts

    def batch_slots(self, batch: pa.RecordBatch) -> np.ndarray:
        """Return the task slot of every row of ``batch`` (fields grouping), with NumPy.

        A lone dictionary-typed key column takes each dictionary value's slot once, then one
        gather by the indices: the slots the rows' hashes give.
        """
        columns = tuple_batch.key_columns(batch, self.key_indices, load_serializer_named)
        if len(columns) == 1 and pa.types.is_dictionary(columns[0].type):
            column = columns[0]
            by_value = task_slots(hashing.string_hash(column.dictionary, dedupe=False),
                                  self.tasks.size, self.max_parallelism)
            return by_value[arrow_numpy.numbers(column.indices, zero_copy_only=False)]
        return task_slots(tuple_batch.key_hash(columns), self.tasks.size, self.max_parallelism)

    def row_slots(self, rows: Sequence[Sequence]) -> np.ndarray:
        """Return the task slot of each of ``rows`` (Python tuples of values): fields grouping.

        The same slots the Arrow path gives (each key through its ``str`` form), read from the
        Python values before any Arrow batch exists, and without ``pyarrow.compute``.
        """
        if self.key_slots is not None:
            return self.key_slots.slots(self._row_keys(rows))
        digest = tuple_batch.key_hash(
            [tuple_batch.canonical_keys([row[i] for row in rows]) for i in self.key_indices],
            dedupe=False)
        return task_slots(digest, self.tasks.size, self.max_parallelism).astype(np.int64)

    def row_order(self, rows: Sequence[Sequence]) -> tuple[list[int] | None, dict]:
        """Return the order that groups ``rows`` (Python tuples of values) by task, and the slices.

        As ``slot_order(row_slots(rows))``, the order as a list. A one-field grouping orders up
        to ``_ROW_ORDER_PYTHON_MAX`` rows with plain Python, where the NumPy calls' fixed cost
        dominates.
        """
        if self.key_slots is None or len(rows) > _ROW_ORDER_PYTHON_MAX:
            arranged, by_task = self.slot_order(self.row_slots(rows))
            return (None if arranged is None else arranged.tolist()), by_task
        slots = self.key_slots.slot_list(self._row_keys(rows))
        tasks = self.task_list
        if len(set(slots)) == 1:
            return None, {tasks[slots[0]]: None}
        buckets: list[list[int]] = [[] for _ in tasks]
        deposit = [bucket.append for bucket in buckets]
        for row, slot in enumerate(slots):
            deposit[slot](row)
        return list(chain.from_iterable(buckets)), _task_slices(zip(tasks, map(len, buckets)))

    def _row_keys(self, rows: Sequence[Sequence]) -> list:
        """Return the key of each of ``rows`` (one-field grouping) as ``KeySlots`` knows it."""
        index = self.key_indices[0]
        keys = [row[index] for row in rows]
        if set(map(type, keys)) != _STR_ONLY:  # remembered by text: 1, 1.0, True differ
            keys = [key if type(key) is str else str(key) for key in keys]
        return keys

    def slot_order(self, slot: np.ndarray) -> tuple[np.ndarray | None, dict]:
        """Return the row order that groups rows by ``slot``, stably, and each task's slice.

        The order is None when every row goes to one task (its slice is then None: all rows).
        """
        if self.tasks.size <= _PASS_PER_TASK_MAX:  # one pass per task beats a count and a sort
            rows = [np.flatnonzero(slot == i) for i in range(self.tasks.size)]
            counts = [r.size for r in rows]
            used = [i for i, count in enumerate(counts) if count]
            if len(used) == 1:
                return None, {self.task_list[used[0]]: None}
            order = np.concatenate([rows[i] for i in used])
        else:
            counts = np.bincount(slot, minlength=self.tasks.size).tolist()
            used = [i for i, count in enumerate(counts) if count]
            if len(used) == 1:
                return None, {self.task_list[used[0]]: None}
            if len(used) <= _PASS_PER_TASK_MAX:
                order = np.concatenate([np.flatnonzero(slot == i) for i in used])
            else:
                order = np.argsort(slot, kind="stable")
        return order, _task_slices((self.task_list[i], counts[i]) for i in used)

    def _shuffle(self, count: int, selected: np.ndarray | None) -> dict:
        """Shuffle grouping of a whole batch.

        A small batch goes whole to the task that got the fewest rows so far (one frame instead
        of k small ones); a big one is sliced evenly, the tasks short of a row last time first.
        """
        k = len(self.task_list)
        if count < SHUFFLE_SLICE_ROWS * k:
            received = self.received  # ties go round, from a random start
            index = min(chain(range(self.offset, k), range(self.offset)), key=received.__getitem__)
            received[index] += count
            self.offset = (index + 1) % k
            return {self.task_list[index]: selected} if count else {}
        out: dict = {}
        base, extra = divmod(count, k)
        start = 0
        for i in range(k):
            size = base + (1 if i < extra else 0)
            if size == 0:
                break
            task = self.task_list[(self.offset + i) % k]
            out[task] = (slice(start, start + size) if selected is None
                         else selected[start:start + size])
            start += size
            self.received[(self.offset + i) % k] += size
        self.offset = (self.offset + extra) % k  # the tasks short this time go first next
        return out


class StreamRouting:
    """How one output stream of one component is routed. Used by one thread only."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self.per_tuple = [t for t in targets if t.grouping in CHOSEN_PER_TUPLE]
        self.batched = [t for t in targets if t.grouping not in CHOSEN_PER_TUPLE]
        self.direct_tasks = frozenset(task for t in targets if t.grouping == _DIRECT
                                      for task in t.task_list)
        # The one fields grouping that reorders a batch by destination (``partition`` with
        # nothing chosen per tuple): an emitter holding Python rows orders them itself before
        # it builds the batch (``row_order``), instead of ``RecordBatch.take``.
        self.sorter = self.batched[0] if len(self.batched) == 1 \
            and self.batched[0].grouping == _FIELDS else None

    def partition(self, batch: pa.RecordBatch, chosen: list | None = None,
                  routed: list | None = None) -> tuple[pa.RecordBatch, dict]:
        """Return ``(batch', {destination task: rows of batch'})``.

        ``chosen[i]`` lists row i's destinations picked per tuple (or None); ``routed[i]`` is
        True when they are all of row i's destinations (the emitter asked for task ids), so the
        batched groupings skip that row. Rows come back in emission order for every task.
        ``batch'`` is ``batch``, or (one fields grouping, nothing chosen per tuple) ``batch``
        reordered by destination so that every task's rows are one zero-copy slice.
        """
        rows = batch.num_rows
        if rows == 0 or not self.targets:
            return batch, {}
        if chosen is None and self.sorter is not None:
            return self.sorter.sorted_partition(batch)
        selected = None
        if routed is not None and any(routed):
            selected = np.flatnonzero(~np.asarray(routed, dtype=bool))
        parts: dict = {}
        for target in self.batched:
            if selected is None or selected.size:
                parts.update(target.partition(batch, selected))
        if chosen is None:
            return batch, parts
        flat, row_of = [], []
        for row, dests in enumerate(chosen):
            if dests:
                flat.extend(dests)
                row_of.extend([row] * len(dests))
        if not flat:
            return batch, parts
        extra = split_by_task(np.asarray(flat, dtype=np.int64), np.asarray(row_of, dtype=np.int64))
        for task, more in extra.items():
            if task not in parts:
                parts[task] = more
            else:
                parts[task] = np.union1d(as_indices(parts[task], rows), more)  # sorted
        return batch, parts


def _task_slices(sizes) -> dict:
    """Return each task's slice of rows ordered by task, from (task, row count) pairs in order.

    Tasks with no rows get none.
    """
    parts, start = {}, 0
    for task, size in sizes:
        if size:
            parts[task] = slice(start, start + size)
            start += size
    return parts


def task_slots(digest: np.ndarray, count: int, max_parallelism: int) -> np.ndarray:
    """Return each row's task slot from its uint64 key hash, among ``count`` tasks.

    The slot of the task owning the key's group (``contract.key_groups``): the group (a mask
    when ``max_parallelism`` is a power of two), then one gather from the table of owners.
    The slots come as the smallest unsigned type that holds them, which the per-task passes
    read fastest.
    """
    table = _owner_table(count, max_parallelism)
    if max_parallelism & (max_parallelism - 1) == 0:
        group = digest & np.uint64(max_parallelism - 1)
    else:
        group = digest % np.uint64(max_parallelism)
    return table[group]


_OWNER_TABLES: dict[tuple[int, int], np.ndarray] = {}


def _owner_table(count: int, max_parallelism: int) -> np.ndarray:
    """Return ``key_groups.owners`` as a NumPy array (kept per (count, max parallelism))."""
    table = _OWNER_TABLES.get((count, max_parallelism))
    if table is None:
        table = np.array(key_groups.owners(count, max_parallelism),
                         dtype=np.uint8 if count <= 256 else np.intp)
        _OWNER_TABLES[count, max_parallelism] = table
    return table


def split_by_task(dests: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """Group row indices by destination task, keeping each task's rows in order."""
    if dests.size == 0:
        return {}
    order = np.argsort(dests, kind="stable")
    dests, rows = dests[order], rows[order]
    bounds = np.flatnonzero(np.diff(dests)) + 1
    return {int(d[0]): r for d, r in zip(np.split(dests, bounds), np.split(rows, bounds))}


def as_indices(rows, count: int) -> np.ndarray:
    """Return a partition's ``rows`` (None, slice or indices) as an index array."""
    if rows is None:
        return np.arange(count, dtype=np.int64)
    if isinstance(rows, slice):
        return np.arange(rows.start, rows.stop, dtype=np.int64)
    return rows


def take(batch: pa.RecordBatch, rows) -> pa.RecordBatch:
    """Return the rows of ``batch`` a partition names (zero-copy for None and slices)."""
    if rows is None:
        return batch
    if isinstance(rows, slice):
        return batch.slice(rows.start, rows.stop - rows.start)
    return _take_rows(batch, rows)


def _take_rows(batch: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
    """Return ``batch.take(rows)`` for row indices this module computed (all in range).

    Without Arrow's bounds check, most of ``take``'s cost (``pyarrow.compute``, ~9 MB, is
    imported on first use, as ``RecordBatch.take`` would).
    """
    import pyarrow.compute as pc

    return pc.take(batch, pa.array(rows), boundscheck=False)


def stream_routing(plan: PlanView, component: str, context=None) -> dict[str, StreamRouting]:
    """Return the routing of every output stream of ``component``.

    Custom groupings are unpickled and prepared with ``context``, as Heron does in the emitting
    task.
    """
    out = {}
    decl = plan.logical.components[component]
    for name, stream in decl.outputs.items():
        targets = []
        for bolt, sub in plan.logical.subscribers(component, name):
            tasks = plan.component_tasks[bolt]
            chooser = None
            if sub.grouping == _CUSTOM:
                from heron_spark import _pickling

                assert sub.custom is not None  # the planner keeps the pickle of every CUSTOM input
                chooser = _pickling.loads(sub.custom)
                chooser.prepare(context, component, name, list(tasks))
            targets.append(Target(sub.grouping, tasks,
                                  [stream.fields.index(f) for f in sub.fields], chooser,
                                  plan.logical.topology_config.max_parallelism))
        out[name] = StreamRouting(targets)
    return out

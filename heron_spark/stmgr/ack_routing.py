"""At-least-once in the stream manager: route XOR updates to each tree's owner, report trees.

Instances send XOR updates ahead of their frames (``acking``); the core collects a turn's
updates and hands them to ``AckRouter.apply_turn`` at the end of the turn. The router combines
them per tree, applies those of this stmgr's spout tasks to its ledger (``acking.XorLedger``)
and forwards the others, one ``XorBatch`` per owning peer. Completed and failed trees are
reported to their spout task in one ``TreesDone`` per turn; a spout without a cap on its open
trees hears at most every ``TREES_DONE_HOLD_SECS``. How long the ledger keeps a tree is its
spout's own message timeout (``tree_lifetimes``). No I/O: frames leave through the core's
transport. The stmgr's loop thread only.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.stmgr import acking
from heron_spark.stmgr.transport import StmgrTransport
from heron_spark.wire import frames, tree_ids

_ROOT_SHIFT = tree_ids.ROOT_TASK_SHIFT
SMALL_UPDATE_BYTES = 8 * tree_ids.SMALL_UPDATE_PAIRS  # packed uint64 roots of a small update
# A spout without topology.max.spout.pending gets its completed trees at most this often: each
# TreesDone wakes the spout for a turn, and nothing waits on an uncapped spout's acks but its
# own ack() calls. Capped spouts, and failed trees, get theirs at the end of the turn.
TREES_DONE_HOLD_SECS = 0.005
# A tree's checksum is kept this many times its spout's message timeout: the spout has failed
# it by then (its clock started before the stmgr's), so a later ack finds nothing to complete.
TREE_EXPIRY_TIMEOUTS = 2


def tree_lifetimes(plan: PlanView, spout_tasks: frozenset[int]) -> dict[int, float | None]:
    """Return how long the ledger keeps each spout task's trees (seconds; None: for ever).

    ``TREE_EXPIRY_TIMEOUTS`` times the message timeout of the task's component, its
    ``topology.message.timeout.secs`` override or the topology's: the same view the spout times
    its trees out by (``instance.spout_executor``). None when ``topology.enable.message.timeouts``
    is off: the spout then never fails a tree by time.
    """
    components = plan.logical.components
    lifetimes: dict[int, float | None] = {}
    for task in spout_tasks:
        timeout = components[plan.task_component[task]].topology_config.message_timeout_or_none_secs
        lifetimes[task] = None if timeout is None else TREE_EXPIRY_TIMEOUTS * timeout
    return lifetimes


class AckRouter:
    """See the module docstring. ``connected``: the core's set of connected local tasks."""

    def __init__(self, plan: PlanView, index: int, spout_tasks: frozenset[int],
                 connected: set[int], transport: StmgrTransport,
                 clock: Callable[[], float]) -> None:
        self.index = index
        self.io = transport
        self.clock = clock
        self.connected = connected
        self.spout_tasks = spout_tasks
        self.ledger = acking.XorLedger(None, clock, tree_lifetimes(plan, spout_tasks))
        self._owner = np.full(max(plan.task_component) + 1, -1, dtype=np.int64)
        for task, container in plan.task_container.items():
            self._owner[task] = container
        self._owner_of = dict(plan.task_container)  # the same, for one root at a time
        self.done: dict[int, tuple[list, list]] = {}  # spout task -> (acked, failed) chunks
        # Local spouts with no cap on their open trees: their acks leave at most every
        # TREES_DONE_HOLD_SECS (the first held one's time per task in _done_since).
        components = plan.logical.components
        self._uncapped_spouts = frozenset(
            t for t in spout_tasks
            if components[plan.task_component[t]].topology_config.max_spout_pending is None)
        self._done_since: dict[int, float] = {}
        self.trees_acked = self.trees_failed = self.trees_expired = 0

    def apply_turn(self, parts: list[tuple[bytes, bytes]], size: int) -> None:
        """Apply a turn's XOR updates here, or forward them to the trees' stmgrs.

        ``parts``: (packed roots, packed values) as received; ``size``: their roots' bytes.
        Combining a turn's updates is safe: each instance sends an input's ack in the same
        update as the creation of the children it emitted before it, and a checksum can only
        reach zero early if an ack is applied without those creations; applying more updates
        at once only removes intermediate states.
        """
        if len(parts) == 1:
            raw_roots, raw_values = parts[0]
        else:
            raw_roots = b"".join([roots for roots, _ in parts])
            raw_values = b"".join([values for _, values in parts])
        if size <= SMALL_UPDATE_BYTES:
            self._xor_pairs_into_trees(tree_ids.unpack_list(raw_roots),
                                       tree_ids.unpack_list(raw_values))
        else:
            self._xor_into_trees(tree_ids.unpack(raw_roots), tree_ids.unpack(raw_values))

    def _xor_pairs_into_trees(self, roots: list[int], values: list[int]) -> None:
        """``_xor_into_trees`` for a few pairs, as lists of ints (see ``acking``).

        The pairs are combined per root first (one XOR per tree and turn), so what goes to a
        peer is already as small as it gets and the ledger does one step per tree.
        """
        get = self._owner_of.get
        mine = self.index
        local: dict[int, int] = {}
        remote: dict[int, dict[int, int]] = {}
        for root, value in acking.xor_pairs(roots, values).items():
            container = get(root >> _ROOT_SHIFT, -1)
            if container == mine:
                local[root] = value
            else:
                remote.setdefault(container, {})[root] = value
        if local:
            self.trees_done(self.ledger.apply_combined(local), [])
        for container in sorted(remote):
            pairs = remote[container]
            self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                xor=stmgr_pb2.XorBatch(roots=tree_ids.pack_list(list(pairs)),
                                       values=tree_ids.pack_list(list(pairs.values()))))))

    def _xor_into_trees(self, roots: np.ndarray, values: np.ndarray) -> None:
        """Apply (root, value) XOR updates here, or forward them to the trees' stmgrs.

        Combined per root first (one sort for the turn): one step per tree in the ledger, and
        what goes to a peer is no bigger than the number of its trees.
        """
        roots, values = acking.xor_by_root(roots, values)
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self.trees_done(self.ledger.apply_unique(roots[chosen], values[chosen]), [])
            else:
                self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    xor=stmgr_pb2.XorBatch(roots=tree_ids.pack(roots[chosen]),
                                           values=tree_ids.pack(values[chosen])))))

    def fail_trees(self, roots: np.ndarray) -> None:
        """Fail trees here, or forward the fail to the trees' stmgrs."""
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self.trees_done([], self.ledger.fail(roots[chosen]))
            else:
                self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    fail=stmgr_pb2.FailBatch(roots=tree_ids.pack(roots[chosen])))))

    def _by_owner(self, roots: np.ndarray) -> Iterator[tuple[int, slice | np.ndarray]]:
        """Yield (container owning the trees, the trees' mask or slice of ``roots``)."""
        if roots.size == 0:
            return
        owners = self._owner[tree_ids.root_task(roots)]
        first = owners[0]
        if (owners == first).all():
            yield int(first), slice(None)
            return
        for container in np.unique(owners).tolist():
            yield container, owners == container

    def trees_done(self, acked: list[int], failed: list[int]) -> None:
        """Note which local spout trees completed or failed (sent by ``send_trees_done``)."""
        self.trees_acked += len(acked)
        self.trees_failed += len(failed)
        done = self.done
        for roots, slot in ((acked, 0), (failed, 1)):
            if not roots:
                continue
            if len(roots) <= tree_ids.SMALL_UPDATE_PAIRS:
                by_task: dict[int, list[int]] = {}
                for root in roots:
                    by_task.setdefault(root >> _ROOT_SHIFT, []).append(root)
                for task, chosen in by_task.items():
                    done.setdefault(task, ([], []))[slot].append(chosen)
                continue
            array = np.asarray(roots, dtype=np.uint64)
            tasks = tree_ids.root_task(array)
            if (tasks == tasks[0]).all():
                done.setdefault(int(tasks[0]), ([], []))[slot].append(array)
                continue
            for task in np.unique(tasks).tolist():
                done.setdefault(task, ([], []))[slot].append(array[tasks == task])

    def send_trees_done(self) -> None:
        """Tell each local spout task which of its trees completed or failed.

        A capped spout (``topology.max.spout.pending``) hears at the end of each turn, as does
        any spout with failed trees; an uncapped one at most every ``TREES_DONE_HOLD_SECS``.
        """
        by_task, self.done = self.done, {}
        held = self._uncapped_spouts
        since = self._done_since
        now = self.clock() if held else 0.0
        for task, (done, lost) in by_task.items():
            if task in held and not lost:
                first = since.get(task)
                if first is None:
                    since[task] = first = now
                if now < first + TREES_DONE_HOLD_SECS:
                    self.done[task] = (done, lost)  # held: its acks wait for company
                    continue
            since.pop(task, None)
            if task in self.connected:  # else it restarted: it forgot these trees and replays
                self.io.to_instance(task, frames.control_frame(stmgr_pb2.StmgrToInstance(
                    trees=stmgr_pb2.TreesDone(acked=_packed(done), failed=_packed(lost)))))

    def next_deadline(self) -> float | None:
        """Return when held completed trees must leave (clock seconds), or None."""
        since = self._done_since
        if not since:
            return None
        return min(since.values()) + TREES_DONE_HOLD_SECS

    def forget_task(self, task: int) -> None:
        """Forget local ``task``'s trees: its instance ended, and the next one replays them."""
        self.done.pop(task, None)
        self._done_since.pop(task, None)
        if task in self.spout_tasks:
            self.ledger.forget_task(task)

    def expire(self) -> None:
        """Forget trees their spouts have failed by timeout (``acking.XorLedger.expire``)."""
        self.trees_expired += self.ledger.expire()


def _packed(chunks: list) -> bytes:
    """Return uint64 ``chunks`` (NumPy arrays or lists of ints; possibly none) packed as one."""
    if not chunks:
        return b""
    if len(chunks) == 1:
        only = chunks[0]
        return tree_ids.pack_list(only) if type(only) is list else tree_ids.pack(only)
    return tree_ids.pack(np.concatenate([np.asarray(chunk, dtype=np.uint64) for chunk in chunks]))

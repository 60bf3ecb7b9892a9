"""At-least-once: the XOR ledger and spout trees in isolation, then real topologies.

The end-to-end tests run ``reliable_word_count`` on Spark ``local[4]`` (two containers) and
check the recorded output against counts computed here: exact after de-duplication, every
line acked exactly once, and replays where a bolt failed or dropped tuples.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import reliable_word_count as rwc
from heron_spark.errors import TopologyValueError
from heron_spark.instance.acking import AckBuffer, SpoutTrees
from heron_spark.scheduler.submit import submit
from heron_spark.stmgr.acking import XorLedger, xor_by_root
from heron_spark.wire import tree_ids

TIMEOUT = 180


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _u64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.uint64)


def test_xor_by_root_combines_values_per_root():
    roots, values = xor_by_root(_u64([5, 3, 5, 3, 9]), _u64([1, 2, 4, 2, 8]))
    assert dict(zip(roots.tolist(), values.tolist())) == {3: 0, 5: 5, 9: 8}


def test_xor_runs_combine_neighbours_of_one_tree_only():
    roots = np.array([5, 5, 5, 7, 5, 9, 9], dtype=np.uint64)
    values = np.array([1, 2, 4, 8, 16, 32, 64], dtype=np.uint64)
    got_roots, got_values = tree_ids.xor_runs(roots, values)
    assert got_roots.tolist() == [5, 7, 5, 9] and got_values.tolist() == [7, 8, 16, 96]
    same = np.array([1, 2, 3], dtype=np.uint64)
    assert tree_ids.xor_runs(same, same)[0] is same  # nothing to combine: unchanged


@pytest.mark.parametrize("size", [0, 1, 7, 64, 65, 500])
def test_xor_runs_packed_is_xor_runs_of_the_joined_arrays(size):
    """The small (Python) and big (NumPy) paths pack what ``xor_runs`` gives, runs across parts too."""
    rng = np.random.default_rng(size)
    roots = np.sort(rng.integers(1, 6, size=size)).astype(np.uint64)  # long runs
    values = rng.integers(1, 2**64 - 1, size=size, dtype=np.uint64, endpoint=True)
    cuts = sorted(rng.integers(0, size + 1, size=3).tolist())
    parts = [slice(a, b) for a, b in zip([0, *cuts], [*cuts, size])]
    want_roots, want_values = tree_ids.xor_runs(roots, values)
    got = tree_ids.xor_runs_packed([roots[p] for p in parts], [values[p] for p in parts])
    assert got == (tree_ids.pack(want_roots), tree_ids.pack(want_values))
    assert tree_ids.unpack(got[0]).size == len(set(roots.tolist()))  # one pair per run


def test_distinct_runs_keeps_each_run_once():
    roots = np.array([4, 4, 4, 9, 2, 2, 4], dtype=np.uint64)
    assert tree_ids.distinct_runs(roots).tolist() == [4, 9, 2, 4]
    assert tree_ids.distinct_runs(roots[:1]).tolist() == [4]


def test_ledger_completes_a_tree_only_when_every_edge_is_acked():
    ledger = XorLedger(expiry_secs=60)
    root = (7 << tree_ids.ROOT_TASK_SHIFT) | 1
    # the spout tuple goes to two tasks: edges a and b
    assert ledger.start(_u64([root]), _u64([root, root]), _u64([0xA, 0xB])) == []
    # the first bolt emits a child (edge c) anchored to the root, then acks a
    assert ledger.apply(_u64([root]), _u64([0xC])) == []
    assert ledger.apply(_u64([root]), _u64([0xA])) == []
    # the child's ack arrives before b's
    assert ledger.apply(_u64([root]), _u64([0xC])) == []
    assert ledger.apply(_u64([root]), _u64([0xB])) == [root]
    assert len(ledger) == 0
    assert ledger.apply(_u64([root]), _u64([0xB])) == []  # late updates are ignored


def test_ledger_completes_unrouted_trees_at_once_and_fails_and_expires():
    clock = Clock()
    ledger = XorLedger(expiry_secs=10, clock=clock)
    assert ledger.start(_u64([1, 2]), _u64([2]), _u64([0xF])) == [1]  # root 1: no subscriber
    assert ledger.fail(_u64([2, 2, 3])) == [2]
    ledger.start(_u64([4]), _u64([4]), _u64([0xE]))
    clock.now += 11
    assert ledger.expire() == 1 and len(ledger) == 0


def test_ledger_keeps_each_spout_tasks_trees_as_long_as_its_lifetime_says():
    """Per spout task: 10 s, 100 s, or for ever (None: message timeouts off); a task that
    restarted has its trees forgotten at once, whatever their lifetime."""
    clock = Clock()
    ledger = XorLedger(expiry_secs=10, clock=clock, task_expiry_secs={1: 100, 2: None})
    shift = tree_ids.ROOT_TASK_SHIFT
    short, long_, endless, other = (1 << shift) | 9, (1 << shift) | 1, (2 << shift) | 1, \
        (3 << shift) | 1
    ledger.start(_u64([long_]), _u64([long_]), _u64([0xA]), task=1)
    ledger.start_pairs([endless], [endless], [0xB], task=2)
    ledger.start_pairs([other], [other], [0xC], task=3)  # not listed: expiry_secs
    ledger.start_pairs([short], [short], [0xD])           # no task given: expiry_secs
    clock.now += 11
    assert ledger.expire() == 2 and len(ledger) == 2
    clock.now += 90
    assert ledger.expire() == 1 and len(ledger) == 1
    clock.now += 10**6
    assert ledger.expire() == 0 and ledger.apply_pairs([endless], [0xB]) == [endless]
    ledger.start_pairs([endless + 1, endless + 2], [endless + 1, endless + 2], [1, 2], task=2)
    ledger.start_pairs([long_ + 1], [long_ + 1], [3], task=1)
    assert ledger.forget_task(2) == 2 and len(ledger) == 1


def test_small_updates_as_lists_of_ints_match_the_vectorised_ledger():
    """``start_pairs``/``apply_pairs`` (a few pairs per turn) and ``start``/``apply`` (NumPy)
    open, complete and ignore the same trees, in the same order, step by step."""
    rng = np.random.default_rng(7)
    vectorised, pairs = XorLedger(expiry_secs=60), XorLedger(expiry_secs=60)
    roots = [(3 << tree_ids.ROOT_TASK_SHIFT) | i for i in range(1, 41)]
    edges = {root: [int(e) for e in rng.integers(1, 1 << 63, size=3)] for root in roots}
    update_roots = [root for root in roots[:-2] for _ in range(3)]  # the last two: unrouted
    update_values = [edge for root in roots[:-2] for edge in edges[root]]
    assert vectorised.start(_u64(roots), _u64(update_roots), _u64(update_values)) == \
        pairs.start_pairs(roots, update_roots, update_values) == roots[-2:]
    acks = [(root, edge) for root in roots[:-2] for edge in edges[root]]
    acks += [(roots[0], 12345), (roots[0], 12345)]  # cancels out: changes nothing
    order = rng.permutation(len(acks))
    completed = []
    for chunk in np.array_split(order, 12):
        chunk_roots = [acks[i][0] for i in chunk] + [(9 << tree_ids.ROOT_TASK_SHIFT) | 1]
        chunk_values = [acks[i][1] for i in chunk] + [77]  # an unknown tree: ignored
        done = pairs.apply_pairs(chunk_roots, chunk_values)
        assert vectorised.apply(_u64(chunk_roots), _u64(chunk_values)) == done
        assert len(vectorised) == len(pairs)
        completed += done
    assert sorted(completed) == roots[:-2] and len(pairs) == 0


def test_tree_ids_packed_as_lists_read_back_as_arrays_and_the_other_way():
    ids = [0, 1, (5 << tree_ids.ROOT_TASK_SHIFT) | 9, (1 << 64) - 1]
    assert tree_ids.unpack(tree_ids.pack_list(ids)).tolist() == ids
    assert tree_ids.unpack_list(tree_ids.pack(_u64(ids))) == ids


def test_spout_trees_close_time_out_and_cap_pending():
    clock = Clock()
    trees = SpoutTrees(task_id=3, timeout_secs=5, max_pending=2, clock=clock)
    first, second = trees.open("a"), trees.open("b")
    assert tree_ids.root_task(_u64([first, second])).tolist() == [3, 3]
    assert trees.full
    clock.now += 2
    assert trees.close(tree_ids.pack([first]), tree_ids.pack([])) == (["a"], [])
    assert trees.latency_ms_total == pytest.approx(2000.0)
    assert not trees.full
    clock.now += 2
    assert trees.expired() == []  # b is 4 s old
    clock.now += 2
    assert trees.expired() == ["b"]
    assert trees.close(tree_ids.pack([second]), tree_ids.pack([])) == ([], [])  # too late
    assert (trees.acked, trees.timed_out) == (1, 1)


def test_spout_trees_expire_every_timed_out_tree_oldest_first_after_acks_from_the_front():
    clock = Clock()
    trees = SpoutTrees(task_id=1, timeout_secs=5, max_pending=None, clock=clock)
    roots = [trees.open(i, "odd" if i % 2 else "default") for i in range(1000)]
    assert trees.close(tree_ids.pack(roots[:400]), tree_ids.pack([]))[0] == list(range(400))
    clock.now += 1
    trees.open("late")
    clock.now += 4.5
    assert trees.expired() == list(range(400, 1000))  # one call: every tree past the timeout
    assert (trees.tally("odd").timed_out, trees.tally("default").timed_out) == (300, 300)
    assert (len(trees), trees.timed_out, trees.acked) == (1, 600, 400)
    clock.now += 1
    assert trees.expired() == ["late"] and len(trees) == 0


def test_ack_buffer_packs_one_pair_per_root():
    from heron_spark.api.tuple import HeronTuple

    single = AckBuffer()  # every received tuple had one tree: the vectorised path
    single.ack(HeronTuple(0xA1, "c", "default", 1, (), 0.0, (10,)))
    single.ack(HeronTuple(0xA2, "c", "default", 1, (), 0.0, (12,)))
    roots, keys, failed = single.take()
    assert roots.tolist() == [10, 12] and keys.tolist() == [0xA1, 0xA2] and failed.size == 0
    buffer = AckBuffer()
    buffer.single_root = False  # the executor says so once a tuple had several trees, or none
    buffer.ack(HeronTuple(0xAB, "c", "default", 1, (), 0.0, (10, 11)))
    buffer.fail(HeronTuple(0xCD, "c", "default", 1, (), 0.0, (12,)))
    buffer.ack(HeronTuple(None, "c", "default", 1, (), 0.0, ()))  # not in any tree
    roots, keys, failed = buffer.take()
    assert roots.tolist() == [10, 11]
    assert keys.tolist() == [0xAB, 0xAB]
    assert failed.tolist() == [12]
    assert not buffer and (buffer.acked_count, buffer.failed_count) == (2, 1)
    buffer.ack(("not", "a", "received", "tuple"))
    with pytest.raises(TopologyValueError) as caught:
        buffer.take()
    assert caught.value.kind == "ack"


def _run(spark, tmp_path, name, lines=1500, auto_ack=False, **config):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, lines)
    topology = rwc.build(name, corpus, out, config=config, auto_ack=auto_ack)
    handle = submit(topology, spark=spark.session, master="local[4]")
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    return text, out, handle.metrics()


def _check_exact(text, out):
    raw, unique, _ = rwc.read_counts(out)
    expected = rwc.expected_counts(text)
    assert all(raw[word] >= count for word, count in expected.items())
    assert unique == expected
    acks, fails = rwc.read_spout_log(out)
    positions = {f"corpus.txt:{i}" for i in range(len(text))}
    assert set(acks) == positions and set(acks.values()) == {1}
    return raw, fails


@pytest.mark.spark
@pytest.mark.parametrize("misbehave", ["", "fail", "drop"])
def test_at_least_once_word_count_replays_failed_and_timed_out_lines(spark, tmp_path, misbehave):
    text, out, metrics = _run(spark, tmp_path, f"alo-{misbehave or 'clean'}",
                              **{rwc.MISBEHAVE: misbehave, "topology.message.timeout.secs": 3})
    raw, fails = _check_exact(text, out)
    every_7th = {f"corpus.txt:{i}" for i in range(0, len(text), 7)}
    spout = metrics["lines"]
    assert spout["__ack-count"] == len(text)
    if misbehave == "":
        assert not fails and spout["__fail-count"] == 0 and spout["__timeout-count"] == 0
        assert raw == rwc.expected_counts(text)  # nothing replayed
    elif misbehave == "fail":
        assert set(fails) == every_7th  # each failed line was failed, and only those
        assert spout["__fail-count"] >= len(every_7th) and spout["__timeout-count"] == 0
    else:
        assert set(fails) == every_7th  # replayed after the 3 s message timeout
        assert spout["__timeout-count"] >= len(every_7th) and spout["__fail-count"] == 0


@pytest.mark.spark
def test_auto_ack_bolt_anchors_and_acks_for_its_user(spark, tmp_path):
    text, out, metrics = _run(spark, tmp_path, "alo-auto", auto_ack=True)
    raw, fails = _check_exact(text, out)
    assert not fails and raw == rwc.expected_counts(text)
    assert metrics["split"]["__ack-count"] == len(text)  # acked by the runtime
    assert metrics["lines"]["__ack-count"] == len(text)


def test_a_spout_at_its_cap_resumes_once_half_of_it_closed_or_when_closes_stall():
    """At ``topology.max.spout.pending`` the spout waits for half its trees to close (one
    batch's worth), not for the first one, and never holds more than the cap; a spout whose
    bolts hold back more than half resumes once trees stop closing for 5 ms."""
    clock = Clock()
    trees = SpoutTrees(task_id=1, timeout_secs=None, max_pending=100, clock=clock)
    roots = [trees.open(i) for i in range(99)]
    assert not trees.full
    roots.append(trees.open(99))
    assert trees.full
    trees.close(tree_ids.pack(roots[:49]), tree_ids.pack([]))
    assert trees.full and len(trees) == 51
    trees.close(tree_ids.pack(roots[49:50]), tree_ids.pack([]))
    assert not trees.full and len(trees) == 50
    more = [trees.open(i) for i in range(49)]
    assert not trees.full  # 99 open: room for one more
    more.append(trees.open(49))
    assert trees.full and len(trees) == 100
    clock.now += 1.0
    assert trees.full  # none closed: the cap holds however long it takes
    trees.close(tree_ids.pack(more[:10]), tree_ids.pack([]))
    assert trees.full  # trees are closing: wait for half
    clock.now += 0.004
    assert trees.full
    clock.now += 0.002
    assert not trees.full  # none closed for 5 ms: go on with the 10 free
    trees.open("x")
    assert not trees.full and len(trees) == 91


def _delivered_batch(buffer, first_root, count, stamp=50.0):
    from heron_spark.api.tuple import HeronTuple

    roots = np.arange(first_root, first_root + count, dtype=np.uint64)
    keys = roots + np.uint64(1000)
    tuples = [HeronTuple(int(k), "c", "default", 1, (), stamp, (int(r),))
              for r, k in zip(roots, keys)]
    buffer.delivered(tuples, pa.array(roots), pa.array(keys), stamp, ("c", "default"))
    return tuples


@pytest.mark.parametrize("sizes", [(3, 2), (40, 30)])  # taken through lists, through NumPy
@pytest.mark.parametrize("order", ["as delivered", "reversed", "partly", "one failed"])
def test_acks_of_delivered_batches_give_the_pairs_the_tuples_give(order, sizes):
    """A bolt that acks exactly the tuples delivered since the last take, in order, has its
    (root, edge id) pairs taken from the batches' arrays; any other order, a missing ack or a
    fail takes the per-tuple path; every way gives the same pairs and tallies."""
    buffer = AckBuffer(only_input=("c", "default"))
    tuples = _delivered_batch(buffer, 10, sizes[0]) + _delivered_batch(buffer, 200, sizes[1])
    acked = {"as delivered": tuples, "reversed": tuples[::-1], "partly": tuples[:4],
             "one failed": tuples[1:]}[order]
    for tup in acked:
        buffer.ack(tup)
    if order == "one failed":
        buffer.fail(tuples[0])
    roots, keys, failed = buffer.take()
    assert roots.tolist() == [t.roots[0] for t in acked]
    assert keys.tolist() == [t.id for t in acked]
    assert failed.tolist() == ([10] if order == "one failed" else [])
    tally = buffer.by_input[("c", "default")]
    assert (tally.acked, tally.failed) == (len(acked), 1 if order == "one failed" else 0)
    assert buffer.acked_count == len(acked)
    # the next take starts afresh: nothing delivered is remembered
    later = _delivered_batch(buffer, 30, 2)
    buffer.ack(later[0])
    roots, keys, _ = buffer.take()
    assert roots.tolist() == [30] and keys.tolist() == [1030]


def test_delivered_batches_are_forgotten_when_a_turn_acks_nothing():
    buffer = AckBuffer(only_input=("c", "default"))
    first = _delivered_batch(buffer, 10, 2)
    buffer.forget_delivered()  # what the bolt does at the end of a turn with nothing acked
    second = _delivered_batch(buffer, 20, 2)
    for tup in first + second:  # acked a turn late: the per-tuple path
        buffer.ack(tup)
    roots, keys, _ = buffer.take()
    assert roots.tolist() == [10, 11, 20, 21]
    assert keys.tolist() == [1010, 1011, 1020, 1021]

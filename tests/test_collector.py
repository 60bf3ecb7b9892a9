"""The emitting side of the hot path, without sockets: the collector partitions each batch per
destination task and, at-least-once, announces every copy's edge id before the copy leaves."""

import collections

import numpy as np

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.instance.collector import OutputCollector
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.wire import frames, tree_ids, tuple_batch


class Words(Spout):
    outputs = ["word"]

    def next_tuple(self):
        pass


class Sink(Bolt):
    outputs = ["word", "n"]

    def process(self, tup):
        pass


def _plan():
    builder = TopologyBuilder("c")
    words = builder.add_spout("words", Words, par=1)
    count = builder.add_bolt("count", Sink, par=3, inputs={words: Grouping.fields("word")})
    builder.add_bolt("all", Sink, par=2, inputs={words: Grouping.ALL, count: Grouping.SHUFFLE})
    return PlanView(*(lambda p: (p, pack(p)))(build_logical_plan(builder.build())))


class _Head:
    """A DATA frame's routing head, by name."""

    def __init__(self, frame):
        self.kind, self.src_task, self.dest_task, self.rows, length = frames.data_head(frame)
        self.stream = frames.data_stream(frame, length)
        self.body = memoryview(frame)[frames.data_body_offset(length):]


def _frames(sent):
    out = []
    for frame in sent:
        if isinstance(frame, list):  # a data frame's parts, written with one sendmsg
            frame = b"".join(bytes(part) for part in frame)
        kind = frame[4]
        if kind == frames.DATA:
            header = _Head(frame)
            out.append(("data", header, tuple_batch.decode(header.body)))
        else:
            message = stmgr_pb2.InstanceToStmgr()
            message.ParseFromString(frame[5:])
            out.append(("control", message, None))
    return out


def test_a_batch_leaves_as_one_frame_per_destination_with_its_rows():
    view = _plan()
    sent = []
    spout_task = view.component_tasks["words"][0]
    collector = OutputCollector(view, spout_task, None, sent.append, 1000)
    words = [f"w{i % 13}" for i in range(100)]
    for word in words:
        collector.emit_plain([word], "default")
    collector.flush_all()
    got = collections.defaultdict(list)
    for kind, header, batch in _frames(sent):
        assert kind == "data" and header.src_task == spout_task and header.rows == batch.num_rows
        got[header.dest_task].extend(v for (v,) in tuple_batch.rows(batch, 1))
    for task in view.component_tasks["all"]:
        assert got[task] == words
    owner = {}
    for task in view.component_tasks["count"]:
        for word in got[task]:
            assert owner.setdefault(word, task) == task
    assert sorted(w for t in view.component_tasks["count"] for w in got[t]) == sorted(words)
    assert collector.sent == 300 and collector.buffered == 0  # copies, as the stmgr counts them


def test_at_least_once_edges_are_announced_before_the_copies_and_match_them():
    view = _plan()
    sent = []
    spout_task = view.component_tasks["words"][0]
    collector = OutputCollector(view, spout_task, None, sent.append, 1000)
    roots = [(spout_task << tree_ids.ROOT_TASK_SHIFT) + i for i in range(1, 41)]
    for i, root in enumerate(roots):
        collector.emit([f"w{i % 7}"], "default", None, False, (root,))
    collector.flush_all()
    decoded = _frames(sent)
    kind, opened, _ = decoded[0]
    assert kind == "control" and opened.WhichOneof("body") == "opened"
    assert sorted(tree_ids.unpack(opened.opened.roots).tolist()) == roots
    announced = collections.Counter()
    for root, value in zip(tree_ids.unpack(opened.opened.edges.roots).tolist(),
                           tree_ids.unpack(opened.opened.edges.values).tolist()):
        announced[root] ^= value
    carried = collections.Counter()
    copies = 0
    for kind, _header, batch in decoded[1:]:
        assert kind == "data"
        keys = batch.column(tuple_batch.KEY_COLUMN).to_numpy()
        assert np.all(keys != 0)
        for row_roots, key in zip(tuple_batch.row_roots(batch), keys.tolist()):
            copies += 1
            for root in row_roots:
                carried[root] ^= key
    assert copies == 40 * 3  # a fields copy and two all copies per tuple
    assert announced == carried  # acking every copy brings each checksum back to zero


def test_each_copy_carries_the_roots_of_its_own_row():
    """The fields grouping reorders a batch by destination: the roots must move with their
    rows (a row announced under another row's tree would let that tree complete early)."""
    view = _plan()
    sent = []
    spout_task = view.component_tasks["words"][0]
    collector = OutputCollector(view, spout_task, None, sent.append, 1000)
    base = spout_task << tree_ids.ROOT_TASK_SHIFT
    expected = {f"w{i}": (base + i + 1,) for i in range(60)}
    for word, roots in expected.items():
        collector.emit([word], "default", None, False, roots)
    collector.flush_all()
    expected["both"] = (base + 1, base + 2)  # a row in two trees: the list column
    collector.emit(["both"], "default", None, False, expected["both"])
    collector.emit(["w9"], "default", None, False, expected["w9"])
    collector.flush_all()
    rows = 0
    for kind, _header, batch in _frames(sent):
        if kind == "data":
            for (word,), row_roots in zip(tuple_batch.rows(batch, 1), tuple_batch.row_roots(batch)):
                assert row_roots == expected[word]
                rows += 1
    assert rows == 62 * 3


def test_small_record_batches_leave_joined_and_in_order_with_tuples():
    import pyarrow as pa

    view = _plan()
    sent = []
    spout_task = view.component_tasks["words"][0]
    collector = OutputCollector(view, spout_task, None, sent.append, 1000)
    for start in range(0, 90, 10):  # nine small batches: they wait, then leave as one
        collector.emit_batch(pa.RecordBatch.from_pydict(
            {"word": [f"w{i}" for i in range(start, start + 10)]}), "default")
    assert sent == [] and collector.buffered == 90
    collector.emit_plain(["after"], "default")  # a tuple emitted after them goes after them
    collector.flush_all()
    decoded = _frames(sent)
    to_all = [d for d in decoded if d[1].dest_task == view.component_tasks["all"][0]]
    assert [d[2].num_rows for d in to_all] == [90, 1]  # one joined batch, then the tuple
    assert tuple_batch.rows(to_all[0][2], 1) == [(f"w{i}",) for i in range(90)]
    sent.clear()
    collector.emit_batch(pa.RecordBatch.from_pydict(
        {"word": [f"w{i}" for i in range(1000)]}), "default")  # a full batch leaves at once
    assert sent and collector.buffered == 0


def test_a_spouts_edge_ids_are_fresh_for_every_copy_across_many_flushes():
    """Edge ids come from a pool drawn ahead: never 0, never reused, each announced as sent."""
    builder = TopologyBuilder("c")
    words = builder.add_spout("words", Words, par=1)
    builder.add_bolt("sink", Sink, par=1, inputs={words: Grouping.SHUFFLE})
    view = PlanView(*(lambda p: (p, pack(p)))(build_logical_plan(builder.build())))
    spout_task = view.component_tasks["words"][0]
    sent = []
    collector = OutputCollector(view, spout_task, None, sent.append, 100_000)
    base = spout_task << tree_ids.ROOT_TASK_SHIFT
    root = 0
    for size in [7] * 300 + [5000, 3] + [9000] + [11] * 200:  # past the pool, and around it
        for _ in range(size):
            root += 1
            collector.emit([f"w{root}"], "default", None, False, (base + root,))
        collector.flush_all()
    announced, carried, keys = {}, {}, []
    for kind, message, batch in _frames(sent):
        if kind == "control":
            edges = message.opened.edges
            assert tree_ids.unpack(message.opened.roots).tolist() == \
                tree_ids.unpack(edges.roots).tolist()  # each new tree once, in order
            announced.update(zip(tree_ids.unpack(edges.roots).tolist(),
                                 tree_ids.unpack(edges.values).tolist()))
        else:
            batch_keys = batch.column(tuple_batch.KEY_COLUMN).to_numpy().tolist()
            keys += batch_keys
            carried.update(zip(batch.column(tuple_batch.ROOT_COLUMN).to_numpy().tolist(),
                               batch_keys))
    assert len(keys) == root and 0 not in keys and len(set(keys)) == root
    assert announced == carried and len(carried) == root

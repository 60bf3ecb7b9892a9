"""``option("state", ...)``'s parts without Spark: the checkpoint reader and option resolution.

Checkpoints are written by the backends' own snapshot code into a real ``CheckpointStore``
folder (a ``memory`` task's pickle, a ``rocksdb`` task's RocksDB checkpoint uploaded as a
manifest of shared files), with time-to-live keys on a ``ManualClock``; resolution reads a
topology, packing plan and committed-checkpoint record stored in a real local state manager
folder, as ``submit`` and the TMaster store them. The Spark reads (classic and Connect) are in
``test_session_parity.py``.
"""

from __future__ import annotations

import json
import math
import os
import pickle

import pytest

from heron_spark import Bolt, DataSourceOptionError, Grouping, Spout, TopologyBuilder
from heron_spark.api.serializer import IHeronSerializer
from heron_spark.api.state import HashMapState, StatefulComponent
from heron_spark.contract.key_groups import key_group
from heron_spark.contract.topology_view import CommittedCheckpoint
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.scheduler.update import topology_proto
from heron_spark.sql import state as sql_state
from heron_spark.statemgr import LocalFileStateManager
from heron_spark.statemgr.checkpoints import CheckpointStore
from heron_spark.statemgr.state_reader import read_task_state, saved_tasks
from heron_spark.testing import ManualClock
from heron_spark.wire import tuple_batch


def _memory_checkpoint(store: CheckpointStore, checkpoint_id: int, task: int,
                       clock: ManualClock, ttl_secs: float = 0.0) -> None:
    state = HashMapState(ttl_secs=ttl_secs, clock=clock)
    state.put("old", 1)
    clock.sleep(5)
    state.put("new", [2, 3])
    state.put(("t", 1), {"n": 4})
    store.save(checkpoint_id, task, pickle.dumps(state.snapshot()))


def test_a_memory_checkpoint_reads_back_its_live_keys(tmp_path):
    store = CheckpointStore(str(tmp_path), "topo")
    _memory_checkpoint(store, 3, 7, ManualClock(100.0))
    _memory_checkpoint(store, 3, 8, ManualClock(100.0), ttl_secs=10.0)  # "old" until 110, rest 115
    assert saved_tasks(store, 3) == {7: "state", 8: "state"}
    assert saved_tasks(store, 4) == {}
    everything = {"old": 1, "new": [2, 3], ("t", 1): {"n": 4}}
    assert dict(read_task_state(store, 3, 7, "state", now=1e12)) == everything
    assert dict(read_task_state(store, 3, 8, "state", now=105.0)) == everything
    assert dict(read_task_state(store, 3, 8, "state", now=112.0)) == {
        "new": [2, 3], ("t", 1): {"n": 4}}
    assert dict(read_task_state(store, 3, 8, "state", now=115.0)) == {}


def test_a_rocksdb_checkpoint_reads_back_its_live_keys_and_refuses_a_damaged_file(tmp_path):
    from heron_spark.instance.rocksdb_state import RocksDBState

    clock = ManualClock(100.0)
    state = RocksDBState(str(tmp_path / "db"), ttl_secs=10.0, clock=clock)
    for i in range(500):
        state.put(f"k{i}", i)
    clock.sleep(5)
    state.put("late", {"a": [1]})
    state.put("k0", -1)
    state.checkpoint(str(tmp_path / "snap"))
    state.close()
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    entries = store.describe(str(tmp_path / "snap"), sorted(p.name for p in
                                                           (tmp_path / "snap").iterdir()), {})
    store.upload(2, 5, str(tmp_path / "snap"), entries)
    assert saved_tasks(store, 2) == {5: "manifest"}
    pairs = dict(read_task_state(store, 2, 5, "manifest", now=105.0))
    assert pairs == {**{f"k{i}": i for i in range(1, 500)}, "k0": -1, "late": {"a": [1]}}
    assert dict(read_task_state(store, 2, 5, "manifest", now=112.0)) == {
        "k0": -1, "late": {"a": [1]}}
    shared = [entry for entry in entries if entry.shared]
    assert shared
    with open(store.entry_path(2, 5, shared[0]), "r+b") as damaged:
        damaged.write(b"\0\0\0\0")
    with pytest.raises(ValueError, match="is corrupt"):
        list(read_task_state(store, 2, 5, "manifest"))


def test_values_are_json_text_else_their_repr():
    assert [sql_state.value_text(v) for v in (5, "x", [1, "ü"], {"n": 2.5}, None, (1, 2))] == \
        ["5", '"x"', '[1, "ü"]', '{"n": 2.5}', None, "[1, 2]"]
    assert sql_state.value_text({1, 2}) == "{1, 2}"
    assert sql_state.value_text(math.nan) == "nan"


class _Spout(Spout, StatefulComponent):
    outputs = ["word"]

    def init_state(self, stateful_state):
        self.state = stateful_state

    def next_tuple(self):
        pass


class _Bolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        pass


def _stored(tmp_path, mode: str = "EFFECTIVELY_ONCE", committed: int | None = 4) -> str:
    """Store topology ``t`` (spout ``words`` x1, bolts ``count`` x2, ``echo`` x1); return URL.

    With ``committed``, checkpoints 3 and 4 (and an uncommitted 5) hold state of ``words``
    and ``count``, and the record names ``committed``.
    """
    builder = TopologyBuilder("t")
    words = builder.add_spout("words", _Spout, par=1)
    count = builder.add_bolt("count", _Bolt, par=2, inputs={words: Grouping.fields("word")})
    builder.add_bolt("echo", _Bolt, par=1, inputs={count: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": mode, "topology.max.parallelism": 16})
    plan = build_logical_plan(builder.build(), "t")
    packing = pack(plan)
    root = str(tmp_path / "checkpoints")
    with LocalFileStateManager(f"{tmp_path}/state") as statemgr:
        statemgr.set_topology(topology_proto(plan, "t-1", b""))
        statemgr.set_packing_plan("t", packing)
        if committed is not None:
            statemgr.set_committed_checkpoint("t", CommittedCheckpoint(
                committed, 0, root, 1.0).as_dict())
    store = CheckpointStore(root, "t")
    tasks = {inst.component: [] for c in packing.containers for inst in c.instances}
    for container in packing.containers:
        for inst in container.instances:
            tasks[inst.component].append(inst.task_id)
    for checkpoint_id in (3, 4, 5):
        for task in tasks["words"] + tasks["count"]:
            store.save(checkpoint_id, task, pickle.dumps((0.0, {"task": task})))
    return f"file://{tmp_path}/state"


def test_the_options_resolve_to_the_committed_checkpoint_s_tasks(tmp_path):
    url = _stored(tmp_path)
    ask = {"topology": "t", "heron.statemgr": url, "state": "latest"}
    plan = sql_state.plan_state({**ask, "component": "count"})
    assert (plan.checkpoint_id, plan.max_parallelism, len(plan.tasks)) == (4, 16, 2)
    assert set(plan.tasks.values()) == {"state"}
    assert [row[0] for task in plan.tasks for row in sql_state.read_rows(plan, task)] == \
        ["task", "task"]
    assert sql_state.plan_state({**ask, "component": "words", "state": "3"}).checkpoint_id == 3


@pytest.mark.parametrize(("options", "option", "value", "says"), [
    ({"topology": "nope"}, "topology", "nope", "heron-spark list"),
    ({"component": "ghost"}, "component", "ghost", "'count', 'echo', 'words'"),
    ({"component": "echo"}, "component", "echo", "one of ['count', 'words']"),
    ({"state": "5"}, "state", "5", "retained: [3, 4]"),        # not committed (yet)
    ({"state": "2"}, "state", "2", "retained: [3, 4]"),        # deleted
    ({"state": "soon"}, "state", "soon", "'latest'"),
    ({"path": "/x"}, "path", "/x", "drop option('path')"),
    ({"stream": "default"}, "stream", "default", "drop option('stream')"),
    ({"component": None}, "component", None, "option('component', C)"),
    ({"stateHoldSecs": "-1"}, "stateHoldSecs", "-1", "seconds >= 0"),
    ({"stateHoldSecs": "soon"}, "stateHoldSecs", "soon", "seconds >= 0"),
])
def test_a_state_read_that_names_nothing_readable_is_one_error_naming_the_option(
        tmp_path, options, option, value, says):
    url = _stored(tmp_path)
    ask = {"topology": "t", "component": "count", "heron.statemgr": url, "state": "latest"}
    with pytest.raises(DataSourceOptionError) as info:
        sql_state.plan_state({key: val for key, val in {**ask, **options}.items()
                              if val is not None})
    assert (info.value.option, info.value.value) == (option, value)
    assert says in str(info.value)


def test_no_committed_checkpoint_and_no_effectively_once_are_clear_errors(tmp_path):
    ask = {"topology": "t", "component": "count", "state": "latest"}
    with pytest.raises(DataSourceOptionError, match="no committed checkpoint yet") as info:
        sql_state.plan_state({**ask, "heron.statemgr": _stored(tmp_path / "a", committed=None)})
    assert (info.value.option, info.value.value) == ("state", "latest")
    with pytest.raises(DataSourceOptionError, match="EFFECTIVELY_ONCE") as info:
        sql_state.plan_state({**ask, "heron.statemgr": _stored(tmp_path / "b", "ATLEAST_ONCE",
                                                              committed=None)})
    assert (info.value.option, info.value.value) == ("topology", "t")


def test_a_checkpoint_deleted_after_planning_is_one_error_naming_the_task(tmp_path):
    """Without a hold, a newer commit deletes the planned checkpoint before a task is read."""
    url = _stored(tmp_path)
    plan = sql_state.plan_state({"topology": "t", "component": "count", "heron.statemgr": url,
                                 "state": "latest", "stateHoldSecs": "0"})
    CheckpointStore(plan.root, "t").retain(5)
    task = min(plan.tasks)
    with pytest.raises(DataSourceOptionError, match="read option\\('state', 'latest'\\) again") \
            as info:
        list(sql_state.read_rows(plan, task))
    assert (info.value.option, info.value.value) == ("state", "4")
    assert f"component 'count' task {task}: " in str(info.value)


class _Tagged(IHeronSerializer):
    """JSON behind a tag the component's config sets: decoding needs the component's config."""

    def initialize(self, config):
        self.tag = str(config.get("test.tag", "?")).encode()

    def serialize(self, obj):
        return self.tag + json.dumps(obj).encode()

    def deserialize(self, input_str):
        assert input_str.startswith(self.tag), "not written by this serializer"
        return json.loads(input_str[len(self.tag):])


def test_rocksdb_state_decodes_with_the_topology_s_serializer_and_component_config(tmp_path):
    from heron_spark.instance.rocksdb_state import RocksDBState

    builder = TopologyBuilder("s")
    words = builder.add_spout("words", _Spout, par=1)
    builder.add_bolt("count", _Bolt, par=1, inputs={words: Grouping.fields("word")},
                     config={"test.tag": "T1"})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.serializer.classname": f"{__name__}._Tagged"})
    plan = build_logical_plan(builder.build(), "s")
    packing = pack(plan)
    [task] = [inst.task_id for c in packing.containers for inst in c.instances
              if inst.component == "count"]
    root = str(tmp_path / "checkpoints")
    with LocalFileStateManager(f"{tmp_path}/state") as statemgr:
        statemgr.set_topology(topology_proto(plan, "s-1", b""))
        statemgr.set_packing_plan("s", packing)
        statemgr.set_committed_checkpoint("s", CommittedCheckpoint(9, 0, root, 1.0).as_dict())
    serializer = _Tagged()
    serializer.initialize({"test.tag": "T1"})
    state = RocksDBState(str(tmp_path / "db"), serializer)
    state.put("a", {"n": 1})
    state.put("b", [2])
    state.checkpoint(str(tmp_path / "snap"))
    state.close()
    store = CheckpointStore(root, "s")
    snap = str(tmp_path / "snap")
    store.upload(9, task, snap, store.describe(snap, os.listdir(snap), {}))
    read = sql_state.plan_state({"topology": "s", "component": "count", "state": "latest",
                                 "heron.statemgr": f"file://{tmp_path}/state"})
    assert sorted(sql_state.read_rows(read, task)) == [
        ("a", '{"n": 1}', task, key_group("a", 128), 9),
        ("b", "[2]", task, key_group("b", 128), 9)]


def test_the_batched_key_groups_are_key_group_s_and_batches_hold_every_row(tmp_path):
    keys = [f"w{i}" for i in range(300)] + [7, -1, 2 ** 70, ("t", 1), 2.5, "", "ü"]
    assert tuple_batch.key_groups_of(keys, 128) == [key_group(key, 128) for key in keys]
    assert tuple_batch.key_groups_of(keys, 3) == [key_group(key, 3) for key in keys]
    url = _stored(tmp_path)
    plan = sql_state.plan_state({"topology": "t", "component": "count", "heron.statemgr": url,
                                 "state": "latest"})
    root = CheckpointStore(plan.root, "t")
    task = min(plan.tasks)
    root.save(4, task, pickle.dumps((0.0, {f"k{i}": i for i in range(10)})))
    batches = list(sql_state.read_batches(plan, task, rows_per_batch=4))
    assert [batch.num_rows for batch in batches] == [4, 4, 2]
    assert [row for batch in batches for row in batch.to_pylist()] == [
        {"key": f"k{i}", "value": str(i), "task": task, "key_group": key_group(f"k{i}", 16),
         "checkpoint_id": 4} for i in range(10)]


def test_a_read_holds_its_checkpoint_through_newer_commits_until_the_hold_runs_out(tmp_path):
    url = _stored(tmp_path)
    plan = sql_state.plan_state({"topology": "t", "component": "count", "heron.statemgr": url,
                                 "state": "latest", "stateHoldSecs": "60"})
    store = CheckpointStore(plan.root, "t")
    store.retain(5)  # a commit of checkpoint 5 while the read runs: 3 goes, 4 is held
    assert store.checkpoints() == [4, 5]
    assert sorted(row[0] for task in plan.tasks for row in sql_state.read_rows(plan, task)) \
        == ["task", "task"]
    [hold] = [info.path for info in store._list(f"{store.base}/4") if "hold-" in info.path]
    store._write(hold, b'{"until": 1.0}')  # the hold ran out
    store.retain(5)
    assert store.checkpoints() == [5]


def test_a_hold_that_is_being_written_or_damaged_holds_nothing(tmp_path):
    store = CheckpointStore(str(tmp_path), "t")
    store.save(1, 1, b"x")
    store._write(f"{store.base}/1/hold-x.json", b"{not json")
    assert not store.held(1, 0.0)
    store.hold(1, 50.0)
    assert store.held(1, 49.0) and not store.held(1, 50.0)

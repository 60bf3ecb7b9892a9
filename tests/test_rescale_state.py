"""Rescaling keyed state (issue 33 item 3): a checkpoint keeps each task's state per key group
and its component's layout; a restore under a new parallelism reads, from the old tasks' real
checkpoint files, exactly the key groups each new task owns."""

from __future__ import annotations

import dataclasses
import pickle
import struct

import pytest
import rocksdict

from heron_spark.api.state import StatefulComponent
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.contract import key_groups
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.rocksdb_state import RocksDBState
from heron_spark.instance.stateful import KeyLayout, TaskState
from heron_spark.plan import grouping
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.testing import wait_until

WORDS = [f"word-{i}" for i in range(3000)] + ["", "ünï", "\ud800"]


class Counter(StatefulComponent):
    def init_state(self, state):
        self.state = state


def _tasks(tmp_path, backend: str, tasks: tuple[int, ...], max_par: int = 128):
    config = SystemConfig(work_dir=str(tmp_path / "work"), checkpoint_root=str(tmp_path / "root"))
    return [TaskState(config, "topo", task, "count", StateSettings(backend, 0.0),
                      layout=KeyLayout(index, tasks, max_par))
            for index, task in enumerate(tasks)]


def _save(states, components, checkpoint_id: int) -> None:
    for state, component in zip(states, components):
        state.snapshot(component, checkpoint_id)
    for state in states:
        done: list = []
        wait_until(lambda s=state, d=done: d.extend(s.finished()) or bool(d), 30,
                   interval=0.01, message="upload finished")
        assert done == [(checkpoint_id, None)]
        state.close()


def _load(states, checkpoint_id: int):
    components = [Counter() for _ in states]
    for state, component in zip(states, components):
        state.load(component, 1, checkpoint_id)
    return components


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_update_2_3_1_moves_each_keys_count_to_the_one_task_the_grouping_sends_it(tmp_path,
                                                                                  backend):
    expected = {word: i + 1 for i, word in enumerate(WORDS)}
    layouts = [(3, 4), (2, 5, 9), (7,)]
    states = _tasks(tmp_path, backend, layouts[0])
    components = _load(states, 0)
    route = grouping.Target(GroupingType.FIELDS, list(layouts[0]), [0], max_parallelism=128)
    for word, count in expected.items():
        [task] = route.choose((word,), None)
        components[layouts[0].index(task)].state.put(word, count)
    _save(states, components, 5)
    checkpoint = 5
    for tasks in layouts[1:]:
        states = _tasks(tmp_path, backend, tasks)
        components = _load(states, checkpoint)
        route = grouping.Target(GroupingType.FIELDS, list(tasks), [0], max_parallelism=128)
        seen: dict = {}
        for index, component in enumerate(components):
            owned = key_groups.key_group_range(index, len(tasks), 128)
            for word, count in component.state.items():
                assert word not in seen  # each key's count on one task only
                seen[word] = count
                assert key_groups.key_group(word, 128) in owned
                assert route.choose((word,), None) == [tasks[index]]
                component.state.put(word, count + 1)  # the next generation counts on
        assert seen == expected
        expected = {word: count + 1 for word, count in expected.items()}
        checkpoint += 1
        _save(states, components, checkpoint)


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_the_same_parallelism_reads_the_task_of_the_same_index_when_task_ids_move(tmp_path,
                                                                                  backend):
    states = _tasks(tmp_path, backend, (1, 2))
    components = _load(states, 0)
    components[0].state.put("a", "first")
    components[1].state.put("a", "second")  # not keyed: fine while the parallelism stays
    _save(states, components, 3)
    states = _tasks(tmp_path, backend, (4, 6))
    components = _load(states, 3)
    assert [dict(c.state.items()) for c in components] == [{"a": "first"}, {"a": "second"}]
    for state in states:
        state.close()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_state_not_keyed_by_the_grouping_is_not_split(tmp_path, backend):
    states = _tasks(tmp_path, backend, (1, 2))
    components = _load(states, 0)
    for component in components:
        component.state.put("total", 10)  # one key on both tasks: whose is it?
    _save(states, components, 3)
    [state] = _tasks(tmp_path, backend, (1,))
    with pytest.raises(TopologyRuntimeError) as failed:
        state.load(Counter(), 1, 3)
    assert failed.value.component == "count" and "total" in str(failed.value)
    state.close()


def test_a_new_max_parallelism_is_refused_at_restore(tmp_path):
    states = _tasks(tmp_path, "memory", (1,))
    components = _load(states, 0)
    components[0].state.put("k", 1)
    _save(states, components, 2)
    [state] = _tasks(tmp_path, "memory", (1,), max_par=64)
    with pytest.raises(TopologyRuntimeError) as failed:
        state.load(Counter(), 1, 2)
    assert "topology.max.parallelism" in str(failed.value) and "128" in str(failed.value)
    state.close()


def test_rocksdb_stores_each_key_behind_its_key_group_so_a_group_is_one_range(tmp_path):
    path = str(tmp_path / "db")
    state = RocksDBState(path, max_parallelism=100)
    keys = [*WORDS[:500], 7, ("a", 1)]
    for key in keys:
        state.put(key, 1)
    state.delete(WORDS[0])
    state.close()
    db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    stored = [(struct.unpack(">H", raw[:2])[0], pickle.loads(raw[2:])) for raw in db.keys()]
    db.close()
    assert sorted(key for _, key in stored if isinstance(key, str)) == sorted(WORDS[1:500])
    assert [group for group, _ in stored] == sorted(group for group, _ in stored)
    assert all(group == key_groups.key_group(key, 100) for group, key in stored)


def test_update_refuses_what_cannot_be_split_before_anything_stops(tmp_path):
    import stateful_word_count as swc
    from heron_spark.errors import TopologyValueError
    from heron_spark.plan.prepare import prepare
    from heron_spark.scheduler.update import check_stateful_rescale, with_parallelism

    plan = prepare(swc.build("eo", tmp_path / "c.txt", tmp_path / "out")).logical
    for change in ({"count": 3}, {"count": 1, "split": 3}):  # keyed state; stateless
        check_stateful_rescale(plan, with_parallelism(plan, change))
    with pytest.raises(TopologyValueError) as spout:
        check_stateful_rescale(plan, with_parallelism(plan, {"lines": 3}))
    assert spout.value.component == "lines" and spout.value.value == 3
    with pytest.raises(TopologyValueError) as beyond:
        with_parallelism(plan, {"count": 129})  # more tasks than key groups
    assert beyond.value.component == "count" and beyond.value.value == 129
    shuffled = prepare(swc.build("eo", tmp_path / "c.txt", tmp_path / "out")).logical
    count = shuffled.components["count"]
    count.inputs[0] = dataclasses.replace(count.inputs[0], grouping=GroupingType.SHUFFLE)
    with pytest.raises(TopologyValueError) as unkeyed:
        check_stateful_rescale(shuffled, with_parallelism(shuffled, {"count": 3}))
    assert unkeyed.value.component == "count"


def test_update_rescales_a_processing_time_window_bolt_but_not_an_event_time_one(tmp_path):
    from heron_spark import Bolt, Grouping, TopologyBuilder, TumblingWindowBolt
    from heron_spark.errors import TopologyValueError
    from heron_spark.plan.prepare import prepare
    from heron_spark.scheduler.update import check_stateful_rescale, with_parallelism
    from heron_spark.testing import ScriptedSpout

    class Windows(TumblingWindowBolt):
        outputs = ["n"]

        def processWindow(self, window_info, tuples):  # noqa: N802 - heronpy's name
            self.emit([len(tuples)])

    class Sink(Bolt):
        def process(self, tup):
            pass

    def plan(event_time: bool):
        builder = TopologyBuilder("windows")
        events = ScriptedSpout.spec(name="events", par=1, script=[])
        builder.add_spec(events)
        windows = builder.add_bolt("windows", Windows, par=2, inputs={events: Grouping.SHUFFLE},
                                   config={TumblingWindowBolt.WINDOW_DURATION_SECS: 1,
                                           "heron.window.event.time": event_time})
        builder.add_bolt("sink", Sink, par=1, inputs={windows: Grouping.SHUFFLE})
        builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
        return prepare(builder.build()).logical

    processing = plan(False)
    check_stateful_rescale(processing, with_parallelism(processing, {"windows": 3}))
    event = plan(True)
    with pytest.raises(TopologyValueError) as refused:
        check_stateful_rescale(event, with_parallelism(event, {"windows": 3}))
    assert refused.value.component == "windows"

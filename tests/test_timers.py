"""Timers of keyed bolts (issue 34 item 4): the I/O-free core (``instance.timers``), the
context's registration API, and the timers' checkpoints beside the state (``TaskState``),
split by key group when the component is rescaled."""

from __future__ import annotations

import pickle

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api.state import StatefulComponent
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.contract import key_groups
from heron_spark.errors import TopologyRuntimeError, TopologyTypeError, TopologyValueError
from heron_spark.instance.shell import build_executor
from heron_spark.instance.stateful import KeyLayout, TaskState
from heron_spark.instance.timers import (EVENT, PROCESSING, KeyedTimers, merge_snapshots,
                                         split_by_key_group, uses_timers)
from heron_spark.plan.prepare import prepare
from heron_spark.proto import stmgr_pb2
from heron_spark.scheduler.update import check_stateful_rescale, with_parallelism
from heron_spark.statemgr.checkpoints import CheckpointStore
from heron_spark.testing import wait_until
from heron_spark.wire import frames


# ---- the core ------------------------------------------------------------------------------
def test_event_timers_fire_in_time_order_then_key_order_once_the_watermark_reaches_them():
    timers = KeyedTimers("c")
    for key, ts in [("b", 30), ("a", 10), ("c", 20), ("a", 30), ("b", 10), ("z", 31)]:
        timers.register(EVENT, key, ts)
    assert list(timers.fire_event(9)) == []
    assert list(timers.fire_event(30)) == [("a", 10), ("b", 10), ("c", 20), ("a", 30),
                                           ("b", 30)]
    assert list(timers.fire_event(30)) == []  # each fires once
    assert timers.timers(EVENT) == [("z", 31)] and len(timers) == 1


def test_ties_between_keys_of_different_types_have_one_order_in_every_process():
    keys = ["b", 2, ("a", 1), "a", 1.5, ("a", "x"), b"k", None, True]
    orders = []
    for permutation in (keys, list(reversed(keys)), keys[3:] + keys[:3]):
        timers = KeyedTimers()
        for key in permutation:
            timers.register(EVENT, key, 5)
        orders.append([key for key, _ in timers.fire_event(5)])
    assert orders[0] == orders[1] == orders[2]
    assert sorted(map(repr, orders[0])) == sorted(map(repr, keys))


def test_a_timer_registered_twice_is_one_and_the_kinds_are_apart():
    timers = KeyedTimers()
    timers.register(EVENT, "k", 5)
    timers.register(EVENT, "k", 5)
    timers.register(PROCESSING, "k", 5)
    assert list(timers.fire_event(100)) == [("k", 5)]
    assert list(timers.due_processing(100)) == [("k", 5)]


def test_deleted_timers_do_not_fire_and_one_registered_again_fires_once():
    timers = KeyedTimers()
    timers.register(EVENT, "gone", 1)
    timers.register(EVENT, "again", 2)
    timers.delete(EVENT, "gone", 1)
    timers.delete(EVENT, "again", 2)
    timers.register(EVENT, "again", 2)
    timers.delete(EVENT, "never-registered", 3)
    timers.delete(PROCESSING, "again", 2)  # the other kind: not this one
    assert list(timers.fire_event(10)) == [("again", 2)]
    assert len(timers) == 0


def test_many_deletes_compact_the_heap_even_while_timers_fire():
    timers = KeyedTimers()
    for i in range(200):
        timers.register(EVENT, i, i)
    fired = []
    for key, _ts in timers.fire_event(150):
        fired.append(key)
        if key == 0:  # deleting from inside on_timer: the heap shrinks under the iteration
            for i in range(1, 200, 2):
                timers.delete(EVENT, i, i)
    assert fired == [0, *range(2, 151, 2)]
    assert len(timers._queues[EVENT].heap) < 200
    assert [key for key, _ in timers.timers(EVENT)] == list(range(152, 200, 2))


def test_a_timer_registered_while_firing_for_a_reached_time_fires_in_the_same_advance():
    timers = KeyedTimers()
    timers.register(EVENT, "a", 10)
    fired = []
    for key, ts in timers.fire_event(20):
        fired.append((key, ts))
        if key == "a":
            timers.register(EVENT, "b", 15)   # reached: fires now, after a
            timers.register(EVENT, "c", 5)    # already passed: fires now too
            timers.register(EVENT, "d", 21)   # not reached
    assert fired == [("a", 10), ("c", 5), ("b", 15)]
    assert timers.timers(EVENT) == [("d", 21)]


def test_processing_timers_are_due_by_the_wall_clock_and_name_their_next_deadline():
    timers = KeyedTimers()
    assert timers.next_processing_deadline() is None
    timers.register(PROCESSING, "x", 1_700_000_000_500)
    timers.register(PROCESSING, "y", 1_700_000_000_100)
    timers.register(EVENT, "e", 5)
    assert timers.next_processing_deadline() == 1_700_000_000_100
    assert list(timers.due_processing(1_700_000_000_099)) == []
    assert list(timers.due_processing(1_700_000_000_200)) == [("y", 1_700_000_000_100)]
    timers.delete(PROCESSING, "x", 1_700_000_000_500)
    assert timers.next_processing_deadline() is None
    assert timers.next_event_time() == 5


def test_bad_times_kinds_and_keys_are_refused_naming_the_component():
    timers = KeyedTimers("counts")
    for ts in (1.5, "10", None, True):
        with pytest.raises(TopologyTypeError) as bad:
            timers.register(EVENT, "k", ts)
        assert bad.value.component == "counts" and bad.value.value == ts
    with pytest.raises(TopologyTypeError) as bad:
        timers.register("wall", "k", 1)
    assert bad.value.value == "wall"
    with pytest.raises(TopologyTypeError):
        timers.register(EVENT, ["a", "list"], 1)
    import numpy as np

    timers.register(EVENT, "k", np.int64(7))  # NumPy integers are ints
    assert timers.timers(EVENT) == [("k", 7)] and type(timers.timers(EVENT)[0][1]) is int


def test_a_snapshot_is_plain_data_and_restores_the_same_timers():
    timers = KeyedTimers()
    for i in range(50):
        timers.register(EVENT, f"k{i % 7}", 1000 - i)
        timers.register(PROCESSING, ("k", i % 3), 10 * i)
    snapshot = pickle.loads(pickle.dumps(timers.snapshot()))
    again = KeyedTimers()
    again.restore(snapshot)
    for kind in (EVENT, PROCESSING):
        assert again.timers(kind) == timers.timers(kind)
    assert list(again.fire_event(2000)) == list(timers.fire_event(2000))
    assert list(again.due_processing(2000)) == list(timers.due_processing(2000))
    with pytest.raises(ValueError, match="format"):
        again.restore({"event": []})


def test_split_by_key_group_gives_each_key_to_the_task_its_grouping_routes_it_to():
    timers = KeyedTimers()
    keys = [f"word-{i}" for i in range(300)] + [("a", 1), ("b", 2), 17, ""]
    for i, key in enumerate(keys):
        timers.register(EVENT, key, i)
        timers.register(PROCESSING, key, 5000 + i)
    parts = split_by_key_group(timers.snapshot(), 128)
    for group, part in parts.items():
        for kind in (EVENT, PROCESSING):
            assert all(key_groups.key_group(key, 128) == group for key, _ in part[kind])
    merged = merge_snapshots(list(parts.values()))
    for kind in (EVENT, PROCESSING):
        assert sorted(map(repr, merged[kind])) == sorted(map(repr, timers.snapshot()[kind]))


def test_uses_timers_is_a_class_overriding_on_timer():
    assert uses_timers(KeyedCount) and not uses_timers(NoTimers) and not uses_timers(Bolt)


# ---- checkpoints beside the state ----------------------------------------------------------
class KeyedCount(Bolt, StatefulComponent):
    def init_state(self, state):
        self.state = state

    def process(self, tup):
        pass

    def on_timer(self, key, ts_ms, kind):
        pass


class Counts(StatefulComponent):
    """What ``TaskState`` sees of a stateful bolt: its ``init_state``."""

    def init_state(self, state):
        self.state = state


class NoTimers(Bolt):
    outputs = ["n"]

    def process(self, tup):
        self.context.register_event_time_timer(tup.values[0], 5)

    def initialize(self, config, context):
        self.context = context


def _tasks(tmp_path, tasks: tuple[int, ...], backend: str = "memory", max_par: int = 128):
    config = SystemConfig(work_dir=str(tmp_path / "work"), checkpoint_root=str(tmp_path / "root"))
    out = []
    for index, task in enumerate(tasks):
        state = TaskState(config, "topo", task, "count", StateSettings(backend, 0.0),
                          layout=KeyLayout(index, tasks, max_par))
        state.timers = KeyedTimers("count")
        out.append(state)
    return out


def _save(states, checkpoint_id: int, component=None) -> None:
    for state in states:
        state.snapshot(component if component is not None else Counts(), checkpoint_id)
    for state in states:
        done: list = []
        wait_until(lambda s=state, d=done: d.extend(s.finished()) or bool(d), 30,
                   interval=0.01, message="upload finished")
        assert done == [(checkpoint_id, None)]
        state.close()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_timers_are_saved_with_the_state_and_restored_with_it(tmp_path, backend):
    [state] = _tasks(tmp_path, (3,), backend)
    component = Counts()
    state.load(component, 0, 0)
    component.state.put("k", 1)
    assert state.timers is not None
    state.timers.register(EVENT, "k", 1000)
    state.timers.register(PROCESSING, "k", 2000)
    _save([state], 4)
    state.timers.register(EVENT, "late", 1)  # after checkpoint 4: not in it
    [again] = _tasks(tmp_path, (3,), backend)
    component = Counts()
    again.load(component, 1, 4)
    assert dict(component.state.items()) == {"k": 1}
    assert again.timers is not None
    assert again.timers.timers(EVENT) == [("k", 1000)]
    assert again.timers.timers(PROCESSING) == [("k", 2000)]
    again.close()


def test_a_bolt_with_timers_but_no_state_saves_its_timers_and_the_layout(tmp_path):
    states = _tasks(tmp_path, (1, 2))
    for state in states:
        state.load(object(), 0, 0)
        assert state.timers is not None
        state.timers.register(EVENT, f"t{state.task_id}", 5)
    _save(states, 2, object())
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    assert store.load_component(2, "count")["tasks"] == [1, 2]
    assert store.load(2, 1) is None  # no state file: only the timers
    [again] = _tasks(tmp_path, (7,))
    again.load(object(), 1, 2)  # 2 -> 1 task: every timer
    assert again.timers is not None
    assert again.timers.timers(EVENT) in ([("t1", 5), ("t2", 5)], [("t2", 5), ("t1", 5)])
    again.close()


def test_a_rescale_2_3_1_moves_each_keys_timers_to_the_task_owning_its_key_group(tmp_path):
    keys = [f"key-{i}" for i in range(400)]
    expected = {key: (i, 10_000 + i) for i, key in enumerate(keys)}
    layouts = [(3, 4), (2, 5, 9), (7,)]
    states = _tasks(tmp_path, layouts[0])
    for state in states:
        state.load(Counts(), 0, 0)
    for key, (event_ts, processing_ts) in expected.items():
        index = key_groups.task_of_key_group(key_groups.key_group(key, 128), 2, 128)
        timers = states[index].timers
        assert timers is not None
        timers.register(EVENT, key, event_ts)
        timers.register(PROCESSING, key, processing_ts)
    _save(states, 5)
    checkpoint = 5
    for tasks in layouts[1:]:
        states = _tasks(tmp_path, tasks)
        seen: dict = {}
        for index, state in enumerate(states):
            state.load(Counts(), 1, checkpoint)
            owned = key_groups.key_group_range(index, len(tasks), 128)
            timers = state.timers
            assert timers is not None
            events = dict(timers.timers(EVENT))
            processing = dict(timers.timers(PROCESSING))
            assert set(events) == set(processing)
            for key in events:
                assert key not in seen and key_groups.key_group(key, 128) in owned
                seen[key] = (events[key], processing[key])
        assert seen == expected
        checkpoint += 1
        _save(states, checkpoint)


def test_timers_not_keyed_by_the_grouping_are_not_split(tmp_path):
    states = _tasks(tmp_path, (1, 2))
    for state in states:
        state.load(Counts(), 0, 0)
        assert state.timers is not None
        state.timers.register(EVENT, "everywhere", 5)  # one key on both tasks: whose is it?
    _save(states, 3)
    [state] = _tasks(tmp_path, (1,))
    with pytest.raises(TopologyRuntimeError) as failed:
        state.load(Counts(), 1, 3)
    assert failed.value.component == "count" and "everywhere" in str(failed.value)
    state.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_restore_whose_timers_file_is_missing_or_corrupt_fails(tmp_path, damage):
    [state] = _tasks(tmp_path, (1,))
    state.load(Counts(), 0, 0)
    _save([state], 6)
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    path = store.path(6, 1, "timers")
    if damage == "missing":
        store.fs.delete_file(path)
    else:
        with open(path, "wb") as damaged:
            damaged.write(pickle.dumps({"format": "something else"}))
    [again] = _tasks(tmp_path, (1,))
    with pytest.raises(TopologyRuntimeError) as failed:
        again.load(Counts(), 1, 6)
    assert failed.value.component == "count" and failed.value.task_id == 1
    again.close()


# ---- the context and the executor ----------------------------------------------------------
class Keys(Spout):
    outputs = ["key"]

    def next_tuple(self):
        self.declare_exhausted()


class Deadlines(Bolt):
    """Keeps each timer that fires as (key, ts, kind)."""

    def initialize(self, config, context):
        self.context = context
        self.fired = []

    def process(self, tup):
        pass

    def on_timer(self, key, ts_ms, kind):
        self.fired.append((key, ts_ms, kind))


def _executor(tmp_path, bolt_class, name: str = "timed", task_of: str = "bolt"):
    builder = TopologyBuilder(name)
    keys = builder.add_spout("keys", Keys, par=1)
    builder.add_bolt("bolt", bolt_class, par=1, inputs={keys: Grouping.fields("key")})
    prepared = prepare(builder.build(), conf={"heron.work.dir": str(tmp_path / "work")})
    sent: list = []
    task = prepared.view.component_tasks[task_of][0]
    bolt = build_executor(prepared.view, task, prepared.system, sent.append)
    bolt.offer(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    bolt.turn(bolt.clock())
    return bolt, sent


def test_registering_a_timer_without_on_timer_names_the_component_and_the_fix(tmp_path):
    bolt, _ = _executor(tmp_path, NoTimers)
    with pytest.raises(TopologyTypeError) as bad:
        bolt.context.register_event_time_timer("k", 5)
    assert bad.value.component == "bolt" and "on_timer" in bad.value.fix
    bolt.close()
    spout, _ = _executor(tmp_path, NoTimers, task_of="keys")
    for register in (spout.context.register_processing_time_timer,
                     spout.context.delete_event_time_timer):
        with pytest.raises(TopologyTypeError) as bad:
            register("k", 5)
        assert bad.value.component == "keys" and "bolt" in bad.value.fix
    spout.close()


def test_the_executor_fires_processing_timers_at_their_wall_clock_deadline(tmp_path):
    import time

    bolt, _ = _executor(tmp_path, Deadlines)
    fired = bolt.component.fired
    now_ms = int(time.time() * 1000)
    context = bolt.context
    context.register_processing_time_timer("soon", now_ms + 150)
    context.register_processing_time_timer("past", now_ms - 10)
    context.register_processing_time_timer("never", now_ms + 100)
    context.delete_processing_time_timer("never", now_ms + 100)
    context.register_processing_time_timer("later", now_ms + 60_000)
    deadline = bolt.turn(bolt.clock())  # the past timer fires at once
    assert fired == [("past", now_ms - 10, PROCESSING)]
    assert deadline is not None and deadline - bolt.clock() <= 0.16
    wait_until(lambda: bolt.turn(bolt.clock()) is not None and len(fired) == 2, 5,
               interval=0.01, message="the timer of 'soon' fired")
    assert int(time.time() * 1000) >= now_ms + 150
    assert fired[1] == ("soon", now_ms + 150, PROCESSING)
    bolt.close()


def test_rescaling_a_bolt_with_timers_needs_a_fields_grouped_input():
    class Timed(Bolt):
        def process(self, tup):
            pass

        def on_timer(self, key, ts_ms, kind):
            pass

    builder = TopologyBuilder("rescale-timers")
    keys = builder.add_spout("keys", Keys, par=1)
    builder.add_bolt("bolt", Timed, par=2, inputs={keys: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    plan = prepare(builder.build()).logical
    with pytest.raises(TopologyValueError) as refused:
        check_stateful_rescale(plan, with_parallelism(plan, {"bolt": 3}))
    assert refused.value.component == "bolt"

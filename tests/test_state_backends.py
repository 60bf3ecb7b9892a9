"""State backends (``heron.state.backend``) and asynchronous, incremental checkpoints.

Both backends answer the same ``State`` calls (TTL on a fake clock, delete, items,
enumerate); the checkpoint store keeps a RocksDB checkpoint as a manifest of shared SST files
uploaded once and deleted when no retained checkpoint references them; a restore from a
missing or damaged file fails instead of starting empty; a task reports a save only once its
upload is done, and a failed upload fails the task.
"""

from __future__ import annotations

import os
import threading

import pytest

from executor_frames import stored_ids
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api.state import HashMapState, StatefulComponent
from heron_spark.config import (STATE_BACKEND, STATE_TTL_SECS, StateSettings, SystemConfig,
                                build_system_config)
from heron_spark.errors import ConfigError, ExtrasError, TopologyRuntimeError
from heron_spark.instance.rocksdb_state import RocksDBState
from heron_spark.instance.shell import build_executor
from heron_spark.instance.stateful import TaskState
from heron_spark.instance.uploader import Uploader
from heron_spark.plan.prepare import prepare
from heron_spark.proto import stmgr_pb2
from heron_spark.statemgr.checkpoints import SHARED, CheckpointStore
from heron_spark.testing import ManualClock, run_local, wait_until
from heron_spark.wire import frames


def _state(backend: str, tmp_path, **kwargs):
    if backend == "memory":
        return HashMapState(**kwargs)
    return RocksDBState(str(tmp_path / "db"), **kwargs)


# ---- the backends ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_put_get_delete_items_enumerate(backend, tmp_path):
    state = _state(backend, tmp_path)
    for i in range(5):
        state.put(f"k{i}", {"n": i})
    state.put("k0", {"n": 10})
    state.delete("k3")
    state.delete("absent")
    assert state.get("k0") == {"n": 10} and state.get("k3") is None
    items = state.items()
    assert iter(items) is items  # an iterator, not a list built first
    assert dict(items) == {"k0": {"n": 10}, "k1": {"n": 1}, "k2": {"n": 2}, "k4": {"n": 4}}
    assert sorted(key for _, key in state.enumerate()) == ["k0", "k1", "k2", "k4"]
    state.clear()
    assert list(state.items()) == [] and state.get("k1") is None
    state.put(("a", 1), 2)
    assert state.get(("a", 1)) == 2


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_expired_keys_are_never_returned(backend, tmp_path):
    clock = ManualClock(1000.0)
    state = _state(backend, tmp_path, ttl_secs=10.0, clock=clock)
    state.put("old", 1)
    clock.now += 6
    state.put("new", 2)
    assert dict(state.items()) == {"old": 1, "new": 2}
    clock.now += 4  # "old" is 10 s old: gone
    assert state.get("old") is None and dict(state.items()) == {"new": 2}
    assert [key for _, key in state.enumerate()] == ["new"]
    state.put("new", 3)  # a put starts its TTL over
    clock.now += 9
    assert state.get("new") == 3
    clock.now += 1
    assert state.get("new") is None and list(state.items()) == []


def test_rocksdb_values_go_through_the_topology_serializer(tmp_path):
    calls = []

    class Tagged:
        def serialize(self, obj):
            calls.append(obj)
            return repr(obj).encode()

        def deserialize(self, data):
            import ast
            return ast.literal_eval(data.decode())

    state = RocksDBState(str(tmp_path / "db"), Tagged())
    state.put("k", [1, 2])
    assert state.get("k") == [1, 2] and calls == ["k", [1, 2]]  # a str key's stored key is kept


def test_a_value_the_serializer_cannot_write_fails_naming_the_component_and_the_fix(tmp_path):
    state = RocksDBState(str(tmp_path / "db"), component="count")
    with pytest.raises(TopologyRuntimeError) as err:
        state.put("k", lambda: 1)  # pickle cannot write a lambda
    text = str(err.value)
    assert err.value.component == "count" and "function" in text and "Fix: put only" in text
    assert state.get("k") is None  # nothing half-written


# ---- settings ------------------------------------------------------------------------------
def test_a_bad_backend_or_ttl_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as bad:
        build_system_config({STATE_BACKEND: "redis"})
    assert bad.value.key == STATE_BACKEND and bad.value.value == "redis"
    with pytest.raises(ConfigError) as ttl:
        build_system_config({STATE_TTL_SECS: -1})
    assert ttl.value.key == STATE_TTL_SECS


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.left = 50

    def next_tuple(self):
        if self.left:
            self.emit([self.left % 7])
            self.left -= 1
        else:
            self.declare_exhausted()


class Sum(Bolt, StatefulComponent):
    def init_state(self, stateful_state):
        self.state = stateful_state

    def process(self, tup):
        self.state.put(tup.values[0], (self.state.get(tup.values[0]) or 0) + 1)


def _topology(name: str, count_config: dict | None = None, **config):
    builder = TopologyBuilder(name)
    numbers = builder.add_spout("numbers", Numbers, par=1)
    builder.add_bolt("sum", Sum, par=2, inputs={numbers: Grouping.fields("n")},
                     config=count_config)
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.05, **config})
    return builder.build()


def test_a_component_config_sets_its_own_backend_and_is_checked_at_submit():
    with pytest.raises(ConfigError) as bad:
        prepare(_topology("bad-backend", {STATE_BACKEND: "disk"}))
    assert bad.value.key == STATE_BACKEND and "sum" in bad.value.fix


def test_rocksdb_without_rocksdict_fails_at_submit_and_in_run_local(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "rocksdict" else real(name, *a))
    topology = _topology("no-rocksdict", **{STATE_BACKEND: "rocksdb"})
    with pytest.raises(ExtrasError) as missing:
        prepare(topology)
    assert missing.value.component == "sum" and missing.value.package == "rocksdict"
    assert missing.value.extra == "rocksdb"
    with pytest.raises(ExtrasError):
        run_local(topology, conf={"heron.work.dir": str(tmp_path)}, timeout=60)


# ---- the checkpoint store ------------------------------------------------------------------
def _task_state(tmp_path, backend="rocksdb", task=1, **system) -> TaskState:
    config = SystemConfig(work_dir=str(tmp_path / "work"),
                          checkpoint_root=str(tmp_path / "root"), **system)
    return TaskState(config, "topo", task, "sum", StateSettings(backend, 0.0))


class Stateful(StatefulComponent):
    def init_state(self, state):
        self.state = state


def _finish(task: TaskState, count: int = 1) -> list:
    done: list = []
    wait_until(lambda: done.extend(task.finished()) or len(done) >= count, 30,
               interval=0.01, message="uploads finished")
    return done


def _shared(tmp_path) -> set[str]:
    folder = tmp_path / "root" / "topo" / SHARED
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_shared_files_are_uploaded_once_and_retain_deletes_unreferenced_ones(tmp_path):
    task, component = _task_state(tmp_path), Stateful()
    task.load(component, 0, 0)
    state = task.state
    for i in range(200):
        state.put(f"a{i}", i)
    task.snapshot(component, 1)
    assert _finish(task) == [(1, None)]
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    first = store.load_manifest(1, 1)
    assert first is not None and any(e.shared for e in first)
    shared_1 = {e.sha256 for e in first if e.shared}
    assert _shared(tmp_path) == shared_1

    inodes = {sha: os.stat(store.shared_path(sha)).st_ino for sha in shared_1}
    for i in range(200):
        state.put(f"b{i}", i)
    task.snapshot(component, 2)
    assert _finish(task) == [(2, None)]
    second = store.load_manifest(2, 1)
    shared_2 = {e.sha256 for e in second if e.shared}
    assert shared_1 < shared_2  # the first SST is still in the database: referenced, not copied
    assert _shared(tmp_path) == shared_2
    # not written again (a write is a new file moved into place)
    assert {sha: os.stat(store.shared_path(sha)).st_ino for sha in shared_1} == inodes

    state._db.compact_range(None, None)  # one SST replaces both: the old ones leave the db
    task.snapshot(component, 3)
    assert _finish(task) == [(3, None)]
    shared_3 = {e.sha256 for e in store.load_manifest(3, 1) if e.shared}
    assert not shared_3 & shared_2
    store.retain(3)
    assert store.checkpoints() == [3] and _shared(tmp_path) == shared_3
    store.clear()
    assert store.checkpoints() == [] and _shared(tmp_path) == set()
    task.close()


def test_shared_files_of_an_upload_in_flight_are_kept(tmp_path):
    task, component = _task_state(tmp_path), Stateful()
    task.load(component, 0, 0)
    task.state.put("k", "v")
    task.snapshot(component, 1)
    _finish(task)
    task.close()
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    manifest = store.path(1, 1, "manifest")
    with open(manifest, "rb") as source:
        listed = source.read()
    # checkpoint 2 is being uploaded: its list names the same files, its manifest is not there
    os.makedirs(os.path.dirname(store.path(2, 1)))
    with open(store.path(2, 1, "uploading"), "wb") as pending:
        pending.write(listed)
    shared = _shared(tmp_path)
    store.retain(2)
    assert store.checkpoints() == [2] and _shared(tmp_path) == shared and shared
    os.remove(store.path(2, 1, "uploading"))
    store.retain(2)
    assert _shared(tmp_path) == set()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_restore_gets_the_checkpointed_state_back(tmp_path, backend):
    task, component = _task_state(tmp_path, backend), Stateful()
    task.load(component, 0, 0)
    for i in range(100):
        task.state.put(i, str(i))
    task.snapshot(component, 4)
    task.state.put("after", 1)  # not in checkpoint 4
    _finish(task)
    task.close()
    again, component = _task_state(tmp_path, backend), Stateful()
    again.load(component, 1, 4)
    assert dict(component.state.items()) == {i: str(i) for i in range(100)}
    again.close()


@pytest.mark.parametrize("damage", ["missing-manifest", "missing-file", "corrupt-file"])
def test_a_restore_from_a_missing_or_corrupt_file_fails(tmp_path, damage):
    task, component = _task_state(tmp_path), Stateful()
    task.load(component, 0, 0)
    task.state.put("k", "v")
    task.snapshot(component, 7)
    _finish(task)
    task.close()
    store = CheckpointStore(str(tmp_path / "root"), "topo")
    if damage == "missing-manifest":
        os.remove(store.path(7, 1, "manifest"))
    else:
        [entry] = [e for e in store.load_manifest(7, 1) if e.shared]
        path = store.entry_path(7, 1, entry)
        if damage == "missing-file":
            os.remove(path)
        else:
            with open(path, "r+b") as damaged:
                damaged.seek(entry.size // 2)
                damaged.write(b"\xff\x00\xff")
    again = _task_state(tmp_path)
    with pytest.raises(TopologyRuntimeError) as failed:
        again.load(Stateful(), 1, 7)
    assert failed.value.component == "sum" and failed.value.task_id == 1
    again.close()


# ---- asynchronous saves --------------------------------------------------------------------
def test_the_uploader_queue_is_bounded_and_reports_in_order():
    release = threading.Event()
    uploader = Uploader(1, "test-uploader")
    uploader.submit(1, release.wait)
    uploader.submit(2, lambda: None)  # waits in the queue (capacity 1)
    third = threading.Thread(target=uploader.submit, args=(3, lambda: None))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # the queue is full: the task's thread would wait
    assert uploader.finished() == []
    release.set()
    third.join(10)
    done: list = []
    wait_until(lambda: done.extend(uploader.finished()) or len(done) == 3, 10, interval=0.01)
    assert done == [(1, None), (2, None), (3, None)] and uploader.pending == 0
    uploader.close()


def _bolt(tmp_path, backend: str, **system):
    topology = _topology("async-save", **{STATE_BACKEND: backend})
    prepared = prepare(topology, conf={"heron.work.dir": str(tmp_path / "work"), **system})
    view = prepared.view
    sent: list = []
    task = view.component_tasks["sum"][0]
    bolt = build_executor(view, task, prepared.system, sent.append)
    bolt.offer(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    bolt.turn(bolt.clock())
    return bolt, sent


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_save_is_reported_only_once_its_upload_is_done(tmp_path, backend):
    bolt, sent = _bolt(tmp_path, backend)
    bolt.component.state.put("k", 1)
    release = threading.Event()
    bolt.stateful._uploader.submit(0, release.wait)  # holds the uploader: checkpoint 5 waits
    bolt.checkpoint(5)
    store = bolt.stateful.store
    suffix = "state" if backend == "memory" else "manifest"
    path = store.path(5, bolt.task_id, suffix)
    bolt.turn(bolt.clock())
    assert 5 not in stored_ids(sent) and not os.path.exists(path)
    release.set()
    wait_until(lambda: bolt.turn(bolt.clock()) is not None and 5 in stored_ids(sent), 30,
               interval=0.01, message="the save report")
    assert os.path.exists(path)
    bolt.close()


def test_a_failed_upload_fails_the_task_and_the_checkpoint_is_never_reported(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the checkpoint root should be")
    bolt, sent = _bolt(tmp_path, "memory", **{"heron.checkpoint.root": str(blocker / "root")})
    bolt.component.state.put("k", 1)
    bolt.checkpoint(6)
    with pytest.raises(TopologyRuntimeError) as failed:
        wait_until(lambda: bolt.turn(bolt.clock()) and False, 30, interval=0.01)
    assert failed.value.component == "sum" and failed.value.task_id == bolt.task_id
    assert str(blocker) in str(failed.value)
    assert 6 not in stored_ids(sent)
    bolt.close()


# ---- values changed in place while a snapshot is being saved --------------------------------
@pytest.mark.parametrize("ttl_secs", [0.0, 60.0])
def test_a_value_changed_in_place_after_a_snapshot_leaves_the_snapshot_as_it_was(ttl_secs):
    state = HashMapState(ttl_secs=ttl_secs, clock=ManualClock(1000.0))
    state.put("list", [1, 2, 3])
    state.put("nested", {"a": [1]})
    state.put("count", 7)
    _, entries = state.snapshot()  # what the uploader thread pickles later
    state.get("list").append(4)
    for key, value in state.items():
        if key == "nested":
            value["a"].append(2)
    state.get("list").append(5)  # the copy is kept: later reads see every change
    saved = {key: (entry[1] if ttl_secs else entry) for key, entry in entries.items()}
    assert saved == {"list": [1, 2, 3], "nested": {"a": [1]}, "count": 7}
    assert state.to_dict() == {"list": [1, 2, 3, 4, 5], "nested": {"a": [1, 2]}, "count": 7}


def test_values_put_after_a_snapshot_and_immutable_ones_are_not_copied():
    state = HashMapState()
    word = "a" * 100
    state.put("word", word)
    state.put("before", [0])
    state.snapshot()
    fresh = [1]
    state.put("fresh", fresh)
    assert state.get("word") is word and state.get("fresh") is fresh
    assert state.get("before") == [0] and state.get("before") is state.get("before")


class _OwnState:
    """A user's State that copies nothing on write (init_state's object replaced)."""

    def __init__(self, entries):
        self.entries = entries

    def items(self):
        return iter(self.entries.items())


def test_a_users_own_state_is_pickled_when_the_checkpoint_reaches_the_task(tmp_path):
    task, component = _task_state(tmp_path, "memory"), Stateful()
    task.load(component, 0, 0)
    own = _OwnState({"list": [1]})
    task.state = own
    task.snapshot(component, 3)
    own.entries["list"].append(2)  # after the checkpoint: not in it, whenever the upload runs
    _finish(task)
    task.close()
    again, component = _task_state(tmp_path, "memory"), Stateful()
    again.load(component, 1, 3)
    assert dict(component.state.items()) == {"list": [1]}
    again.close()


def test_a_memory_state_file_is_pickled_in_slices_and_reads_back_whole():
    """Slices let the uploader thread give the GIL back (benchmarks/state.py measures the
    gaps); the file reads back as one dict, and extra or missing bytes are refused."""
    import io
    import pickle

    from heron_spark.statemgr.checkpoints import decode_memory_state, encode_memory_state

    entries = {f"k{i}": [i] for i in range(10)}
    data = encode_memory_state(5.0, entries, chunk_keys=3)
    stream = io.BytesIO(data)
    header = pickle.load(stream)
    assert header["chunks"] == 4
    assert [len(pickle.load(stream)) for _ in range(4)] == [3, 3, 3, 1]
    assert decode_memory_state(data) == (5.0, entries)
    assert decode_memory_state(encode_memory_state(0.0, {})) == (0.0, {})
    with pytest.raises(ValueError, match="after the last slice"):
        decode_memory_state(data + pickle.dumps({}))
    with pytest.raises((EOFError, pickle.UnpicklingError)):  # cut short
        decode_memory_state(data[: len(data) // 2])


@pytest.mark.parametrize("stateful", [True, False])
def test_event_time_progress_is_saved_beside_the_state_and_read_back_by_its_own_task_only(
        tmp_path, stateful):
    from heron_spark.instance.stateful import KeyLayout

    def task_state(task: int, index: int, tasks: tuple) -> TaskState:
        config = SystemConfig(work_dir=str(tmp_path / "work"),
                              checkpoint_root=str(tmp_path / "root"))
        return TaskState(config, "topo", task, "sum", StateSettings("memory", 0.0),
                         layout=KeyLayout(index, tasks, 128))

    component = Stateful() if stateful else object()
    first = task_state(1, 0, (1, 2))
    first.load(component, 0, 0)
    assert first.time_state is None
    first.snapshot(component, 3, {"input": {"marks": {7: 1_500}, "watermark": 1_500}})
    assert _finish(first) == [(3, None)]
    again = task_state(1, 0, (1, 2))
    again.load(component, 1, 3)
    assert again.time_state == {"input": {"marks": {7: 1_500}, "watermark": 1_500}}
    rescaled = task_state(1, 0, (1, 2, 3))  # another parallelism: watermarks start over
    rescaled.load(component, 1, 3)
    assert rescaled.time_state is None
    for task in (first, again, rescaled):
        task.close()

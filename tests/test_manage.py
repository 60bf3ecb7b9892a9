"""Managing a running topology as Heron users do: deactivate / activate, restart, update,
from the handle and from the ``heron-spark`` CLI (subprocesses), on real processes
(``local[4]``).

- Deactivate: every spout gets ``deactivate()`` once and no more ``next_tuple``; acks still
  flow (every tuple emitted before is acked while paused); activate resumes. Deploying
  deactivated emits nothing until activated.
- Restart (one container, then all) of the at-least-once word count: exact counts after
  de-duplication. Its update (count 2 -> 3 -> 1) after a deactivation, where after each update
  every word reaches exactly one count task of that parallelism (fields grouping stays
  consistent): ``test_session_parity.py``, on a classic and a Connect session.
"""

from __future__ import annotations

import subprocess
import sys

import fault_support as faults
import heron_spark
import manage_topologies as mt
import pytest
import reliable_word_count as rwc
from heron_spark.contract import execution_state
from heron_spark.errors import TopologyStateError, TopologyValueError
from heron_spark.proto import physical_plan_pb2
from heron_spark.scheduler.submit import submit
from heron_spark.scheduler.update import with_parallelism
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tmaster import client

TIMEOUT = 240
SPOUTS = 2
WC_CONF = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 300}


# ---- no Spark ------------------------------------------------------------------------------
def test_update_request_is_checked_before_anything(tmp_path):
    from heron_spark.plan.prepare import prepare

    plan = prepare(rwc.build("wc", tmp_path / "c.txt", tmp_path / "out")).logical
    with pytest.raises(TopologyValueError) as bad_name:
        with_parallelism(plan, {"nope": 2})
    assert bad_name.value.component == "nope"
    for count in (0, -1, True, "3"):
        with pytest.raises(TopologyValueError) as bad_count:
            with_parallelism(plan, {"count": count})
        assert bad_count.value.component == "count" and bad_count.value.value == count
    with pytest.raises(TopologyValueError):
        with_parallelism(plan, {"count": 2})  # unchanged
    with pytest.raises(TopologyValueError):
        with_parallelism(plan, {})
    rescaled = with_parallelism(plan, {"count": 3, "split": 1})
    assert [rescaled.components[c].parallelism for c in ("lines", "split", "count")] == [2, 1, 3]
    assert plan.components["count"].parallelism == 2  # the running plan is untouched


def test_cli_version_and_update_flags():
    from heron_spark.cli.main import _parallelism_pairs, build_parser

    args = build_parser().parse_args(["update", "wc", "--component-parallelism", "count:3",
                                      "--component-parallelism", "split:1"])
    assert _parallelism_pairs(args.component_parallelism) == {"count": 3, "split": 1}
    assert build_parser().parse_args(["submit", "--deploy-deactivated", "f.py"]).deploy_deactivated
    with pytest.raises(SystemExit):
        _parallelism_pairs(["count"])
    done = _cli("version")
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["heron_spark", "pyspark", "pyarrow", "python"]


# ---- helpers ---------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "heron_spark.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


def _lines(out, task: int) -> list[str]:
    return mt.read_spout_logs(out).get(task, [])


def _acks(out, task: int) -> int:
    return _lines(out, task).count("ack")


def _last(out, task: int, verb: str) -> int | None:
    values = [int(line.split()[1]) for line in _lines(out, task) if line.startswith(verb + " ")]
    return values[-1] if values else None


def _spout_tasks(handle) -> list[int]:
    return sorted(i.task_id for i in handle.physical_plan.instances if i.component == "numbers")


def _execution_state(hconf, name: str) -> str:
    with open_state_manager(hconf["heron.statemgr"]) as statemgr:
        return execution_state.state_of(statemgr.get_execution_state(name))


# ---- deactivate / activate -----------------------------------------------------------------
@pytest.mark.spark
def test_deactivate_stops_spouts_and_activate_resumes(spark, tmp_path, hconf, tmaster_placement):
    name, out = "manage-pause", tmp_path / "out"
    handle = submit(mt.build_activation(name, out), spark=spark.session, conf=hconf,
                    master="local[4]")
    try:
        assert handle.wait_running(timeout=120)
        assert handle.status == "RUNNING"
        with pytest.raises(TopologyStateError) as running:
            handle.activate()
        assert running.value.state == "RUNNING"
        tasks = _spout_tasks(handle)
        wait_until(lambda: all(_acks(out, t) > 50 for t in tasks), 60, message="spouts to emit")

        with open_state_manager(hconf["heron.statemgr"]) as statemgr:  # as the tracker does
            with pytest.raises(TopologyStateError) as remote:
                client.activate_topology(statemgr, name)
            assert (remote.value.code, remote.value.topology, remote.value.state,
                    remote.value.action) == ("TOPOLOGY_STATE", name, "RUNNING", "activate it")
            if tmaster_placement == "container":  # only the submitter can start containers
                with pytest.raises(TopologyStateError) as outside:
                    client.update_topology(statemgr, name, {"nope": 2})
                assert outside.value.code == "TOPOLOGY_STATE"
                assert "handle.update" in outside.value.fix
            else:
                with pytest.raises(TopologyValueError) as unknown:
                    client.update_topology(statemgr, name, {"nope": 2})
                assert (unknown.value.code, unknown.value.component) == ("TOPOLOGY_VALUE",
                                                                         "nope")
            with pytest.raises(TopologyValueError) as container:
                client.restart_topology(statemgr, name, 5)
            assert (container.value.code, container.value.kind, container.value.value) == \
                ("TOPOLOGY_VALUE", "container", 5)
            assert client.deactivate_topology(statemgr, name) == "PAUSED"
        # A TMaster in container 0's last answer is cached for 0.5 s (scheduler/remote.py): the
        # handle sees a change made through another client once that answer is older.
        wait_until(lambda: handle.status == "PAUSED", 10, interval=0.1,
                   message="the handle to see the deactivation")
        assert handle.physical_plan.state == physical_plan_pb2.PAUSED
        assert _execution_state(hconf, name) == "PAUSED"
        with pytest.raises(TopologyStateError) as again:
            handle.deactivate()
        assert again.value.state == "PAUSED"
        wait_until(lambda: all(_last(out, t, "deactivate") is not None for t in tasks), 30,
                   message="deactivate() on every spout")
        stopped = {t: _last(out, t, "deactivate") for t in tasks}
        # Acks still flow while paused: every tuple emitted before deactivate() is acked.
        wait_until(lambda: all(_acks(out, t) == stopped[t] for t in tasks), 60,
                   message="every tuple emitted before the deactivation to be acked")

        handle.activate()
        assert handle.status == "RUNNING"
        wait_until(lambda: all(_last(out, t, "activate") == stopped[t] for t in tasks), 30,
                   message="activate() on every spout, with nothing emitted while paused")
        wait_until(lambda: all(_acks(out, t) > stopped[t] + 50 for t in tasks), 60,
                   message="the spouts to emit again")
        for task in tasks:
            lines = _lines(out, task)
            assert "next_tuple-while-inactive" not in lines
            assert [line.split()[0] for line in lines if line.split()[0] in
                    ("activate", "deactivate")] == ["activate", "deactivate", "activate"]
    finally:
        handle.kill()
    assert handle.wait(timeout=60) == "KILLED"
    with pytest.raises(TopologyStateError) as ended:
        handle.deactivate()
    assert ended.value.state == "KILLED"
    with open_state_manager(hconf["heron.statemgr"]) as statemgr:
        with pytest.raises(TopologyStateError) as gone:
            client.deactivate_topology(statemgr, name)
        assert gone.value.code == "TOPOLOGY_STATE" and "KILLED" in gone.value.state


@pytest.mark.spark
@pytest.mark.tmaster_in_driver("reads the driver TMaster's per-task metrics and updates from the "
                               "CLI, which a TMaster in container 0 refuses (handle.update)")
def test_deploy_deactivated_and_every_verb_from_the_cli(spark, tmp_path, hconf):
    name, out = "manage-cli", tmp_path / "out"
    handle = submit(mt.build_activation(name, out), spark=spark.session, conf=hconf,
                    master="local[4]", deactivated=True)
    work = tmp_path / "work" / name
    try:
        assert handle.wait_running(timeout=120)
        assert handle.status == "PAUSED"
        tasks = _spout_tasks(handle)
        tmaster = handle._tmaster
        # The spouts are up and their processes publish metrics: time passed, nothing emitted.
        wait_until(lambda: all(("numbers", t) in tmaster.metrics for t in tasks)
                   and all(_lines(out, t) for t in tasks), 60, message="spouts to start")
        assert all(_lines(out, t) == ["initialize"] for t in tasks)
        listed = _cli("list")
        assert f"{name}\tPAUSED\tlive" in listed.stdout, listed

        refused = _cli("deactivate", name)
        assert refused.returncode == 1 and "PAUSED" in refused.stderr, refused
        done = _cli("activate", name)
        assert done.returncode == 0 and "RUNNING" in done.stdout, done
        assert handle.status == "RUNNING"
        wait_until(lambda: all(_acks(out, t) > 20 for t in tasks), 60, message="spouts to emit")
        assert all(_last(out, t, "activate") == 0 for t in tasks)
        assert _cli("activate", name).returncode == 1
        assert "PAUSED" in _cli("deactivate", name).stdout

        # Restart container 1 while deactivated: its new spout comes up paused.
        [spout] = [i.task_id for i in handle.physical_plan.instances
                   if i.component == "numbers" and i.container_index == 1]
        old_logs = set(out.glob(f"spout-{spout}-*.log"))
        instance_log = work / "gen-0" / "container-1" / "logs" / f"instance-numbers-{spout}.log"
        [old_stmgr] = faults.find(work, "stmgr", container=1)
        [other_stmgr] = faults.find(work, "stmgr", container=0)
        assert _cli("restart", name, "7").returncode == 1  # no such container
        done = _cli("restart", name, "1")
        assert done.returncode == 0, done
        wait_until(lambda: [s for s in handle.physical_plan.stmgrs
                            if s.container_index == 1 and s.pid != old_stmgr], 60,
                   message="the TMaster to re-broadcast the plan with the restarted stmgr")
        # start() logs this after initialize() and (were it active) activate() returned.
        wait_until(lambda: instance_log.read_text().count(f"task {spout} of numbers "
                                                          f"started") == 2, 60,
                   message="the restarted spout to start")
        [new_log] = set(out.glob(f"spout-{spout}-*.log")) - old_logs
        assert new_log.read_text().splitlines() == ["initialize"]
        assert faults.find(work, "stmgr", container=0) == [other_stmgr]
        assert _cli("activate", name).returncode == 0
        wait_until(lambda: new_log.read_text().splitlines()[:3] == ["initialize",
                                                                    "activate 0", "ack"],
                   60, message="the restarted spout to be activated and emit")

        refused = _cli("update", name, "--component-parallelism", "nope:2")
        assert refused.returncode == 1 and "nope" in refused.stderr, refused
        # Update while deactivated: the new generation comes up paused too.
        assert "PAUSED" in _cli("deactivate", name).stdout
        before = set(out.glob("spout-*.log"))
        done = _cli("update", name, "--component-parallelism", "sink:3")
        assert done.returncode == 0, done
        assert handle.wait_generation(1, 120)
        assert sum(i.component == "sink" for i in handle.physical_plan.instances) == 3
        assert handle.status == "PAUSED"
        gen1 = work / "gen-1"
        wait_until(lambda: all(f"task {t} of numbers started" in "".join(
            p.read_text() for p in gen1.glob(f"container-*/logs/instance-numbers-{t}.log"))
            for t in tasks), 60, message="the new generation's spouts to start")
        new_logs = set(out.glob("spout-*.log")) - before
        assert len(new_logs) == len(tasks)
        assert all(p.read_text().splitlines() == ["initialize"] for p in new_logs)
        assert _cli("activate", name).returncode == 0
        assert handle.status == "RUNNING"
        assert _cli("kill", name).returncode == 0
        assert handle.wait(timeout=60) == "KILLED"
        refused = _cli("activate", name)
        assert refused.returncode == 1 and "KILLED" in refused.stderr, refused
    finally:
        handle.kill()


# ---- restart and update under at-least-once -------------------------------------------------
def _start_word_count(spark, tmp_path, hconf, name, lines, **config):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, lines)
    topology = mt.build_word_count(name, corpus, out, spouts=SPOUTS,
                                   config={**WC_CONF, **config})
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    assert handle.wait_running(timeout=120)
    return text, out, handle


def _progress(out) -> int:
    return sum(path.stat().st_size for path in out.glob("count-*.log"))


def _wait_progress(out, more_than: int, what: str) -> int:
    return wait_until(lambda: (_progress(out) > more_than) and _progress(out), 90, message=what)



def _plan_stmgrs(handle) -> dict[int, int]:
    """Container index -> pid of its stmgr in the TMaster's physical plan."""
    return {s.container_index: s.pid for s in handle.physical_plan.stmgrs}


@pytest.mark.spark
def test_restart_one_container_then_all_loses_nothing(spark, tmp_path, hconf):
    name = "manage-restart"
    text, out, handle = _start_word_count(spark, tmp_path, hconf, name, 3000,
                                          **{rwc.SLEEP_MS: 3})
    work = tmp_path / "work" / name
    try:
        seen = _wait_progress(out, 20_000, "the word count to make progress")
        stmgrs = _plan_stmgrs(handle)
        assert handle.restart(1) == [1]
        wait_until(lambda: _plan_stmgrs(handle)[1] != stmgrs[1], 60,
                   message="container 1's restarted stmgr to register")
        assert _plan_stmgrs(handle)[0] == stmgrs[0]
        assert faults.find(work, "stmgr", container=0) == [stmgrs[0]]
        seen = _wait_progress(out, seen + 20_000, "progress after restarting container 1")
        stmgrs = _plan_stmgrs(handle)
        assert handle.restart() == [0, 1]
        wait_until(lambda: all(p != stmgrs[c] for c, p in _plan_stmgrs(handle).items()),
                   60, message="every restarted stmgr to register")
        with pytest.raises(TopologyValueError):
            handle.restart(2)
        assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    finally:
        handle.kill()
    assert handle.status_detail()["generation"] == 0  # restarted in place, not resubmitted
    replayed = rwc.check_exact(text, out, hconf["heron.statemgr"], name, SPOUTS)
    print(f"{replayed} word records replayed")


# ---- effectively once --------------------------------------------------------------------
@pytest.mark.spark
def test_effectively_once_checkpoints_go_on_while_deactivated(spark, tmp_path, hconf):
    import stateful_word_count as swc

    name = "manage-eo"
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 2000)
    topology = swc.build(name, corpus, out, interval=0.2)
    handle = heron_spark.submit(topology, spark=spark.session, conf={**hconf, **swc.SHORT_QUEUES},
                    master="local[4]", deactivated=True)
    try:
        assert handle.wait_running(timeout=120)
        assert handle.status == "PAUSED"
        # Checkpoints start, pass their markers through every bolt and commit while paused.
        wait_until(lambda: handle.status_detail()["checkpoint"]["committed"] >= 2, 90,
                   message="two checkpoints committed while deactivated")
        assert swc.read_counts(out) == {}
        with pytest.raises(TopologyValueError) as refused:
            handle.update({"lines": 3})  # a stateful spout's offsets are per task: refused
        assert refused.value.component == "lines"
        handle.activate()
        assert handle.wait(timeout=TIMEOUT) == "FINISHED", handle.status_detail()
    finally:
        handle.kill()
    assert swc.read_counts(out) == swc.expected_counts(text)


@pytest.mark.spark
def test_effectively_once_update_2_3_1_of_the_stateful_count_keeps_exact_counts(spark, tmp_path,
                                                                                hconf):
    """``update`` of the stateful counting bolt 2 -> 3 -> 1 while words flow: each new
    generation restores every key group's counts on the task that owns it now, so the final
    counts are exact and each word is counted by one task only. On rocksdb (key-group ranges
    read from the old tasks' databases); the memory backend's split is the same code path
    short of the files (tests/test_rescale_state.py runs both on real checkpoints), and a
    second minute of Spark here bought little."""
    import stateful_word_count as swc

    backend = "rocksdb"
    name = f"manage-eo-rescale-{backend}"
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 3000)
    topology = swc.build(name, corpus, out, interval=0.3,
                         config={swc.SLEEP_MS: 20, "heron.state.backend": backend})
    handle = heron_spark.submit(topology, spark=spark.session, conf={**hconf, **swc.SHORT_QUEUES},
                                master="local[4]")

    def committed() -> int:
        return handle.status_detail()["checkpoint"]["committed"]

    try:
        assert handle.wait_running(timeout=120)
        for count in (3, 1):
            before = committed()
            wait_until(lambda b=before: committed() >= b + 2, 90,
                       message="two checkpoints committed before the update")
            assert handle.status == "RUNNING"  # the input still flows
            generation = handle.update({"count": count})
            assert handle.status_detail()["generation"] == generation
        assert handle.wait(timeout=TIMEOUT) == "FINISHED", handle.status_detail()
    finally:
        handle.kill()
    assert handle.status_detail()["generation"] == 2
    files = sorted(out.glob("counts-*.json"))
    assert len(files) == 1, files  # the one count task of the last generation
    assert swc.read_counts(out) == swc.expected_counts(text)


@pytest.mark.spark
def test_cli_submit_deploy_deactivated(tmp_path, hconf):
    """``heron-spark submit --deploy-deactivated``: its own driver, paused until activated."""
    from pathlib import Path

    name, out = "manage-cli-submit", tmp_path / "out"
    topology_file = Path(__file__).resolve().parent / "manage_cli_topology.py"
    err_path = tmp_path / "submit.err"
    with open(err_path, "w") as err:
        driver = subprocess.Popen([sys.executable, "-m", "heron_spark.cli", "submit",
                                   "--master", "local[2]", "--deploy-deactivated",
                                   str(topology_file), name, str(out)],
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        def paused():
            assert driver.poll() is None, err_path.read_text()[-4000:]
            return _execution_state(hconf, name) == "PAUSED"

        wait_until(paused, 180, message="the topology to run deactivated")
        assert f"{name}\tPAUSED\tlive" in _cli("list").stdout
        wait_until(lambda: len(mt.read_spout_logs(out)) == 2, 60, message="spouts to start")
        assert _cli("activate", name).returncode == 0
        wait_until(lambda: all(lines.count("ack") > 20
                               for lines in mt.read_spout_logs(out).values()), 60,
                   message="spouts to emit once activated")
        assert all(lines[:2] == ["initialize", "activate 0"]
                   for lines in mt.read_spout_logs(out).values())
        assert _cli("kill", name).returncode == 0
        stdout, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            _cli("kill", name)
            driver.kill()
            driver.wait(30)
    assert driver.returncode == 0, err_path.read_text()[-4000:]
    assert f"topology {name}: KILLED" in stdout


@pytest.mark.fault
@pytest.mark.tmaster_in_driver("updates from the CLI, which a TMaster in container 0 refuses "
                               "(handle.update)")
def test_a_resumed_driver_keeps_the_update_and_the_deactivation(tmp_path, hconf):
    """The driver dies after ``update`` and ``deactivate``: the driver that resumes the
    topology runs the updated parallelism, deactivated, and finishes it once activated."""
    name = "manage-resume"
    corpus, out, work = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "work"
    text = rwc.write_corpus(corpus, 3000)
    url = hconf["heron.statemgr"]
    args = [name, str(corpus), str(out), url, str(work)]
    first = faults.start_driver("reliable", args, tmp_path / "driver-1.log")
    second = None
    try:
        with open_state_manager(url) as statemgr:
            wait_until(lambda: (statemgr.get_spout_state(name, "lines.0") or {})
                       .get("acked_total", 0) > 100, 180, message="committed spout offsets")
            done = _cli("update", name, "--component-parallelism", "count:3")
            assert done.returncode == 0, done
            wait_until(lambda: (lambda s: s.generation == 1 and s.state ==
                                "RUNNING" and not s.updating)(
                statemgr.get_execution_state(name)), 120, message="the update to run")
            assert "PAUSED" in _cli("deactivate", name).stdout
            faults.kill_driver(first, work)
            second = faults.start_driver("reliable", args, tmp_path / "driver-2.log")
            wait_until(lambda: (lambda s: s is not None and s.generation == 2 and
                                s.state == "PAUSED")(statemgr.get_execution_state(name)),
                       180, message="the resumed topology to run deactivated")
            plan = statemgr.get_physical_plan(name)
            assert sum(i.component == "count" for i in plan.instances) == 3
            assert plan.state == physical_plan_pb2.PAUSED
        assert _cli("activate", name).returncode == 0
        assert second.wait(timeout=300) == 0, (tmp_path / "driver-2.log").read_text()[-3000:]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert "status FINISHED generation 2" in (tmp_path / "driver-2.log").read_text()
    rwc.check_exact(text, out, hconf["heron.statemgr"], name, SPOUTS)

"""No freeze, no hang, no unbounded queue: one test per fault of issue 7, with real processes.

Each test reproduces a fault that froze, hung or failed a topology before, with real Spark
``local[4]`` barrier tasks and real ``kill -9`` / ``SIGSTOP``:

- stmgrs that advertise a loopback address other than 127.0.0.1;
- a restarted stmgr killed again at once (its peer used to block routing for minutes);
- a dead metrics manager (it was never restarted; later instances could not start);
- a stmgr killed before it was ready (it used to fail the whole Spark stage);
- a bolt or stmgr killed after the spouts were exhausted (the topology never ended);
- a spout blocked in user code (its metrics froze);
- a slow bolt (queued tuples were bounded in bytes only: minutes of work piled up);
- stalls: a stopped instance, stmgr or container, and user code that never returns.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

import fault_support as faults
import reliable_word_count as rwc
import resilience_topologies as topo
from heron_spark.scheduler.submit import submit
from heron_spark.stmgr.peers import PeerLink
from heron_spark.testing import wait_until
from heron_spark.wire.connection import Listener
from heron_spark.wire.loop import Channel, Loop

TIMEOUT = 180
FAST_STALL = {"heron.stall.timeout.secs": 3, "heron.restart.backoff.secs": 0.05}
RELIABLE = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
            rwc.SLEEP_MS: 3}


def _reliable(spark, tmp_path, hconf, name, lines, **config):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, lines)
    topology = rwc.build(name, corpus, out, config={**RELIABLE, **config})
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    assert handle.wait_running(timeout=120), handle.status
    return text, out, handle


def _check_exact(text, out, hconf, name):
    raw, unique, _ = rwc.read_counts(out)
    assert unique == rwc.expected_counts(text)
    assert rwc.committed_acks(hconf["heron.statemgr"], name, 2) == len(text)


def _progress(out) -> int:
    return sum(path.stat().st_size for path in out.glob("*.log"))


def _wait_progress(out, more_than: int) -> int:
    return wait_until(lambda: (_progress(out) > more_than) and _progress(out), 60,
                      message="the topology to make progress")


def _restarted(work, role: str, old: int, **where) -> int:
    return wait_until(lambda: [p for p in faults.find(work, role, **where) if p != old], 60,
                      message=f"{role} {where} to be restarted")[0]


def _no_process_left(work) -> None:
    for role in ("stmgr", "instance", "metrics"):
        wait_until(lambda r=role: not faults.find(work, r), 30, message=f"every {role} to exit")


# ---- 0: advertised addresses other than 127.0.0.1 ---------------------------------------------
@pytest.mark.fault
def test_stmgrs_advertising_another_loopback_address(spark, tmp_path, hconf):
    out = tmp_path / "out"
    conf = {**hconf, "heron.stmgr.host": "127.0.0.2"}
    handle = submit(topo.numbers("advertise", out, count=4000), spark=spark.session, conf=conf,
                    master="local[4]")
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert {s.host for s in handle.physical_plan.stmgrs} == {"127.0.0.2"}
    assert sorted(topo.bolt_values(out)) == list(range(4000))


# ---- 1: a peer that is down never blocks routing ------------------------------------------------
def test_peer_link_buffers_while_the_peer_is_down_and_never_blocks():
    loop = Loop()
    received: list[bytes] = []

    def adopt(sock):
        Channel(loop, sock, "test-peer", lambda c, kind, frame: received.append(frame[5:]),
                max_frame_bytes=1 << 20)

    def on_peer(sock, response):
        loop.call_soon_threadsafe(adopt, sock)

    from heron_spark.wire import frames
    dead = Listener("127.0.0.1", 0, "s3cret", "topo", on_peer, name="dead")
    dead_port = dead.port
    dead.close()  # a peer that has just died: nothing listens there
    link = PeerLink(loop, "link", "s3cret", "topo", 0, 1 << 20, pending_limit_bytes=64)
    try:
        link.retarget("127.0.0.1", dead_port)
        started = time.monotonic()
        for payload in (b"one", b"two", b"three"):
            link.send(frames.frame(frames.CONTROL, payload))
        assert time.monotonic() - started < 0.1  # routing did not wait for the peer
        loop.poll(0.2)  # the dialler fails in the background; the loop goes on
        assert not link.connected and link.queued_bytes > 0
        link.send(frames.frame(frames.CONTROL, b"x" * 100))  # over the bound: dropped, counted
        assert link.dropped_frames == 1
        alive = Listener("127.0.0.1", 0, "s3cret", "topo", on_peer, name="alive").start()
        try:
            link.retarget("127.0.0.1", alive.port)  # the TMaster's next plan

            def three_received() -> bool:
                if len(received) >= 3:
                    return True
                loop.poll(0.05)  # waits for I/O: no sleep between polls
                return False

            wait_until(three_received, 10, interval=0,
                       message=lambda: f"the three queued frames (got {received})")
            assert received == [b"one", b"two", b"three"]
            assert link.connected and link.connects == 1
        finally:
            alive.close()
    finally:
        link.close()
        loop.close()


@pytest.mark.fault
def test_stmgr_dialling_a_stopped_peer_keeps_routing(spark, tmp_path, hconf):
    """A restarted stmgr gets a plan naming a peer that cannot answer (stopped): its routing
    must go on (it used to dial on the routing thread for up to 120 s, starting nothing)."""
    name = "stopped-peer"
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 2000,
                                  **{"heron.stall.timeout.secs": 10})
    work = tmp_path / "work" / name
    _wait_progress(out, 20_000)
    [peer] = faults.find(work, "stmgr", container=1)
    [stmgr] = faults.find(work, "stmgr", container=0)
    os.kill(peer, signal.SIGSTOP)
    faults.kill9(stmgr)
    _restarted(work, "stmgr", stmgr, container=0)
    local = {i.task_id for i in handle.physical_plan.instances
             if i.component == "count" and i.container_index == 0}
    before = _task_progress(out, local)
    wait_until(lambda: _task_progress(out, local) > before and
               faults.find(work, "stmgr", container=1) == [peer], 9,
               message="container 0 to count words while its peer stmgr is still stopped")
    _restarted(work, "stmgr", peer, container=1)  # the stall is detected; the peer replaced
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    _check_exact(text, out, hconf, name)


def _task_progress(out, tasks) -> int:
    return sum(path.stat().st_size for task in tasks for path in out.glob(f"count-{task}-*.log"))


# ---- 2: the metrics manager is supervised -----------------------------------------------------
@pytest.mark.fault
def test_metrics_manager_restarted_and_instances_still_start(spark, tmp_path, hconf):
    name = "metricsmgr"
    out = tmp_path / "out"
    handle = submit(topo.numbers(name, out, count=-1, sleep_ms=1, config=FAST_STALL),
                    spark=spark.session, conf=hconf, master="local[4]")
    work = tmp_path / "work" / name
    try:
        assert handle.wait_running(timeout=120)
        [metricsmgr] = faults.find(work, "metrics", container=0)
        faults.kill9(metricsmgr)
        _restarted(work, "metrics", metricsmgr, container=0)
        victim = faults.find(work, "instance", component="slow", container=0)[0]
        task = faults.task_of(victim)
        faults.kill9(victim)
        wait_until(lambda: [p for p in faults.find(work, "instance", container=0)
                            if faults.task_of(p) == task and p != victim], 60,
                   message="the instance to be restarted")
        def executed():
            return handle.metrics().get("slow", {}).get("__execute-count", 0)

        before = wait_until(executed, 30, message="the first metrics")
        wait_until(lambda: executed() > before + 200, 30,
                   message="metrics to keep flowing through the restarted metrics manager")
        assert handle.status == "RUNNING"
    finally:
        handle.kill()
    _no_process_left(work)


# ---- 3: a stmgr that dies before it is ready is restarted by its container ----------------------
@pytest.mark.fault
def test_stmgr_killed_before_ready_is_restarted_in_its_container(spark, tmp_path, hconf):
    name = "early-stmgr"
    out = tmp_path / "out"
    work = tmp_path / "work" / name
    ready = work / "gen-0" / "container-1" / "stmgr.ready.json"
    killed_early = []

    def two_killed_before_ready() -> bool:
        if len(killed_early) >= 2:
            return True
        for pid in faults.find(work, "stmgr", container=1):
            if not ready.exists() or _ready_pid(ready) != pid:
                faults.kill9(pid)
                killed_early.append(pid)
        return False

    def killer():
        with contextlib.suppress(AssertionError):  # the test asserts on killed_early
            wait_until(two_killed_before_ready, 60, interval=0.002)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    handle = submit(topo.numbers(name, out, count=3000, config={"heron.stmgr.restart.max": 10}),
                    spark=spark.session, conf=hconf, master="local[4]")
    thread.join(70)
    assert len(killed_early) == 2, killed_early
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert handle.status_detail()["generation"] == 0  # no stage resubmission
    assert sorted(topo.bolt_values(out)) == list(range(3000))


def _ready_pid(path) -> int | None:
    import json

    try:
        return json.loads(path.read_text()).get("pid")
    except (OSError, ValueError):
        return None


# ---- 4: end of input survives restarts ---------------------------------------------------------
def _drained_spouts(handle, spouts: int):
    return wait_until(lambda: handle.status_detail()["drained_tasks"] >= spouts, 60,
                      message="the spouts to be exhausted")


@pytest.mark.fault
def test_bolt_killed_after_spouts_exhausted_still_ends(spark, tmp_path, hconf):
    name = "late-bolt-kill"
    out = tmp_path / "out"
    handle = submit(topo.numbers(name, out, count=3000, sleep_ms=2,
                                 config={"topology.reliability.mode": "ATMOST_ONCE"}),
                    spark=spark.session, conf=hconf, master="local[4]")
    work = tmp_path / "work" / name
    assert handle.wait_running(timeout=120)
    _drained_spouts(handle, 2)
    assert handle.status_detail()["drained_tasks"] < 4  # the bolts are still busy
    faults.kill9(faults.find(work, "instance", component="slow")[0])
    assert handle.wait(timeout=60) == "FINISHED"


@pytest.mark.fault
def test_stmgr_killed_after_spouts_exhausted_still_ends(spark, tmp_path, hconf):
    name = "late-stmgr-kill"
    out = tmp_path / "out"
    # One spout task: container 1 then holds only bolts, whose restarted stmgr must learn from
    # the TMaster that the spout already ended.
    handle = submit(topo.numbers(name, out, count=3000, sleep_ms=2, spouts=1, bolts=3),
                    spark=spark.session, conf=hconf, master="local[4]")
    work = tmp_path / "work" / name
    assert handle.wait_running(timeout=120)
    spout_container = [i.container_index for i in handle.physical_plan.instances
                       if i.component == "numbers"][0]
    _drained_spouts(handle, 1)
    [stmgr] = faults.find(work, "stmgr", container=1 - spout_container)
    faults.kill9(stmgr)
    assert handle.wait(timeout=60) == "FINISHED"


# ---- 5: metrics never freeze with user code ----------------------------------------------------
@pytest.mark.fault
def test_spout_metrics_flow_while_it_is_blocked_in_user_code(spark, tmp_path, hconf):
    name = "blocked-spout"
    out = tmp_path / "out"
    # 10,000 tuples in one next_tuple call: the full batches (2 x heron.batch.max.tuples) leave
    # at once; the rest leaves when next_tuple returns, as next_tuple should never block.
    full = 2 * 4096
    handle = submit(topo.blocking(name, out, count=10_000, block_secs=60), spark=spark.session,
                    conf={**hconf, "heron.batch.max.tuples": 4096}, master="local[4]")
    try:
        assert handle.wait_running(timeout=120)
        wait_until(lambda: len(topo.bolt_values(out)) >= full, 60,
                   message="the bolt to receive the spout's first batches")
        emitted = wait_until(
            lambda: handle.metrics().get("blocking", {}).get("__emit-count/default", 0) >= full
            and handle.metrics()["blocking"]["__emit-count/default"], 10,
            message="the blocked spout's metrics")
        assert emitted >= full
    finally:
        handle.kill()


# ---- 7: queued tuples are bounded in tuples ----------------------------------------------------
@pytest.mark.fault
def test_queued_tuples_bounded_behind_a_slow_bolt(spark, tmp_path, hconf):
    """A bolt taking 5 ms per tuple behind a fast spout: tuples waiting for it stay near the
    tuple high water mark (on main they grew to ~415,000 within minutes)."""
    name = "tuple-marks"
    out = tmp_path / "out"
    high = 1000
    handle = submit(topo.numbers(name, out, count=-1, sleep_ms=5, spouts=1, bolts=1,
                                 containers=1,
                                 config={"heron.stmgr.backpressure.high.water.tuples": high,
                                         "heron.stmgr.backpressure.low.water.tuples": high // 2,
                                         "heron.batch.max.tuples": 100}),
                    spark=spark.session, conf=hconf, master="local[4]")

    def waiting() -> tuple[float, dict]:
        metrics = handle.metrics()
        return (metrics["numbers"]["__emit-count/default"] - metrics["slow"]["__execute-count"],
                metrics["__stmgr__"])

    # The mark, plus what the spout emitted before the gate reached it (a few ms of batches).
    bound = high + 5000
    try:
        assert handle.wait_running(timeout=120)
        for executed in (400, 1200):  # about 2 s, then 6 s of the bolt's work
            wait_until(lambda n=executed: handle.metrics().get("slow", {}).get(
                "__execute-count", 0) > n, 60, message="the slow bolt to work")
            queued, stmgr = waiting()
            assert queued <= bound, queued
            assert stmgr["__queued-tuples/slow"] <= bound
        assert stmgr["__queue-age-max-ms/slow"] > 0
        assert stmgr["__backpressure-episodes"] >= 1
        print(f"tuples waiting for the slow bolt: {queued:.0f}; oldest waited "
              f"{stmgr['__queue-age-max-ms/slow']:.0f} ms")
    finally:
        handle.kill()


# ---- stalls ------------------------------------------------------------------------------------
@pytest.mark.fault
def test_stopped_instance_is_killed_and_restarted(spark, tmp_path, hconf):
    name = "stop-instance"
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 1500, **FAST_STALL)
    work = tmp_path / "work" / name
    _wait_progress(out, 10_000)
    victim = faults.find(work, "instance", component="count")[0]
    task = faults.task_of(victim)
    os.kill(victim, signal.SIGSTOP)
    wait_until(lambda: [p for p in faults.find(work, "instance")
                        if faults.task_of(p) == task and p != victim], 30,
               message="the stopped instance to be replaced")
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert handle.status_detail()["instance_failures"].get(str(task), 0) >= 1
    _check_exact(text, out, hconf, name)


@pytest.mark.fault
def test_stopped_stmgr_is_killed_and_restarted(spark, tmp_path, hconf):
    name = "stop-stmgr"
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 1500, **FAST_STALL)
    work = tmp_path / "work" / name
    _wait_progress(out, 10_000)
    [stmgr] = faults.find(work, "stmgr", container=1)
    os.kill(stmgr, signal.SIGSTOP)
    _restarted(work, "stmgr", stmgr, container=1)
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    _check_exact(text, out, hconf, name)


@pytest.mark.fault
def test_stopped_container_is_killed_and_resubmitted(spark, tmp_path, hconf):
    name = "stop-container"
    # Long enough (about 6 s of split work) to outlast the stall limit: a stopped container
    # whose children keep working does not hold the data path up, only its supervision.
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 4000, **FAST_STALL,
                                  **{"heron.stage.resubmit.backoff.secs": 0.2})
    work = tmp_path / "work" / name
    _wait_progress(out, 10_000)
    [stmgr] = faults.find(work, "stmgr", container=0)
    os.kill(faults.parent_of(stmgr), signal.SIGSTOP)  # the Spark python worker of container 0
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert handle.status_detail()["generation"] >= 1
    _check_exact(text, out, hconf, name)


@pytest.mark.fault
def test_user_code_that_never_returns_is_killed_with_a_clear_message(spark, tmp_path, hconf):
    name = "stuck-bolt"
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 800,
                                  **{rwc.MISBEHAVE: "stuck",
                                     "heron.instance.user.code.timeout.secs": 2})
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    failure = handle._tmaster.failure
    assert failure is not None and failure.component == "split"
    assert "heron.instance.user.code.timeout.secs" in failure.error
    assert "time.sleep(3600)" in failure.error  # the stuck task's stack
    _check_exact(text, out, hconf, name)


@pytest.mark.fault
def test_stopped_container_group_is_found_dead_by_the_tmaster(spark, tmp_path, hconf):
    """Unlike the test above (only the supervisor stopped: its children notice and kill it),
    here the whole container is stopped, supervisor and children: nothing on the executor can
    notice. The TMaster's heartbeat check finds the stmgr dead within the configured timeout
    and, as it does not come back, restarts the Spark stage."""
    name = "stop-group"
    timeout = 3.0
    text, out, handle = _reliable(spark, tmp_path, hconf, name, 4000,
                                  **{"heron.tmaster.stmgr.heartbeat.timeout.secs": timeout,
                                     "heron.stage.resubmit.backoff.secs": 0.2})
    work = tmp_path / "work" / name
    _wait_progress(out, 10_000)
    [stmgr] = faults.find(work, "stmgr", container=0)
    group = [faults.parent_of(stmgr)] + [pid for role in ("stmgr", "instance", "metrics")
                                         for pid in faults.find(work, role, container=0)]
    started = {pid: faults.start_ticks(pid) for pid in group}
    try:
        for pid in group:
            os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        status = wait_until(
            lambda: (lambda s: 0 in s["dead_stmgrs"] and s)(handle.status_detail()),
            timeout + 10, message="the TMaster to find the stopped stmgr dead")
        found_after = time.monotonic() - stopped_at
        # At most one heartbeat interval (1 s) plus one check period (0.75 s) late.
        assert found_after < timeout + 2.0, found_after
        assert status["heartbeat_ages_secs"]["0"] > timeout
        assert status["generation"] == 0
        assert handle.wait(timeout=TIMEOUT) == "FINISHED"
        assert handle.status_detail()["generation"] >= 1
        _check_exact(text, out, hconf, name)
    finally:
        for pid, ticks in started.items():
            if faults.start_ticks(pid) == ticks:  # still the same process: do not leave it
                os.kill(pid, signal.SIGKILL)

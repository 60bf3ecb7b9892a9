"""The submitter's view of a TMaster that runs in container 0 (``heron.tmaster.placement`` container).

``RemoteTMaster`` stands where the driver's ``TMaster`` stands for ``TopologyHandle`` and
``submit``: the handle reads its state, plan and metrics and calls its verbs the same way.
Each question goes to the TMaster's control port through an ``ask`` function
(``scheduler.ask.Asker``: from this process on a classic session, from an executor through a
one-task Spark job under Spark Connect).

Answers are cached for ``_FRESH_SECS`` (a notebook repr asks for status and metrics at once);
the end of the topology comes from the barrier stage itself (``finish``, with container 0's
TMaster's last status in its summary), so ``wait`` runs no Spark job.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from heron_spark.config import TRACKER_PORT
from heron_spark.contract.live_paths import LivePath
from heron_spark.contract.topology_view import HandleView, TopologyStatus
from heron_spark.errors import ConfigError, TopologyStateError
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.tmaster.client import raise_refusal
from heron_spark.tmaster.core import TopologyState

log = logging.getLogger(__name__)
_FRESH_SECS = 0.5


def store_final_state(statemgr, name: str, topology_id: str, status: dict) -> None:
    """Merge a final status (``TopologyStatus.as_dict``) into the stored execution state.

    One job when remote.
    """
    stored = statemgr.get_execution_state(name)
    final = TopologyStatus.from_dict(status)
    if stored is not None:
        final = TopologyStatus.from_record(stored).replace(
            state=final.state, detail=final.detail, ended_at=final.ended_at,
            started_at=final.started_at if final.started_at is not None
            else (stored.started_at if stored.HasField("started_at") else None))
    statemgr.set_execution_state(name, final.replace(name=name, id=topology_id).record())


class StageScheduler(Protocol):
    """What a ``RemoteTMaster`` asks of the submitter's run (``scheduler.run.TopologyRun``)."""

    def update(self, parallelism: dict[str, int]) -> int:
        """Rescale to ``parallelism``; return the generation to run it."""

    def cancel(self) -> None:
        """Cancel the barrier stage's Spark jobs."""


class RemoteTMaster:
    """A TMaster in container 0 as the handle and submit see it (see the module docstring).

    ``refresh`` may be called from several threads (the handle's caller, the start-up
    progress): one asks at a time, the others take its answer.
    """

    poll_secs = 1.0  # each question may be a small Spark job (Spark Connect)

    def __init__(self, plan: PlanView, topology_id: str, ask: Callable, generation: int,
                 statemgr, scheduler: StageScheduler | None = None) -> None:
        self.name = plan.logical.name
        self.topology_id = topology_id
        self.plan = plan
        self._ask = ask
        self._statemgr = statemgr  # the submitter's: the final state if no TMaster wrote it
        self._generation = generation
        self._lock = threading.Lock()
        self._snapshot = HandleView(TopologyStatus(
            self.name, topology_id, TopologyState.STARTING.value,
            containers=plan.container_count, generation=generation))
        self._fetched = 0.0
        self._state = TopologyState.STARTING
        self._final: HandleView | None = None
        self._killed: str | None = None  # the detail of a kill asked here
        self.done = threading.Event()
        self.running = threading.Event()
        self.closed = threading.Event()
        self.scheduler = scheduler  # None: updates refused, a kill without answer cancels nothing
        self._ask_lock = threading.Lock()
        self._update_lock = threading.Lock()
        self._updating_to: dict[str, int] = {}

    # ---- reading ---------------------------------------------------------------------------
    def refresh(self, max_age: float = _FRESH_SECS) -> None:
        """Ask the TMaster for its view unless the last answer is fresh or the topology ended."""
        if self.done.is_set() or time.monotonic() - self._fetched < max_age:
            return
        with self._ask_lock:  # another thread may have just asked
            if self.done.is_set() or time.monotonic() - self._fetched < max_age:
                return
            request = tmaster_pb2.ControlRequest(query=tmaster_pb2.ViewQuery(
                path=LivePath.HANDLE.value, params_json="{}"))
            response = self._ask(request)
            self._take(response)

    def _take(self, response: tmaster_pb2.ControlResponse | None) -> None:
        if response is None or response.code != 200:
            return  # not up yet, or between generations: keep what we know
        view = HandleView.from_json(response.json)
        with self._lock:
            if self.done.is_set() or view.status.generation < self._generation:
                return  # ended, or the answer of a generation the stage has since replaced
            self._snapshot, self._fetched = view, time.monotonic()
            self._state = TopologyState(view.status.state)
            if view.status.started_at is not None:
                self.running.set()

    def _view(self) -> HandleView:
        with self._lock:
            return self._final if self._final is not None else self._snapshot

    @property
    def state(self) -> TopologyState:
        """The last known lifecycle state (``refresh`` asks for a new one)."""
        return self._state

    @property
    def generation(self) -> int:
        """The generation the submitter runs (its TMaster's once it answered)."""
        return max(self._generation, self._view().status.generation)

    @property
    def physical_plan(self) -> physical_plan_pb2.PhysicalPlan | None:
        """The last physical plan the TMaster reported (None before every stmgr registered)."""
        return self._view().physical_plan

    @property
    def failure(self) -> tmaster_pb2.InstanceFailed | None:
        """The last task failure the TMaster reported."""
        return self._view().failure

    @property
    def detail(self) -> str:
        """Why the topology ended (empty while it runs)."""
        return self._view().status.detail

    @property
    def started_at(self) -> float | None:
        """When the first physical plan went out (epoch seconds)."""
        return self._view().status.started_at

    @property
    def ended_at(self) -> float | None:
        """When the topology ended (epoch seconds)."""
        return self._view().status.ended_at

    @property
    def tracker_url(self) -> str | None:
        """The URL of the tracker beside the TMaster in container 0 (None: none runs).

        The last one the TMaster reported: a new generation's TMaster (container 0 restarted)
        reports its own. It is an executor's address: reachable where the executors are (a
        classic driver on the cluster), from elsewhere through the cluster's proxy or a port
        forward.
        """
        self.refresh()
        return self._view().tracker_url

    def ui_link(self) -> str | None:
        """Return a fresh one-time login link from the TMaster's tracker (None: no answer).

        Minted by the TMaster in container 0, where the tracker token is: under Spark Connect
        the client asks through a one-task Spark job and never holds the token.
        """
        request = tmaster_pb2.ControlRequest(query=tmaster_pb2.ViewQuery(
            path=LivePath.UI_LINK.value, params_json="{}"))
        response = self._ask(request)
        if response is None:
            return None
        if not response.ok:
            raise ConfigError(TRACKER_PORT, -1, "set heron.tracker.port to 0 (any free port) "
                                                "or a port number to run the tracker in "
                                                "container 0")
        return str(json.loads(response.json)["url"])

    @property
    def updating(self) -> bool:
        """Whether an update is under way."""
        return self._view().status.updating

    def status(self) -> TopologyStatus:
        """Return the TMaster's status, the last one known."""
        status = self._view().status
        return status.replace(name=status.name or self.name, id=status.id or self.topology_id,
                              containers=status.containers or self.plan.container_count,
                              generation=max(status.generation, self._generation),
                              state=self._state.value)

    def metrics_by_component(self) -> dict[str, dict[str, float]]:
        """Return the last metrics summed per component."""
        return {c: dict(values) for c, values in self._view().metrics.items()}

    # ---- verbs -----------------------------------------------------------------------------
    def _verb(self, action: str, request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse:
        if self.done.is_set():
            raise TopologyStateError(self.name, self._state.value, action,
                                     "submit it again")
        response = self._ask(request)
        if response is None:
            raise TopologyStateError(self.name, self._state.value, action,
                                     "wait for its TMaster in container 0 to start")
        if not response.ok:
            raise_refusal(self.name, response)
        self._fetched = 0.0  # the next read asks again
        return response

    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the topology."""
        request = tmaster_pb2.ControlRequest(deactivate=True) if paused \
            else tmaster_pb2.ControlRequest(activate=True)
        self._verb("deactivate it" if paused else "activate it", request)

    def restart(self, container: int | None = None) -> list[int]:
        """Restart every process of ``container`` (None: every container); return them."""
        restart = tmaster_pb2.RestartRequest(all=container is None, container=container or 0)
        self._verb("restart it", tmaster_pb2.ControlRequest(restart=restart))
        return list(range(self.plan.container_count)) if container is None else [container]

    def update(self, parallelism: dict[str, int]) -> int:
        """Rescale components; return the generation that runs the new plan.

        The submitter's run (``scheduler.run.TopologyRun.update``) checks the request and the
        slots and queues the new containers on the stage, then calls ``stop_generation``,
        which asks the TMaster in container 0 to stop these containers.
        """
        self.refresh(0)
        if self.done.is_set() or self._state.ended or self.updating:
            raise TopologyStateError(self.name, self._state.value, "update it",
                                     "wait for the last update to finish" if self.updating
                                     else "submit it again")
        if self.scheduler is None:
            raise TopologyStateError(self.name, self._state.value, "update it",
                                     "only a topology submitted to Spark can be updated")
        with self._update_lock:
            self._updating_to = dict(parallelism)
            return self.scheduler.update(parallelism)

    def stop_generation(self, detail: str) -> None:
        """Ask the TMaster to stop this generation's containers for the queued update."""
        update = tmaster_pb2.UpdateRequest(parallelism={str(k): int(v)
                                                        for k, v in self._updating_to.items()},
                                           queued=True)
        self._verb("update it", tmaster_pb2.ControlRequest(update=update))
        log.info("topology %s: %s", self.name, detail)

    def kill(self, detail: str = "killed") -> None:
        """Ask the TMaster to kill the topology; without an answer, cancel the stage."""
        if self.done.is_set():
            return
        self._killed = detail
        response = self._ask(tmaster_pb2.ControlRequest(kill=True))
        if response is None and self.scheduler is not None:
            log.warning("topology %s: its TMaster did not answer the kill: cancelling the "
                        "barrier stage", self.name)
            self.scheduler.cancel()

    # ---- the stage, from the submitter ------------------------------------------------------
    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Record that the stage was resubmitted as ``generation`` (its TMaster resumes).

        The old generation's physical plan and registrations went with its containers, as in
        the driver's ``TMasterCore.begin_generation``: until the new TMaster answers, the
        plan is None (so ``wait_generation`` waits for the new one, not the last one known),
        and an update (``plan`` given) is still under way.
        """
        with self._lock:
            self._generation = generation
            if plan is not None:
                self.plan = plan
            status = self._snapshot.status.replace(generation=generation, registered=(),
                                                   updating=plan is not None)
            self._snapshot = dataclasses.replace(self._snapshot, status=status,
                                                 physical_plan=None)
            self._fetched = 0.0

    def end_with_stage(self, summaries: Sequence[dict] | None, error: BaseException | None,
                       cancelled: bool, detail: str) -> None:
        """End the topology as the stage ended: container 0's TMaster's last word, else ours.

        Without one (the stage failed or was cancelled), the state is KILLED when the stage
        was ``cancelled`` or a kill was asked, else FAILED with ``detail``; it is stored in the
        state manager, since no TMaster did. A kill asked here ends it with the kill's own
        detail either way (as a TMaster in the driver does).
        """
        raw = next((s.get("tmaster") for s in summaries or () if s.get("tmaster")), None)
        final = None if raw is None else HandleView.from_dict(raw)
        unstored: TopologyStatus | None = None
        with self._lock:
            if final is not None and TopologyState(final.status.state).ended:
                self._state = TopologyState(final.status.state)
                if self._killed is not None and self._state is TopologyState.KILLED:
                    final = dataclasses.replace(
                        final, status=final.status.replace(detail=self._killed))
                self._final = final
            else:
                killed = self._killed is not None or cancelled
                state = TopologyState.KILLED if killed else TopologyState.FAILED
                status = self._snapshot.status.replace(
                    state=state.value, detail=self._killed or detail, ended_at=time.time())
                self._final = dataclasses.replace(self._snapshot, status=status)
                self._state = state
                unstored = status
            if self._final.status.started_at is not None:
                self.running.set()
        if unstored is not None:  # outside the lock: through Spark it is a job
            self._store_final(unstored)
        self.done.set()

    def _store_final(self, status: TopologyStatus) -> None:
        from heron_spark.scheduler.remote_statemgr import run_on

        try:
            run_on(self._statemgr, store_final_state, self.name, self.topology_id,
                   status.as_dict())
        except Exception as exc:  # noqa: BLE001 - the handle still knows; the store is advisory
            log.warning("topology %s: could not store its final state: %s", self.name, exc)

    def close(self) -> None:
        """Nothing to close here: the TMaster stopped with container 0."""
        self.closed.set()


if TYPE_CHECKING:
    from heron_spark.tmaster.protocol import TMasterView

    def _implements(view: RemoteTMaster) -> TMasterView:
        """Let mypy check that ``RemoteTMaster`` implements ``TMasterView``."""
        return view

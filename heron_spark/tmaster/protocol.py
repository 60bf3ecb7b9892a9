"""``TMasterView``: a topology's TMaster as its handle, its run and its progress see it.

Three implementations, one per place the TMaster runs: ``tmaster.master.TMaster`` (in the
driver: read under its lock), ``scheduler.remote.RemoteTMaster`` (in container 0: asked
through the control port, its answers cached) and ``inprocess.view.InProcessTMasterView``
(the in-process runner's ``TMasterCore``, on the runner's thread). Readers use this
interface only: what differs between the places is inside the implementations (how often
to ``refresh``, where a login link is minted, how the end of the stage is recorded).
"""

from __future__ import annotations

import threading
from typing import Protocol, Sequence

from heron_spark.contract.topology_view import TopologyStatus
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.tmaster.core import TopologyState

__all__ = ["TMasterView"]


class TMasterView(Protocol):
    """A topology's TMaster, wherever it runs (see the module docstring).

    ``done`` is set once the topology ended, ``running`` once its first physical plan went
    out, ``closed`` once its containers are gone. Safe to call from any thread.
    """

    name: str
    done: threading.Event
    running: threading.Event
    closed: threading.Event

    @property
    def poll_secs(self) -> float:
        """How long a waiter sleeps between two looks (asking may cost a Spark job)."""

    @property
    def state(self) -> TopologyState:
        """The topology's lifecycle state."""

    @property
    def plan(self) -> PlanView:
        """The plan of the current generation."""

    @property
    def generation(self) -> int:
        """The current generation of containers."""

    @property
    def physical_plan(self) -> physical_plan_pb2.PhysicalPlan | None:
        """The current physical plan (None until every stmgr of the generation registered)."""

    @property
    def failure(self) -> tmaster_pb2.InstanceFailed | None:
        """The last task failure reported."""

    @property
    def detail(self) -> str:
        """Why the topology ended (empty while it runs)."""

    @property
    def started_at(self) -> float | None:
        """When the first physical plan went out (epoch seconds)."""

    @property
    def ended_at(self) -> float | None:
        """When the topology ended (epoch seconds)."""

    @property
    def updating(self) -> bool:
        """Whether an update stopped the old generation and its new plan is not out yet."""

    @property
    def tracker_url(self) -> str | None:
        """The URL of the tracker serving this topology (None: none runs)."""

    def refresh(self, max_age: float = ...) -> None:
        """Bring the view up to date if it is older than ``max_age`` seconds."""

    def status(self) -> TopologyStatus:
        """Return the live status."""

    def metrics_by_component(self) -> dict[str, dict[str, float]]:
        """Return the latest metrics summed per component."""

    def ui_link(self) -> str | None:
        """Return a fresh one-time login link to the tracker (None: the TMaster did not answer).

        Raises ConfigError when no tracker runs (``heron.tracker.port`` -1).
        """

    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the topology."""

    def restart(self, container: int | None = None) -> list[int]:
        """Restart every process of ``container`` (None: every container); return them."""

    def update(self, parallelism: dict[str, int]) -> int:
        """Rescale components; return the generation that runs the new plan."""

    def kill(self, detail: str = "killed") -> None:
        """Stop every container (idempotent)."""

    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Forget the containers of the last stage: ``generation`` starts now (on ``plan``)."""

    def stop_generation(self, detail: str) -> None:
        """Stop this generation's containers for an update; the topology goes on."""

    def end_with_stage(self, summaries: Sequence[dict] | None, error: BaseException | None,
                       cancelled: bool, detail: str) -> None:
        """Record the end of the barrier stage: its task ``summaries``, or its ``error``.

        ``cancelled``: the stage's job was cancelled (a kill). Idempotent once ended.
        """

    def close(self) -> None:
        """Release what serves this view (after the containers are gone)."""

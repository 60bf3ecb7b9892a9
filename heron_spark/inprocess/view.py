"""``InProcessTMasterView``: the in-process runner's TMaster as a ``TMasterView``.

The runner (``inprocess.runner.InProcessTopology``) drives its ``TMasterCore`` on the caller's
thread; this view reads that core as a handle reads a Spark TMaster, so code written against
``tmaster.protocol.TMasterView`` (a handle's views, a progress line) works on a local run
too. Read it from the thread that runs the topology, or once ``run`` returned: the core is
not locked. What needs Spark (restarting containers, rescaling, a tracker) is refused with
``TopologyStateError``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Sequence

from heron_spark.contract.topology_view import TopologyStatus
from heron_spark.errors import TopologyStateError
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.tmaster.core import TopologyState

if TYPE_CHECKING:
    from heron_spark.inprocess.runner import InProcessTopology

__all__ = ["InProcessTMasterView"]

_SPARK_ONLY = "run it on Spark (heron_spark.submit) to restart or rescale containers"


class InProcessTMasterView:
    """See the module docstring."""

    poll_secs = 0.05

    def __init__(self, runner: "InProcessTopology") -> None:
        self._runner = runner
        self.name = runner.name
        self.done = threading.Event()
        self.running = threading.Event()
        self.closed = threading.Event()

    def refresh(self, max_age: float = 0.0) -> None:
        """Set ``running`` and ``done`` from the core's state (no question to ask)."""
        core = self._runner.tmaster
        if core.started_at is not None:
            self.running.set()
        if core.state.ended:
            self.done.set()

    # ---- reading ---------------------------------------------------------------------------
    @property
    def state(self) -> TopologyState:
        """The run's lifecycle state."""
        self.refresh()
        return self._runner.tmaster.state

    @property
    def plan(self) -> PlanView:
        """The run's plan."""
        return self._runner.plan

    @property
    def generation(self) -> int:
        """Always 0: an in-process run has one generation."""
        return self._runner.tmaster.generation

    @property
    def physical_plan(self) -> physical_plan_pb2.PhysicalPlan | None:
        """The TMaster's physical plan (None until every stmgr registered)."""
        return self._runner.tmaster.physical_plan

    @property
    def failure(self) -> tmaster_pb2.InstanceFailed | None:
        """The last task failure reported."""
        return self._runner.tmaster.failure

    @property
    def detail(self) -> str:
        """Why the run ended (empty while it runs)."""
        return self._runner.tmaster.detail

    @property
    def started_at(self) -> float | None:
        """When the physical plan went out (epoch seconds)."""
        return self._runner.tmaster.started_at

    @property
    def ended_at(self) -> float | None:
        """When the run ended (epoch seconds)."""
        return self._runner.tmaster.ended_at

    @property
    def updating(self) -> bool:
        """Always False: an in-process run is never rescaled."""
        return False

    @property
    def tracker_url(self) -> str | None:
        """None: no tracker serves an in-process run."""
        return None

    def status(self) -> TopologyStatus:
        """Return the core's live status."""
        self.refresh()
        return self._runner.tmaster.status(self._runner.clock())

    def metrics_by_component(self) -> dict[str, dict[str, float]]:
        """Return every metric summed per component."""
        return self._runner.metrics()

    def ui_link(self) -> str | None:
        """Refuse: no tracker serves an in-process run."""
        raise TopologyStateError(self.name, self.state.value, "open its UI",
                                 "run it on Spark (heron_spark.submit) to get a tracker and UI")

    # ---- verbs -----------------------------------------------------------------------------
    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the run's spouts."""
        self._runner.tmaster.set_paused(paused, self._runner.clock())

    def restart(self, container: int | None = None) -> list[int]:
        """Refuse: the in-process containers are not processes."""
        raise TopologyStateError(self.name, self.state.value, "restart it", _SPARK_ONLY)

    def update(self, parallelism: dict[str, int]) -> int:
        """Refuse: an in-process run keeps its parallelism."""
        raise TopologyStateError(self.name, self.state.value,
                                 f"update it to {dict(parallelism)}", _SPARK_ONLY)

    def kill(self, detail: str = "killed") -> None:
        """End the run as KILLED (idempotent)."""
        self._runner.kill(detail)
        self.refresh()

    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Refuse: an in-process run has one generation."""
        raise TopologyStateError(self.name, self.state.value, "start another generation",
                                 _SPARK_ONLY)

    def stop_generation(self, detail: str) -> None:
        """Refuse: an in-process run has one generation."""
        raise TopologyStateError(self.name, self.state.value, "stop its generation",
                                 _SPARK_ONLY)

    def end_with_stage(self, summaries: Sequence[dict] | None, error: BaseException | None,
                       cancelled: bool, detail: str) -> None:
        """End the run as KILLED when ``cancelled``, else FAILED with ``detail``."""
        core, now = self._runner.tmaster, self._runner.clock()
        if cancelled:
            core.kill(detail, now)
        else:
            core.fail(detail, now)
        self.refresh()

    def close(self) -> None:
        """Mark the view closed (nothing to release in process)."""
        self.refresh()
        self.closed.set()


if TYPE_CHECKING:
    from heron_spark.tmaster.protocol import TMasterView

    def _implements(view: InProcessTMasterView) -> TMasterView:
        """Let mypy check that ``InProcessTMasterView`` implements ``TMasterView``."""
        return view

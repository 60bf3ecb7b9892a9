"""One submitted topology across its generations: ``TopologyRun``. Driver (submitter) only.

A run owns what outlives one launch of the containers: the barrier stage (``BarrierStage``,
its own thread) and the generation it runs, the resubmission of a failed stage (the failure
budget of ``lifecycle.ResubmissionPolicy``), the stage swap of an update (``heron update``),
cancellation, and the end of the run (record it in the TMaster, close the TMaster, release
what submit acquired, close the state manager). It works the same for both placements of
the TMaster: the driver's or container 0's, seen through one ``tmaster.protocol.TMasterView``.

The TMaster reaches its run through the ``Scheduler`` interface it is built with
(``recover`` restarts every container now, ``update`` rescales; container 0's view also
``cancel``s the stage when its TMaster does not answer a kill), the handle through ``join``,
``kill`` and ``wait_ended``. ``submit`` builds the run, then the TMaster with it, then
``launch``es the first generation.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Callable, Sequence

from heron_spark.config import SystemConfig
from heron_spark.container.task import ContainerTask
from heron_spark.errors import TopologyStateError
from heron_spark.scheduler.lifecycle import (Cause, Generations, GiveUp, ResubmissionPolicy,
                                             end_detail)
from heron_spark.scheduler.remote_statemgr import run_on
from heron_spark.scheduler.spark_scheduler import (BarrierStage, deterministic_failure,
                                                   is_cancellation)
from heron_spark.scheduler.update import plan_update, store_plans, topology_proto
from heron_spark.tmaster.protocol import TMasterView

log = logging.getLogger(__name__)


class TopologyRun:
    """A topology's run across generations (see the module docstring).

    ``recover``, ``update``, ``cancel``, ``join`` and ``kill`` are safe from any thread; the
    stage thread runs the resubmission policy and the end. ``closers`` run once at the end,
    after the TMaster is closed and before the state manager is (the final metrics copy,
    releasing the tracker and the TMaster's location).
    """

    def __init__(self, spark, system: SystemConfig, statemgr, topology_id: str,
                 generation: int, containers: int, resumed: bool,
                 cancelled_detail: str = "the Spark job group was cancelled") -> None:
        self.spark = spark
        self.system = system
        self.statemgr = statemgr
        self.topology_id = topology_id
        self.generations = Generations(generation, containers, resumed)
        self.policy = ResubmissionPolicy(system.stage_resubmit_max, system.restart_window_secs,
                                         system.stage_resubmit_backoff_secs)
        self.tmaster: TMasterView | None = None
        self.stage: BarrierStage | None = None
        self._cancelled_detail = cancelled_detail
        self._closers: list[Callable[[], None]] = []
        self._lock = threading.Lock()  # generations; one update at a time

    # ---- start ------------------------------------------------------------------------------
    def launch(self, tmaster: TMasterView, task: ContainerTask,
               closers: Sequence[Callable[[], None]] = ()) -> None:
        """Run the first generation's containers (``task``) under ``tmaster``."""
        if self.stage is not None:
            raise TopologyStateError(tmaster.name, tmaster.state.value, "launch it",
                                     "a run launches once: submit it again")
        self.tmaster = tmaster
        self._closers = list(closers)
        self.stage = BarrierStage(self.spark, task, self.generations.current.containers,
                                  self._on_stage_exit, self._retry, planned=self._planned)
        self.stage.start()

    @property
    def name(self) -> str:
        """The topology's name."""
        return self._tmaster.name

    @property
    def _tmaster(self) -> TMasterView:
        if self.tmaster is None:
            msg = "the run has not been launched"
            raise RuntimeError(msg)
        return self.tmaster

    # ---- the TMaster's Scheduler interface ---------------------------------------------------
    def recover(self, reason: str) -> None:
        """Replace every container now: cancel the stage; the policy resubmits it."""
        if self.stage is not None:
            self.stage.recover(reason)

    def update(self, parallelism: dict[str, int]) -> int:
        """Start rescaling to ``parallelism``; return the generation that will run it.

        Called on the thread that asked (a control-port reader, or the handle's caller) once
        the TMaster accepted it. Checks and packs first (``plan_update``: nothing changes on a
        refusal), then queues the new containers on the stage and asks the TMaster to stop
        the current generation; the stage thread switches when they are gone.
        """
        tmaster, stage = self._tmaster, self.stage
        assert stage is not None  # launched: _tmaster checked it
        with self._lock:
            rescale = plan_update(self.spark, self.system, tmaster.plan.logical, parallelism)
            generation = max(self.generations.upcoming, tmaster.generation + 1)
            task = dataclasses.replace(stage.task, definition=rescale.definition,
                                       packing_plan=rescale.packing.SerializeToString(),
                                       generation=generation)
            containers = rescale.view.container_count

            def switch() -> bool:
                """In the stage's thread, once the old containers are gone."""
                if tmaster.state.ended:
                    return False  # killed meanwhile
                with self._lock:
                    self.generations.begin(generation, containers, Cause.UPDATED)
                tmaster.begin_generation(generation, rescale.view)
                run_on(self.statemgr, store_plans, rescale.plan.name,
                       topology_proto(rescale.plan, self.topology_id,
                                      rescale.definition).SerializeToString(),
                       rescale.packing.SerializeToString())
                return True

            stage.relaunch(task, containers, switch)
            try:
                tmaster.stop_generation(f"updating to {dict(parallelism)}: generation "
                                        f"{generation} runs {containers} containers")
            except BaseException:  # no TMaster took it: the queued generation must not run later
                stage.drop_relaunch()
                raise
            log.info("topology %s: updating to %s as generation %d", rescale.plan.name,
                     dict(parallelism), generation)
            return generation

    def cancel(self) -> None:
        """Cancel the stage's Spark jobs: Spark kills the barrier tasks (and their children)."""
        if self.stage is not None:
            self.stage.cancel()

    # ---- the handle's -------------------------------------------------------------------------
    def join(self, timeout: float | None) -> bool:
        """Wait for the stage (and the end of the run); return True once it has ended."""
        return self.stage is None or self.stage.join(timeout)

    def kill(self, detail: str, grace_secs: float) -> None:
        """Kill the topology; cancel the Spark job if its containers do not stop in time."""
        self._tmaster.kill(detail)
        if not self.join(grace_secs + 5):
            log.warning("containers of %s did not stop in time: cancelling the Spark job",
                        self.name)
            self.cancel()
            self.join(grace_secs + 10)

    def wait_ended(self, grace_secs: float, timeout: float | None) -> None:
        """After the TMaster's end: wait for the containers, cancel them if they linger."""
        grace = grace_secs * 3 + 5
        self.join(grace if timeout is None else min(grace, timeout))
        if not self.join(0):
            self.cancel()
            self.join(grace_secs + 5)

    # ---- the stage thread ---------------------------------------------------------------------
    def _planned(self, error: BaseException) -> bool:
        """Whether the stage ended as asked (a kill, a cancel): not a failure to resubmit."""
        return self._tmaster.state.ended or is_cancellation(error)

    def _retry(self, error: BaseException, task: ContainerTask) -> ContainerTask | None:
        """Return the next generation's task for the failed stage, or None to stop."""
        tmaster = self._tmaster
        deterministic = deterministic_failure(error)
        decision = self.policy.decide(is_cancellation(error) or tmaster.state.ended,
                                      deterministic is not None)
        if decision is GiveUp.DETERMINISTIC:
            log.error("topology %s: not resubmitting the barrier stage, its failure is not "
                      "transient: %s", tmaster.name, deterministic)
            return None
        if decision is GiveUp.BUDGET:
            log.error("topology %s: the barrier stage failed %d times within %g s; giving up",
                      tmaster.name, self.policy.budget + 1, self.policy.window_secs)
            return None
        if isinstance(decision, GiveUp):
            return None
        log.warning("topology %s: resubmitting the barrier stage in %.1f s (%d of %d)",
                    tmaster.name, decision.delay_secs, decision.attempt, decision.budget)
        if tmaster.done.wait(decision.delay_secs):
            return None  # killed meanwhile
        with self._lock:
            generation = max(self.generations.upcoming, tmaster.generation + 1)
            self.generations.begin(generation, self.generations.current.containers,
                                   Cause.RESUBMITTED)
        tmaster.begin_generation(generation)
        return dataclasses.replace(task, generation=generation)

    def _on_stage_exit(self, result: list | None, error: BaseException | None) -> None:
        """End the run: record it in the TMaster, close it, run the closers, close the store."""
        tmaster = self._tmaster
        cancelled = error is not None and is_cancellation(error)
        detail = end_detail(error, cancelled, _spark_error_summary(error) if error else "",
                            self._cancelled_detail)
        try:
            tmaster.end_with_stage(result, error, cancelled, detail)
            tmaster.close()
            for closer in self._closers:
                closer()
        finally:
            self.statemgr.close()


def _spark_error_summary(error: BaseException) -> str:
    """Return the Spark exception's own lines, without the Java stack trace."""
    lines = [line for line in str(error).splitlines() if line.strip()
             and not line.lstrip().startswith("at ")]
    cause = deterministic_failure(error)
    return "\n".join(([cause] if cause else []) + lines[:12])

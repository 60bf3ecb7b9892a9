"""``SessionBackend``: what differs between a classic and a Spark Connect session, chosen once.

``SessionBackend.of(spark)`` tells the kind once; the rest of the scheduler asks it instead of
``is_connect``: the master URL (the server's under Connect), whether it is local, the address
executors reach this process at, the slots free now, one-task jobs, and how the submitter
reaches the state manager (``open_submit_state_manager``: under Connect with the TMaster in
container 0 through one-task Spark jobs, a ``RemoteStateManager``; otherwise directly).
Driver (or Connect client) only; built on the probes of ``scheduler.session``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from heron_spark.config import SystemConfig, tmaster_placement
from heron_spark.scheduler import session
from heron_spark.scheduler.remote_statemgr import RemoteStateManager
from heron_spark.scheduler.spark_session import connect_requested, session_for
from heron_spark.statemgr import open_state_manager
from heron_spark.statemgr.base import StateManager


@dataclasses.dataclass(frozen=True)
class SessionBackend:
    """A session and its kind: ``connect`` (a Spark Connect client) or classic."""

    spark: Any
    connect: bool

    @classmethod
    def of(cls, spark) -> "SessionBackend":
        """Return the backend of ``spark`` (its kind told once)."""
        return cls(spark, session.is_connect(spark))

    @property
    def master(self) -> str:
        """The Spark master URL its jobs run on (the server's, under Connect)."""
        return session.master(self.spark)

    @property
    def local(self) -> bool:
        """Whether the master is ``local[...]``."""
        return session.is_local_master(self.master)

    def driver_host(self) -> str:
        """Return the address of this process that the executors can reach."""
        return session.driver_host(self.spark)

    def available_slots(self) -> int | None:
        """Return how many tasks the cluster can run at once now; None when unknown."""
        return session.available_slots(self.spark)

    def run_one_task(self, func, schema: str, tag: str, timeout_secs: float) -> list:
        """Run ``func`` as a one-task ``mapInArrow`` job tagged ``tag``; return its rows."""
        return session.run_one_task(self.spark, func, schema, tag, timeout_secs)


def open_submit_state_manager(spark, master: str | None,
                              system: SystemConfig) -> tuple[Any, StateManager]:
    """Return ``(spark, statemgr)``: the state manager submit reads and writes.

    Under Spark Connect with the TMaster in container 0 the client may reach nothing but the
    Connect endpoint, so the state manager is used through one-task Spark jobs
    (``RemoteStateManager``; the session is made here). Otherwise it is opened here directly
    and ``spark`` is returned as given.
    """
    if tmaster_placement(system, True) == "container" and connect_requested(spark):
        spark = session_for(spark, master, system)
        if session.is_connect(spark):
            return spark, RemoteStateManager(spark, system.statemgr)
    return spark, open_state_manager(system.statemgr)

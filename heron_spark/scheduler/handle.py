"""The handle ``submit`` returns, to wait for, inspect, manage and kill a running topology.

Managing is deactivate, activate, restart and update. Driver only.
"""

from __future__ import annotations

import logging
import threading
import time

from heron_spark.contract.topology_view import TopologyStatus
from heron_spark.errors import TopologyRuntimeError, TopologyStateError
from heron_spark.scheduler.run import TopologyRun
from heron_spark.tmaster.core import TopologyState
from heron_spark.tmaster.protocol import TMasterView

log = logging.getLogger(__name__)


class TopologyHandle:
    """A submitted topology. ``kill`` and ``wait`` are safe to call from any thread, repeatedly.

    Its TMaster (a ``tmaster.protocol.TMasterView``) is the driver's or, with
    ``heron.tmaster.placement`` container, one in container 0 asked through the control port:
    the handle reads it the same way either way. Its
    ``run`` (``scheduler.run.TopologyRun``: the barrier stage across generations) is what
    ``wait`` and ``kill`` wait for; a handle without one only asks the TMaster.
    """

    def __init__(self, name: str, tmaster: TMasterView,
                 kill_grace_secs: float, run: TopologyRun | None = None,
                 ca_pem: bytes | None = None) -> None:
        self.name = name
        self._ca_pem = ca_pem
        self._tmaster = tmaster
        self._kill_grace = kill_grace_secs
        self._run = run
        self._closers: list = []
        self._progress: threading.Thread | None = None  # start-up progress (progress.py)

    def _refresh(self) -> None:
        """Bring the TMaster's view up to date (a question to a TMaster in container 0)."""
        self._tmaster.refresh()

    @property
    def tracker_url(self) -> str | None:
        """The URL of the tracker (HTTP API and UI) for this topology; None if none runs.

        In driver placement, the submitting driver's tracker. With the TMaster in container 0,
        the tracker beside it, on the executor's address (the current generation's: after a
        restart of container 0 it is the new one); that address is reachable only where the
        executors are: from a laptop (a Spark Connect client), through the cluster's proxy or
        a port forward.
        """
        return self._tmaster.tracker_url

    @property
    def status(self) -> str:
        """STARTING, RUNNING, PAUSED (deactivated), FINISHED, KILLED or FAILED."""
        self._refresh()
        return self._tmaster.state.value

    @property
    def physical_plan(self):
        """The physical plan protobuf (None until every stmgr has registered)."""
        self._refresh()
        return self._tmaster.physical_plan

    @property
    def started_at(self) -> float | None:
        """Wall-clock time the physical plan was broadcast (processing began)."""
        return self._tmaster.started_at

    @property
    def ended_at(self) -> float | None:
        """Wall-clock time the topology ended."""
        return self._tmaster.ended_at

    def status_detail(self) -> dict:
        """Return the TMaster's view of the topology.

        It holds the state, detail, generation (stage resubmissions), registered containers,
        heartbeats, drained tasks and failures per task id.
        """
        self._refresh()
        return self._tmaster.status().as_dict()

    def topology_status(self) -> TopologyStatus:
        """Return the TMaster's view of the topology, typed (``status_detail`` as fields)."""
        self._refresh()
        return self._tmaster.status()

    def metrics(self) -> dict[str, dict[str, float]]:
        """Return the latest metrics per component, folded over its tasks.

        Heron's (``__emit-count/<stream>``, ``__execute-count``, ...), heron_spark's and user
        metrics, summed over the tasks except a latency (their mean), a ``*-max-*`` metric and
        ``__watermark-lag-ms`` (the maximum) and ``__watermark`` (the minimum: the slowest
        task's); see ``metrics.names.component_fold``.
        """
        self._refresh()
        return self._tmaster.metrics_by_component()

    def tls_ca_pem(self) -> bytes | None:
        """Return the topology's CA certificate (PEM) with TLS on, else None.

        The tracker serves HTTPS under this CA: trust it in a browser, or pass
        ``heron_spark.wire.tls.https_client_context(handle.tls_ca_pem())`` to a script's
        HTTPS client (``heron-spark ui NAME --ca-file PATH`` writes the same). Driver only.
        """
        return self._ca_pem

    def ui_link(self) -> str:
        """Return a fresh one-time login link to the tracker's web UI (``tracker_url``).

        Opening it sets a session cookie and redirects to the UI; it works once, within 10
        minutes. Driver only; ConfigError if the tracker is off (``heron.tracker.port`` -1).
        With the TMaster in container 0 the link is minted there, where the tracker token is
        (under Spark Connect through a one-task Spark job: the client never holds the token),
        and points at the tracker beside it, on the executor's address: open it where the
        executors are reachable (on the cluster, or through its proxy or a port forward).
        TopologyStateError if that TMaster does not answer (not started yet, or gone).
        """
        link = self._tmaster.ui_link()
        if link is None:
            raise TopologyStateError(self.name, self.status, "open its UI",
                                     "wait for its TMaster in container 0 to start")
        return link

    def wait_running(self, timeout: float | None = None) -> bool:
        """Wait until the physical plan is broadcast; return False on timeout or early end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = self._tmaster.poll_secs
        wake = self._tmaster.done
        while not self._tmaster.running.is_set():
            self._refresh()
            if self._tmaster.running.is_set():
                break
            if self._tmaster.done.is_set():
                return False
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            wake.wait(poll if remaining is None else min(poll, remaining))
        return True

    def wait(self, timeout: float | None = None) -> str:
        """Block until the topology ends; return its final status.

        Raises TopologyRuntimeError (with component, task id and log path) if it failed,
        TimeoutError if ``timeout`` seconds pass first. Ctrl-C kills the topology.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not self._tmaster.done.wait(0.2):
                if deadline is not None and time.monotonic() >= deadline:
                    msg = f"topology {self.name!r} still {self.status} after {timeout} s"
                    raise TimeoutError(msg)
            if self._run is not None:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self._run.wait_ended(self._kill_grace, remaining)
        except KeyboardInterrupt:
            log.warning("interrupted: killing topology %s", self.name)
            self.kill()
            raise
        self._raise_if_failed()
        return self.status

    def kill(self) -> None:
        """Stop every process of the topology; cancels the Spark job if they do not stop."""
        if self._run is None:
            self._tmaster.kill("killed by the handle")
        else:
            self._run.kill("killed by the handle", self._kill_grace)

    # ---- management verbs (as Heron's CLI) -------------------------------------------------
    def deactivate(self) -> None:
        """Stop the spouts emitting (``deactivate()`` is called on each).

        Bolts go on and acks still flow. Raises TopologyStateError if the topology has ended
        or is already deactivated.
        """
        self._tmaster.set_paused(True)

    def activate(self) -> None:
        """Resume a deactivated topology (``activate()`` on each spout, then ``next_tuple``).

        Raises TopologyStateError if it has ended or is not deactivated.
        """
        self._tmaster.set_paused(False)

    def restart(self, container: int | None = None) -> list[int]:
        """Restart every process of ``container``, or of every container; return the containers asked.

        The processes are the stmgr, the metrics manager and the instances. Under
        at-least-once nothing is lost: the spouts replay what was not acked. Returns at once;
        they restart in the background.
        """
        return self._tmaster.restart(container)

    def update(self, component_parallelism: dict[str, int],
               timeout: float | None = 120.0) -> int:
        """Rescale components (``{"count": 3}``); return the new generation.

        Stop the containers and run the new packing plan as the next generation; wait up to
        ``timeout`` s (None: no wait) for it to run. Raises TopologyValueError (bad name or
        count), TopologyStateError (ended, or an update already under way),
        ClusterCapacityError.
        """
        generation = self._tmaster.update(dict(component_parallelism))
        if timeout is not None and not self.wait_generation(generation, timeout):
            msg = (f"topology {self.name!r}: generation {generation} not running "
                   f"after {timeout} s (state {self.status})")
            raise TimeoutError(msg)
        return generation

    def wait_generation(self, generation: int, timeout: float) -> bool:
        """Wait until ``generation``'s physical plan is broadcast; False on timeout or end."""
        deadline = time.monotonic() + timeout
        tmaster = self._tmaster
        poll = tmaster.poll_secs
        self._refresh()
        while not (tmaster.generation >= generation and tmaster.physical_plan is not None
                   and not tmaster.updating):
            if tmaster.done.is_set() or time.monotonic() >= deadline:
                return False
            tmaster.done.wait(poll)
            self._refresh()
        return True

    def _raise_if_failed(self) -> None:
        if self._tmaster.state != TopologyState.FAILED:
            return
        failure = self._tmaster.failure
        if failure is not None:
            raise TopologyRuntimeError.from_instance_failure(failure)
        raise TopologyRuntimeError(self._tmaster.detail or "topology failed")

    def _view(self, login: bool):
        """Return what ``repr`` and the notebook table show (see ``scheduler/notebook.py``).

        With ``login``, the view holds a one-time login link to the UI instead of the bare
        tracker URL (never in ``repr``, which ends up in logs).
        """
        from heron_spark.scheduler import notebook

        self._refresh()
        tmaster = self._tmaster
        started = tmaster.started_at
        elapsed = None if started is None else (tmaster.ended_at or time.time()) - started
        tracker_url = self.tracker_url
        link = (tmaster.ui_link() or tracker_url) if login and tracker_url is not None \
            else tracker_url
        components = {name: (decl.is_spout, decl.parallelism)
                      for name, decl in tmaster.plan.logical.components.items()}
        return notebook.build_view(tmaster.status(), tmaster.metrics_by_component(),
                                   components, elapsed, link)

    def __repr__(self) -> str:
        from heron_spark.scheduler import notebook

        return notebook.text(self._view(login=False))

    def _repr_html_(self) -> str:
        """Render the notebook view: state, containers, per-component counts and rates, UI link."""
        from heron_spark.scheduler import notebook

        return notebook.html_table(self._view(login=True))

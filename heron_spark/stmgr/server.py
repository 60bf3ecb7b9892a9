"""The Stream Manager process: the I/O shell around ``core.StmgrCore``.

One loop thread (``wire.loop``) owns every connection: local instances (dialled in over a
Unix socket, or loopback elsewhere, whatever address the stmgr advertises), peer stmgrs in
both directions, and the TMaster; it feeds the core every frame, calls its ``end_turn`` just
before the turn's output is written (so the turn's acking shares its system calls) and its
``tick`` once per turn. Other threads only hand over new sockets: two listeners (peers dial
the advertised ``host``; local instances the local address; the secret is checked on both),
one dialer per peer stmgr (``peers.PeerLink``), plus the metrics client and the watchdog, which stops the
heartbeat if the loop stops turning. Nothing on the loop blocks: not a send, not a peer that is
down. The metrics client's thread never reads the core: the loop builds a metrics snapshot
every half metrics interval and hands it over (``_metrics_publish``, a reference swapped whole;
a snapshot is never changed once handed over).
"""

from __future__ import annotations

import logging
import os
import time

from heron_spark import _process
from heron_spark.container import file_view
from heron_spark.container.files import ContainerFiles
from heron_spark.contract import ids, layout, roles
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.metrics.client import MetricsClient
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, tmaster_pb2
from heron_spark.stmgr.core import StmgrCore
from heron_spark.stmgr.peers import PeerLink
from heron_spark.wire import frames
from heron_spark.wire.connection import Listener, dial_with_retry, local_socket_address
from heron_spark.wire.tls import TlsContexts
from heron_spark.wire.loop import Channel, Loop, loop_traffic

log = logging.getLogger(__name__)
_POLL_SECS = 0.05


class StreamManager:
    """See the module docstring; implements the core's ``StmgrTransport``.

    ``run`` returns the process exit code.
    """

    def __init__(self, files: ContainerFiles, container_index: int, tmaster_host: str,
                 tmaster_port: int, host: str, generation: int) -> None:
        self.files = files
        self.config = files.load_config()
        plan: PlanView = files.load_plan()
        self.secret = files.load_secret()
        self.tls = files.load_tls()
        self.topology = plan.logical.name
        self.index = container_index
        self.generation = generation
        self.host = host
        self.tmaster_address = f"{tmaster_host}:{tmaster_port}"
        self.loop = Loop()
        self.core = StmgrCore(plan, self.config, container_index, self, self.loop.clock)
        self.instances: dict[int, Channel] = {}
        self.peers: dict[int, PeerLink] = {}       # outbound, one per other container
        self.inbound_peers: set[Channel] = set()
        self.tmaster: Channel | None = None
        self.metrics: MetricsClient | None = None
        # The latest metrics snapshot: built on the loop, read by the metrics client's thread.
        self._metrics_publish: metrics_pb2.MetricsPublish | None = None
        self._exit: int | None = None
        self._loop_tick: float | None = None
        handoff = self._handoff
        self.listener = Listener(host, 0, self.secret, self.topology, handoff,
                                 name=f"stmgr-{container_index}", tls=self.tls)
        self.local_listener = _local_listener(f"stmgr{container_index}", self.secret,
                                              self.topology, handoff, container_index, self.tls)
        _process.set_health_check(self._loop_health)
        _process.settle_gc(self.config.python_gc_young_objects)

    # ---- new connections (handed over by listener threads) --------------------------------
    def _handoff(self, sock, response) -> None:
        self.loop.call_soon_threadsafe(self._adopt, sock, response)

    def _adopt(self, sock, response) -> None:
        if self.core.stopping:
            sock.close()
        elif response.role == roles.INSTANCE and response.id in self.core.local_tasks:
            task = response.id
            old = self.instances.pop(task, None)
            if old is not None and not old.closed:
                old.close("replaced by a new connection of the same task")
                self.core.instance_closed(task)
            channel = Channel(self.loop, sock, f"stmgr-{self.index}<-task-{task}",
                              lambda c, kind, frame: self.core.on_instance_frame(
                                  task, kind, frame),
                              self._instance_closed, max_frame_bytes=self.config.frame_max_bytes)
            channel.peer_id = task
            self.instances[task] = channel
            self.core.instance_connected(task)
        elif response.role == roles.STMGR:
            channel = Channel(self.loop, sock, f"stmgr-{self.index}<-stmgr-{response.id}",
                              lambda c, kind, frame: self.core.on_peer_frame(kind, frame),
                              self.inbound_peers.discard,
                              max_frame_bytes=self.config.frame_max_bytes)
            self.inbound_peers.add(channel)
        else:
            log.warning("refusing peer with role %s:%s", roles.role_name(response.role), response.id)
            sock.close()

    def _instance_closed(self, channel: Channel) -> None:
        if self.instances.get(channel.peer_id) is channel:
            del self.instances[channel.peer_id]
            self.core.instance_closed(channel.peer_id)

    # ---- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        """Serve until the TMaster ends it; return the exit code.

        ``OK`` when the TMaster says shut down, ``TMASTER_LOST`` when it goes away, ``RESTART``
        when it asks for a restart; ``FAILED`` if instances never registered.
        """
        self.listener.start()
        self.local_listener.start()
        _process.write_json_atomic(self.files.ready(layout.STMGR),
                                   {"port": self.listener.port,
                                    "local_address": self.local_listener.address,
                                    "pid": os.getpid()})
        loop, core = self.loop, self.core
        try:
            deadline = time.monotonic() + self.config.startup_timeout_secs
            while not core.all_registered:
                if time.monotonic() > deadline:
                    missing = sorted(core.local_tasks - set(core.instance_pids))
                    log.error("instances %s never registered", missing)
                    return ExitCode.FAILED
                loop.poll(_POLL_SECS)
            self._refresh_metrics()
            self.metrics = MetricsClient(
                self.files, self.secret, self.topology, ids.stmgr_metrics_task(self.index),
                self.config.metrics_interval_ms / 1000.0, self.config.frame_max_bytes,
                self._metrics_snapshot, tls=self.tls)
            self.metrics.start()
            self._connect_tmaster()
            self._heartbeat()
            clock = loop.clock
            while self._exit is None:
                due = core.next_deadline()  # held acks for uncapped spouts
                wait = _POLL_SECS if due is None else min(_POLL_SECS, max(0.0, due - clock()))
                loop.poll(wait, core.end_turn)  # the turn's acking leaves with its relays
                now = clock()
                self._loop_tick = now
                core.tick(now)
                loop.flush()
            if self._exit == ExitCode.OK:  # shut down: let the instances get their shutdown
                deadline = time.monotonic() + self.config.kill_grace_secs
                for channel in list(self.instances.values()):
                    channel.flush_blocking(max(0.0, deadline - time.monotonic()))
            return self._exit
        finally:
            self._close_all()

    def _metrics_snapshot(self) -> metrics_pb2.MetricsPublish:
        """Return the latest snapshot the loop built (the metrics client's thread).

        Touches nothing else. The TMaster drops a snapshot it already has (same timestamp).
        """
        return self._metrics_publish

    def _refresh_metrics(self) -> None:
        """Build the snapshot the metrics client publishes, again every half metrics interval.

        Until the stmgr stops; the loop's thread only.
        """
        self._metrics_publish = self._build_metrics()
        if not self.core.stopping:
            self.loop.call_later(self.config.metrics_interval_ms / 2000.0, self._refresh_metrics)

    def _build_metrics(self) -> metrics_pb2.MetricsPublish:
        """Return the core's metrics plus the shell's traffic counters (the loop's thread only)."""
        publish = self.core.metrics_snapshot(
            sum(p.dropped_frames for p in self.peers.values()), int(time.time() * 1000))
        loop_traffic(self.loop, publish.metrics.add)
        return publish

    def _loop_health(self) -> str | None:
        """Watchdog check: the loop must turn at least once per stall timeout."""
        tick = self._loop_tick
        if tick is None or self.core.stopping:
            return None
        idle = time.monotonic() - tick
        if idle > self.config.stall_timeout_secs:
            return f"the stmgr's loop has not turned for {idle:.1f} s"
        return None

    def _connect_tmaster(self) -> None:
        sock = dial_with_retry(self.tmaster_address, self.secret, self.topology, roles.STMGR,
                               self.index, self.config.startup_timeout_secs, tls=self.tls)
        self.tmaster = Channel(self.loop, sock, f"stmgr-{self.index}->tmaster",
                               self._on_tmaster_frame, self._on_tmaster_closed,
                               max_frame_bytes=self.config.frame_max_bytes)
        self.to_tmaster(frames.control_frame(self.core.register_message(
            self.host, self.listener.port, os.getpid(), self.generation)))

    def _on_tmaster_frame(self, channel: Channel, kind: int, frame: bytes | bytearray) -> None:
        code = self.core.on_tmaster_frame(frame)
        if code is not None and self._exit is None:
            self._exit = code

    def _on_tmaster_closed(self, channel: Channel) -> None:
        code = self.core.tmaster_lost()
        if code is not None and self._exit is None:
            self._exit = code

    def _heartbeat(self) -> None:
        if self.tmaster is None or self.tmaster.closed or self.core.stopping:
            return
        self.to_tmaster(frames.control_frame(tmaster_pb2.StmgrToTmaster(
            heartbeat=tmaster_pb2.StmgrHeartbeat(container_index=self.index,
                                                 sent_at_ms=int(time.time() * 1000)))))
        self.loop.call_later(self.config.heartbeat_interval_ms / 1000.0, self._heartbeat)

    def _close_all(self) -> None:
        self.core.close()
        if self.metrics is not None:
            self._metrics_publish = self._build_metrics()
            self.metrics.close()  # publishes the final values
        self.listener.close()
        self.local_listener.close()
        for link in self.peers.values():
            link.close()
        for channel in [*self.instances.values(), *self.inbound_peers, self.tmaster]:
            if channel is not None:
                channel.close()
        self.loop.close()

    # ---- StmgrTransport ------------------------------------------------------------------
    def to_instance(self, task: int, frame: bytes | bytearray) -> bool:
        """Queue ``frame`` for local ``task``; False when it is not connected."""
        channel = self.instances.get(task)
        return channel is not None and channel.send(frame)

    def to_peer(self, container: int, frame: bytes | bytearray) -> None:
        """Queue ``frame`` for the stmgr of ``container`` (its ``PeerLink`` buffers while it is down)."""
        link = self.peers.get(container)
        if link is not None:
            link.send(frame)

    def to_tmaster(self, frame: bytes) -> None:
        """Queue ``frame`` for the TMaster (dropped when not connected)."""
        if self.tmaster is not None:
            self.tmaster.send(frame)

    def serve_file(self, request: tmaster_pb2.FileRequest) -> None:
        """Read a slice or a listing of the work dir (bounded: ``file_view``) and answer."""
        self.to_tmaster(frames.control_frame(tmaster_pb2.StmgrToTmaster(
            file_response=file_view.answer(self.files.root, request))))

    def set_reading(self, task: int, reading: bool) -> None:
        """Stop or resume reading frames from local ``task``'s connection."""
        channel = self.instances.get(task)
        if channel is not None:
            (channel.resume_reading if reading else channel.pause_reading)()

    def instance_queued_bytes(self, task: int) -> int:
        """Return the bytes in the send queue towards local ``task`` (0 when not connected)."""
        channel = self.instances.get(task)
        return channel.queued_bytes if channel is not None else 0

    def peer_queued_bytes(self) -> int:
        """Return the bytes queued towards the most loaded peer stmgr."""
        most = 0
        for link in self.peers.values():
            queued = link.queued_bytes
            if queued > most:
                most = queued
        return most

    def retarget_peers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """Point the link to each peer container at its (host, port), creating missing links."""
        for container, (host, port) in addresses.items():
            link = self.peers.get(container)
            if link is None:
                link = self.peers[container] = PeerLink(
                    self.loop, f"stmgr-{self.index}->stmgr-{container}", self.secret,
                    self.topology, self.index, self.config.frame_max_bytes,
                    2 * self.config.backpressure_high_water_bytes, tls=self.tls)
            link.retarget(host, port)

    def announce_stop(self) -> None:
        """Tell the container's supervisor this stmgr is ending for good.

        Done before any instance can notice, so their exits are not restarted.
        """
        _process.write_json_atomic(self.files.stmgr_stopping, {"pid": os.getpid()})

    def failure_note(self, task: int) -> str | None:
        """Return why the container killed ``task`` (its stall note), or None."""
        try:
            return self.files.stall_note(layout.task_child(task)).read_text()
        except OSError:
            return None

    def instance_log(self, task: int) -> str:
        """Return the path of ``task``'s log file."""
        return str(self.files.instance_log(self.core.plan.task_component[task], task))


def _local_listener(tag: str, secret: str, topology: str, on_peer, index: int,
                    tls: TlsContexts | None) -> Listener:
    address = local_socket_address(tag)
    if address.startswith("unix:"):  # a Unix socket: plain (it never leaves the host)
        return Listener(address, 0, secret, topology, on_peer, name=f"stmgr-{index}-local")
    host, _, port = address.rpartition(":")
    return Listener(host, int(port), secret, topology, on_peer, name=f"stmgr-{index}-local",
                    tls=tls)

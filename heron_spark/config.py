"""Typed system configuration, layered and never global.

Layers, later wins: the defaults below, ``conf/heron_spark.yaml`` (or the folder named by
``conf_dir`` / ``HERON_SPARK_CONF_DIR``, read when a topology is submitted, never at import),
the topology's own config (``heron.*`` keys set through ``set_config``), then ``conf=`` of
``submit`` / ``--conf`` of the CLI. Every key carries its unit in its name.
``heron-spark config`` prints the effective values.

The defaults are written here only: the shipped ``conf/heron_spark.yaml`` documents every key
commented out and sets none (a test checks it names each key in ``KNOWN_KEYS``). The
topology's own keys (``topology.*``) are read by ``heron_spark.api.topology_config``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from heron_spark.errors import ConfigError

MiB = 1024 * 1024

# Key names: one constant each, so no string is spelled twice.
STATEMGR = "heron.statemgr"
WORK_DIR = "heron.work.dir"
TMASTER_HOST = "heron.tmaster.host"
TMASTER_PLACEMENT = "heron.tmaster.placement"
STMGR_HOST = "heron.stmgr.host"
PACKING_ALGORITHM = "heron.packing.algorithm"
BATCH_MAX_TUPLES = "heron.batch.max.tuples"
BATCH_FLUSH_INTERVAL_MS = "heron.batch.flush.interval.ms"
BATCH_LINGER_MS = "heron.batch.linger.ms"
INSTANCE_OUT_QUEUE_BYTES = "heron.instance.out.queue.bytes"
BACKPRESSURE_HIGH_WATER_BYTES = "heron.stmgr.backpressure.high.water.bytes"
BACKPRESSURE_LOW_WATER_BYTES = "heron.stmgr.backpressure.low.water.bytes"
HEARTBEAT_INTERVAL_MS = "heron.heartbeat.interval.ms"
METRICS_INTERVAL_MS = "heron.metrics.interval.ms"
STARTUP_TIMEOUT_SECS = "heron.startup.timeout.secs"
KILL_GRACE_SECS = "heron.kill.grace.secs"
FRAME_MAX_BYTES = "heron.frame.max.bytes"
TRACKER_PORT = "heron.tracker.port"
SPARK_SLOTS_WAIT_SECS = "heron.spark.slots.wait.secs"
SPARK_JVM_BRIDGE = "heron.spark.jvm.bridge"
INSTANCE_RESTART_MAX = "heron.instance.restart.max"
STMGR_RESTART_MAX = "heron.stmgr.restart.max"
RESTART_WINDOW_SECS = "heron.restart.window.secs"
STAGE_RESUBMIT_MAX = "heron.stage.resubmit.max"
STAGE_RESUBMIT_BACKOFF_SECS = "heron.stage.resubmit.backoff.secs"
RESTART_BACKOFF_SECS = "heron.restart.backoff.secs"
RESTART_BACKOFF_MAX_SECS = "heron.restart.backoff.max.secs"
STALL_TIMEOUT_SECS = "heron.stall.timeout.secs"
USER_CODE_TIMEOUT_SECS = "heron.instance.user.code.timeout.secs"
BACKPRESSURE_HIGH_WATER_TUPLES = "heron.stmgr.backpressure.high.water.tuples"
BACKPRESSURE_LOW_WATER_TUPLES = "heron.stmgr.backpressure.low.water.tuples"
TRACKER_MAX_CONNECTIONS = "heron.tracker.max.connections"
TRACKER_IDLE_TIMEOUT_SECS = "heron.tracker.idle.timeout.secs"
PYTHON_GC_YOUNG_OBJECTS = "heron.python.gc.young.objects"
CHECKPOINT_ROOT = "heron.checkpoint.root"
CHECKPOINT_UPLOAD_QUEUE_CHECKPOINTS = "heron.checkpoint.upload.queue.checkpoints"
STATE_BACKEND = "heron.state.backend"
STATE_TTL_SECS = "heron.state.ttl.secs"
TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS = "heron.tmaster.stmgr.heartbeat.timeout.secs"
SUBMIT_PROGRESS = "heron.submit.progress"
TMASTER_METRICS_BUCKET_SECS = "heron.tmaster.metrics.bucket.secs"
TMASTER_METRICS_RETENTION_SECS = "heron.tmaster.metrics.retention.secs"
TMASTER_METRICS_MAX_SERIES = "heron.tmaster.metrics.max.series"
TMASTER_EXCEPTIONS_PER_INSTANCE = "heron.tmaster.exceptions.per.instance"
TLS_ENABLED = "heron.tls.enabled"
TLS_CERT = "heron.tls.cert"
TLS_KEY = "heron.tls.key"
TLS_CA = "heron.tls.ca"

CONF_FILE_NAME = "heron_spark.yaml"
CONF_DIR_ENV = "HERON_SPARK_CONF_DIR"


@dataclasses.dataclass(frozen=True)
class SystemConfig:
    """Effective runtime settings of one topology; shipped to every container as is."""

    # "heron-spark", not "heron_spark": a folder /tmp/heron_spark would shadow the package for
    # any Python started in /tmp (it looks like a namespace package).
    statemgr: str = "file:///tmp/heron-spark/state"
    work_dir: str = "/tmp/heron-spark/work"
    tmaster_host: str = ""          # empty: spark.driver.host, else 127.0.0.1
    # Where the TMaster runs: "driver" (the submitting process), "container" (a child of
    # container 0's barrier task, found through the state manager), "auto" (driver for a
    # classic session, container for Spark Connect).
    tmaster_placement: str = "auto"
    stmgr_host: str = ""            # empty: the executor's host as Spark reports it
    packing_algorithm: str = "round_robin"
    batch_max_tuples: int = 4096
    # How long one turn of an instance runs user code before it looks at input again: a
    # spout's next_tuple calls, a bolt's processing of the input it took.
    batch_flush_interval_ms: float = 5.0
    # A task's buffered tuples leave at the end of the turn that made them, unless a batch of
    # that task left less than linger ago: then they wait up to that moment for more (a busy
    # task sends fewer, bigger batches; one that was idle sends at once).
    batch_linger_ms: float = 1.0
    instance_out_queue_bytes: int = 8 * MiB
    backpressure_high_water_bytes: int = 32 * MiB
    backpressure_low_water_bytes: int = 16 * MiB
    heartbeat_interval_ms: int = 1000
    metrics_interval_ms: int = 1000
    startup_timeout_secs: float = 120.0
    kill_grace_secs: float = 10.0
    frame_max_bytes: int = 256 * MiB
    tracker_port: int = 0           # 0: any free port; -1: no tracker HTTP server
    spark_slots_wait_secs: float = 60.0
    # Load jvm_bridge/ into a session submit() creates: "auto" when javac and the bridge's
    # sources are there (else one info line), "true" (fail if it cannot), "false".
    spark_jvm_bridge: str = "auto"
    # Failure recovery: a task failing more than instance_restart_max times (a stmgr dying more
    # than stmgr_restart_max times) within restart_window_secs fails the topology (the Spark
    # stage). A failed stage is resubmitted up to stage_resubmit_max times in a row, waiting
    # stage_resubmit_backoff_secs, doubled on each attempt.
    instance_restart_max: int = 5
    stmgr_restart_max: int = 3
    restart_window_secs: float = 60.0
    stage_resubmit_max: int = 3
    stage_resubmit_backoff_secs: float = 1.0
    # A child of a container (stmgr, metrics manager, instance) that dies is restarted after
    # restart_backoff_secs, doubled per consecutive death up to restart_backoff_max_secs.
    restart_backoff_secs: float = 0.1
    restart_backoff_max_secs: float = 5.0
    # Stall detection: a child whose heartbeat is older than stall_timeout_secs (stopped,
    # deadlocked) is killed and restarted like a dead one; so is an instance whose task thread
    # has been inside one user-code call for longer than user_code_timeout_secs (0: no limit).
    stall_timeout_secs: float = 10.0
    user_code_timeout_secs: float = 300.0
    # Backpressure in tuples: tuples a stmgr handed to a local instance that it has not yet
    # executed. Above the high mark the stmgr starts backpressure; below the low mark it may end.
    backpressure_high_water_tuples: int = 65536
    backpressure_low_water_tuples: int = 32768
    # The tracker HTTP server: at most this many open connections; idle ones close after this.
    tracker_max_connections: int = 64
    tracker_idle_timeout_secs: float = 10.0
    # Stmgr and instance processes move what is alive once they are warm (imported modules,
    # caches) out of the cyclic garbage collector's reach (gc.freeze) and collect young objects
    # after this many net allocations instead of Python's 700: every batch allocates thousands
    # of tuples and lists, and collections scanning them and the frozen start-up objects take
    # a large share of a task's CPU. At least once, a bolt holds the tuples it acked until
    # the turn's (or, acks alone, the 5 ms) ack frame, and a spout its open trees: a lower
    # threshold has collections scan them over and over. Cyclic garbage waits longer (at most
    # this many objects). 0 turns the cyclic collector off (only for user code that makes no
    # reference cycles: they would never be freed).
    python_gc_young_objects: int = 100000
    # Effectively once: where task state is checkpointed, a pyarrow.fs URL (file://, hdfs://,
    # s3://) or a local path; empty: <work_dir>/checkpoints (one machine only).
    checkpoint_root: str = ""
    # Effectively once: a task's snapshots waiting for its background uploader, at most; a
    # checkpoint reaching a task whose queue is full waits for an upload to finish.
    checkpoint_upload_queue_checkpoints: int = 2
    # Where a stateful task keeps its state: "memory" (a dict) or "rocksdb" (one RocksDB
    # database per task under the work dir; pip install 'heron_spark[rocksdb]'). A component's
    # own config may set it (and the TTL) for that component alone.
    state_backend: str = "memory"
    # Each key of a task's state lives this long after its last put; 0: for ever.
    state_ttl_secs: float = 0.0
    # The TMaster drops a stmgr silent for this long, and restarts the Spark stage if it has
    # not registered again after as long again (a stopped container, a lost executor).
    tmaster_stmgr_heartbeat_timeout_secs: float = 30.0
    # submit() shows "containers registered k/N" while the topology starts.
    submit_progress: bool = True
    # The TMaster's metrics history (the tracker's metrics, timeline and query views): one
    # value per bucket (Heron: a minute) per (component, task, metric), kept for retention
    # (Heron: 3 hours), at most max_series series; and at most exceptions_per_instance
    # distinct stack traces per task for the exceptions views.
    tmaster_metrics_bucket_secs: int = 60
    tmaster_metrics_retention_secs: int = 3 * 3600
    tmaster_metrics_max_series: int = 200_000
    tmaster_exceptions_per_instance: int = 20
    # TLS 1.3 with mutual authentication on every TCP link (wire.tls): "auto" (on when the
    # Spark session has spark.network.crypto.enabled or spark.ssl.enabled true), "true",
    # "false". The user's own certificate, key and CA (local PEM paths, all three or none);
    # none: submit makes a CA per topology and a certificate per container.
    tls_enabled: str = "auto"
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""

    def validate(self) -> "SystemConfig":
        """Return self, or raise ConfigError naming the first unusable value."""
        if self.packing_algorithm not in ("round_robin", "first_fit_decreasing"):
            raise ConfigError(PACKING_ALGORITHM, self.packing_algorithm,
                              "use round_robin or first_fit_decreasing")
        for key in (BATCH_MAX_TUPLES, INSTANCE_OUT_QUEUE_BYTES, BACKPRESSURE_HIGH_WATER_BYTES,
                    HEARTBEAT_INTERVAL_MS, METRICS_INTERVAL_MS):
            if getattr(self, _field_of(key)) < 1:
                raise ConfigError(key, getattr(self, _field_of(key)), "use a value >= 1")
        for key in (BACKPRESSURE_HIGH_WATER_TUPLES, TRACKER_MAX_CONNECTIONS,
                    TMASTER_METRICS_BUCKET_SECS, TMASTER_METRICS_MAX_SERIES,
                    TMASTER_EXCEPTIONS_PER_INSTANCE):
            if getattr(self, _field_of(key)) < 1:
                raise ConfigError(key, getattr(self, _field_of(key)), "use a value >= 1")
        if not 0 <= self.backpressure_low_water_tuples < self.backpressure_high_water_tuples:
            raise ConfigError(BACKPRESSURE_LOW_WATER_TUPLES, self.backpressure_low_water_tuples,
                              f"use a value below {BACKPRESSURE_HIGH_WATER_TUPLES} "
                              f"({self.backpressure_high_water_tuples})")
        for key in (PYTHON_GC_YOUNG_OBJECTS, BATCH_LINGER_MS, RESTART_BACKOFF_SECS,
                    RESTART_BACKOFF_MAX_SECS, STALL_TIMEOUT_SECS,
                    USER_CODE_TIMEOUT_SECS, TRACKER_IDLE_TIMEOUT_SECS,
                    TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS):
            if getattr(self, _field_of(key)) < 0:
                raise ConfigError(key, getattr(self, _field_of(key)), "use a value >= 0")
        for key in (STALL_TIMEOUT_SECS, TRACKER_IDLE_TIMEOUT_SECS,
                    TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS):
            if getattr(self, _field_of(key)) == 0:
                raise ConfigError(key, 0, "use a positive number of seconds")
        if not 0 <= self.backpressure_low_water_bytes < self.backpressure_high_water_bytes:
            raise ConfigError(BACKPRESSURE_LOW_WATER_BYTES, self.backpressure_low_water_bytes,
                              f"use a value below {BACKPRESSURE_HIGH_WATER_BYTES} "
                              f"({self.backpressure_high_water_bytes})")
        if self.tmaster_metrics_retention_secs < self.tmaster_metrics_bucket_secs:
            raise ConfigError(TMASTER_METRICS_RETENTION_SECS, self.tmaster_metrics_retention_secs,
                              f"keep at least one bucket: use a value >= "
                              f"{TMASTER_METRICS_BUCKET_SECS} ({self.tmaster_metrics_bucket_secs})")
        if self.tmaster_placement not in PLACEMENTS:
            raise ConfigError(TMASTER_PLACEMENT, self.tmaster_placement,
                              "use " + ", ".join(PLACEMENTS))
        if self.checkpoint_upload_queue_checkpoints < 1:
            raise ConfigError(CHECKPOINT_UPLOAD_QUEUE_CHECKPOINTS,
                              self.checkpoint_upload_queue_checkpoints, "use a value >= 1")
        state_settings(self, {}, None)
        given = [key for key in (TLS_CERT, TLS_KEY, TLS_CA) if getattr(self, _field_of(key))]
        if given and len(given) < 3:
            missing = next(key for key in (TLS_CERT, TLS_KEY, TLS_CA) if key not in given)
            raise ConfigError(missing, "", f"set {TLS_CERT}, {TLS_KEY} and {TLS_CA} together "
                              "(or none: submit then makes a CA per topology)")
        if self.batch_flush_interval_ms <= 0:
            raise ConfigError(BATCH_FLUSH_INTERVAL_MS, self.batch_flush_interval_ms,
                              "use a positive number of milliseconds")
        return self

    def as_keys(self) -> dict[str, Any]:
        """Return the settings under their public key names."""
        return {_KEY_OF[f.name]: getattr(self, f.name) for f in dataclasses.fields(self)}


_KEY_OF = {name.lower(): value for name, value in globals().items()
           if name.isupper() and isinstance(value, str) and value.startswith("heron.")}
_FIELD_OF = {key: field for field, key in _KEY_OF.items()}
KNOWN_KEYS = frozenset(_FIELD_OF)


def _field_of(key: str) -> str:
    return _FIELD_OF[key]


PLACEMENTS = ("driver", "container", "auto")
STATE_BACKENDS = ("memory", "rocksdb")
ROCKSDB_EXTRA = "rocksdb"
ROCKSDB_PACKAGE = "rocksdict"


@dataclasses.dataclass(frozen=True)
class StateSettings:
    """Where one component's tasks keep their state, and for how long a key lives."""

    backend: str = "memory"  # one of STATE_BACKENDS
    ttl_secs: float = 0.0    # 0: keys never expire


def own_state_config(component_config: Mapping[str, Any],
                     topology_config: Mapping[str, Any]) -> dict[str, Any]:
    """Return the state keys a component set itself (its merged config minus the topology's)."""
    return {key: component_config[key] for key in (STATE_BACKEND, STATE_TTL_SECS)
            if key in component_config
            and (key not in topology_config or topology_config[key] != component_config[key])}


def state_settings(system: SystemConfig, own_config: Mapping[str, Any],
                   component: str | None) -> StateSettings:
    """Return a component's ``StateSettings``: its own config's keys, else the system's.

    ``own_config`` is what the component set itself (its spec's config), not the topology's.
    Raise ``ConfigError`` naming the key, the value and the fix for an unusable value.
    """
    where = f" (component {component!r})" if component else ""
    backend = str(own_config.get(STATE_BACKEND, system.state_backend)).strip().lower()
    if backend not in STATE_BACKENDS:
        raise ConfigError(STATE_BACKEND, own_config.get(STATE_BACKEND, system.state_backend),
                          f"use one of {', '.join(STATE_BACKENDS)}{where}")
    ttl = own_config.get(STATE_TTL_SECS, system.state_ttl_secs)
    try:
        ttl_secs = float(ttl)
    except (TypeError, ValueError):
        ttl_secs = -1.0
    if isinstance(ttl, bool) or not 0 <= ttl_secs < float("inf"):
        raise ConfigError(STATE_TTL_SECS, ttl,
                          f"use a number of seconds >= 0 (0: keys never expire){where}")
    return StateSettings(backend, ttl_secs)


def tmaster_placement(system: SystemConfig, connect: bool) -> str:
    """Return where the TMaster runs: ``driver`` or ``container`` (``auto`` resolved)."""
    if system.tmaster_placement == "auto":
        return "container" if connect else "driver"
    return system.tmaster_placement


BRIDGE_MODES = {"auto": "auto", "true": "true", "1": "true", "yes": "true", "on": "true",
                "false": "false", "0": "false", "no": "false", "off": "false"}


def tls_enabled(system: SystemConfig, spark_wants_tls: bool) -> bool:
    """Return whether TLS is on: ``heron.tls.enabled``, ``auto`` resolved by Spark's switches.

    ``spark_wants_tls``: the session has ``spark.network.crypto.enabled`` or
    ``spark.ssl.enabled`` true.
    """
    if system.tls_enabled == "auto":
        return spark_wants_tls
    return system.tls_enabled == "true"


def _coerce(key: str, value: Any, default: Any) -> Any:
    if key in (SPARK_JVM_BRIDGE, TLS_ENABLED):
        mode = BRIDGE_MODES.get(str(value).strip().lower())
        if mode is None:
            raise ConfigError(key, value, "use auto, true or false")
        return mode
    try:
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(key, value, f"use a {type(default).__name__}") from exc


def default_conf_dir() -> Path | None:
    """Return the conf folder next to the package (a source checkout), if there is one."""
    candidate = Path(__file__).resolve().parent.parent / "conf"
    return candidate if (candidate / CONF_FILE_NAME).is_file() else None


def read_conf_file(conf_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read ``heron_spark.yaml`` from ``conf_dir``, ``$HERON_SPARK_CONF_DIR`` or the checkout."""
    import yaml

    folder = conf_dir or os.environ.get(CONF_DIR_ENV) or default_conf_dir()
    if folder is None:
        return {}
    path = Path(folder) / CONF_FILE_NAME
    if not path.is_file():
        if conf_dir:
            raise ConfigError(key="conf_dir", value=str(conf_dir),
                              fix=f"put a {CONF_FILE_NAME} in that folder")
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), type(data).__name__, "write a mapping of key: value lines")
    return data


# ``heron.*`` keys of the topology rather than the runtime: read per component from the
# topology's and components' config (``api.topology_config``, the window bolts), never here.
WATERMARK_IDLE_MS = "heron.watermark.idle.ms"
WINDOW_ALLOWED_LATENESS_MS = "heron.window.allowed.lateness.ms"
WINDOW_EVENT_TIME = "heron.window.event.time"
TOPOLOGY_SCOPED_KEYS = frozenset({WATERMARK_IDLE_MS, WINDOW_ALLOWED_LATENESS_MS,
                                  WINDOW_EVENT_TIME})


def build_system_config(*layers: Mapping[str, Any] | None) -> SystemConfig:
    """Merge layers of ``heron.*`` keys over the defaults; unknown ``heron.*`` keys are errors."""
    defaults = SystemConfig()
    values: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if not key.startswith("heron.") or key in TOPOLOGY_SCOPED_KEYS:
                continue  # topology.* keys belong to the topology, not the runtime
            if key not in KNOWN_KEYS:
                raise ConfigError(key, value, "check the spelling; `heron-spark config` lists keys")
            field = _FIELD_OF[key]
            values[field] = _coerce(key, value, getattr(defaults, field))
    return dataclasses.replace(defaults, **values).validate()

"""Topology configuration keys, with heronpy's names and values (``heronpy.api.api_constants``)."""

from heron_spark import config


class TopologyReliabilityMode:
    """Values of ``topology.reliability.mode``."""

    ATMOST_ONCE = "ATMOST_ONCE"
    ATLEAST_ONCE = "ATLEAST_ONCE"
    EFFECTIVELY_ONCE = "EFFECTIVELY_ONCE"


TOPOLOGY_WORKER_CHILDOPTS = "topology.worker.childopts"
TOPOLOGY_COMPONENT_JVMOPTS = "topology.component.jvmopts"
TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
TOPOLOGY_ENABLE_ACKING = "topology.enable.acking"
TOPOLOGY_DEBUG = "topology.debug"
TOPOLOGY_STMGRS = "topology.stmgrs"
TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
TOPOLOGY_COMPONENT_PARALLELISM = "topology.component.parallelism"
TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
TOPOLOGY_AUTO_TASK_HOOKS = "topology.auto.task.hooks"
TOPOLOGY_SERIALIZER_CLASSNAME = "topology.serializer.classname"
TOPOLOGY_RELIABILITY_MODE = "topology.reliability.mode"
TOPOLOGY_BOLT_AUTO_ACK = "topology.bolt.auto.ack"  # heron_spark: ack each tuple after process()
TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS = "topology.stateful.checkpoint.interval.seconds"
TOPOLOGY_STATEFUL_START_CLEAN = "topology.stateful.start.clean"
# heron_spark (Flink's name): the number of key groups, fixed for the topology's life
TOPOLOGY_MAX_PARALLELISM = "topology.max.parallelism"
TOPOLOGY_CONTAINER_CPU_REQUESTED = "topology.container.cpu"
TOPOLOGY_CONTAINER_RAM_REQUESTED = "topology.container.ram"
TOPOLOGY_CONTAINER_DISK_REQUESTED = "topology.container.disk"
TOPOLOGY_CONTAINER_MAX_CPU_HINT = "topology.container.max.cpu.hint"
TOPOLOGY_CONTAINER_MAX_RAM_HINT = "topology.container.max.ram.hint"
TOPOLOGY_CONTAINER_MAX_DISK_HINT = "topology.container.max.disk.hint"
TOPOLOGY_CONTAINER_PADDING_PERCENTAGE = "topology.container.padding.percentage"
TOPOLOGY_CONTAINER_RAM_PADDING = "topology.container.ram.padding"
TOPOLOGY_COMPONENT_RAMMAP = "topology.component.rammap"
TOPOLOGY_COMPONENT_CPUMAP = "topology.component.cpumap"
TOPOLOGY_NAME = "topology.name"
TOPOLOGY_TEAM_NAME = "topology.team.name"
TOPOLOGY_TEAM_EMAIL = "topology.team.email"
TOPOLOGY_CAP_TICKET = "topology.cap.ticket"
TOPOLOGY_PROJECT_NAME = "topology.project.name"
TOPOLOGY_ADDITIONAL_CLASSPATH = "topology.additional.classpath"
TOPOLOGY_COMPONENT_OUTPUT_TPS = "topology.component.output.tps"

# Event time (Heron Java's window keys; heron_spark reads them on spouts and bolts, see
# docs/event-time.md). A spout: the output field holding each tuple's event time (int ms since
# the epoch), and how far out of order its timestamps may be (the watermark trails the newest
# timestamp by this lag). A window bolt: the input field holding the timestamp.
TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME = "topology.bolts.tuple.timestamp.field.name"
TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS = "topology.bolts.tuple.timestamp.max.lag.ms"
# How often a spout task sends its watermark downstream (default 1000, at least 10)
TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS = "topology.bolts.watermark.event.interval.ms"
# A window bolt's stream for tuples later than its allowed lateness (one field, late_tuple)
TOPOLOGY_BOLTS_LATE_TUPLE_STREAM = "topology.bolts.late.tuple.stream"
# heron_spark: a spout partition or task with no event-time tuple for this long (while not held
# by backpressure) stops holding the watermark back; 0: never
HERON_WATERMARK_IDLE_MS = config.WATERMARK_IDLE_MS
# heron_spark: how late a tuple may be and still update its (already fired) event-time window
HERON_WINDOW_ALLOWED_LATENESS_MS = config.WINDOW_ALLOWED_LATENESS_MS

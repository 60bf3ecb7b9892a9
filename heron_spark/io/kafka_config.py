"""Config keys of the Kafka connectors, their checks, and the lazy ``confluent_kafka`` import.

``KafkaSpout`` and ``KafkaSink`` are configured the heronpy way, through their component
config (keys below). ``spout_settings`` / ``sink_settings`` check a config when the topology is
built (on the driver: no broker is contacted); ``check_cluster`` asks the broker when a task
starts and turns an unreachable broker or an unknown topic into one ``ConnectorError``
naming the component, the value and the fix, so the topology fails instead of waiting
silently: at once for a topic that does not exist (``permanent``: a restart would only repeat
it), through the restarts for a broker that does not answer (it may come back).
``confluent_kafka`` is imported only when a task starts (``client``): importing heron_spark
does not need it.
"""

from __future__ import annotations

import re
from typing import Any

from heron_spark.errors import ConnectorError, ExtrasError, TopologyValueError

BOOTSTRAP_SERVERS = "kafka.bootstrap.servers"
TOPICS = "kafka.topics"                # spout: a topic or a list of topics
PATTERN = "kafka.pattern"              # spout: a regular expression over topic names
GROUP_ID = "kafka.group.id"            # spout: the consumer group its offsets are committed in
PROPERTIES = "kafka.properties"        # both: a dict passed to confluent-kafka as is
DECODER = "kafka.decoder"              # spout: callable(message fields) -> tuple of values
OUTPUT_FIELDS = "kafka.output.fields"  # spout: the fields the decoder returns
MAX_RECORDS_PER_CALL = "kafka.max.records.per.call"
POLL_TIMEOUT_MS = "kafka.poll.timeout.ms"
COMMIT_INTERVAL_SECS = "kafka.commit.interval.secs"
METADATA_REFRESH_SECS = "kafka.metadata.refresh.secs"
CHECK_TIMEOUT_SECS = "kafka.check.timeout.secs"
BOUNDED = "kafka.bounded"              # spout: end at the end offsets seen at start
EVENT_TIME = "kafka.event.time"        # spout: records' timestamps are their event time
ASSIGNMENT = "kafka.assignment"        # spout: 'static' (by task index) | 'group' (rebalancing)
TOPIC = "kafka.topic"                  # sink: the topic it produces to
TRANSACTIONS = "kafka.transactions"    # sink, effectively once: 'auto' | True | False
INSTALL_EXTRA = "kafka"
SYSTEM = "Kafka"  # a ConnectorError's ``system``

SPOUT_FIELDS = ("key", "value", "topic", "partition", "offset", "timestamp")

_FIX_SERVERS = f"set {BOOTSTRAP_SERVERS!r} to the broker's host:port (e.g. '127.0.0.1:9092')"


def client() -> Any:
    """Return the ``confluent_kafka`` module, or raise ``ExtrasError`` naming the extra."""
    try:
        import confluent_kafka
    except ImportError as exc:
        package = "confluent-kafka"
        raise ExtrasError(package, INSTALL_EXTRA) from exc
    return confluent_kafka


def _need(config: dict, key: str, component: str | None, fix: str) -> Any:
    value = config.get(key)
    if not value:
        msg = f"the Kafka connector needs {key!r}"
        raise TopologyValueError(msg, component=component, value=value, kind="config", fix=fix)
    return value


def _properties(config: dict, component: str | None) -> dict:
    props = config.get(PROPERTIES) or {}
    if not isinstance(props, dict):
        msg = f"{PROPERTIES!r} must be a dict of confluent-kafka settings"
        raise TopologyValueError(msg, component=component, value=props, kind="config",
                                 fix=f"pass {PROPERTIES!r}: {{'fetch.min.bytes': 1, ...}}")
    return props


def topics_of(config: dict) -> list[str]:
    """Return the spout's topics as a list (``kafka.topics`` may be one name)."""
    topics = config.get(TOPICS) or []
    # (a numeric name may arrive as a number: the instance's config converts "123" as Heron does)
    return [str(topics)] if isinstance(topics, (str, int)) else [str(t) for t in topics]


def spout_settings(config: dict, component: str | None = None) -> dict:
    """Check a ``KafkaSpout`` component config; return it with its defaults filled in."""
    config = dict(config)
    _need(config, BOOTSTRAP_SERVERS, component, _FIX_SERVERS)
    _need(config, GROUP_ID, component, f"set {GROUP_ID!r} to the consumer group's name")
    _properties(config, component)
    if bool(topics_of(config)) == bool(config.get(PATTERN)):
        msg = f"a KafkaSpout reads either {TOPICS!r} or {PATTERN!r}"
        raise TopologyValueError(msg, component=component,
                                 value={TOPICS: config.get(TOPICS), PATTERN: config.get(PATTERN)},
                                 kind="config", fix=f"set exactly one of {TOPICS!r} and {PATTERN!r}")
    if config.get(PATTERN):
        try:
            re.compile(config[PATTERN])
        except re.error as exc:
            msg = f"{PATTERN!r} is not a regular expression ({exc})"
            raise TopologyValueError(msg, component=component, value=config[PATTERN],
                                     kind="config", fix="pass a Python regular expression") from exc
    if config.get(DECODER) is not None and not config.get(OUTPUT_FIELDS):
        msg = f"a decoder's tuples need field names in {OUTPUT_FIELDS!r}"
        raise TopologyValueError(msg, component=component, value=config.get(DECODER),
                                 kind="config", fix=f"set {OUTPUT_FIELDS!r}: ['word', ...]")
    config[ASSIGNMENT] = assignment_choice(config.get(ASSIGNMENT, STATIC), component)
    config.setdefault(BOUNDED, False)
    config.setdefault(EVENT_TIME, True)
    config.setdefault(MAX_RECORDS_PER_CALL, 500)
    config.setdefault(POLL_TIMEOUT_MS, 5)
    config.setdefault(COMMIT_INTERVAL_SECS, 0.5)
    config.setdefault(METADATA_REFRESH_SECS, 30.0)
    config.setdefault(CHECK_TIMEOUT_SECS, 10.0)
    return config


STATIC = "static"
GROUP = "group"


def assignment_choice(value: Any, component: str | None = None) -> str:
    """Return ``kafka.assignment`` as ``'static'`` or ``'group'``; raise if invalid.

    ``static`` (the default): each task reads a fixed share of the partitions, by task index;
    ``group``: the tasks join the consumer group (``subscribe``) and Kafka's rebalancing
    (cooperative-sticky) spreads the partitions over the tasks alive.
    """
    text = str(value).strip().lower() if value is not None else STATIC
    if text in (STATIC, GROUP):
        return text
    msg = f"{ASSIGNMENT!r} must be {STATIC!r} or {GROUP!r}"
    raise TopologyValueError(msg, component=component, value=value, kind="config",
                             fix=f"set {ASSIGNMENT!r} to {STATIC!r} (the default: partitions by "
                                 f"task index) or {GROUP!r} (the consumer group's rebalancing)")


def check_reliability(config: dict, component: str | None, effectively_once: bool) -> None:
    """Refuse ``kafka.assignment: 'group'`` under effectively once (``TopologyValueError``).

    A checkpoint holds each task's read offsets; with the group's rebalancing a partition can
    change task between two checkpoints, and a rollback would then restore its offset in two
    tasks' states, or in none. Static assignment keeps every partition in one task's state.
    """
    if effectively_once and assignment_choice(config.get(ASSIGNMENT, STATIC), component) == GROUP:
        msg = (f"{ASSIGNMENT!r} {GROUP!r} cannot be used under effectively once (a checkpoint "
               f"keeps each task's offsets, and the group's rebalancing moves partitions "
               f"between tasks)")
        raise TopologyValueError(msg, component=component, value=GROUP, kind="config",
                                 fix=f"use {ASSIGNMENT!r} {STATIC!r} (the default) under "
                                     f"effectively once, or an at-least-once topology")


def sink_settings(config: dict, component: str | None = None) -> dict:
    """Check a ``KafkaSink`` component config; return it with its defaults filled in."""
    config = dict(config)
    _need(config, BOOTSTRAP_SERVERS, component, _FIX_SERVERS)
    _need(config, TOPIC, component, f"set {TOPIC!r} to the topic to produce to")
    props = _properties(config, component)
    if "transactional.id" in props:
        msg = (f"{PROPERTIES!r} sets 'transactional.id', which the sink derives itself "
               f"(heron-<topology>-<component>-<task index>, so a restarted task fences its "
               f"predecessor and every task has its own)")
        raise TopologyValueError(msg, component=component, value=props["transactional.id"],
                                 kind="config",
                                 fix=f"remove 'transactional.id' from {PROPERTIES!r}; set "
                                     f"{TRANSACTIONS!r} to choose whether the sink uses "
                                     f"transactions")
    config[TRANSACTIONS] = transactions_choice(config.get(TRANSACTIONS, "auto"), component)
    config.setdefault(CHECK_TIMEOUT_SECS, 10.0)
    return config


def transactions_choice(value: Any, component: str | None = None) -> str:
    """Return ``kafka.transactions`` as ``'auto'``, ``'true'`` or ``'false'``; raise if invalid.

    ``auto`` (the default): the sink uses Kafka transactions under effectively once when the
    broker supports them, else falls back to at-least-once with a warning; ``true``: a broker
    without transactions fails the task; ``false``: no transactions (at-least-once output).
    """
    text = str(value).strip().lower() if value is not None else "auto"
    if text in ("auto", "true", "false"):
        return text
    msg = f"{TRANSACTIONS!r} must be 'auto', true or false"
    raise TopologyValueError(msg, component=component, value=value, kind="config",
                             fix=f"set {TRANSACTIONS!r} to 'auto' (the default), true or false")


def client_properties(config: dict, **ours: Any) -> dict:
    """Return the confluent-kafka settings: ours, overridden by ``kafka.properties``."""
    return {"bootstrap.servers": config[BOOTSTRAP_SERVERS], **ours, **(config.get(PROPERTIES) or {})}


# The spout's consumer. Offsets are ours to commit (see kafka_spout), never librdkafka's.
# ``fetch.wait.max.ms`` (librdkafka's default is 500) is how long the broker may hold a fetch
# that found no new record. Apache Kafka answers as soon as a record arrives, so there it only
# sets how often an idle consumer asks again; a broker that holds every fetch for the whole
# wait adds up to it to each record's latency. 10 ms keeps latency in milliseconds
# on both, for at most 100 empty fetches a second per broker while the spout is idle: set it
# higher in ``kafka.properties`` to poll an idle Apache Kafka less often.
CONSUMER_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False, "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest", "enable.partition.eof": False, "fetch.wait.max.ms": 10}
# The sink's producer: a record is acked only once every in-sync replica has it. ``linger.ms``
# (librdkafka's default too) is how long a record may wait for others to share its request.
PRODUCER_DEFAULTS: dict[str, Any] = {"acks": "all", "linger.ms": 5}


# Group mode (``kafka.assignment: 'group'``) adds these: incremental (cooperative) rebalancing,
# so a task joining or leaving moves only the partitions that change owner and the others keep
# being read through the rebalance.
GROUP_DEFAULTS: dict[str, Any] = {"partition.assignment.strategy": "cooperative-sticky"}


def consumer_properties(config: dict) -> dict:
    """Return the spout consumer's settings: ``CONSUMER_DEFAULTS`` under ``kafka.properties``.

    In group mode also ``GROUP_DEFAULTS``, and the client refreshes its metadata (new
    partitions of the subscribed topics) every ``kafka.metadata.refresh.secs``.
    """
    ours = {"group.id": str(config[GROUP_ID]), **CONSUMER_DEFAULTS}
    if config.get(ASSIGNMENT) == GROUP:
        refresh_ms = int(float(config.get(METADATA_REFRESH_SECS, 30.0)) * 1000)
        ours.update(GROUP_DEFAULTS, **{"topic.metadata.refresh.interval.ms": refresh_ms})
    return client_properties(config, **ours)


def producer_properties(config: dict) -> dict:
    """Return the sink producer's settings: ``PRODUCER_DEFAULTS`` under ``kafka.properties``."""
    return client_properties(config, **PRODUCER_DEFAULTS)


def check_cluster(kafka_client, component: str, config: dict, topics: list[str] | None = None,
                  pattern: str | None = None, key: str = TOPICS) -> dict[str, int]:
    """Return ``{topic: partition count}`` of the topics to use; raise if any is unusable.

    Asks ``kafka_client`` (a Consumer or Producer) for the cluster's metadata within
    ``kafka.check.timeout.secs``. Raises ``ConnectorError`` naming the component, the value
    and the fix: transient for an unreachable broker (restarts retry it), permanent for an
    unknown topic or a pattern that matches nothing (``key`` is the config key naming the
    topics, for the fix).
    """
    ck = client()
    timeout = float(config.get(CHECK_TIMEOUT_SECS, 10.0))
    servers = config[BOOTSTRAP_SERVERS]
    try:
        metadata = kafka_client.list_topics(timeout=timeout)
    except ck.KafkaException as exc:
        msg = f"no Kafka broker answered at {BOOTSTRAP_SERVERS} within {timeout:g} s ({exc})"
        raise ConnectorError(msg, system=SYSTEM, component=component, value=servers,
                             fix=f"start the broker or correct {BOOTSTRAP_SERVERS!r} (the task "
                                 f"is restarted until heron.instance.restart.max)",
                             permanent=False) from exc
    known = {name: len(meta.partitions) for name, meta in metadata.topics.items()
             if meta.error is None and not name.startswith("__")}
    if pattern is not None:
        matched = {name: n for name, n in known.items() if re.fullmatch(pattern, name)}
        if not matched:
            msg = f"no topic on the broker at {servers} matches {PATTERN}"
            raise ConnectorError(msg, system=SYSTEM, component=component, value=pattern,
                                 fix=f"create a matching topic or correct {PATTERN!r}",
                                 permanent=True)
        return matched
    missing = [name for name in topics or [] if name not in known]
    if missing:
        msg = f"the broker at {servers} has no topic named {missing[0]!r}"
        raise ConnectorError(msg, system=SYSTEM, component=component, value=missing[0],
                             fix=f"create the topic (kafka-topics --create) or correct {key!r} "
                                 "in the component config", permanent=True)
    return {name: known[name] for name in topics or []}


def error_of(exc: BaseException) -> Any:
    """Return the ``KafkaError`` a ``KafkaException`` carries (None if it carries none)."""
    error = exc.args[0] if getattr(exc, "args", None) else None
    return error if hasattr(error, "code") and hasattr(error, "fatal") else None


def is_fenced(error: Any) -> bool:
    """Tell whether a ``KafkaError`` says another producer took over the transactional.id."""
    if error is None:
        return False
    ck = client()
    fenced = {ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED,
              ck.KafkaError.INVALID_PRODUCER_EPOCH}
    return error.code() in fenced or (error.fatal() and "fenced" in error.str().lower())


def fenced_error(component: str, txn_id: str, detail: str) -> ConnectorError:
    """Return the permanent error of a sink whose ``transactional.id`` another producer took."""
    msg = (f"another producer took over the sink's transactional.id (this producer was fenced: "
           f"{detail}); a live process, most likely a topology of the same name, writes with it")
    return ConnectorError(msg, system=SYSTEM, component=component, value=txn_id,
                          fix="another topology or process uses this transactional.id: run one "
                              "topology of each name at a time (kill the other), or give each "
                              "topology its own name", permanent=True)

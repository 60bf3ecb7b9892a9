"""A bolt producing its input tuples to a Kafka topic, acking each once Kafka has it.

The record's value is the input field ``value`` (and its key the field ``key``, if the input
stream declares one); an input without a ``value`` field gives its first field. ``str`` is
encoded as UTF-8, ``bytes`` go as they are, None stays None (a null value or key), anything
else is written as ``str(x)`` in UTF-8. Config: ``kafka.bootstrap.servers``, ``kafka.topic``,
``kafka.properties`` (confluent-kafka producer settings, over our defaults ``acks=all`` and
``linger.ms=5``).

Delivery: at-least-once, a tuple is acked only when the producer's delivery report says the
broker has the record, and failed when the report is an error, so its tree is replayed.
At-most-once, a failed delivery is logged (the mode accepts the loss). A fatal producer error,
or any failed delivery under effectively-once, fails the task (its error names the topic), so
the topology restarts it or rolls back.
Delivery reports are read on the task thread in ``process`` and on tick tuples (every
``topology.tick.tuple.freq.secs``, 0.1 s unless the component config sets it). A full local
queue makes ``process`` wait for the broker, which is the sink's back pressure.

Effectively-once (``kafka.transactions``: ``auto`` by default, ``true``, ``false``): the sink
produces inside one Kafka transaction per checkpoint interval, with a ``transactional.id``
fixed by topology, component and task index (``heron-<topology>-<component>-<index>``), so a
restarted task's ``init_transactions`` fences its predecessor and aborts its open
transaction. The sink is a ``TwoPhaseStatefulComponent``: at ``pre_save(n)`` the open
transaction is flushed and becomes checkpoint ``n``'s; it is committed in ``post_save(n)``,
which the TMaster pushes once checkpoint ``n`` is committed and recorded, or at a restore of
``n`` or later, or at the end of input. A producer has one transaction at a time: records
arriving while ``n``'s waits for its commit are held in memory (and put in the sink's
checkpoint state if another checkpoint comes first) and produced in the next one. Each commit
also commits, inside the transaction, the offset ``n`` of partition 0 of the topic for the
consumer group named like the transactional.id: Kafka applies it only if the transaction
commits, so it records the last committed checkpoint on the broker.

A rollback (another task failed) calls ``pre_restore(m)`` on the live sink: the waiting
transaction is committed if checkpoint ``m`` covers it, else aborted with the open one, and
the producer is closed; the spouts replay what was aborted. The sink built for the restored
state starts a new producer, whose ``init_transactions`` aborts whatever a predecessor that
died left open; the restored state holds the records of the transaction that was waiting at
the checkpoint, and the sink produces them again unless the marker group shows that
transaction committed. So a reader sees every record exactly once when it reads with
``isolation.level=read_committed``; ``read_uncommitted`` readers also see aborted records.
Costs: a checkpoint's state holds the records of the transaction waiting then (one interval's
output), and records wait in memory while a commit is outstanding. Limit: the end of input
commits without waiting for a checkpoint, so a failure after a sink task's end of input and
before the topology finishes may repeat the last interval.

When transactions are unavailable (``init_transactions`` fails within
``kafka.check.timeout.secs``: a broker without them, or client settings that forbid them such
as ``enable.idempotence=false``) ``auto`` falls back to at-least-once with one warning naming
the component (records produced after the last checkpoint are produced again after a
rollback), ``true`` fails the topology at once (a permanent ``ConnectorError`` naming the
component, the transactional.id and the fix; a broker that does not answer in time is
transient instead, retried by restarts), and ``false`` never tries. Without transactions
``pre_save`` only flushes, so nothing a checkpoint covers is lost. ``kafka.properties`` may not
set ``transactional.id`` (refused where the topology is built): the sink derives its own.

A transactional.id in use by another live producer (a second topology of the same name, say)
fences one of them: the fenced sink fails the topology at once with a permanent
``ConnectorError`` naming the id, instead of being restarted to fence the other in turn.

Runs in a Heron Instance, on the task thread; ``confluent_kafka`` is imported only there.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from typing import Any, Iterator

from heron_spark.api import api_constants
from heron_spark.api.bolt import Bolt
from heron_spark.api.state import TwoPhaseStatefulComponent
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import ConnectorError, TopologyRuntimeError, permanent_error
from heron_spark.io import kafka_config as kc

TICK_SECS = 0.1
STATE_KEY = "kafka.sink"  # effectively once: {"checkpoint": n, "txn": bool, "held": [(v, k)]}
FLUSH_TIMEOUT_SECS = 60.0
_LOG = logging.getLogger(__name__)


def _shut(producer) -> None:
    """Disconnect ``producer`` now; a producer already broken (fenced, fatal) never raises here.

    ``Producer.close`` where confluent-kafka has it; an older one disconnects when its last
    reference goes. Shutting down happens on the way out of an error: an exception here would
    hide the error that matters.
    """
    close = getattr(producer, "close", None)
    if close is not None:
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - see the docstring
            # confluent-kafka may keep the exception it raised: its traceback (this frame)
            # would keep the producer alive. Log the text only, for the same reason.
            exc.__traceback__ = None
            _LOG.warning("closing a Kafka producer failed (%s); it is dropped", str(exc))


def _report(sink_ref: weakref.ref, tup, error, message) -> None:
    """Hand a delivery report to its sink, if the sink still exists.

    The producer holds each record's callback until its report is read; a weak reference
    there keeps a finished sink (and so its producer) from being kept alive by its own records.
    """
    sink = sink_ref()
    if sink is not None:
        sink._delivered(tup, error, message)


def _kafka_cause(exc: BaseException | None, kind: type) -> Any:
    """Return the first ``kind`` (``KafkaException``) among ``exc`` and its causes, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _on_error(sink_ref: weakref.ref, error) -> None:
    """Keep a transactional producer's first fatal error (``error_cb``) for its sink to raise.

    librdkafka reports the fatal error (fenced, ...) apart from the delivery reports it then
    purges; the sink raises it once the call that read it (poll, flush) returns.
    """
    sink = sink_ref()
    if sink is not None and error.fatal() and sink._fatal is None:
        sink._fatal = error


def transactional_id(topology: str, component: str, task_index: int) -> str:
    """Return the sink task's ``transactional.id``: the same for every run of the task."""
    return f"heron-{topology}-{component}-{task_index}"


def encode(value: Any) -> bytes | None:
    """Return ``value`` as a Kafka key or value: bytes as is, str as UTF-8, None as None."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return str(value).encode("utf-8")


def field_positions(fields: tuple[str, ...] | None) -> tuple[int, int | None]:
    """Return the positions of the value and the key (None: no key) among ``fields``."""
    fields = tuple(fields or ())
    value = fields.index("value") if "value" in fields else 0
    key = fields.index("key") if "key" in fields else None
    return value, key


class KafkaSink(Bolt, TwoPhaseStatefulComponent):
    """See the module docstring. Configure through the component config (``kafka.*`` keys)."""

    outputs: list = []

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the spec, with the config checked and a tick to read delivery reports."""
        config = kc.sink_settings(config or {}, component=name)
        config.setdefault(api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS, TICK_SECS)
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    _state = None  # effectively once: the task's State (set by init_state)
    _transactional = False            # effectively once with Kafka transactions
    _open = False                     # a transaction is begun and takes records
    _pending: int | None = None       # the checkpoint whose transaction awaits its commit
    _marker: Any = None               # a Consumer of the transactions' marker group
    _last_checkpoint = 0              # the last checkpoint saved
    _discarding = False               # pre_restore aborts: delivery reports no longer count
    _fatal: Any = None                # the transactional producer's fatal error (error_cb)
    _undelivered: Any = None          # transactional: a failed delivery, raised after the call

    def init_state(self, stateful_state) -> None:
        """Keep the state: the checkpoint it was saved at and the records held then."""
        self._state = stateful_state

    def pre_save(self, checkpoint_id) -> None:
        """Flush; with transactions the open one becomes ``checkpoint_id``'s (see the module)."""
        self._flush()
        if not self._transactional:
            return
        cid = self._last_checkpoint = int(checkpoint_id)
        if self._pending is None and self._open:
            self._pending, self._open = cid, False
        if self._state is not None:  # "txn": the records of the transaction now waiting
            self._state.put(STATE_KEY, {
                "checkpoint": cid, "held": list(self._held),
                "txn": list(self._in_txn) if self._pending is not None else [],
                "txn_checkpoint": self._pending or 0})

    def post_save(self, checkpoint_id) -> None:
        """Checkpoint ``checkpoint_id`` is committed: commit the transaction waiting for it."""
        if self._transactional and self._pending is not None \
                and self._pending <= int(checkpoint_id):
            self._commit_pending()

    def pre_restore(self, checkpoint_id) -> None:
        """Before a rollback to ``checkpoint_id``: commit what it covers, abort the rest, close."""
        try:
            if self._transactional and self._producer is not None:
                if self._pending is not None and self._pending <= int(checkpoint_id):
                    self._commit(self._pending)
                elif self._pending is not None or self._open:
                    self._discarding = True  # the abort purges queued records: not an error
                    self._call("abort_transaction")
                    self.transactions["aborted"] += 1
                self._pending, self._open = None, False
        finally:
            self.close()

    def initialize(self, config, context):
        """Create the producer and check that the broker answers and has the topic."""
        self._ck = kc.client()
        self._name = context.get_component_id()
        self._context = context
        config = kc.sink_settings(config, component=self._name)
        self._topic = str(config[kc.TOPIC])
        mode = TopologyConfig.from_config(config)
        self._reliable, self._effectively_once = mode.at_least_once, mode.effectively_once
        self._properties = kc.producer_properties(config)
        self._producer = self._ck.Producer(self._properties)
        try:
            kc.check_cluster(self._producer, self._name, config, topics=[self._topic],
                             key=kc.TOPIC)
        except ConnectorError:  # nothing was produced; the error's traceback holds the
            _shut(self._producer)   # producer (check_cluster's frame): disconnect it now
            self._producer = None
            raise
        self._ref = weakref.ref(self)
        self._positions: dict[tuple[str, str], tuple[int, int | None]] = {}
        self._errors = 0
        self._transactional = False
        self._open = False
        self._pending = None
        self._held: list[tuple[bytes | None, bytes | None]] = []  # (value, key) after it
        self._in_txn: list[tuple[bytes | None, bytes | None]] = []  # in the open/waiting one
        self.transactions = {"committed": 0, "aborted": 0}
        if self._effectively_once:
            self._start_transactions(config)

    # ---- transactions (effectively once) ---------------------------------------------------
    def _start_transactions(self, config: dict) -> None:
        """Make the producer transactional, or fall back as ``kafka.transactions`` says."""
        choice = config[kc.TRANSACTIONS]
        self._txn_id = transactional_id(self._context.get_topology_name(), self._name,
                                        self._context.get_task_index())
        saved = (self._state.get(STATE_KEY) if self._state is not None else None) or {}
        restored = int(saved.get("checkpoint", 0))
        if choice == "false":
            self._fell_back("kafka.transactions is false")
            return
        timeout = float(config.get(kc.CHECK_TIMEOUT_SECS, 10.0))
        producer = None
        try:  # the client refuses (a setting), or the broker does
            producer = self._ck.Producer({
                "error_cb": functools.partial(_on_error, self._ref), **self._properties,
                "transactional.id": self._txn_id})
            producer.init_transactions(timeout)  # fences a predecessor: aborts its open one
        except self._ck.KafkaException as exc:
            if producer is not None:
                _shut(producer)
                producer = None  # the error's traceback holds this frame: let it go
            if choice == "true":
                _shut(self._producer)
                self._producer = None
                raise self._refused(config, exc) from exc
            self._fell_back(f"transactions unavailable: {exc}")
            return
        _shut(self._producer)
        self._producer = producer
        self._marker = self._ck.Consumer(kc.client_properties(
            config, **{"group.id": self._txn_id, "enable.auto.commit": False}))
        self._transactional = True
        self._in_txn = []
        held = [tuple(r) for r in saved.get("held") or []]
        waiting = int(saved.get("txn_checkpoint", 0))
        if saved.get("txn") and self._last_committed() < waiting:
            # a new producer: init_transactions aborted the transaction of checkpoint
            # ``waiting`` (covered by the restored, so committed, one): produce it again
            self.log(f"KafkaSink {self._name}: the Kafka transaction of checkpoint {waiting} "
                     "was not committed before the task stopped; its "
                     f"{len(saved['txn'])} records are produced again", "info")
            held = [tuple(r) for r in saved["txn"]] + held
        if held:  # records of the restored (so committed) checkpoint not in any transaction
            self._begin()
            for value, key in held:
                self._produce(value, key, None)
            self._commit_open(restored)

    def _refused(self, config: dict, exc: Exception) -> ConnectorError:
        """Return the error of transactions refused (``kafka.transactions: true``).

        Permanent when the broker or the client refuses them (a setting, an ACL, a timeout
        above the broker's maximum); transient when the broker did not answer in time.
        """
        ck = self._ck
        error = kc.error_of(exc)
        code = error.code() if error is not None else None
        transient = code in (ck.KafkaError._TIMED_OUT, ck.KafkaError._TRANSPORT,
                             ck.KafkaError._ALL_BROKERS_DOWN, ck.KafkaError._RESOLVE,
                             ck.KafkaError.COORDINATOR_NOT_AVAILABLE,
                             ck.KafkaError.NOT_COORDINATOR,
                             ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS) or \
            (error is not None and error.retriable())
        servers = config[kc.BOOTSTRAP_SERVERS]
        if code == ck.KafkaError.INVALID_TRANSACTION_TIMEOUT:
            fix = ("lower 'transaction.timeout.ms' in kafka.properties to at most the broker's "
                   "transaction.max.timeout.ms (15 min by default)")
        elif code in (ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                      ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED):
            fix = (f"grant the sink's principal WRITE and DESCRIBE on transactional id "
                   f"{self._txn_id!r} (a PREFIXED ACL on 'heron-' covers every sink), or set "
                   f"{kc.TRANSACTIONS!r} to 'auto' or false to accept at-least-once output")
        elif transient:
            fix = (f"check that the broker at {servers} is up and its transaction coordinator "
                   f"answers (the task is restarted until heron.instance.restart.max)")
        else:
            fix = ("use a broker with transactions and kafka.properties that allow them "
                   f"(enable.idempotence), or set {kc.TRANSACTIONS!r} to 'auto' or false to "
                   "accept at-least-once output")
        msg = (f"the producer could not start transactions with the broker at {servers} "
               f"({exc})")
        return ConnectorError(msg, system=kc.SYSTEM, component=self._name,
                              value=self._txn_id, fix=fix, permanent=not transient)

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """Run a producer call ``what``; turn its failure into the error to raise.

        A ``KafkaException`` becomes ``_failed``'s error; on a permanent one (the producer was
        fenced, also when a delivery report read in this call said so) the producer is
        dropped at once, without a flush (it is broken, and an in-process task that failed is
        not closed), before the error goes up.
        """
        try:
            yield
        except BufferError:
            raise
        except Exception as exc:
            # confluent-kafka may raise a fatal error (fenced) as the cause of a SystemError
            # it raises when it calls a delivery callback with that error pending
            kafka = _kafka_cause(exc, self._ck.KafkaException)
            error = self._failed(what, kafka) if kafka is not None else exc
            if permanent_error(error) is not None:
                self._drop()
            if error is exc:
                raise
            raise error from exc
        self._raise_reported()

    def _raise_reported(self) -> None:
        """Raise what the reports read in the last call said: fenced first, else undelivered."""
        fatal, undelivered = self._fatal, self._undelivered
        if fatal is None and undelivered is None:
            return
        self._undelivered = None
        if kc.is_fenced(fatal) or kc.is_fenced(undelivered):
            error = kc.fenced_error(self._name, self._txn_id, (fatal or undelivered).str())
            self._drop()
            raise error
        reason = (undelivered or fatal).str()
        msg = f"the Kafka producer could not deliver to {self._topic!r}: {reason}"
        raise TopologyRuntimeError(msg, component=self._name)

    def _drop(self) -> None:
        """Disconnect the producer and the marker consumer without a flush; never raises."""
        producer, self._producer = self._producer, None
        marker, self._marker = self._marker, None
        self._transactional = False
        if producer is not None:
            _shut(producer)
        if marker is not None:
            try:
                marker.close()
            except Exception as exc:  # noqa: BLE001 - on the way out of the error that matters
                self.log(f"KafkaSink {self._name}: closing the marker consumer failed ({exc})",
                         "warning")

    def _failed(self, what: str, exc: Exception) -> Exception:
        """Return the error to raise for a producer call ``what`` that raised ``exc``.

        A fenced producer (another one took over the transactional.id) gives the permanent
        ``ConnectorError`` saying so; any other a ``TopologyRuntimeError`` (restarts retry).
        A producer in a fatal state answers every call with ``_FATAL``: the transactional
        calls raise the fatal error itself, so one of them is asked for it.
        """
        error = self._fatal if kc.is_fenced(self._fatal) else kc.error_of(exc)
        if error is not None and error.code() == self._ck.KafkaError._FATAL \
                and self._transactional and self._producer is not None:
            try:
                self._producer.abort_transaction(0)
            except self._ck.KafkaException as fatal:
                error = kc.error_of(fatal) or error
        if self._transactional and kc.is_fenced(error):
            return kc.fenced_error(self._name, self._txn_id, error.str())
        msg = f"the Kafka producer's {what} on topic {self._topic!r} failed: {exc}"
        return TopologyRuntimeError(msg, component=self._name)

    def _last_committed(self) -> int:
        """Return the checkpoint of the last transaction committed under this transactional.id.

        Every commit sends, inside its transaction, an offset commit of the group named like
        the transactional.id: the checkpoint's id as the offset of partition 0 of the topic.
        Kafka applies it only if the transaction commits.
        """
        found = self._marker.committed([self._ck.TopicPartition(self._topic, 0)],
                                       timeout=FLUSH_TIMEOUT_SECS)
        return max(found[0].offset, 0)

    def _commit(self, checkpoint: int) -> None:
        """Commit the producer's transaction, marking it with ``checkpoint``."""
        with self._calling("send_offsets_to_transaction"):
            self._producer.send_offsets_to_transaction(
                [self._ck.TopicPartition(self._topic, 0, checkpoint)],
                self._marker.consumer_group_metadata(), FLUSH_TIMEOUT_SECS)
        self._call("commit_transaction")
        self.transactions["committed"] += 1

    def _fell_back(self, why: str) -> None:
        self.log(f"KafkaSink {self._name}: no Kafka transactions ({why}); under effectively-once "
                 "its records reach Kafka at least once: those produced after the last "
                 "checkpoint are produced again after a rollback", "warning")

    def _call(self, name: str) -> None:
        with self._calling(name):
            getattr(self._producer, name)(FLUSH_TIMEOUT_SECS)

    def _begin(self) -> None:
        with self._calling("begin_transaction"):
            self._producer.begin_transaction()
        self._open = True
        self._in_txn = []

    def _commit_open(self, checkpoint: int) -> None:
        self._flush()
        self._commit(checkpoint)
        self._open = False

    def _commit_pending(self) -> None:
        """Commit the waiting transaction, then produce what was held meanwhile."""
        self._commit(int(self._pending or 0))
        self._pending = None
        self._in_txn = []
        held, self._held = self._held, []
        if held:
            self._begin()
            for value, key in held:
                self._in_txn.append((value, key))
                self._produce(value, key, None)

    def process(self, tup):
        """Produce the tuple's record; ack or fail it when its delivery report arrives."""
        where = (tup.component, tup.stream)
        positions = self._positions.get(where)
        if positions is None:
            fields = self._context.get_component_output_fields(tup.component, tup.stream)
            positions = self._positions[where] = field_positions(fields)
        value_at, key_at = positions
        key = None if key_at is None else encode(tup.values[key_at])
        value = encode(tup.values[value_at])
        if self._transactional:
            if self._pending is not None:  # the producer's transaction waits for its commit
                self._held.append((value, key))
                return
            if not self._open:
                self._begin()
            self._in_txn.append((value, key))
        if self._producer is None:  # closed at an end of input, yet more came: open anew
            self._producer = self._ck.Producer(self._properties)
        self._produce(value, key, tup)

    def _produce(self, value: bytes | None, key: bytes | None, tup) -> None:
        report = functools.partial(_report, self._ref, tup)
        while True:
            try:
                with self._calling("produce"):  # a fatal state (fenced, ...) raises
                    self._producer.produce(self._topic, value=value, key=key,
                                           on_delivery=report)
                break
            except BufferError:  # the local queue is full: wait for the broker
                self._poll(0.05)
        self._poll(0)

    def _poll(self, timeout: float) -> None:
        """Read delivery reports; a fatal producer error (fenced, ...) raises here too."""
        with self._calling("poll"):
            self._producer.poll(timeout)

    def process_tick(self, tup):
        """Read the delivery reports."""
        if self._producer is not None:  # (None: the input ended and the producer was closed)
            self._poll(0)

    def _delivered(self, tup, error, message) -> None:
        if self._discarding:  # records of a transaction being aborted (a rollback)
            return
        if error is None:
            if self._reliable and tup is not None:
                self.ack(tup)
            return
        self._errors += 1
        if self._transactional:  # raised once the call reading it returns (_raise_reported):
            if self._undelivered is None:  # a fatal error may explain it (fenced: purged)
                self._undelivered = error
            return
        if error.fatal() or self._effectively_once:  # effectively once: roll back, produce again
            msg = f"the Kafka producer could not deliver to {self._topic!r}: {error.str()}"
            raise TopologyRuntimeError(msg, component=self._name)
        if self._reliable:
            self.log(f"KafkaSink {self._name}: delivery failed ({error.str()}); the tuple is "
                     "failed and will be replayed", "warning")
            self.fail(tup)
        else:  # at-most-once: the mode accepts the loss; say so
            self.log(f"KafkaSink {self._name}: delivery failed ({error.str()}); at-most-once: "
                     "the record is lost", "warning")

    def _flush(self) -> None:
        if self._producer is None:  # closed at the end of the input: everything was delivered
            return
        with self._calling("flush"):
            left = self._producer.flush(FLUSH_TIMEOUT_SECS)
        if left:
            msg = (f"{left} records were not delivered to topic {self._topic!r} within "
                   f"{FLUSH_TIMEOUT_SECS:g} s")
            raise TopologyRuntimeError(msg, component=self._name)

    def end_of_input(self):
        """Deliver everything produced so far (a bounded input ended), then close the producer.

        Nothing more can arrive, and a bolt has no ``close`` call in its life cycle: this is the
        sink's last chance to disconnect on time (else its producer stays connected until the
        sink is garbage-collected: an in-process run's tasks are cyclic garbage).
        """
        self._flush()
        if self._transactional and self._producer is not None:  # without waiting for a checkpoint
            if self._pending is not None:
                self._commit_pending()
            if self._open:
                self._commit_open(self._last_checkpoint)
        self.close()

    def close(self):
        """Deliver what is queued (reading the reports), then drop the producer.

        A transaction still open or waiting is left to the broker: it aborts it when it times
        out or when the task's successor calls ``init_transactions``.
        """
        producer = getattr(self, "_producer", None)
        if producer is not None:
            self._producer = None
            try:
                producer.flush(FLUSH_TIMEOUT_SECS)
            except Exception as exc:  # noqa: BLE001 - a broken producer: keep the first error
                exc.__traceback__ = None  # (see _shut)
                self.log(f"KafkaSink {self._name}: flushing at close failed ({exc}); the "
                         "producer is dropped", "warning")
            _shut(producer)
        self._transactional = False  # (records after an end of input: a plain producer)
        if self._marker is not None:
            marker, self._marker = self._marker, None
            try:
                marker.close()
            except Exception as exc:  # noqa: BLE001 - as above
                self.log(f"KafkaSink {self._name}: closing the marker consumer failed ({exc})",
                         "warning")

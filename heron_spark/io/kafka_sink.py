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

Effectively-once: every record produced before a checkpoint is flushed to the broker before
the sink's state is saved (``pre_save``), so nothing a checkpoint covers is lost; records
produced after the last checkpoint are produced again when the topology rolls back, so Kafka
receives them **at least once**. Kafka transactions are not used: a transaction could only be
committed when the topology's checkpoint commits, and heron_spark tells tasks no such thing
(there is no post-commit callback yet); and Tansu, the broker our tests run, accepts the
transaction calls but shows aborted records to ``read_committed`` consumers, so an
exactly-once sink could not be tested here. The sink logs this at start.

Runs in a Heron Instance, on the task thread; ``confluent_kafka`` is imported only there.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from heron_spark.api import api_constants
from heron_spark.api.bolt import Bolt
from heron_spark.api.state import StatefulComponent
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyRuntimeError, TopologyValueError
from heron_spark.io import kafka_config as kc

TICK_SECS = 0.1
FLUSH_TIMEOUT_SECS = 60.0
# The live sink of each task in this process: a restore (effectively once) builds the sink anew,
# and ``initialize`` flushes the previous one's producer. Weak: a bolt has no ``close`` call in
# its life cycle, so a sink's producer lives exactly as long as the sink (a strong registry
# kept every finished run's producer connected, and logging once its broker went away, for
# the rest of the process: the in-process runner's case).
_OPEN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _shut(producer) -> None:
    """Disconnect ``producer`` now.

    ``Producer.close`` where confluent-kafka has it; an older one disconnects when its last
    reference goes.
    """
    close = getattr(producer, "close", None)
    if close is not None:
        close()


def _report(sink_ref: weakref.ref, tup, error, message) -> None:
    """Hand a delivery report to its sink, if the sink still exists.

    The producer holds each record's callback until its report is read; a weak reference
    there keeps a finished sink (and so its producer) from being kept alive by its own records.
    """
    sink = sink_ref()
    if sink is not None:
        sink._delivered(tup, error, message)


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


class KafkaSink(Bolt, StatefulComponent):
    """See the module docstring. Configure through the component config (``kafka.*`` keys)."""

    outputs: list = []

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the spec, with the config checked and a tick to read delivery reports."""
        config = kc.sink_settings(config or {}, component=name)
        config.setdefault(api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS, TICK_SECS)
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    def init_state(self, stateful_state) -> None:
        """Effectively once: nothing of the sink's own is saved (see ``pre_save``)."""

    def pre_save(self, checkpoint_id) -> None:
        """Flush: every record produced before the checkpoint is on the broker before it saves."""
        self._flush()

    def initialize(self, config, context):
        """Create the producer and check that the broker answers and has the topic."""
        self._ck = kc.client()
        self._name = context.get_component_id()
        self._context = context
        config = kc.sink_settings(config, component=self._name)
        self._topic = str(config[kc.TOPIC])
        mode = TopologyConfig.from_config(config)
        self._reliable, self._effectively_once = mode.at_least_once, mode.effectively_once
        previous = _OPEN.pop(context.get_task_id(), None)
        if previous is not None and previous is not self:
            previous.close()
        self._properties = kc.producer_properties(config)
        self._producer = self._ck.Producer(self._properties)
        try:
            kc.check_cluster(self._producer, self._name, config, topics=[self._topic])
        except TopologyValueError:  # nothing was produced; the error's traceback holds the
            _shut(self._producer)   # producer (check_cluster's frame): disconnect it now
            self._producer = None
            raise
        _OPEN[context.get_task_id()] = self
        self._ref = weakref.ref(self)
        self._positions: dict[tuple[str, str], tuple[int, int | None]] = {}
        self._errors = 0
        if self._effectively_once:
            self.log(f"KafkaSink {self._name}: under effectively-once the records reach Kafka "
                     "at least once (no Kafka transactions; see heron_spark.io.kafka_sink)",
                     "warning")

    def process(self, tup):
        """Produce the tuple's record; ack or fail it when its delivery report arrives."""
        where = (tup.component, tup.stream)
        positions = self._positions.get(where)
        if positions is None:
            fields = self._context.get_component_output_fields(tup.component, tup.stream)
            positions = self._positions[where] = field_positions(fields)
        value_at, key_at = positions
        key = None if key_at is None else encode(tup.values[key_at])
        report = functools.partial(_report, self._ref, tup)
        if self._producer is None:  # closed at an end of input, yet more came: open anew
            self._producer = self._ck.Producer(self._properties)
            _OPEN[self._context.get_task_id()] = self
        while True:
            try:
                self._producer.produce(self._topic, value=encode(tup.values[value_at]), key=key,
                                       on_delivery=report)
                break
            except BufferError:  # the local queue is full: wait for the broker
                self._producer.poll(0.05)
        self._producer.poll(0)

    def process_tick(self, tup):
        """Read the delivery reports that arrived (they ack or fail their tuples)."""
        if self._producer is not None:  # None: the input ended and the producer was closed
            self._producer.poll(0)

    def _delivered(self, tup, error, message) -> None:
        if error is None:
            if self._reliable:
                self.ack(tup)
            return
        self._errors += 1
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
        self.close()

    def close(self):
        """Deliver what is queued (reading the reports), then drop the producer."""
        producer = getattr(self, "_producer", None)
        if producer is not None:
            producer.flush(FLUSH_TIMEOUT_SECS)
            _shut(producer)
            if _OPEN.get(self._context.get_task_id()) is self:
                del _OPEN[self._context.get_task_id()]
            self._producer = None

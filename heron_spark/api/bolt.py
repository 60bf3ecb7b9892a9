"""The bolt API (heronpy's ``Bolt``), plus ``end_of_input`` for bounded topologies."""

from __future__ import annotations

from heron_spark.api.component import BaseComponent
from heron_spark.api.stream import Stream
from heron_spark.api.tuple import TupleHelper


class BaseBolt(BaseComponent):
    """What every bolt can do to the runtime: emit, ack, fail (heronpy's ``BaseBolt``)."""

    @staticmethod
    def is_tick(tup) -> bool:
        """Return True when ``tup`` is a tick tuple."""
        return tup.stream == TupleHelper.TICK_TUPLE_ID

    def emit(self, tup, stream: str = Stream.DEFAULT_STREAM_ID, anchors=None,
             direct_task: int | None = None, need_task_ids: bool = False,
             timestamp: int | None = None):
        """Emit ``tup`` on ``stream``, anchored to the input tuples in ``anchors``.

        Returns the target task ids when ``need_task_ids`` is True. heron_spark:
        ``timestamp`` is the tuple's event time (int ms since the epoch); without it, an emit
        inside ``process(tup)`` carries the newest timestamp of its anchors, else of ``tup``.
        """
        return self.delegate.emit(tup, stream, None, anchors, direct_task, need_task_ids,
                                  timestamp)

    def ack(self, tup) -> None:
        """Mark input ``tup`` processed (at-least-once)."""
        self.delegate.ack(tup)

    def fail(self, tup) -> None:
        """Mark input ``tup`` failed: its spout replays it (at-least-once)."""
        self.delegate.fail(tup)


class Bolt(BaseBolt):
    """A processing step. Runs in its own Heron Instance process, one per task.

    ``process`` is called once per input tuple on the instance's task-execution thread,
    ``process_tick`` every ``topology.tick.tuple.freq.secs`` seconds when that key is set.
    """

    auto_ack = False
    """At-least-once: ack every input after ``process`` returns (unless it acked or failed it
    itself) and anchor emits to it. Also set by the component config ``topology.bolt.auto.ack``."""

    def process(self, tup) -> None:
        """Handle one input tuple; may emit, ack or fail."""
        msg = f"{type(self).__name__} must implement process()"
        raise NotImplementedError(msg)

    def process_tick(self, tup) -> None:
        """Handle a tick tuple (stream ``__tick`` from component ``__system``)."""

    def process_watermark(self, watermark_ms: int) -> None:
        """Handle the advance of this task's input watermark to ``watermark_ms`` (heron_spark).

        Every tuple still to come has a timestamp >= ``watermark_ms`` (ms since the epoch;
        ``event_time.WATERMARK_MAX`` at the end of input, before ``end_of_input``). Called on
        the task's thread after every tuple that came before the watermark; emits here leave
        before the watermark goes on downstream. Event-time windows fire here.
        """

    def end_of_input(self) -> None:
        """Handle the end of input: every upstream task has ended (bounded topologies); may emit."""

    def on_timer(self, key, ts_ms: int, kind: str) -> None:
        """Handle a due timer this task registered for ``key`` at ``ts_ms``; may emit.

        ``kind`` is ``"event"`` (registered with ``context.register_event_time_timer``: called
        once the task's input watermark reaches ``ts_ms``, before ``process_watermark``) or
        ``"processing"`` (``register_processing_time_timer``: called once the wall clock, in ms
        since the epoch, reaches ``ts_ms``). Timers fire in time order, ties by key; each
        registered (key, ts_ms, kind) once. Called on the task's thread; emits carry no
        timestamp unless given. Under effectively once the timers are checkpointed with the
        state and follow their key's key group when the component is rescaled. Override it to
        use timers: registering one on a bolt that does not raises ``TopologyTypeError``.
        """

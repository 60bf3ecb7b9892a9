"""Event time: the units and bounds every part of heron_spark uses for timestamps and watermarks.

An event time is an int of milliseconds since the epoch, carried by each tuple that has one
(``HeronTuple.timestamp``). A watermark W, sent in band from every task to every downstream
task, says: every tuple still to come on this path has a timestamp >= W. A tuple whose
timestamp is below its task's current input watermark is late. A window ``[start, end)`` is
complete once the watermark reaches ``end``; an event-time timer for ``ts`` fires once it
reaches ``ts``.

Spouts make watermarks: per source partition (``Spout.emit(..., partition=p)``; one per task
by default), the newest timestamp seen minus ``topology.bolts.tuple.timestamp.max.lag.ms``;
the task's is the minimum over its partitions that are not idle (no event-time tuple for
``heron.watermark.idle.ms`` while the spout could emit). A bolt task's input watermark is the
minimum over its upstream tasks that have neither ended nor gone idle; when it advances the
bolt's ``process_watermark`` runs, then the watermark goes on downstream. When every upstream
task has ended the watermark is ``WATERMARK_MAX``.
"""

from __future__ import annotations

WATERMARK_MIN = -(2 ** 63)
"""The watermark before anything is known: every timestamp is still to come."""
WATERMARK_MAX = 2 ** 63 - 1
"""The watermark at the end of input: nothing more will come."""


def timestamp_ms(value) -> int | None:
    """Return ``value`` as an event time in whole milliseconds, None when it is not one.

    Ints are taken as they are, finite floats truncated; anything else (None, bools, strings,
    NaN) is not a timestamp.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value if WATERMARK_MIN < value < WATERMARK_MAX else None
    if isinstance(value, float) and value == value and abs(value) < 9.2e18:  # noqa: PLR0124
        return int(value)
    return None


__all__ = ["WATERMARK_MAX", "WATERMARK_MIN", "timestamp_ms"]

"""Every metric name heron_spark's processes publish, written once for producers and readers.

Instances, stream managers and their loops publish under these names; the metrics managers,
the TMaster's history (``metrics.names.metric_kind`` folds each per minute), the handle's
``metrics()`` and the tracker read them. Heron's own names and units come first
(``heron/instance/src/python/utils/metrics/metrics_helper.py``,
``heron/stmgr/src/cpp/manager/stmgr-server.cpp``): counts are tuples, latencies the mean over
the publishing interval in **nanoseconds**, back pressure times **milliseconds**. Then
heron_spark's own. Counters are cumulative since the publishing process started (a restarted
process starts again from 0). A name with scopes is ``scoped(name, scope, ...)``: Heron's
multi-metric key, e.g. ``__emit-count/default``. Pure constants: any process, any thread.
"""

from __future__ import annotations

# ---- Heron's, instances (per stream: ``<name>/<stream>``; bolts' inputs:
# ``<name>/<component>/<stream>``)
EMIT_COUNT = "__emit-count"
ACK_COUNT = "__ack-count"
FAIL_COUNT = "__fail-count"
TIMEOUT_COUNT = "__timeout-count"
COMPLETE_LATENCY = "__complete-latency"
FAIL_LATENCY = "__fail-latency"
NEXT_TUPLE_COUNT = "__next-tuple-count"
NEXT_TUPLE_LATENCY = "__next-tuple-latency"
EXECUTE_COUNT = "__execute-count"
EXECUTE_LATENCY = "__execute-latency"
PROCESS_LATENCY = "__process-latency"
EXECUTE_TIME_NS = "__execute-time-ns"

# ---- Heron's, stream managers (Heron registers its server counters under ``__server``)
SERVER = "__server"
TUPLES_FROM_WORKERS = "__server/__tuples_from_workers"
BYTES_FROM_WORKERS = "__server/__bytes_from_workers"
TUPLES_TO_WORKERS = "__server/__tuples_to_workers"
BYTES_TO_WORKERS = "__server/__bytes_to_workers"
TUPLES_FROM_STMGRS = "__server/__tuples_from_stmgrs"
BYTES_FROM_STMGRS = "__server/__bytes_from_stmgrs"
TIME_SPENT_BACK_PRESSURE_INITIATED = "__server/__time_spent_back_pressure_initiated"
TIME_SPENT_BACK_PRESSURE_AGGR = "__server/__time_spent_back_pressure_aggr"
TIME_SPENT_BACK_PRESSURE_BY_COMPID = "__time_spent_back_pressure_by_compid"  # /<component>

# ---- heron_spark's, instances
PENDING_TREES = "__pending-trees"                         # a spout task's open trees
COMPLETE_LATENCY_MS_TOTAL = "__complete-latency-ms-total"  # summed ages of acked trees, ms
METRICS_DROPPED = "__metrics-dropped"                      # samples the full queue refused
# effectively once, a stateful task's (gauges of its last checkpoint unless noted)
STATE_KEYS = "__state-keys"                    # keys at the last snapshot
STATE_BYTES = "__state-bytes"                  # memory: pickled size; rocksdb: database files
CHECKPOINT_PAUSE_MS = "__checkpoint-pause-ms"  # the task's thread: pre_save + local snapshot
CHECKPOINT_UPLOAD_MS = "__checkpoint-upload-ms"        # the uploader's thread
CHECKPOINT_UPLOADED_BYTES = "__checkpoint-uploaded-bytes"
CHECKPOINT_UPLOADED_BYTES_TOTAL = "__checkpoint-uploaded-bytes-total"  # cumulative
STATE_RESTORE_MS = "__state-restore-ms"        # loading the last restored checkpoint
# event time: a task's watermark (ms since the epoch, a gauge once it has one), how far it
# trails the wall clock (ms, a gauge), and the tuples it found late (cumulative)
WATERMARK = "__watermark"
WATERMARK_LAG_MS = "__watermark-lag-ms"
LATE_TUPLES = "__late-tuples"

# ---- heron_spark's, stream managers (cumulative unless noted)
TUPLES_ROUTED = "__tuples-routed"
TUPLES_DROPPED = "__tuples-dropped"
BACKPRESSURE_SECS = "__backpressure-secs"        # also /<component>: the time it held it up
BACKPRESSURE_EPISODES = "__backpressure-episodes"
INSTANCES_LOST = "__instances-lost"
INSTANCES_REREGISTERED = "__instances-reregistered"
TREES_OPEN = "__trees-open"                      # a gauge
TREES_ACKED = "__trees-acked"
TREES_FAILED = "__trees-failed"
TREES_EXPIRED = "__trees-expired"
PEER_FRAMES_DROPPED = "__peer-frames-dropped"
CHECKPOINT_HELD_FRAMES = "__checkpoint-held-frames"  # a gauge (effectively once)
RESTORE_DROPPED_FRAMES = "__restore-dropped-frames"  # effectively once
QUEUED_TUPLES = "__queued-tuples"                # /<component>: a gauge
QUEUE_AGE_MAX_MS = "__queue-age-max-ms"          # /<component>: a gauge, the oldest's wait
# /<task>: a gauge, first to last upstream marker of a local bolt task's last checkpoint
CHECKPOINT_ALIGNMENT_MS = "__checkpoint-alignment-ms"

# ---- heron_spark's, every I/O loop (stream managers and instances)
LOOP_TURNS = "__loop-turns"
FRAMES_RECEIVED = "__frames-received"
BYTES_RECEIVED = "__bytes-received"
FRAMES_SENT = "__frames-sent"
BYTES_SENT = "__bytes-sent"

# ---- heron_spark's, added by readers (``metrics.aggregate``: failures the TMaster counted)
INSTANCE_FAILURES = "__instance-failures"


def scoped(name: str, *scopes: str) -> str:
    """Return ``name/<scope>/...``: Heron's multi-metric key, e.g. ``__emit-count/default``."""
    return "/".join((name, *scopes))

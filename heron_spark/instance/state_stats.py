"""A stateful task's state and checkpoint figures, published as task metrics.

``TaskState`` fills a ``StateStats``: the task's thread the keys at each snapshot, the time it
paused for it (``pre_save`` and the local snapshot) and the last restore's time; the uploader
thread the bytes of the snapshot, those it wrote to the checkpoint store and the time the
upload took. The metrics thread reads them (``add_metrics``) under the names of
``contract.metric_names``. Each field is written by one thread and read whole by another (a
plain attribute assignment): a publish may pair one checkpoint's keys with the previous one's
upload, never a torn value.
"""

from __future__ import annotations

from typing import Callable

from heron_spark.contract import metric_names as names


class StateStats:
    """One task's figures of its last checkpoint and restore (see the module docstring)."""

    __slots__ = ("keys", "bytes", "pause_ms", "upload_ms", "uploaded_bytes",
                 "uploaded_bytes_total", "restore_ms", "snapshots")

    def __init__(self) -> None:
        self.keys = 0                 # at the last snapshot (rocksdb: RocksDB's estimate)
        self.bytes = 0                # memory: the pickled snapshot; rocksdb: its files
        self.pause_ms = 0.0           # the task's thread, last snapshot
        self.upload_ms = 0.0          # the uploader's thread, last finished upload
        self.uploaded_bytes = 0       # written to the store by the last finished upload
        self.uploaded_bytes_total = 0
        self.restore_ms = 0.0         # loading the checkpoint of the last (re)start
        self.snapshots = 0

    def uploaded(self, state_bytes: int, written: int, secs: float) -> None:
        """Record a finished upload (the uploader's thread)."""
        self.bytes = state_bytes
        self.uploaded_bytes = written
        self.uploaded_bytes_total += written
        self.upload_ms = round(secs * 1000.0, 3)

    def add_metrics(self, add: Callable[..., object]) -> None:
        """Add the figures to a metrics publish (the metrics thread).

        None before the first snapshot; the restore time only after a restore.
        """
        if self.snapshots:
            add(name=names.STATE_KEYS, value=self.keys)
            add(name=names.STATE_BYTES, value=self.bytes)
            add(name=names.CHECKPOINT_PAUSE_MS, value=self.pause_ms)
            add(name=names.CHECKPOINT_UPLOAD_MS, value=self.upload_ms)
            add(name=names.CHECKPOINT_UPLOADED_BYTES, value=self.uploaded_bytes)
            add(name=names.CHECKPOINT_UPLOADED_BYTES_TOTAL, value=self.uploaded_bytes_total)
        if self.restore_ms:
            add(name=names.STATE_RESTORE_MS, value=self.restore_ms)

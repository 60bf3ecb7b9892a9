"""One ``DeltaSink`` task's handle on its Delta Lake table, through ``deltalake`` (delta-rs).

``DeltaTarget`` checks at task start that the table can be used (an existing table's columns
and partition columns against the sink's, a local path's folder writable, an object store's
table readable), conforms each batch to the table's schema (``delta.schema.mode`` ``fail``:
a batch with other columns or types is refused naming them; ``merge``: delta-rs evolves the
schema) and commits it as one Delta version. ``commit(batch, version)`` makes an
effectively-once commit idempotent: the version carries the application transaction
``(app_id, version)`` and is skipped when the table already holds a transaction of ``app_id``
at ``version`` or later, read in the snapshot the commit is built on, so a replay of a
committed checkpoint writes nothing. Concurrent writers (other tasks appending, or creating
the table at the same moment) make delta-rs raise ``CommitFailedError`` now and then; a commit
is retried from a fresh snapshot with exponential backoff, ``delta.commit.retries`` times,
then fails with one error naming the component and the table.

What it refuses is a ``ConnectorError`` naming the component, the table and the fix:
permanent (the topology fails at once, without restarts) for a local path that cannot be
written, partition columns or a schema the table does not accept; transient (restarts retry
it) for an object store or a table that cannot be read or written now.

Runs in a Heron Instance, on the task thread; ``deltalake`` is imported only there
(``client``), so importing heron_spark does not need it.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any
from urllib.parse import urlparse

from heron_spark.errors import ConnectorError, ExtrasError, TopologyRuntimeError

log = logging.getLogger(__name__)

INSTALL_EXTRA = "delta"
SYSTEM = "Delta"  # a ConnectorError's ``system``
BACKOFF_SECS = 0.05      # the first retry's wait; doubled each time
BACKOFF_MAX_SECS = 2.0


def client() -> Any:
    """Return the ``deltalake`` module, or raise ``ExtrasError`` naming the extra."""
    try:
        import deltalake
    except ImportError as exc:
        package = "deltalake"
        raise ExtrasError(package, INSTALL_EXTRA, what="DeltaSink") from exc
    return deltalake


def local_folder(path: str) -> str | None:
    """Return the local folder of ``path`` (a plain path or a ``file://`` URL), else None."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else path
    if len(parsed.scheme) == 1:  # a Windows drive letter
        return path
    return None


def kind_of_type(arrow_type) -> str:
    """Return the ``parquet_rows`` column kind an Arrow type holds (``other`` if none)."""
    import pyarrow.types as t

    checks = ((t.is_boolean, "bool"), (t.is_integer, "int"), (t.is_floating, "float"),
              (lambda x: t.is_string(x) or t.is_large_string(x) or t.is_string_view(x), "str"),
              (lambda x: t.is_binary(x) or t.is_large_binary(x), "bytes"),
              (t.is_timestamp, "timestamp"), (t.is_date, "date"), (t.is_decimal, "decimal"),
              (lambda x: t.is_list(x) or t.is_large_list(x), "list"), (t.is_struct, "struct"))
    for check, kind in checks:
        if check(arrow_type):
            return kind
    return "other"


class DeltaTarget:
    """See the module docstring. Not thread-safe: one per sink task, used on its task thread."""

    def __init__(self, path: str, *, component: str, partition_by: tuple[str, ...] = (),
                 schema_mode: str = "fail", storage_options: dict | None = None,
                 retries: int = 8) -> None:
        self.dl = client()
        self.path = path
        self.component = component
        self.partition_by = tuple(partition_by)
        self.schema_mode = schema_mode
        self.storage_options = dict(storage_options or {}) or None
        self.retries = retries
        self.commits = 0         # Delta versions this target wrote
        self.skipped = 0         # commits found already in the table (replays)
        self.conflicts = 0       # CommitFailedErrors retried

    # ---- opening ---------------------------------------------------------------------------
    def _load(self):
        """Return the table's latest snapshot, or None if there is no table yet."""
        try:
            return self.dl.DeltaTable(self.path, storage_options=self.storage_options)
        except self.dl.exceptions.TableNotFoundError:
            return None

    def open(self, fields: list[str]) -> None:
        """Check the table can take rows of ``fields``; raise ConnectorError if not."""
        folder = local_folder(self.path)
        if folder is not None:
            self._probe(folder)
        try:
            table = self._load()
        except (self.dl.exceptions.DeltaError, OSError) as exc:
            msg = f"DeltaSink cannot read the Delta table at delta.path: {exc}"
            raise ConnectorError(msg, system=SYSTEM, component=self.component, value=self.path,
                                 fix="check the path, the bucket and delta.storage.options "
                                     "(credentials, endpoint, region); the task is restarted "
                                     "until heron.instance.restart.max",
                                 permanent=False) from exc
        if table is None:
            return
        partitions = tuple(table.metadata().partition_columns)
        if partitions != self.partition_by:
            msg = (f"DeltaSink: the table at {self.path} is partitioned by {list(partitions)}, "
                   f"delta.partition.by names {list(self.partition_by)}")
            raise ConnectorError(msg, system=SYSTEM, component=self.component,
                                 value=list(self.partition_by),
                                 fix=f"set delta.partition.by to {list(partitions)}, or "
                                     "write to another delta.path", permanent=True)
        columns = [f.name for f in self._arrow_schema(table)]
        extra = [f for f in fields if f not in columns]
        missing = [c for c in columns if c not in fields]
        if self.schema_mode == "fail" and (extra or missing):
            self._refuse(extra, missing, {})

    def _probe(self, folder: str) -> None:
        probe = os.path.join(folder, f".heron-probe-{uuid.uuid4().hex}")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(probe, "wb") as out:
                out.write(b"ok")
            os.remove(probe)
        except OSError as exc:
            msg = f"DeltaSink cannot write to delta.path: {exc}"
            raise ConnectorError(msg, system=SYSTEM, component=self.component, value=self.path,
                                 fix="give the executors write access to it, or choose another "
                                     "delta.path", permanent=True) from exc

    @staticmethod
    def _arrow_schema(table):
        import pyarrow as pa

        return pa.schema(table.schema().to_arrow())

    # ---- schemas ---------------------------------------------------------------------------
    def check_kinds(self, kinds: dict[str, str], table=None) -> None:
        """Refuse column kinds (``parquet_rows``) the existing table's columns cannot hold.

        Checks as soon as a column's first value fixes its kind, so a mismatch fails before a
        commit; ``merge`` mode leaves type checks to delta-rs.
        """
        if self.schema_mode != "fail":
            return
        table = table if table is not None else self._load()
        if table is None:
            return
        schema = self._arrow_schema(table)
        differ = {}
        for name, kind in kinds.items():
            if name not in schema.names:
                continue
            want = kind_of_type(schema.field(name).type)
            if want != kind and not (want == "float" and kind == "int"):
                differ[name] = (str(schema.field(name).type), kind)
        if differ:
            self._refuse([], [], differ)

    def conform(self, batch, table):
        """Return ``batch`` cast to ``table``'s schema (mode ``fail``), or refuse it."""
        import pyarrow as pa

        if table is None:
            return batch
        schema = self._arrow_schema(table)
        if self.schema_mode != "fail":
            return batch
        extra = [n for n in batch.schema.names if n not in schema.names]
        missing = [n for n in schema.names if n not in batch.schema.names]
        differ: dict[str, tuple[str, str]] = {}
        columns = []
        for field in schema:
            if field.name in missing:
                continue
            column = batch.column(field.name)
            try:
                columns.append(column.cast(field.type, safe=True))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                differ[field.name] = (str(field.type), str(column.type))
        if extra or missing or differ:
            self._refuse(extra, missing, differ)
        return pa.Table.from_arrays(columns, schema=schema)

    def _refuse(self, extra: list[str], missing: list[str],
                differ: dict[str, tuple[str, str]]) -> None:
        parts = []
        if extra:
            parts.append(f"new columns {extra}")
        if missing:
            parts.append(f"table columns the stream lacks {missing}")
        if differ:
            parts.append("other types " + ", ".join(
                f"{name!r} (table {want}, stream {got})" for name, (want, got) in differ.items()))
        msg = (f"DeltaSink: the stream's schema differs from the Delta table's at {self.path}: "
               f"{'; '.join(parts)}")
        fix = ("set delta.schema.mode: merge in the sink's config to evolve the table's "
               "schema" if not differ else
               "emit values of the table's types (convert upstream), or write to another "
               "delta.path")
        raise ConnectorError(msg, system=SYSTEM, component=self.component,
                             value={"new": extra, "missing": missing,
                                    "types": {k: v for k, v in differ.items()}},
                             fix=fix, permanent=True)

    # ---- committing ------------------------------------------------------------------------
    def committed_version(self, app_id: str) -> int | None:
        """Return the latest transaction version of ``app_id`` in the table (None: none)."""
        table = self._load()
        return None if table is None else table.transaction_version(app_id)

    def commit(self, batch, app_id: str | None = None, version: int | None = None) -> bool:
        """Append ``batch`` as one Delta version; return False if it was already committed.

        With ``app_id``, the version carries the transaction ``(app_id, version)`` and is
        skipped when the table holds one of ``app_id`` at ``version`` or later.
        """
        wait = BACKOFF_SECS
        for attempt in range(self.retries + 1):
            table = self._load()
            if app_id is not None and table is not None:
                done = table.transaction_version(app_id)
                if done is not None and done >= int(version or 0):
                    self.skipped += 1
                    log.info("%s: %s version %d already in %s (its transaction is at %d): "
                             "skipped", self.component, app_id, version, self.path, done)
                    return False
            data = self.conform(batch, table)
            try:
                self._write(table, data, app_id, version)
            except self.dl.exceptions.CommitFailedError as exc:
                if attempt == self.retries:
                    msg = (f"DeltaSink could not commit to the Delta table at {self.path} after "
                           f"{self.retries + 1} attempts (concurrent writers): {exc}")
                    raise TopologyRuntimeError(msg, component=self.component) from exc
                self.conflicts += 1
                log.info("%s: commit conflict on %s (%s); retrying in %.2f s", self.component,
                         self.path, exc, wait)
                time.sleep(wait)
                wait = min(wait * 2, BACKOFF_MAX_SECS)
                continue
            self.commits += 1
            return True
        return False  # (not reached: the last attempt returns or raises)

    def _write(self, table, data, app_id: str | None, version: int | None) -> None:
        dl = self.dl
        properties = None
        if app_id is not None:
            properties = dl.CommitProperties(app_transactions=[
                dl.Transaction(app_id=app_id, version=int(version or 0))], max_commit_retries=0)
        try:
            dl.write_deltalake(
                table if table is not None else self.path, data, mode="append",
                partition_by=list(self.partition_by) or None,
                schema_mode="merge" if self.schema_mode == "merge" else None,
                storage_options=self.storage_options if table is None else None,
                commit_properties=properties)
        except dl.exceptions.CommitFailedError:
            raise
        except dl.exceptions.SchemaMismatchError as exc:
            msg = f"DeltaSink: delta-rs refused the rows' schema for the table at {self.path}: {exc}"
            raise ConnectorError(msg, system=SYSTEM, component=self.component,
                                 value=str(data.schema),
                                 fix="set delta.schema.mode: merge, or emit the table's "
                                     "columns and types", permanent=True) from exc
        except (dl.exceptions.DeltaError, OSError) as exc:
            msg = f"DeltaSink could not write to the Delta table at {self.path}: {exc}"
            raise ConnectorError(msg, system=SYSTEM, component=self.component, value=self.path,
                                 fix="check the path, its permissions and "
                                     "delta.storage.options; with delta.schema.mode merge, "
                                     "emit values of the table's column types",
                                 permanent=False) from exc


__all__ = ["DeltaTarget", "client", "kind_of_type", "local_folder"]

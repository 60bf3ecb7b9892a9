"""``DeltaSink``: a bolt that appends its input to a Delta Lake table, exactly once per checkpoint.

Configure it through its component config (``config={"delta.path": "/data/words"}``): every
field of the input stream is a column (Arrow types inferred from the values, as
``ParquetSink`` does: ``heron_spark.io.parquet_rows``). The table is created by the first
commit, partitioned by ``delta.partition.by`` (some, not all, input fields); ``delta.path`` is
anything ``deltalake`` opens (a local path, ``s3://``, ``abfss://``, ``gs://``...), with
``delta.storage.options`` (a dict of str) passed to it for object stores. Writing goes through
``deltalake`` (delta-rs, ``pip install 'heron_spark[delta]'``), imported when a task starts
(``heron_spark.io.delta_table``).

``delta.schema.mode``: ``fail`` (the default) refuses a stream whose columns or types differ
from an existing table's, at task start for columns and at a column's first value for types,
with one error naming the component, the table, the differing columns and the fix;
``merge`` lets delta-rs evolve the table's schema (new columns are added, missing ones are
null).

When rows are committed depends on the reliability mode:

- effectively once (a ``TwoPhaseStatefulComponent``): rows are buffered between checkpoints;
  ``pre_save(n)`` makes the buffer checkpoint ``n``'s, kept (as Arrow IPC) in the sink's
  checkpoint state; ``post_save(n)``, pushed once checkpoint ``n`` is committed, writes one
  Delta version holding every waiting checkpoint up to ``n`` and carrying the application
  transaction ``(app_id, n)`` (``app_id``: ``heron/<topology>/<component>/<task index>/<run>``,
  ``run`` a token kept in the state, new when a task starts without state). Before it
  commits, the sink reads the table's transaction version of its ``app_id`` and skips the
  commit if it is ``n`` or later, so a commit repeated after any failure (a successor
  restoring checkpoint ``n``, whose state still lists it) writes nothing. ``pre_restore(m)``
  commits what checkpoint ``m`` covers and drops the rest (the spouts replay it); a task
  started from a restored checkpoint commits the waiting rows that state lists. At the end of
  input everything buffered is committed at once, the rows after the last checkpoint under
  the transaction version after it (so a failure after a sink task's end of input and before
  the topology finishes may repeat that tail's rows).
- at-least-once: a commit every ``delta.commit.rows`` rows, about ``delta.commit.bytes`` bytes,
  or ``delta.commit.interval.secs`` seconds after the first buffered row, whichever comes
  first; tuples are acked once their commit succeeded and failed if it failed (so a
  replay after a sink killed between a commit and its acks repeats rows).
- at-most-once: commits on the same triggers; nothing is acked or replayed, so a killed
  sink's buffered rows are lost.

Costs: under effectively once a checkpoint interval's rows wait in memory and are saved in
the checkpoint's state until the checkpoint commits (keep the interval short for a busy
stream); every commit is one Delta version (``OPTIMIZE`` / ``VACUUM`` the table now and then,
as for any streaming writer).

Tasks with ``par > 1`` each commit their own versions; Delta's concurrent-append conflicts
are retried from a fresh snapshot with backoff (``delta.commit.retries`` times) and then fail
the task naming the table. A conflict is only seen where the store refuses to overwrite a
commit (a local or HDFS path; S3 with ``conditional_put: etag`` or a DynamoDB lock), so
``par > 1`` with ``AWS_S3_ALLOW_UNSAFE_RENAME`` is refused where the topology is built. Runs
in a Heron Instance, on the task thread. Bad config fails where the topology is built
(``spec``); an unreadable or unwritable table at ``initialize``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid

from heron_spark.api import api_constants
from heron_spark.api.bolt import Bolt
from heron_spark.api.component import HeronComponentSpec
from heron_spark.api.state import TwoPhaseStatefulComponent
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError
from heron_spark.io.parquet_rows import Rows

log = logging.getLogger(__name__)

PATH = "delta.path"
PARTITION_BY = "delta.partition.by"
SCHEMA_MODE = "delta.schema.mode"
STORAGE_OPTIONS = "delta.storage.options"
COMMIT_ROWS = "delta.commit.rows"
COMMIT_BYTES = "delta.commit.bytes"
COMMIT_INTERVAL_SECS = "delta.commit.interval.secs"
COMMIT_RETRIES = "delta.commit.retries"
SCHEMA_MODES = ("fail", "merge")
STATE_KEY = "delta.pending"  # the state: {"run": token, "checkpoint": id, "pending": {id: IPC}}


@dataclasses.dataclass(frozen=True)
class DeltaSinkSettings:
    """The sink's typed config; every default is written here once."""

    path: str
    partition_by: tuple[str, ...] = ()
    schema_mode: str = "fail"
    storage_options: tuple[tuple[str, str], ...] = ()
    commit_rows: int = 10_000
    commit_bytes: int = 64 * 1024 * 1024
    commit_interval_secs: float = 1.0
    commit_retries: int = 8

    @classmethod
    def from_config(cls, config: dict, component: str | None = None) -> DeltaSinkSettings:
        """Read the ``delta.*`` keys of ``config``; raise TopologyValueError for a bad one."""
        path = config.get(PATH)
        if not path or not isinstance(path, str):
            msg = "DeltaSink needs delta.path"
            raise TopologyValueError(msg, component=component, value=path, kind="config",
                                     fix="set config={'delta.path': '/data/table'} (a local "
                                         "path or a URI deltalake opens, e.g. s3://bucket/t)")
        mode = str(config.get(SCHEMA_MODE) or "fail").strip().lower()
        if mode not in SCHEMA_MODES:
            msg = f"DeltaSink: {SCHEMA_MODE} must be 'fail' or 'merge'"
            raise TopologyValueError(msg, component=component, value=config.get(SCHEMA_MODE),
                                     kind="config",
                                     fix=f"set {SCHEMA_MODE} to 'fail' (the default: refuse a "
                                         "schema change) or 'merge' (evolve the table)")
        options = config.get(STORAGE_OPTIONS) or {}
        if not isinstance(options, dict):
            msg = f"DeltaSink: {STORAGE_OPTIONS} must be a dict of str"
            raise TopologyValueError(msg, component=component, value=options, kind="config",
                                     fix=f"pass {STORAGE_OPTIONS}: {{'AWS_REGION': 'eu-west-1'}}")
        default = cls(path=path)
        return cls(
            path=path, partition_by=_names(config, PARTITION_BY), schema_mode=mode,
            storage_options=tuple(sorted((str(k), str(v)) for k, v in options.items())),
            commit_rows=_positive(config, COMMIT_ROWS, default.commit_rows, int, component),
            commit_bytes=_positive(config, COMMIT_BYTES, default.commit_bytes, int, component),
            commit_interval_secs=_positive(config, COMMIT_INTERVAL_SECS,
                                           default.commit_interval_secs, float, component),
            commit_retries=_positive(config, COMMIT_RETRIES, default.commit_retries, int,
                                     component))


def check_single_writer(settings: DeltaSinkSettings, par: int, component: str | None) -> None:
    """Refuse ``par > 1`` on an S3 table that commits by unsafe rename.

    Nothing there stops two tasks from writing the same version: the later one silently
    replaces the other's.
    """
    unsafe = {k.upper(): v for k, v in settings.storage_options}.get(
        "AWS_S3_ALLOW_UNSAFE_RENAME", "").strip().lower() == "true"
    if unsafe and int(par or 1) > 1:
        msg = (f"DeltaSink with par={par} and AWS_S3_ALLOW_UNSAFE_RENAME: the tasks' commits "
               "can overwrite each other's Delta versions, losing rows")
        raise TopologyValueError(msg, component=component, value=par, kind="config",
                                 fix="use par=1, or give delta.storage.options "
                                     "{'conditional_put': 'etag'} (a store that honors "
                                     "If-None-Match, as S3 does) or a DynamoDB lock "
                                     "('AWS_S3_LOCKING_PROVIDER': 'dynamodb') instead")


def _names(config: dict, key: str) -> tuple[str, ...]:
    """Read a list of field names: a list, or one string separated by commas."""
    names = config.get(key) or ()
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    return tuple(str(n) for n in names)


def _positive(config: dict, key: str, default, kind, component):
    value = config.get(key, default)
    try:
        typed = kind(value)
    except (TypeError, ValueError):
        typed = 0
    if typed <= 0:
        msg = f"DeltaSink: {key} must be a positive number"
        raise TopologyValueError(msg, component=component, value=value, kind="config",
                                 fix=f"set {key} to a number above 0 (default {default})")
    return typed


def check_partitions(partition_by: tuple[str, ...], fields: list[str],
                     component: str | None) -> None:
    """Refuse ``delta.partition.by`` unless it names some, not all, of ``fields``."""
    unknown = [f for f in partition_by if f not in fields]
    if unknown or (fields and len(partition_by) >= len(fields)):
        msg = (f"DeltaSink: {PARTITION_BY} must name some, not all, input fields"
               + (f"; {unknown} are not among them" if unknown else ""))
        raise TopologyValueError(msg, component=component, value=list(partition_by),
                                 kind="config", fix=f"partition by a subset of {fields}")


def _spec_fields(inputs) -> list[str] | None:
    """Return the default-stream fields of inputs given as specs (None: not known here)."""
    for spec in list(inputs) if isinstance(inputs, (dict, list, tuple)) else []:
        if not isinstance(spec, HeronComponentSpec) or not isinstance(spec.outputs, list):
            continue
        fields = [out for out in spec.outputs if isinstance(out, str)]
        for out in spec.outputs:
            if isinstance(out, Stream) and out.stream_id == Stream.DEFAULT_STREAM_ID:
                fields = list(out.fields)
        if fields:
            return fields
    return None


class DeltaSink(Bolt, TwoPhaseStatefulComponent):
    """See the module docstring. Configure through the component config (``delta.*`` keys)."""

    outputs: list = []
    auto_ack = False

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the sink's spec; checks the ``delta.*`` keys where the topology is built."""
        settings = DeltaSinkSettings.from_config(config or {}, name)
        fields = _spec_fields(inputs)
        if fields is not None:
            check_partitions(settings.partition_by, fields, name)
        check_single_writer(settings, par, name)
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    _state = None  # effectively once: the task's State (set by init_state)

    def init_state(self, stateful_state) -> None:
        """Keep the checkpointed state: the rows each waiting checkpoint holds."""
        self._state = stateful_state

    def initialize(self, config, context):
        """Check the table, learn the input fields, commit the restored checkpoint's rows."""
        from heron_spark.io.delta_table import DeltaTarget

        self._component = context.get_component_id()
        self.settings = s = DeltaSinkSettings.from_config(config, self._component)
        topology = TopologyConfig.from_config(config, self._component)
        self._eo = topology.effectively_once
        self._alo = topology.at_least_once
        self._check_mode(topology)
        fields = _input_fields(context, self._component)
        check_partitions(s.partition_by, fields, self._component)
        self.rows = Rows(fields, self._component, sink="DeltaSink")
        self.target = DeltaTarget(s.path, component=self._component, partition_by=s.partition_by,
                                  schema_mode=s.schema_mode,
                                  storage_options=dict(s.storage_options),
                                  retries=s.commit_retries)
        self.target.open(fields)
        self._known_kinds = 0
        self._held: list = []               # at-least-once: acked once their commit succeeds
        self._started: float | None = None  # when the oldest buffered row came
        saved = (self._state.get(STATE_KEY) if self._state is not None else None) or {}
        self._run = saved.get("run") or uuid.uuid4().hex[:12]
        self.app_id = (f"heron/{context.get_topology_name()}/{self._component}/"
                       f"{context.get_task_index()}/{self._run}")
        self._pending: dict[int, bytes] = {int(k): v for k, v in
                                           (saved.get("pending") or {}).items()}
        # the last checkpoint saved: an end of input's tail commits under the version after it
        self._last_checkpoint = max(int(saved.get("checkpoint") or 0),
                                    max(self._pending, default=0))
        if self._eo:
            self._commit_due(self._last_checkpoint)  # the restored checkpoint is committed
        else:  # ticks commit by age
            config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = \
                min(max(s.commit_interval_secs / 2, 0.05), 1.0)

    def _check_mode(self, topology: TopologyConfig) -> None:
        if self._alo and topology.bolt_auto_ack:
            msg = "DeltaSink acks a tuple only once its rows are committed; auto-ack is on"
            raise TopologyValueError(msg, component=self._component, value=True, kind="config",
                                     fix="set topology.bolt.auto.ack false in the sink's "
                                         "component config")
        timeout = topology.message_timeout_or_none_secs
        interval = self.settings.commit_interval_secs
        if self._alo and timeout is not None and interval >= timeout:
            msg = (f"DeltaSink holds tuples until its commit ({COMMIT_INTERVAL_SECS} = "
                   f"{interval:g} s) but they time out after {timeout:g} s")
            raise TopologyValueError(msg, component=self._component, value=interval,
                                     kind="config",
                                     fix=f"set {COMMIT_INTERVAL_SECS} below "
                                         "topology.message.timeout.secs")

    # ---- tuples ----------------------------------------------------------------------------
    def process(self, tup):
        """Buffer one row (at-least-once: hold its tuple until its commit)."""
        self.rows.add(tup.values)
        if len(self.rows.kinds) != self._known_kinds:  # a column's type was just fixed
            self._known_kinds = len(self.rows.kinds)
            self.target.check_kinds(self.rows.kinds)
        if self._alo:
            self._held.append(tup)
        if self._started is None:
            self._started = time.monotonic()
        if not self._eo and (self.rows.count >= self.settings.commit_rows
                             or self.rows.approx_bytes >= self.settings.commit_bytes):
            self._flush()

    def process_tick(self, tup):
        """Commit rows that waited ``delta.commit.interval.secs`` (not under effectively once)."""
        if not self._eo and self._started is not None \
                and time.monotonic() - self._started >= self.settings.commit_interval_secs:
            self._flush()

    def _flush(self) -> None:
        """At-least-once and at-most-once: commit the buffer; ack (or fail) its tuples."""
        self._started = None
        held, self._held = self._held, []
        try:
            if self.rows.count:
                self.target.commit(self.rows.to_table(self.rows.take()))
        except BaseException:
            for tup in held:  # not durable: the spout replays them
                self.fail(tup)
            raise
        for tup in held:
            self.ack(tup)

    # ---- checkpoints (effectively once) ----------------------------------------------------
    def pre_save(self, checkpoint_id) -> None:
        """Make the buffered rows checkpoint ``checkpoint_id``'s; keep them in the state."""
        cid = self._last_checkpoint = int(checkpoint_id)
        self._started = None
        if self.rows.count:
            self._pending[cid] = _to_ipc(self.rows.to_table(self.rows.take()))
        self._put_state()

    def post_save(self, checkpoint_id) -> None:
        """Checkpoint ``checkpoint_id`` is committed: write its rows (and earlier ones) once."""
        self._commit_due(int(checkpoint_id))

    def pre_restore(self, checkpoint_id) -> None:
        """Before a rollback: commit what checkpoint ``checkpoint_id`` covers, drop the rest."""
        self._commit_due(int(checkpoint_id))
        self._pending.clear()
        self.rows.take()

    def end_of_input(self):
        """Commit everything buffered (effectively once: without waiting for a checkpoint)."""
        if not self._eo:
            self._flush()
            return
        if self.rows.count:  # the tail after the last checkpoint: a version above it
            self._pending[self._last_checkpoint + 1] = _to_ipc(
                self.rows.to_table(self.rows.take()))
        self._commit_due(max(self._pending, default=0))

    def _commit_due(self, upto: int) -> None:
        """Write the rows of every waiting checkpoint up to ``upto`` as one Delta version."""
        due = sorted(cid for cid in self._pending if cid <= upto)
        if not due:
            return
        batch = _concat([self._pending[cid] for cid in due])
        if self.target.commit(batch, self.app_id, due[-1]):
            log.info("%s: committed checkpoint(s) %s (%d rows) to %s as %s", self._component,
                     due, batch.num_rows, self.settings.path, self.app_id)
        for cid in due:
            del self._pending[cid]
        self._put_state()

    def _put_state(self) -> None:
        if self._state is not None:
            self._state.put(STATE_KEY, {"run": self._run, "checkpoint": self._last_checkpoint,
                                        "pending": dict(self._pending)})


def _to_ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _concat(parts: list):
    """Return Arrow IPC streams (or tables) as one table; an all-null column takes another's type."""
    import pyarrow as pa

    tables = [pa.ipc.open_stream(p).read_all() if isinstance(p, bytes) else p for p in parts]
    if len(tables) == 1:
        return tables[0]
    types = {}
    for table in tables:  # the type of a column that holds values wins over an all-null one's
        for field in table.schema:
            column = table.column(field.name)
            if column.null_count < len(column) or field.name not in types:
                types[field.name] = field.type
    schema = pa.schema([(name, types[name]) for name in tables[0].schema.names])
    return pa.concat_tables([t.select(schema.names).cast(schema) for t in tables])


def _input_fields(context, component: str) -> list[str]:
    """Return the fields of the sink's input streams (they must all be the same)."""
    logical = context._plan.logical  # noqa: SLF001 - the plan is the one record of the fields
    sources = logical.sources(component) or {}
    found = {tuple(logical.components[s.component_name].outputs[s.id].fields) for s in sources}
    if len(found) != 1:
        msg = "DeltaSink reads streams with different fields; a Delta table has one schema"
        raise TopologyValueError(msg, component=component, value=sorted(found), kind="inputs",
                                 fix="give it one input stream, or streams with the same fields")
    return list(found.pop())


__all__ = ["DeltaSink", "DeltaSinkSettings"]

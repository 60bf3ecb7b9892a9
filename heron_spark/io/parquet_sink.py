"""``ParquetSink``: a bolt that writes its input as Parquet files Spark reads exactly once.

Configure it through its component config (``config={"parquet.path": "/data/words"}``):
every field of the input stream is a column. Files are written with ``pyarrow.dataset`` under
``parquet.path`` (a local path or any ``pyarrow.fs`` URL), in hive folders ``field=value``
when ``parquet.partition.by`` names fields, one file per roll: ``parquet.roll.rows`` rows,
about ``parquet.roll.bytes`` bytes, or ``parquet.roll.secs`` seconds after the roll's first
row (not under effectively once, where each checkpoint closes the file), whichever comes
first; under at-least-once the rolls pace the spouts, whose tuples stay unacked until their
file is committed (``topology.max.spout.pending`` trees per roll). A file becomes visible
only when it is committed to Spark's file-sink log ``<path>/_spark_metadata``
(``heron_spark.io.parquet_log``), which ``spark.read.parquet(path)`` and
``spark.readStream.parquet(path)`` honour: files written but not committed are never read.
Every ``parquet.compact.interval`` batches (at most and by default 10, Spark's own default: a
longer one leaves the log unreadable by Spark until its first compaction) the log is compacted.

When a file is committed depends on the reliability mode:

- effectively once (a ``TwoPhaseStatefulComponent``): the open file is closed in
  ``pre_save(n)`` and listed in the checkpoint's state; it is committed in ``post_save(n)``,
  which the TMaster pushes once checkpoint ``n`` is committed and recorded, or, after a
  failure, from the restored state itself (a restored checkpoint is a committed one: its files
  are committed then, skipping any already in the log, so a commit is idempotent per task and
  checkpoint). Files of a checkpoint that never commits are never committed; their rows are
  replayed after the rollback. At the end of input the files since the last checkpoint are
  committed at once (so a failure after a sink task's end of input and before the topology
  finishes may repeat that tail's rows).
- at-least-once: a file is committed when it rolls, and only then are its tuples acked;
  nothing is acked before it is durable. Rows repeat when their tuples are replayed after
  their file was committed (a sink killed between the commit and the acks, or a tuple tree
  that timed out elsewhere), unless ``parquet.dedupe.fields`` names the input fields that
  identify a row (Kafka's ``topic, partition, offset``, or a key of the user's): then a task
  skips a row whose identity it committed lately or holds in its open file (and acks its
  tuple once that is committed). It remembers the identities of the last
  ``parquet.dedupe.window.rows`` rows it committed (1,000,000; about 150 bytes each, so
  ~150 MB per task at the default) and, when it starts, reads back those of the newest
  committed files of the folder (any task's), which covers a sink killed between a commit
  and its acks. Older rows are forgotten and may repeat. A running task does not see other tasks' commits:
  route each identity to one task (``Grouping.fields`` on those fields) or use ``par=1``.
  A replay carries no mark of its own (the spout emits it under a fresh tuple-tree root),
  so without these fields no replay is recognised.
- at-most-once: a file is committed when it rolls; rows of a killed sink's open file are lost.

Runs in a Heron Instance. Bad input fails loudly: a missing or non-writable ``parquet.path``
at ``initialize`` and a value the sink cannot write (a field whose type changes, an object
Arrow cannot convert) before the row is taken, each as one error naming the component, the
value and the fix.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import time
import uuid

from heron_spark.api import api_constants
from heron_spark.api.bolt import Bolt
from heron_spark.api.state import TwoPhaseStatefulComponent
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError
from heron_spark.io import parquet_log
from heron_spark.io.parquet_log import SinkFile
from heron_spark.io.parquet_rows import Identities, Rows
from heron_spark.io.parquet_store import CommitLog

log = logging.getLogger(__name__)

PATH = "parquet.path"
PARTITION_BY = "parquet.partition.by"
ROLL_ROWS = "parquet.roll.rows"
ROLL_BYTES = "parquet.roll.bytes"
ROLL_SECS = "parquet.roll.secs"
COMPACT_INTERVAL = "parquet.compact.interval"
DEDUPE_FIELDS = "parquet.dedupe.fields"
DEDUPE_WINDOW_ROWS = "parquet.dedupe.window.rows"
STATE_KEY = "parquet.pending"  # the checkpointed state: {checkpoint id: [log entry JSON]}


@dataclasses.dataclass(frozen=True)
class ParquetSinkSettings:
    """The sink's typed config; every default is written here once."""

    path: str
    partition_by: tuple[str, ...] = ()
    roll_rows: int = 100_000
    roll_bytes: int = 64 * 1024 * 1024
    roll_secs: float = 1.0
    compact_interval: int = parquet_log.DEFAULT_COMPACT_INTERVAL
    dedupe_fields: tuple[str, ...] = ()
    dedupe_window_rows: int = 1_000_000

    @classmethod
    def from_config(cls, config: dict, component: str | None = None) -> ParquetSinkSettings:
        """Read the ``parquet.*`` keys of ``config``; raise TopologyValueError for a bad one."""
        path = config.get(PATH)
        if not path or not isinstance(path, str):
            msg = "ParquetSink needs parquet.path"
            raise TopologyValueError(msg, component=component, value=path, kind="config",
                                     fix="set config={'parquet.path': '/data/out'} (a local "
                                         "path or a pyarrow.fs URL such as s3://bucket/out)")
        default = cls(path=path)
        return cls(path=path, partition_by=_names(config, PARTITION_BY),
                   dedupe_fields=_names(config, DEDUPE_FIELDS),
                   dedupe_window_rows=_positive(config, DEDUPE_WINDOW_ROWS,
                                                default.dedupe_window_rows, int, component),
                   roll_rows=_positive(config, ROLL_ROWS, default.roll_rows, int, component),
                   roll_bytes=_positive(config, ROLL_BYTES, default.roll_bytes, int, component),
                   roll_secs=_positive(config, ROLL_SECS, default.roll_secs, float, component),
                   compact_interval=_compact_interval(config, component))


def _names(config: dict, key: str) -> tuple[str, ...]:
    """Read a list of field names: a list, or one string separated by commas."""
    names = config.get(key) or ()
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    return tuple(names)


def _compact_interval(config: dict, component: str | None) -> int:
    """Read ``parquet.compact.interval``: from 1 to Spark's default, 10.

    Before a log's first ``.compact`` batch Spark's readers assume their own interval
    (``spark.sql.streaming.fileSink.log.compactInterval``, 10 unless set) and look for
    ``9.compact`` once batch 9 exists, so a longer interval leaves the folder unreadable by
    ``spark.read.parquet`` from batch 10 until its first compaction; a shorter one is derived
    from the ``.compact`` files, so every reader agrees.
    """
    interval = _positive(config, COMPACT_INTERVAL, parquet_log.DEFAULT_COMPACT_INTERVAL, int,
                         component)
    if interval > parquet_log.DEFAULT_COMPACT_INTERVAL:
        msg = (f"ParquetSink: {COMPACT_INTERVAL} above {parquet_log.DEFAULT_COMPACT_INTERVAL} "
               f"makes the log unreadable by Spark from batch "
               f"{parquet_log.DEFAULT_COMPACT_INTERVAL} until its first compaction")
        raise TopologyValueError(msg, component=component, value=interval, kind="config",
                                 fix=f"set {COMPACT_INTERVAL} to at most "
                                     f"{parquet_log.DEFAULT_COMPACT_INTERVAL} (Spark's default "
                                     "spark.sql.streaming.fileSink.log.compactInterval)")
    return interval


def _positive(config: dict, key: str, default, kind, component):
    value = config.get(key, default)
    try:
        typed = kind(value)
    except (TypeError, ValueError):
        typed = 0
    if typed <= 0:
        msg = f"ParquetSink: {key} must be a positive number"
        raise TopologyValueError(msg, component=component, value=value, kind="config",
                                 fix=f"set {key} to a number above 0 (default {default})")
    return typed


class ParquetSink(Bolt, TwoPhaseStatefulComponent):
    """See the module docstring."""

    outputs: list = []
    auto_ack = False

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the sink's spec; checks the ``parquet.*`` keys where the topology is built."""
        ParquetSinkSettings.from_config(config or {}, name)
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    _state = None    # effectively once: the task's State (set by init_state)

    def init_state(self, stateful_state) -> None:
        """Keep the checkpointed state: it lists the files each checkpoint closed."""
        self._state = stateful_state

    def initialize(self, config, context):
        """Check the path is writable, learn the input fields, commit restored files."""
        self._component = context.get_component_id()
        self.settings = ParquetSinkSettings.from_config(config, self._component)
        topology = TopologyConfig.from_config(config, self._component)
        self._mode = topology.reliability_mode
        self._eo = topology.effectively_once
        self._alo = topology.at_least_once
        self._task = context.get_task_id()
        self._topology = context.get_topology_name()
        parallel = context.get_component_parallelism(self._component) or 1
        self._check_mode(topology)
        fields = _input_fields(context, self._component)
        self._check_partitions(fields)
        self._check_dedupe(fields)
        self.rows = Rows(fields, self._component)
        self._log = CommitLog.open(self.settings.path, self.settings.compact_interval)
        if parallel > 1 and not self._log.local:
            msg = ("ParquetSink with par > 1 needs a local (or locally mounted) parquet.path: "
                   "other filesystems cannot claim a commit-log batch id atomically")
            raise TopologyValueError(msg, component=self._component, value=self.settings.path,
                                     kind="config", fix="use par=1 for this sink, or a path on "
                                                        "a shared mount")
        self._prepare_path()
        self._held: list = []          # at-least-once: tuples acked once their file commits
        self._written: list[SinkFile] = []  # effectively once: closed since the last checkpoint
        self._pending: dict[int, list[SinkFile]] = {}  # effectively once: awaiting the commit
        self._roll_started: float | None = None
        self.committed_batches = 0
        self.skipped_rows = 0          # at-least-once with dedupe fields: replays recognised
        self._skipped_logged = 0
        self.identities: Identities | None = None
        if self._alo and self.settings.dedupe_fields:
            self._load_identities(fields)
        if self._eo:
            self._recover()
        else:  # the ticks roll files by age
            config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = \
                min(max(self.settings.roll_secs / 2, 0.05), 1.0)

    # ---- checks ----------------------------------------------------------------------------
    def _check_mode(self, topology: TopologyConfig) -> None:
        if self._alo and topology.bolt_auto_ack:
            msg = "ParquetSink acks a tuple only once its file is committed; auto-ack is on"
            raise TopologyValueError(msg, component=self._component, value=True, kind="config",
                                     fix="set topology.bolt.auto.ack false in the sink's "
                                         "component config")
        timeout = topology.message_timeout_or_none_secs
        if self._alo and timeout is not None and self.settings.roll_secs >= timeout:
            msg = (f"ParquetSink holds tuples until its file rolls ({ROLL_SECS} = "
                   f"{self.settings.roll_secs:g} s) but they time out after {timeout:g} s")
            raise TopologyValueError(msg, component=self._component,
                                     value=self.settings.roll_secs, kind="config",
                                     fix=f"set {ROLL_SECS} below topology.message.timeout.secs")

    def _check_partitions(self, fields: list[str]) -> None:
        unknown = [f for f in self.settings.partition_by if f not in fields]
        if unknown or (fields and len(self.settings.partition_by) >= len(fields)):
            msg = "ParquetSink: parquet.partition.by must name some, not all, input fields"
            raise TopologyValueError(msg, component=self._component,
                                     value=list(self.settings.partition_by), kind="config",
                                     fix=f"partition by a subset of {fields}")

    def _check_dedupe(self, fields: list[str]) -> None:
        unknown = [f for f in self.settings.dedupe_fields if f not in fields]
        if unknown:
            msg = f"ParquetSink: {DEDUPE_FIELDS} names fields its input lacks: {unknown}"
            raise TopologyValueError(msg, component=self._component,
                                     value=list(self.settings.dedupe_fields), kind="config",
                                     fix=f"name input fields, some of {fields}")
        if self.settings.dedupe_fields and not self._alo:
            log.info("%s: %s applies under at-least-once only (the mode is %s)",
                     self._component, DEDUPE_FIELDS, self._mode)

    def _load_identities(self, fields: list[str]) -> None:
        """Remember the identities of the newest committed rows (a restart's replays)."""
        s = self.settings
        self.identities = Identities(fields, s.dedupe_fields, s.dedupe_window_rows,
                                     as_text=s.partition_by, component=self._component)
        started = time.monotonic()
        self.identities.load(self._log.recent_identities(s.dedupe_fields, s.partition_by,
                                                         s.dedupe_window_rows))
        log.info("%s task %d: read %d committed identities back in %.2f s", self._component,
                 self._task, len(self.identities.committed), time.monotonic() - started)

    def _prepare_path(self) -> None:
        probe = posixpath.join(self._log.dir, f".probe-{self._task}-{uuid.uuid4().hex}")
        try:
            self._log.create()
            with self._log.fs.open_output_stream(probe) as out:
                out.write(b"ok")
            self._log.fs.delete_file(probe)
        except OSError as exc:
            msg = f"ParquetSink cannot write to parquet.path: {exc}"
            raise TopologyValueError(msg, component=self._component, value=self.settings.path,
                                     kind="config", fix="give the executors write access to it, "
                                                        "or choose another parquet.path") from exc

    # ---- tuples ----------------------------------------------------------------------------
    def process(self, tup):
        """Buffer one row (at-least-once: hold its tuple until its file is committed).

        With ``parquet.dedupe.fields``, a row whose identity is committed or already in the
        open file is skipped; its tuple is acked with the open file's (or at once).
        """
        if self.identities is not None:
            key = self.identities.key(tup.values)
            if key in self.identities.committed:
                self.skipped_rows += 1
                self.ack(tup)
                return
            if key in self.identities.pending:
                self.skipped_rows += 1
                self._held.append(tup)
                if self._roll_started is None:
                    self._roll_started = time.monotonic()
                return
            self.rows.add(tup.values)
            self.identities.add(key)
        else:
            self.rows.add(tup.values)
        if self._alo:
            self._held.append(tup)
        if self._roll_started is None:
            self._roll_started = time.monotonic()
        if self.rows.count >= self.settings.roll_rows or \
                self.rows.approx_bytes >= self.settings.roll_bytes:
            self._roll()

    def process_tick(self, tup):
        """Roll a file that is old enough (not under effectively once: checkpoints roll)."""
        if not self._eo and self._roll_started is not None \
                and time.monotonic() - self._roll_started >= self.settings.roll_secs:
            self._roll()

    def end_of_input(self):
        """Write and commit everything (effectively once: without waiting for a checkpoint)."""
        if not self._eo:
            self._roll()
            return
        self._write()
        files = [f for cid in sorted(self._pending) for f in self._pending[cid]] + self._written
        self._pending.clear()
        self._written = []
        self._put_state()
        self._commit(files)

    def pre_save(self, checkpoint_id) -> None:
        """Close the open file and list this checkpoint's files in the state."""
        self._write()
        if self._written:
            self._pending[int(checkpoint_id)] = self._written
            self._written = []
        self._put_state()

    def close(self):
        """At-least-once and at-most-once: commit what is buffered."""
        if not self._eo and getattr(self, "rows", None) is not None and \
                (self.rows.count or self._held):
            self._roll()

    # ---- writing and committing ------------------------------------------------------------
    def _roll(self) -> None:
        """Close the open file; outside effectively once commit it and ack its tuples."""
        if self._eo:
            self._write()
            return
        held, self._held = self._held, []
        try:
            self._write()
            files, self._written = self._written, []
            self._commit(files)
        except BaseException:
            if self.identities is not None:
                self.identities.drop()
            for tup in held:  # not durable: the spout replays them
                self.fail(tup)
            raise
        if self.identities is not None:
            self.identities.commit()
            if self.skipped_rows != self._skipped_logged:
                self._skipped_logged = self.skipped_rows
                log.info("%s task %d skipped %d replayed row(s) so far", self._component,
                         self._task, self.skipped_rows)
        for tup in held:
            self.ack(tup)

    def _write(self) -> None:
        """Write the buffered rows as Parquet files (not committed yet) into ``_written``."""
        self._roll_started = None
        if not self.rows.count:
            return
        import pyarrow.dataset as ds

        table = self.rows.to_table(self.rows.take())
        paths: list[str] = []
        ds.write_dataset(
            table, base_dir=self._log.base, format="parquet", filesystem=self._log.fs,
            partitioning=list(self.settings.partition_by) or None, partitioning_flavor="hive",
            basename_template=f"part-{self._task:05d}-{uuid.uuid4().hex}-{{i}}.parquet",
            existing_data_behavior="overwrite_or_ignore",
            file_visitor=lambda written: paths.append(written.path))
        self._written.extend(self._log.entry(p) for p in paths)

    def _commit(self, files: list[SinkFile]) -> None:
        if files:
            batch = self._log.commit(files)
            self.committed_batches += 1
            log.info("%s task %d committed %d file(s) as batch %d", self._component, self._task,
                     len(files), batch)

    def _put_state(self) -> None:
        if self._state is not None:
            self._state.put(STATE_KEY, {cid: [f.to_json() for f in files]
                                        for cid, files in self._pending.items()})

    def _recover(self) -> None:
        """Commit the files of the restored checkpoint (committed, by definition) not yet in the log."""
        saved = (self._state.get(STATE_KEY) if self._state is not None else None) or {}
        if not saved:
            return
        done = {f.path for f in self._log.files()}
        files = [SinkFile.from_json(line) for cid in sorted(saved) for line in saved[cid]]
        self._commit([f for f in files if f.path not in done])
        self._put_state()

    def post_save(self, checkpoint_id) -> None:
        """Commit the files of every checkpoint up to ``checkpoint_id``, now committed."""
        due = sorted(cid for cid in self._pending if cid <= int(checkpoint_id))
        if not due:
            return
        self._commit([f for cid in due for f in self._pending.pop(cid)])
        self._put_state()



def _input_fields(context, component: str) -> list[str]:
    """Return the fields of the sink's input streams (they must all be the same)."""
    logical = context._plan.logical  # noqa: SLF001 - the plan is the one record of the fields
    sources = logical.sources(component) or {}
    found = {tuple(logical.components[s.component_name].outputs[s.id].fields) for s in sources}
    if len(found) != 1:
        msg = "ParquetSink reads streams with different fields; a Parquet folder has one schema"
        raise TopologyValueError(msg, component=component, value=sorted(found), kind="inputs",
                                 fix="give it one input stream, or streams with the same fields")
    return list(found.pop())


__all__ = ["ParquetSink", "ParquetSinkSettings"]

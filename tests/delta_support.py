"""Word count into a ``DeltaSink``, and three independent readers of the table it writes.

The topology is ``parquet_word_count``'s (``FileSpout`` -> ``SplitBolt`` emitting one
``(word, line)`` row per word, every row distinct) with a ``DeltaSink`` at the end. The
readers: ``deltalake`` (delta-rs), DuckDB replaying the table's ``_delta_log`` JSON itself
(DuckDB's ``delta`` extension cannot be downloaded here, and reading the log with DuckDB keeps
this reader free of delta-rs), and Spark's Delta reader (``spark_readers.reader("delta",
path)``). ``txn_versions`` reads the application transactions each Delta version carries.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from urllib.parse import unquote

import parquet_word_count as pwc
from heron_spark import Grouping, TopologyBuilder
from heron_spark.io import DeltaSink, FileSpout


def build(name: str, corpus, out, *, mode: str, sinks: int = 1, sink_config: dict | None = None,
          config: dict | None = None):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSpout, par=1,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    words = builder.add_bolt("split", pwc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("out", DeltaSink, par=sinks, inputs={words: Grouping.SHUFFLE},
                     config={"delta.path": str(out), **(sink_config or {})})
    builder.set_config({"topology.reliability.mode": mode, **(config or {})})
    return builder.build()


def read_deltalake(path, columns: tuple[str, ...] = ("word", "line"),
                   storage_options: dict | None = None) -> collections.Counter:
    """The table's rows (``columns``) as delta-rs reads them (``storage_options`` for an
    object store)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path), storage_options=storage_options).to_pyarrow_table()
    return collections.Counter(zip(*(table.column(c).to_pylist() for c in columns)))


def read_duckdb(path) -> collections.Counter:
    """The table's ``(word, line)`` rows as DuckDB reads them (``read_duckdb_rows``)."""
    return collections.Counter({(str(w), str(line)): n for (w, line), n in
                                read_duckdb_rows(path, "word, line").items()})


def read_duckdb_rows(path, columns: str) -> collections.Counter:
    """The table's rows (``columns``) as DuckDB reads them, replaying ``_delta_log`` (the
    files added and not removed)."""
    import duckdb

    log = Path(path) / "_delta_log"
    # Every commit's JSON is kept past a Delta checkpoint (until the log retention, 30 days,
    # cleans it up), so replaying them all from version 0 is the table.
    assert (log / f"{0:020d}.json").exists(), "version 0's commit is gone: replay a checkpoint"
    con = duckdb.connect()
    actions = con.execute(
        "select json_extract_string(json, '$.add.path'), "
        "json_extract_string(json, '$.remove.path') "
        "from read_json_objects(?, format='newline_delimited')", [str(log / "*.json")]).fetchall()
    added = [a for a, _ in actions if a is not None]
    removed = {r for _, r in actions if r is not None}
    files = [str(Path(path) / unquote(a)) for a in added if a not in removed]
    if not files:
        return collections.Counter()
    rows = con.execute(f"select {columns} from read_parquet(?, hive_partitioning=true)",
                       [files]).fetchall()
    return collections.Counter(rows)


def read_spark(path) -> collections.Counter:
    import spark_readers

    rows = spark_readers.reader("delta", str(path))
    return collections.Counter((r["word"], r["line"]) for r in rows if "__versions__" not in r)


def txn_versions(path) -> list[tuple[int, list[tuple[str, int]]]]:
    """Return ``(Delta version, [(app id, txn version)])`` for every version of the table."""
    found = []
    for commit in sorted((Path(path) / "_delta_log").glob("*.json")):
        txns = [(a["txn"]["appId"], a["txn"]["version"])
                for a in map(json.loads, commit.read_text().splitlines()) if "txn" in a]
        found.append((int(commit.stem), txns))
    return found


def check_txns(path) -> int:
    """Assert every version carries at most one transaction and no (app, version) twice, each
    app's versions rising; return how many versions carry one."""
    versions = txn_versions(path)
    seen: dict[str, int] = {}
    carrying = 0
    for version, txns in versions:
        assert len(txns) <= 1, (version, txns)
        for app, txn in txns:
            assert txn > seen.get(app, -1), f"version {version}: {app} at {txn} again"
            seen[app] = txn
            carrying += 1
    return carrying


expected_rows = pwc.expected_rows
write_corpus = pwc.write_corpus

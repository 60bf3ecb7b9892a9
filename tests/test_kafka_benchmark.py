"""``benchmarks/kafka.py``: its latency and count checks, and a tiny run end to end.

The figures of the run are timings (not checked here); what is checked is that every system
ran and counted every word exactly (the benchmark compares the counts each wrote to Kafka,
read back with ``read_committed``, or to a Delta table, read back with ``deltalake``, with
``collections.Counter`` over its input).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import kafka_systems as ks  # noqa: E402

from heron_spark.testing import wait_until  # noqa: E402


class Record:
    """A sink record as confluent-kafka hands it over (key and value)."""

    def __init__(self, key: str, value: str) -> None:
        self._key, self._value = key.encode(), value.encode()

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value


def test_a_word_is_visible_with_the_first_update_that_counts_it():
    lines, stamps = ["a b", "a", "a"], [1000, 1010, 1020]
    updates = [("a", 1, 1000, 1005.0), ("b", 1, 1000, 1007.0),
               ("a", 3, 1020, 1050.0)]  # the 2nd and 3rd "a" in one update
    assert ks.latencies(lines, stamps, updates, after_ms=0) == [
        (1000, 5.0), (1000, 7.0), (1010, 40.0), (1020, 30.0)]
    assert ks.latencies(lines, stamps, updates, after_ms=1010) == [(1010, 40.0), (1020, 30.0)]
    # an update counting enough words but none as new as the record's: not the one that counts it
    late = [("a", 2, 1000, 1008.0), ("a", 2, 1010, 1012.0)]
    assert ks.latencies(["a", "a"], [1000, 1010], late, after_ms=0) == [(1000, 8.0), (1010, 2.0)]


def test_final_counts_are_each_words_largest_and_a_mismatch_is_described():
    messages = [Record("a", "1|5"), Record("b", "1|5"), Record("a", "3|9")]
    got = ks.final_counts(messages)
    assert got == collections.Counter({"a": 3, "b": 1})
    assert ks.mismatch(got, collections.Counter({"a": 3, "b": 1})) == ""
    wrong = ks.mismatch(got, collections.Counter({"a": 2, "b": 1, "c": 1}))
    assert wrong.startswith("2 of 3 words counted wrong") and "a: 3 not 2" in wrong


def test_the_delta_reader_sees_each_version_s_updates_as_it_commits(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    table = tmp_path / "counts"
    want = collections.Counter({"a": 3, "b": 1})
    reader = ks.DeltaReader(table, want, poll_secs=0.001).start()
    try:
        write_deltalake(str(table), pa.table({"key": ["a", "b"], "value": ["1|5", "1|6"]}))
        # a word wanted 3 times counted 2 so far: not done; a version on a partial count
        write_deltalake(str(table), pa.table({"key": ["a"], "value": ["2|8"]}), mode="append")
        wait_until(lambda: 1 in reader.versions, 30, message="version 1 read")
        assert not reader.done.is_set()
        write_deltalake(str(table), pa.table({"key": ["a"], "value": ["3|9"]}), mode="append")
        assert reader.done.wait(30), reader.counts
    finally:
        reader.stop()
    assert [u[:3] for u in reader.updates] == [("a", 1, 5), ("b", 1, 6), ("a", 2, 8), ("a", 3, 9)]
    assert sorted(reader.versions) == [0, 1, 2]
    assert all(committed is not None and seen > 0 for seen, committed in reader.versions.values())
    assert reader.updates[-1][3] == reader.versions[2][0]  # stamped when its version was seen
    assert ks.delta_final_counts(table) == (want, 4, 3)


@pytest.mark.spark
def test_every_system_counts_exactly_in_a_tiny_run(tmp_path):
    out = tmp_path / "figures.json"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, str(BENCH / "kafka.py"), "--records", "2000", "--runs", "1",
         "--rate", "1000", "--latency-secs", "2", "--warmup-secs", "0.5",
         "--systems", "effectively-once,delta-effectively-once,spark-micro-batch",
         "--delta-checkpoint-ms", "500",
         "--cache-dir", str(tmp_path / "cache"), "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=600, cwd=BENCH.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    assert set(runs) == {"effectively-once", "delta-effectively-once", "spark-micro-batch"}
    for system, phases in runs.items():
        fast, = phases["throughput"]
        paced, = phases["latency"]
        assert fast["exact"] and paced["exact"], (system, fast, paced)
        assert fast["records_per_s"] > 0 and paced["samples"] > 0
        assert paced["p50_ms"] <= paced["p99_ms"]
    assert runs["effectively-once"]["latency"][0]["transactions"] >= 1  # KafkaSink's, committed
    assert runs["delta-effectively-once"]["latency"][0]["versions"] >= 1  # DeltaSink's

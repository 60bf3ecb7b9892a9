"""End to end: streams, tick tuples, both topology styles, the examples, and failures.

Each test runs a whole topology on two containers, on Spark ``local[4]`` (real processes: the
top-K example and the failing spout) or in this process (the same stmgr and instance cores,
``heron_spark.inprocess``), and compares what the collecting bolts recorded with expectations
computed here, without the engine.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from examples import exclamation, top_k, word_count
from heron_spark import (Bolt, Grouping, Stream, Topology, TopologyBuilder, TopologyRuntimeError,
                         TupleHelper)
from heron_spark.testing import CollectingBolt, Pause, Raise, ScriptedSpout, run_local

TIMEOUT = 180
CONF = {"topology.stmgrs": 2}


def _run(spark, topology, conf, folder):
    """Run on Spark with ``spark`` (real processes), else in this process (the same cores)."""
    run = run_local(topology, conf=conf, timeout=TIMEOUT, collect_dir=folder / "collect",
                    spark=spark.session if spark is not None else None)
    assert run.status == "FINISHED"
    return run


# --- multiple output streams + tick tuples (one topology) -------------------------------------

class ParityBolt(Bolt):
    """Routes each number to stream ``even`` or ``odd``."""

    outputs = [Stream(["n"], name="even"), Stream(["n", "square"], name="odd")]

    def process(self, tup):
        n = tup.values[0]
        if n % 2 == 0:
            self.emit([n], stream="even")
        else:
            self.emit([n, n * n], stream="odd")


class TickReporter(Bolt):
    """Counts its input; on every tick emits (task, tick number, is_tick, stream, source)."""

    outputs = ["task", "tick", "is_tick", "stream", "source"]

    def initialize(self, config, context):
        self.task = context.get_task_id()
        self.ticks = 0

    def process(self, tup):
        pass

    def process_tick(self, tup):
        self.ticks += 1
        self.emit([self.task, self.ticks, self.is_tick(tup), tup.stream, tup.component])


NUMBERS = list(range(40))
PAUSE_SECS = 3.5
# Two Pause markers: ScriptedSpout deals items round-robin, so each of its 2 tasks pauses.
STREAM_SCRIPT = ([(n,) for n in NUMBERS[:20]] + [Pause(PAUSE_SECS), Pause(PAUSE_SECS)]
                 + [(n,) for n in NUMBERS[20:]])


class StreamsAndTicks(Topology):
    config = dict(CONF)
    numbers = ScriptedSpout.spec(par=2, script=STREAM_SCRIPT, fields=("n",))
    parity = ParityBolt.spec(par=2, inputs={numbers: Grouping.SHUFFLE})
    evens = CollectingBolt.spec(par=2, inputs={parity["even"]: Grouping.SHUFFLE})
    odds = CollectingBolt.spec(par=2, inputs={parity["odd"]: Grouping.fields("n")})
    ticker = TickReporter.spec(par=2, inputs={numbers: Grouping.SHUFFLE},
                               config={"topology.tick.tuple.freq.secs": 1})
    ticks = CollectingBolt.spec(par=1, inputs={ticker: Grouping.GLOBAL})


@pytest.fixture(scope="module")
def streams_run(hconf_for, tmp_path_factory):
    folder = tmp_path_factory.mktemp("streams")
    return _run(None, StreamsAndTicks, hconf_for(folder), folder)


def test_each_stream_reaches_only_its_subscriber(streams_run):
    evens = streams_run.collected("evens")
    odds = streams_run.collected("odds")
    assert collections.Counter(c.values for c in evens) == \
        collections.Counter((n,) for n in NUMBERS if n % 2 == 0)
    assert collections.Counter(c.values for c in odds) == \
        collections.Counter((n, n * n) for n in NUMBERS if n % 2 == 1)
    assert {(c.component, c.stream) for c in evens} == {("parity", "even")}
    assert {(c.component, c.stream) for c in odds} == {("parity", "odd")}


def test_tick_tuples_arrive_every_second(streams_run):
    handle = streams_run.handle
    assert handle.ended_at - handle.started_at >= PAUSE_SECS - 0.5
    ticks = [c.values for c in streams_run.collected("ticks")]
    per_task = collections.defaultdict(list)
    for task, number, is_tick, stream, source in ticks:
        assert is_tick is True
        assert stream == TupleHelper.TICK_TUPLE_ID
        assert source == TupleHelper.TICK_SOURCE_COMPONENT
        per_task[task].append(number)
    assert len(per_task) == 2, f"both ticker tasks should tick: {dict(per_task)}"
    for task, numbers in per_task.items():
        assert len(numbers) >= 2, f"task {task} ticked {numbers}"
        assert sorted(numbers) == list(range(1, len(numbers) + 1))  # each tick emitted once


# --- the two topology styles give the same word counts ----------------------------------------

SENTENCES_PER_TASK = 30


class ClassicWordCount(Topology):
    """The word-count topology, class style."""

    config = {**CONF, word_count.SENTENCES_PER_TASK: SENTENCES_PER_TASK}
    sentence = word_count.SentenceSpout.spec(par=2)
    split = word_count.SplitBolt.spec(par=2, inputs={sentence: Grouping.SHUFFLE})
    count = word_count.CountBolt.spec(par=2, inputs={split: Grouping.fields("word")},
                                      config={"topology.tick.tuple.freq.secs": 1})
    report = CollectingBolt.spec(par=1, inputs={count: Grouping.GLOBAL})


def _builder_word_count() -> type:
    builder = TopologyBuilder("BuiltWordCount")
    sentence = builder.add_spout("sentence", word_count.SentenceSpout, par=2)
    split = builder.add_bolt("split", word_count.SplitBolt, par=2,
                             inputs={sentence: Grouping.SHUFFLE})
    count = builder.add_bolt("count", word_count.CountBolt, par=2,
                             inputs={split: Grouping.fields("word")},
                             config={"topology.tick.tuple.freq.secs": 1})
    builder.add_bolt("report", CollectingBolt, par=1, inputs={count: Grouping.GLOBAL})
    builder.set_config({**CONF, word_count.SENTENCES_PER_TASK: SENTENCES_PER_TASK})
    return builder.build()


def _independent_word_counts(per_task: int, spout_tasks: int) -> collections.Counter:
    # SentenceSpout task i emits CORPUS[i], CORPUS[i + 1], ... (cyclically), per_task of them.
    corpus = word_count.CORPUS
    words = [word for task in range(spout_tasks) for i in range(per_task)
             for word in corpus[(task + i) % len(corpus)].split()]
    return collections.Counter(words)


@pytest.mark.parametrize("style", ["class", "builder"])
def test_both_topology_styles_count_words_exactly(style, hconf, tmp_path):
    topology = ClassicWordCount if style == "class" else _builder_word_count()
    run = _run(None, topology, hconf, tmp_path)
    latest: dict[str, int] = {}
    for item in run.collected("report"):
        word, count = item.values
        latest[word] = max(count, latest.get(word, 0))
    expected = _independent_word_counts(SENTENCES_PER_TASK, 2)
    assert latest == dict(expected)


def _own_tls_files(folder) -> dict[str, str]:
    """Write a CA and a certificate signed by it, as a user brings them; return the settings."""
    import datetime

    from heron_spark.wire import tls as wire_tls

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_cert, ca_key = wire_tls.new_ca("users-own", now)
    material = wire_tls.issue(ca_cert, ca_key, "users-own", now)
    wire_tls.write_material(folder, material)
    return {"heron.tls.cert": f"{folder}/cert.pem", "heron.tls.key": f"{folder}/key.pem",
            "heron.tls.ca": f"{folder}/ca.pem"}


@pytest.mark.spark
@pytest.mark.parametrize(("placement", "own"), [("driver", False), ("container", False),
                                                ("driver", True)])
def test_word_count_over_tls_counts_exactly(placement, own, spark, hconf, tmp_path):
    # heron.tls.enabled: every TCP link (stmgr <-> stmgr, stmgr and metrics manager <->
    # TMaster, the control port) is TLS 1.3 with the run's own CA (or the user's).
    conf = {**hconf, "heron.tls.enabled": True, "heron.tmaster.placement": placement,
            **(_own_tls_files(tmp_path / "own") if own else {})}
    run = _run(spark, ClassicWordCount, conf, tmp_path)
    latest: dict[str, int] = {}
    for item in run.collected("report"):
        word, count = item.values
        latest[word] = max(count, latest.get(word, 0))
    assert latest == dict(_independent_word_counts(SENTENCES_PER_TASK, 2))
    key_files = sorted((tmp_path / "work").rglob("tls/key.pem"))
    assert len(key_files) == 2  # one per container, owner-only in an owner-only folder
    for key in key_files:
        assert key.stat().st_mode & 0o777 == 0o600
        assert key.parent.stat().st_mode & 0o777 == 0o700


# --- the examples -------------------------------------------------------------------------------

def test_exclamation_example_appends_six_marks(hconf, tmp_path):
    words_per_task = 23
    run = _run(None, exclamation.build(words_per_task=words_per_task), hconf, tmp_path)
    words = ["nathan", "mike", "jackson", "golda", "bertels"]
    expected = collections.Counter(words[i % len(words)] + "!!!!!!"
                                   for _task in range(2) for i in range(words_per_task))
    got = collections.Counter(item.values[0] for item in run.collected("sink"))
    assert got == expected


@pytest.mark.spark
def test_top_k_example_finds_the_five_most_frequent_words(spark, hconf, tmp_path):
    sentences = 40
    run = _run(spark, top_k.build(sentences_per_task=sentences, k=5), hconf, tmp_path)
    counts = word_count.expected_counts(sentences, 2)
    assert counts == _independent_word_counts(sentences, 2)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    expected = [(position, word, count) for position, (word, count) in enumerate(top, start=1)]
    got = sorted(item.values for item in run.collected("result"))
    assert got == expected


# --- a failing spout --------------------------------------------------------------------------

class CrashingTopology(Topology):
    config = dict(CONF)
    src = ScriptedSpout.spec(par=1, script=[(1,), (2,), Raise("scripted spout crash 7f3a")])
    sink = CollectingBolt.spec(par=2, inputs={src: Grouping.SHUFFLE})


@pytest.mark.spark
def test_spout_exception_fails_the_run_with_where_and_log(spark, hconf, tmp_path):
    with pytest.raises(TopologyRuntimeError) as info:
        run_local(CrashingTopology, conf=hconf, timeout=TIMEOUT, collect_dir=tmp_path / "c",
                  spark=spark.session)
    error = info.value
    assert error.component == "src"
    assert isinstance(error.task_id, int)
    assert error.log_path, "the error names the instance log"
    log = Path(error.log_path)
    assert log.is_file()
    assert "scripted spout crash 7f3a" in log.read_text(errors="replace")
    assert "scripted spout crash 7f3a" in str(error)

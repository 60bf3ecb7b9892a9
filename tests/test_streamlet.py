"""The Streamlet API, run in this process on the ordinary runtime: every operation's output
against the same computation in plain Python, joins against an independent join of the same
inputs, component names, errors, and heronpy-style programs (bounded and unbounded)."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import pytest

from heron_spark import (TopologyRuntimeError, TopologyTypeError, TopologyValueError,
                         TumblingWindowBolt)
from heron_spark.connectors.mock.arraylooper import ArrayLooper
from heron_spark.connectors.textfiles.textfilesgenerator import TextFileGenerator
from heron_spark.inprocess import InProcessTopology
from heron_spark.streamlet import (Builder, Config, Generator, KeyedWindow, Resources, Runner,
                                   TransformOperator, Window, WindowConfig)
from heron_spark.testing import CollectingBolt, run_local

TIMEOUT = 30
LONG = WindowConfig.create_tumbling_window(60)  # bounded runs: all input in one final window
LINES = ["a rose is a rose is a rose", "to be or not to be", "the rest is silence"] * 7


def _run(builder: Builder, tmp_path: Path, config=None):
    run = run_local(builder.topology("streamlets", config), timeout=TIMEOUT,
                    collect_dir=tmp_path / "collect")
    assert run.status == "FINISHED"
    return run


def _values(run, component: str) -> list:
    return [c.values[0] for c in run.collected(component)]


def _tasks(run, component: str) -> list[int]:
    return sorted(run.handle.plan.component_tasks[component])


# --- per-element operations -------------------------------------------------------------------

def test_map_flat_map_filter_and_union_match_plain_python(tmp_path):
    builder = Builder()
    lines = builder.new_source(LINES).set_num_partitions(2)
    words = lines.flat_map(str.split)
    words.map(str.upper).to_bolt(CollectingBolt, name="upper")
    words.filter(lambda w: len(w) > 3).to_bolt(CollectingBolt, name="long")
    numbers = builder.new_source(list(range(30)))
    numbers.map(str).union(words).to_bolt(CollectingBolt, name="both")
    run = _run(builder, tmp_path)
    all_words = [w for line in LINES for w in line.split()]
    assert sorted(_values(run, "upper")) == sorted(w.upper() for w in all_words)
    assert sorted(_values(run, "long")) == sorted(w for w in all_words if len(w) > 3)
    assert sorted(_values(run, "both")) == sorted(all_words + [str(n) for n in range(30)])


class Numbered(TransformOperator):
    """Emits (partition, element, how many this copy saw before) per element, and once more
    for every other element."""

    def setup(self, context):
        self.context = context
        self.seen = 0
        self.partition = context.get_partition_index()
        assert context.get_num_partitions() == 2 and context.get_stream_name() == "numbers"

    def transform(self, tup):
        self.context.emit((self.partition, tup.values[0], self.seen))
        if self.seen % 2 == 0:
            self.context.emit((self.partition, tup.values[0], self.seen))
        self.seen += 1


def test_transform_runs_a_copy_of_the_operator_per_partition(tmp_path):
    builder = Builder()
    numbers = builder.new_source(list(range(40))).set_name("numbers")
    operator = Numbered()
    numbers.transform(operator).set_num_partitions(2).to_bolt(CollectingBolt, name="out")
    run = _run(builder, tmp_path)
    out = collections.Counter(_values(run, "out"))
    assert sorted(n for _, n, _ in out) == list(range(40))  # each element transformed once
    for (_, _, seen), times in out.items():
        assert times == (2 if seen % 2 == 0 else 1)
    for partition in (0, 1):  # each task's own copy counted its own elements
        counts = sorted(seen for p, _, seen in out if p == partition)
        assert counts == list(range(len(counts)))
    assert not hasattr(operator, "context")  # the tasks set up copies, not this object


def test_repartition_sends_each_element_to_the_partitions_its_function_picks(tmp_path):
    builder = Builder()
    numbers = builder.new_source(list(range(50)))
    numbers.repartition(3, lambda n, parts: n % parts).to_bolt(CollectingBolt, name="one")
    numbers.repartition(3, lambda n, parts: [0, 2] if n % 5 == 0 else n) \
        .to_bolt(CollectingBolt, name="some")
    shuffled = numbers.repartition(3)
    shuffled.to_bolt(CollectingBolt, name="any")
    run = _run(builder, tmp_path)
    one, some = _tasks(run, "repartition-1"), _tasks(run, "repartition-2")
    got = sorted((c.values[0], c.source_task) for c in run.collected("one"))
    assert got == sorted((n, one[n % 3]) for n in range(50))
    expected = [(n, some[p]) for n in range(50) for p in ([0, 2] if n % 5 == 0 else [n % 3])]
    assert sorted((c.values[0], c.source_task) for c in run.collected("some")) == sorted(expected)
    assert sorted(_values(run, "any")) == list(range(50))
    assert shuffled.get_num_partitions() == 3


def test_clones_each_carry_every_element(tmp_path):
    builder = Builder()
    clones = builder.new_source(list(range(25))).clone(3)
    for index, clone in enumerate(clones):
        clone.to_bolt(CollectingBolt, name=f"clone{index}")
    run = _run(builder, tmp_path)
    for index in range(3):
        assert sorted(_values(run, f"clone{index}")) == list(range(25))


def test_consume_and_log_see_every_element(tmp_path, caplog):
    sink = tmp_path / "consumed.txt"

    def consume(element):
        with open(sink, "a") as handle:
            handle.write(f"{element}\n")

    builder = Builder()
    numbers = builder.new_source(list(range(20)))
    numbers.consume(consume)
    numbers.map(lambda n: n * n).log()
    with caplog.at_level(logging.INFO):
        _run(builder, tmp_path)
    assert sorted(int(x) for x in sink.read_text().split()) == list(range(20))
    logged = [r.getMessage() for r in caplog.records  # the elements, not the task's news
              if r.name.startswith("log-1.") and r.getMessage().isdigit()]
    assert sorted(logged) == sorted(str(n * n) for n in range(20))


# --- windowed operations ----------------------------------------------------------------------

def test_reduce_by_key_and_window_counts_like_a_counter(tmp_path):
    builder = Builder()
    builder.new_source(LINES).flat_map(str.split).map(lambda w: (w, 1)) \
        .reduce_by_key_and_window(LONG, lambda x, y: x + y).set_num_partitions(3) \
        .to_bolt(CollectingBolt, name="counts")
    run = _run(builder, tmp_path)
    out = _values(run, "counts")
    assert all(isinstance(keyed, KeyedWindow) for keyed, _ in out)
    assert len({keyed.window for keyed, _ in out}) <= 3  # one window per task
    counts = {keyed.key: n for keyed, n in out}
    assert len(counts) == len(out)  # one result per key and window
    assert counts == collections.Counter(w for line in LINES for w in line.split())
    by_task = collections.defaultdict(set)
    for collected in run.collected("counts"):
        by_task[collected.source_task].add(collected.values[0][0].key)
    assert sum(len(keys) for keys in by_task.values()) == len(counts)  # a key on one task


def test_reduce_by_window_folds_the_whole_window(tmp_path):
    builder = Builder()
    builder.new_source(list(range(1, 41))).set_num_partitions(2) \
        .reduce_by_window(LONG, lambda a, b: a + b).to_bolt(CollectingBolt, name="total")
    run = _run(builder, tmp_path)
    [(window, total)] = _values(run, "total")
    assert isinstance(window, Window) and window.start_time < window.end_time
    assert total == sum(range(1, 41))


def test_tumbling_windows_split_the_counts_without_losing_or_repeating(tmp_path):
    builder = Builder()
    builder.new_source(ArrayLooper(["x", "y", "y"], sleep=0.003, loops=80)) \
        .map(lambda w: (w, 1)) \
        .reduce_by_key_and_window(WindowConfig.create_tumbling_window(0.1), lambda a, b: a + b) \
        .to_bolt(CollectingBolt, name="counts")
    run = _run(builder, tmp_path)
    out = _values(run, "counts")
    windows = sorted({(k.window.start_time, k.window.end_time) for k, _ in out})
    assert len(windows) >= 3
    for (_, end), (start, _) in zip(windows, windows[1:]):
        assert start == end  # back to back, no gaps
    totals = collections.Counter()
    for keyed, n in out:
        totals[keyed.key] += n
    assert totals == {"x": 80, "y": 160}


def _join_inputs():
    left = [("a", 1), ("a", 2), ("b", 3), ("c", 4), ("e", 9)]
    right = [("a", "x"), ("b", "y"), ("b", "z"), ("d", "w"), ("e", "v"), ("e", "u")]
    return left, right


def _independent_join(left, right, kind):
    """The join of two lists of pairs, written out with loops."""
    out = []
    right_keys = {k for k, _ in right}
    left_keys = {k for k, _ in left}
    for lk, lv in left:
        for rk, rv in right:
            if lk == rk:
                out.append((lk, (lv, rv)))
    if kind in ("left", "outer"):
        out += [(k, (v, None)) for k, v in left if k not in right_keys]
    if kind in ("right", "outer"):
        out += [(k, (None, v)) for k, v in right if k not in left_keys]
    return sorted(out, key=repr)


@pytest.mark.parametrize("kind, method", [("inner", "join"), ("left", "outer_left_join"),
                                          ("right", "outer_right_join"),
                                          ("outer", "outer_join")])
def test_joins_equal_an_independent_join_of_the_same_inputs(tmp_path, kind, method):
    left, right = _join_inputs()
    builder = Builder()
    lefts = builder.new_source(left).set_name("left")
    rights = builder.new_source(right).set_name("right")
    joined = getattr(lefts, method)(rights, LONG, lambda lv, rv: (lv, rv))
    joined.set_num_partitions(2).to_bolt(CollectingBolt, name="joined")
    run = _run(builder, tmp_path)
    out = _values(run, "joined")
    assert all(isinstance(keyed, KeyedWindow) for keyed, _ in out)
    assert sorted(((keyed.key, value) for keyed, value in out), key=repr) == \
        _independent_join(left, right, kind)
    assert joined.get_name() == "join-1"


# --- at-least-once ----------------------------------------------------------------------------

def test_at_least_once_counts_are_exact_and_every_source_element_is_acked(tmp_path):
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)
    config.set_user_config("topology.message.timeout.secs", 10)
    builder = Builder()
    builder.new_source(LINES).flat_map(str.split).map(lambda w: (w, 1)) \
        .reduce_by_key_and_window(WindowConfig.create_sliding_window(0.2, 0.1),
                                  lambda x, y: x + y) \
        .to_bolt(CollectingBolt, name="counts")
    builder.new_source(list(range(10))).map(lambda n: n + 1).to_bolt(CollectingBolt, name="plus")
    run = _run(builder, tmp_path, config)
    metrics = run.handle.metrics()
    words = sum(len(line.split()) for line in LINES)
    assert metrics["generator-1"]["__ack-count"] == len(LINES)
    assert metrics["generator-2"]["__ack-count"] == 10
    assert metrics["generator-1"].get("__fail-count", 0) == 0
    assert sorted(_values(run, "plus")) == list(range(1, 11))
    # every word is counted in each sliding window that held it: at least once, and the
    # windows of one word are consecutive
    seen = collections.Counter()
    for keyed, n in _values(run, "counts"):
        seen[keyed.key] += n
    expected = collections.Counter(w for line in LINES for w in line.split())
    assert set(seen) == set(expected)
    assert all(seen[w] >= expected[w] for w in expected) and sum(seen.values()) >= words


class WindowTotals(TumblingWindowBolt):
    """An ordinary window bolt fed by a streamlet: acks its tuples itself, after each window."""

    outputs = ["total"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([sum(t.values[0] for t in tuples)])


def test_to_bolt_feeds_window_bolts_without_acking_twice(tmp_path):
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)
    config.set_user_config("topology.message.timeout.secs", 5)
    builder = Builder()
    builder.new_source(list(range(60))).to_bolt(
        WindowTotals, name="totals", config={TumblingWindowBolt.WINDOW_DURATION_SECS: 1.0})
    run = _run(builder, tmp_path, config)
    metrics = run.handle.metrics()
    source = metrics["generator-1"]
    assert source["__ack-count"] == 60 and source.get("__fail-count", 0) == 0
    # the trees closed when their window fired (1 s after the bolt started), not on receipt
    assert source["__complete-latency-ms-total"] / 60 >= 800


# --- sources ----------------------------------------------------------------------------------

def test_text_files_are_read_once_over_the_partitions(tmp_path):
    for index in range(3):
        (tmp_path / f"part-{index}.txt").write_text(
            "".join(f"file {index} line {n}\n" for n in range(5)))
    builder = Builder()
    builder.new_source(TextFileGenerator(str(tmp_path / "part-*.txt"), bounded=True)) \
        .set_num_partitions(2).map(str.strip).to_bolt(CollectingBolt, name="lines")
    run = _run(builder, tmp_path)
    assert sorted(_values(run, "lines")) == sorted(
        f"file {i} line {n}" for i in range(3) for n in range(5))


class Countdown(Generator):
    """A bounded generator: None now and then, StopIteration at the end."""

    def setup(self, context):
        self.left = 12
        self.idle = False

    def get(self):
        self.idle = not self.idle
        if self.idle:
            return None
        if self.left == 0:
            raise StopIteration
        self.left -= 1
        return self.left


def test_generators_and_suppliers_feed_streamlets(tmp_path):
    counter = iter(range(1000))
    builder = Builder()
    builder.new_source(Countdown()).to_bolt(CollectingBolt, name="countdown")
    supplied = builder.new_source(lambda: next(counter))  # StopIteration ends it too
    supplied.filter(lambda n: n % 100 == 0).to_bolt(CollectingBolt, name="hundreds")
    run = _run(builder, tmp_path)
    assert sorted(_values(run, "countdown")) == list(range(12))
    assert sorted(_values(run, "hundreds")) == list(range(0, 1000, 100))
    assert [spec.name for spec in run.handle.plan.logical.components.values()
            if spec.is_spout] == ["generator-1", "supplier-1"]


# --- the heronpy programs' shapes ---------------------------------------------------------------

def test_heronpy_word_count_streamlet_runs_unbounded_until_stopped(tmp_path, caplog):
    from heronpy.connectors.mock.arraylooper import ArrayLooper as HeronpyLooper
    from heronpy.streamlet.builder import Builder as HeronpyBuilder
    from heronpy.streamlet.windowconfig import WindowConfig as HeronpyWindowConfig

    sink = tmp_path / "windows.txt"

    def record(pair):
        keyed, count = pair
        with open(sink, "a") as handle:
            handle.write(f"{keyed.window.end_time!r} {keyed.key} {count}\n")

    builder = HeronpyBuilder()
    counts = builder.new_source(HeronpyLooper(["Mary Had a little lamb", "I Love You"])) \
        .flat_map(lambda line: line.split()) \
        .map(lambda word: (word, 1)) \
        .reduce_by_key_and_window(HeronpyWindowConfig.create_sliding_window(0.4, 0.2),
                                  lambda x, y: x + y)
    counts.log()
    counts.consume(record)
    topology = builder.topology("word_count_streamlet")
    assert [spec.name for spec in topology._heron_specs] == [
        "generator-1", "flatmap-1", "map-1", "reducebykeyandwindow-1", "log-1", "consume-1"]
    runner = InProcessTopology(topology, conf={"heron.batch.max.tuples": 256})
    with caplog.at_level(logging.INFO), pytest.raises(TimeoutError):
        runner.run(timeout=1.5)
    windows = collections.defaultdict(dict)
    for line in sink.read_text().splitlines():
        end, word, count = line.split()
        windows[end][word] = int(count)
    assert len(windows) >= 3
    for counts_in_window in windows.values():
        # one line's words arrive together: equal counts; the two lines alternate
        first = {counts_in_window.get(w) for w in "Mary Had a little lamb".split()}
        second = {counts_in_window.get(w) for w in ["I", "Love", "You"]}
        assert len(first) == 1 and len(second) == 1
        assert abs(first.pop() - second.pop()) <= 1
    assert any("KeyedWindow {key: Mary" in r.getMessage() for r in caplog.records
               if r.name.startswith("log-1."))


def test_heronpy_runner_refuses_wrong_arguments():
    with pytest.raises(TopologyTypeError):
        Runner().run("name", {"not": "a Config"}, Builder())
    with pytest.raises(TopologyTypeError):
        Runner().run(None, Config(), Builder())


# --- configuration, names and errors ----------------------------------------------------------

def test_config_maps_onto_topology_keys():
    config = Config({"custom": 1})
    config.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
    config.set_num_containers(3)
    config.set_container_resources(Resources().set_cpu(2).set_ram_in_mb(512))
    assert config.as_dict() == {"custom": 1, "topology.reliability.mode": "EFFECTIVELY_ONCE",
                                "topology.stmgrs": 3, "topology.container.cpu": 2.0,
                                "topology.container.ram": 512 * 1024 * 1024}
    with pytest.raises(TopologyValueError):
        config.set_delivery_semantics(7)


def test_names_are_heronpys_unless_set_and_must_be_unique():
    builder = Builder()
    source = builder.new_source([1, 2])
    source.map(str).set_name("as-text").log()
    source.map(str).log()
    names = [spec.name for spec in builder.topology("names")._heron_specs]
    assert names == ["generator-1", "as-text", "map-1", "log-1", "log-2"]
    clash = Builder()
    first = clash.new_source([1]).set_name("same")
    first.map(str).set_name("same")
    with pytest.raises(TopologyValueError) as info:
        clash.topology("clash")
    assert info.value.component == "same"


def test_bad_streamlet_arguments_are_refused():
    builder = Builder()
    numbers = builder.new_source([1, 2, 3])
    with pytest.raises(TopologyTypeError):
        numbers.map("not a function")
    with pytest.raises(TopologyTypeError):
        numbers.reduce_by_key_and_window("10 seconds", lambda a, b: a)
    with pytest.raises(TopologyValueError):
        numbers.join(numbers, LONG, lambda a, b: a)
    with pytest.raises(TopologyValueError):
        WindowConfig.create_sliding_window(1, 2)
    with pytest.raises(TopologyTypeError):
        builder.new_source(42)
    other = Builder().new_source([1])
    numbers.union(other)
    with pytest.raises(TopologyValueError):
        builder.topology("two_builders")
    split = Builder()
    split.new_source([1]).reduce_by_window(LONG, max).set_num_partitions(2).log()
    with pytest.raises(TopologyValueError) as info:
        split.topology("reduce_on_two")
    assert info.value.component == "reducebywindow-1" and info.value.value == 2


def test_elements_that_are_not_pairs_fail_the_run_naming_their_component(tmp_path):
    builder = Builder()
    builder.new_source([1, 2, 3]).map(lambda n: n * 2).set_name("doubles") \
        .reduce_by_key_and_window(LONG, lambda a, b: a + b).log()
    with pytest.raises(TopologyRuntimeError) as failed:
        run_local(builder.topology("not_pairs"), timeout=TIMEOUT,
                  conf={"heron.instance.restart.max": 0})
    assert failed.value.component == "doubles"
    assert "(key, value) pairs" in str(failed.value)



def test_heronpy_join_streamlet_runs_unbounded_and_joins_within_each_window(tmp_path):
    from heronpy.connectors.mock.arraylooper import ArrayLooper as HeronpyLooper
    from heronpy.streamlet.builder import Builder as HeronpyBuilder
    from heronpy.streamlet.windowconfig import WindowConfig as HeronpyWindowConfig

    sink = tmp_path / "joined.txt"

    def record(pair):
        keyed, joined = pair
        with open(sink, "a") as handle:
            handle.write(f"{keyed.window.end_time!r} {keyed.key} {joined}\n")

    builder = HeronpyBuilder()
    source_1 = builder.new_source(HeronpyLooper([["key1", "a"], ["key1", "b"]], sleep=0.02))
    source_2 = builder.new_source(HeronpyLooper([["key1", "c"], ["key1", "d"]], sleep=0.02))
    source_1.join(source_2, HeronpyWindowConfig.create_sliding_window(0.3, 0.1),
                  lambda x, y: x + y).consume(record)
    with pytest.raises(TimeoutError):
        InProcessTopology(builder.topology("join_streamlet")).run(timeout=1.2)
    windows = collections.defaultdict(collections.Counter)
    for line in sink.read_text().splitlines():
        end, key, joined = line.split()
        assert key == "key1"
        windows[end][joined] += 1
    assert len(windows) >= 4
    for joined in windows.values():
        assert set(joined) <= {"ac", "ad", "bc", "bd"}
        # a window's output is the cross product of its left and right values
        assert joined["ac"] * joined["bd"] == joined["ad"] * joined["bc"]

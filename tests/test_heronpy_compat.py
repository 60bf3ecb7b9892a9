"""End to end: unchanged heronpy topology files run under ``heron-spark submit``.

Each test writes a topology file that imports only ``heronpy.api...`` into ``tmp_path``, runs
``heron-spark submit`` on it in a subprocess (its own Spark ``local[2]``), waits until the
file sink has written every expected result, checks ``heron-spark list``, kills it with
``heron-spark kill`` and checks the submit process exits 0. heronpy spouts cannot declare
themselves exhausted, so the spouts here simply stop emitting after a fixed number of tuples and
the topology runs until killed.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from heron_spark.testing import wait_until

pytestmark = pytest.mark.spark

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "to be or not to be that is the question",
    "the cow jumped over the moon",
]
SENTENCES_PER_TASK = 7
SPOUT_TASKS = 2
RESULT_TIMEOUT_SECS = 150
EXIT_TIMEOUT_SECS = 90

# Shared heronpy code: components only; each test appends its topology definition.
COMPONENTS = '''
import os

import heronpy.api.api_constants as constants
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping

SENTENCES = {sentences!r}
SENTENCES_PER_TASK = {per_task!r}
SINK_PATH = {sink_path!r}


class SentenceSpout(Spout):
    """Emits SENTENCES_PER_TASK sentences, then nothing (heronpy has no end of input)."""

    outputs = ["sentence"]

    def initialize(self, config, context):
        tasks = sorted(context.get_component_tasks(context.get_component_id()))
        self.index = tasks.index(context.get_task_id())
        self.sent = 0

    def next_tuple(self):
        if self.sent < SENTENCES_PER_TASK:
            self.emit([SENTENCES[(self.index + self.sent) % len(SENTENCES)]])
            self.sent += 1


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class CountBolt(Bolt):
    """Emits (word, running count) for every word it sees."""

    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = {{}}

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, self.counts[word]])


class FileSink(Bolt):
    """Appends one line per tuple to the file named by its component config."""

    def initialize(self, config, context):
        self.path = config["sink.path"]

    def process(self, tup):
        with open(self.path, "a") as handle:
            handle.write(" ".join(str(v) for v in tup.values) + "\\n")
'''

BUILDER_STYLE = '''
import sys

from heronpy.api.topology import TopologyBuilder

if __name__ == '__main__':
    # as Heron's examples do: the name comes from `heron submit FILE NAME`
    if len(sys.argv) != 3 or sys.argv[2] != "--an-extra-argument":
        print(f"usage: FILE NAME --an-extra-argument, got {sys.argv}")
        sys.exit(1)
    builder = TopologyBuilder(name=sys.argv[1])
    sentence = builder.add_spout("sentence", SentenceSpout, par=2)
    split = builder.add_bolt("split", SplitBolt, par=2, inputs={sentence: Grouping.SHUFFLE})
    count = builder.add_bolt("count", CountBolt, par=2,
                             inputs={split: Grouping.fields("word")})
    builder.add_bolt("sink", FileSink, par=1, inputs={count: Grouping.GLOBAL},
                     config={"sink.path": SINK_PATH})
    builder.set_config({constants.TOPOLOGY_STMGRS: 2})
    builder.build_and_submit()
'''

CLASS_STYLE = '''
from heronpy.api.topology import Topology


class WordCountTopology(Topology):
    config = {constants.TOPOLOGY_STMGRS: 2}
    sentence = SentenceSpout.spec(par=2)
    split = SplitBolt.spec(par=2, inputs={sentence: Grouping.SHUFFLE})
    count = CountBolt.spec(par=2, inputs={split: Grouping.fields("word")})
    sink = FileSink.spec(par=1, inputs={count: Grouping.GLOBAL},
                         config={"sink.path": SINK_PATH})
'''

# heronpy's HeronComponentSpec with class path strings, as tools built on heronpy write them.
CLASS_PATH_STYLE = '''
from heronpy.api.component.component_spec import HeronComponentSpec
from heronpy.api.topology import Topology


class ClassPathWordCount(Topology):
    config = {constants.TOPOLOGY_STMGRS: 2}
    sentence = HeronComponentSpec(None, "heronpy_components.SentenceSpout", True, 2,
                                  outputs=["sentence"])
    split = HeronComponentSpec(None, "heronpy_components.SplitBolt", False, 2,
                               inputs={sentence: Grouping.SHUFFLE}, outputs=["word"])
    count = HeronComponentSpec(None, "heronpy_components.CountBolt", False, 2,
                               inputs={split["default"]: Grouping.fields("word")},
                               outputs=["word", "count"])
    sink = HeronComponentSpec(None, "heronpy_components.FileSink", False, 1,
                              inputs={count: Grouping.GLOBAL}, config={"sink.path": SINK_PATH})
'''


def _expected_counts() -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for index in range(SPOUT_TASKS):
        for sent in range(SENTENCES_PER_TASK):
            counts.update(SENTENCES[(index + sent) % len(SENTENCES)].split())
    return counts


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("heron-spark")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "heron_spark.cli"]


def _env() -> dict:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def _run_cli(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*_cli(), *args], env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    text = path.read_text()
    # only complete lines: the sink may be mid-write
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


def _describe(proc: subprocess.Popen, out: Path, err: Path) -> str:
    return (f"submit exit code {proc.poll()}\n--- stdout ---\n{out.read_text()[-3000:]}"
            f"\n--- stderr ---\n{err.read_text()[-6000:]}")


def _run_heronpy_file(tmp_path: Path, body: str, topology_name: str,
                      cli_args: tuple = ()) -> None:
    """Submit ``body`` with the CLI, wait for every count, list, kill; check it all.

    The components live in their own module, which imports heronpy: executors unpickle them
    by reference, so ``heronpy`` must import there before any heron_spark code has run.
    """
    sink = tmp_path / "sink.txt"
    components = textwrap.dedent(COMPONENTS).format(sentences=SENTENCES,
                                                    per_task=SENTENCES_PER_TASK,
                                                    sink_path=str(sink))
    source = "from heronpy_components import *  # noqa\n" + textwrap.dedent(body)
    imports = [line for line in (components + source).splitlines()
               if line.startswith(("import ", "from "))]
    assert all(line.split()[1].startswith("heronpy.api")
               or line.split()[1] in ("os", "sys", "heronpy_components") for line in imports), imports
    (tmp_path / "heronpy_components.py").write_text(components)
    topology_file = tmp_path / "heronpy_topology.py"
    topology_file.write_text(source)
    conf = ["--conf", f"heron.statemgr=file://{tmp_path}/state",
            "--conf", f"heron.work.dir={tmp_path}/work"]
    expected = _expected_counts()
    total = sum(expected.values())  # CountBolt emits one line per word occurrence
    out, err = tmp_path / "submit.out", tmp_path / "submit.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([*_cli(), "submit", "--master", "local[2]", *conf,
                                 str(topology_file), *cli_args],
                                cwd=tmp_path, env=_env(), stdout=stdout, stderr=stderr,
                                start_new_session=True)
    killed = False
    try:
        def every_result() -> bool:
            if len(_lines(sink)) >= total:
                return True
            assert proc.poll() is None, "submit ended early\n" + _describe(proc, out, err)
            return False

        wait_until(every_result, RESULT_TIMEOUT_SECS, interval=0.2,
                   message=lambda: f"{len(_lines(sink))}/{total} results\n"
                   + _describe(proc, out, err))

        listed = _run_cli(["list", *conf])
        assert listed.returncode == 0, listed.stderr
        assert [topology_name, "RUNNING", "live"] in \
            [line.split("\t") for line in listed.stdout.splitlines()], listed.stdout

        killed_cli = _run_cli(["kill", topology_name, *conf])
        killed = True
        assert killed_cli.returncode == 0, killed_cli.stdout + killed_cli.stderr
        try:
            code = proc.wait(timeout=EXIT_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:
            pytest.fail("submit did not exit after kill\n" + _describe(proc, out, err))
        assert code == 0, _describe(proc, out, err)
        assert f"topology {topology_name}: KILLED" in out.read_text(), _describe(proc, out, err)
    finally:
        _stop(proc, topology_name, conf, killed)

    lines = _lines(sink)
    assert len(lines) == total, f"{len(lines)} results, expected {total}"
    latest: dict[str, int] = {}
    seen: collections.Counter = collections.Counter()
    for line in lines:
        word, count = line.split(" ")
        seen[(word, int(count))] += 1
        latest[word] = max(int(count), latest.get(word, 0))
    assert latest == dict(expected)
    # each running count 1..n of each word arrives exactly once
    assert seen == collections.Counter((w, c) for w, n in expected.items()
                                       for c in range(1, n + 1))


def _stop(proc: subprocess.Popen, name: str, conf: list[str], killed: bool) -> None:
    """Teardown whatever is still running: kill the topology, then the submit process group."""
    if proc.poll() is not None:
        return
    if not killed:
        try:
            _run_cli(["kill", name, *conf])
        except subprocess.TimeoutExpired:
            pass
    try:
        proc.wait(timeout=EXIT_TIMEOUT_SECS)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()  # SIGTERM: the CLI kills its topology before exiting
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_heronpy_builder_file_runs_unchanged_under_the_cli(tmp_path):
    _run_heronpy_file(tmp_path, BUILDER_STYLE, "HeronpyBuilderWordCount",
                      ("HeronpyBuilderWordCount", "--an-extra-argument"))


def test_heronpy_class_file_runs_unchanged_under_the_cli(tmp_path):
    _run_heronpy_file(tmp_path, CLASS_STYLE, "WordCountTopology")


def test_heronpy_class_path_specs_run_unchanged_under_the_cli(tmp_path):
    _run_heronpy_file(tmp_path, CLASS_PATH_STYLE, "ClassPathWordCount")

"""A streamlet program that imports only heronpy runs under ``heron-spark submit`` on Spark
``local[2]`` (one Spark start, ~40 s): ``Runner.run`` submits through ``heron_spark.submit``,
the CLI waits for the bounded run to finish, and the counts its tumbling windows consumed
are exact under at-least-once."""

from __future__ import annotations

import re
import subprocess

import pytest

from test_heronpy_compat import _cli, _env

pytestmark = pytest.mark.spark

STREAMLET_PROGRAM = '''
import sys

from heronpy.connectors.mock.arraylooper import ArrayLooper
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.windowconfig import WindowConfig

SINK = {sink!r}


def record(pair):
    keyed, count = pair
    with open(SINK, "a") as handle:
        handle.write(f"{{keyed._window._end_time!r}} {{keyed._key}} {{count}}\\n")


if __name__ == "__main__":
    builder = Builder()
    lines = ArrayLooper(["Mary Had a little lamb", "I Love You"], sleep=0.02, loops=25)
    builder.new_source(lines) \\
        .flat_map(lambda line: line.split()) \\
        .map(lambda word: (word, 1)) \\
        .reduce_by_key_and_window(WindowConfig.create_tumbling_window(0.3), lambda x, y: x + y) \\
        .consume(record)
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)
    Runner().run(sys.argv[1], config, builder)
'''


def test_a_streamlet_program_runs_under_the_cli_on_spark(tmp_path, tmaster_placement):
    sink = tmp_path / "counts.txt"
    program = tmp_path / "word_count_streamlet.py"
    program.write_text(STREAMLET_PROGRAM.format(sink=str(sink)))
    done = subprocess.run(
        [*_cli(), "submit", "--master", "local[2]",
         "--conf", f"heron.statemgr=file://{tmp_path}/state",
         "--conf", f"heron.work.dir={tmp_path}/work", str(program), "streamlet_words"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "topology streamlet_words: FINISHED" in done.stdout
    # The driver's tracker; in container placement only once container 0 runs one (c0tracker).
    if tmaster_placement != "container" or "tracker UI" in done.stdout:
        assert re.search(r"topology streamlet_words: tracker UI \(one-time login link\): "
                         r"http://[\w.]+:\d+/login\?token=[0-9a-f]+\.\d+\.[0-9a-f]+$",
                         done.stdout, re.MULTILINE), done.stdout
    totals: dict[str, int] = {}
    windows = set()
    for line in sink.read_text().splitlines():
        end, word, count = line.split()
        windows.add(end)
        totals[word] = totals.get(word, 0) + int(count)
    # 50 lines over ~1 s, 0.3 s tumbling windows: ticks fired in the instance processes, and
    # the windows split the counts without losing or repeating any (at-least-once, no replays)
    assert len(windows) >= 2
    assert totals == {word: 25 for word in "Mary Had a little lamb I Love You".split()}

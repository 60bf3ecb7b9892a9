"""A topology in a notebook: the handle's ``repr`` and HTML table on a real running topology,
submit's start-up progress, and a real Jupyter kernel (nbclient + ipykernel) that submits a
topology and displays its handle, from a classic session and from a Spark Connect session, and
one whose cells query the Delta table a running topology writes (docs/guide/io.md's cell)."""

from __future__ import annotations

import ast
import collections
import io
import logging
import os
import re
import textwrap

import pytest

import resilience_topologies as topo
from heron_spark.config import SUBMIT_PROGRESS
from heron_spark.scheduler import notebook, progress
from heron_spark.scheduler.submit import submit
from heron_spark.testing import wait_until

TIMEOUT = 120


def _executed(handle, component: str) -> float:
    return notebook.family_total(handle.metrics().get(component, {}), notebook.EXECUTE)


@pytest.mark.spark
def test_repr_and_html_of_a_running_topology(spark, tmp_path, hconf, caplog, tmaster_placement):
    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        handle = submit(topo.numbers("shown", out, count=-1, sleep_ms=1), spark=spark.session,
                        conf=hconf, master="local[4]")
        try:
            assert handle.wait_running(timeout=TIMEOUT)
            wait_until(lambda: _executed(handle, "slow") > 0, 60, message="bolts to execute")
            handle._progress.join(10)
            text = repr(handle)
            page = handle._repr_html_()
        finally:
            handle.kill()
    assert text.startswith("TopologyHandle(name='shown', state=RUNNING, containers=2/2, "
                           "generation=0, rates=[numbers: emit "), text
    assert "slow: emit" in text and "/s" in text
    assert "<table>" in page and "<b>RUNNING</b>" in page
    for cell in ("<td>numbers</td><td>spout</td><td>2</td>", "<td>slow</td><td>bolt</td><td>2</td>"):
        assert cell in page, page
    # A one-time login link to the driver's tracker; in container placement only once a tracker
    # runs in container 0 (c0tracker).
    if handle.tracker_url is not None or tmaster_placement != "container":
        assert f"href='{handle.tracker_url}/login?token=" in page, page
    assert "token" not in text  # repr ends up in logs: no login link there
    assert "state=KILLED" in repr(handle) and "killed by the handle" in handle._repr_html_()
    # Not a terminal, not a kernel: one log line per change, the last one the running topology.
    lines = [r.getMessage() for r in caplog.records if r.name == progress.__name__]
    assert lines[-1] == "heron_spark topology shown: containers registered 2/2 (RUNNING)", lines
    assert lines[0].endswith("(STARTING)")


@pytest.mark.spark
def test_progress_can_be_turned_off(spark, tmp_path, hconf, caplog):
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        handle = submit(topo.numbers("quiet", tmp_path / "out", count=50), spark=spark.session,
                        conf={**hconf, SUBMIT_PROGRESS: "false"}, master="local[4]")
        assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert handle._progress is None
    assert [r for r in caplog.records if r.name == progress.__name__] == []


@pytest.mark.spark
def test_progress_with_the_tmaster_in_container_0(spark, tmp_path, hconf, caplog):
    """The progress asks container 0's TMaster (``RemoteTMaster.refresh``) until it runs."""
    from heron_spark.scheduler.remote import RemoteTMaster

    conf = {**hconf, "heron.tmaster.placement": "container", "heron.kill.grace.secs": 5}
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        handle = submit(topo.numbers("placed-shown", tmp_path / "out", count=-1, sleep_ms=1),
                        spark=spark.session, conf=conf, master="local[4]")
        try:
            assert isinstance(handle._tmaster, RemoteTMaster)
            assert handle._progress is not None
            handle._progress.join(TIMEOUT)  # ends by itself once the topology runs
            assert not handle._progress.is_alive()
            assert handle.status == "RUNNING"
        finally:
            handle.kill()
    lines = [r.getMessage() for r in caplog.records if r.name == progress.__name__]
    assert lines[0] == "heron_spark topology placed-shown: containers registered 0/2 (STARTING)"
    assert lines[-1] == "heron_spark topology placed-shown: containers registered 2/2 (RUNNING)", \
        lines
    assert len(lines) == len(set(lines))  # one line per change, not one per question


def test_html_escapes_every_value():
    from heron_spark.contract.topology_view import TopologyStatus

    view = notebook.build_view(
        TopologyStatus("<b>t</b>", "t-1", "FAILED", detail="x <script>alert(1)</script> & y",
                       registered=(0,), containers=2, generation=1),
        {"<i>c</i>": {"__emit-count/default": 10.0, "__execute-count/a/default": 4.0,
                      "__execute-count/b/default": 2.0, "__ack-count": 3.0}},
        {"<i>c</i>": (False, 1)}, 2.0, "http://h:1/?a=1&b='2'")
    page = notebook.html_table(view)
    assert "<script>" not in page and "<i>" not in page and "&lt;i&gt;c&lt;/i&gt;" in page
    assert "&amp;b=&#x27;2&#x27;" in page and "&lt;b&gt;t&lt;/b&gt;" in page
    [row] = view.components
    assert (row.emitted, row.executed, row.acked, row.emit_rate, row.execute_rate) == \
        (10.0, 6.0, 3.0, 5.0, 3.0)
    assert "containers=1/2, generation=1" in notebook.text(view)


def test_a_family_published_whole_and_per_stream_counts_once():
    # A bolt instance publishes __execute-count (all inputs) and one per input stream.
    published = {"__execute-count": 6.0, "__execute-count/a/default": 4.0,
                 "__execute-count/b/default": 2.0, "__execute-latency/a/default": 9.0}
    assert notebook.family_total(published, notebook.EXECUTE) == 6.0
    assert notebook.family_total({"__execute-count": 5.0}, notebook.EXECUTE) == 5.0
    assert notebook.family_total({}, notebook.EXECUTE) == 0.0


def test_terminal_progress_rewrites_one_line():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    sink = progress.choose_sink("first", stream)
    assert isinstance(sink, progress.TerminalSink)
    sink.show("registered 0/2 (STARTING)")
    sink.show("registered 2/2 (RUNNING)")
    sink.close()
    assert stream.getvalue() == ("\rregistered 0/2 (STARTING)\rregistered 2/2 (RUNNING) \n")


def test_progress_refreshes_a_tmaster_in_container_0(caplog):
    """Container placement: the progress thread asks (``refresh``) before each look."""
    import threading

    from heron_spark.contract.topology_view import TopologyStatus

    class Asked:  # what RemoteTMaster shows between questions: the last answer
        name, asked, poll_secs = "remote", 0, 1.0
        running, done = threading.Event(), threading.Event()
        answer = TopologyStatus("remote", "r-1", "STARTING", containers=2)

        def refresh(self, max_age=0.0):
            self.asked += 1
            if self.asked == 3:
                self.answer = self.answer.replace(registered=(0, 1), state="RUNNING")
                self.running.set()

        def status(self):
            return self.answer

    tmaster = Asked()
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        progress.watch(tmaster, True, 0.01).join(10)
    assert [r.getMessage() for r in caplog.records if r.name == progress.__name__] == [
        "heron_spark topology remote: containers registered 0/2 (STARTING)",
        "heron_spark topology remote: containers registered 2/2 (RUNNING)"]
    assert tmaster.asked == 3


NOTEBOOK_CELLS = [
    """
    import sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    from pathlib import Path
    import resilience_topologies as topo
    from heron_spark import submit
    handle = submit(topo.numbers("in-notebook", Path({out!r}), count=-1, sleep_ms=1),
                    master="local[2]")
    assert handle.wait_running(120)
    handle._progress.join(10)
    """,
    "handle",
    "handle.kill()\nhandle.status",
]


@pytest.mark.notebook
def test_a_notebook_submits_and_displays_a_topology(tmp_path):
    """Runs in a real ipykernel (nbclient drives it like Jupyter does)."""
    import nbformat
    from nbclient import NotebookClient

    tests = os.path.dirname(os.path.abspath(__file__))
    values = {"repo": os.path.dirname(tests), "tests": tests, "out": str(tmp_path / "out")}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell).format(**values))
                for cell in NOTEBOOK_CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    submitted, shown, killed = (cell.outputs for cell in nb.cells)
    progress_texts = [o["data"]["text/plain"] for o in submitted if o.get("data")]
    assert progress_texts == [
        "heron_spark topology in-notebook: containers registered 2/2 (RUNNING)"], submitted
    [result] = [o for o in shown if o["output_type"] == "execute_result"]
    page = result["data"]["text/html"]
    assert "<b>RUNNING</b>" in page and "<td>numbers</td>" in page and "<td>slow</td>" in page
    assert result["data"]["text/plain"].startswith("TopologyHandle(name='in-notebook', "
                                                   "state=RUNNING, containers=2/2")
    assert [o["data"]["text/plain"] for o in killed if o.get("data")] == ["'KILLED'"]


DELTA_CELLS = [
    """
    import sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    from pathlib import Path
    import delta_support as ds
    import parquet_word_count as pwc
    from heron_spark import submit
    folder = Path({folder!r})
    pwc.write_corpus(folder / "corpus.txt", {lines})
    topology = ds.build("delta-notebook", folder / "corpus.txt", folder / "words",
                        mode="EFFECTIVELY_ONCE", config={{
                            "topology.stateful.checkpoint.interval.seconds": 0.5,
                            pwc.SLEEP_MS: 8,
                            # a checkpoint marker queues behind every line handed to split:
                            # short queues let checkpoints (and Delta commits) go on mid-run
                            "heron.stmgr.backpressure.high.water.tuples": 100,
                            "heron.stmgr.backpressure.low.water.tuples": 50}})
    handle = submit(topology, conf={{"heron.statemgr": f"file://{{folder}}/state",
                                     "heron.work.dir": f"{{folder}}/work"}}, master="local[2]")
    assert handle.wait_running(120)
    """,
    # the docs' cell, on the live table (waiting for its first commit)
    """
    from deltalake import DeltaTable
    from heron_spark.testing import wait_until
    wait_until(lambda: (folder / "words" / "_delta_log").is_dir(), 60, interval=0.1,
               message="the table's first commit")
    table = DeltaTable(str(folder / "words"))
    (handle.status, table.version(), table.to_pyarrow_table().num_rows)
    """,
    "handle.wait(timeout=240)",
    "table.update_incremental()\n(table.version(), table.to_pyarrow_table().num_rows)",
]


@pytest.mark.notebook
def test_a_notebook_queries_the_delta_table_a_running_topology_writes(tmp_path):
    """The live query sees committed rows while the topology runs, fewer than in the end; once
    it finished, the table holds exactly one row per word of the corpus."""
    import delta_support as ds
    import nbformat
    import parquet_word_count as pwc
    from nbclient import NotebookClient

    lines = 3000  # split sleeps 8 ms a line on 2 tasks: about 12 s of input
    tests = os.path.dirname(os.path.abspath(__file__))
    values = {"repo": os.path.dirname(tests), "tests": tests, "folder": str(tmp_path),
              "lines": lines}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell).format(**values))
                for cell in DELTA_CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    _, live, waited, final = ([o["data"]["text/plain"] for o in cell.outputs
                               if o.get("data")] for cell in nb.cells[:4])
    expected = pwc.expected_rows("corpus.txt", pwc.write_corpus(tmp_path / "again.txt", lines))
    status, version, rows = ast.literal_eval(live[0])  # a tuple's repr: ('RUNNING', 3, 1234)
    assert status == "RUNNING" and version >= 0 and 0 < rows < sum(expected.values()), live
    assert waited == ["'FINISHED'"]
    final_version, final_rows = ast.literal_eval(final[0])
    assert final_version > version and final_rows == sum(expected.values())
    assert ds.read_deltalake(tmp_path / "words") == expected  # each row once, none missing


CONNECT_CELLS = [
    """
    import sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    from pathlib import Path
    from pyspark.sql import SparkSession
    import reliable_word_count as rwc
    from heron_spark import submit
    from heron_spark.scheduler import notebook
    from heron_spark.testing import wait_until
    spark = SparkSession.builder.remote({url!r}).getOrCreate()
    folder = Path({folder!r})
    rwc.write_corpus(folder / "corpus.txt", {lines})
    topology = rwc.build("connect-notebook", folder / "corpus.txt", folder / "out", config={{
        "topology.reliability.mode": "ATMOST_ONCE", rwc.SLEEP_MS: 40}})
    handle = submit(topology, spark=spark, conf={{"heron.statemgr": f"file://{{folder}}/state",
                                                  "heron.work.dir": f"{{folder}}/work"}})
    assert handle.wait_running(120)
    handle._progress.join(10)
    wait_until(lambda: notebook.family_total(handle.metrics().get("count", {{}}),
                                             notebook.EXECUTE) > 0,
               60, interval=0.6, message="the count bolt's first metrics")
    """,
    "handle",
    "handle.wait(timeout=240)",
    "handle",
    "spark.stop()",
]
_ROW = re.compile(r"<tr><td>(\w+)</td><td>(spout|bolt)</td><td>(\d+)</td><td>([\d,]+)</td>"
                  r"<td>[^<]*</td><td>([\d,]+)</td>")


def _html_rows(page: str) -> dict[str, tuple[str, int, int, int]]:
    """Component -> (kind, parallelism, emitted, executed), read from the handle's table."""
    return {name: (kind, int(par), int(emitted.replace(",", "")),
                   int(executed.replace(",", "")))
            for name, kind, par, emitted, executed in _ROW.findall(page)}


# In the connect tier, not the notebook one: it needs the session's Spark Connect server
# (``connect_server``, started once for that tier), and a test belongs to one tier.
@pytest.mark.connect
def test_a_notebook_whose_kernel_holds_a_connect_session(connect_server, tmp_path):
    """A real ipykernel holds ``SparkSession.builder.remote(...)`` (no SparkContext), submits
    the word count, displays the running handle, waits, and displays the finished one: the
    TMaster runs in container 0 and the kernel reads it through Spark jobs."""
    import nbformat
    from nbclient import NotebookClient

    import fault_support as faults
    import reliable_word_count as rwc

    lines = 1000
    tests = os.path.dirname(os.path.abspath(__file__))
    values = {"repo": os.path.dirname(tests), "tests": tests, "url": connect_server.url,
              "folder": str(tmp_path), "lines": lines}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell).format(**values))
                for cell in CONNECT_CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    submitted, running, waited, finished, _stopped = (cell.outputs for cell in nb.cells)
    progress_texts = [o["data"]["text/plain"] for o in submitted
                      if o["output_type"] == "display_data"]  # one output, updated in place
    assert progress_texts == ["heron_spark topology connect-notebook: containers registered "
                              "2/2 (RUNNING)"], submitted
    [shown] = [o for o in running if o["output_type"] == "execute_result"]
    page = shown["data"]["text/html"]
    assert "state <b>RUNNING</b>" in page, page
    assert shown["data"]["text/plain"].startswith(
        "TopologyHandle(name='connect-notebook', state=RUNNING, containers=2/2")
    rows = _html_rows(page)
    assert set(rows) == {"lines", "split", "count"}, page
    assert rows["lines"][:2] == ("spout", 2) and rows["count"][:2] == ("bolt", 2)
    assert 0 < rows["count"][3]  # counted words while it runs
    assert [o["data"]["text/plain"] for o in waited if o.get("data")] == ["'FINISHED'"]
    [final] = [o for o in finished if o["output_type"] == "execute_result"]
    final_page = final["data"]["text/html"]
    expected = rwc.expected_counts(rwc.write_corpus(tmp_path / "expected.txt", lines))
    assert "state <b>FINISHED</b>" in final_page, final_page
    total = _html_rows(final_page)
    assert total["count"][3] == sum(expected.values())  # the final metrics, shown exact
    assert total["lines"][2] == lines
    assert rows["count"][3] < total["count"][3]  # the first table showed it running
    raw, _unique, _records = rwc.read_counts(tmp_path / "out")
    assert collections.Counter(raw) == expected
    wait_until(lambda: not faults.processes_under(tmp_path / "work"), 30,
               message="every heron_spark process of the topology to exit")
    wait_until(lambda: not connect_server.running_jobs(), 30,
               message="the Spark job of the barrier stage to end")

"""A topology in a notebook: the handle's ``repr`` and HTML table on a real running topology,
submit's start-up progress, and a real Jupyter kernel (nbclient + ipykernel) that submits a
topology and displays its handle."""

from __future__ import annotations

import io
import logging
import os
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


def test_html_escapes_every_value():
    view = notebook.build_view(
        {"name": "<b>t</b>", "state": "FAILED", "detail": "x <script>alert(1)</script> & y",
         "registered": [0], "containers": 2, "generation": 1},
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

    class Asked:  # what RemoteTMaster shows between questions: the last answer
        name, asked = "remote", 0
        running, done = threading.Event(), threading.Event()
        answer = {"registered": [], "containers": 2, "state": "STARTING"}

        def refresh(self):
            self.asked += 1
            if self.asked == 3:
                self.answer = {"registered": [0, 1], "containers": 2, "state": "RUNNING"}
                self.running.set()

        def status(self):
            return self.answer

    tmaster = Asked()
    with caplog.at_level(logging.INFO, logger=progress.__name__):
        progress.watch(tmaster, True, 0.01, refresh=tmaster.refresh).join(10)
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

"""Components given by class path run on Spark ``local[2]``, including a path only the
executors can import; a path nobody can import, or one naming no component, is refused once,
before launch.

One driver subprocess runs them all: its executors see a module folder on ``PYTHONPATH`` that
the driver has removed from its own ``sys.path`` (the module, a copy of
``class_path_components``, imports only on the executors: Spark hands the environment's
``PYTHONPATH`` to its Python workers, and the containers hand the workers' ``sys.path`` to
their instances).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import class_path_components as comps

pytestmark = pytest.mark.spark

DRIVER_TIMEOUT_SECS = 600
EXEC_ONLY = "exec_only_words"

DRIVER = r"""
import importlib.util, json, os, sys, time

exec_only, state = sys.argv[1], sys.argv[2]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != exec_only]
outcome = {"driver_imports_it": importlib.util.find_spec("exec_only_words") is not None}

import heron_spark
from heron_spark.testing import run_local
import class_path_components as comps

conf = {"heron.statemgr": "file://" + state, "heron.work.dir": state + "-work"}
runs = {"class": comps.class_style("exec_only_words", "ExecOnlyClassStyle"),
        "builder": comps.builder_style("exec_only_words", "ExecOnlyBuilder",
                                       importable_here=False).build()}
for kind, topology in runs.items():
    run = run_local(topology, conf=conf, engine="spark", timeout=240,
                    collect_dir=os.path.join(state + "-collect", kind))
    outcome[kind] = {"status": run.status, "counts": comps.final_counts(run.collected("sink"))}

started = time.monotonic()
try:
    heron_spark.submit(comps.class_style("no_such_module_anywhere", "Unimportable"), conf=conf,
                       master="local[2]")
    outcome["unimportable"] = "submitted"
except heron_spark.HeronSparkError as exc:
    outcome["unimportable"] = {"error": type(exc).__name__, "message": str(exc),
                               "missing": getattr(exc, "missing", None),
                               "python": getattr(exc, "python", None),
                               "component": getattr(exc, "component", None),
                               "path": getattr(exc, "path", None),
                               "fix": getattr(exc, "fix", None),
                               "seconds": time.monotonic() - started}
builder = heron_spark.TopologyBuilder("NoComponent")
bad = builder.add_spout("bad", "exec_only_words.NotAComponent", 1, optional_outputs=["x"])
builder.add_bolt("sink", "heron_spark.testing.CollectingBolt", 1, inputs=[bad])
try:
    heron_spark.submit(builder.build(), conf=conf, master="local[2]")
    outcome["no_component"] = "submitted"
except heron_spark.HeronSparkError as exc:
    outcome["no_component"] = {"error": type(exc).__name__, "kind": getattr(exc, "kind", None),
                               "component": getattr(exc, "component", None)}
from heron_spark.statemgr import open_state_manager
stored = open_state_manager("file://" + state)
outcome["unimportable_state"] = any(stored.get_execution_state(name) is not None
                                    for name in ("Unimportable", "NoComponent"))
print("OUTCOME " + json.dumps(outcome), flush=True)
"""


def _run_driver(tmp_path: Path) -> dict:
    exec_only = tmp_path / "exec_only"
    exec_only.mkdir()
    (exec_only / f"{EXEC_ONLY}.py").write_text(Path(comps.__file__).read_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(exec_only), env.get("PYTHONPATH", "")])
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(exec_only),
                                 str(tmp_path / "state")], cwd=tmp_path, env=env,
                                stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        proc.wait(timeout=DRIVER_TIMEOUT_SECS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    lines = [line for line in out.read_text().splitlines() if line.startswith("OUTCOME ")]
    assert lines, f"driver printed no outcome (exit {proc.returncode})\n{err.read_text()[-6000:]}"
    outcome = json.loads(lines[-1][len("OUTCOME "):])
    outcome["stderr"] = err.read_text()
    return outcome


def test_class_paths_run_on_spark_and_bad_ones_are_refused_before_launch(tmp_path):
    outcome = _run_driver(tmp_path)
    assert outcome["driver_imports_it"] is False, "the driver can import the module: proves nothing"
    expected = comps.expected_counts(2)
    for kind in ("class", "builder"):
        assert outcome[kind]["status"] == "FINISHED", outcome["stderr"][-6000:]
        assert outcome[kind]["counts"] == expected, kind

    refused = outcome["unimportable"]
    assert refused != "submitted", "submit accepted a class path the executors cannot import"
    assert refused["error"] == "WorkerEnvironmentError"
    assert refused["missing"] == "no_such_module_anywhere"
    assert refused["python"] == sys.executable
    assert (refused["component"], refused["path"]) == \
        ("sentence", "no_such_module_anywhere.SentenceSpout")
    assert "--py-files" in refused["fix"]
    message = refused["message"]
    assert "'sentence'" in message and "no_such_module_anywhere.SentenceSpout" in message
    assert "sys.path" in message and "--py-files" in message
    # A path only the executors import, naming a class that is no Spout: refused there too.
    assert outcome["no_component"] == {"error": "TopologyValueError", "kind": "class",
                                       "component": "bad"}
    # Refused by the preflight: nothing launched, nothing stored, nothing retried.
    assert outcome["unimportable_state"] is False
    assert "resubmitting" not in outcome["stderr"]

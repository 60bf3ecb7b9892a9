"""Fault 8 of issue 7: executors whose Python cannot run heron_spark fail the submit at once.

Each test drives a real Spark driver in a subprocess whose executors run a bare virtual
environment's Python: the same interpreter version, but without heron_spark, pyarrow or
protobuf (a venv that is not activated, as when Spark runs ``python3`` from PATH).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv

import pytest

pytestmark = pytest.mark.spark

DRIVER = r"""
import json, os, sys, time
from pyspark.sql import SparkSession
import heron_spark
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder

class Numbers(Spout):
    outputs = ["n"]
    def initialize(self, config, context):
        self.left = 200
    def next_tuple(self):
        if self.left:
            self.left -= 1
            self.emit([self.left])
        else:
            self.declare_exhausted()

class Sink(Bolt):
    def process(self, tup):
        pass

builder = TopologyBuilder("envcheck")
numbers = builder.add_spout("numbers", Numbers, par=1)
builder.add_bolt("sink", Sink, par=1, inputs={numbers: Grouping.SHUFFLE})
builder.set_config({"topology.stmgrs": 1})
mode, state = sys.argv[1], sys.argv[2]
conf = {"heron.statemgr": "file://" + state, "heron.work.dir": state + "-work"}
spark = None
if mode == "user-session":  # the user's own session, executors on the bare Python
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
        .getOrCreate()
started = time.monotonic()
outcome = {"mode": mode}
try:
    handle = heron_spark.submit(builder.build(), spark=spark, conf=conf, master="local[2]")
    outcome["status"] = handle.wait(timeout=120)
except heron_spark.HeronSparkError as exc:
    outcome.update(error=type(exc).__name__, message=str(exc),
                   python=getattr(exc, "python", None), missing=getattr(exc, "missing", None))
outcome["seconds"] = time.monotonic() - started
from heron_spark.statemgr import open_state_manager
from heron_spark.contract.execution_state import as_dict
stored = open_state_manager("file://" + state).get_execution_state("envcheck")
outcome["execution_state"] = None if stored is None else as_dict(stored)
print("OUTCOME " + json.dumps(outcome), flush=True)
"""


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A venv of the test's own interpreter with nothing installed in it."""
    folder = tmp_path_factory.mktemp("bare-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = folder / "bin" / "python3"
    probe = subprocess.run([str(python), "-c", "import heron_spark"], capture_output=True,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert probe.returncode != 0, "the bare venv can import heron_spark: the test proves nothing"
    return str(python)


def _run_driver(mode: str, tmp_path, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", DRIVER, mode, str(tmp_path / "state")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert lines, f"driver printed no outcome (exit {proc.returncode})\n{proc.stderr[-4000:]}"
    outcome = json.loads(lines[-1][len("OUTCOME "):])
    outcome["stderr"] = proc.stderr
    return outcome


def _clean_env() -> dict:
    """The test process's environment minus what makes the repository importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON",
                                                           "PYSPARK_DRIVER_PYTHON")}
    return env


def test_user_session_on_a_python_without_heron_spark_fails_at_once(bare_python, tmp_path):
    env = {**_clean_env(), "PYSPARK_PYTHON": bare_python}
    outcome = _run_driver("user-session", tmp_path, env)

    assert outcome.get("error") == "WorkerEnvironmentError", outcome
    assert outcome["python"] == bare_python
    assert outcome["missing"] == "heron_spark"
    message = outcome["message"]
    assert bare_python in message and "No module named 'heron_spark'" in message
    assert "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message
    # Refused before anything was launched: no TMaster, no barrier stage, no resubmission.
    assert outcome["execution_state"] is None
    assert "resubmitting" not in outcome["stderr"]
    assert "barrier" not in outcome["stderr"]


def test_session_heron_spark_creates_runs_the_drivers_python(bare_python, tmp_path):
    """With ``python3`` on PATH being the bare venv (PYSPARK_PYTHON unset), the session
    submit() creates still runs its executors on the driver's interpreter."""
    env = _clean_env()
    env["PATH"] = os.pathsep.join([os.path.dirname(bare_python), env.get("PATH", "")])
    outcome = _run_driver("own-session", tmp_path, env)

    assert "error" not in outcome, outcome.get("message")
    assert outcome["status"] == "FINISHED", outcome["stderr"][-4000:]


def _submit_refused(driver: str, tmp_path, what: str) -> dict:
    """Run ``driver`` (it builds ``b``) submitting ``b`` on local[2] in a clean environment;
    return the WorkerEnvironmentError's missing module and message (fail if it submitted)."""
    driver += (
        f"conf = {{'heron.statemgr': 'file://{tmp_path}/state', "
        f"'heron.work.dir': '{tmp_path}/work'}}\n"
        "try:\n"
        "    heron_spark.submit(b.build(), conf=conf, master='local[2]')\n"
        "    print('OUTCOME submitted')\n"
        "except heron_spark.WorkerEnvironmentError as exc:\n"
        "    print('OUTCOME ' + json.dumps({'missing': exc.missing, 'message': str(exc)}))\n")
    proc = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, env=_clean_env(),
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert lines, proc.stderr[-4000:]
    assert lines[-1] != "OUTCOME submitted", f"submit accepted {what} executors cannot load"
    return json.loads(lines[-1][len("OUTCOME "):])


def test_unimportable_user_module_names_the_module_and_the_fix(tmp_path):
    """A topology whose classes live in a module only the driver can import."""
    package = tmp_path / "driver_only"
    package.mkdir()
    (package / "only_here.py").write_text(
        "from heron_spark import Bolt, Spout\n"
        "class Numbers(Spout):\n"
        "    outputs = ['n']\n"
        "    def next_tuple(self):\n"
        "        self.emit([1])\n"
        "class Sink(Bolt):\n"
        "    def process(self, tup):\n"
        "        pass\n")
    driver = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(package)!r})\n"
        "import only_here, heron_spark\n"
        "from heron_spark import Grouping, TopologyBuilder\n"
        "b = TopologyBuilder('driveronly')\n"
        "s = b.add_spout('numbers', only_here.Numbers, par=1)\n"
        "b.add_bolt('sink', only_here.Sink, par=1, inputs={s: Grouping.SHUFFLE})\n"
        "b.set_config({'topology.stmgrs': 1})\n")
    outcome = _submit_refused(driver, tmp_path, "a topology")
    assert outcome["missing"] == "only_here"
    assert "--py-files" in outcome["message"] and "addPyFile" in outcome["message"]


def test_a_serializer_only_the_driver_has_names_the_module_and_the_fix(tmp_path):
    """``topology.serializer.classname`` naming a module the executors cannot import."""
    package = tmp_path / "driver_only"
    package.mkdir()
    (package / "only_here_serializer.py").write_text(
        "import pickle\n"
        "from heron_spark import IHeronSerializer\n"
        "class Ser(IHeronSerializer):\n"
        "    def initialize(self, config):\n"
        "        pass\n"
        "    def serialize(self, obj):\n"
        "        return pickle.dumps(obj)\n"
        "    def deserialize(self, data):\n"
        "        return pickle.loads(data)\n")
    driver = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(package)!r})\n"
        "import heron_spark\n"
        + DRIVER.split("builder = TopologyBuilder", 1)[0] +
        "b = TopologyBuilder('serializeronly')\n"
        "s = b.add_spout('numbers', Numbers, par=1)\n"
        "b.add_bolt('sink', Sink, par=1, inputs={s: Grouping.SHUFFLE})\n"
        "b.set_config({'topology.stmgrs': 1,\n"
        "              'topology.serializer.classname': 'only_here_serializer.Ser'})\n")
    outcome = _submit_refused(driver, tmp_path, "a serializer")
    assert outcome["missing"] == "only_here_serializer"
    assert "--py-files" in outcome["message"]

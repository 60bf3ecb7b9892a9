"""``spark-submit`` runs of examples/word_count.py, with and without heron_spark installed.

Why: on a real cluster heron_spark is often not installed on the executors but shipped with
``--py-files``. Spark puts the zip on the Python worker's ``sys.path`` only; the container's
children (stmgr, instances, metrics manager) are new interpreters, and reach the zip only
because ``_process.child_env`` hands them the worker's ``sys.path`` as ``PYTHONPATH``.

The executor Python is a throw-away venv whose only link to /work/venv is a ``.pth`` line
naming its site-packages: pyspark, pyarrow, pandas, numpy, protobuf and yaml import, but the
editable install of heron_spark does not (``.pth`` files of an added path are not run). The
children re-exec that same ``sys.executable``, so they cannot fall back on the install either.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from cluster_support import HOST, PYSPARK_BIN, kill_tree

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
WORD_COUNT = REPO / "examples" / "word_count.py"
MATCH_LINE = "matches the independent count: True"
TIMEOUT_SECS = 300


def zip_package(dest: Path) -> Path:
    """Zip the heron_spark sources of the checkout (no caches) as Spark ships them."""
    path = dest / "heron_spark.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted((REPO / "heron_spark").rglob("*.py")):
            archive.write(file, file.relative_to(REPO))
    return path


def isolated_python(dest: Path) -> Path:
    """A venv seeing the main venv's third-party packages, but not heron_spark."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(dest)
    python = dest / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "main_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def clean_env(tmp_path: Path) -> dict[str, str]:
    """Loopback only; no inherited PYTHONPATH (it may name the checkout); a private state
    manager and work folder (a conf dir read by the driver), so parallel runs never collide."""
    from heron_spark.config import TMASTER_PLACEMENT, read_conf_file

    placement = read_conf_file().get(TMASTER_PLACEMENT)  # conftest's --tmaster-placement
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "heron_spark.yaml").write_text(f"heron.statemgr: file://{tmp_path}/state\n"
                                           f"heron.work.dir: {tmp_path}/work\n"
                                           + (f"{TMASTER_PLACEMENT}: {placement}\n"
                                              if placement else ""))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_LOCAL_IP=HOST, PYSPARK_DRIVER_PYTHON=sys.executable,
               HERON_SPARK_CONF_DIR=str(conf))
    return env


def spark_submit(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run spark-submit in its own session; kill the whole tree however it ends."""
    command = [str(PYSPARK_BIN / "spark-submit"), "--master", "local[2]",
               "--conf", f"spark.driver.host={HOST}", "--conf", f"spark.driver.bindAddress={HOST}",
               "--conf", "spark.ui.enabled=false", *args]
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_SECS)
    finally:
        kill_tree(proc)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def assert_word_count_ok(result: subprocess.CompletedProcess) -> None:
    detail = f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
    assert result.returncode == 0, detail
    assert MATCH_LINE in result.stdout, detail


def test_word_count_with_heron_spark_shipped_as_py_files(tmp_path):
    package = zip_package(tmp_path)
    python = isolated_python(tmp_path / "executor-venv")
    env = clean_env(tmp_path)
    run_dir = tmp_path / "run"  # cwd of driver and workers: nothing importable in it
    run_dir.mkdir()
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util as u, pyspark, pyarrow, pandas, numpy, yaml, "
                            "google.protobuf; print(u.find_spec('heron_spark'))"],
        env=env, cwd=run_dir, capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None", f"executor python still sees heron_spark: {probe.stdout}"

    result = spark_submit(["--py-files", str(package),
                           "--conf", f"spark.pyspark.python={python}",
                           "--conf", f"spark.pyspark.driver.python={sys.executable}",
                           str(WORD_COUNT), "--sentences", "2000"], env, run_dir)
    assert_word_count_ok(result)


def test_word_count_with_plain_spark_submit(tmp_path):
    env = clean_env(tmp_path)
    env["PYSPARK_PYTHON"] = sys.executable  # the venv: heron_spark installed everywhere
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    result = spark_submit([str(WORD_COUNT), "--sentences", "2000"], env, run_dir)
    assert_word_count_ok(result)


def _package(folder: Path, name: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text("")


def test_children_skip_spark_zips_of_the_installed_pyspark(tmp_path):
    """Spark's workers put pyspark.zip and py4j-*.zip first on sys.path; modules imported from
    a zip are compiled from source in every process. Children leave out the zips that ship
    inside the pip-installed pyspark (the same code, with cached bytecode) and keep any other
    Spark's zips and the user's --py-files."""
    from heron_spark._process import _without_redundant_spark_zips

    site = tmp_path / "site-packages"
    _package(site, "pyspark")
    _package(site, "py4j")
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    own = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    shipped = str(tmp_path / "deps.zip")
    assert _without_redundant_spark_zips([*own, shipped, str(site)]) == [shipped, str(site)]

    other_spark = [str(tmp_path / "opt-spark" / "python" / "lib" / "pyspark.zip")]
    assert _without_redundant_spark_zips([*other_spark, str(site)]) == [*other_spark, str(site)]

    bare = tmp_path / "no-pyspark-here"
    bare.mkdir()
    assert _without_redundant_spark_zips([*own, str(bare)]) == [*own, str(bare)]

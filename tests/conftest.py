"""Shared fixtures of the end-to-end tests: one local Spark session, a per-test state folder;
the test tiers.

Topologies run for real: Spark ``local[4]`` barrier tasks, one process per stmgr and instance.
User classes defined in test modules reach the instance processes by reference (module import),
so the test folder and the repository root (for ``examples``) are put on ``PYTHONPATH`` before
Spark starts its Python workers.

Tiers: unit and in-process tests carry no mark and make the default run (``pytest -q``); every
slower test carries one tier mark of ``TIERS`` (registered in pyproject.toml, whose ``addopts``
leave them all out) and runs with ``pytest -m <tier>``. A test asking for a fixture that starts
Spark or a server is marked with that fixture's tier if it has none; a test with two tiers, or
an unmarked test that starts a Spark JVM in this process, fails.

TMaster placement: ``pytest --tmaster-placement=container`` (or ``driver``) runs the chosen
tests with every submit defaulting to that ``heron.tmaster.placement``, without changing the
product's default (``auto``): the per-test ``heron_spark.yaml`` (``_isolated_env``) carries
the key, so submits in this process, subprocess drivers and the CLI all read it (a ``conf=``
or topology config naming the key still wins). A test that is about the TMaster in the driver
carries ``@pytest.mark.tmaster_in_driver("why")`` and is skipped, with that reason, in a
container run.

Session kinds: a test decorated ``@connect_support.session_kinds(tier)`` runs once on the
classic session (in ``tier``) and once under Spark Connect (``connect``); its
``session_client`` fixture runs the same scenario either way (``connect_support``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent

# Early, before anything starts a JVM or a Python worker.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
for _path in (str(REPO_ROOT), str(TESTS_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
for _path in (str(REPO_ROOT), str(TESTS_DIR)):
    if _path not in _pythonpath:
        _pythonpath.insert(0, _path)
os.environ["PYTHONPATH"] = os.pathsep.join(_pythonpath)

SPARK_MASTER = "local[4]"

TIERS = ("spark", "fault", "chaos", "cluster", "browser", "notebook", "connect", "hosts", "kafka")
# Fixtures that start Spark or a server, and the tier a test asking for one is at least in.
FIXTURE_TIERS = {"spark": "spark", "zookeeper": "cluster", "connect_server": "connect",
                 "kafka": "kafka"}


PLACEMENT_OPTION = "--tmaster-placement"


def pytest_addoption(parser):
    parser.addoption(PLACEMENT_OPTION, choices=("driver", "container", "auto"), default=None,
                     help="default heron.tmaster.placement of every submit in this run "
                          "(default: the product's own, auto)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "tmaster_in_driver(reason): about the TMaster in the driver; skipped, with "
                   "reason, under --tmaster-placement=container")


def _placement(config) -> str | None:
    return config.getoption(PLACEMENT_OPTION)


def _tiers(item) -> list[str]:
    return [mark.name for mark in item.iter_markers() if mark.name in TIERS]


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    """Mark tests by the fixtures they ask for; refuse a test in two tiers.

    Under ``--tmaster-placement=container``, skip the ``tmaster_in_driver`` tests (reported
    at the test, with its reason).
    """
    twice = []
    container = _placement(config) == "container"
    for item in items:
        driver_only = item.get_closest_marker("tmaster_in_driver")
        if driver_only is not None:
            if not driver_only.args:
                raise pytest.UsageError(f"{item.nodeid}: tmaster_in_driver needs a reason")
            if container:
                item.add_marker(pytest.mark.skip(
                    reason=f"TMaster in the driver only: {driver_only.args[0]}"))
        tiers = _tiers(item)
        if not tiers:
            needed = [FIXTURE_TIERS[name] for name in item.fixturenames if name in FIXTURE_TIERS]
            if needed:
                item.add_marker(needed[0])
        elif len(set(tiers)) > 1:
            twice.append(f"{item.nodeid}: {', '.join(sorted(set(tiers)))}")
    if twice:
        raise pytest.UsageError("a test belongs to one tier; these have several:\n  "
                                + "\n  ".join(twice))


def _spark_jvm_started() -> bool:
    """True once this process has started a Spark JVM (pyspark keeps its gateway after stop)."""
    context = sys.modules.get("pyspark.context")
    spark_context = getattr(context, "SparkContext", None)
    return spark_context is not None and (spark_context._gateway is not None
                                          or spark_context._active_spark_context is not None)


_JVM_BEFORE = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_JVM_BEFORE] = _spark_jvm_started()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Fail an unmarked (default tier) test that started Spark: mark it ``spark`` instead."""
    outcome = yield
    report = outcome.get_result()
    if (call.when == "teardown" and not _tiers(item) and not item.stash.get(_JVM_BEFORE, True)
            and _spark_jvm_started()):
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} started a Spark JVM but is in the default (fast) tier: "
                           f"mark it with @pytest.mark.spark (or a slower tier of {TIERS})")


def _new_session():
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder
            .master(SPARK_MASTER)
            .appName("heron_spark-tests")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def _usable(session) -> bool:
    """True when ``session`` is alive (not stopped by another module)."""
    try:
        sc = session.sparkContext
        return sc._jsc is not None and not sc._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - any failure means: make a new one
        return False


class _Sessions:
    """Hands out the shared session; recreates it when someone else has stopped it."""

    def __init__(self) -> None:
        self.current = None

    def live(self):
        from pyspark.sql import SparkSession

        if self.current is not None and _usable(self.current):
            return self.current
        active = SparkSession.getActiveSession()
        if active is not None and _usable(active) and active.sparkContext.master == SPARK_MASTER:
            self.current = active
        else:
            if active is not None and _usable(active):
                active.stop()  # one SparkContext per JVM: replace a session on another master
            self.current = _new_session()
        return self.current

    def stop(self) -> None:
        if self.current is not None and _usable(self.current):
            self.current.stop()
        self.current = None


class LiveSpark:
    """The ``spark`` fixture's value: behaves as the SparkSession, always a live one.

    Attribute access goes to the shared session, recreated first if another test module
    stopped it, so a session-scoped fixture stays valid for the whole run.
    """

    def __init__(self, sessions: _Sessions) -> None:
        object.__setattr__(self, "_sessions", sessions)

    @property
    def session(self):
        """The live ``SparkSession`` itself."""
        return self._sessions.live()

    def __getattr__(self, name):
        return getattr(self._sessions.live(), name)

    def __repr__(self) -> str:
        return f"LiveSpark({self._sessions.current!r})"


@pytest.fixture(scope="session")
def spark():
    """ONE ``local[4]`` SparkSession for the run (stopped at the end); see ``LiveSpark``."""
    sessions = _Sessions()
    sessions.live()
    yield LiveSpark(sessions)
    sessions.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """A Spark Connect server (``local[4]`` on 127.0.0.1) for the run; see ``connect_support``."""
    from connect_support import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect-server"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def session_client(request, session_kind):
    """The session a ``connect_support.session_kinds`` test runs its scenarios on.

    ``classic``: the ``spark`` fixture's session, in this process; ``connect``: a client
    process of the ``connect_server`` fixture's server. Each fixture is asked for only by the
    kind that needs it, so a test's classic run starts no Connect server.
    """
    from connect_support import ClassicSessionClient, ConnectSessionClient

    if session_kind == "connect":
        return ConnectSessionClient(request.getfixturevalue("connect_server"))
    return ClassicSessionClient(request.getfixturevalue("spark"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """An Apache Kafka broker (KRaft, one node) for the whole run; see ``kafka_support``.
    Every test makes its own topics."""
    import kafka_support

    yield from kafka_support.broker(tmp_path_factory)


@pytest.fixture(scope="session")
def hconf_for():
    """Return ``f(folder) -> conf`` isolating a run's state manager and work folder."""
    def make(folder) -> dict:
        return {"heron.statemgr": f"file://{folder}/state", "heron.work.dir": f"{folder}/work"}
    return make


@pytest.fixture
def hconf(tmp_path, hconf_for) -> dict:
    """Runtime conf isolating one test: its own state manager and work folder."""
    return hconf_for(tmp_path)


@pytest.fixture(scope="session")
def tmaster_placement(pytestconfig) -> str | None:
    """The ``--tmaster-placement`` of this run (None: the product's default)."""
    return _placement(pytestconfig)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path, hconf_for, tmaster_placement):
    """Every test binds to loopback and keeps its state under its own tmp folder.

    Besides ``hconf`` (pass it as ``conf=``), a per-test ``heron_spark.yaml`` named by
    ``HERON_SPARK_CONF_DIR`` points the state manager and work folder into ``tmp_path``, so a
    submit without ``conf`` (or a CLI subprocess) never touches ``/tmp/heron_spark``. It
    also holds ``--tmaster-placement``, if given.
    """
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    conf_dir = tmp_path / "heron_conf"
    conf_dir.mkdir(exist_ok=True)
    keys = hconf_for(tmp_path)
    if tmaster_placement is not None:
        keys["heron.tmaster.placement"] = tmaster_placement
    (conf_dir / "heron_spark.yaml").write_text(
        "".join(f"{key}: '{value}'\n" for key, value in keys.items()))
    monkeypatch.setenv("HERON_SPARK_CONF_DIR", str(conf_dir))
    yield

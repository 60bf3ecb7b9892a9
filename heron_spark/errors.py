"""One error hierarchy for heron_spark.

Every error names what went wrong, where (component / stream / task), the offending value and
the fix. Each class also inherits the matching built-in, so ``except ValueError`` keeps working.
Tests assert the class (or its stable ``code``) and its fields, not the wording.

A refusal crosses processes (a TMaster's control port, the tracker's verbs) as its ``code``
and ``fields()``; ``refusal(code, fields)`` builds the same error again on the other side.
"""

from __future__ import annotations

from typing import Any, ClassVar

_UNSET = object()


class HeronSparkError(Exception):
    """Base class of every error heron_spark raises on purpose.

    ``code`` names the class in a stable form (``TOPOLOGY_STATE``): what crosses processes
    and what tests assert.
    """

    code: ClassVar[str] = "HERON_SPARK"


def _compose(problem: str, component: str | None, value: Any, fix: str | None) -> str:
    where = f"component {component!r}: " if component else ""
    got = "" if value is _UNSET else f" (got {value!r})"
    how = f". Fix: {fix}" if fix else ""
    return f"{where}{problem}{got}{how}"


class TopologyValueError(HeronSparkError, ValueError):
    """A topology is malformed; raised by validation before anything is launched."""

    code: ClassVar[str] = "TOPOLOGY_VALUE"

    def __init__(self, problem: str, *, component: str | None = None, value: Any = _UNSET,
                 fix: str | None = None, kind: str = "invalid") -> None:
        self.problem = problem
        self.component = component
        self.value = None if value is _UNSET else value
        self.fix = fix
        self.kind = kind
        super().__init__(_compose(problem, component, value, fix))

    def fields(self) -> dict[str, Any]:
        """Return the constructor's arguments (what a refusal carries across processes)."""
        return {"problem": self.problem, "component": self.component, "value": self.value,
                "fix": self.fix, "kind": self.kind}


class TopologyTypeError(HeronSparkError, TypeError):
    """An API call got an argument of the wrong type."""

    def __init__(self, problem: str, *, component: str | None = None, value: Any = _UNSET,
                 fix: str | None = None) -> None:
        self.problem = problem
        self.component = component
        self.value = None if value is _UNSET else value
        self.fix = fix
        super().__init__(_compose(problem, component, value, fix))


class ComponentSpecError(TopologyValueError, AssertionError):
    """A ``HeronComponentSpec`` argument heronpy refuses with an ``assert``.

    heronpy's ``HeronComponentSpec`` asserts its name (None or a str), class path (a str),
    ``is_spout`` (a bool) and ``par`` (an int > 0), so code written for heronpy catches
    ``AssertionError``; its ``spec()`` asserts ``optional_outputs`` (a list of field names and
    ``Stream``s). This is also a ``TopologyValueError``, with ``kind`` one of ``name``,
    ``class``, ``is_spout``, ``parallelism`` and ``outputs``.
    """


class ComponentClassError(HeronSparkError, ImportError):
    """A component's class path cannot be imported where its task runs, or names no component.

    ``component`` is the component, ``path`` its ``"package.module.Class"``, ``python`` the
    interpreter that tried (``sys.executable``), ``sys_path`` its ``sys.path``, ``missing``
    the module that did not import (None when the module imported but the class is wrong) and
    ``fix`` what to do.
    """

    def __init__(self, problem: str, *, component: str, path: str, python: str,
                 sys_path: list[str], missing: str | None) -> None:
        if missing:
            fix = (f"make module {missing!r} importable by {python} (install it there, or ship "
                   f"it with spark-submit --py-files / spark.sparkContext.addPyFile), or pass "
                   f"the class itself instead of its path")
        else:
            fix = "name a Spout or Bolt subclass by its dotted path 'package.module.Class'"
        detail = (f"component {component!r}: class path {path!r}: {problem} (Python {python}, "
                  f"sys.path [{', '.join(sys_path)}])")
        super().__init__(f"{detail}. Fix: {fix}", name=missing)
        self.detail = detail  # the message without its fix (a preflight report adds its own)
        self.fix = fix
        self.problem = problem
        self.component = component
        self.path = path  # after ImportError.__init__, which sets its own ``path`` (a file)
        self.python = python
        self.sys_path = list(sys_path)
        self.missing = missing


class ConfigError(HeronSparkError, ValueError):
    """A configuration key has a value heron_spark cannot use."""

    def __init__(self, key: str, value: Any, fix: str) -> None:
        self.key = key
        self.value = value
        self.fix = fix
        super().__init__(f"config {key!r} = {value!r} is invalid. Fix: {fix}")


class ClusterCapacityError(HeronSparkError, RuntimeError):
    """The Spark cluster cannot run one barrier task per container at once."""

    code: ClassVar[str] = "CLUSTER_CAPACITY"

    def __init__(self, needed: int, available: int, master: str) -> None:
        self.needed = needed
        self.available = available
        self.master = master
        super().__init__(
            f"the topology needs {needed} concurrent task slots (one barrier task per container) "
            f"but Spark master {master!r} offers {available}. Fix: lower topology.stmgrs, or give "
            f"Spark more slots (local[N] with N >= {needed}, or more executor cores)")

    def fields(self) -> dict[str, Any]:
        """Return the constructor's arguments (what a refusal carries across processes)."""
        return {"needed": self.needed, "available": self.available, "master": self.master}


class TopologyRuntimeError(HeronSparkError, RuntimeError):
    """User code failed inside a running topology; chained from the user's exception text."""

    def __init__(self, problem: str, *, component: str | None = None, task_id: int | None = None,
                 log_path: str | None = None, detail: str = "", permanent: bool = False) -> None:
        self.problem = problem
        self.permanent = permanent
        self.component = component
        self.task_id = task_id
        self.log_path = log_path
        self.detail = detail
        where = f"component {component!r} task {task_id}: " if component else ""
        log = f" (instance log: {log_path})" if log_path else ""
        tail = f"\n{detail}" if detail else ""
        super().__init__(f"{where}{problem}{log}{tail}")

    @classmethod
    def from_instance_failure(cls, failed, log_path: str | None = None) -> "TopologyRuntimeError":
        """Build the error from a task's failure report.

        The report is an ``InstanceFailed``: its traceback in ``error``, plus ``component``,
        ``task_id`` and, unless given, ``log_path``; ``permanent`` when the task failed on a
        permanent ``ConnectorError`` (the topology failed at once, without restarts).
        """
        lines = failed.error.strip().splitlines()
        return cls(lines[-1] if lines else "instance failed", component=failed.component,
                   task_id=failed.task_id,
                   log_path=failed.log_path if log_path is None else log_path,
                   detail=failed.error, permanent=bool(getattr(failed, "permanent", False)))


class ConnectorError(HeronSparkError, RuntimeError):
    """A connector (Kafka, Delta, ...) cannot use the input or output it is configured with.

    ``system`` names what refused (``"Kafka"``, ``"Delta"``), ``component`` the connector's
    component, ``value`` the offending topic, path, id or columns, ``fix`` what to do.
    ``permanent`` tells a deterministic refusal (a topic or table that does not exist, a schema
    change, a fenced ``transactional.id``), which fails the topology at once instead of being
    retried by restarts until the restart budget runs out (``heron.instance.restart.max``),
    from a transient one (an unreachable broker or object store), which restarts retry.
    """

    code: ClassVar[str] = "CONNECTOR"

    def __init__(self, problem: str, *, system: str, component: str | None = None,
                 value: Any = _UNSET, fix: str | None = None, permanent: bool) -> None:
        self.problem = problem
        self.system = system
        self.component = component
        self.value = None if value is _UNSET else value
        self.fix = fix
        self.permanent = bool(permanent)
        super().__init__(_compose(f"{system}: {problem}", component, value, fix))

    def fields(self) -> dict[str, Any]:
        """Return the constructor's arguments."""
        return {"problem": self.problem, "system": self.system, "component": self.component,
                "value": self.value, "fix": self.fix, "permanent": self.permanent}


def permanent_error(exc: BaseException | None) -> ConnectorError | None:
    """Return the permanent ``ConnectorError`` ``exc`` is, or was caused by (else None).

    Follows ``__cause__`` and ``__context__``, so user code that wraps a connector's
    refusal in its own exception still fails the topology at once.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectorError) and exc.permanent:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


class TopologyStateError(HeronSparkError, RuntimeError):
    """A lifecycle action does not fit the topology's current state."""

    code: ClassVar[str] = "TOPOLOGY_STATE"

    def __init__(self, topology: str, state: str, action: str, fix: str) -> None:
        self.topology = topology
        self.state = state
        self.action = action
        self.fix = fix
        super().__init__(f"topology {topology!r} is {state}: cannot {action}. Fix: {fix}")

    def fields(self) -> dict[str, Any]:
        """Return the constructor's arguments (what a refusal carries across processes)."""
        return {"topology": self.topology, "state": self.state, "action": self.action,
                "fix": self.fix}


class TopologyNotFoundError(HeronSparkError, LookupError):
    """No topology of that name is known to the state manager."""

    code: ClassVar[str] = "TOPOLOGY_NOT_FOUND"

    def __init__(self, topology: str, where: str) -> None:
        self.topology = topology
        super().__init__(f"no topology named {topology!r} in state manager {where}. "
                         f"Fix: check the name with `heron-spark list`")


class DataSourceOptionError(HeronSparkError, ValueError):
    """An option of the ``heron_spark`` Spark data source cannot be used as given."""

    def __init__(self, option: str, value: Any, problem: str, fix: str) -> None:
        self.option = option
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"heron_spark data source option {option!r} = {value!r}: {problem}. "
                         f"Fix: {fix}")


class AuthenticationError(HeronSparkError, ConnectionError):
    """A peer failed to prove it knows the topology's secret."""


class WrongPlaceError(HeronSparkError, RuntimeError):
    """An API was called where it cannot run (driver-only called on an executor, ...)."""


class WorkerEnvironmentError(HeronSparkError, RuntimeError):
    """Spark's executors run a Python that cannot run the topology.

    One of heron_spark, a dependency or the user's modules does not import there. Found before
    anything is launched. ``component`` and ``path`` name the component whose class path does
    not import there (else None); ``fix`` is what to do.
    """

    def __init__(self, problem: str, *, python: str, host: str | None,
                 missing: str | None, connect: bool = False, component: str | None = None,
                 path: str | None = None, fix: str | None = None) -> None:
        self.problem = problem
        self.python = python
        self.host = host
        self.missing = missing
        self.connect = connect
        self.component = component
        self.path = path
        self.fix = fix if fix is not None else _worker_fix(problem, python, missing, connect)
        where = f" on {host}" if host else ""
        super().__init__(f"Spark's executors run Python {python!r}{where}, which cannot run "
                         f"this topology: {problem}. Fix: {self.fix}")


def _worker_fix(problem: str, python: str, missing: str | None, connect: bool) -> str:
    """Return what to do about a WorkerEnvironmentError that names no fix of its own."""
    import sys

    if problem.startswith("loading the topology"):
        ship = ("spark.addArtifacts(path, pyfile=True) from the Spark Connect session"
                if connect else
                "spark-submit --py-files or spark.sparkContext.addPyFile(path)")
        return (f"make module {missing or '(see above)'!r} importable on the executors: ship "
                f"it with {ship}, or install it into {python}")
    if connect:
        return (f"the Spark Connect server's executors need a Python that has heron_spark "
                f"installed: start the server with spark.pyspark.python (or PYSPARK_PYTHON "
                f"in its environment) naming one, or install heron_spark and its "
                f"dependencies into {python} on every worker, or ship heron_spark with "
                f"spark.addArtifacts(zip_path, pyfile=True)")
    return (f"run the executors with a Python that has heron_spark installed: set "
            f"PYSPARK_PYTHON={sys.executable} (or spark.pyspark.python) before the "
            f"SparkSession starts, or install heron_spark and its dependencies into "
            f"{python} on every worker")


class ConnectExtrasError(HeronSparkError, ImportError):
    """A Spark Connect session is asked for, but this Python lacks the Connect client's packages."""

    def __init__(self, missing: str | None, problem: str) -> None:
        self.missing = missing
        self.problem = problem
        what = f"package {missing!r}" if missing else "a package"
        super().__init__(f"a Spark Connect session needs {what} this Python does not have "
                         f"({problem}). Fix: pip install 'pyspark[connect]'", name=missing)


class ExtrasError(HeronSparkError, ImportError):
    """A connector or a state backend needs an optional package this Python does not have.

    The package comes with an install extra (``heron_spark[kafka]``, ``heron_spark[rocksdb]``).
    """

    def __init__(self, package: str, extra: str, *, component: str | None = None,
                 what: str = "this connector") -> None:
        self.package = package
        self.extra = extra
        self.component = component
        where = f"component {component!r}: " if component else ""
        super().__init__(f"{where}{what} needs the package {package!r}, which is not "
                         f"installed. Fix: pip install 'heron_spark[{extra}]'", name=package)


class DuplicateMetricError(HeronSparkError, RuntimeError):
    """A task registered a second metric under a name it already uses.

    Heron refuses it too: the published values of the two would be indistinguishable.
    """

    def __init__(self, name: str, *, component: str, task_id: int) -> None:
        self.name = name
        self.component = component
        self.task_id = task_id
        super().__init__(f"component {component!r} task {task_id}: a metric named {name!r} is "
                         f"already registered. Fix: register each metric once, under its own "
                         f"name")


class TrackerRequestError(HeronSparkError, ValueError):
    """A tracker HTTP request cannot be answered.

    A bad parameter (400), an unknown topology, component or file (404), a topology with no
    live TMaster (503), ...

    ``status`` is the HTTP status the tracker answers with; ``param`` the query parameter at
    fault (or None).
    """

    def __init__(self, status: int, problem: str, *, param: str | None = None,
                 value: Any = _UNSET, fix: str | None = None) -> None:
        self.status = status
        self.param = param
        self.value = None if value is _UNSET else value
        self.fix = fix
        where = f"parameter {param!r}: " if param else ""
        got = "" if value is _UNSET else f" (got {value!r})"
        how = f". Fix: {fix}" if fix else ""
        super().__init__(f"{where}{problem}{got}{how}")


class MetricsQueryError(HeronSparkError, ValueError):
    """A metrics view or query names something malformed or unknown.

    A metrics view or query (the tracker's ``/topologies/metrics*`` and exceptions views) names
    something malformed or unknown: a bad token, component, instance or time range.
    """

    def __init__(self, problem: str, *, query: str = "", token: str = "", position: int = 0,
                 fix: str = "") -> None:
        self.problem = problem
        self.query = query
        self.token = token
        self.position = position
        self.fix = fix
        where = f" at {position} ({token!r}) in {query!r}" if query else \
            (f" ({token!r})" if token else "")
        super().__init__(f"{problem}{where}. Fix: {fix}" if fix else f"{problem}{where}")


# The refusals a TMaster answers a control request with, by code: the client raises the same.
REFUSALS: dict[str, type[TopologyStateError] | type[TopologyValueError]
               | type[ClusterCapacityError]] = {
    cls.code: cls for cls in (TopologyStateError, TopologyValueError, ClusterCapacityError)}


def refusal(code: str, fields: dict[str, Any]) -> HeronSparkError:
    """Build the refusal ``code`` with its ``fields`` again (an unknown code: TopologyStateError).

    ``fields`` is what the refusing side's ``fields()`` returned; missing ones stay empty.
    """
    cls = REFUSALS.get(code)
    if cls is TopologyValueError:
        value = fields.get("value", _UNSET)
        return TopologyValueError(str(fields.get("problem") or ""),
                                  component=fields.get("component"),
                                  value=_UNSET if value is None else value,
                                  fix=fields.get("fix"), kind=str(fields.get("kind") or "invalid"))
    if cls is ClusterCapacityError:
        return ClusterCapacityError(int(fields.get("needed") or 0),
                                    int(fields.get("available") or 0),
                                    str(fields.get("master") or ""))
    return TopologyStateError(str(fields.get("topology") or ""), str(fields.get("state") or ""),
                              str(fields.get("action") or "do that"), str(fields.get("fix") or ""))

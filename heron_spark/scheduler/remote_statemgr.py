"""A state manager the submitter reaches through one-task Spark jobs (Spark Connect).

Under Spark Connect with the TMaster in container 0, the client may reach nothing but the
Connect endpoint: a ZooKeeper or a folder the executors share is out of its reach.
``RemoteStateManager`` then stands for the state manager on the submitting side: each request
is a one-task job (``spark.range(1, numPartitions=1).mapInArrow(RunOnExecutor(...))``) that
opens the real state manager on an executor (``open_state_manager(url)``), runs a batch of
calls on it and brings back their results as one row.

A call is ``(target, args, kwargs)``: ``target`` names a ``StateManager`` method, or is a
module-level function called as ``target(statemgr, *args, **kwargs)``, so a caller runs a
whole step (several reads and writes) in one job with ``run_on``. The primitives (``put``,
``get``, ``keys``, ``delete``, ...) are one job each, so the typed helpers of ``StateManager``
work unchanged on top of them. An exception raised on the executor comes back as the same
class, args and attributes (``RemoteStateError`` if the class is not importable here). A
TMaster claim needs a live holder, so ``claim_tmaster`` is refused here.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import time
from typing import Any, Callable, Iterator
from urllib.parse import urlparse, urlunparse

from heron_spark import _pickling
from heron_spark.errors import HeronSparkError, TopologyStateError
from heron_spark.scheduler.session import run_one_task
from heron_spark.statemgr.base import StateManager

log = logging.getLogger(__name__)
_TIMEOUT_SECS = 120.0
_SCHEMA = "answer binary"

Call = tuple[Any, tuple, dict]


class RemoteStateError(HeronSparkError):
    """An executor-side state manager error whose exception could not travel back as is."""


def encode_request(url: str, calls: list[Call]) -> bytes:
    """Return the request bytes of ``calls`` on the state manager at ``url``."""
    return _pickling.dumps((url, list(calls)))


def execute(request: bytes, statemgr: StateManager | None = None) -> bytes:
    """Run a request (on an executor); return the response bytes.

    Opens the state manager the request names unless ``statemgr`` is given. The response
    holds every result, or the first exception (later calls do not run).
    """
    url, calls = _pickling.loads(request)
    results: list = []
    try:
        if statemgr is None:
            from heron_spark.statemgr import open_state_manager

            with open_state_manager(url) as opened:
                results = _run_calls(opened, calls)
        else:
            results = _run_calls(statemgr, calls)
    except Exception as exc:  # noqa: BLE001 - it goes back to the caller, who raises it
        return _encode_error(exc)
    return pickle.dumps(("ok", results), protocol=pickle.HIGHEST_PROTOCOL)


def _run_calls(statemgr: StateManager, calls: list[Call]) -> list:
    results = []
    for target, args, kwargs in calls:
        func = getattr(statemgr, target) if isinstance(target, str) \
            else (lambda *a, _f=target, **k: _f(statemgr, *a, **k))
        results.append(func(*args, **kwargs))
    return results


def _encode_error(exc: Exception) -> bytes:
    """Encode ``exc`` as its class's path, its args and attributes (custom ``__init__`` too)."""
    kind = (type(exc).__module__, type(exc).__qualname__)
    described = f"{kind[0]}.{kind[1]}: {exc}"
    try:
        state = pickle.dumps((exc.args, dict(vars(exc))), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - attributes that cannot travel: the text still does
        state = pickle.dumps(((str(exc),), {}), protocol=pickle.HIGHEST_PROTOCOL)
    return pickle.dumps(("error", kind, state, described), protocol=pickle.HIGHEST_PROTOCOL)


def decode_response(response: bytes) -> list:
    """Return the results of a response; raise the executor's exception if it holds one."""
    decoded = pickle.loads(response)
    if decoded[0] == "ok":
        return decoded[1]
    _, (module, qualname), state, described = decoded
    error = _rebuild(module, qualname, state)
    if error is None:
        msg = f"the state manager failed on the executor: {described}"
        raise RemoteStateError(msg)
    raise error


def _rebuild(module: str, qualname: str, state: bytes) -> BaseException | None:
    """Return the exception of class ``module.qualname`` with its args and attributes."""
    import importlib

    try:
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            return None
        args, attributes = pickle.loads(state)
        error = cls.__new__(cls)
        error.args = args
        error.__dict__.update(attributes)
    except Exception:  # noqa: BLE001 - not importable or not rebuildable here
        return None
    return error


@dataclasses.dataclass
class RunOnExecutor:
    """The ``mapInArrow`` function of a state-manager job: run the request, yield one row."""

    request: bytes

    def __call__(self, batches: Iterator) -> Iterator:
        """Run the request once; yield its response."""
        import pyarrow as pa

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"answer": [execute(self.request)]},
                                         schema=pa.schema([("answer", pa.binary())]))


def _public(url: str) -> str:
    """Return ``url`` without a password."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    netloc = f"{parsed.username}@{parsed.netloc.rpartition('@')[2]}"
    return urlunparse(parsed._replace(netloc=netloc))


class RemoteStateManager(StateManager):
    """The state manager at ``url``, used through one-task Spark jobs (module docstring)."""

    def __init__(self, spark, url: str,
                 runner: Callable[[bytes], bytes] | None = None) -> None:
        self.spark = spark
        self.url = url
        self._runner = runner or self._through_spark
        self.jobs = 0  # how many requests ran (one Spark job each)
        self.job_secs = 0.0  # and how long they took together
        self.tag = "heron_spark-statemgr"

    # ---- requests ------------------------------------------------------------------------
    def batch(self, calls: list[Call]) -> list:
        """Run ``calls`` in order in one job; return their results."""
        self.jobs += 1
        started = time.perf_counter()
        try:
            response = self._runner(encode_request(self.url, calls))
        finally:
            self.job_secs += time.perf_counter() - started
        return decode_response(response)

    def call(self, target: str | Callable, *args, **kwargs) -> Any:
        """Run one call (a method name, or ``target(statemgr, ...)``) in one job."""
        return self.batch([(target, args, kwargs)])[0]

    def _through_spark(self, request: bytes) -> bytes:
        rows = run_one_task(self.spark, RunOnExecutor(request), _SCHEMA, self.tag, _TIMEOUT_SECS)
        if not rows:
            msg = f"the state manager job on {self.location} returned no row"
            raise RemoteStateError(msg)
        return bytes(rows[0]["answer"])

    # ---- StateManager ----------------------------------------------------------------------
    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        """Store ``value`` under ``topology/key`` (one job)."""
        self.call("put", topology, key, value, private=private)

    def get(self, topology: str, key: str) -> bytes | None:
        """Return the bytes under ``topology/key``, or None (one job)."""
        return self.call("get", topology, key)

    def keys(self, topology: str) -> list[str]:
        """Return the keys stored for ``topology``, sorted (one job)."""
        return self.call("keys", topology)

    def delete(self, topology: str, key: str) -> None:
        """Forget ``topology/key`` (one job)."""
        self.call("delete", topology, key)

    def delete_topology(self, topology: str) -> None:
        """Forget everything stored for ``topology`` (one job)."""
        self.call("delete_topology", topology)

    def topologies(self) -> list[str]:
        """Return the names of the stored topologies (one job)."""
        return self.call("topologies")

    @property
    def location(self) -> str:
        """The state manager's URL (without a password), reached through Spark."""
        return f"{_public(self.url)} (through Spark)"

    def claim_tmaster(self, topology: str, location: dict) -> None:
        """Refuse: a claim needs a holder that lives on, and a job's state manager does not."""
        raise TopologyStateError(topology, "UNKNOWN", "claim its TMaster through Spark",
                                 "the TMaster in container 0 claims its own location")

    def release_tmaster(self, topology: str) -> None:
        """Do nothing: this object never holds a claim."""


def run_on(statemgr: StateManager, func: Callable, *args, **kwargs) -> Any:
    """Return ``func(statemgr, *args, **kwargs)``: in one Spark job for a remote one."""
    if isinstance(statemgr, RemoteStateManager):
        return statemgr.call(func, *args, **kwargs)
    return func(statemgr, *args, **kwargs)

"""Test kit: test your topologies the way heron_spark tests its own.

- ``ScriptedSpout``: emits a fixed script of tuples, with ``Pause``, ``Raise`` and ``END`` markers;
  event time with ``Stamped`` tuples and explicit ``Watermark`` markers.
- ``CollectingBolt``: records every tuple it receives (with its own task id) to a folder.
- ``run_local``: run a topology to its end, in this process (no Spark) or on ``local[N]``, and
  return what the collectors saw.
- ``wait_until``: poll a condition of a running topology (or any process) with a deadline.

Collected files live on the machine that ran the task, so ``read_collected`` works for local
and single-machine clusters (and shared filesystems).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from heron_spark.api.bolt import Bolt
from heron_spark.api.component import HeronComponentSpec
from heron_spark.api.spout import Spout
from heron_spark.api.stream import Stream
from heron_spark.errors import TopologyValueError

COLLECT_DIR = "testing.collect.dir"
SCRIPT = "testing.script"
SCRIPT_STREAM = "testing.stream"
SCRIPTS = "testing.scripts"
_FLUSH_SECS = 1.0

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Pause:
    """Script marker: stop emitting for ``seconds``."""

    seconds: float


@dataclasses.dataclass(frozen=True)
class Raise:
    """Script marker: raise ``RuntimeError(message)`` from ``next_tuple`` (a crashing spout)."""

    message: str


@dataclasses.dataclass(frozen=True)
class Stamped:
    """Script item: emit ``values`` with event time ``timestamp`` (ms), from ``partition``."""

    values: tuple
    timestamp: int
    partition: Any = None


@dataclasses.dataclass(frozen=True)
class Watermark:
    """Script marker: advance the task's watermark to ``timestamp`` (ms) explicitly."""

    timestamp: int


END = "__heron_spark_end__"
"""Script marker: declare the spout exhausted here (implied at the end of the script)."""


class ScriptedSpout(Spout):
    """Emits ``testing.script`` items round-robin over its tasks: item i goes to task i % par.

    With ``scripts`` (one list per task) each task emits its own instead.
    """

    outputs: list = []

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, inputs=None, config: dict | None = None,
             optional_outputs=None, *, script: Iterable = (), fields: Iterable[str] = ("value",),
             stream: str = Stream.DEFAULT_STREAM_ID,
             scripts: Iterable[Iterable] | None = None) -> HeronComponentSpec:
        """Return a spec emitting ``script`` (or task i: ``scripts[i]``) on ``stream``."""
        config = {**(config or {}), SCRIPT: list(script), SCRIPT_STREAM: stream}
        if scripts is not None:
            per_task = [list(items) for items in scripts]
            if len(per_task) != par:
                msg = "ScriptedSpout takes one script per task"
                raise TopologyValueError(msg, component=name, value=len(per_task),
                                         fix=f"pass {par} scripts (par={par})")
            config[SCRIPTS] = per_task
        outputs = [Stream(list(fields), name=stream), *(optional_outputs or [])]
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=outputs)

    def initialize(self, config: dict, context: Any) -> None:
        """Take this task's share of ``testing.script``: item i when i % parallelism is its index."""
        par = context.get_component_parallelism(context.get_component_id())
        index = context.get_task_index()
        scripts = config.get(SCRIPTS)
        self._items = list(scripts[index]) if scripts is not None else \
            [item for i, item in enumerate(config.get(SCRIPT, [])) if i % par == index]
        self._stream = config.get(SCRIPT_STREAM, Stream.DEFAULT_STREAM_ID)
        self._position = 0
        self._resume_at = 0.0

    def next_tuple(self) -> None:
        """Emit the next script item, or act on its marker (``Pause``, ``Raise``, ``END``)."""
        if time.monotonic() < self._resume_at:
            return
        if self._position >= len(self._items):
            self.declare_exhausted()
            return
        item = self._items[self._position]
        self._position += 1
        if isinstance(item, Pause):
            self._resume_at = time.monotonic() + item.seconds
        elif isinstance(item, Raise):
            raise RuntimeError(item.message)
        elif isinstance(item, str) and item == END:
            self._position = len(self._items)
            self.declare_exhausted()
        elif isinstance(item, Stamped):
            self.emit(list(item.values), stream=self._stream, timestamp=item.timestamp,
                      partition=item.partition)
        elif isinstance(item, Watermark):
            self.advance_watermark(item.timestamp)
        else:
            self.emit(list(item), stream=self._stream)


@dataclasses.dataclass(frozen=True)
class Collected:
    """One tuple a ``CollectingBolt`` received."""

    task: int           # the collecting task
    component: str      # source component
    stream: str
    source_task: int
    values: tuple
    timestamp: int | None = None  # the tuple's event time (ms), if it had one
    watermark: int | None = None  # the collecting task's input watermark when it arrived


class CollectingBolt(Bolt):
    """Records every input tuple to ``<testing.collect.dir>/<component>-<task>.pkl``."""

    def initialize(self, config: dict, context: Any) -> None:
        """Start this task's file in ``testing.collect.dir`` afresh (a ``ValueError`` without it)."""
        folder = config.get(COLLECT_DIR)
        if not folder:
            msg = f"CollectingBolt needs config {COLLECT_DIR!r} (a folder)"
            raise ValueError(msg)
        self._path = Path(folder) / f"{context.get_component_id()}-{context.get_task_id()}.pkl"
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.unlink(missing_ok=True)
        self._task = context.get_task_id()
        self._context = context
        self._buffer: list[Collected] = []
        self._last_flush = time.monotonic()

    def process(self, tup) -> None:
        """Record ``tup``; records are written when a second has passed since the last write."""
        self._buffer.append(Collected(self._task, tup.component, tup.stream, tup.task,
                                      tuple(tup.values), getattr(tup, "timestamp", None),
                                      self._context.get_current_watermark()))
        if time.monotonic() - self._last_flush > _FLUSH_SECS:
            self._flush()

    def process_tick(self, tup) -> None:
        """Write the records so far to the file."""
        self._flush()

    def end_of_input(self) -> None:
        """Write the last records to the file: the input ended."""
        self._flush()

    def _flush(self) -> None:
        if self._buffer:
            with open(self._path, "ab") as handle:
                pickle.dump(self._buffer, handle, protocol=pickle.HIGHEST_PROTOCOL)
            self._buffer = []
        self._last_flush = time.monotonic()


def read_collected(folder: str | os.PathLike, component: str | None = None) -> list[Collected]:
    """Return every tuple the collectors (of ``component``, or all) wrote to ``folder``."""
    out: list[Collected] = []
    for path in sorted(Path(folder).glob("*.pkl")):
        if component is not None and not path.name.startswith(f"{component}-"):
            continue
        with open(path, "rb") as handle:
            while True:
                try:
                    out.extend(pickle.load(handle))
                except EOFError:
                    break
    return out


@dataclasses.dataclass
class LocalRun:
    """What ``run_local`` returns."""

    handle: Any
    status: str
    collect_dir: Path

    def collected(self, component: str | None = None) -> list[Collected]:
        """Return the tuples received by the collecting bolts (``component`` only, if given)."""
        return read_collected(self.collect_dir, component)


def run_local(topology, *, conf: dict | None = None, timeout: float = 180.0,
              collect_dir: str | os.PathLike | None = None, spark=None,
              engine: str | None = None) -> LocalRun:
    """Run ``topology`` to its end; return its status and what the collecting bolts saw.

    ``engine="in-process"`` (the default without ``spark``) runs every stmgr and task core on
    this thread, without Spark or processes (``heron_spark.inprocess``): the same routing,
    batching, acking, backpressure and end-of-input code, in a fraction of a second.
    ``engine="spark"`` (the default with ``spark``) submits on ``local[N]`` (N = its
    containers, at least 2) or on the given session: real processes, as in production.
    Raises ``TopologyRuntimeError`` when the topology fails, ``TimeoutError`` after
    ``timeout`` seconds.
    """
    from heron_spark.api import api_constants

    engine = engine or ("spark" if spark is not None else "in-process")
    if engine not in ("in-process", "spark"):
        msg = "run_local() runs a topology in this process or on Spark"
        raise TopologyValueError(msg, value=engine, fix="pass engine='in-process' or engine='spark'")
    folder = Path(collect_dir or tempfile.mkdtemp(prefix="heron_spark_collect_"))
    config = {COLLECT_DIR: str(folder), **(conf or {})}
    if engine == "in-process":
        from heron_spark.inprocess import InProcessTopology

        runner = InProcessTopology(topology, conf=config)
        status = runner.run(timeout=timeout)
        return LocalRun(runner, status, folder)
    containers = int(config.get(api_constants.TOPOLOGY_STMGRS, 0) or 0) or \
        int(getattr(topology, "_topo_config", {}).get(api_constants.TOPOLOGY_STMGRS, 1))
    from heron_spark.scheduler.submit import submit

    handle = submit(topology, spark=spark, conf=config, master=f"local[{max(2, containers)}]")
    status = handle.wait(timeout=timeout)
    return LocalRun(handle, status, folder)


class ManualClock:
    """A clock that moves only when told, to test timeouts, TTLs and timers without waiting.

    Pass it where a component takes ``clock`` (and its ``sleep`` where one takes ``sleep``).
    ``now`` is the time it reads, in seconds; ``sleep(secs)`` moves it forward at once.
    """

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        """Return the time, ``now``."""
        return self.now

    def sleep(self, secs: float) -> None:
        """Move the clock ``secs`` seconds forward."""
        self.now += secs


def wait_until(predicate: Callable[[], T], timeout: float, *, interval: float = 0.05,
               message: str | Callable[[], str] = "the condition") -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value; return it.

    The predicate is called at least once, and once more at or after the deadline. After
    ``timeout`` seconds without a truthy value, raises ``AssertionError`` naming ``message``
    (a string, or a function called then, to describe the state at that moment) and the
    predicate's last value. An exception from the predicate propagates at once (use it to
    stop early, e.g. when the process being waited on has died).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message() if callable(message) else message
            msg = f"timed out after {timeout:g} s waiting for {what} (last value: {value!r})"
            raise AssertionError(msg)
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))

"""Topologies for the management tests (deactivate / activate / restart / update).

- ``ActivationSpout``: emits ``(task, seq)`` with message id ``seq`` (at-least-once), one
  tuple per millisecond at most, and appends to ``<out>/spout-<task>-<pid>.log`` (unbuffered,
  before returning): ``initialize``, ``activate <emitted>``, ``deactivate <emitted>``, ``ack``
  per acked tuple, and ``next_tuple-while-inactive`` if ``next_tuple`` is ever called while it
  is not active (before the first ``activate()`` or after ``deactivate()``).
- ``SinkBolt``: acks everything.
- ``RoutingCountBolt``: the reliable word count's recording count bolt that also appends
  ``word`` to ``<out>/route-p<count tasks>-t<task>-<pid>.log``: which task of which
  parallelism saw which word (fields grouping checks across an update).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import reliable_word_count as rwc
from heron_spark import Bolt, Grouping, Spout, Stream, TopologyBuilder

OUT = rwc.OUT


def _append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


class ActivationSpout(Spout):
    """See the module docstring."""

    outputs = [Stream(fields=["task", "seq"])]

    def initialize(self, config, context):
        folder = Path(config[OUT])
        folder.mkdir(parents=True, exist_ok=True)
        self._task = context.get_task_id()
        self._log = _append(folder / f"spout-{self._task}-{os.getpid()}.log")
        self._active = False
        self._emitted = 0
        self._last = 0.0
        self._write("initialize")

    def _write(self, line: str) -> None:
        os.write(self._log, f"{line}\n".encode())

    def activate(self):
        self._active = True
        self._write(f"activate {self._emitted}")

    def deactivate(self):
        self._active = False
        self._write(f"deactivate {self._emitted}")

    def next_tuple(self):
        if not self._active:
            self._write("next_tuple-while-inactive")
            return
        now = time.monotonic()
        if now - self._last < 0.001:
            return
        self._last = now
        self._emitted += 1
        self.emit([self._task, self._emitted], tup_id=self._emitted)

    def ack(self, tup_id):
        self._write("ack")


class SinkBolt(Bolt):
    """Acks every tuple."""

    def process(self, tup):
        self.ack(tup)


def build_activation(name: str, out: Path, *, spouts: int = 2, containers: int = 2):
    """Return the activation test topology: ``numbers`` spouts into ``sink`` bolts."""
    return activation_builder(name, out, spouts=spouts, containers=containers).build()


def activation_builder(name: str, out: Path, *, spouts: int = 2,
                       containers: int = 2) -> TopologyBuilder:
    """Return the builder of ``build_activation``'s topology."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("numbers", ActivationSpout, par=spouts, config={OUT: str(out)})
    builder.add_bolt("sink", SinkBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.stmgrs": containers, "topology.max.spout.pending": 200})
    return builder


def read_spout_logs(out: Path) -> dict[int, list[str]]:
    """Return every spout task's log lines (all its processes), by task id."""
    logs: dict[int, list[str]] = {}
    for path in sorted(out.glob("spout-*.log")):
        task = int(path.name.split("-")[1])
        logs.setdefault(task, []).extend(path.read_text().splitlines())
    return logs


class RoutingCountBolt(rwc.RecordingCountBolt):
    """See the module docstring."""

    def initialize(self, config, context):
        super().initialize(config, context)
        tasks = context.get_component_tasks(context.get_component_id())
        name = f"route-p{len(tasks)}-t{context.get_task_id()}-{os.getpid()}.log"
        self._route = _append(Path(config[OUT]) / name)

    def process(self, tup):
        os.write(self._route, f"{tup.values[0]}\n".encode())
        super().process(tup)


def build_word_count(name: str, corpus: Path, out: Path, **kwargs):
    """The reliable word count with ``RoutingCountBolt`` as its ``count`` bolt."""
    return rwc.build(name, corpus, out, count_bolt=RoutingCountBolt, **kwargs)


def read_routes(out: Path) -> dict[int, dict[str, set[int]]]:
    """Return {count parallelism: {word: tasks that counted it}}."""
    routes: dict[int, dict[str, set[int]]] = {}
    for path in out.glob("route-*.log"):
        _, par, task, _ = path.name.split("-")
        words = routes.setdefault(int(par[1:]), {})
        for word in path.read_text().splitlines():
            words.setdefault(word, set()).add(int(task[1:]))
    return routes

"""The topology the state view's browser test watches: an effectively-once stateful count of
``KEYS`` keys that counts ``TUPLES`` tuples, then idles without ending (it stays RUNNING, its
checkpoints go on, and each task's state no longer changes).

``Keys`` (1 task) emits ``key-{i % KEYS}``, its position in its state; ``Count`` (2 tasks,
fields grouping) counts in its state and, at each ``pre_save``, writes how many keys it has
seen (a set of its own, apart from the state) to ``<dir>/seen-<task>.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api.state import StatefulComponent

KEYS = 40
TUPLES = 400
DIR_KEY = "test.ui.dir"
IDLE_SECS = 0.05


class Keys(Spout, StatefulComponent):
    outputs = ["key"]

    def init_state(self, state):
        self.state = state

    def pre_save(self, checkpoint_id):
        self.state.put("next", self.next)

    def initialize(self, config, context):
        self.next = self.state.get("next") or 0

    def next_tuple(self):
        if self.next < TUPLES:
            self.emit([f"key-{self.next % KEYS}"])
            self.next += 1
        else:
            time.sleep(IDLE_SECS)


class Count(Bolt, StatefulComponent):
    def init_state(self, state):
        self.counts = state

    def initialize(self, config, context):
        self.seen = set()
        self.path = Path(config[DIR_KEY]) / f"seen-{context.get_task_id()}.json"

    def process(self, tup):
        key = tup.values[0]
        self.seen.add(key)
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

    def pre_save(self, checkpoint_id):
        temp = self.path.with_suffix(".tmp")
        temp.write_text(json.dumps(len(self.seen)))
        os.replace(temp, self.path)


def topology(name: str, folder: Path):
    builder = TopologyBuilder(name)
    keys = builder.add_spout("keys", Keys, par=1)
    builder.add_bolt("count", Count, par=2, inputs={keys: Grouping.fields("key")})
    builder.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 1,
                        DIR_KEY: str(folder)})
    return builder

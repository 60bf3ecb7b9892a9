"""A stateful word count whose checkpointed state is read back with ``option("state", ...)``.

``words`` (a ``StatefulComponent`` spout: its offset into the corpus's words is its state,
key ``offset``) emits every word of the corpus once, then idles without ending, so
checkpoints go on committing after the last word; ``count`` (``stateful_word_count``'s
``StatefulCountBolt``, fields-grouped by word) keeps each word's count in its state. Effectively
once, one of the two state backends. ``run_and_read`` submits it, waits until the committed
checkpoint holds every word (read with ``statemgr.state_reader``, not through Spark), kills it
and reads both components' state through ``spark.read.format("heron_spark")``: the caller
compares those rows with ``expected_counts`` of the corpus; reads while it runs check that a
checkpoint read is consistent (``read_consistent``). Used by ``test_session_parity.py``
on a classic session and from a Spark Connect client (``connect_client.py state``).
"""

from __future__ import annotations

import collections
import time
from pathlib import Path

import stateful_word_count as swc

from heron_spark import Grouping, Spout, TopologyBuilder
from heron_spark.api.state import StatefulComponent

CORPUS = "test.corpus"
COUNT = "count"
PER_CALL = 64
PAUSE_SECS = 0.05  # between two calls' words: the input spans several checkpoints


class CorpusWordSpout(Spout, StatefulComponent):
    """Emit the corpus's words from the offset in its state, ``PER_CALL`` a call; then idle."""

    outputs = ["word"]

    def init_state(self, stateful_state):
        self.state = stateful_state

    def initialize(self, config, context):
        self.words = Path(config[CORPUS]).read_text().split()

    def next_tuple(self):
        offset = self.state.get("offset") or 0
        batch = self.words[offset:offset + PER_CALL]
        if batch:
            time.sleep(PAUSE_SECS)
        for word in batch:
            self.emit([word])
        if batch:
            self.state.put("offset", offset + len(batch))


def build(name: str, corpus: Path, out: Path, backend: str, counts: int = 2):
    """Return the topology: ``words`` -> ``count`` (fields grouping), effectively once."""
    builder = TopologyBuilder(name)
    words = builder.add_spout("words", CorpusWordSpout, par=1, config={CORPUS: str(corpus)})
    builder.add_bolt(COUNT, swc.StatefulCountBolt, par=counts,
                     inputs={words: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.5,
                        "heron.state.backend": backend, swc.OUT: str(out)})
    return builder.build()


def committed_total(statemgr_url: str, name: str, component: str = COUNT) -> int:
    """Return the sum of the values ``component`` saved in the committed checkpoint (0: none)."""
    from heron_spark.statemgr import open_state_manager
    from heron_spark.statemgr.checkpoints import CheckpointStore
    from heron_spark.statemgr.state_reader import read_task_state, saved_tasks

    with open_state_manager(statemgr_url) as statemgr:
        record = statemgr.get_committed_checkpoint(name)
        packing = statemgr.get_packing_plan(name)
    if not record or packing is None:
        return 0
    tasks = {inst.task_id for container in packing.containers
             for inst in container.instances if inst.component == component}
    store = CheckpointStore(record["root"], name)
    saved = saved_tasks(store, record["id"])
    try:
        return sum(value for task in tasks if task in saved
                   for _, value in read_task_state(store, record["id"], task, saved[task]))
    except (OSError, ValueError):  # a newer commit deleted it meanwhile: ask again
        return -1


def read_state(spark, name: str, statemgr: str, component: str, state: str = "latest"):
    """Return the DataFrame of ``component``'s state (the call under test)."""
    return (spark.read.format("heron_spark").option("topology", name)
            .option("component", component).option("state", state)
            .option("heron.statemgr", statemgr).load())


def read_consistent(spark, name: str, statemgr: str) -> list[int]:
    """Read ``count``'s latest state, then ``words``' in the same checkpoint, while it runs.

    Returns ``[checkpoint id, the sum of the counts, the spout's offset]``: in one consistent
    checkpoint every word the spout emitted before it is counted before it, so the two agree.
    The first read holds its checkpoint (``stateHoldSecs``), so newer commits do not delete
    it before the second.
    """
    rows = read_state(spark, name, statemgr, COUNT).select("value", "checkpoint_id").collect()
    [checkpoint] = {row["checkpoint_id"] for row in rows}
    [offset] = [int(row["value"]) for row in
                read_state(spark, name, statemgr, "words", str(checkpoint)).collect()]
    return [checkpoint, sum(int(row["value"]) for row in rows), offset]


def run_and_read(spark, folder: Path, name: str, backend: str, lines: int,
                 timeout: float) -> dict:
    """Run the topology until its committed state holds every word, kill it, read its state.

    While it runs, three ``read_consistent`` reads (``running``). Returns the rows of
    ``count`` and of ``words``, the result of a SQL aggregate over the
    state, the committed checkpoint id, the count tasks, the expected counts, and the errors
    of the bad reads (their messages).
    """
    from heron_spark import register_data_source, submit
    from heron_spark.statemgr import open_state_manager
    from heron_spark.testing import wait_until

    register_data_source(spark)
    corpus, out = folder / "corpus.txt", folder / "out"
    expected = swc.expected_counts(swc.write_corpus(corpus, lines))
    conf = {"heron.statemgr": f"file://{folder}/state", "heron.work.dir": f"{folder}/work",
            **swc.SHORT_QUEUES}
    handle = submit(build(name, corpus, out, backend), spark=spark, conf=conf)
    try:
        assert handle.wait_running(timeout=120), handle.status
        total = sum(expected.values())
        wait_until(lambda: committed_total(conf["heron.statemgr"], name) > 0, timeout,
                   message="a committed checkpoint holding some words")
        running = [read_consistent(spark, name, conf["heron.statemgr"]) for _ in range(3)]
        wait_until(lambda: committed_total(conf["heron.statemgr"], name) == total, timeout,
                   message=lambda: f"a committed checkpoint holding all {total} words")
    finally:
        handle.kill()
    state = handle.wait(timeout=120)
    with open_state_manager(conf["heron.statemgr"]) as statemgr:
        committed = statemgr.get_committed_checkpoint(name)["id"]
        packing = statemgr.get_packing_plan(name)
    count_tasks = sorted(inst.task_id for container in packing.containers
                         for inst in container.instances if inst.component == COUNT)
    counts = read_state(spark, name, conf["heron.statemgr"], COUNT)
    rows = [list(row) for row in counts.select("key", "value", "task", "key_group",
                                               "checkpoint_id").collect()]
    counts.createOrReplaceTempView("word_counts")
    [sql] = spark.sql("SELECT count(*) AS keys, sum(CAST(value AS BIGINT)) AS total, "
                      "count(DISTINCT task) AS tasks FROM word_counts").collect()
    spout = [list(row) for row in read_state(spark, name, conf["heron.statemgr"], "words",
                                             str(committed)).collect()]
    errors = {}
    for what, component, wanted in (("component", "nope", "latest"),
                                    ("checkpoint", COUNT, str(committed + 1000)),
                                    ("topology", COUNT, "latest")):
        try:
            topology = "no-such-topology" if what == "topology" else name
            read_state(spark, topology, conf["heron.statemgr"], component, wanted).collect()
            errors[what] = None
        except Exception as exc:  # noqa: BLE001 - Spark wraps the source's error
            errors[what] = str(exc)
    return {"state": state, "rows": rows, "running": running,
            "sql": [sql["keys"], sql["total"], sql["tasks"]],
            "spout": spout, "committed": committed, "count_tasks": count_tasks,
            "expected": dict(expected), "errors": errors,
            "columns": counts.columns, "connect": type(spark).__module__}


def counts_of(rows: list[list]) -> collections.Counter:
    """Return ``{word: count}`` of the ``count`` component's rows (``value`` is JSON text)."""
    return collections.Counter({key: int(value) for key, value, *_ in rows})

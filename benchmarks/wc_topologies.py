"""The word-count benchmark's topologies and corpus (run by ``benchmarks/word_count.py``).

Tuple API (``build``, at most once, at least once or effectively once) in two styles:

- ``plain`` (the default): ``SentenceSpout`` -> ``WordSplitBolt`` -> ``WordCountBolt``, written
  the way the README and heronpy teach, in the burst shape of a spout that reads files, Kafka
  or sockets: each ``next_tuple`` emits the next 32 lines of the task's share, as
  ``[line, ts]`` (at least once with ``tup_id=`` a fresh number, the line kept in a ``pending``
  dict until ``ack`` / ``fail``, replayed on ``fail``); the split bolt reads ``tup.values``,
  emits each word with ``anchors=[tup]`` and acks the line; the count bolt keeps a dict and
  acks each word. Only an ``if self.sample_every`` check and a counter are added for the
  measuring;
- ``tuned``: ``CorpusSpout`` -> ``SplitBolt`` -> ``CountBolt``, tuned for the engine (64 lines
  per ``next_tuple``, the count bolt's ``process`` swapped for a closure reading the tuple by
  index): what the runtime can do when user code costs next to nothing.

Batch API (``build_batch``: ``CorpusBatchSpout`` -> ``SplitBatchBolt`` -> ``CountBatchBolt``),
and the cached Zipf corpus (``corpus_file``, ``count_corpus``). The spouts and bolts run in
Heron Instances; the benchmark ships them by value (``cloudpickle.register_pickle_by_value``),
so no process of the topology imports this module. Each count task writes its counts, first
and last count times and latency samples to ``<out dir>/count-<task>.json`` and each spout
task its figures to ``<out dir>/spout-<task>.json``, which the benchmark reads.
"""

from __future__ import annotations

import collections
import json
import os
import time
from array import array
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from heron_spark import BatchBolt, BatchSpout, Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api.state import StatefulComponent

VOCABULARY = 10_000
WORDS_PER_SENTENCE = 10
ZIPF_EXPONENT = 1.2
SEED = 42
SPOUTS = SPLITTERS = COUNTERS = CONTAINERS = 2

# Topology config keys of the benchmark's components.
CORPUS_PATH = "bench.corpus.path"
OUT_DIR = "bench.out.dir"
QUOTA = "bench.sentences.per.task"      # 0: one pass over the corpus; > 0: cycle until this many
RATE = "bench.words.per.sec.per.task"   # 0: as fast as possible
SAMPLE_EVERY = "bench.latency.sample.every"  # 0: no latency samples
LINES_PER_CALL = "bench.lines.per.next.tuple"  # the plain spout's burst (1: one line a call)
RELIABILITY = "topology.reliability.mode"


# ---- the topology --------------------------------------------------------------------------
def _reliable(config) -> bool:
    return str(config.get(RELIABILITY, "")).upper() == "ATLEAST_ONCE"


def _read_corpus_settings(spout, config, context) -> None:
    """Set what both corpus spouts read from the config.

    That is the corpus, which of its lines are this task's (``i % tasks == index``), where to
    report, and the quota (-1: one pass).
    """
    spout.path = str(config[CORPUS_PATH])
    spout.index = context.get_task_index()
    spout.tasks = context.get_component_parallelism(context.get_component_id())
    spout.task_id = context.get_task_id()
    spout.out_dir = Path(str(config[OUT_DIR]))
    quota = int(config.get(QUOTA, 0) or 0)
    spout.left = quota if quota > 0 else -1
    spout.cyclic = quota > 0


def _corpus_lines(spout):
    """Yield the spout's corpus lines (``i % tasks == index``), over and over when cyclic."""
    while True:
        with open(spout.path) as corpus:
            for i, line in enumerate(corpus):
                if i % spout.tasks == spout.index:
                    yield line.rstrip("\n")
        if not spout.cyclic:
            return


def _report_spout(spout):
    """Declare the spout exhausted and write its figures to ``<out dir>/spout-<task>.json``."""
    spout.declare_exhausted()
    path = spout.out_dir / f"spout-{spout.task_id}.json"
    path.write_text(json.dumps({"emitted": spout.emitted, "replayed": spout.replayed,
                                "max_lag_s": spout.lag, "first_emit": spout.first_emit}))


class CorpusSpout(Spout, StatefulComponent):
    """Tuned style: emits (sentence, emit time) for the corpus lines ``i % tasks == index``.

    Paced when a rate is set. Under at-least-once every sentence has a message id and is
    replayed if failed; under effectively once its position is checkpointed (a restore skips
    what was emitted).
    """

    state = None

    def init_state(self, stateful_state):
        self.state = stateful_state

    def pre_save(self, checkpoint_id):
        self.state.put("position", self.emitted)

    outputs = ["sentence", "ts"]

    def initialize(self, config, context):
        _read_corpus_settings(self, config, context)
        rate = float(config.get(RATE, 0) or 0)
        self.interval = WORDS_PER_SENTENCE / rate if rate > 0 else 0.0
        self.next_at = None
        self.lag = 0.0  # paced: the most the spout fell behind its schedule, in seconds
        self.reliable = _reliable(config)
        self.burst = int(config.get(LINES_PER_CALL, 32) or 32)
        self.lines = _corpus_lines(self)
        self.done = False
        self.pending = {}
        self.retry = collections.deque()
        self.next_id = 0
        self.emitted = 0
        self.replayed = 0
        self.first_emit = None  # the stamp of its first sentence: where words/s starts
        if self.state is not None and self.state.get("position"):
            self.emitted = self.state.get("position")
            for _ in range(self.emitted):
                next(self.lines, None)
                self.left -= 1


    def next_tuple(self):
        if self.first_emit is None:
            self.first_emit = time.time()
        for _ in range(64):
            now = time.time()
            if self.interval:
                if self.next_at is None:
                    self.next_at = now
                elif now < self.next_at:
                    return
            if self.retry:
                line = self.retry.popleft()
                self.replayed += 1
            elif self.done:
                _report_spout(self)
                return
            else:
                line = next(self.lines, None) if self.left != 0 else None
                if line is None:
                    self.done = True
                    _report_spout(self)
                    return
                self.left -= 1
            if self.reliable:
                self.next_id += 1
                self.pending[self.next_id] = line
                self.emit([line, now], tup_id=self.next_id)
            else:
                self.emit([line, now])
            self.emitted += 1
            if self.interval:
                self.lag = max(self.lag, now - self.next_at)
                self.next_at += self.interval

    def ack(self, tup_id):
        self.pending.pop(tup_id, None)

    def fail(self, tup_id):
        line = self.pending.pop(tup_id, None)
        if line is not None:
            self.retry.append(line)


class SplitBolt(Bolt):
    """Tuned style: splits a sentence into (word, emit time); anchors and acks under at-least-once."""

    outputs = ["word", "ts"]

    def initialize(self, config, context):
        self.reliable = _reliable(config)

    def process(self, tup):
        sentence, ts = tup.values
        emit = self.emit
        if self.reliable:
            anchors = [tup]
            for word in sentence.split():
                emit([word, ts], anchors=anchors)
            self.ack(tup)
        else:
            for word in sentence.split():
                emit([word, ts])


class CountBolt(Bolt, StatefulComponent):
    """Tuned style: counts words and writes its timings to ``<out dir>/count-<task>.json`` at the end.

    It records when it counted its first and last word and every n-th word's latency.
    The measuring costs almost nothing per word, so that the figures are the engine's, not
    the instrument's: ``process`` is a closure picked in ``initialize`` for the phase and mode
    (no sampling check in the throughput phase, no ack at most once). The first word's time is
    taken once, by a one-shot ``process``; the last one is the ``creation_time`` of the last
    tuple counted (when its batch reached the bolt: at most one batch's processing early).
    """

    state = None

    def init_state(self, stateful_state):
        self.state = stateful_state  # effectively once: the counts are saved at checkpoints

    def pre_save(self, checkpoint_id):
        self.state.put("counts", dict(self.counts))

    def initialize(self, config, context):
        restored = self.state.get("counts") if self.state is not None else None
        counts = self.counts = dict(restored or {})
        get = counts.get
        every = int(config.get(SAMPLE_EVERY, 0) or 0)
        samples = self.samples = array("d")
        sampled_at = self.sampled_at = array("d")  # each sample's emit stamp: latency over time
        ack = self.ack if _reliable(config) else None
        last = self.last_seen = [None]
        self.first = None
        self.out = Path(str(config[OUT_DIR])) / f"count-{context.get_task_id()}.json"
        seen = [0]

        if every:  # latency phase: every n-th word's latency too
            def count(tup):
                word, ts = tup[4]
                counts[word] = get(word, 0) + 1
                last[0] = tup
                seen[0] += 1
                if not seen[0] % every:
                    samples.append(time.time() - ts)
                    sampled_at.append(ts)
                if ack is not None:
                    ack(tup)
        elif ack is not None:
            def count(tup):
                word = tup[4][0]
                counts[word] = get(word, 0) + 1
                last[0] = tup
                ack(tup)
        else:
            def count(tup):
                word = tup[4][0]
                counts[word] = get(word, 0) + 1
                last[0] = tup

        def first(tup):
            self.first = time.time()
            self.process = count
            count(tup)

        self.process = first

    def process(self, tup):
        """Raise: ``initialize`` replaces this by the closure for the phase and mode."""
        raise RuntimeError("CountBolt.process runs before initialize")

    def end_of_input(self):
        tup = self.last_seen[0]
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "pid": os.getpid(), "first": self.first,
            "last": tup.creation_time if tup is not None else None,
            "words": sum(self.counts.values()), "counts": self.counts,
            "samples": self.samples.tolist(), "sampled_at": self.sampled_at.tolist()}))
        os.replace(tmp, self.out)


# ---- plain style: as the README and heronpy teach -------------------------------------------
class SentenceSpout(Spout, StatefulComponent):
    """Emits (sentence, emit time) for the corpus lines ``i % tasks == index``, plain style.

    Each ``next_tuple`` emits the next 32 lines (a spout reading files, Kafka or sockets emits
    in such bursts; ``LINES_PER_CALL`` sets another count, 1 for one line a call). At least
    once each line gets a message id and waits in ``pending`` until acked; a failed one is
    emitted again. Effectively once its position is checkpointed. Paced when a rate is set.
    """

    outputs = ["sentence", "ts"]
    state = None

    def init_state(self, stateful_state):
        self.state = stateful_state

    def pre_save(self, checkpoint_id):
        self.state.put("position", self.emitted)

    def initialize(self, config, context):
        _read_corpus_settings(self, config, context)
        rate = float(config.get(RATE, 0) or 0)
        self.interval = WORDS_PER_SENTENCE / rate if rate > 0 else 0.0
        self.next_at = None
        self.lag = 0.0
        self.reliable = _reliable(config)
        self.burst = int(config.get(LINES_PER_CALL, 32) or 32)
        self.lines = _corpus_lines(self)
        self.done = False
        self.pending = {}
        self.retry = collections.deque()
        self.next_id = 0
        self.emitted = 0
        self.replayed = 0
        self.first_emit = None
        if self.state is not None and self.state.get("position"):
            self.emitted = self.state.get("position")
            for _ in range(self.emitted):
                next(self.lines, None)
                self.left -= 1

    def next_tuple(self):
        if self.first_emit is None:
            self.first_emit = time.time()
        for _ in range(self.burst):
            ts = time.time()
            if self.interval:
                if self.next_at is None:
                    self.next_at = ts
                elif ts < self.next_at:
                    return
                self.lag = max(self.lag, ts - self.next_at)
                self.next_at += self.interval
            if self.retry:
                line = self.retry.popleft()
                self.replayed += 1
            else:
                line = next(self.lines, None) if self.left != 0 else None
                if line is None:
                    _report_spout(self)
                    return
                self.left -= 1
                self.emitted += 1
            if self.reliable:
                self.next_id += 1
                self.pending[self.next_id] = line
                self.emit([line, ts], tup_id=self.next_id)
            else:
                self.emit([line, ts])

    def ack(self, tup_id):
        del self.pending[tup_id]

    def fail(self, tup_id):
        self.retry.append(self.pending.pop(tup_id))


class WordSplitBolt(Bolt):
    """Splits a sentence into (word, emit time), each word anchored to its sentence."""

    outputs = ["word", "ts"]

    def process(self, tup):
        sentence, ts = tup.values
        for word in sentence.split():
            self.emit([word, ts], anchors=[tup])
        self.ack(tup)


class WordCountBolt(Bolt, StatefulComponent):
    """Counts words; writes its counts and timings to ``<out dir>/count-<task>.json`` at the end.

    It notes when it counted its first word, the creation time of the last tuple it counted,
    and (latency runs) every n-th word's latency.
    """

    state = None

    def init_state(self, stateful_state):
        self.state = stateful_state

    def pre_save(self, checkpoint_id):
        self.state.put("counts", dict(self.counts))

    def initialize(self, config, context):
        restored = self.state.get("counts") if self.state is not None else None
        self.counts = dict(restored or {})
        self.sample_every = int(config.get(SAMPLE_EVERY, 0) or 0)
        self.seen = 0
        self.samples = []
        self.sampled_at = []
        self.first = None
        self.last = None
        self.out = Path(str(config[OUT_DIR])) / f"count-{context.get_task_id()}.json"

    def process(self, tup):
        word, ts = tup.values
        self.counts[word] = self.counts.get(word, 0) + 1
        self.last = tup
        if self.first is None:
            self.first = time.time()
        self.seen += 1
        if self.sample_every and self.seen % self.sample_every == 0:
            self.samples.append(time.time() - ts)
            self.sampled_at.append(ts)
        self.ack(tup)

    def end_of_input(self):
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "pid": os.getpid(), "first": self.first,
            "last": self.last.creation_time if self.last is not None else None,
            "words": sum(self.counts.values()), "counts": self.counts,
            "samples": self.samples, "sampled_at": self.sampled_at}))
        os.replace(tmp, self.out)


STYLES = ("plain", "tuned")
_CLASSES = {"plain": (SentenceSpout, WordSplitBolt, WordCountBolt),
            "tuned": (CorpusSpout, SplitBolt, CountBolt)}


def build(mode: str, corpus: Path, out_dir: Path, quota: int, rate_per_task: float,
          sample_every: int, max_pending: int, checkpoint_secs: float = 1.0,
          style: str = "plain", lines_per_call: int = 32) -> type:
    """Build the tuple API's word count in ``style`` (``plain`` or ``tuned``).

    ``lines_per_call``: the lines the plain spout emits per ``next_tuple``.
    """
    spout_class, split_class, count_class = _CLASSES[style]
    builder = TopologyBuilder("bench_word_count")
    spout = builder.add_spout("sentence", spout_class, par=SPOUTS)
    split = builder.add_bolt("split", split_class, par=SPLITTERS, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", count_class, par=COUNTERS, inputs={split: Grouping.fields("word")})
    config = {"topology.stmgrs": CONTAINERS, RELIABILITY: mode, CORPUS_PATH: str(corpus),
              OUT_DIR: str(out_dir), QUOTA: quota, RATE: rate_per_task, SAMPLE_EVERY: sample_every,
              LINES_PER_CALL: lines_per_call}
    if mode == "ATLEAST_ONCE":  # 0: no limit (heronpy's default would be 100 per spout task)
        config["topology.max.spout.pending"] = max_pending or None
    if mode == "EFFECTIVELY_ONCE":
        config["topology.stateful.checkpoint.interval.seconds"] = checkpoint_secs
    builder.set_config(config)
    return builder.build()


BATCH_ROWS = "bench.batch.rows"  # sentences per batch a batch spout emits at most
BATCH_TUPLE_MARKS = {"heron.stmgr.backpressure.high.water.tuples": 4_000_000,
                     "heron.stmgr.backpressure.low.water.tuples": 2_000_000}


class CorpusBatchSpout(BatchSpout):
    """The batch API's sentence spout: emits the corpus as (sentence, ts) batches.

    It reads the corpus in 1 MiB blocks with Arrow, keeps the lines ``i % tasks == index`` and
    emits them in batches of at most ``bench.batch.rows`` sentences, stamped with the batch's
    emit time; paced like ``CorpusSpout`` when a rate is set (each call emits the sentences
    due by then).
    """

    outputs = ["sentence", "ts"]

    def initialize(self, config, context):
        _read_corpus_settings(self, config, context)
        self.rate = float(config.get(RATE, 0) or 0) / WORDS_PER_SENTENCE  # sentences/s
        self.max_rows = int(config.get(BATCH_ROWS, 8192))
        self.started = None
        self.sent = 0
        self.lag = 0.0
        self.emitted = 0
        self.pending = None  # lines read, not emitted yet
        self.blocks = self._blocks()
        self.done = False

    def _blocks(self):
        """Yield this task's lines, a block at a time, as Arrow string arrays."""
        while True:
            line = 0
            carry = b""
            with open(self.path, "rb") as corpus:
                while True:
                    data = corpus.read(1 << 20)
                    if not data:
                        break
                    if carry:
                        data = carry + data
                    end = data.rfind(b"\n")
                    carry = data[end + 1:]
                    # the block as one Arrow string, on the bytes read (no copy), split in C++
                    block = pa.StringArray.from_buffers(
                        1, pa.py_buffer(np.array([0, end], dtype=np.int32)), pa.py_buffer(data))
                    lines = pc.list_flatten(pc.split_pattern(block, "\n"))
                    first = (self.index - line) % self.tasks
                    yield lines.take(pa.array(np.arange(first, len(lines), self.tasks)))
                    line += len(lines)
            if not self.cyclic:
                return

    def next_batch(self):
        now = time.time()
        if self.started is None:
            self.started = now  # also the stamp of its first batch: where words/s starts
        want = self.max_rows
        if self.rate:
            due = int((now - self.started) * self.rate) - self.sent
            if due <= 0:
                return
            self.lag = max(self.lag, due / self.rate)
            want = min(want, due)
        if self.left >= 0:
            want = min(want, self.left)
        if self.pending is None or len(self.pending) == 0:
            self.pending = next(self.blocks, None)
        if self.pending is None or want == 0:
            if not self.done:
                self.done = True
                self.declare_exhausted()
                (self.out_dir / f"spout-{self.task_id}.json").write_text(json.dumps(
                    {"emitted": self.emitted, "replayed": 0, "max_lag_s": self.lag,
                     "first_emit": self.started}))
            return
        rows, self.pending = self.pending[:want], self.pending[want:]
        count = len(rows)
        self.emit_batch({"sentence": rows, "ts": pa.array(np.full(count, now))})
        self.sent += count
        self.emitted += count
        if self.left >= 0:
            self.left -= count


class SplitBatchBolt(BatchBolt):
    """Splits every sentence of a batch with ``pyarrow.compute``.

    Each word keeps its sentence's stamp.
    """

    outputs = ["word", "ts"]

    def process_batch(self, batch):
        words = pc.split_pattern(batch.column(0), " ")
        parents = pc.list_parent_indices(words)
        self.emit_batch({"word": pc.list_flatten(words), "ts": batch.column(1).take(parents)},
                        parents=parents)


class CountBatchBolt(BatchBolt):
    """Counts the words of each batch with ``pyarrow.compute.value_counts``.

    It records the same figures as ``CountBolt``, once per batch (the last count's time is the
    batch's).
    """

    def initialize(self, config, context):
        self.counts = {}
        self.first = None
        self.last = 0.0
        self.n = 0
        self.every = int(config.get(SAMPLE_EVERY, 0) or 0)
        self.samples = []
        self.sampled_at = []
        self.out = Path(str(config[OUT_DIR])) / f"count-{context.get_task_id()}.json"

    def process_batch(self, batch):
        now = time.time()
        counted = pc.value_counts(batch.column(0))
        counts = self.counts
        for word, n in zip(counted.field(0).to_pylist(), counted.field(1).to_pylist()):
            counts[word] = counts.get(word, 0) + n
        ts = batch.column(1).to_numpy()
        if self.first is None:
            self.first = now
        self.last = now
        if self.every:
            start = (-self.n) % self.every  # every n-th word over the whole run
            picked = ts[start::self.every]
            self.samples.extend((now - picked).tolist())
            self.sampled_at.extend(picked.tolist())
        self.n += len(ts)

    def end_of_input(self):
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "pid": os.getpid(), "first": self.first, "last": self.last,
            "words": self.n, "counts": self.counts,
            "samples": self.samples, "sampled_at": self.sampled_at}))
        os.replace(tmp, self.out)


def build_batch(corpus: Path, out_dir: Path, quota: int, rate_per_task: float, sample_every: int,
                batch_rows: int = 8192):
    """Build the batch API's word count: same shape, corpus, outputs and checks as ``build``."""
    builder = TopologyBuilder("bench_word_count_batch")
    spout = builder.add_spout("sentence", CorpusBatchSpout, par=SPOUTS)
    split = builder.add_bolt("split", SplitBatchBolt, par=SPLITTERS,
                             inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", CountBatchBolt, par=COUNTERS,
                     inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": CONTAINERS, CORPUS_PATH: str(corpus),
                        OUT_DIR: str(out_dir), QUOTA: quota, RATE: rate_per_task,
                        SAMPLE_EVERY: sample_every, BATCH_ROWS: batch_rows,
                        **BATCH_TUPLE_MARKS})
    return builder.build()


# ---- the corpus ----------------------------------------------------------------------------
def corpus_file(sentences: int, cache_dir: Path) -> tuple[Path, bool]:
    """Return the corpus of ``sentences`` lines and whether it was generated now.

    It is generated unless ``cache_dir`` holds it already.
    """
    path = cache_dir / (f"wordcount-zipf{ZIPF_EXPONENT}-v{VOCABULARY}-w{WORDS_PER_SENTENCE}"
                        f"-seed{SEED}-n{sentences}.txt")
    if path.exists():
        return path, False
    import numpy as np

    cache_dir.mkdir(parents=True, exist_ok=True)
    ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
    p = ranks ** -ZIPF_EXPONENT
    p /= p.sum()
    vocabulary = np.array([f"w{k}" for k in range(1, VOCABULARY + 1)], dtype=object)
    rng = np.random.default_rng(SEED)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as out:
            done = 0
            while done < sentences:
                # Generator.choice draws one uniform per word in row order, so drawing in chunks
                # gives the same corpus as one rng.choice(VOCABULARY, (N, 10), p=p) call.
                rows = min(100_000, sentences - done)
                words = vocabulary[rng.choice(VOCABULARY, size=(rows, WORDS_PER_SENTENCE), p=p)]
                out.write("".join(" ".join(row) + "\n" for row in words.tolist()))
                done += rows
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path, True


def count_corpus(path: Path) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    with open(path) as corpus:
        for line in corpus:
            counts.update(line.split())
    return counts

"""Word-count benchmark (issue 8): throughput, latency, start-up, memory and CPU per process role.

Corpus: N sentences (--sentences, default 1,000,000) of 10 words over the vocabulary
``w1..w10000``; word rank k is drawn with p(k) proportional to k^-1.2 by numpy
``default_rng(42)``. It is generated into a file once and cached under
``~/.cache/heron_spark_bench/`` (keyed by N).

Topology: ``sentence`` spout (2 tasks; task ``index`` reads the lines ``i % 2 == index``) ->
``split`` bolt (2 tasks, shuffle) -> ``count`` bolt (2 tasks, fields grouping on ``word``),
``topology.stmgrs: 2``, Spark ``local[*]``. Every tuple carries its sentence's emit time
(``time.time()`` in the spout); latency is the count bolt's ``process`` time minus it.

Modes (--modes): ATMOST_ONCE; ATLEAST_ONCE (sentences emitted with message ids, words anchored
to their sentence, both bolts ack; a failed sentence is replayed); EFFECTIVELY_ONCE (no acks;
the spouts checkpoint their read position and the count bolt its counts every
--checkpoint-secs, default 1 s: markers through the topology, aligned by the stmgrs, state
pickled to the local checkpoint store; reports how many checkpoints committed and how long
one took, start to commit); BATCH (the Arrow ``process_batch`` API).

Each mode runs --runs times (default 3) each of two phases:
- throughput: spouts unpaced, one pass over the corpus; words/s from the first emit to the
  last count; the counts are checked exactly against ``collections.Counter`` (a mismatch
  stops the benchmark with exit code 1);
- latency: spouts paced to --rate words/s in total (default 200,000) for --latency-secs
  (default 20 s), cycling over the corpus; p50/p99 over every --sample-every'th word. The
  stamp is the actual emit time: when flow control holds the spouts back, the time they spend
  behind their schedule is not in the latency; each run prints how far behind they fell, and
  its achieved rate (a warning if below 95% of --rate).
Both phases also measure start-up time (``submit()`` call to RUNNING, and to the first word
counted), and, by sampling ``/proc`` every --sample-interval s, CPU seconds (utime+stime) and
peak RSS (VmHWM) per process role: driver (this process), Spark JVM, Spark Python workers
(they run the container supervisors), stmgr, metrics manager and each component's instances.
CPU is summed per role (processes alive before the run, like the driver and the JVM, count
from their CPU time at submit), peak RSS is the largest process of the role. Sampling misses
at most one interval of each process's last CPU time; the driver's CPU includes the sampler.
The start-up and peak RSS lines are from the throughput runs (--json has both phases).

Printed: the machine's CPU count and load average, then per mode one line per metric as the
median of the runs followed by every run's figure, and a CPU table per role. --json PATH also
writes every figure. Every process the benchmark starts is stopped when it ends, Ctrl-C too.

Run from the repository root (the full-size figures take a while; smoke test first):
    .venv/bin/python benchmarks/word_count.py
    .venv/bin/python benchmarks/word_count.py --runs 1 --sentences 20000 --latency-secs 3
        [--modes ATMOST_ONCE,ATLEAST_ONCE,BATCH] [--rate 200000] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                        if p and p != str(REPO_ROOT)])
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from heron_spark import (BatchBolt, BatchSpout, Bolt, Grouping, Spout,  # noqa: E402
                         TopologyBuilder, submit)
from heron_spark.api.state import StatefulComponent  # noqa: E402
from heron_spark.errors import TopologyRuntimeError  # noqa: E402

MODES = ("ATMOST_ONCE", "ATLEAST_ONCE", "EFFECTIVELY_ONCE", "BATCH")
LIVE = ("STARTING", "RUNNING")
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
RELIABILITY = "topology.reliability.mode"


# ---- the topology --------------------------------------------------------------------------
def _reliable(config) -> bool:
    return str(config.get(RELIABILITY, "")).upper() == "ATLEAST_ONCE"


def _read_corpus_settings(spout, config, context) -> None:
    """Set what both corpus spouts read from the config: the corpus, which of its lines are
    this task's (``i % tasks == index``), where to report, and the quota (-1: one pass)."""
    spout.path = str(config[CORPUS_PATH])
    spout.index = context.get_task_index()
    spout.tasks = context.get_component_parallelism(context.get_component_id())
    spout.task_id = context.get_task_id()
    spout.out_dir = Path(str(config[OUT_DIR]))
    quota = int(config.get(QUOTA, 0) or 0)
    spout.left = quota if quota > 0 else -1
    spout.cyclic = quota > 0


class CorpusSpout(Spout, StatefulComponent):
    """Emits (sentence, emit time) for the corpus lines ``i % tasks == index``; paced when a
    rate is set. Under at-least-once every sentence has a message id and is replayed if failed;
    under effectively once its position is checkpointed (a restore skips what was emitted)."""

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
        self.lines = self._lines()
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

    def _lines(self):
        while True:
            with open(self.path) as corpus:
                for i, line in enumerate(corpus):
                    if i % self.tasks == self.index:
                        yield line.rstrip("\n")
            if not self.cyclic:
                return

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
                self._finish()
                return
            else:
                line = next(self.lines, None) if self.left != 0 else None
                if line is None:
                    self.done = True
                    self._finish()
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

    def _finish(self):
        self.declare_exhausted()
        path = self.out_dir / f"spout-{self.task_id}.json"
        path.write_text(json.dumps({"emitted": self.emitted, "replayed": self.replayed,
                                    "max_lag_s": self.lag, "first_emit": self.first_emit}))

    def ack(self, tup_id):
        self.pending.pop(tup_id, None)

    def fail(self, tup_id):
        line = self.pending.pop(tup_id, None)
        if line is not None:
            self.retry.append(line)


class SplitBolt(Bolt):
    """Splits a sentence into (word, emit time); anchors and acks under at-least-once."""

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
    """Counts words; records when it counted its first and last word and every n-th word's
    latency; writes them to ``<out dir>/count-<task>.json`` at the end.

    The measuring costs almost nothing per word, so that the figures are the engine's, not
    the instrument's (the issue counts ~0.27 us of user code per word): ``process`` is a
    closure picked in ``initialize`` for the phase and mode (no sampling check in the
    throughput phase, no ack at most once). The first word's time is taken once, by a
    one-shot ``process``; the last one is the ``creation_time`` of the last tuple counted
    (when its batch reached the bolt: at most one batch's processing early).
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
        """Replaced in ``initialize`` by the closure for the phase and mode."""
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


def build(mode: str, corpus: Path, out_dir: Path, quota: int, rate_per_task: float,
          sample_every: int, max_pending: int, checkpoint_secs: float = 1.0) -> type:
    builder = TopologyBuilder("bench_word_count")
    spout = builder.add_spout("sentence", CorpusSpout, par=SPOUTS)
    split = builder.add_bolt("split", SplitBolt, par=SPLITTERS, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", CountBolt, par=COUNTERS, inputs={split: Grouping.fields("word")})
    config = {"topology.stmgrs": CONTAINERS, RELIABILITY: mode, CORPUS_PATH: str(corpus),
              OUT_DIR: str(out_dir), QUOTA: quota, RATE: rate_per_task, SAMPLE_EVERY: sample_every}
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
    """The batch API's sentence spout: reads the corpus in 1 MiB blocks with Arrow, keeps the
    lines ``i % tasks == index`` and emits them as (sentence, ts) batches of at most
    ``bench.batch.rows`` sentences, stamped with the batch's emit time; paced like
    ``CorpusSpout`` when a rate is set (each call emits the sentences due by then)."""

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
    """Splits every sentence of a batch with ``pyarrow.compute``; each word keeps its
    sentence's stamp."""

    outputs = ["word", "ts"]

    def process_batch(self, batch):
        words = pc.split_pattern(batch.column(0), " ")
        parents = pc.list_parent_indices(words)
        self.emit_batch({"word": pc.list_flatten(words), "ts": batch.column(1).take(parents)},
                        parents=parents)


class CountBatchBolt(BatchBolt):
    """Counts the words of each batch with ``pyarrow.compute.value_counts``; records the same
    figures as ``CountBolt``, once per batch (the last count's time is the batch's)."""

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
    """The batch API's word count: same shape, corpus, outputs and checks as ``build``."""
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
    """Return the corpus of ``sentences`` lines (generating it unless cached) and whether it was
    generated now."""
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


# ---- processes: roles, CPU and peak RSS from /proc ------------------------------------------
CLK_TCK = os.sysconf("SC_CLK_TCK")
ROLE_ORDER = ["driver", "Spark JVM", "Spark Python workers", "stmgr", "metricsmgr"]


def _stat(pid: int) -> tuple[int, float, int, bytes] | None:
    """(ppid, CPU seconds utime+stime, start time, state) of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[19]), fields[0]


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    argv = _cmdline(pid)
    if not argv or not argv[0]:
        return "other"
    if os.path.basename(argv[0]) == "java":
        return "Spark JVM"
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if module == "heron_spark.stmgr":
        return "stmgr"
    if module == "heron_spark.metrics":
        return "metricsmgr"
    if module == "heron_spark.instance":
        component = argv[argv.index("--component") + 1] if "--component" in argv[:-1] else "?"
        return f"instance {component}"
    if module == "pyspark.daemon" or module == "pyspark.worker":
        return "Spark Python workers"
    return f"other {os.path.basename(argv[0])}"


def descendants(root: int) -> dict[int, tuple[int, float, int, bytes]]:
    """Every descendant of ``root`` (and ``root``): pid -> (ppid, CPU s, start time, state)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                stats[int(name)] = stat
    children = collections.defaultdict(list)
    for pid, (ppid, *_) in stats.items():
        children[ppid].append(pid)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in found:
            found[pid] = stats[pid]
            todo.extend(children.get(pid, ()))
    return found


class ProcessSampler:
    """Samples CPU time and VmHWM of every descendant of this process until stopped, keeping
    the last value per process (processes end with the topology). Processes alive at the start
    count from their CPU time then, and their peak RSS is reset (``clear_refs`` 5)."""

    def __init__(self, interval: float) -> None:
        self.root = os.getpid()
        self.interval = interval
        self.procs: dict[tuple[int, int], dict] = {}
        self.live: set[tuple[int, int]] = set()
        self.hwm_reset = True
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ProcessSampler":
        for pid, (_, cpu, started, _) in descendants(self.root).items():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as handle:
                    handle.write("5")
            except OSError:
                self.hwm_reset = False
            self.procs[(pid, started)] = {"pid": pid, "base": cpu}
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        live = set()
        for pid, (_, cpu, started, state) in descendants(self.root).items():
            key = (pid, started)
            if state == b"Z" and key not in self.procs:
                continue  # never seen alive (the JVM's exited shell): nothing to measure
            live.add(key)
            # Read each time: a fork shows its parent's command line until it execs, and an
            # exiting process (zombie) none, which keeps the role it had.
            role = _role(pid, self.root)
            hwm = _hwm_kb(pid)
            with self._lock:
                entry = self.procs.setdefault(key, {"pid": pid, "base": 0.0})
                entry["cpu"] = cpu
                if role != "other" and role != entry.get("role"):
                    entry["role"] = role
                    entry["hwm_kb"] = hwm  # exec starts a new image, and a new peak
                else:
                    entry.setdefault("role", role)
                    entry["hwm_kb"] = max(hwm, entry.get("hwm_kb", 0))
        with self._lock:
            self.live = live

    def topology_alive(self) -> list[int]:
        """Pids of live stmgrs, metrics managers and instances."""
        with self._lock:
            return [self.procs[key]["pid"] for key in self.live
                    if self.procs[key].get("role", "").startswith(("stmgr", "metricsmgr", "instance"))]

    def stop(self) -> dict[str, dict]:
        """Stop; return per role: processes, CPU seconds (sum), peak RSS MB (max), per pid."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        roles: dict[str, dict] = {}
        for entry in self.procs.values():
            if "role" not in entry:
                continue
            role = roles.setdefault(entry["role"], {"processes": 0, "cpu_s": 0.0, "peak_rss_mb": 0.0,
                                                    "pids": {}})
            role["processes"] += 1
            cpu = max(0.0, entry["cpu"] - entry["base"])
            role["cpu_s"] += cpu
            role["peak_rss_mb"] = max(role["peak_rss_mb"], entry["hwm_kb"] / 1024)
            role["pids"][entry["pid"]] = {"cpu_s": round(cpu, 2),
                                          "peak_rss_mb": round(entry["hwm_kb"] / 1024, 1)}
        return roles


def kill_descendants(grace: float = 10.0) -> list[str]:
    """SIGTERM, then SIGKILL, every process this benchmark started that is still alive; return
    a description of each."""
    me = os.getpid()

    def alive() -> list[int]:
        return [pid for pid, stat in descendants(me).items() if pid != me and stat[3] != b"Z"]

    found = alive()
    described = [f"{pid} {' '.join(_cmdline(pid))[:120]}" for pid in found]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            found = alive()
            if not found:
                return described
            time.sleep(0.2)
    return described


# ---- runs ----------------------------------------------------------------------------------
class BenchmarkError(RuntimeError):
    """A run went wrong: wrong counts, a failed topology, processes left behind."""


class Bench:
    def __init__(self, args, spark, work_root: Path, corpus: Path,
                 expected: collections.Counter) -> None:
        self.args = args
        self.spark = spark
        self.work_root = work_root
        self.corpus = corpus
        self.expected = expected
        self.handle = None  # the live topology, killed on the way out
        self.run_number = 0
        self.conf = {"heron.statemgr": f"file://{work_root / 'state'}",
                     "heron.work.dir": str(work_root / "work")}
        if args.flush_ms is not None:
            self.conf["heron.batch.flush.interval.ms"] = args.flush_ms

    def run_once(self, mode: str, phase: str) -> dict:
        args = self.args
        self.run_number += 1
        out_dir = self.work_root / f"run-{self.run_number:03d}-{mode}-{phase}"
        out_dir.mkdir(parents=True)
        if phase == "throughput":
            quota, rate_per_task, sample_every = 0, 0.0, 0
        else:
            quota = max(1, round(args.rate * args.latency_secs / WORDS_PER_SENTENCE / SPOUTS))
            rate_per_task, sample_every = args.rate / SPOUTS, args.sample_every
        if mode == "BATCH":
            topology = build_batch(self.corpus, out_dir, quota, rate_per_task, sample_every,
                                   args.batch_rows)
        else:
            topology = build(mode, self.corpus, out_dir, quota, rate_per_task, sample_every,
                             args.max_pending, args.checkpoint_secs)
        sampler = ProcessSampler(args.sample_interval).start()
        self.handle = None
        submitted = time.time()
        try:
            self.handle = handle = submit(topology, spark=self.spark, conf=self.conf)
            if not handle.wait_running(timeout=args.timeout):
                handle.wait(timeout=30)  # raises the failure, if it failed
                raise BenchmarkError(f"{mode} {phase}: not RUNNING after {args.timeout} s "
                                     f"({handle.status})")
            placement = _placement(handle.physical_plan)
            status = handle.wait(timeout=args.timeout)
        finally:
            if self.handle is not None and self.handle.status in LIVE:
                self.handle.kill()
            left = _wait_gone(sampler, 30.0)
            roles = sampler.stop()
        if left:
            raise BenchmarkError(f"{mode} {phase}: topology processes still alive 30 s after the "
                                 f"end: {left}")
        if status != "FINISHED":
            raise BenchmarkError(f"{mode} {phase}: the topology ended {status}")
        return self._measure(mode, phase, out_dir, quota, submitted, handle, placement, roles)

    def _measure(self, mode, phase, out_dir, quota, submitted, handle, placement, roles) -> dict:
        results = [json.loads(p.read_text()) for p in sorted(out_dir.glob("count-*.json"))]
        spouts = [json.loads(p.read_text()) for p in sorted(out_dir.glob("spout-*.json"))]
        if len(results) != COUNTERS:
            raise BenchmarkError(f"{mode} {phase}: {len(results)} of {COUNTERS} count tasks "
                                 f"reported their counts (see {out_dir})")
        words = sum(r["words"] for r in results)
        replayed = sum(s["replayed"] for s in spouts)
        counted = [r for r in results if r["words"]]
        first_emit = min((s["first_emit"] for s in spouts if s.get("first_emit")),
                         default=math.nan)
        first_count = min(r["first"] for r in counted) if counted else math.nan
        last_count = max(r["last"] for r in counted) if counted else math.nan
        run = {"mode": mode, "phase": phase, "words": words, "sentences_replayed": replayed,
               "words_per_s": words / max(last_count - first_emit, 1e-9),
               "startup_running_s": (handle.started_at or math.nan) - submitted,
               "startup_first_count_s": first_count - submitted,
               "whole_run_s": (handle.ended_at or math.nan) - submitted,
               "placement": placement, "roles": roles}
        checkpoint = (handle.status_detail() or {}).get("checkpoint")
        if checkpoint:
            run["checkpoints"] = checkpoint["commits"]
            run["checkpoint_ms_mean"] = 1000 * checkpoint["commit_secs_mean"]
            run["checkpoint_ms_max"] = 1000 * checkpoint["commit_secs_max"]
        if phase == "throughput":
            self._verify(mode, results, words, replayed, out_dir)
        else:
            expected_words = quota * SPOUTS * WORDS_PER_SENTENCE
            run["expected_words"] = expected_words
            run["spout_max_lag_s"] = max((s["max_lag_s"] for s in spouts), default=math.nan)
            if words != expected_words:
                print(f"  WARNING: {mode} latency run counted {words:,} words, expected "
                      f"{expected_words:,} ({replayed} sentences replayed)", flush=True)
            samples = sorted(s for r in results for s in r["samples"])
            run["latency_samples"] = len(samples)
            run["p50_ms"] = 1000 * _quantile(samples, 0.50)
            run["p99_ms"] = 1000 * _quantile(samples, 0.99)
            run["max_ms"] = 1000 * samples[-1] if samples else math.nan
        return run

    def _verify(self, mode, results, words, replayed, out_dir) -> None:
        counted: collections.Counter = collections.Counter()
        shared = set()
        for r in results:
            shared |= counted.keys() & r["counts"].keys()
            counted.update(r["counts"])
        problems = []
        if shared:
            problems.append(f"{len(shared)} words counted by more than one count task "
                            f"(fields grouping broken), e.g. {sorted(shared)[:5]}")
        if counted != self.expected:
            short = self.expected - counted
            extra = counted - self.expected
            problems.append(f"{words:,} words counted, {sum(self.expected.values()):,} expected; "
                            f"{sum(short.values()):,} missing over {len(short)} words "
                            f"(e.g. {short.most_common(3)}), {sum(extra.values()):,} extra over "
                            f"{len(extra)} words (e.g. {extra.most_common(3)}); "
                            f"{replayed} sentences replayed")
        if problems:
            raise BenchmarkError(f"{mode} throughput run: counts differ from "
                                 f"collections.Counter: {'; '.join(problems)} (files: {out_dir})")


def _wait_gone(sampler: ProcessSampler, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        sampler.sample()
        left = sampler.topology_alive()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _placement(plan) -> dict[str, list[str]]:
    if plan is None:
        return {}
    out: dict[str, list[str]] = {}
    for instance in sorted(plan.instances, key=lambda i: i.task_id):
        out.setdefault(f"container {instance.container_index}", []).append(
            f"{instance.component}[{instance.task_id}]")
    return out


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# ---- report --------------------------------------------------------------------------------
def _line(mode: str, label: str, values: list[float], fmt) -> str:
    return (f"{mode} {label}: median {fmt(statistics.median(values))} "
            f"(runs: {', '.join(fmt(v) for v in values)})")


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _f2(v: float) -> str:
    return f"{v:,.2f}"


def _f1(v: float) -> str:
    return f"{v:,.1f}"


def _roles_in(runs: list[dict]) -> list[str]:
    seen = {role for run in runs for role in run["roles"]}
    instances = sorted(r for r in seen if r.startswith("instance "))
    ordered = [r for r in ROLE_ORDER if r in seen] + instances
    return ordered + sorted(seen - set(ordered))


def report_mode(mode: str, args, fast: list[dict], paced: list[dict]) -> dict:
    lines = [
        _line(mode, "words/s", [r["words_per_s"] for r in fast], _int),
        _line(mode, f"latency p50 ms at {args.rate:,.0f} words/s", [r["p50_ms"] for r in paced], _f2),
        _line(mode, f"latency p99 ms at {args.rate:,.0f} words/s", [r["p99_ms"] for r in paced], _f2),
        _line(mode, "achieved words/s in the latency runs", [r["words_per_s"] for r in paced], _int),
        _line(mode, "start-up s, submit() to RUNNING", [r["startup_running_s"] for r in fast], _f2),
        _line(mode, "start-up s, submit() to first word counted",
              [r["startup_first_count_s"] for r in fast], _f2),
    ]
    if "checkpoints" in fast[0]:
        for label, key in (("checkpoints committed", "checkpoints"),
                           ("checkpoint ms, start to commit (mean)", "checkpoint_ms_mean"),
                           ("checkpoint ms, start to commit (max)", "checkpoint_ms_max")):
            lines.append(_line(mode, f"{label}, throughput runs", [r[key] for r in fast], _f1))
            lines.append(_line(mode, f"{label}, latency runs", [r[key] for r in paced], _f1))
    roles = _roles_in(fast + paced)
    for role in roles:
        lines.append(_line(mode, f"peak RSS MB {role}",
                           [r["roles"].get(role, {}).get("peak_rss_mb", 0.0) for r in fast], _f1))
    summary = {"words_per_s": statistics.median(r["words_per_s"] for r in fast),
               "p50_ms": statistics.median(r["p50_ms"] for r in paced),
               "p99_ms": statistics.median(r["p99_ms"] for r in paced),
               "startup_running_s": statistics.median(r["startup_running_s"] for r in fast),
               "startup_first_count_s": statistics.median(r["startup_first_count_s"] for r in fast),
               "peak_rss_mb": {}, "cpu_s": {}}
    header = (f"{mode} CPU seconds per process role, median of {len(fast)} [every run]: throughput "
              f"phase ({fast[0]['words']:,} words unpaced), latency phase ({args.rate:,.0f} words/s "
              f"for {args.latency_secs:g} s)")
    table = [header, f"  {'role':<24} {'procs':>5}  {'throughput phase':<34} {'latency phase':<34}"]
    for role in roles:
        cells = []
        for runs in (fast, paced):
            values = [r["roles"].get(role, {}).get("cpu_s", 0.0) for r in runs]
            cells.append(f"{statistics.median(values):.2f} [{', '.join(f'{v:.2f}' for v in values)}]")
        procs = fast[0]["roles"].get(role, {}).get("processes", 0)
        table.append(f"  {role:<24} {procs:>5}  {cells[0]:<34} {cells[1]:<34}")
        summary["cpu_s"][role] = {
            phase: statistics.median(r["roles"].get(role, {}).get("cpu_s", 0.0) for r in runs)
            for phase, runs in (("throughput", fast), ("latency", paced))}
        summary["peak_rss_mb"][role] = statistics.median(
            r["roles"].get(role, {}).get("peak_rss_mb", 0.0) for r in fast)
    totals = [f"{statistics.median(sum(v['cpu_s'] for v in r['roles'].values()) for r in runs):.2f}"
              for runs in (fast, paced)]
    table.append(f"  {'all':<24} {'':>5}  {totals[0]:<34} {totals[1]:<34}")
    print("\n".join(lines + table), flush=True)
    return summary


# ---- main ----------------------------------------------------------------------------------
def _session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[*]").appName("heron_spark-bench-word-count")
             .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _stop_spark(spark) -> None:
    if spark is None:
        return
    jvm = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - going down anyway; the processes are killed next
        print(f"stopping Spark: {exc}", file=sys.stderr)
    if jvm is not None and jvm.poll() is None:
        jvm.terminate()
        try:
            jvm.wait(15)
        except Exception:  # noqa: BLE001 - killed below by pid
            pass


def _parse_modes(text: str) -> list[str]:
    modes = [m.strip().upper() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {unknown}: choose from {', '.join(MODES)}")
    return modes


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", type=_parse_modes, default=list(MODES),
                        help="comma-separated, of ATMOST_ONCE, ATLEAST_ONCE, BATCH (default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per phase and mode (default 3)")
    parser.add_argument("--sentences", type=int, default=1_000_000,
                        help="corpus size N in sentences of 10 words (default 1,000,000)")
    parser.add_argument("--rate", type=float, default=200_000,
                        help="offered words/s in total for the latency runs (default 200,000)")
    parser.add_argument("--latency-secs", type=float, default=20.0,
                        help="length of each latency run at --rate (default 20)")
    parser.add_argument("--sample-every", type=int, default=16,
                        help="latency sample: every n-th word per count task (default 16)")
    parser.add_argument("--sample-interval", type=float, default=0.2,
                        help="seconds between /proc samples of CPU and RSS (default 0.2)")
    parser.add_argument("--checkpoint-secs", type=float, default=1.0,
                        help="EFFECTIVELY_ONCE: checkpoint interval (default 1 s)")
    parser.add_argument("--max-pending", type=int, default=0,
                        help="topology.max.spout.pending under ATLEAST_ONCE (default 0: no limit; "
                             "the tuple water marks bound what is in flight)")
    parser.add_argument("--batch-rows", type=int, default=8192,
                        help="BATCH: sentences per batch the spouts emit at most (default 8192)")
    parser.add_argument("--flush-ms", type=float, default=None,
                        help="heron.batch.flush.interval.ms (default: the configured one)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run at most")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "heron_spark_bench")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the work folder (logs, per-run outputs) after a clean end")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.sentences < SPOUTS or args.rate <= 0 or args.latency_secs <= 0:
        parser.error("--runs >= 1, --sentences >= 2, --rate > 0 and --latency-secs > 0")
    return args


def machine_info() -> dict:
    load = os.getloadavg()
    info = {"cpu_count": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "load_average": [round(x, 2) for x in load], "python": platform.python_version(),
            "platform": platform.platform()}
    print(f"machine: {info['cpu_count']} CPUs ({info['usable_cpus']} usable), load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min); Python {info['python']}, "
          f"{info['platform']}", flush=True)
    if load[0] > 0.5:
        print(f"WARNING: noisy machine: 1-minute load average {load[0]:.2f} > 0.5; "
              f"figures will be low and spread out", flush=True)
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even if started ignoring it
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report: dict = {"machine": machine_info(),
                    "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                    "modes": {}}
    work_root = Path(tempfile.mkdtemp(prefix="heron_spark_bench_"))
    spark, code, bench = None, 0, None
    try:
        began = time.monotonic()
        corpus, generated = corpus_file(args.sentences, args.cache_dir)
        expected = count_corpus(corpus)
        report["corpus"] = {"path": str(corpus), "sentences": args.sentences,
                            "words": sum(expected.values()), "distinct_words": len(expected),
                            "top_word_share": expected.most_common(1)[0][1] / sum(expected.values())}
        print(f"corpus: {corpus} ({'generated' if generated else 'cached'}; "
              f"{args.sentences:,} sentences, {sum(expected.values()):,} words, {len(expected):,} "
              f"distinct, top word {report['corpus']['top_word_share']:.1%}; "
              f"{time.monotonic() - began:.1f} s)", flush=True)
        began = time.monotonic()
        spark = _session()
        print(f"Spark {spark.version} session on {spark.sparkContext.master} "
              f"(default parallelism {spark.sparkContext.defaultParallelism}) in "
              f"{time.monotonic() - began:.1f} s; work folder {work_root}", flush=True)
        bench = Bench(args, spark, work_root, corpus, expected)
        for mode in args.modes:
            report["modes"][mode] = bench_mode(bench, mode, args)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the topology and every process the benchmark started",
              file=sys.stderr, flush=True)
        code = 130
    except (BenchmarkError, TopologyRuntimeError, TimeoutError) as exc:
        print(f"BENCHMARK FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # no second Ctrl-C mid-cleanup
        try:
            if bench is not None and bench.handle is not None and bench.handle.status in LIVE:
                bench.handle.kill()
            _stop_spark(spark)
            leftovers = kill_descendants()
            if leftovers:
                print(f"WARNING: killed {len(leftovers)} leftover process(es): "
                      + "; ".join(leftovers), file=sys.stderr)
        finally:
            signal.signal(signal.SIGINT, previous)
        if code != 1 and not args.keep_work:
            shutil.rmtree(work_root, ignore_errors=True)
        else:
            print(f"work folder (logs, per-run outputs) kept: {work_root}", file=sys.stderr)
    if args.json is not None:
        report["exit_code"] = code
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {args.json}")
    return code


def bench_mode(bench: Bench, mode: str, args) -> dict:
    pending = f", max spout pending {args.max_pending}" if args.max_pending and \
        mode == "ATLEAST_ONCE" else ""
    print(f"\n== {mode}: {SPOUTS} sentence / {SPLITTERS} split / {COUNTERS} count tasks, "
          f"{CONTAINERS} stmgrs, local[*]{pending}", flush=True)
    fast, paced = [], []
    for i in range(args.runs):
        r = bench.run_once(mode, "throughput")
        fast.append(r)
        if i == 0:
            print(f"  placement: {'; '.join(f'{k}: {v}' for k, v in r['placement'].items())}")
        print(f"  {mode} throughput run {i + 1}: {r['words']:,} words (exact counts verified), "
              f"{r['words_per_s']:,.0f} words/s, {r['sentences_replayed']} sentences replayed, "
              f"start-up {r['startup_running_s']:.2f} s to RUNNING, "
              f"{r['startup_first_count_s']:.2f} s to first count, {r['whole_run_s']:.1f} s in all",
              flush=True)
    for i in range(args.runs):
        r = bench.run_once(mode, "latency")
        paced.append(r)
        print(f"  {mode} latency run {i + 1}: {r['words']:,} words at {r['words_per_s']:,.0f} "
              f"words/s (offered {args.rate:,.0f}), p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} "
              f"ms, max {r['max_ms']:.1f} ms over {r['latency_samples']:,} samples; spouts at most "
              f"{r['spout_max_lag_s']:.2f} s behind their schedule", flush=True)
        if r["words_per_s"] < 0.95 * args.rate:
            print(f"  WARNING: the latency run reached {r['words_per_s']:,.0f} words/s, below the "
                  f"offered {args.rate:,.0f}: the topology cannot keep up, latency is queueing",
                  flush=True)
    summary = report_mode(mode, args, fast, paced)
    return {"summary": summary, "throughput_runs": fast, "latency_runs": paced}


if __name__ == "__main__":
    raise SystemExit(main())

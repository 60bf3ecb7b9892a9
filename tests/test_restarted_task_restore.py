"""A restarted (killed) task that learns of a rollback before it starts: the old epoch's frames.

A Heron Instance dials its stmgr, then registers; the stmgr delivers DATA to it as soon as it
is connected. When a task is ``kill -9``'d and its new process connects before the TMaster's
restore reaches the stmgr, frames of the rolled-back epoch (tuples, a watermark past the
checkpoint) reach the new process before its ``StartProcessing``; the stmgr's ``restore``
(sent to every registered task) comes after them, then the start, then the new epoch's
frames. The task holds the data until it starts: it must drop what came before the restore,
or the old epoch's watermark fires the restored windows early and the replayed tuples of
those windows are refused as late (their rows missing from an effectively-once sink).
"""

from __future__ import annotations

from executor_frames import stored_ids
from heron_spark import Grouping, Spout, TopologyBuilder, TumblingWindowBolt
from heron_spark.api import Bolt
from heron_spark.instance.shell import build_executor
from heron_spark.plan.prepare import prepare
from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.testing import wait_until
from heron_spark.wire import frames, tuple_batch

FIRED: list[tuple[int, tuple]] = []  # (window start, its sorted words) of every window fired


class Words(Spout):
    outputs = ["word"]

    def next_tuple(self):
        pass


class PerWindow(TumblingWindowBolt):
    outputs = ["start", "n"]

    def processWindow(self, window_info, tuples):  # noqa: N802 - heronpy's name
        FIRED.append((window_info.start, tuple(sorted(t.values[0] for t in tuples))))
        self.emit([window_info.start, len(tuples)])


class Sink(Bolt):
    def process(self, tup):
        pass


def _prepared(tmp_path):
    builder = TopologyBuilder("restarted-window")
    words = builder.add_spout("words", Words, par=1)
    windows = builder.add_bolt("windows", PerWindow, par=1, inputs={words: Grouping.SHUFFLE},
                               config={"heron.window.event.time": True,
                                       TumblingWindowBolt.WINDOW_DURATION_SECS: 1})
    builder.add_bolt("sink", Sink, par=1, inputs={windows: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 60})
    return prepare(builder.build(), conf={"heron.work.dir": str(tmp_path / "work"),
                                          "heron.statemgr": f"file://{tmp_path}/state"})


def _control(**body) -> bytes:
    return frames.control_frame(stmgr_pb2.StmgrToInstance(**body))


def _start(epoch: int, checkpoint_id: int) -> bytes:
    return _control(start=stmgr_pb2.StartProcessing(generation=0, epoch=epoch,
                                                    checkpoint_id=checkpoint_id,
                                                    hold=epoch > 0))


def _tuples(src: int, dest: int, stamped: list[tuple[str, int]]) -> bytes:
    batch = tuple_batch.build(["word"], [(word,) for word, _ in stamped])
    batch = tuple_batch.with_timestamps(batch, [ts for _, ts in stamped])
    return frames.data_frame(frames.TUPLES, src, dest, len(stamped), b"default",
                             tuple_batch.encode_batch(batch))


def _watermark(src: int, dest: int, ms: int) -> bytes:
    return frames.data_frame(frames.WATERMARK, src, dest, 0, str(ms).encode())


def _first_process_killed_after_checkpoint_1(tmp_path):
    """The window task's first process: window [1000, 2000) half full (a, b) at checkpoint 1,
    then killed (``kill -9``: what it did after checkpoint 1 is rolled back)."""
    prepared = _prepared(tmp_path)
    view = prepared.view
    [src] = view.component_tasks["words"]
    [task] = view.component_tasks["windows"]
    FIRED.clear()
    sent: list = []
    first = build_executor(view, task, prepared.system, sent.append)
    for kind, frame in [(frames.CONTROL, _start(0, 0)),
                        (frames.DATA, _watermark(src, task, 900)),
                        (frames.DATA, _tuples(src, task, [("a", 1100), ("b", 1200)]))]:
        first.offer(kind, frame)
    first.turn(first.clock())
    first.checkpoint(1)
    wait_until(lambda: first.turn(first.clock()) is not None and 1 in stored_ids(sent), 30,
               interval=0.01, message="checkpoint 1 saved")
    first.close()
    return prepared, view, src, task


def test_a_restarted_task_drops_the_frames_that_came_before_the_restore(tmp_path):
    prepared, view, src, task = _first_process_killed_after_checkpoint_1(tmp_path)

    # the new process: the old epoch's frames, then the restore, the start, the new epoch's
    second = build_executor(view, task, prepared.system, [].append)
    old_epoch = [_tuples(src, task, [("c", 1300), ("d", 2100), ("e", 2500)]),
                 _watermark(src, task, 3100)]
    for frame in old_epoch:
        second.offer(frames.DATA, frame)
    second.offer(frames.CONTROL, _control(restore=tmaster_pb2.RestoreState(epoch=1,
                                                                          checkpoint_id=1)))
    second.offer(frames.CONTROL, _start(1, 1))
    second.turn(second.clock())
    assert FIRED == []  # nothing of the rolled-back epoch fired a window
    for frame in old_epoch:  # replayed from checkpoint 1
        second.offer(frames.DATA, frame)
    second.turn(second.clock())
    assert FIRED == [(1000, ("a", "b", "c")), (2000, ("d", "e"))]
    assert second.late_tuples == 0
    second.close()


def _kinds(sent: list) -> list[str]:
    out = []
    for frame in sent:
        frame = b"".join(bytes(part) for part in frame) if isinstance(frame, list) else frame
        if frame[4] == frames.CONTROL:
            out.append(stmgr_pb2.InstanceToStmgr.FromString(
                frame[frames.PREFIX_BYTES:]).WhichOneof("body"))
        else:
            kind = frames.data_head(frame)[0]
            out.append({frames.TUPLES: "tuples", frames.WATERMARK: "watermark"}.get(kind, "data"))
    return out


def test_what_a_restarted_task_makes_of_its_held_data_follows_its_restored_report(tmp_path):
    """The new epoch's data held until the start (the restore came before the new process
    connected) may fire windows at once: a watermark past a window the checkpoint holds
    complete. Their output must leave after the restored report, or the stmgr drops it as the
    rolled-back epoch's (the killed task's rows of those windows lost)."""
    prepared, view, src, task = _first_process_killed_after_checkpoint_1(tmp_path)

    sent = []
    second = build_executor(view, task, prepared.system, sent.append)
    second.offer(frames.DATA, _watermark(src, task, 2500))  # the new epoch's, before the start
    second.offer(frames.CONTROL, _start(1, 1))
    second.turn(second.clock())
    assert FIRED == [(1000, ("a", "b"))]
    kinds = _kinds(sent)
    assert "tuples" in kinds and kinds.index("restored") < kinds.index("tuples"), kinds
    second.close()

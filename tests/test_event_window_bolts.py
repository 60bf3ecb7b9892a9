"""Event-time window bolts: the settings refused at submit (naming component, key and value),
and the late stream the bolt declares itself."""

from __future__ import annotations

import pytest

from heron_spark import (SessionWindowBolt, SlidingWindowBolt, Spout, Stream, TopologyBuilder,
                         TopologyValueError, TumblingWindowBolt)

EVENT = {"heron.window.event.time": True}


class Numbers(Spout):
    outputs = ["n", "ts"]


class Sliding(SlidingWindowBolt):
    outputs = ["start", "end", "values"]

    def processWindow(self, window_info, tuples):  # noqa: N802 (heronpy's name)
        self.emit([window_info.start, window_info.end, sorted(t.values[0] for t in tuples)])


class Tumbling(TumblingWindowBolt):
    outputs = ["start", "end", "values"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([window_info.start, window_info.end, sorted(t.values[0] for t in tuples)])


class Sessions(SessionWindowBolt):
    outputs = ["start", "end", "values"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([window_info.start, window_info.end, sorted(t.values[0] for t in tuples)])


class WithLateStream(Tumbling):
    outputs = ["start", "end", "values", Stream(["late_tuple"], name="late")]


def _add(bolt, config, optional_outputs=None):
    builder = TopologyBuilder("bad")
    spout = builder.add_spout("numbers", Numbers, par=1)
    return builder.add_bolt("windows", bolt, par=1, inputs=[spout], config=config,
                            optional_outputs=optional_outputs)


SLIDE_SECS = SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS
LENGTH_SECS = SlidingWindowBolt.WINDOW_DURATION_SECS


@pytest.mark.parametrize("bolt, config, key, value", [
    (Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                "heron.window.allowed.lateness.ms": "soon"},
     "heron.window.allowed.lateness.ms", "soon"),
    (Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                "heron.window.allowed.lateness.ms": -5}, "heron.window.allowed.lateness.ms", -5),
    (Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                "topology.bolts.tuple.timestamp.max.lag.ms": -1},
     "topology.bolts.tuple.timestamp.max.lag.ms", -1),
    (Sliding, {**EVENT, "topology.bolts.window.length.duration.ms": 100,
               "topology.bolts.tuple.timestamp.max.lag.ms": "x"},
     "topology.bolts.tuple.timestamp.max.lag.ms", "x"),
    (Sliding, {**EVENT, LENGTH_SECS: 1, SLIDE_SECS: 2}, SLIDE_SECS, 2000),
    (Sliding, {"topology.bolts.tuple.timestamp.field.name": "ts",
               "topology.bolts.window.length.duration.ms": 100,
               "topology.bolts.window.sliding.interval.duration.ms": 250},
     "topology.bolts.window.sliding.interval.duration.ms", 250),
    (Sessions, {"sessionwindowbolt_gap_secs": 0}, "sessionwindowbolt_gap_secs", 0),
    (Sessions, {"sessionwindowbolt_gap_ms": -10}, "sessionwindowbolt_gap_ms", -10),
    (Tumbling, {"topology.bolts.tuple.timestamp.field.name": 3,
                "tumblingwindowbolt_duration_secs": 1},
     "topology.bolts.tuple.timestamp.field.name", 3),
    (Tumbling, {**EVENT, "tumblingwindowbolt_count": 5}, "tumblingwindowbolt_count", 5),
    (Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                "topology.bolts.window.length.duration.ms": 1000},
     "topology.bolts.window.length.duration.ms", 1000),
])
def test_bad_event_time_settings_are_refused_at_submit(bolt, config, key, value):
    with pytest.raises(TopologyValueError) as refused:
        _add(bolt, config)
    assert refused.value.component == "windows" and refused.value.value == value
    assert key in str(refused.value) or key in (refused.value.fix or "") or \
        refused.value.problem.startswith("the window is shorter")


def test_a_timestamp_field_its_input_lacks_is_refused():
    with pytest.raises(TopologyValueError) as refused:
        _add(Tumbling, {"topology.bolts.tuple.timestamp.field.name": "when",
                        "tumblingwindowbolt_duration_secs": 1})
    assert (refused.value.component, refused.value.value) == ("windows", "when")
    assert _add(Tumbling, {"topology.bolts.tuple.timestamp.field.name": "ts",
                           "tumblingwindowbolt_duration_secs": 1})


def test_the_bolt_declares_its_late_stream():
    spec = _add(Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                           "topology.bolts.late.tuple.stream": "late"})
    late = [out for out in spec.outputs if isinstance(out, Stream) and out.stream_id == "late"]
    assert [s.fields for s in late] == [["late_tuple"]]


@pytest.mark.parametrize("bolt, optional", [
    (Tumbling, [Stream(["late_tuple"], name="late")]),
    (WithLateStream, None),
])
def test_a_late_stream_declared_the_same_way_is_accepted(bolt, optional):
    spec = _add(bolt, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                       "topology.bolts.late.tuple.stream": "late"}, optional)
    late = [out for out in spec.outputs if isinstance(out, Stream) and out.stream_id == "late"]
    assert len(late) == 1


@pytest.mark.parametrize("stream, optional", [
    ("late", [Stream(["why", "what"], name="late")]),
    ("late", [Stream(["late_tuple"], name="late", direct=True)]),
    ("default", None),  # the default stream has the bolt's own three fields
])
def test_a_late_stream_colliding_with_another_declared_stream_is_refused(stream, optional):
    with pytest.raises(TopologyValueError) as refused:
        _add(Tumbling, {**EVENT, "tumblingwindowbolt_duration_secs": 1,
                        "topology.bolts.late.tuple.stream": stream}, optional)
    assert refused.value.component == "windows" and refused.value.value == stream
    assert refused.value.kind == "outputs"


def test_processing_time_settings_stay_as_they_were():
    spec = _add(Sliding, {LENGTH_SECS: 1, SLIDE_SECS: 0.5})
    assert spec.outputs == ["start", "end", "values"]


def test_the_bolts_own_config_decides_event_time_not_the_topologys():
    """spec() pins heron.window.event.time from the bolt's own config: a timestamp field set
    topology-wide for the spouts leaves a processing-time window bolt as it is."""
    spec = _add(Sliding, {LENGTH_SECS: 1})
    assert spec.custom_config["heron.window.event.time"] is False
    merged = {"topology.bolts.tuple.timestamp.field.name": "ts", **spec.custom_config}
    assert Sliding._event_settings(merged, "windows", require=True) is None
    spec = _add(Sliding, {"topology.bolts.tuple.timestamp.field.name": "ts", LENGTH_SECS: 1})
    assert spec.custom_config["heron.window.event.time"] is True

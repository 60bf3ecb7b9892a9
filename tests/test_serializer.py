"""Serializers: heronpy's interface and default, a custom ``topology.serializer.classname``
writing the non-native columns of tuple batches, in a unit round trip and in a topology run in
this process, and bad class names refused before launch."""

from __future__ import annotations

import json

import pytest

from heron_spark import Bolt, ConfigError, Grouping, Spout, TopologyBuilder
from heron_spark.api.serializer import (IHeronSerializer, PythonSerializer, default_serializer,
                                        load_serializer)
from heron_spark.testing import run_local
from heron_spark.wire import tuple_batch

N = 50  # tuples per spout task
CALLS = {"serialize": 0, "deserialize": 0, "initialize": 0}


class TaggedJson(IHeronSerializer):
    """JSON with a tag; counts its calls (the run is in this process)."""

    def initialize(self, config):
        CALLS["initialize"] += 1
        self.tag = config.get("test.serializer.tag", "J").encode()

    def serialize(self, obj):
        CALLS["serialize"] += 1
        return self.tag + json.dumps(obj, sort_keys=True).encode()

    def deserialize(self, input_str):
        CALLS["deserialize"] += 1
        assert input_str[:len(self.tag)] == self.tag, "not written by this serializer"
        return json.loads(input_str[len(self.tag):])


class NoDeserialize:
    def serialize(self, obj):
        return b""


def test_python_serializer_round_trips_python_objects():
    assert isinstance(default_serializer, PythonSerializer)
    default_serializer.initialize()
    for value in ({"k": [1, 2]}, (1, "a"), None, 2 ** 80, {3, 4}):
        assert default_serializer.deserialize(default_serializer.serialize(value)) == value
    from heronpy.api.serializer import PythonSerializer as HeronpyPythonSerializer

    assert HeronpyPythonSerializer is PythonSerializer


def test_a_custom_serializer_writes_the_columns_arrow_cannot_type():
    serializer = load_serializer({"topology.serializer.classname": "test_serializer.TaggedJson"})
    rows = [({"a": 1}, "x", 1), ([1, 2], "y", None), (None, "z", 3)]
    before = dict(CALLS)
    encoded = tuple_batch.encode_batch(tuple_batch.build_rows(["obj", "s", "i"], rows,
                                                                 serializer)[0])
    batch = tuple_batch.decode(encoded)
    assert batch.schema.field(0).metadata == {tuple_batch.SERIALIZER_KEY:
                                              b"test_serializer.TaggedJson"}
    assert batch.schema.field(1).metadata is None and batch.schema.field(2).metadata is None
    assert batch.column(0).to_pylist()[0] == b'J{"a": 1}'
    assert tuple_batch.rows(batch, 3) == [({"a": 1}, "x", 1), ([1, 2], "y", None),
                                          (None, "z", 3)]
    assert CALLS["serialize"] - before["serialize"] == 2       # None stays null
    assert CALLS["deserialize"] - before["deserialize"] == 2
    # the default (no serializer) still pickles, flagged as before
    pickled = tuple_batch.build_rows(["obj"], [({"a": 1},)])[0]
    assert tuple_batch.is_pickled(pickled.schema.field(0))


def test_a_serializer_named_in_the_config_is_loaded_and_initialized():
    assert load_serializer({}) is None                           # the default: pickle
    assert load_serializer({"topology.serializer.classname":
                            "heronpy.api.serializer.PythonSerializer"}) is None
    serializer = load_serializer({"topology.serializer.classname": TaggedJson,
                                  "test.serializer.tag": "T:"})
    assert isinstance(serializer, TaggedJson) and serializer.tag == b"T:"


class Shapes(Spout):
    outputs = ["shape", "n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        if self.n == N:
            self.declare_exhausted()
            return
        self.n += 1
        self.emit([{"sides": self.n % 5, "tags": ["t", self.n]}, self.n])


class Check(Bolt):
    outputs = ["sides"]

    def process(self, tup):
        shape, n = tup.values
        assert shape == {"sides": n % 5, "tags": ["t", n]}, shape
        self.emit([shape["sides"]])


class Count(Bolt):
    def initialize(self, config, context):
        from heron_spark.api.metrics import CountMetric

        self.seen = CountMetric()
        context.register_metric("seen", self.seen, 600)

    def process(self, tup):
        assert isinstance(tup.values[0], int)
        self.seen.incr()


def _topology(name: str, serializer) -> TopologyBuilder:
    builder = TopologyBuilder(name)
    shapes = builder.add_spout("shapes", Shapes, par=2)
    check = builder.add_bolt("check", Check, par=2, inputs={shapes: Grouping.SHUFFLE})
    builder.add_bolt("count", Count, par=1, inputs={check: Grouping.SHUFFLE})
    builder.set_config({"topology.serializer.classname": serializer})
    return builder


def test_a_topology_sends_its_objects_through_its_serializer():
    before = dict(CALLS)
    run = run_local(_topology("custom_serializer", "test_serializer.TaggedJson"),
                    conf={"heron.metrics.interval.ms": 600_000})
    assert run.status == "FINISHED"
    assert run.handle.metrics()["count"]["seen"] == 2 * N
    assert CALLS["initialize"] - before["initialize"] == 5     # once per task
    assert CALLS["serialize"] - before["serialize"] == 2 * N   # the dicts; ints stay native
    assert CALLS["deserialize"] - before["deserialize"] == 2 * N


@pytest.mark.parametrize("name", ["test_serializer.Missing", "no_such_module.Serializer",
                                  "test_serializer.NoDeserialize", "nodots"])
def test_a_bad_serializer_class_fails_before_launch(name):
    with pytest.raises(ConfigError) as caught:
        run_local(_topology("bad_serializer", name))
    assert caught.value.key == "topology.serializer.classname"
    assert caught.value.value == name


def test_a_bad_serializer_given_at_submit_fails_before_launch():
    with pytest.raises(ConfigError):
        run_local(_topology("bad_conf_serializer", "test_serializer.TaggedJson"),
                  conf={"topology.serializer.classname": "test_serializer.Missing"})

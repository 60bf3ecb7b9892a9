"""Config layering and the committed protobuf modules."""

import filecmp
import re
import subprocess
import sys

import pytest
import yaml

from heron_spark.config import (CONF_FILE_NAME, KNOWN_KEYS, SystemConfig, build_system_config,
                                default_conf_dir, read_conf_file)
from heron_spark.errors import ConfigError
from heron_spark.proto import generate


def test_conf_file_documents_every_key_and_sets_none():
    """SystemConfig holds the defaults; the shipped YAML only documents them (commented out),
    so a default has one home and the file cannot drift from the code."""
    assert default_conf_dir() is not None
    assert read_conf_file(default_conf_dir()) == {}
    text = (default_conf_dir() / CONF_FILE_NAME).read_text()
    documented = re.findall(r"^# (heron\.[a-z.]+): ", text, flags=re.MULTILINE)
    assert sorted(documented) == sorted(KNOWN_KEYS)  # every key, once; none that is gone
    assert set(SystemConfig().as_keys()) == KNOWN_KEYS


def test_with_the_shipped_conf_file_the_effective_values_are_the_defaults():
    assert build_system_config(read_conf_file(default_conf_dir())) == SystemConfig()


def test_layers_override_in_order_and_coerce_types():
    config = build_system_config({"heron.batch.max.tuples": "10"},
                                 {"heron.batch.max.tuples": 20, "topology.stmgrs": 3})
    assert config.batch_max_tuples == 20


@pytest.mark.parametrize("layer", [{"heron.no.such.key": 1},
                                   {"heron.batch.max.tuples": "many"},
                                   {"heron.stmgr.backpressure.low.water.bytes": 10 ** 12},
                                   {"heron.packing.algorithm": "best_fit"},
                                   {"heron.tracker.idle.timeout.secs": 0},
                                   {"heron.tracker.max.connections": 0},
                                   {"heron.stall.timeout.secs": 0}])
def test_bad_values_are_config_errors(layer):
    with pytest.raises(ConfigError) as info:
        build_system_config(layer)
    assert info.value.key


def test_heron_spark_config_command_prints_effective_values():
    out = subprocess.run([sys.executable, "-m", "heron_spark.cli", "config", "--conf",
                          "heron.batch.max.tuples=7"], capture_output=True, text=True, check=True)
    printed = dict(line.split(" = ", 1) for line in out.stdout.splitlines())
    assert printed["heron.batch.max.tuples"] == "7"
    assert yaml.safe_load(printed["heron.heartbeat.interval.ms"]) == 1000


def test_committed_protobuf_modules_are_fresh(tmp_path):
    for written in generate.generate(tmp_path):
        committed = generate.PACKAGE_DIR / written.name
        assert committed.exists(), \
            f"{written.name} is not committed: run python -m heron_spark.proto.generate"
        assert filecmp.cmp(written, committed, shallow=False), \
            f"{written.name} is stale: run python -m heron_spark.proto.generate"

"""Build heron_spark: Heron-style stream processing as a Spark-native plugin.

The protobuf modules under ``heron_spark/proto`` are generated from ``proto/*.proto`` by
``python -m heron_spark.proto.generate`` (protoc from grpcio-tools) and committed; the test
``tests/test_proto_fresh.py`` fails when they are stale.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

# One version: heron_spark/_version.py (read as text, so setup.py imports nothing of the package).
VERSION = re.search(r'__version__ = "([^"]+)"',
                    (Path(__file__).parent / "heron_spark" / "_version.py").read_text()).group(1)

DOCS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"]

setup(
    name="heron_spark",
    version=VERSION,
    description="Apache Heron's stream-processing semantics on Spark barrier tasks",
    python_requires=">=3.10",
    # heron_spark/heronpy is installed as top-level ``heronpy``: Heron topologies import it
    # unchanged, on the driver and on every executor.
    packages=[*find_packages(include=["heron_spark", "heron_spark.*"],
                             exclude=["heron_spark.heronpy", "heron_spark.heronpy.*"]),
              *(("heronpy" + p[len("heron_spark.heronpy"):]) for p in
                find_packages(include=["heron_spark.heronpy", "heron_spark.heronpy.*"]))],
    package_dir={"heronpy": "heron_spark/heronpy"},
    # PySpark 4 registers the DefaultSource of every top-level pyspark_* module it finds on its
    # workers' Python path: this one makes format("heron_spark") work with no registration.
    py_modules=["pyspark_heron_spark"],
    # The tracker's web UI: static files served from the installed package. py.typed: the
    # package ships its type hints (PEP 561), so users' type checkers read them.
    package_data={"heron_spark": ["py.typed"], "heron_spark.tracker": ["ui/*", "ui/*/*"]},
    install_requires=[
        "pyspark>=4.0,<5",
        "pyarrow>=15",
        # Pinned to the gencode version of the committed *_pb2.py (grpcio-tools 1.85.1).
        "protobuf>=7.35.1,<8",
        "kazoo>=2.9",
        # Pickles topologies by value (PySpark's bundled copy would make every process that
        # loads one import pyspark).
        "cloudpickle>=3.0",
        # PySpark 4 does not support pandas 3 yet.
        "pandas>=2.0,<3",
        "numpy>=1.24",
        "PyYAML>=6",
        # X.509 for TLS (wire.tls): a CA per topology, certificates, their checks at submit.
        "cryptography>=42",
    ],
    extras_require={
        # heron_spark.io.KafkaSpout / KafkaSink (imported only when a Kafka task starts).
        "kafka": ["confluent-kafka>=2.3"],
        # heron.state.backend: rocksdb (RocksDB through its Python binding; imported only when
        # a task with that backend starts).
        "rocksdb": ["rocksdict>=0.3.20"],
        # heron_spark.io.DeltaSink: Delta Lake tables through delta-rs (imported only when a
        # DeltaSink task starts).
        "delta": ["deltalake>=1.0"],
        # The docs site: `mkdocs build --strict` / `mkdocs serve` (mkdocs.yml; the API
        # reference is read from the docstrings by mkdocstrings).
        "docs": DOCS,
        "test": [
            "pytest>=8",
            "pytest-spark>=0.8",
            # The default tier runs on two workers (the README's `pytest -q -n 2`): its
            # in-process topologies wait on each other's clocks and files about half the time,
            # so two processes take it from ~115 s to ~80 s on this 2-core machine.
            "pytest-xdist>=3.5",
            "grpcio-tools==1.85.1",
            "ruff>=0.6",
            # scripts/check and CI type-check the public API and the cores (pyproject [tool.mypy]).
            "mypy>=1.10",
            # The package layers in pyproject.toml's [tool.importlinter] (tests/test_layers.py).
            "import-linter>=2.1",
            # tests/test_ui_browser.py drives headless Chromium (Debian's chromium +
            # chromium-driver, which .ci/run installs) to check the tracker UI in a real browser.
            "selenium>=4.20",
            # tests/test_notebook.py runs a real Jupyter kernel that submits a topology and
            # displays its handle, as a notebook user does.
            "nbclient>=0.10",
            "ipykernel>=6",
            # tests/test_connect.py submits from a Spark Connect client (grpcio, grpcio-status,
            # googleapis-common-protos, zstandard; nothing a classic session uses).
            "pyspark[connect]>=4.0,<5",
            # tests/test_kafka*.py: the Kafka connectors' client. The broker is Apache Kafka,
            # resolved from Maven Central by tests/jvm/pom.xml (tests/kafka_support.py).
            "confluent-kafka>=2.3",
            # tests/test_delta*.py: DeltaSink, and DuckDB as a second, independent reader of
            # its tables (Spark's Delta reader is the third, from Maven: tests/jvm/pom.xml).
            "deltalake>=1.0",
            "duckdb>=1.0",
            # tests/test_state_backends.py and the effectively-once tests run the rocksdb
            # state backend.
            "rocksdict>=0.3.20",
            # The checks tier of .ci/run and scripts/check build the docs site with
            # `mkdocs build --strict`, in the venv the README's test command makes.
            *DOCS,
        ],
    },
    entry_points={"console_scripts": ["heron-spark=heron_spark.cli.main:main"]},
)

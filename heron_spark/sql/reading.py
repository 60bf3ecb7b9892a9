"""Plan a sink folder's committed files into partitions and read them as Arrow batches.

A folder is any ``pyarrow.fs`` URL (``file://``, ``hdfs://``, ``s3://``, ...) or a local path,
opened as the sink opens it (``heron_spark.io.parquet_store.open_filesystem``); a committed
file's URI is percent-decoded once to its path. Files under ``key=value/`` folders (a sink
partitioned by fields) get those columns, the folder names unescaped once more as Spark does,
typed as Spark types them (int, bigint, double, else string; ``__HIVE_DEFAULT_PARTITION__``
is null). ``infer_schema`` runs on the driver; ``read_files`` on the executors.
"""

from __future__ import annotations

from typing import Iterator, Sequence
from urllib.parse import unquote

from heron_spark.errors import DataSourceOptionError
from heron_spark.io.parquet_log import SinkFile
from heron_spark.io.parquet_store import open_filesystem
from heron_spark.sql.resolve import PATH

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
MAX_PARTITION_BYTES = 128 * 1024 * 1024  # files packed into one Spark partition, at most
_INT_MIN, _INT_MAX = -(2 ** 31), 2 ** 31 - 1


def partition_values(base: str, file_uri: str) -> list[tuple[str, str | None]]:
    """Return the ``(key, value)`` pairs of the ``key=value`` folders between base and file."""
    root = open_filesystem(base)[1].rstrip("/")
    path = open_filesystem(file_uri)[1]
    if not path.startswith(root + "/"):
        return []
    pairs: list[tuple[str, str | None]] = []
    for part in path[len(root) + 1:].split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep:
            value = unquote(value)
            pairs.append((unquote(key), None if value == HIVE_NULL else value))
    return pairs


def _spark_type(values: list[str | None]) -> str:
    present = [value for value in values if value is not None]
    try:
        ints = [int(value) for value in present]
        if all(_INT_MIN <= number <= _INT_MAX for number in ints):
            return "int"
        return "bigint"
    except ValueError:
        pass
    try:
        [float(value) for value in present]
        return "double"
    except ValueError:
        return "string"


def infer_schema(base: str, files: Sequence[SinkFile]):
    """Return the Spark ``StructType`` of ``files``: the first file's columns + partition keys.

    Raise ``DataSourceOptionError`` when nothing is committed yet.
    """
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql import types

    if not files:
        raise DataSourceOptionError(PATH, base, "no rows are committed there yet, so there "
                                    "is no schema to read", "give one with .schema('a string, "
                                    "n bigint'), or load once the first batch is committed")
    filesystem_, path, _ = open_filesystem(files[0].path)
    with filesystem_.open_input_file(path) as handle:
        arrow_schema = pq.read_schema(handle)
    schema = from_arrow_schema(arrow_schema)
    keys: dict[str, list[str | None]] = {}
    for sink_file in files:
        for key, value in partition_values(base, sink_file.path):
            keys.setdefault(key, []).append(value)
    fields = [field for field in schema.fields if field.name not in keys]
    spark_types = {"int": types.IntegerType(), "bigint": types.LongType(),
                   "double": types.DoubleType(), "string": types.StringType()}
    fields += [types.StructField(key, spark_types[_spark_type(values)], True)
               for key, values in keys.items()]
    return types.StructType(fields)


def plan_partitions(files: Sequence[SinkFile],
                    max_bytes: int = MAX_PARTITION_BYTES) -> list[list[str]]:
    """Group ``files`` (in order) into lists of URIs of at most ``max_bytes`` each.

    A file larger than ``max_bytes`` is a partition of its own.
    """
    groups: list[list[str]] = []
    size = 0
    for sink_file in files:
        if not groups or size + sink_file.size > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(sink_file.path)
        size += sink_file.size
    return groups


def read_files(base: str, uris: Sequence[str], schema) -> Iterator:
    """Yield Arrow record batches of ``uris`` shaped as ``schema`` (executor).

    Columns are matched by name and cast to the schema's types; a column a file lacks is null.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema)
    for uri in uris:
        constants = dict(partition_values(base, uri))
        filesystem_, path, _ = open_filesystem(uri)
        with filesystem_.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            present = [name for name in target.names if name in parquet.schema_arrow.names]
            for batch in parquet.iter_batches(columns=present):
                columns = []
                for field in target:
                    if field.name in present:
                        column = batch.column(field.name)
                    elif field.name in constants:
                        column = pa.array([constants[field.name]] * batch.num_rows, pa.string())
                    else:
                        column = pa.nulls(batch.num_rows, field.type)
                    columns.append(column.cast(field.type))
                yield pa.RecordBatch.from_arrays(columns, schema=target)

"""The wire contract: framing (including partial reads), the secret handshake, tuple batches."""

import functools
import io
import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pyarrow as pa
import pytest

from heron_spark.contract import roles
from heron_spark.errors import AuthenticationError
from heron_spark.proto import stmgr_pb2
from heron_spark.wire import frames, hashing, tuple_batch
from heron_spark.wire.connection import Listener, dial


class Trickle(io.RawIOBase):
    """A raw stream that returns at most one byte per read: every frame arrives torn."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0

    def readable(self):
        return True

    def read(self, size=-1):
        chunk = bytes(self._data[self._pos:self._pos + 1])
        self._pos += len(chunk)
        return chunk


def test_frames_survive_one_byte_reads():
    payload = tuple_batch.encode(["w"], [("a",), ("b",)])
    data = frames.data_frame(frames.TUPLES, 7, 3, 2, "strëam".encode(), payload)
    stream = Trickle(data + frames.control_frame(stmgr_pb2.InstanceExhausted(task_id=7)))
    kind, body = frames.read_frame(stream, 1 << 20)
    assert kind == frames.DATA and frames.frame(kind, body) == data
    kind_, src, dest, rows, length = frames.data_head(data)
    assert (kind_, src, dest, rows) == (frames.TUPLES, 7, 3, 2)
    assert frames.data_stream(data, length) == "strëam"
    arrow = memoryview(data)[frames.data_body_offset(length):]
    assert tuple_batch.rows(tuple_batch.decode(arrow), 1) == [("a",), ("b",)]
    kind, body = frames.read_frame(stream, 1 << 20)
    assert kind == frames.CONTROL
    assert stmgr_pb2.InstanceExhausted.FromString(body).task_id == 7
    with pytest.raises(EOFError):
        frames.read_frame(stream, 1 << 20)


def test_torn_and_oversized_frames_are_errors():
    frame = frames.control_frame(stmgr_pb2.InstanceExhausted(task_id=1))
    with pytest.raises(frames.FrameError):
        frames.read_frame(io.BytesIO(frame[:-1]), 1 << 20)
    with pytest.raises(frames.FrameError):
        frames.read_frame(io.BytesIO(frame), 1)  # the payload is 2 bytes


def _listener(secret):
    accepted = []
    done = threading.Event()

    def on_peer(sock, response):
        accepted.append((response.role, response.id))
        sock.close()
        done.set()

    return Listener("127.0.0.1", 0, secret, "topo", on_peer, "test").start(), accepted, done


def test_handshake_accepts_the_secret_and_rejects_others():
    listener, accepted, done = _listener("s3cret")
    try:
        dial("127.0.0.1", listener.port, "s3cret", "topo", roles.STMGR, 4).close()
        assert done.wait(10) and accepted == [(roles.STMGR, 4)]
        with pytest.raises(AuthenticationError):
            dial("127.0.0.1", listener.port, "wrong", "topo", roles.STMGR, 5)
        with pytest.raises(AuthenticationError):
            dial("127.0.0.1", listener.port, "s3cret", "other-topology", roles.STMGR, 6)
        raw = socket.create_connection(("127.0.0.1", listener.port))
        raw.sendall(b"\x00\x00\x00\x05\x01hello")  # garbage instead of an AuthResponse
        raw.settimeout(10)
        while raw.recv(4096):
            pass  # the listener hangs up
        raw.close()
        assert accepted == [(roles.STMGR, 4)]
    finally:
        listener.close()


@pytest.mark.parametrize("values", [
    ["a", "b", None], [1, 2, 3], [1.5, None], [True, False], [b"x", b""],
    [1, "mixed"], [{"k": [1, 2]}, (1, 2)], [2 ** 70, 1], [None, None], ["ok", "\ud800lone"],
])
def test_tuple_batch_round_trips_python_values(values):
    rows = [(v, i) for i, v in enumerate(values)]
    decoded = tuple_batch.rows(tuple_batch.decode(tuple_batch.encode(["v", "i"], rows)), 2)
    assert decoded == rows
    assert [type(v) for v, _ in decoded] == [type(v) for v in values]


@pytest.mark.parametrize("values", [
    [1.5, -0.0, float("inf"), float("nan")], [0, -(2 ** 63), 2 ** 63 - 1], [7] * 1000, [2.5],
    ["a", "", "héllo wörld", "\u65e5\u672c"], ["word"] * 32, [f"w{i}" for i in range(33)], [""],
])
def test_columns_built_without_pa_array_are_the_arrays_it_builds(values):
    """Numeric columns and small string columns without nulls skip pa.array: nothing differs."""
    built, serialized = tuple_batch.column_array(values)
    expected = pa.array(values)
    assert serialized is False
    assert built.type == expected.type
    assert built.validate(full=True) is None
    assert built.null_count == 0
    assert [b and b.to_pybytes() for b in built.buffers()[1:]] == \
        [b and b.to_pybytes() for b in expected.buffers()[1:]]


@pytest.mark.parametrize("one_each", [True, False, None])
def test_encode_parts_by_layout_writes_each_frame_s_own_schema(one_each):
    """A part encoded by its layout is byte for byte the part encoded by its own schema.

    ``one_each`` None: an untracked part (no acking columns).
    """
    counts = np.ones(3, dtype=np.int32) if one_each is not False \
        else np.array([1, 2, 0], dtype=np.int32)
    flat = np.arange(10, 10 + int(counts.sum()), dtype=np.uint64)
    for keys in ([4, 5, 6], [7, 8, 9]):  # the second hits the layout's cached schema
        base, schema = tuple_batch.build_rows(("word", "n"), [("a", 1), ("b", 2), ("c", keys[0])])
        assert base.schema is not schema and base.schema.equals(schema)
        part = base if one_each is None else tuple_batch.with_keys(
            tuple_batch.with_roots(base, flat, counts, one_each), np.array(keys, dtype=np.uint64))
        by_layout = tuple_batch.encode_parts(part, (schema, one_each))
        assert by_layout[0] == tuple_batch.encode_parts(part)[0]
        decoded = tuple_batch.decode(b"".join([by_layout[0], by_layout[1].to_pybytes()]))
        assert decoded.equals(part)
        assert tuple_batch.row_roots(decoded) == {
            True: [(10,), (11,), (12,)], False: [(10,), (11, 12), ()], None: None}[one_each]


@pytest.mark.parametrize("ids", [[], [5], [1, 2, 3], [7, 7, 7, 7], [1, 2, 3, 4, 5, 6],
                                 [1, 1, 1, 2, 2, 3, 3, 3, 3, 4], [2**64 - 1] * 3 + [2**63] * 2])
def test_single_roots_gives_each_row_its_root_and_shares_a_run_s_tuple(ids):
    roots = tuple_batch.single_roots(pa.array(ids, type=pa.uint64()))
    assert roots == [(root,) for root in ids]
    runs = sum(1 for i, root in enumerate(ids) if i == 0 or ids[i - 1] != root)
    if runs * 2 <= len(ids) and len(ids) >= 4:  # runs: one tuple object each
        assert len({id(t) for t in roots}) == runs


def test_key_hash_is_the_same_whatever_the_column_type():
    native = tuple_batch.decode(tuple_batch.encode(["k"], [(1,), (2,)]))
    pickled = tuple_batch.decode(tuple_batch.encode(["k"], [(1,), ("2",)]))
    a = tuple_batch.key_hash(tuple_batch.key_columns(native, [0]))
    b = tuple_batch.key_hash(tuple_batch.key_columns(pickled, [0]))
    c = tuple_batch.key_hash([tuple_batch.canonical_keys([1, 2])])
    assert a[0] == b[0] == c[0] and a[1] == c[1]
    assert isinstance(a, np.ndarray) and a.dtype == np.uint64


def test_string_hash_is_stable_and_independent_of_layout():
    values = ["", "a", "w1", "w10000", "é", "x" * 1000, "a"]
    whole = hashing.string_hash(pa.array(values))
    assert whole[1] == whole[6] and len(set(whole.tolist())) == 6
    sliced = hashing.string_hash(pa.array(["pad", *values]).slice(1))
    large = hashing.string_hash(pa.array(values, type=pa.large_string()))
    binary = hashing.string_hash(pa.array([v.encode() for v in values], type=pa.binary()))
    assert whole.tolist() == sliced.tolist() == large.tolist() == binary.tolist()
    one_by_one = [hashing.string_hash(pa.array([v]))[0] for v in values]
    assert whole.tolist() == one_by_one
    many = values * (hashing.DICTIONARY_MIN_ROWS // len(values) + 1)  # distinct values hashed once
    assert hashing.string_hash(pa.array(many)).tolist() == whole.tolist() * (len(many) // 7)
    assert hashing.string_hash(pa.array(values).dictionary_encode()).tolist() == whole.tolist()
    # the same in another process, whatever Python's own hash seed
    code = ("import pyarrow as pa; from heron_spark.wire import hashing; "
            f"print(hashing.string_hash(pa.array({values!r})).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout
    assert out.strip() == str(whole.tolist())


# The hash of these keys as every release so far computed it: equal keys must keep meeting in
# the same task across versions (a topology's state is keyed by where its keys went).
_PINNED = {"": 0x0, "a": 0xFE01E62CB71D9323, "w1": 0x8EF6B1C79F35987B,
           "w10000": 0x8ABB62C083E3E610, "hello world": 0x22BE61B4E396D0A8,
           "é": 0xCC7F4C5E3660DC4C, "漢字": 0x63412523B8228303, "x" * 300: 0xAA338F7614576F43,
           "y" * 200_000: 0x569D6D82AFDED300}


def test_string_hash_keeps_its_values():
    keys = list(_PINNED)
    assert hashing.string_hash(pa.array(keys)).tolist() == list(_PINNED.values())
    assert [hashing.text_hash(k.encode()) for k in keys] == list(_PINNED.values())


@functools.lru_cache(maxsize=1)
def _hash_cases() -> list[tuple[list[str], list[int]]]:
    """The values every layout is checked on, each with its hashes by the definition (made once
    for all layouts: the plain-Python definition is the slow part)."""
    rng = np.random.default_rng(7)
    alphabet = ["a", "b", "\x00", "ü", "漢", "😀"]
    short = ["".join(rng.choice(alphabet, size=n)) for n in rng.integers(0, 9, 40_000)]
    long = ["".join(rng.choice(alphabet, size=n)) for n in rng.integers(10, 60, 3_000)]
    cases = [short, short[:50], long, long * 2,  # long and repeated: hashed once per value
             ["", "q" * (hashing._CHUNK_BYTES + 5), "", "r" * 3, ""],  # one value beyond a chunk
             [""] * 3000, ["z"]]
    return [(values, [hashing.text_hash(v.encode()) for v in values]) for values in cases]


@pytest.mark.parametrize("layout", ["string", "large_string", "binary", "sliced", "dictionary"])
def test_string_hash_agrees_with_its_definition_in_every_layout(layout):
    """The vectorised hash (a running sum over the bytes, chunk by chunk; long values deduped
    first) gives ``text_hash``, the plain-Python definition, for every value: empty ones
    (also last), multi-byte ones, ones longer than a chunk, batches spanning many chunks."""
    for values, expected in _hash_cases():
        if layout == "string":
            array = pa.array(values)
        elif layout == "large_string":
            array = pa.array(values, type=pa.large_string())
        elif layout == "binary":
            array = pa.array([v.encode() for v in values], type=pa.binary())
        elif layout == "sliced":
            array = pa.array(["pad", "pad", *values, "tail"]).slice(2, len(values))
        else:
            array = pa.array(values).dictionary_encode()
        assert hashing.string_hash(array).tolist() == expected
        assert hashing.string_hash(array, dedupe=False).tolist() == expected


def test_string_hash_spreads_keys_evenly_over_tasks():
    keys = pa.array([f"w{i}" for i in range(1, 10001)])
    for tasks in (2, 3, 7):
        counts = np.bincount((hashing.string_hash(keys) % np.uint64(tasks)).astype(np.int64))
        assert counts.min() > 0.9 * 10000 / tasks, counts


def test_keys_with_lone_surrogates_still_hash():
    keys = tuple_batch.canonical_keys(["ok", "\ud800bad"])
    assert len(tuple_batch.key_hash([keys])) == 2

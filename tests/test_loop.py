"""The single-threaded I/O loop: framing over torn reads, coalesced writes, flow control,
closing, timers and hand-offs from other threads, on real socket pairs (no sleeps)."""

import socket
import threading

import pytest

from heron_spark.contract import roles
from heron_spark.wire import frames
from heron_spark.wire import loop as loop_module
from heron_spark.wire.connection import Listener, dial_address, local_socket_address
from heron_spark.wire.loop import Channel, Loop


def _pair(loop, received, closed=None, max_frame_bytes=1 << 20):
    mine, theirs = socket.socketpair()
    channel = Channel(loop, mine, "test", lambda c, kind, frame: received.append((kind, frame)),
                      (closed.append if closed is not None else None),
                      max_frame_bytes=max_frame_bytes)
    return channel, theirs


def _poll_until(loop, predicate, turns=1000):
    for _ in range(turns):
        if predicate():
            return
        loop.poll(0.05)
    raise AssertionError("condition not reached")


def test_frames_arrive_whole_and_in_order_from_one_byte_writes():
    loop = Loop()
    received = []
    channel, peer = _pair(loop, received)
    sent = [frames.frame(frames.CONTROL, bytes([i]) * i) for i in range(1, 40)]
    sent.append(frames.data_frame(frames.TUPLES, 1, 2, 3, b"s", b"x" * 5000))
    for byte in b"".join(sent):
        peer.send(bytes([byte]))
        loop.poll(0)
    _poll_until(loop, lambda: len(received) == len(sent))
    assert [frame for _, frame in received] == sent
    assert received[-1][0] == frames.DATA
    channel.close()
    peer.close()
    loop.close()


def test_many_frames_of_one_read_are_each_delivered_untouched():
    loop = Loop()
    received = []
    channel, peer = _pair(loop, received)
    sent = [frames.frame(frames.CONTROL, str(i).encode()) for i in range(500)]
    peer.sendall(b"".join(sent))
    _poll_until(loop, lambda: len(received) == 500)
    assert [frame for _, frame in received] == sent
    channel.close()
    peer.close()


def test_big_frames_are_received_in_place_across_torn_reads_between_small_ones():
    loop = Loop()
    received = []
    channel, peer = _pair(loop, received, max_frame_bytes=4 << 20)
    big = frames.data_frame(frames.TUPLES, 1, 2, 3, b"s", bytes(range(256)) * 4096)  # 1 MiB
    small = frames.frame(frames.CONTROL, b"after")
    stream = frames.frame(frames.CONTROL, b"before") + big + small + big
    for start in range(0, len(stream), 100_003):  # pieces that tear prefixes and bodies
        peer.sendall(stream[start:start + 100_003])
        loop.poll(0)
    _poll_until(loop, lambda: len(received) == 4)
    assert [frame for _, frame in received] == [frames.frame(frames.CONTROL, b"before"), big,
                                                small, big]
    assert [kind for kind, _ in received] == [frames.CONTROL, frames.DATA, frames.CONTROL,
                                              frames.DATA]
    assert type(received[1][1]) is bytearray and len(received[1][1]) >= loop_module.BIG_FRAME_BYTES
    peer.close()
    _poll_until(loop, lambda: channel.closed)
    loop.close()


def test_a_peer_hanging_up_inside_a_big_frame_closes_the_channel():
    loop = Loop()
    received, closed = [], []
    channel, peer = _pair(loop, received, closed)
    big = frames.data_frame(frames.TUPLES, 1, 2, 3, b"s", b"x" * 200_000)
    peer.sendall(big[:150_000])
    _poll_until(loop, lambda: channel.bytes_received == 150_000)
    peer.close()
    _poll_until(loop, lambda: channel.closed)
    assert received == [] and closed == [channel]
    loop.close()


def test_what_before_flush_queues_leaves_in_the_same_turn():
    loop = Loop()
    received = []
    channel, peer = _pair(loop, received)
    turns = []

    def before_flush():
        turns.append(loop.turns)
        if received:
            channel.send(frames.frame(frames.CONTROL, b"answer"))
            received.clear()

    peer.sendall(frames.frame(frames.CONTROL, b"question"))
    for _ in range(1000):
        loop.poll(0.05, before_flush)
        if channel.bytes_sent:
            break
    assert peer.recv(100) == frames.frame(frames.CONTROL, b"answer")
    assert channel.queued_bytes == 0 and len(turns) == loop.turns
    channel.close()
    peer.close()
    loop.close()


def test_output_is_coalesced_and_queued_when_the_peer_does_not_read():
    loop = Loop()
    channel, peer = _pair(loop, [])
    frame = frames.frame(frames.DATA, b"y" * 65536)
    for _ in range(200):  # ~13 MB: far more than the kernel buffers of a socket pair
        channel.send(frame)
    assert channel.queued_bytes == 200 * len(frame)  # nothing leaves before the turn ends
    loop.flush()
    assert 0 < channel.queued_bytes < 200 * len(frame)  # the kernel took what it could
    got = bytearray()
    peer.setblocking(False)
    while len(got) < 200 * len(frame):
        try:
            got += peer.recv(1 << 20)
        except BlockingIOError:
            loop.poll(0.05)  # writable again: the loop writes more on its own
    assert bytes(got) == frame * 200 and channel.queued_bytes == 0
    channel.close()
    peer.close()


def test_paused_channel_takes_nothing_until_resumed():
    loop = Loop()
    received = []
    channel, peer = _pair(loop, received)
    channel.pause_reading()
    peer.sendall(frames.frame(frames.CONTROL, b"held"))
    loop.poll(0.05)
    assert received == []
    channel.resume_reading()
    _poll_until(loop, lambda: received)
    assert received[0][1][frames.PREFIX_BYTES:] == b"held"
    channel.close()
    peer.close()


def test_peer_hang_up_and_bad_frames_close_once():
    loop = Loop()
    closed = []
    channel, peer = _pair(loop, [], closed)
    peer.close()
    _poll_until(loop, lambda: closed)
    channel.close()
    assert closed == [channel] and channel.closed and not channel.send(b"x")

    channel, peer = _pair(loop, [], closed, max_frame_bytes=10)
    peer.sendall(frames.frame(frames.CONTROL, b"z" * 11))
    _poll_until(loop, lambda: len(closed) == 2)
    channel, peer2 = _pair(loop, [], closed)
    peer2.sendall(frames.PREFIX.pack(1, 9) + b"?")  # unknown frame kind
    _poll_until(loop, lambda: len(closed) == 3)
    peer.close()
    peer2.close()


def test_timers_run_in_order_and_can_be_cancelled():
    now = [100.0]
    loop = Loop(clock=lambda: now[0])
    ran = []
    loop.call_at(101.0, lambda: ran.append("b"))
    loop.call_at(100.5, lambda: ran.append("a"))
    loop.call_at(100.7, lambda: ran.append("never")).cancel()
    assert loop.next_timer() == 100.5
    loop.poll(0)
    assert ran == []
    now[0] = 102.0
    loop.poll(0)
    assert ran == ["a", "b"] and loop.next_timer() is None


def test_hand_offs_from_other_threads_wake_the_loop():
    loop = Loop()
    ran = threading.Event()
    threading.Thread(target=loop.call_soon_threadsafe, args=(ran.set,)).start()
    _poll_until(loop, ran.is_set)


def test_local_listener_authenticates_over_a_unix_socket():
    loop = Loop()
    adopted = []
    address = local_socket_address("test")
    listener = Listener(address, 0, "s3cret", "topo",
                        lambda sock, response: loop.call_soon_threadsafe(
                            adopted.append, (sock, response.role, response.id)),
                        name="local").start()
    try:
        assert listener.address == address
        client = dial_address(address, "s3cret", "topo", roles.INSTANCE, 7)
        _poll_until(loop, lambda: adopted)
        sock, role, ident = adopted[0]
        assert (role, ident) == (roles.INSTANCE, 7) and sock.family == socket.AF_UNIX
        with pytest.raises(Exception):  # noqa: B017 - refused: AuthenticationError or reset
            dial_address(address, "wrong", "topo", roles.INSTANCE, 8)
        client.close()
        sock.close()
    finally:
        listener.close()


def test_a_frame_given_as_parts_arrives_as_one():
    import pyarrow as pa

    loop = Loop()
    received = []
    channel, peer = _pair(loop, received)
    body = pa.py_buffer(b"arrow" * 1000)
    parts = frames.data_frame_parts(frames.TUPLES, 1, 2, 3, b"s", [b"schema", body])
    whole = frames.data_frame(frames.TUPLES, 1, 2, 3, b"s", b"schema" + b"arrow" * 1000)
    assert channel.send(parts) and channel.queued_bytes == len(whole)
    loop.flush()
    got = bytearray()
    peer.settimeout(5)
    while len(got) < len(whole):
        got += peer.recv(1 << 16)
    assert bytes(got) == whole and channel.frames_sent == 1
    channel.close()
    peer.close()

"""Across hosts: heron_spark's TCP links cap the kernel's retransmission backoff at 1 s.

A link cut for T seconds leaves TCP's retransmission timer backed off to about T, so without
the cap a 10 s partition stalls each connection for up to 10 s more after healing (the hosts
tier measures the stall). Both ends of a link are capped: the dialled socket and the accepted
one. Kernels before Linux 6.15 refuse the option; there the test skips.
"""

from __future__ import annotations

import socket
import threading

import pytest

from heron_spark.contract import roles
from heron_spark.wire.connection import (_TCP_RTO_MAX_MS, RETRANSMIT_BACKOFF_MAX_MS, Listener,
                                         dial)
from heron_spark.testing import wait_until


def _supported() -> bool:
    with socket.socket() as sock:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS, RETRANSMIT_BACKOFF_MAX_MS)
        except OSError:
            return False
    return True


@pytest.mark.skipif(not _supported(), reason="the kernel has no TCP_RTO_MAX_MS (Linux < 6.15)")
def test_both_ends_of_a_link_cap_the_retransmission_backoff():
    accepted: list[socket.socket] = []
    ready = threading.Event()

    def on_peer(sock, response):
        accepted.append(sock)
        ready.set()

    listener = Listener("127.0.0.1", 0, "secret", "wc", on_peer, name="test").start()
    try:
        dialled = dial("127.0.0.1", listener.port, "secret", "wc", roles.STMGR, 1)
        wait_until(ready.is_set, 10, message="the listener to accept")
        for sock in (dialled, accepted[0]):
            assert sock.getsockopt(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS) == 1000
        dialled.close()
        accepted[0].close()
    finally:
        listener.close()

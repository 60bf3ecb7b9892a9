"""Spout and bolt that do nothing: plans for tests of the I/O-free cores, which never run them."""

from heron_spark import Bolt, Spout


class Words(Spout):
    """Declare one field, ``word``; emit nothing."""

    outputs = ["word"]

    def next_tuple(self):
        pass


class Count(Bolt):
    """Take any input; do nothing with it."""

    def process(self, tup):
        pass

"""``TextFileGenerator``: a source of the lines of the files a glob pattern matches."""

from __future__ import annotations

import glob
import logging

from heron_spark.streamlet.generator import Generator

log = logging.getLogger(__name__)


class TextFileGenerator(Generator):
    """A source that emits every line of the files a pattern matches.

    Emits every line (newline included, as heronpy's) of the files ``filepattern`` matches;
    partition i of n reads files i, i + n, ... (in sorted order). After the last line it emits
    nothing more, as heronpy's; heron_spark: ``bounded=True`` ends the source instead, so a
    bounded topology finishes.
    """

    def __init__(self, filepattern: str, *, bounded: bool = False) -> None:
        self._files = sorted(glob.glob(filepattern))
        self._bounded = bounded

    def setup(self, context) -> None:
        """Take this partition's files."""
        self._to_read = self._files[context.get_partition_index()::context.get_num_partitions()]
        self._to_read.reverse()
        self._lines: list[str] = []
        log.info("TextFileGenerator files to consume: %s", self._to_read[::-1])

    def get(self) -> str | None:
        """Return the next line; None (or ``StopIteration`` if bounded) once all are read."""
        while not self._lines:
            if not self._to_read:
                if self._bounded:
                    raise StopIteration
                return None
            path = self._to_read.pop()
            with open(path) as handle:
                self._lines = handle.readlines()
            self._lines.reverse()
        return self._lines.pop()

"""Run every Python code block of the README and of the docs site, as a reader would.

A page's blocks run in order in one namespace, so a block may use what an earlier one defined.
An HTML comment on the line before a block says how it is tested:

- no comment: it needs only the API (or ``run_local``) and runs in the default tier;
- ``<!-- docs-test: spark -->``: it submits to real Spark and runs in the ``spark`` tier
  (one test per page, which also runs the page's unmarked blocks);
- ``<!-- docs-test: compile -->``: it needs what the tests do not have (Kafka, a cluster, a
  Connect server, a DataFrame): it is only compiled.

The test's isolated conf (``tests/conftest.py``) keeps every submit's state in its tmp folder.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKS = ("spark", "compile")
_FENCE = re.compile(r"^```python\s*$")
_MARK = re.compile(r"^<!--\s*docs-test:\s*(\S+)\s*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One Python code block: its page, first line (1-based), source and mark."""

    page: Path
    line: int
    source: str
    mark: str | None


def blocks_of(page: Path) -> list[Block]:
    """Return the Python blocks of ``page`` in order, each with the mark before it."""
    lines = page.read_text().splitlines()
    found = []
    index = 0
    while index < len(lines):
        if _FENCE.match(lines[index]):
            previous = lines[index - 1] if index else ""
            match = _MARK.match(previous)
            end = index + 1
            while not lines[end].startswith("```"):
                end += 1
            found.append(Block(page, index + 2, "\n".join(lines[index + 1:end]) + "\n",
                               match.group(1) if match else None))
            index = end
        index += 1
    return found


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _run(blocks: list[Block], with_spark: bool, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["docs_example", "docs_example"])
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        code = compile(block.source, f"{_name(block.page)}:{block.line}", "exec")
        if block.mark == "compile" or (block.mark == "spark" and not with_spark):
            continue
        exec(code, namespace)  # noqa: S102 - the docs' own examples


_ALL = {page: blocks_of(page) for page in PAGES}
_WITH_BLOCKS = [page for page, blocks in _ALL.items() if blocks]
_WITH_SPARK = [page for page, blocks in _ALL.items() if any(b.mark == "spark" for b in blocks)]


def test_marks_are_known():
    """Every docs-test comment names a known mark and stands right before a Python block."""
    for page in PAGES:
        lines = page.read_text().splitlines()
        for index, line in enumerate(lines):
            match = _MARK.match(line)
            if match:
                assert match.group(1) in MARKS, (_name(page), index + 1, match.group(1))
                assert index + 1 < len(lines) and _FENCE.match(lines[index + 1]), \
                    (_name(page), index + 1)


def test_pages_have_blocks():
    """The collection finds the README's and the docs' examples (guards the parser)."""
    assert ROOT / "README.md" in _WITH_BLOCKS
    assert len(_WITH_BLOCKS) >= 8


@pytest.mark.parametrize("page", _WITH_BLOCKS, ids=_name)
def test_api_blocks(page, tmp_path, monkeypatch):
    """Run the page's blocks that need no Spark; compile the others."""
    _run(_ALL[page], False, tmp_path, monkeypatch)


@pytest.mark.spark
@pytest.mark.parametrize("page", _WITH_SPARK, ids=_name)
def test_spark_blocks(page, spark, tmp_path, monkeypatch):
    """Run every block of the page, those that submit to Spark included."""
    _run(_ALL[page], True, tmp_path, monkeypatch)

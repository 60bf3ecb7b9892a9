"""``benchmarks/hop_cost.py`` drives the real executors of the word count and counts every word.

Its figures are timings (not checked here); what is checked is that each round's frames really
reach the next task: the count task must have counted every word the spout's sentences hold,
in both tuple modes, one sentence or several per turn.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import hop_cost  # noqa: E402


@pytest.mark.parametrize("mode", hop_cost.MODES)
@pytest.mark.parametrize("sentences", [1, 3])
def test_every_word_reaches_the_count_task(mode, sentences):
    figures = hop_cost.measure(mode, sentences, turns=20)  # raises if a word went missing
    assert set(figures) == set(hop_cost.ROLES)
    assert all(value > 0 for value in figures.values())

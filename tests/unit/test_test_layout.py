"""The test tree itself: pytest imports test modules by their file name (no packages),
so two test files of one name in different folders break the whole run's collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    twice = sorted(name for name, count in names.items() if count > 1)
    assert twice == [], f"test modules named alike in different folders: {twice}"

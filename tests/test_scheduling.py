"""The suite's schedule names modules that exist (a renamed module would silently lose its place)."""

from __future__ import annotations

from conftest import REPO
from scheduling import LONGEST


def test_every_module_the_schedule_puts_first_exists() -> None:
    assert [m for m in LONGEST if not (REPO / m).is_file()] == []
    assert len(set(LONGEST)) == len(LONGEST)

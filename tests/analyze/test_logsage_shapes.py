"""Logs behind prefixes and wrappers no table lists keep their verdicts (tests/unknown_shapes.py's
generator, Hypothesis): every case of the three corpus folders, behind each generated wrapper,
gets the restart, category and primary ranks it gets as pasted.

The suite runs a few deterministic examples a property; `make fuzz` runs FAULTLOOP_FUZZ_EXAMPLES
divided by SHAPES_FUZZ_SHARE a property (each example reads the whole corpus twice over)."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given

from bounded import fuzz_settings
from conftest import REAL_LOG_FOLDERS, SHARED, needs_real_logs
from faultloop.analyze.logsage import Settings, analyze_log
from faultloop.score import corpus as evallogs
from unknown_shapes import WRAPPERS, Wrapper, stacked

FOLDERS = tuple(dict.fromkeys(f for f in (*REAL_LOG_FOLDERS, SHARED / "real_logs_b") if f.is_dir()))
SETTINGS = Settings(prefilter="python")


@cache
def _cases() -> tuple[tuple[str, tuple[str, ...], tuple[object, ...]], ...]:
    """(case, its lines, its verdict's key) of every corpus case."""
    out = []
    for case in evallogs.load_cases(*FOLDERS):
        lines = tuple(case.log.read_text(errors="replace").splitlines())
        out.append((case.name, lines, _key(list(lines))))
    return tuple(out)


def _key(lines: list[str]) -> tuple[object, ...]:
    v = analyze_log(lines, SETTINGS)
    return (v.restart, v.fault_category, tuple(v.primary_ranks))


def _changed(wrapper: Wrapper) -> dict[str, tuple[object, object]]:
    return {
        name: (key, got)
        for name, lines, key in _cases()
        if (wrapped := wrapper(list(lines))) != list(lines) and (got := _key(wrapped)) != key
    }


@needs_real_logs
@pytest.mark.parametrize("family", sorted(WRAPPERS))
def test_the_corpus_keeps_its_verdicts_behind_generated_prefixes(family: str) -> None:
    @fuzz_settings(suite_examples=2)
    @given(WRAPPERS[family])
    def behind(wrapper: Wrapper) -> None:
        changed = _changed(wrapper)
        assert not changed, (wrapper.describe, changed)

    behind()


@needs_real_logs
@fuzz_settings(suite_examples=3)
@given(stacked())
def test_the_corpus_keeps_its_verdicts_behind_two_generated_wrappers(wrapper: Wrapper) -> None:
    changed = _changed(wrapper)
    assert not changed, (wrapper.describe, changed)

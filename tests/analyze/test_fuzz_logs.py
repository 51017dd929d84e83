"""Fuzzing logsage (Hypothesis): random bytes, binary runs, very long lines, mixed encodings and
floods spliced into real logs. Every input ends in a verdict within the bounds stated below, and
a flood (lines repeated with new numbers) gets the verdict the full scan gives it, the line memo
turned off (logsage/repeats.py).

A short deterministic run is part of the suite; `make fuzz` runs FAULTLOOP_FUZZ_EXAMPLES examples
per property with fresh randomness. Inputs that once broke a bound are kept as @example here.
"""

from __future__ import annotations

import gzip
import re
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from bounded import fuzz_settings, in_child
from conftest import TESTS
from faultloop.analyze.logsage import repeats
from faultloop.analyze.logsage.engine import analyze_log

FUZZ = fuzz_settings(suite_examples=25)
# Bounds per input (up to a few MB): logsage's peak RSS grows by less than MEMORY_BOUND and it
# answers within TIME_BOUND_S.
MEMORY_BOUND = 256 << 20
TIME_BOUND_S = 30.0
ADDRESS_SPACE = 2 << 30  # the child's backstop, far above the bound

CORPUS = TESTS / "data" / "logs"
SEED_LOGS = [
    gzip.decompress(path.read_bytes()).decode().splitlines()
    for path in sorted((CORPUS / "cpu_gloo").glob("*.gz"))[::12]
] + [(CORPUS / name).read_text().splitlines() for name in ("nccl_barrier_4r.log", "nccl_cuda_error_16r.log")]


def _renumber(line: str, seed: int) -> str:
    """The same line with other numbers, as the next occurrence of a message prints it."""
    return re.sub(r"\d+", lambda m: str((int(m.group()) * 7 + seed) % (10 ** len(m.group()) or 10)), line)


@st.composite
def damaged_logs(draw: st.DrawFn) -> bytes:
    """A real log with floods, binary runs, long lines and other encodings spliced in."""
    lines: list[bytes] = [line.encode() for line in draw(st.sampled_from(SEED_LOGS))]
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(lines)))
        damage = draw(st.sampled_from(["flood", "binary", "long", "encoding", "cut"]))
        if damage == "flood" and lines:
            source = lines[draw(st.integers(0, len(lines) - 1))].decode(errors="replace")
            count = draw(st.integers(2, 20_000))
            lines[at:at] = [_renumber(source, i).encode() for i in range(count)]
        elif damage == "binary":
            lines.insert(at, draw(st.binary(min_size=1, max_size=4096)))
        elif damage == "long":
            lines.insert(at, draw(st.sampled_from([b"x", b"\x00", b"Error ", b"["])) * draw(st.integers(1, 1 << 20)))
        elif damage == "encoding" and lines:
            line = lines[at - 1 if at else 0].decode(errors="replace") + " \u00e9\u00df\u4e2d"
            lines[at - 1 if at else 0] = line.encode(draw(st.sampled_from(["latin-1", "utf-16", "cp1252"])), "replace")
        elif damage == "cut":
            del lines[at:]
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\r\n"]))


def _verdict(data: bytes, *, compare_full_scan: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "main.log"
        path.write_bytes(data)
        verdict = analyze_log(path).to_json()
        if compare_full_scan:
            repeats.Repeats.seen = lambda self, *args: None  # type: ignore[method-assign]
            full = analyze_log(path).to_json()
            if verdict != full:
                return f"differs from the full scan: {verdict} != {full}"
        return f"verdict: {verdict['restart']}"


def _check(data: bytes, *, compare_full_scan: bool = False) -> None:
    outcome = in_child(
        lambda: _verdict(data, compare_full_scan=compare_full_scan),
        memory_bytes=ADDRESS_SPACE,
        timeout_s=TIME_BOUND_S * (6 if compare_full_scan else 3),
    )
    assert outcome.outcome.startswith("verdict: "), outcome
    assert outcome.seconds < TIME_BOUND_S * (2 if compare_full_scan else 1), outcome
    assert outcome.grew_kib << 10 < MEMORY_BOUND, outcome


@FUZZ
@given(st.binary(max_size=1 << 16))
@example(b"\xff\xfe" + "Watchdog caught collective operation timeout".encode("utf-16-le"))
def test_random_bytes_end_in_a_verdict(data: bytes) -> None:
    _check(data)


# Inputs this test once failed on, kept whole: a flood of ten ranks' watchdog lines filling the
# capped collectives, then a line at an earlier SeqNum with another size, which counted repeats
# once read where the full scan did not (a desync instead of a hang).
FOUND = TESTS / "data" / "fuzz_logs"


@FUZZ
@given(damaged_logs())
@example((FOUND / "flood_past_the_collectives_cap.log").read_bytes())
def test_damaged_logs_end_in_a_verdict_and_floods_keep_it(data: bytes) -> None:
    _check(data, compare_full_scan=True)

"""The failure-mode patterns: each a test on a failing cell's grades, what it means, and where a
fix goes. The report lists the primary analyzer's cells per pattern."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from faultloop.contracts import FR_RANK, Grade, ScoreRecord
from faultloop.faults import FAULTS, GPU_ERROR_CATEGORY, HANG, RESTART, STOP


@dataclass(frozen=True)
class Pattern:
    name: str
    meaning: str
    fix: str
    test: Callable[[ScoreRecord], bool]


def _v(r: ScoreRecord, d: str) -> Grade:
    return r.grade(d)


def _restart_missed(r: ScoreRecord, expected: str) -> bool:
    """The analyzer got the restart decision wrong on a fault whose policy is `expected`."""
    fault = FAULTS.get(r.cell.fault_type)
    return _v(r, "restart_correct") == Grade.FALSE and fault is not None and fault.restart == expected


def _category(r: ScoreRecord) -> str:
    fault = FAULTS.get(r.cell.fault_type)
    return fault.category if fault else ""


PATTERNS = (
    Pattern(
        "rank_primary=false, rank_any=true",
        "rank detected but treated as collateral (named only as secondary)",
        "logsage rank attribution: promote the rank whose own lines carry the fault",
        lambda r: _v(r, "rank_primary") == Grade.FALSE and _v(r, "rank_any") == Grade.TRUE,
    ),
    Pattern(
        "rank_primary=partial",
        "injected rank is one of several primary ranks",
        "logsage rank attribution: demote ranks that only report the symptom (timeouts, peer exits)",
        lambda r: _v(r, "rank_primary") == Grade.PARTIAL,
    ),
    Pattern(
        "rank_any=false for rank-0",
        "rank-0 fault silences the watchdog on other ranks; no rank-0 signal",
        "logsage: explicit rank-0 heuristic (other ranks silent / waiting on rank 0)",
        lambda r: r.cell.rank == 0 and _v(r, "rank_any") == Grade.FALSE,
    ),
    Pattern(
        "rank_any=false (rank > 0)",
        "injected rank not named anywhere in the attribution",
        "logsage: extract ranks from watchdog / exit lines (label prefix, 'rank N')",
        lambda r: r.cell.rank != 0 and _v(r, "rank_any") == Grade.FALSE,
    ),
    Pattern(
        "fault_described=partial for crash types",
        "crash keywords present but fault type not named",
        "logsage rules: add SIGKILL/SEGFAULT/OS_ABORT/GPU_ERROR/exception keyword patterns",
        lambda r: _v(r, "fault_described") == Grade.PARTIAL and _category(r) != HANG,
    ),
    Pattern(
        "fault_described=partial for hangs",
        "hang recognised but its cause not named",
        "logsage rules: tell GPU sleep, GIL lock and SIGSTOP apart (who stops logging, how)",
        lambda r: _v(r, "fault_described") == Grade.PARTIAL and _category(r) == HANG,
    ),
    Pattern(
        "fault_described=false",
        "fault nature wrong (e.g. crash described as a collective timeout)",
        "logsage rules: check death-signal / exception lines before the timeout fallback",
        lambda r: _v(r, "fault_described") == Grade.FALSE,
    ),
    Pattern(
        "restart_correct=false for GPU_ERROR",
        "hardware error conflated with a recoverable hang",
        "logsage: distinguish cudaError (crash, STOP) from NCCL timeout (hang, RESTART)",
        lambda r: _category(r) == GPU_ERROR_CATEGORY and _v(r, "restart_correct") == Grade.FALSE,
    ),
    Pattern(
        "restart_correct=false, expected STOP",
        "analyzer restarts after a crash or code bug",
        "logsage restart policy: crash / exception verdicts map to STOP",
        lambda r: _category(r) != GPU_ERROR_CATEGORY and _restart_missed(r, STOP),
    ),
    Pattern(
        "restart_correct=false, expected RESTART",
        "analyzer stops on a transient hang or external signal",
        "logsage fast path: strengthen NCCL timeout / external signal -> RESTART IMMEDIATE",
        lambda r: _restart_missed(r, RESTART),
    ),
    Pattern(
        "fr_rank_correct=no_dumps",
        "NCCL watchdog did not fire before the job ended",
        "job env: adjust TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC / dump-on-timeout (not the analyzer)",
        lambda r: _v(r, FR_RANK) == Grade.NO_DUMPS,
    ),
    Pattern(
        "fr_rank_correct=node",
        "FR isolated the injected rank's node, not the rank",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, FR_RANK) == Grade.NODE,
    ),
    Pattern(
        "fr_rank_correct=segment",
        "FR isolated the injected rank's segment, not its node or rank",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, FR_RANK) == Grade.SEGMENT,
    ),
    Pattern(
        "fr_rank_correct=false",
        "FR suspects lie outside the injected rank's segment (symptom rank?)",
        "FR analyzer: not patched by the loop; note and escalate",
        lambda r: _v(r, FR_RANK) == Grade.FALSE,
    ),
)


def pattern_hits(rows: list[ScoreRecord]) -> list[tuple[Pattern, list[ScoreRecord]]]:
    scored = [r for r in rows if r.scored]
    return [(p, [r for r in scored if p.test(r)]) for p in PATTERNS]

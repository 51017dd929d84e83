"""The grades and the score dimensions: one row per dimension, every list of them derived.

The judge's, the stop condition's, the report's and upstream's column lists are selected from
`DIMENSIONS` by what its rows say, when they are used (never by position), so a new row is a new
column of scores.tsv, a new rate in the report and, if it says so, a new question for the judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum


class Grade(StrEnum):
    """One dimension's grade of one verdict, spelled as scores.tsv and upstream's table spell it."""

    TRUE = "true"
    PARTIAL = "partial"
    FALSE = "false"
    NA = "N/A"  # not graded: the run is invalid, or the dimension does not apply to the analyzer
    # how narrowly the flight-recorder verdict points at the injected rank
    RANK = "rank"
    NODE = "node"
    SEGMENT = "segment"
    NO_DUMPS = "no_dumps"

    @classmethod
    def of(cls, holds: bool) -> Grade:
        return cls.TRUE if holds else cls.FALSE


class Reads(StrEnum):
    """What a dimension grades: the run itself (job.json), a log verdict, an FR verdict, or the log
    verdicts of every attempt of a job's life (its decisions, against the oracle's)."""

    RUN = "run"
    LOG = "log"
    FR = "fr"
    LIFE = "life"


@dataclass(frozen=True)
class Dimension:
    """One score dimension: what it grades, its grades, which passes, and who else uses it."""

    name: str
    reads: Reads
    grades: tuple[Grade, ...]  # what it may be graded (the LLM judge's choices)
    passing: Grade = Grade.TRUE
    upstream: str = ""  # its short name in upstream's table and judge; "" for faultloop's own
    stop: bool = False  # part of upstream's stop condition, and of a cell's overall pass
    judge_rule: str = ""  # how upstream's LLM judge is told to grade it

    @property
    def judged(self) -> bool:
        """The LLM judge answers it: a dimension of upstream's judge about a verdict."""
        return bool(self.upstream) and self.reads is not Reads.RUN


_TF = (Grade.TRUE, Grade.FALSE)
_TPF = (Grade.TRUE, Grade.FALSE, Grade.PARTIAL)


@dataclass
class DimensionTable:
    """The score dimensions, in column order. Lists are selected by what the rows say, when used."""

    rows: tuple[Dimension, ...]

    def __iter__(self) -> Iterator[Dimension]:
        return iter(self.rows)

    def __getitem__(self, name: str) -> Dimension:
        return next(d for d in self.rows if d.name == name)

    def names(
        self,
        *,
        reads: Iterable[Reads] = tuple(Reads),
        stop: bool | None = None,
        upstream: bool | None = None,
        judged: bool | None = None,
    ) -> tuple[str, ...]:
        """The dimensions that read one of `reads` and, where given, are (not) in the stop
        condition, (not) in upstream's table, (not) answered by the judge."""
        wanted = set(reads)
        return tuple(
            d.name
            for d in self.rows
            if d.reads in wanted
            and stop in (None, d.stop)
            and upstream in (None, bool(d.upstream))
            and judged in (None, d.judged)
        )


FR_RANK = "fr_rank_correct"  # the one dimension an FR analyzer's own record grades
DIMENSIONS = DimensionTable(
    (
        Dimension("run_valid", Reads.RUN, _TF, upstream="valid"),
        Dimension(
            "restart_correct",
            Reads.LOG,
            (Grade.TRUE, Grade.FALSE, Grade.NA),
            upstream="restart",
            stop=True,
            judge_rule='"true" if the analyzer\'s restart decision equals the expected one, else "false".',
        ),
        Dimension(
            "rank_primary",
            Reads.LOG,
            (*_TF, Grade.PARTIAL),
            upstream="primary",
            stop=True,
            judge_rule='"true" if the injected rank is the only primary rank, "partial" if it is one of\n'
            'several primary ranks, else "false".',
        ),
        Dimension(
            "rank_any",
            Reads.LOG,
            _TF,
            upstream="any",
            judge_rule='"true" if the injected rank is named anywhere in the attribution, else "false".',
        ),
        Dimension("fault_category_correct", Reads.LOG, _TF),
        Dimension("fault_type_correct", Reads.LOG, _TF),
        Dimension(
            "fault_described",
            Reads.LOG,
            _TPF,
            upstream="described",
            stop=True,
            judge_rule='"true" if the fault type is named correctly, "partial" if only its nature\n'
            '(hang, crash, exception, signal, GPU error) is right, else "false".',
        ),
        Dimension(
            FR_RANK,
            Reads.FR,
            (Grade.RANK, Grade.NODE, Grade.SEGMENT, Grade.FALSE, Grade.NO_DUMPS),
            passing=Grade.RANK,
            upstream="fr",
            stop=True,
            judge_rule='"rank" if the FR missing ranks are exactly the injected rank, "node" if they all\n'
            'lie in the injected rank\'s node, "segment" if they all lie in its segment, "no_dumps" if there is\n'
            'no FR data, else "false".',
        ),
        # A job's life (score.life): the analyzer's decision for the next attempt at every attempt
        # that failed by its fault, against the oracle of the fault's recurrence (restart when it
        # passes, stop when it recurs at the same step, restart without its node when it is the node's)
        Dimension("policy_correct", Reads.LIFE, (Grade.TRUE, Grade.FALSE, Grade.NA)),
        Dimension("drain_correct", Reads.LIFE, (Grade.TRUE, Grade.FALSE, Grade.NA)),
    )
)


# Upstream's report table (watch_and_analyze.sh): the cell, then every dimension upstream grades, then
# its judge's notes. faultloop writes it first in its own report and reads it back from an adopted
# session's; the dimensions come from the table, so a new upstream dimension is a new column.
UPSTREAM_CELL_COLUMNS = ("#", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE")
UPSTREAM_NOTES_COLUMN = "judge_notes"


def upstream_table_columns() -> list[str]:
    """The columns of upstream's report table, in its order."""
    return [*UPSTREAM_CELL_COLUMNS, *DIMENSIONS.names(upstream=True), UPSTREAM_NOTES_COLUMN]

"""Log floods: a line that repeats an earlier line's template is counted, not analysed again.

A chatty rank printing the same failure every step (NCCL's watchdog, a retried connection) can
fill a log with a million lines that differ only in their numbers. Each line's template is its
source (the prefixes, so each rank's first occurrence is analysed) and its text with every digit
read as 0; once a template's first line is classified, later lines with it are only counted, with
the last one kept. Only templates whose rule keeps nothing but its first line per rank are
skipped this way (no rule reading pids, exit codes, rank lists or step counts from the line), so
the evidence, and the verdict, are those of a full scan; for collective timeouts, whose SeqNum
the attribution compares across ranks, the last occurrence is read as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.analyze.logsage.facts import NO_SOURCE, Source
from faultloop.analyze.logsage.rules import (
    BUSY,
    COLLECTIVE,
    RULES,
    STACK_DUMP,
    SUMMARY,
    TERMINATE,
    TIMEOUT,
    TRACEBACK,
    Rule,
)

MAX_TEMPLATES = 4096  # templates remembered at once; when full they are forgotten and learnt again
_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
# Rules whose effect on the facts a later line of the same template and source cannot change:
# the first line per (kind, rank) is kept anyway. Not blocks (counted per source), a terminate
# line (dropped when its what() follows), one-rank work (the latest counts), nor any rule reading
# a number other than a SeqNum (pids, exit codes, ranks, steps) from its line.
_NOT_REPEATABLE_KINDS = {TRACEBACK, STACK_DUMP, SUMMARY, TERMINATE, BUSY}
REPEATABLE = frozenset(
    rule.name
    for rule in RULES
    if rule.kind not in _NOT_REPEATABLE_KINDS and set(re.compile(rule.pattern).groupindex) <= {"seq"}
)
READ_LAST = (TIMEOUT, COLLECTIVE)  # the SeqNum of the last timeout counts too (first_seq, desyncs)

Key = tuple[Source, bytes, int | None, int]


@dataclass(slots=True)
class Repeat:
    """A template seen more than once: its rule and rank (from its first line), how many lines
    repeated it, and the last of them."""

    rule: Rule | None  # None: the template matches no rule
    rank: int | None
    first: int
    last: int = 0
    count: int = 0
    last_text: str = ""


class Repeats:
    """The templates of one log's scan."""

    def __init__(self) -> None:
        self.templates: dict[Key, Repeat] = {}
        self.forgotten: list[Repeat] = []  # repeated timeouts among forgotten templates
        self.forgotten_count = 0

    @staticmethod
    def key(source: Source, text: str, text_rank: int | None, layout: int) -> Key:
        """A line's template: its source, its text with digits as 0, the rank its text names where
        the source names none, and how many prefix shapes were known (they map sources to ranks)."""
        return source, text.encode("utf-8", "surrogatepass").translate(_DIGITS), text_rank, layout

    def seen(self, key: Key, line: int, text: str) -> Repeat | None:
        """The template's first line's reading when the line repeats a known template (counted)."""
        repeat = self.templates.get(key)
        if repeat is not None:
            repeat.count += 1
            repeat.last = line
            repeat.last_text = text
        return repeat

    def learn(self, key: Key, rule: Rule | None, rank: int | None, line: int) -> None:
        """Remember a classified line's template, when later lines of it may be skipped."""
        if rule is not None and rule.name not in REPEATABLE:
            return
        if len(self.templates) >= MAX_TEMPLATES:  # a log of ever new lines: memory stays bounded
            self.forgotten_count += sum(r.count for r in self.templates.values())
            self.forgotten += self._timeouts()[: MAX_TEMPLATES - len(self.forgotten)]
            self.templates.clear()
        if rule is not None and rule.kind == COLLECTIVE and key[0] == NO_SOURCE:
            return  # the rest of a wrapped line takes its rank from the line before
        self.templates[key] = Repeat(rule, rank, line)

    def _timeouts(self) -> list[Repeat]:
        return [r for r in self.templates.values() if r.count and r.rule is not None and r.rule.kind in READ_LAST]

    def read_last(self) -> list[Repeat]:
        """Repeated collective timeouts, whose last line is read after the scan."""
        return [*self.forgotten, *self._timeouts()]

    def counted(self) -> int:
        """Lines counted instead of analysed."""
        return self.forgotten_count + sum(r.count for r in self.templates.values())

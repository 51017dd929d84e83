"""Log floods: a line that repeats an earlier line's template is counted, not analysed again.

A chatty rank printing the same failure every step (NCCL's watchdog, a retried connection) can
fill a log with a million lines that differ only in their numbers. A line's template is the line
behind its prefixes with every digit read as 0, per source (the srun label, host, [rankN]... the
prefixes name), so each rank's first occurrences are analysed. A template is learnt from its second
line read in full (most lines of an ordinary log are the only ones of their shape, and learning one
costs a reading per digit run of its prefixes); later lines with it are only counted, without
classifying them.

Only templates whose reading cannot depend on their numbers are skipped this way: rules that keep
nothing but their first line per rank (none reading pids, exit codes, rank lists or step counts,
none whose pattern names a digit), with the rank from the prefixes rather than the text. So the
evidence, and the verdict, are those of a full scan; a repeated collective timeout still gives its
SeqNum, op and size, in order (the attribution compares them across ranks, and what it keeps of
them is capped, so the order matters), from one regex instead of the whole rule table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter

from faultloop.analyze.logsage import prefilter, reading
from faultloop.analyze.logsage.collectives import count_collective
from faultloop.analyze.logsage.context import WORK_RE
from faultloop.analyze.logsage.facts import Facts
from faultloop.analyze.logsage.framing import Source
from faultloop.analyze.logsage.rules import RULES
from faultloop.analyze.logsage.vocab import (
    BUSY,
    COLLECTIVE,
    STACK_DUMP,
    SUMMARY,
    TERMINATE,
    TIMEOUT,
    TRACEBACK,
    Rule,
)

MAX_TEMPLATES = 4096  # templates remembered at once; when full they are forgotten and learnt again
_DIGIT_RUN = re.compile(r"\d+")
MAX_LINE = 4096  # longer lines are always read: the memo holds at most MAX_TEMPLATES x MAX_LINE bytes
_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
# Rules whose effect on the facts a later line of the same template and source cannot change:
# the first line per (kind, rank) is kept anyway. Not blocks (counted per source), a terminate
# line (dropped when its what() follows), one-rank work (the latest counts), nor any rule reading
# a number other than a SeqNum (pids, exit codes, ranks, steps) from its line.
_NOT_REPEATABLE_KINDS = {TRACEBACK, STACK_DUMP, SUMMARY, TERMINATE, BUSY}
_GROUP_NAME_RE = re.compile(r"\(\?P<(\w+)>")  # a named group (read from the text: no row compiled for it)
REPEATABLE = frozenset(
    rule.name
    for rule in RULES
    if rule.kind not in _NOT_REPEATABLE_KINDS and set(_GROUP_NAME_RE.findall(rule.pattern)) <= {"seq"}
)
# Anchors of rules whose pattern names a digit (`error [1-9]`): lines holding one are always read.
DIGIT_ANCHORS = tuple(
    anchor
    for rule in RULES
    if re.search(r"\d", re.sub(r"\\d|\{\d+(?:,\d*)?\}", "", rule.pattern))
    for anchor in rule.anchors
)
# Lines always read in full: a progress bar may glue several lines into one, and faulthandler's
# dump headers are counted per line.
_ALWAYS_READ = ("/s", "/it", "Timeout (")
COLLECTIVE_KINDS = (TIMEOUT, COLLECTIVE)  # every repeat's SeqNum still counts, in order (first_seq, desyncs)


@dataclass(slots=True)
class Repeat:
    """A template seen more than once: its rule and rank (from its first line), and how many lines
    repeated it."""

    rule: Rule | None  # None: the template matches no rule
    rank: int | None
    first: int
    length: int  # of the prefixes in front of the program's words (lines of one shape: the same)
    count: int = 0
    # a collective timeout's WORK_RE groups in a line of the template: where its first line had
    # them (lines of one shape hold their digits, and so every group, at the same places)
    work: Callable[[str], tuple[str, ...]] | None = None


class Repeats:
    """The templates of one log's scan. A template is the line's shape (digits as 0) with the
    digits of its prefixes that name its source (the srun label, host, [rankN]...: those framing
    reads another source from when they change, tried when its first line is read in full); the
    prefixes' other digits (timestamps, pids) change from line to line and are not part of it.
    Lines of one shape are framed alike, so the digits that name the first line's source name
    every line's. `layout` (how many prefix shapes
    were known) is part of every key: the prefixes' mapping to ranks may change while new shapes
    appear."""

    def __init__(self) -> None:
        # (shape, layout) -> (where the digits that name the source stand: lines of one shape hold
        # their digits at the same places, the templates by those digits)
        self.prefixes: dict[
            tuple[bytes, int], tuple[Callable[[str], object], dict[object, Repeat], tuple[slice, ...]]
        ] = {}
        self.template_count = 0
        self.forgotten_count = 0
        self.once: set[tuple[bytes, int]] = set()  # shapes read in full once: learnt when read again
        # The prefilter's output lines (`line:offset:text`, bytes) of templates known here, by their
        # shape (digits as 0; so the line number's and offset's digit counts are part of it): (layout,
        # the source digits' places in such a line, the repeats by those digits). Only ASCII lines,
        # whose bytes stand where their characters do: one of these shapes is one line shape, its
        # source digits at the same places behind the same `line:offset:` width (the fourth item).
        # Dropped whenever the templates change, so a line found here is one `seen` would find.
        self.raw: dict[bytes, tuple[int, Callable[[bytes], object], dict[object, Repeat], int]] = {}

    @staticmethod
    def _shape(line: str) -> bytes:
        return line.encode("utf-8", "surrogatepass").translate(_DIGITS)

    def seen(self, line: str, layout: int) -> Repeat | None:
        """The reading of the line's template (the words stand behind its `length` of prefixes),
        when the line repeats one (then it is counted); its prefixes are not parsed."""
        if len(line) > MAX_LINE:  # (a line always read has no learnt shape: its marks hold no digit)
            return None
        shape = line.encode("utf-8", "surrogatepass").translate(_DIGITS)  # _shape, inlined: a hot loop
        known = self.prefixes.get((shape, layout))
        if known is None:
            return None
        repeat = known[1].get(known[0](line))
        if repeat is None:
            return None
        repeat.count += 1
        return repeat

    def seen_raw(self, raw: bytes, line: str, layout: int, repeat: Repeat) -> None:
        """Remember the prefilter's output line `raw` (`line` behind its `line:offset:`), which
        `seen` found a repeat of, so that its like is recognised by its bytes alone."""
        if not raw.isascii():
            return
        shape = raw.translate(_DIGITS)
        known = self.prefixes[line.encode().translate(_DIGITS), layout]
        width = raw.index(b":", raw.index(b":") + 1) + 1
        entry = self.raw.get(shape)
        if entry is None or entry[0] != layout:
            if len(self.raw) >= MAX_TEMPLATES:
                self.raw.clear()
            at = known[2]
            digits: Callable[[bytes], object] = (
                itemgetter(*(slice(s.start + width, s.stop + width) for s in at)) if at else _no_digits
            )
            entry = self.raw[shape] = (layout, digits, {}, width)
        entry[2][entry[1](raw)] = repeat

    def learn(
        self, line: str, source: Source, text: str, layout: int, rule: Rule | None, rank: int | None, number: int
    ) -> None:
        """Remember the template of a line read in full (`text`: the line without its prefixes,
        `source`: what they name), when later lines of it may be skipped; `rank` must come from
        the prefixes alone."""
        if rule is not None and (rule.name not in REPEATABLE or (rule.kind == COLLECTIVE and text == line)):
            return  # (a collective line without prefixes may take its rank from the line before)
        if len(line) > MAX_LINE or any(mark in line for mark in _ALWAYS_READ) or not line.endswith(text):
            return
        if any(anchor in text for anchor in DIGIT_ANCHORS):
            return
        shape = self._shape(line)
        if (shape, layout) not in self.prefixes and (shape, layout) not in self.once:
            # most lines of an ordinary log are the only ones of their shape: learning what names a
            # template's source costs a reading per digit run, so a shape is learnt when it comes back
            if len(self.once) >= MAX_TEMPLATES:
                self.once.clear()
            self.once.add((shape, layout))
            return
        if self.template_count >= MAX_TEMPLATES:  # a log of ever new lines: memory stays bounded
            self.forgotten_count = self.counted()
            self.template_count = 0
            self.prefixes.clear()
        self.raw.clear()  # the templates change
        length = len(line) - len(text)
        known = self.prefixes.get((shape, layout))
        if known:  # another source's line of a learnt template: its digits name the source at the same places
            digits, by_source, _ = known
        else:
            naming = tuple(
                slice(*run.span()) for run in _DIGIT_RUN.finditer(line, 0, length) if _names_source(line, run, source)
            )
            digits = itemgetter(*naming) if naming else _no_digits  # a line's digits at those places, at C speed
            by_source = {}
            self.prefixes[shape, layout] = (digits, by_source, naming)
        work = WORK_RE.search(line, length) if rule is not None and rule.kind in COLLECTIVE_KINDS else None
        key = digits(line)
        self.template_count += key not in by_source
        by_source[key] = Repeat(rule, rank, number, length, work=work and _groups_at(work))

    def counted(self) -> int:
        """Lines counted instead of analysed."""
        repeats = (repeat for _, by_source, _ in self.prefixes.values() for repeat in by_source.values())
        return self.forgotten_count + sum(repeat.count for repeat in repeats)


def _names_source(line: str, run: re.Match[str], source: Source) -> bool:
    """Whether a digit run of the line's prefixes names its source: the line's reading (its
    prefixes by the grammar or by their shape, a rank-like token) finds another source where the
    run holds another number of the same length."""
    other = "".join(str((int(digit) + 1) % 10) for digit in run.group())
    return reading.read(line[: run.start()] + other + line[run.end() :]).source != source


def _groups_at(work: re.Match[str]) -> Callable[[str], tuple[str, ...]]:
    """WORK_RE's four groups taken from another line of the matched line's shape, by place (an
    absent group as '')."""
    return itemgetter(*(slice(*work.span(g)) if work.start(g) >= 0 else slice(0, 0) for g in range(1, 5)))


def _no_digits(line: str | bytes) -> object:
    """The source digits of a line whose prefixes name its source with none (a host name alone)."""
    return None


CountedLine = tuple[int, bytes, int | None]  # (line base, the prefilter's line, rank)


@dataclass(slots=True)
class Counted:
    """What the lines unrepeated() counted since the last row it gave said: the first and the last
    of them with a rule (None: none yet), for the scan's loop to catch up on before its next row."""

    first: CountedLine | None = None
    last: CountedLine | None = None


def unrepeated(
    facts: Facts, blocks: Iterator[prefilter.Block], repeats: Repeats, counted: Counted
) -> Iterator[tuple[int, int, str, str, bytes]]:
    """The prefiltered lines as rows (and as the prefilter printed them), but for those of a
    template that `repeats` knows by the printed bytes: a flood's line is counted here, undecoded,
    its line number unparsed (`counted` keeps what the scan's loop needs of those: see scan's caught_up)."""
    raw_known = repeats.raw
    for line_base, start, lines in blocks:
        last = None  # the last counted line with a rule
        for raw in lines:
            known = raw_known.get(raw.translate(_DIGITS))
            if known is not None and known[0] == len(facts.label_pairs):
                repeat = known[2].get(known[1](raw))
                if repeat is not None:
                    repeat.count += 1
                    if repeat.rule is not None:
                        if repeat.work is not None:  # a collective's SeqNum is compared across ranks, in order
                            text = raw[known[3] :].rstrip(b"\r").decode()
                            count_collective(facts, repeat.work(text), text, repeat.rank, repeat.length)
                        if counted.first is None:
                            counted.first = (line_base, raw, repeat.rank)
                        last, rank = raw, repeat.rank
                    continue
            if last is not None:
                counted.last, last = (line_base, last, rank), None
            yield *prefilter.row(line_base, start, raw), raw
        if last is not None:
            counted.last = (line_base, last, rank)


def line_of(at: CountedLine) -> int:
    """The log's line number of a counted line (its range's base plus the number printed before it)."""
    return at[0] + int(at[1][: at[1].index(b":")])

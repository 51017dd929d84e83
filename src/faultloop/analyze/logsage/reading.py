"""Reading one line: where it came from, the program's words, and the row they match.

What logsage knows reads first: framing.LAYERS' prefixes, then RULES in table order. Only where
that finds no row, or a row but no rank, is the line read by its shape, and a shape never goes
ahead of a known template:
  1. prefixes no layer lists, by their shape (framing.peel_shapes: tags, `key=value` headers, other
     timestamps, host and container tags, JSON records): RULES then read the words behind them,
     as they would without the prefix, provided the prefix read ends before the row's template;
  2. a row's template anchored at the start of the program's words, found anywhere on the line
     (shapes.ANYWHERE): what stands before it is framing;
  3. the shapes of what programs say (shapes.SHAPES): Python's exception line, a launcher's report
     of a child, a failure statement at any log level.
Where nothing else names the line's rank, a rank-like token in what stands before the template
(`rank=3`, `<rank 3>`) does, with the role framing.GUESSED (the verdict's confidence says so).

A record a line opens (a traceback, a summary, a launcher's report) is read the way its first line
was (Reading: with shapes or not, behind the same lead), so its other lines are untangled from
other ranks' behind the same prefixes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from faultloop.analyze.logsage import framing, shapes
from faultloop.analyze.logsage.framing import GUESSED, NO_SOURCE, Source
from faultloop.analyze.logsage.rules import RULES
from faultloop.analyze.logsage.vocab import (
    EXCEPTION_KIND,
    FIRST_EXIT,
    MISSING,
    RECORD,
    STACK_DUMP,
    SUMMARY,
    TRACEBACK,
    Rule,
)

Found = tuple[Rule, re.Match[str]]
# each row's regex, compiled when a line first needs it: a run pays for the rows its log's lines
# try, not for the table (compiling all of it is a sixth of a start)
_COMPILED: list[re.Pattern[str] | None] = [None] * len(RULES)
# groups with which a row names whose line it is (a rank, a local rank, a pid, srun's tasks)
_NAMING_GROUPS = ("rank", "rank2", "local", "pid", "tasks")
# the rows that open a record read after the scan (or, for a summary's record, read with the line above)
RECORD_KINDS = (TRACEBACK, STACK_DUMP, FIRST_EXIT, MISSING, SUMMARY, RECORD)
_TEXT_RANK_RE = re.compile(r"\[(?:PG(?: ID)? 0 (?:PG GUID \S+ )?)?Rank (\d+)\]")  # default group only


def _rules_by_anchor() -> dict[str, list[int]]:
    """anchor -> the rules (table positions) that name it: a line is tried only against those."""
    index: dict[str, list[int]] = {}
    for position, rule in enumerate(RULES):
        for anchor in rule.anchors:
            index.setdefault(anchor, []).append(position)
    return index


_RULES_BY_ANCHOR = _rules_by_anchor()


@dataclass(frozen=True, slots=True)
class Reading:
    """How a line's prefixes were read, so that the other lines of a record it opens (a traceback,
    a summary, a launcher's report) are read the same way: by the grammar or with shapes, behind
    the shape of the lead its template stood behind (`leads`: that lead, then its shorter starts),
    and what their prefixes then say (`shows`: the source before any rank guessed from the lead)."""

    shaped: bool = False
    leads: tuple[re.Pattern[str], ...] = ()
    shows: Source = NO_SOURCE

    def read(self, raw: str, required: bool = True) -> tuple[Source | None, str]:
        """A line's source and words, read this way. Where the line does not stand behind the
        whole lead, its source is None (another process's line), or with `required` false (a
        launcher's report, whose lines do not all repeat the lead) the longest start of the lead
        it stands behind is taken off."""
        source, text = framing.peel_shapes(raw)[:2] if self.shaped else framing.peel(raw)
        for i, lead in enumerate(self.leads):
            if i and required:
                return None, text
            if m := lead.match(text):
                return source, text[m.end() :]
        return (None if self.leads and required else source), text


@dataclass(slots=True)
class Line:
    """A line as read: its source, the program's words (from the template's start where a shape
    found it), the row they match, how it was read, and the prefix read off the raw line (the
    rest of a line a progress bar glued on stands behind it too)."""

    source: Source
    text: str
    found: Found | None
    reading: Reading
    prefix: str = ""


def _compiled(position: int) -> re.Pattern[str]:
    """The regex of the row at `position` in RULES."""
    rx = _COMPILED[position]
    if rx is None:
        rx = _COMPILED[position] = re.compile(RULES[position].pattern)
    return rx


def classify(text: str) -> Found | None:
    """The first rule (in table order) whose anchor is in the text and whose regex matches it."""
    return _classify_memo(text) if len(text) <= framing.MEMO_LINE else _classify(text)


def _classify(text: str) -> Found | None:
    candidates = sorted({i for anchor, rules in _RULES_BY_ANCHOR.items() if anchor in text for i in rules})
    for i in candidates:
        m = _compiled(i).search(text)
        if m:
            return RULES[i], m
    return None


# the words of a line are classified wherever it is read, and its probes (repeats.py) share them
_classify_memo = lru_cache(maxsize=framing.MEMO_LINES)(_classify)


def text_rank(text: str) -> int | None:
    """The rank torch's own `[Rank N]` (of the default process group) names in the words."""
    m = _TEXT_RANK_RE.search(text)
    return int(m.group(1)) if m else None


def read(part: str) -> Line:
    """The line read as the module docstring says: what logsage knows first, then shapes."""
    source, text, skipped = framing.peel_known(part)
    found = classify(text)
    named = source.label is not None or source.inner is not None or text_rank(text) is not None
    if found and named and not skipped and not framing.holds_json(part):
        return _record_lead(_line(source, text, found, False, part))  # its prefixes or torch's words name it
    shaped_source, shaped_text, shaped = framing.peel_shapes(part)
    if shaped:
        shaped_found = classify(shaped_text)
        if shaped_found and _kept(part, text, found, shaped_text, shaped_found):
            return _record_lead(_guessed(_line(shaped_source, shaped_text, shaped_found, True, part), part))
        if found and part.endswith(text):  # the shapes cut into the template: what stands before it frames it
            return _record_lead(_framed(part, text, found))
    if found:
        return _record_lead(_guessed(_line(source, text, found, False, part), part))
    if shaped:
        source, text = shaped_source, shaped_text
    return _by_shape(_line(source, text, None, shaped, part), part)


def _kept(part: str, text: str, found: Found | None, shaped_text: str, shaped_found: Found) -> bool:
    """Whether the template the grammar's reading found survives the shapes read: they end before
    its match, or the same row reads the same facts behind them (a JSON record's message is all
    inside the record)."""
    return (
        not found
        or not part.endswith(shaped_text)
        or len(shaped_text) >= len(text) - found[1].start()
        or (shaped_found[0] is found[0] and shaped_found[1].groupdict() == found[1].groupdict())
    )


def _framed(part: str, text: str, found: Found) -> Line:
    """A template found by the grammar's reading behind shapes that reach into it: what stands
    before the template is framing, read by its shape."""
    before = part[: len(part) - len(text) + found[1].start()]
    source, rest, _ = framing.peel_shapes(before)
    words = text[found[1].start() :]
    refound = _compiled(RULES.index(found[0])).match(words)
    line = Line(
        source, words, (found[0], refound or found[1]), Reading(True, (), source), before[: len(before) - len(rest)]
    )
    return _guessed(line, part, rest)


def _line(source: Source, text: str, found: Found | None, shaped: bool, part: str) -> Line:
    prefix = part[: len(part) - len(text)] if part.endswith(text) else ""
    return Line(source, text, found, Reading(shaped, (), source), prefix)


def _record_lead(line: Line) -> Line:
    """A line that opens a record (a traceback, a summary, a launcher's multi-line report) with
    words before its template: the record's other lines stand behind the same lead."""
    if line.found and line.found[0].kind in RECORD_KINDS and not line.reading.leads:
        lead = line.text[: line.found[1].start()]
        if lead.strip():
            rank = line.source.inner if line.source.role == GUESSED and line.reading.shows.role != GUESSED else None
            line.reading = Reading(line.reading.shaped, lead_shapes(lead, rank), line.reading.shows)
    return line


def _named(source: Source, found: Found, text: str) -> bool:
    """Whether the line's prefixes, its row or torch's `[Rank N]` name whose line it is."""
    groups = found[1].groupdict()
    return (
        source.label is not None
        or source.inner is not None
        or any(groups.get(g) is not None for g in _NAMING_GROUPS)
        or text_rank(text) is not None
    )


def _guessed(line: Line, part: str, lead: str = "") -> Line:
    """The line with the rank a rank-like token in front of its template (in its prefix, or in
    the lead a shape found it behind) names, where its prefixes, its row and its words name none."""
    if line.found is None or _named(line.source, line.found, line.text):
        return line
    if (rank := framing.rank_like(line.prefix + lead + line.text[: line.found[1].start()])) is not None:
        line.source = line.source._replace(role=GUESSED, inner=rank)
    return line


def _by_shape(line: Line, part: str) -> Line:
    """No row reads the words: a row's template anywhere on the line, else a shape of what
    programs say; what stands before the template is framing (a record the template opens is
    read behind the shape of that lead)."""
    text = line.text
    candidates = {i for anchor, rules in _RULES_BY_ANCHOR.items() if anchor in text for i in rules}
    for i, _, anywhere in shapes.ANYWHERE:
        if i in candidates and (where := anywhere.search(text)):
            words = text[where.start() :]
            if m := _compiled(i).search(words):
                return _behind(line, words, (RULES[i], m), part)
    said = shapes.read_shape(text)
    if said is None:
        return line
    if said[0].kind == EXCEPTION_KIND and said[1].start() > 0:  # the exception line starts at its class
        words = text[said[1].start() :]
        return _behind(line, words, shapes.read_shape(words) or said, part)
    line.found = said
    return _guessed(line, part)


def _behind(line: Line, words: str, found: Found, part: str) -> Line:
    """The line's template found behind a lead (the start of its words that no shape reads; the
    blank that separates them is the lead's, where the template starts with blanks)."""
    if words[:1].isspace() and words.strip() and not line.text[: len(line.text) - len(words)][-1:].isspace():
        words = words[1:]
        found = (found[0], _compiled(RULES.index(found[0])).search(words) or found[1])
    lead = line.text[: len(line.text) - len(words)]
    read = Line(line.source, words, found, line.reading, line.prefix)
    _guessed(read, part, lead)
    rank = read.source.inner if read.source.role == GUESSED and line.source.role != GUESSED else None
    read.reading = Reading(line.reading.shaped, lead_shapes(lead, rank) if lead else (), line.source)
    return read


def lead_shapes(lead: str, rank: int | None) -> tuple[re.Pattern[str], ...]:
    """The shape of a lead no grammar reads, to find it in front of a record's other lines, then
    of its shorter starts (cut at its blanks), longest first: its digits any number (times and
    counters move on), but the rank it names; its blanks any run, but the last (a traceback's
    indentation follows it)."""
    tokens = re.split(r"(\d+|[ \t]+)", lead.rstrip(" \t"))
    parts = []
    for token in tokens:
        if token.isdigit():
            parts.append(token if rank is not None and int(token) == rank else r"\d+")
        elif token and not token.strip():
            parts.append(r"[ \t]+")
        else:
            parts.append(re.escape(token))
    tail = re.escape(lead[len(lead.rstrip(" \t")) :])
    cuts = [i for i, token in enumerate(tokens) if token and not token.strip()]
    shorter = [re.compile("".join(parts[:i]) + r"[ \t]") for i in reversed(cuts)]
    return (re.compile("".join(parts) + tail), *shorter)

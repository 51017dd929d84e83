"""What a healthy run prints is not evidence: the model of lines clean runs print (healthy.tsv) and
of the lines the message catalog says mean nothing on their own.

A line that a clean run prints too (the built-in workload's own lines, a framework's banners and
notices at an error severity, a launcher's settings) says nothing about why this run failed, even
where its words hold `error` or `failed` (`NCCL_ASYNC_ERROR_HANDLING is deprecated`, `Setting
OMP_NUM_THREADS ... to avoid your system being overloaded`). healthy.tsv holds their templates, one
row each with the program that prints it. The catalog's templates whose verdict alone is no
failure (messages.py: restart NOT_FOUND: a launcher's teardown, a retried worker group, a warning
torch prints while it waits) join them, each line of such a template read with its values as any
text and its numbers as any number. The generic reading (fallback.py) skips the lines they match.
Bounded: at most MAX_ROWS rows, each pattern at most MAX_PATTERN characters, matched on a line's
first MAX_LINE characters; read once, in file order, deterministic.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from faultloop.analyze.logsage.messages import load_catalog
from faultloop.faults import ERRORS_NOT_FOUND

MODEL = Path(__file__).with_name("healthy.tsv")
MAX_ROWS = 1024
MAX_PATTERN = 400
MAX_LINE = 1024
_COLUMNS = ("program", "pattern", "why")
MIN_LITERAL = 16  # a catalog line with fewer fixed characters is too plain to mark a line healthy
_VALUE_RE = re.compile(r"\{\w+\}")
_LEADING_TAGS_RE = re.compile(r"^(?:\[[^\]]*\]\s*)+")


@lru_cache(maxsize=1)
def model(path: Path = MODEL) -> re.Pattern[str]:
    """The healthy lines' templates as one regex; ValueError naming the file and row for a bad row."""
    patterns: list[str] = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if tuple(header) != _COLUMNS:
            raise ValueError(f"{path}: the header must be {' '.join(_COLUMNS)} (tabs), not {header!r:.80}")
        for number, row in enumerate(f, start=2):
            if not row.strip() or row.startswith("#"):
                continue
            cells = row.rstrip("\n").split("\t")
            if len(cells) != len(_COLUMNS):
                raise ValueError(f"{path}:{number}: {len(cells)} columns, not {len(_COLUMNS)}")
            pattern = cells[1]
            if len(pattern) > MAX_PATTERN or len(patterns) >= MAX_ROWS:
                raise ValueError(f"{path}:{number}: a pattern over {MAX_PATTERN} characters or over {MAX_ROWS} rows")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{path}:{number}: pattern: {exc}") from None
            patterns.append(f"(?:{pattern})")
    return re.compile("|".join([*patterns, *_quiet_templates()]) or r"(?!)")


def _quiet_templates() -> list[str]:
    """The lines of the catalog's templates whose verdict alone is no failure, as patterns: a
    value (`{pid}`) any text, a number any number, the tags it starts with left out."""
    out = []
    for template in load_catalog():
        if template.restart != ERRORS_NOT_FOUND:
            continue
        for line in template.template.split("\\n"):
            literal = _VALUE_RE.split(_LEADING_TAGS_RE.sub("", line.strip()))  # tags: framing peels them
            if sum(len(part.strip()) for part in literal) < MIN_LITERAL:
                continue
            parts = [re.sub(r"\d+", r"\\d+", re.escape(part)) for part in literal]
            out.append("(?:" + ".{0,200}?".join(parts) + ")")
    return out


def printed(words: str) -> bool:
    """Whether a healthy run prints these words too (the program's words, prefixes peeled)."""
    return model().search(words[:MAX_LINE]) is not None

"""The message catalog: the failure templates that the programs behind a training log print, read
from their own source, with what each means and the verdict it should lead to (catalog/*.tsv).

RULES are written against these templates, not against corpus lines; the tests instantiate every
template with SAMPLE_VALUES and check that logsage classifies it as the catalog says. A template's
`\\n` separates the lines of a multi-line record; `{name}` is a value the program fills in.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from faultloop.analyze.logsage import ablation
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP

CATALOG = Path(__file__).parent / "catalog"
COLUMNS = ("program", "source", "versions", "template", "meaning", "category", "restart")
# versions: the program's releases that print the template in this wording, as comma-separated
# version clauses (`>=1.10,<2.2`, `>=2.18`), read from the source at those releases' tags;
# `unchecked` where no one has read them yet.
UNCHECKED = "unchecked"
_VERSIONS_RE = re.compile(r"(?:[<>=!~]=?\s*[\w.*+-]+)(?:\s*,\s*[<>=!~]=?\s*[\w.*+-]+)*")
RESTART_LABELS = {"RESTART": RESTART, "STOP": STOP, "NOT_FOUND": ERRORS_NOT_FOUND}
# what a program fills in, one plausible value each (ranks and GPUs other than 0, so that a
# verdict that falls back to rank 0 shows)
SAMPLE_VALUES = {
    "rank": "3",
    "local": "3",
    "dev": "3",
    "pid": "4242",
    "tid": "4250",
    "host": "node07",
    "port": "29500",
    "job": "81234",
    "bus": "0000:3b:00.0",
    "seq": "1184",
    "n": "58",
    "ms": "600000",
    "path": "/workspace/train.py",
    "text": "bad value",
}


@dataclass(frozen=True)
class Template:
    """One failure message as its program prints it, and what logsage should make of it alone."""

    program: str
    source: str
    versions: str  # the releases that print this wording (comma-separated version clauses), or UNCHECKED
    template: str
    meaning: str
    category: str  # logsage's fault_category
    restart: str  # the restart decision (RESTART, STOP or ERRORS NOT FOUND)
    where: str  # catalog file and row, for messages

    def example(self) -> list[str]:
        """The template as a log shows it: sample values filled in, one string per line."""
        return self.template.format(**SAMPLE_VALUES).split("\\n")


def read_table(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """The rows of a tab-separated table with these columns, each with its `file:row` for
    messages; a header other than `columns` is one error naming the file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if tuple(reader.fieldnames or ()) != columns:
            raise ValueError(f"{path}: columns must be {', '.join(columns)}")
        for row_no, row in enumerate(reader, start=2):
            yield f"{path.name}:{row_no}", row


def load_catalog(folder: Path = CATALOG, left_out: frozenset[str] = ablation.LEFT_OUT) -> list[Template]:
    """Every template of every catalog file, checked for its columns and labels, but those of the
    programs left out (ablation.py)."""
    templates = []
    for path in sorted(folder.glob("*.tsv")):
        for where, row in read_table(path, COLUMNS):
            if row["restart"] not in RESTART_LABELS or not all(row.values()):
                raise ValueError(f"{where}: every field is needed; restart is RESTART, STOP or NOT_FOUND")
            if row["versions"] != UNCHECKED and not _VERSIONS_RE.fullmatch(row["versions"]):
                raise ValueError(f"{where}: versions {row['versions']!r} is not a version range like >=1.10,<2.2")
            if not ablation.keeps((row["program"], row["source"]), left_out):
                continue
            templates.append(
                Template(
                    row["program"],
                    row["source"],
                    row["versions"],
                    row["template"],
                    row["meaning"],
                    row["category"],
                    RESTART_LABELS[row["restart"]],
                    where,
                )
            )
    return templates

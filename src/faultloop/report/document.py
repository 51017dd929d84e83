"""The report as a document: sections of paragraphs, bullet lists and tables, which the modules that
word a section build and `render` writes as markdown and as HTML. It imports nothing of the report,
so every module that words a section can use it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    graded: bool = False  # cells hold grades (true, partial, rank, ...) that the page colours


Block = str | list[str] | Table  # a paragraph, a bullet list, a table


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")

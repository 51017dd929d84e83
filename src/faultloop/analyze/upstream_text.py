"""Upstream's five-part text, read once for every analyzer that prints it (a `command` analyzer's
text form, NVRx's nvrx_logsage printout): the restart line, the explanation, `Attribution:
Primary issues: [...], Secondary issues: [...]`, a detail line and `checkpoint_saved`. Only the
decision is required. nvrx_logsage prints the parts inside its result's repr
(`primary_issues=[...]`, `checkpoint_saved_flag=1`), which the same patterns accept."""

from __future__ import annotations

import re
from dataclasses import dataclass

from faultloop.faults import RESTART_DECISIONS

# Upstream's decisions plus the one its analyzer prints when its LLM fails.
DECISIONS = (*RESTART_DECISIONS, "LLM FAILURE")
_DECISION_RE = re.compile("|".join(re.escape(d) for d in DECISIONS))
_ATTRIBUTION_RE = re.compile(
    r"Primary issues:\s*\[([^\]]*)\],?\s*Secondary issues:\s*\[([^\]]*)\]"
    r"|primary_issues=\[([^\]]*)\],\s*secondary_issues=\[([^\]]*)\]"  # nvrx_logsage's result repr
)
_CHECKPOINT_RE = re.compile(
    r"checkpoint_saved\W+(?:(?P<saved>true)|false)|checkpoint_saved_flag=(?:(?P<flag>1)|0)", re.IGNORECASE
)


@dataclass(frozen=True)
class FiveParts:
    decision: str
    explanation: str
    primary_ranks: list[int]
    secondary_ranks: list[int]
    detail: str
    checkpoint_saved: bool


def read(text: str, *, anywhere: bool = False) -> FiveParts | None:
    """The parts of the text; None without a decision. The decision starts a line, the explanation
    is the next line and the detail the line after the attribution; with `anywhere` (a printout
    that quotes the parts) the first decision anywhere, and no explanation or detail."""
    lines = [line.strip() for line in text.splitlines()]
    at = None if anywhere else next((i for i, line in enumerate(lines) if _DECISION_RE.match(line)), None)
    found = _DECISION_RE.search(text) if anywhere else _DECISION_RE.match(lines[at]) if at is not None else None
    if found is None:
        return None
    attribution = _ATTRIBUTION_RE.search(text)
    groups = [g for g in attribution.groups() if g is not None] if attribution else ["", ""]
    primary, secondary = ([int(x) for x in re.findall(r"-?\d+", group)] for group in groups[:2])
    checkpoint = _CHECKPOINT_RE.search(text)
    explanation = detail = ""
    if at is not None:
        rest = [line for line in lines[at + 1 :] if line]
        after = next((i for i, line in enumerate(rest) if "Primary issues:" in line), None)
        explanation = rest[0] if rest and after != 0 else ""
        if after is not None and after + 1 < len(rest) and not _CHECKPOINT_RE.match(rest[after + 1]):
            detail = rest[after + 1]
    saved = bool(checkpoint and (checkpoint["saved"] or checkpoint["flag"]))
    return FiveParts(found.group(0), explanation, primary, secondary, detail, saved)

"""faultloop's combined verdict: the primary log analyzer's and the first FR analyzer's verdicts of
a cell merged into one (which rank, which fault, restart), deterministically, scored as the log
analyzer `combined` beside the others. Its input is the two verdicts the analysis rules wrote
(`Input.VERDICTS`); it is run by the analyze layer's merge step (`faultloop analyzers merge`,
which rule judge_score calls before it scores) into analysis/combined/.

The log says what happened (a death signal, an exception, a timeout) and what to do; the flight
recorder says which rank did not join the collective everyone else waited in. Merge rules, in
order (docs/analyzers.md, "The combined verdict"):

1. restart, category, fault type, evidence and checkpoint_saved are the log's: the dumps say
   nothing about them. Without a log verdict the restart is ERRORS NOT FOUND.
2. No usable FR verdict (it failed, no dumps, no suspect): the log's ranks (`log_only`).
3. The log names no primary rank: the FR suspects are the primaries (`fr_fills`).
4. The FR suspects are the log's primaries: kept (`agree`).
5. The FR suspects are some of the log's primaries: narrowed to them, the others secondary
   (`fr_narrows`).
6. FR names one rank the log did not make primary, and the log calls it a hang or does not name
   its culprit with high confidence: FR's rank is primary, the log's secondary (`fr_overrides`).
   In a hang the rank missing from the collective is the origin, while the log mostly shows its
   victims timing out; a log reader that is unsure (or states no confidence, as naive readers
   and NVRx's do) has only the first error line, often a victim's.
7. Otherwise (a crash, exception or signal the log pins on a rank with high confidence, or FR
   names several ranks): the log stands, FR's other suspects become secondary (`log_stands`).

Over a job's life the log's decision for the next attempt stands (`next_attempt`); its drain
follows the merged primaries where the merge changed them and the log drains its culprits' nodes
(`drain`).
   A rank that died leaves no dump or a stale one: FR sees it missing but cannot tell a death
   from a hang, and the log's own death line for that rank can.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from faultloop.analyze.analyzer import Answer, Input, Kind, Spec, VerdictsSource, log_answer
from faultloop.analyze.running import AnalyzerFailure
from faultloop.contracts import LIFE_RECORD, RANK_HOSTS, FrVerdict, LogVerdict, NodeRef
from faultloop.faults import ERRORS_NOT_FOUND, HANG

NAME = "combined"
LOG_ONLY, FR_FILLS, AGREE, FR_NARROWS, FR_OVERRIDES, LOG_STANDS, FR_ONLY = (
    "log_only", "fr_fills", "agree", "fr_narrows", "fr_overrides", "log_stands", "fr_only",
)  # fmt: skip
HIGH = "high"  # the log analyzer's confidence that its culprit's own line shows the fault


def _suspects(fr: FrVerdict | None) -> list[int]:
    if fr is None or fr.no_dumps:
        return []
    return sorted(set(fr.suspect_ranks))


def merge(log: LogVerdict | None, fr: FrVerdict | None) -> LogVerdict:
    """One verdict from a log verdict and an FR verdict (either may be None), by the rules above;
    its `merge_rule` (in `extra`) says which applied."""
    suspects = _suspects(fr)
    if log is None:
        if not suspects:
            raise AnalyzerFailure("neither the log analyzer nor the FR analyzer gave a verdict to merge")
        nothing = LogVerdict(ERRORS_NOT_FOUND, [], [], None, None, "", "", [], False)
        return _verdict(nothing, suspects, [], FR_ONLY, "no log verdict; the FR suspects")
    primary = sorted(set(log.primary_ranks))
    secondary = sorted(set(log.secondary_ranks) - set(primary))
    if not suspects:
        return _verdict(log, primary, secondary, LOG_ONLY, "no FR suspect; the log's ranks")
    if not primary:
        return _verdict(log, suspects, [r for r in secondary if r not in suspects], FR_FILLS, "the log names no rank")
    if suspects == primary:
        return _verdict(log, primary, secondary, AGREE, "log and FR name the same ranks")
    if set(suspects) < set(primary):
        rest = sorted(set(primary) - set(suspects) | set(secondary))
        return _verdict(log, suspects, rest, FR_NARROWS, "FR narrows the log's primaries")
    unsure = log.fault_category == HANG or log.confidence != HIGH
    if unsure and len(suspects) == 1:
        rest = sorted((set(primary) | set(secondary)) - set(suspects))
        why = "a hang" if log.fault_category == HANG else "the log is not sure of its rank"
        return _verdict(log, suspects, rest, FR_OVERRIDES, f"{why}: the rank missing from the collective")
    rest = sorted((set(secondary) | set(suspects)) - set(primary))
    return _verdict(log, primary, rest, LOG_STANDS, "the log pins the fault on its rank; FR's suspects secondary")


def drain(log: LogVerdict, primary: list[int]) -> list[NodeRef]:
    """The nodes to drain: the log's, or where the merge named other primaries and the log drains
    the nodes of its culprits (a node-bound failure), those primaries' nodes as the log's life
    record maps ranks to hosts (FR finds the rank, the log knows where it ran)."""
    life = log.extra.get(LIFE_RECORD)
    hosts = life.get(RANK_HOSTS) if isinstance(life, dict) else None
    if not log.drain_nodes or sorted(primary) == sorted(log.primary_ranks) or not isinstance(hosts, dict):
        return list(log.drain_nodes)
    named = [hosts.get(str(rank)) for rank in primary]
    if not named or not all(isinstance(host, str) for host in named):
        return list(log.drain_nodes)  # a primary the log does not place: keep the log's drain
    return sorted({str(host) for host in named})


def _verdict(log: LogVerdict, primary: list[int], secondary: list[int], rule: str, why: str) -> LogVerdict:
    """The log's restart, next attempt, fault, cited lines and checkpoint_saved with the merged
    ranks, and the nodes to drain for them."""
    return LogVerdict(
        log.restart,
        primary,
        [r for r in secondary if r not in primary],
        log.fault_category,
        log.fault_type,
        f"{rule}: {why}. {log.explanation}".strip(),
        log.detail,
        list(log.evidence),
        log.checkpoint_saved,
        mode=NAME,
        drain_nodes=drain(log, primary),
        next_attempt=log.next_attempt,
        extra={"merge_rule": rule},
    )


class Combined(Kind):
    name = NAME
    input = Input.VERDICTS
    summary = "faultloop's merge of the primary log analyzer's and the first FR analyzer's verdicts (config `combined`)"

    def fingerprint_settings(self, spec: Spec, config: Mapping[str, Any]) -> Any:
        return None  # the merge rules' code and the verdict's contract: editing them re-merges every cell

    def run(self, spec: Spec, source: Any) -> Answer:
        assert isinstance(source, VerdictsSource)
        merged = merge(source.log(), source.fr())
        inputs = {
            "log": source.log_run.analyzer if source.log_run else "",
            "fr": source.fr_run.analyzer if source.fr_run else "",
        }
        return log_answer(replace(merged, extra={**merged.extra, "inputs": inputs}))


KIND = Combined()

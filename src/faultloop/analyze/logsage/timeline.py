"""The facts of a log read as a timeline: per rank, when it first suffered (a symptom), when the
launcher began stopping it and its first own failure before either; and the lines read in the
light of the others before that (a watchdog's aborts are a hang's victims, a CUDA hint alone is
what is left of a GPU error)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from signal import Signals

from faultloop.analyze.logsage.facts import NEVER, Evidence, Facts
from faultloop.analyze.logsage.rules import STOP_SIGNALS
from faultloop.analyze.logsage.scan import add, drop
from faultloop.analyze.logsage.vocab import (
    CUDA_HINT,
    DEATH,
    EXCEPTION_KIND,
    FATAL,
    GPU,
    GPU_HARDWARE,
    NETWORK_KIND,
    OOM_KIND,
    ORIGINS,
    SIGNAL,
    SYMPTOMS,
    TIMEOUT,
    WEAK_ORIGINS,
)
from faultloop.signals import signal_name

_OWN_ERRORS = (EXCEPTION_KIND, FATAL, GPU, GPU_HARDWARE, OOM_KIND, NETWORK_KIND)


@dataclass
class Timeline:
    """Per rank (None: a line that names no rank): first symptom, stop by the launcher, first
    own failure before either (strong, and weak: a cut traceback or a bare exit status)."""

    symptom_at: dict[int | None, int]
    stopped_at: dict[int, int]
    origin_at: dict[int | None, Evidence]
    weak_at: dict[int | None, Evidence]

    @property
    def first_symptom(self) -> int:
        return min(self.symptom_at.values(), default=NEVER)

    @property
    def victims(self) -> set[int]:
        return {r for r in self.symptom_at if r is not None} | set(self.stopped_at)


def ranks_with(facts: Facts, kinds: Iterable[str]) -> set[int]:
    kinds = set(kinds)
    return {r for (k, r) in facts.first if k in kinds and r is not None}


def evidence_of(facts: Facts, *kinds: str) -> list[Evidence]:
    """The kept evidence of these kinds (every rank), in log order."""
    return sorted((ev for (k, _), ev in facts.first.items() if k in kinds), key=lambda e: e.line)


def first_line(facts: Facts, kinds: Iterable[str]) -> int:
    return next((ev.line for ev in evidence_of(facts, *kinds)), NEVER)


def reinterpret(facts: Facts) -> None:
    """Read lines in the light of the others. Several ranks dying by SIGABRT with no error of their
    own were aborted by the NCCL watchdog after a stuck collective: victims of a hang. A CUDA hint
    line with no CUDA error just before it is all that is left of a cut-off GPU error."""
    aborted = [
        r
        for r, ex in facts.exits.items()
        if ex.signal == Signals.SIGABRT.name and not ex.stopped and not any((k, r) in facts.first for k in _OWN_ERRORS)
    ]
    if len(aborted) > 1:
        for r in aborted:
            death = facts.first.get((DEATH, r))
            if death:
                drop(facts, death)
                add(facts, Evidence(death.line, death.text, TIMEOUT, r, "watchdog_abort"))
    errors = [ev.line for (k, _), ev in facts.first.items() if k in (GPU, OOM_KIND, GPU_HARDWARE)]
    for (kind, rank), ev in list(facts.first.items()):
        if kind == CUDA_HINT and not any(0 <= ev.line - line <= 5 for line in errors):
            add(facts, Evidence(ev.line, ev.text, GPU, rank, ev.rule, ev.hint))


def read_timeline(facts: Facts) -> Timeline:
    symptom_at: dict[int | None, int] = {}
    for (kind, rank), ev in facts.first.items():
        if kind in SYMPTOMS:
            symptom_at[rank] = min(symptom_at.get(rank, NEVER), ev.line)
    stopped_at = {facts.pid_rank[p]: ln for p, ln in facts.closed_pids.items() if p in facts.pid_rank}
    for rank, ex in facts.exits.items():
        if ex.stopped:
            stopped_at[rank] = min(stopped_at.get(rank, NEVER), ex.line)
    first_symptom = min(symptom_at.values(), default=NEVER)
    for (kind, rank), ev in facts.first.items():  # a stop signal after others failed: the job's teardown
        if kind == SIGNAL and rank is not None and ev.line > first_symptom and named_signal(ev.text) in STOP_SIGNALS:
            stopped_at[rank] = min(stopped_at.get(rank, NEVER), ev.line)

    def before_own_end(kinds: tuple[str, ...]) -> dict[int | None, Evidence]:
        out: dict[int | None, Evidence] = {}
        for (kind, rank), ev in facts.first.items():
            if rank is None and kind == SIGNAL and ev.line > first_symptom and named_signal(ev.text) in STOP_SIGNALS:
                continue  # a rank-less stop signal after a rank had failed: the job's teardown
            limit = min(symptom_at.get(rank, NEVER), stopped_at.get(rank, NEVER) if rank is not None else NEVER)
            if kind in kinds and ev.line < limit and (rank not in out or ev.line < out[rank].line):
                out[rank] = ev
        return out

    return Timeline(symptom_at, stopped_at, before_own_end(ORIGINS), before_own_end(WEAK_ORIGINS))


def named_signal(text: str) -> str | None:
    m = re.search(r"\bSIG[A-Z0-9]+\b", text)
    if m:
        return m.group(0)
    m = re.search(r"signal[: ]*(\d+)", text, re.I)
    return signal_name(int(m.group(1))) if m else None

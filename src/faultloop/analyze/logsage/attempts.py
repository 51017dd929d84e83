"""A job's attempts as a log shows them: where a launcher or the scheduler restarted the job inside
one log (BOUNDARIES, each written from the program that prints it, with its releases), how far an
attempt trained (its last completed step), and which host each rank ran on.

Logs often carry their own restarts: torch's elastic agent restarts its worker group in place
(`--max-restarts`), NVRx's ft_launcher runs training cycles, SLURM requeues a job whose output file
then holds every run. Each restart ends one attempt and begins the next; `segments` cuts a log
there. Several nodes' agents report the same restart, so lines of one restart are one cut: a
numbered line (the restart count a line states) cuts only where its number is new.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from faultloop.analyze.logsage import framing, prefilter
from faultloop.analyze.logsage.framing import _HOST as HOST_GRAMMAR


class Begins(StrEnum):
    """Where the next attempt begins relative to a boundary line."""

    AFTER = "after"  # the line ends an attempt (a launcher announcing the restart)
    AT = "at"  # the line is the new attempt's first (its environment, its rendezvous record)


@dataclass(frozen=True)
class Boundary:
    """A line a program prints where a job restarts. Named groups: `left`/`max` (restarts left of a
    budget: this is restart max - left + 1) or `count` (the restarts so far); `when` (a time that
    tells one restart from the next); none of them: a restart without a number."""

    program: str
    source: str
    versions: str
    anchor: str  # a literal of every line it matches (the prefilter's)
    pattern: re.Pattern[str]
    begins: Begins


# BOUNDARIES: the lines that end one attempt of a job and begin the next in the same log.
BOUNDARIES: tuple[Boundary, ...] = (
    Boundary(
        "torch",
        "torch/distributed/elastic/agent/server/api.py (SimpleElasticAgent._invoke_run); NVRx's ft_launcher "
        "(fault_tolerance/launcher.py and its _torch_elastic_compat copy) prints the same words",
        "torch >=1.9; NVRx >=0.1",
        "attempts left; will restart worker group",
        re.compile(r"Worker group [A-Z]+\. (?P<left>\d+)/(?P<max>\d+) attempts left; will restart worker group"),
        Begins.AFTER,
    ),
    Boundary(
        "torch",
        "torch/distributed/elastic/agent/server/api.py (SimpleElasticAgent._rendezvous: the record "
        "`Rendezvous complete for workers. Result:` holds `restart_count=N` on its own line)",
        ">=1.9",
        "restart_count=",
        re.compile(r"^\s*restart_count=(?P<count>\d+)\s*$"),
        Begins.AT,
    ),
    Boundary(
        "NVRx",
        "fault_tolerance/launcher.py (the any-failed restart policy before 0.6)",
        ">=0.3,<0.6",
        "restart attempts left; restarting worker group",
        re.compile(r"(?P<left>\d+)/(?P<max>\d+) restart attempts left; restarting worker group"),
        Begins.AFTER,
    ),
    Boundary(
        "NVRx",
        "fault_tolerance/launcher.py (a healthy node joins the restart another node began)",
        ">=0.6",
        "Joining cluster restart",
        re.compile(r"Joining cluster restart \(group_rank=\d+\)"),
        Begins.AFTER,
    ),
    Boundary(
        "SLURM",
        "src/common/env.c (a requeued job's environment; job scripts print it, `env` dumps it)",
        ">=14.03",
        "SLURM_RESTART_COUNT",
        re.compile(r"\bSLURM_RESTART_COUNT\s*[=:]\s*(?P<count>\d+)"),
        Begins.AT,
    ),
    Boundary(
        "SLURM",
        "src/slurmd/slurmstepd/req.c (each node's step daemon prints it, at the same time)",
        ">=14.11",
        "DUE TO JOB REQUEUE",
        re.compile(r"CANCELLED AT (?P<when>\S+) DUE TO JOB REQUEUE"),
        Begins.AFTER,
    ),
)
ANCHORS = tuple(sorted({b.anchor for b in BOUNDARIES}))
MAX_ATTEMPTS = 32  # the most restarts of one log read as attempts (the latest: a flood of them is bounded)


@dataclass(frozen=True)
class Segment:
    """One attempt's part of a log: bytes [start, end), from line `first_line`; `attempt` is its
    number in the job where the log says it (a log may begin in the middle of a job's life)."""

    start: int
    end: int
    first_line: int
    attempt: int


@dataclass(frozen=True)
class _Cut:
    offset: int
    line: int  # the new attempt's first line
    attempt: int
    numbered: bool
    when: str | None


def _restart(boundary: Boundary, m: re.Match[str]) -> int | None:
    """The number of the attempt a boundary line begins, where it states one."""
    groups = m.groupdict()
    if groups.get("left") is not None:
        return int(groups["max"]) - int(groups["left"]) + 2
    if groups.get("count") is not None:
        return int(groups["count"]) + 1
    return None


def _line_end(path: Path, offset: int) -> int:
    with open(path, "rb") as f:
        f.seek(offset)
        f.readline()
        return f.tell()


def segments(path: Path, prefilter_name: str = "auto") -> list[Segment]:
    """The log's attempts in order: one segment for a log without a restart; of a log with more
    than MAX_ATTEMPTS restarts, the attempts after the last MAX_ATTEMPTS ones (each is analysed)."""
    size = path.stat().st_size
    cuts: deque[_Cut] = deque(maxlen=MAX_ATTEMPTS)
    dropped = 0
    current, numbered_seen = 1, False
    for hit in prefilter.hits(path, prefilter_name, anchors=ANCHORS):
        _, words = framing.peel(hit.text)
        for boundary in BOUNDARIES:
            m = boundary.anchor in words and boundary.pattern.search(words)
            if not m:
                continue
            number, when = _restart(boundary, m), m.groupdict().get("when")
            at = boundary.begins == Begins.AT
            start, first = (hit.offset, hit.line) if at else (_line_end(path, hit.offset), hit.line + 1)
            last = cuts[-1] if cuts else None
            if number is not None:
                numbered_seen = True
                if number <= current:
                    break  # another node's report of a restart already cut
                if last is not None and not last.numbered and last.attempt == current:
                    cuts[-1] = _Cut(last.offset, last.line, number, True, last.when)  # its number, said later
                else:
                    dropped += len(cuts) == MAX_ATTEMPTS
                    cuts.append(_Cut(start, first, number, True, when))
                current = number
            elif when is not None and last is not None and last.when == when:
                break  # the same requeue, another node's step daemon
            elif numbered_seen and boundary.program != "SLURM":
                break  # a healthy node joining a restart a numbered line already cut
            else:
                dropped += len(cuts) == MAX_ATTEMPTS
                cuts.append(_Cut(start, first, current + 1, False, when))
                current += 1
            break
    first_attempt = max(1, cuts[0].attempt - 1) if cuts and cuts[0].numbered else 1
    head = [] if dropped else [(0, 1, first_attempt)]  # with restarts dropped, from the first kept one
    starts = [*head, *((c.offset, c.line, c.attempt) for c in cuts)]
    out = []
    for (start, line, attempt), (end, _, _) in zip(starts, [*starts[1:], (size, 0, 0)], strict=True):
        if end > start:
            out.append(Segment(start, end, line, attempt))
    return out or [Segment(0, size, 1, first_attempt)]


# -- how far an attempt trained --------------------------------------------------------------------
# a completed training step as trainers print it: Megatron-LM's `iteration      100/   5000 |` (also
# NeMo's and the built-in workload's), DeepSpeed's `step=100, skipped=`, loggers' `global_step=100`
STEP_RE = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\||\bstep=(\d+), skipped=|\bglobal_step\s*[=:]\s*(\d+)")
STEP_WINDOWS = (64 << 10, 1 << 20, 8 << 20)  # how far back from an attempt's end its last step is looked for


def last_step(path: Path, segment: Segment) -> int | None:
    """The last completed step the attempt printed (looked for in its tail, a wider one only where
    the narrower holds none), or None."""
    with open(path, "rb") as f:
        for window in STEP_WINDOWS:
            start = max(segment.start, segment.end - window)
            f.seek(start)
            text = f.read(segment.end - start).decode("utf-8", "replace")
            found = list(STEP_RE.finditer(text))
            if found:
                return int(next(g for g in found[-1].groups() if g is not None))
            if start == segment.start:
                break
    return None


# -- which host each rank ran on -------------------------------------------------------------------
HEAD_BYTES = 4 << 20  # where ranks say where they run: the start of an attempt
# a rank stating its host at start, as trainers do (the built-in workload: `> rank 3/8 (local rank 1)
# on node1: ...`; `global rank 3 ... on host nid0012`)
RANK_HOST_RE = re.compile(
    r"\b(?:global[ _])?rank[ =:]*(?P<rank>\d+)(?: ?/ ?\d+)?\b[^:\n]{0,60}?\bon (?:host |node )?"
    rf"(?P<host>{HOST_GRAMMAR})(?=[\s:,;)]|$)",
    re.IGNORECASE,
)
# torch's failure summary record (torch/distributed/elastic/multiprocessing/errors/__init__.py,
# >=1.9): `  host      : nid0012` on the line above `  rank      : 3 (local_rank: 1)`
SUMMARY_HOST_RE = re.compile(r"^\s*host\s+: (?P<host>\S+)\s*$")
SUMMARY_RANK_RE = re.compile(r"^\s*rank\s+: (?P<rank>\d+) \(local_rank: \d+\)")
SUMMARY_ANCHORS = ("host      : ", "rank      : ")
LOOPBACK = ("localhost", "127.0.0.1")  # a launcher on one machine names no node by them


def _head_lines(path: Path, segment: Segment) -> Iterable[str]:
    with open(path, "rb") as f:
        f.seek(segment.start)
        text = f.read(min(HEAD_BYTES, segment.end - segment.start)).decode("utf-8", "replace")
    return text.splitlines()


def rank_hosts(path: Path, segment: Segment, prefilter_name: str = "auto") -> dict[int, str]:
    """The host of each rank the attempt shows: what a rank says of itself at start, else torch's
    failure summary record, else the host prefix of the rank's own lines (pdsh, journald...)."""
    stated: dict[int, str] = {}
    prefixed: dict[int, str] = {}
    for line in _head_lines(path, segment):
        source, words = framing.peel(line)
        if (m := RANK_HOST_RE.search(words)) and m["host"] not in LOOPBACK:
            stated.setdefault(int(m["rank"]), m["host"])
        host = source.host.split()[-1] if source.host else None
        if host and host not in LOOPBACK and source.role == "rank" and source.inner is not None:
            prefixed.setdefault(source.inner, host)
    summary: dict[int, str] = {}
    host_line: tuple[int, framing.Source, str] | None = None
    for hit in prefilter.hits(path, prefilter_name, anchors=SUMMARY_ANCHORS):
        if not segment.start <= hit.offset < segment.end:
            continue
        source, words = framing.peel(hit.text)
        if m := SUMMARY_HOST_RE.match(words):
            host_line = (hit.line, source._replace(host=None), m["host"])
        elif (m := SUMMARY_RANK_RE.match(words)) and host_line and host_line[0] == hit.line - 1:
            if host_line[2] not in LOOPBACK and host_line[1] == source._replace(host=None):
                summary.setdefault(int(m["rank"]), host_line[2])
    return {**prefixed, **summary, **stated}

"""Where the log stops: its tail read line by line, the failure region, how the log ends, and the
stage and progress each rank had reached.

What a job printed last is where it failed or stalled: the failure region is the last stretch of
the log before the launcher's teardown. A log whose last words are retries that never succeeded,
a stall report, or a stack dump of threads waiting (on a queue, a child, a collective) stopped
there: a hang at that point. The stage the job was in (init, loading, training, saving) and the
last step each rank reached come with it.

Only the tail is read (TAIL_BYTES, its lines numbered as the log's), and only where the rows found
nothing (engine.py): this reading costs the hot path nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from faultloop.analyze.logsage import framing
from faultloop.analyze.logsage.facts import Facts, Source
from faultloop.analyze.logsage.ranks import resolve_rank
from faultloop.analyze.logsage.shapes import QUIET_RE

TAIL_BYTES = 64 << 10  # the tail read: some 500 to 1000 lines of a job's end; all of an excerpt
TAIL_LINE = 4096  # longer lines are read by their first characters
COUNT_BLOCK = 1 << 20
ENDING_LINES = 12  # the last lines with words that tell how the log ends
MIN_FRAMES = 3  # a stack dump at the end: this many frames among the last lines, the last among the last three
RETRIES_AT_END = 3  # this many retries among them, and nothing after them but more: they never succeeded
# a line that only marks where a pasted excerpt was cut (`[...]`, `...`, `…`): no output of the job
ELISION_RE = re.compile(r"^\s*[\[(<]?\s*(?:\.{3,}|…)\s*[\])>]?\s*$")

INIT, LOADING, TRAINING, SAVING = "init", "loading", "training", "saving"
# stage -> the words a job prints in it; the last line that says one is the stage it stopped in
# fmt: off
STAGES: tuple[tuple[str, str], ...] = (
    (SAVING, r"(?i)\bsav(?:e|ing|ed) (?:the )?(?:model|checkpoint|state)|\bcheckpoint(?:ing)?\b.{0,40}\bsav|"
             r"\bwriting (?:the )?checkpoint|torch\.save\b|save_checkpoint"),
    (LOADING, r"(?i)\bload(?:ing)? (?:the )?(?:checkpoint|model|weights|shards|data(?:set)?|state)|"
              r"\bresum(?:e|ing) from\b|Loading checkpoint shards|load_checkpoint|from_pretrained"),
    (TRAINING, r"(?i)\b(?:iter(?:ation)?|step|epoch|global_step)\b[\s:=#\[]*\d+|\bloss\b[\s:=]+[\d.]|"
               r"\b\d+/\d+ \[\d"),
    (INIT, r"(?i)init_process_group|\brendezvous\b|\bbootstrap|NCCL version|\binitializ(?:e|ing|ed)\b|"
           r"\bconnect(?:ing)? to\b|\bTCPStore\b|\bstarting\b|\blaunch(?:ing)?\b"),
)
# a stall report: the program says it stopped making progress
STALL_RE = re.compile(
    r"(?i)\b(?:no progress|not making progress|stall(?:ed|ing)?|hang (?:detected|suspected)|hung|stuck|"
    r"deadlock(?:ed)?|heartbeat (?:timeout|missed|lost)|missed (?:too many )?heartbeats)\b"
)
# a stack dump's frames of a thread waiting: on a queue, a lock, a child, a socket, a collective
WAITING_RE = re.compile(
    r"\b(?:queue\.get|get|wait|waitpid|wait_for|_wait_for_tstate_lock|join|acquire|sleep|select|poll|epoll_wait|"
    r"recv|recv_into|accept|pthread_cond_wait|futex|all_reduce|allreduce|all_gather|allgather|reduce_scatter|"
    r"broadcast|barrier|monitored_barrier|synchronize|cudaStreamSynchronize|cudaDeviceSynchronize)\b"
)
# the line of a stack dump's frame (CPython's traceback and faulthandler, py-spy, gdb, glibc's backtrace)
FRAME_RE = re.compile(
    r'^\s*(?:File "[^"]+", line \d+|#\d+\s|Thread 0x|Current thread|Thread \d+|\S+ \(\S+:\d+\)$|at \S)'
)
STEP_RE = re.compile(r"(?i)\b(?:iter(?:ation)?|step|global_step)\b[\s:=#\[]*(\d+)")
_STAGE_RES = tuple((stage, re.compile(rx)) for stage, rx in STAGES)
# fmt: on


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line of the tail: its number in the log, the raw line, where it came from and the
    program's words."""

    line: int
    raw: str
    source: Source
    words: str


@dataclass(frozen=True, slots=True)
class Ending:
    """How the log ends where that is a hang at that point: what it ends in (`retries`, `stall`,
    `waiting`), the lines that show it, and whether the retried words are a connection's."""

    how: str
    lines: tuple[TailLine, ...]
    network: bool = False


def tail(path: Path) -> list[TailLine]:
    """The log's last TAIL_BYTES as lines numbered as in the log (the first, cut, line left out)."""
    size = path.stat().st_size
    start = max(0, size - TAIL_BYTES)
    with open(path, "rb") as f:
        number = 1 + _newlines(f, start)
        f.seek(start)
        block = f.read()
    lines = block.split(b"\n")
    if start:
        number += 1
        lines = lines[1:]
    out = []
    for i, raw_bytes in enumerate(lines):
        raw = raw_bytes[:TAIL_LINE].decode("utf-8", "replace").rstrip("\r")
        if raw.strip():
            source, words, _ = framing.peel_shapes(raw)
            out.append(TailLine(number + i, raw, source, words))
    return out


def _newlines(f: BinaryIO, end: int) -> int:
    """The newlines in the file's first `end` bytes, counted a block at a time."""
    count, done = 0, 0
    f.seek(0)
    while done < end:
        block = f.read(min(COUNT_BLOCK, end - done))
        if not block:
            break
        count += block.count(b"\n")
        done += len(block)
    return count


def ending(lines: list[TailLine]) -> Ending | None:
    """How the log ends: its last lines are retries that never succeeded (nothing after the last
    but more), a stall report, a stack dump whose innermost frames wait (on a queue, a child, a
    socket or a collective). A launcher's teardown alone says nothing (the catalog's rows of it
    lead to no verdict): a failure it follows is reported elsewhere."""
    last = [t for t in lines[-ENDING_LINES - 2 :] if t.words.strip() and not ELISION_RE.match(t.words)][-ENDING_LINES:]
    if not last:
        return None
    retries = [t for t in last if QUIET_RE.search(t.words) and re.search(r"(?i)\bretr(?:y|ying|ies)\b", t.words)]
    if len(retries) >= RETRIES_AT_END and retries[-1] is last[-1]:
        network = any(
            re.search(r"(?i)connect|refused|unreachable|socket|timed? ?out|network", t.words) for t in retries
        )
        return Ending("retries", tuple(retries[:3]), network)
    stalls = [t for t in last[-4:] if STALL_RE.search(t.words)]
    if stalls:
        return Ending("stall", (stalls[0],))
    frames = [i for i, t in enumerate(last) if FRAME_RE.match(t.words)]
    # a frame's code line stands under it: a waiting call in either is the thread's
    waiting = [
        last[i + d] for i in frames for d in (0, 1) if i + d < len(last) and WAITING_RE.search(last[i + d].words)
    ]
    if len(frames) >= MIN_FRAMES and frames[-1] >= len(last) - 3 and waiting:
        return Ending("waiting", tuple(dict.fromkeys(waiting))[:3])
    return None


def stage(lines: list[TailLine], before: int) -> str:
    """The stage the job was in at line `before`: the last line before it that says one (STAGES),
    else init."""
    for t in reversed([t for t in lines if t.line <= before]):
        for name, rx in _STAGE_RES:
            if rx.search(t.words):
                return name
    return INIT


def progress(facts: Facts, lines: list[TailLine]) -> dict[int, int]:
    """The last step each rank's lines in the tail report (rank -> step)."""
    steps: dict[int, int] = {}
    for t in lines:
        if (m := STEP_RE.search(t.words)) and (rank := resolve_rank(facts, t.source, t.words)) is not None:
            steps[rank] = int(m.group(1))
    return steps

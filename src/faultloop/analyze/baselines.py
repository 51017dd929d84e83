"""The naive baselines every attribution tool should beat, scored beside the real analyzers.

- ``torchrun_root_cause``: what the launcher itself says. The rank, exit code and signal of
  torchrun's "Root Cause (first observed failure)" block (the earliest one when several nodes
  print one), else of the first ``failed (exitcode: N) local_rank: L`` line, else (no torchrun:
  one srun task per rank) of srun's first ``srun: error: <node>: task <n>: <how>`` line; restart
  STOP for any signal or non-zero exit, as a person reading only that line would decide.
- ``first_error``: the rank of the first line that looks like an error; STOP when there is one.

Both read torch's real wording (torch.distributed.elastic) with or without srun ``<n>: `` labels
and torch's ``[rankN]:`` / ``[defaultN]:`` prefixes. With one torchrun per node the srun label is
the node index, so a ``local_rank`` is turned into a global rank only where the log tells how
many ranks a node runs. Deliberately simple: their job is to be the floor, not to be clever.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from faultloop.contracts import LogVerdict, VerdictLine
from faultloop.faults import CRASH, ERRORS_NOT_FOUND, EXCEPTION, EXTERNAL_SIGNAL, NO_LOGS, NONE, OTHER, STOP
from faultloop.signals import exit_signal, srun_signal

_LABEL_RE = re.compile(r"^\s*(\d+): ")  # srun --label
_INNER_RE = re.compile(r"^\[[a-z]*(\d+)\]:")  # torch's [rank3]: / torchrun's [default3]:
_ROOT_CAUSE = "Root Cause (first observed failure):"
_FIELD_RE = re.compile(r"^\s*(time|rank|exitcode)\s*:\s*(.*)$")
_RANK_FIELD_RE = re.compile(r"(\d+)(?:\s*\(local_rank:\s*(\d+)\))?")
_EXIT_FIELD_RE = re.compile(r"(-?\d+)(?:\s*\(pid:\s*\d+\))?(?:\s*\((SIG[A-Z0-9]+)\))?")
_FAILED_RE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
_LOCAL_RANK_RE = re.compile(r"local_rank:\s*(\d+)")
_SRUN_TASK_RE = re.compile(r"srun: error: \S+: tasks? (\d+)[\d,\-]*: (.*)")
_ERROR_RE = re.compile(
    r"\b(?:error|exception|traceback|fatal|failed|failure|killed|abort(?:ed)?|"
    r"segmentation fault|timed out|SIGKILL|SIGSEGV|SIGABRT)\b",
    re.IGNORECASE,
)
_TEXT_RANK_RE = re.compile(r"\brank[\s:=#\[]*(\d+)\b", re.IGNORECASE)
# A signal a launcher reports -> the fault a naive reader would name, and its category by the
# baseline's own reading: a signal the process raised on itself (a fault, an abort) or was killed
# by without a word is a crash; one sent to stop a job is an external signal.
_SIGNAL_FAULT: dict[str, tuple[str, str]] = {
    "SIGKILL": ("SIGKILL", CRASH),
    "SIGSEGV": ("SEGFAULT", CRASH),
    "SIGABRT": ("OS_ABORT", CRASH),
    "SIGTERM": ("SIGTERM", EXTERNAL_SIGNAL),
    "SIGINT": ("SIGINT", EXTERNAL_SIGNAL),
}
# Blocks are short; a summary whose fields are further away than this is not one block.
_BLOCK_LINES = 12


@dataclass(frozen=True)
class LogLine:
    """One log line with its launcher prefixes split off."""

    number: int
    raw: str
    label: int | None  # srun --label
    inner: int | None  # [rankN]: / [defaultN]:
    text: str


def split_line(number: int, raw: str) -> LogLine:
    raw = raw.rstrip("\n")
    text, label, inner = raw, None, None
    if m := _LABEL_RE.match(text):
        label, text = int(m.group(1)), text[m.end() :]
    if m := _INNER_RE.match(text):
        inner = int(m.group(1))
        while m := _INNER_RE.match(text):  # [default0]:[rank0]: carries the rank twice
            text = text[m.end() :]
    return LogLine(number, raw, label, inner, text)


def read_lines(path: Path) -> Iterator[LogLine]:
    with open(path, errors="replace") as handle:
        for number, raw in enumerate(handle, start=1):
            yield split_line(number, raw)


@dataclass
class Failure:
    """One failed worker as the launcher reports it."""

    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    signal: str | None = None
    time: str = ""
    label: int | None = None
    lines: list[LogLine] = field(default_factory=list)


def _verdict(
    restart: str,
    primary: list[int],
    category: str,
    fault_type: str | None,
    explanation: str,
    detail: str,
    evidence: list[LogLine],
    kind: str,
) -> LogVerdict:
    """A baseline's answer: the lines it read as its evidence, nothing secondary, no checkpoint."""
    cited = [VerdictLine(e.number, e.raw[:300], kind, primary[0] if primary else None) for e in evidence]
    return LogVerdict(restart, primary, [], category, fault_type, explanation, detail, cited, False, mode="baseline")


def _empty(path: Path) -> bool:
    with open(path, "rb") as handle:
        while block := handle.read(1 << 16):
            if block.strip():
                return False
    return True


def _no_logs(path: Path) -> LogVerdict | None:
    if not path.is_file() or _empty(path):
        return _verdict(NO_LOGS, [], NONE, None, "no log to read", "", [], "none")
    return None


def torchrun_root_cause(path: str | Path) -> LogVerdict:
    """torchrun's own answer: the root-cause block's rank, exit code and signal."""
    path = Path(path)
    if (empty := _no_logs(path)) is not None:
        return empty
    roots: list[Failure] = []
    first_failed: Failure | None = None
    first_task: Failure | None = None
    local_ranks: set[int] = set()
    open_blocks: dict[int | None, tuple[Failure, int]] = {}  # label -> (block being read, lines left)
    for line in read_lines(path):
        if "local_rank" in line.text:
            local_ranks.update(int(x) for x in _LOCAL_RANK_RE.findall(line.text))
        if _ROOT_CAUSE in line.text:
            block = Failure(label=line.label, lines=[line])
            roots.append(block)
            open_blocks[line.label] = (block, _BLOCK_LINES)
            continue
        if line.label in open_blocks:
            block, left = open_blocks[line.label]
            if (m := _FIELD_RE.match(line.text)) is not None:
                name, value = m.groups()
                if name == "time":
                    block.time = value.strip()
                elif name == "rank" and (r := _RANK_FIELD_RE.match(value)):
                    block.rank = int(r.group(1))
                    block.local_rank = int(r.group(2)) if r.group(2) else None
                    block.lines.append(line)
                elif name == "exitcode" and (e := _EXIT_FIELD_RE.match(value)):
                    block.exitcode = int(e.group(1))
                    block.signal = e.group(2) or exit_signal(block.exitcode, shell=True)
                    block.lines.append(line)
            left -= 1
            if left == 0 or (block.rank is not None and block.exitcode is not None):
                del open_blocks[line.label]
            else:
                open_blocks[line.label] = (block, left)
        if first_failed is None and "failed (exitcode" in line.text and (m := _FAILED_RE.search(line.text)):
            code = int(m.group(1))
            first_failed = Failure(
                local_rank=int(m.group(2)),
                exitcode=code,
                signal=exit_signal(code, shell=True),
                label=line.label,
                lines=[line],
            )
        if first_task is None and line.text.startswith("srun: error:") and (m := _SRUN_TASK_RE.match(line.text)):
            how = m.group(2).strip()
            sig = srun_signal(how)
            exited = re.search(r"exit code (\d+)", how)
            first_task = Failure(
                rank=int(m.group(1)), exitcode=int(exited.group(1)) if exited else None, signal=sig, lines=[line]
            )
    complete = [b for b in roots if b.rank is not None and b.exitcode is not None]
    if complete:
        # Each node's agent prints its own block; the earliest time is the first observed failure.
        chosen = min(complete, key=lambda b: b.time or "~")
        source = "the launcher's root-cause block"
    elif first_failed is not None:
        chosen, source = first_failed, "the first failed-worker line (no root-cause block)"
        per_node = max(local_ranks) + 1 if local_ranks else None
        local = chosen.local_rank or 0
        chosen.rank = local if not chosen.label or per_node is None else chosen.label * per_node + local
    elif first_task is not None:
        chosen, source = first_task, "srun's first failed task (no torchrun)"
    else:
        return _verdict(ERRORS_NOT_FOUND, [], NONE, None, "The launcher reports no failed worker.", "", [], "none")
    code = chosen.exitcode or 0
    fault, category = _SIGNAL_FAULT.get(chosen.signal or "", (None, ""))
    category = category or (CRASH if chosen.signal else EXCEPTION if code == 1 else OTHER)
    how = f"signal {chosen.signal}" if chosen.signal else f"exit code {code}"
    explanation = f"torchrun reports rank {chosen.rank} as the first observed failure ({how}). Do not restart."
    return _verdict(
        STOP,
        [chosen.rank] if chosen.rank is not None else [],
        category,
        fault,
        explanation,
        f"from {source}; exitcode {code}",
        chosen.lines,
        "launcher_root_cause",
    )


def first_error(path: str | Path) -> LogVerdict:
    """The rank of the first line that looks like an error."""
    path = Path(path)
    if (empty := _no_logs(path)) is not None:
        return empty
    for line in read_lines(path):
        if not _ERROR_RE.search(line.text):
            continue
        named = _TEXT_RANK_RE.search(line.text)
        rank = line.inner if line.inner is not None else int(named.group(1)) if named else line.label
        who = f"rank {rank}" if rank is not None else "an unlabelled process"
        return _verdict(
            STOP,
            [rank] if rank is not None else [],
            OTHER,
            None,
            f"The first error-looking line (line {line.number}) comes from {who}. Do not restart.",
            line.raw[:200],
            [line],
            "first_error",
        )
    return _verdict(ERRORS_NOT_FOUND, [], NONE, None, "No line looks like an error.", "", [], "none")

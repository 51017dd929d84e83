"""logsage: attribute a failed distributed job from its log (which rank, what fault, restart?).

Deterministic and offline by default. The log is streamed: a cheap prefilter (every rule's
literal anchors, searched by ripgrep or GNU grep when present, else by one compiled regex over 8 MB
blocks) picks the few lines worth a look; only those go through the rules below. Multi-line records (Python
tracebacks, torchrun's failure summary) are read afterwards by seeking to their byte offsets.
State is bounded (per-rank first/last evidence, capped evidence list), so memory stays flat.

HOW TO PATCH BETWEEN LOOP ITERATIONS
  * A log line is missed or misread -> edit RULES: one row per (anchor literals, regex, kind,
    hint). The anchors must be substrings of every line the regex can match; they are the
    prefilter. First matching row wins, so put specific rows above general ones.
  * A decision is wrong for a whole cause -> edit POLICY (cause -> category, restart, why).
  * Which evidence names which fault type -> `_crash_cause` / `_hang_cause` (short, ordered).
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from faultloop import faults, layout, llm
from faultloop.faults import (CRASH, ERRORS_NOT_FOUND, EXTERNAL_SIGNAL, FAULTS, HANG, NETWORK, NO_LOGS, NONE, OOM,
                              OTHER, RESTART, STOP)

# -- evidence kinds ------------------------------------------------------------------------------
# symptoms: the rank only suffered (a victim)
TIMEOUT = "collective_timeout"
PEER_LOST = "peer_lost"
# origins: the rank failed on its own
EXCEPTION_KIND = "exception"
FATAL = "fatal_error"
GPU = "gpu_error"
OOM_KIND = "oom"
SIGNAL = "signal_received"
DEATH = "death"
NETWORK_KIND = "network_error"
# block openers (read after the scan)
TRACEBACK = "traceback"
SUMMARY = "launcher_summary"
# launcher and scheduler
CLOSED = "launcher_closed"
KILLED = "launcher_killed"
JOB_SIGNAL = "job_signal"
SLURM = "slurm"
# context: helps tell faults apart, never an origin by itself
STALL = "stall_watchdog"
STACK_DUMP = "stack_dump"
PROGRESS = "collective_progress"
BARRIER = "monitored_barrier"
CHECKPOINT = "checkpoint_saved"
DONE = "job_done"

SYMPTOMS = (TIMEOUT, PEER_LOST)
ORIGINS = (EXCEPTION_KIND, FATAL, GPU, OOM_KIND, SIGNAL, DEATH, NETWORK_KIND)


@dataclass(frozen=True)
class Rule:
    """One log pattern: if any anchor is in the line and the regex matches, it is evidence of kind."""

    name: str
    kind: str
    anchors: tuple[str, ...]
    pattern: str
    hint: str | None = None  # a fault type or cause this line points to


# fmt: off
# RULES: the table to patch (see "HOW TO PATCH" above). kind decides the role of a line: symptom,
# origin, launcher/scheduler fact or context; hint names the fault or cause it points to.
RULES: tuple[Rule, ...] = (
    # -- hang symptoms: the rank waited for a peer that never came ---------------------------
    Rule("gloo_timeout", TIMEOUT, ("Timed out waiting",), r"Timed out waiting \d+ ?ms for (?:recv|send) operation"),
    Rule("nccl_watchdog_timeout", TIMEOUT, ("Watchdog caught",), r"Watchdog caught collective operation timeout"),
    Rule("nccl_ops_timed_out", TIMEOUT, ("timed out",), r"NCCL operations have failed or timed out"),
    Rule("nccl_heartbeat", TIMEOUT, ("eartbeat monitor timed out",), r"[Hh]eartbeat monitor timed out"),
    Rule("dist_timeout", TIMEOUT, ("DistBackendError",), r"DistBackendError.*[Tt]ime(?:d ?out)"),
    # -- OOM and GPU errors (before the generic NCCL/CUDA rows) ------------------------------
    Rule("cuda_oom", OOM_KIND, ("ut of memory", "OutOfMemory"), r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"),
    Rule("host_oom", OOM_KIND, ("oom-kill", "oom_kill", "ut of memory", "MemoryError"),
         r"oom[-_]kill|Out of memory: Kill|\bMemoryError\b|[Mm]emory cgroup out of memory"),
    Rule("cuda_error", GPU, ("CUDA error", "cuda error", "AcceleratorError"),
         r"CUDA error: \w|unhandled cuda error|AcceleratorError", "GPU_ERROR"),
    Rule("xid", GPU, ("NVRM: Xid",), r"NVRM: Xid \(", "GPU_ERROR"),
    Rule("ecc", GPU, ("ECC error",), r"[Uu]ncorrectable ECC error", "GPU_ERROR"),
    # -- peer lost: the rank's partner died or the link broke --------------------------------
    Rule("peer_closed", PEER_LOST, ("by peer", "remote peer"), r"[Cc]onnection closed by (?:remote )?peer|reset by peer|remote peer"),
    Rule("nccl_remote", PEER_LOST, ("remote process", "ncclRemoteError"), r"ncclRemoteError|remote process exited"),
    Rule("broken_pipe", PEER_LOST, ("Broken pipe",), r"Broken pipe"),
    Rule("nccl_error", PEER_LOST, ("NCCL error",), r"NCCL error"),
    Rule("ib_error", NETWORK_KIND, ("Got completion", "retry counter"),
         r"NET/IB.*Got completion.*(?:[Ee]rror|status=[1-9])|transport retry counter exceeded"),
    # -- fatal errors (faulthandler, shells, srun) ------------------------------------------
    Rule("fatal_segv", FATAL, ("Fatal Python error: Segm",), r"Fatal Python error: Segmentation fault", "SEGFAULT"),
    Rule("fatal_bus", FATAL, ("Fatal Python error: Bus",), r"Fatal Python error: Bus error", "SEGFAULT"),
    Rule("fatal_abort", FATAL, ("Fatal Python error: Abort",), r"Fatal Python error: Aborted", "OS_ABORT"),
    Rule("fatal_other", FATAL, ("Fatal Python error",), r"Fatal Python error: "),
    Rule("srun_task", DEATH, ("srun: error",), r"srun: error: \S+: tasks? ([\d,\-]+): (.+)"),
    Rule("shell_segv", FATAL, ("Segmentation fault",), r"Segmentation fault", "SEGFAULT"),
    Rule("shell_abort", FATAL, ("Aborted (core",), r"Aborted \(core dumped\)", "OS_ABORT"),
    # -- a Python traceback (classified by its exception line, read after the scan) ----------
    Rule("traceback", TRACEBACK, ("Traceback",), r"^Traceback \(most recent call last\):"),
    Rule("signal_received", SIGNAL, ("eceived SIG", "eceived signal", "got signal", "aught signal"),
         r"(?i)\b(?:received|got|caught) (?:signal[: ]*)?(SIG[A-Z0-9]+|\d+)"),
    # -- the launcher (torchrun / faultloop node-launch wording) ----------------------------
    Rule("rank_failed", DEATH, ("failed (exitcode",), r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)"),
    Rule("launcher_close", CLOSED, ("closing signal",), r"Sending process (\d+) closing signal"),
    Rule("launcher_kill", KILLED, ("forcefully",), r"Unable to shutdown process (\d+) via"),
    Rule("summary", SUMMARY, ("Failures:", "Root Cause"), r"^(?:Failures:|Root Cause \(first observed failure\):)"),
    Rule("launcher_signal", JOB_SIGNAL, ("SignalException", "received a stop signal"),
         r"SignalException: Process \d+ got signal|[Ll]auncher received a stop signal"),
    # -- SLURM --------------------------------------------------------------------------------
    Rule("preempted", SLURM, ("PREEMPTION", "preempted"), r"DUE TO PREEMPTION|\b[Pp]reempted\b", "PREEMPTION"),
    Rule("time_limit", SLURM, ("TIME LIMIT", "time limit"), r"DUE TO TIME LIMIT|[Tt]ime limit (?:of \S+ s )?reached", "TIME_LIMIT"),
    Rule("node_fail", SLURM, ("NODE_FAIL", "NODE FAIL", "ode failure"), r"NODE_FAIL|DUE TO NODE FAIL|[Nn]ode failure", "NODE_FAIL"),
    Rule("cancelled", SLURM, ("CANCELLED",), r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED", "CANCELLED"),
    # -- context ------------------------------------------------------------------------------
    Rule("stall_watchdog", STALL, ("no training progress", "no progress"), r"no (?:training )?progress (?:for|in) \d"),
    Rule("nccl_watchdog_stuck", STALL, ("got stuck",), r"watchdog got stuck"),
    Rule("faulthandler_timeout", STACK_DUMP, ("Timeout (",), r"^Timeout \(\d+:\d\d:\d\d"),
    Rule("nccl_progress", PROGRESS, ("last enqueued",), r"last enqueued (?:NCCL )?work: (-?\d+)"),
    Rule("monitored_barrier", BARRIER, ("monitoredBarrier",), r"Ranks? ([\d, ]+) failed to pass monitoredBarrier"),
    Rule("checkpoint_saved", CHECKPOINT, ("aved checkpoint", "heckpoint saved", "heckpoint written"), r"(?i)\bsaved checkpoint|checkpoint (?:saved|written)"),
    Rule("job_done", DONE, ("training is done", "raining finished", "raining completed"),
         r"after training is done|[Tt]raining (?:finished|completed)"),
)
# fmt: on


@dataclass(frozen=True)
class Policy:
    """What a diagnosed cause means: its category and whether an immediate restart can help."""

    category: str
    restart: str
    why: str


# cause -> policy. The 12 injected faults come from faults.FAULTS (the one source of truth);
# the rest are causes real jobs show. hard crash, code bug, GPU error, OOM -> STOP;
# transient hang, external signal, preemption, network flap -> RESTART.
POLICY: dict[str, Policy] = {
    **{name: Policy(f.category, f.restart, f.rationale) for name, f in FAULTS.items()},
    "HANG": Policy(HANG, RESTART, "transient hang"),
    "CRASH": Policy(CRASH, STOP, "hard crash"),
    "OOM": Policy(OOM, STOP, "out of memory: the same job will run out again"),
    "NETWORK": Policy(NETWORK, RESTART, "network flap"),
    "EXTERNAL_SIGNAL": Policy(EXTERNAL_SIGNAL, RESTART, "external signal"),
    "PREEMPTION": Policy(EXTERNAL_SIGNAL, RESTART, "preempted by the scheduler"),
    "CANCELLED": Policy(EXTERNAL_SIGNAL, RESTART, "cancelled by the scheduler or an operator"),
    "NODE_FAIL": Policy(OTHER, RESTART, "node failure: restart on healthy nodes"),
    "TIME_LIMIT": Policy(OTHER, STOP, "time limit: a restart hits it again"),
    "DONE": Policy(NONE, STOP, "the application finished"),
}

# cause -> what the log shows happened (the explanation's wording)
WHAT_HAPPENED: dict[str, str] = {
    "GPU_ERROR": "hit a GPU error (CUDA error / Xid)",
    "GPU_SLEEP": "stalled outside any collective with its threads alive, as on a stuck GPU kernel, and the "
                 "others timed out waiting for it",
    "LOCK_GIL": "froze: its Python threads went silent while faulthandler still dumped its stacks (the GIL "
                "was held), and the others timed out waiting for it",
    "SIGSTOP": "went completely silent (a stopped process) and had to be killed, while the others timed out "
               "waiting for it",
    "HANG": "stopped making progress and the others timed out waiting for it",
    "WORKLOAD_EXC": "raised an exception of its own",
    "ASYNC_EXC": "was interrupted by an exception it did not raise (no message, no raise statement: raised "
                 "asynchronously from outside the code)",
    "SIGNAL_EXC": "raised an exception from a signal handler",
    "OS_ABORT": "aborted (SIGABRT)",
    "SEGFAULT": "crashed with a segmentation fault",
    "SIGKILL": "was killed by SIGKILL without a word",
    "SIGTERM": "was terminated by SIGTERM from outside",
    "SIGINT": "was interrupted by SIGINT",
    "CRASH": "died without a word",
    "OOM": "ran out of memory",
    "NETWORK": "lost connections without any rank failing on its own (network)",
    "EXTERNAL_SIGNAL": "received a signal from outside",
    "PREEMPTION": "was preempted by the scheduler",
    "CANCELLED": "was cancelled from outside",
    "NODE_FAIL": "lost a node",
    "TIME_LIMIT": "hit its time limit",
    "DONE": "finished",
}

# exit statuses that name a signal death: negative (Python's Popen), 128+n (shells), srun words
SIGNAL_FAULT = {"SIGKILL": "SIGKILL", "SIGTERM": "SIGTERM", "SIGINT": "SIGINT", "SIGSEGV": "SEGFAULT",
                "SIGABRT": "OS_ABORT", "SIGBUS": "SEGFAULT", "SIGHUP": "SIGTERM"}
SIGNAL_NUMBERS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 10: "SIGUSR1",
                  11: "SIGSEGV", 12: "SIGUSR2", 15: "SIGTERM", 19: "SIGSTOP"}
SRUN_WORDS = {"Killed": "SIGKILL", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Terminated": "SIGTERM",
              "Interrupt": "SIGINT", "Bus error": "SIGBUS"}

NEVER = 1 << 62  # a line number after every line
MAX_EVIDENCE = 60
MAX_BLOCKS_PER_RANK = 2
MAX_LABEL_PAIRS = 1 << 16
BLOCK_LINES = 400
CHUNK = 8 << 20
CENSUS_BYTES = 2 << 20
MIN_RANGE_BYTES = 64 << 20  # below this one grep does the whole file
_SENTINEL = b"\x01faultloop-logsage-range-end\x01"

_COMPILED = tuple((rule, re.compile(rule.pattern)) for rule in RULES)
ANCHORS: tuple[str, ...] = tuple(sorted({a for rule in RULES for a in rule.anchors}))
_PREFIX_RE = re.compile(r"^\s*(\d+): ")  # srun --label
_INNER_RE = re.compile(r"^\[([a-z]*)(\d+)\]: ?")  # torchrun [default3]: / torch [rank3]:
_LINE_PREFIX_RE = re.compile(r"^[ \t]*(?:(\d+): )?(?:\[[a-z]*(\d+)\]:)?", re.M)  # both, per line
_TEXT_RANK_RE = re.compile(r"\[(?:PG(?: ID)? \d+ (?:PG GUID \S+ )?)?Rank (\d+)\]")
# world size statements; each starts with a literal, so the regex engine's fast prefix search applies
_WORLD_RES = tuple(re.compile(p) for p in (r"world_size\W{0,3}(\d+)", r"WORLD_SIZE\W{0,3}(\d+)", r"world size\W{0,3}(\d+)",
                                          r"rank \d+/(\d+)\b", r"nranks (\d+)"))
_FRAME_RE = re.compile(r'^\s+File "([^"]*)", line (\d+),? in (\S+)')
_EXC_RE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")
_SIGNAL_NAME_RE = re.compile(r"\bSIG(?:USR[12]|HUP|TERM|INT|QUIT|ALRM)\b|\bsignal \d+\b", re.I)
_SUMMARY_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)(?: \(local_rank: (\d+)\))?")
_COLLECTIVE_FRAME_RE = re.compile(r"distributed_c10d|\b(?:all_reduce|allreduce|all_gather|reduce_scatter|broadcast|"
                                  r"barrier|monitored_barrier|all_to_all)\b")
_DEVICE_WAIT_RE = re.compile(r"synchroni[sz]e|cuda|wait_stream|\bEvent\b|_sleep")
_SUMMARY_EXIT_RE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)(?: \(pid: (\d+)\))?")


# -- records -------------------------------------------------------------------------------------


@dataclass
class Evidence:
    """One log line behind the verdict."""

    line: int
    text: str
    kind: str
    rank: int | None
    rule: str
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text[:300], "kind": self.kind, "rank": self.rank,
                "rule": self.rule}


@dataclass
class Verdict:
    """The analyzer's answer, in the logsage.json contract (docs/architecture.md)."""

    restart: str
    primary_ranks: list[int]
    secondary_ranks: list[int]
    fault_category: str
    fault_type: str | None
    explanation: str
    detail: str
    evidence: list[Evidence]
    checkpoint_saved: bool
    mode: str = "deterministic"
    analyzer_version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "restart": self.restart, "primary_ranks": self.primary_ranks,
            "secondary_ranks": self.secondary_ranks, "fault_category": self.fault_category,
            "fault_type": self.fault_type, "explanation": self.explanation, "detail": self.detail,
            "evidence": [e.to_json() for e in self.evidence], "checkpoint_saved": self.checkpoint_saved,
            "mode": self.mode, "analyzer_version": self.analyzer_version,
        }
        out.update(self.extra)
        return out

    def to_text(self) -> str:
        """Upstream's five-part text form."""
        return "\n".join([
            self.restart,
            self.explanation,
            f"Attribution: Primary issues: {self.primary_ranks}, Secondary issues: {self.secondary_ranks}",
            self.detail,
            f"checkpoint_saved: {str(self.checkpoint_saved).lower()}",
        ]) + "\n"


@dataclass
class _Hit:
    """A prefiltered line: where it is and what it says."""

    line: int
    offset: int
    text: str


@dataclass
class _Exit:
    """How a rank ended, from the launcher's summary or srun."""

    exitcode: int | None = None
    signal: str | None = None
    pid: int | None = None


@dataclass
class _Facts:
    """Everything the scan keeps: bounded per-rank first lines and a capped evidence list."""

    labelled: bool = False
    world_size: int = 0
    label_pairs: set[tuple[int | None, int | None]] = field(default_factory=set)  # (srun label, inner)
    layout: tuple[int, int] = (-1, 0)  # (label pairs seen, ranks per node if labels are nodes)
    first: dict[tuple[str, int | None], Evidence] = field(default_factory=dict)  # (kind, rank)
    evidence: list[Evidence] = field(default_factory=list)
    blocks: list[tuple[str, int, int, int | None, int | None]] = field(default_factory=list)
    exits: dict[int, _Exit] = field(default_factory=dict)
    pid_rank: dict[int, int] = field(default_factory=dict)
    deaths_by_pid: list[tuple[int, int, Evidence]] = field(default_factory=list)  # pid, exitcode, ev
    closed_pids: dict[int, int] = field(default_factory=dict)  # pid -> line
    killed_pids: set[int] = field(default_factory=set)
    enqueued: dict[int, int] = field(default_factory=dict)
    barrier_missing: set[int] = field(default_factory=set)
    main_stacks: dict[int, list[str]] = field(default_factory=dict)  # first stack dump per rank


# -- scanning ------------------------------------------------------------------------------------


def _split_prefix(text: str) -> tuple[int | None, int | None, str]:
    """(srun label, torchrun/torch inner rank, the text without prefixes)."""
    label = inner = None
    m = _PREFIX_RE.match(text)
    if m:
        label, text = int(m.group(1)), text[m.end():]
    m = _INNER_RE.match(text)
    if m:
        inner, text = int(m.group(2)), text[m.end():]
    return label, inner, text


def _ere_escape(literal: str) -> str:
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", literal)


def _tool_command(tool: str) -> list[str]:
    """A prefilter reading stdin and printing `line:byte offset:text` for lines with an anchor."""
    literals = (*ANCHORS, _SENTINEL.decode())
    if Path(tool).name == "rg":  # ripgrep: SIMD multi-literal search (Teddy), several times grep's
        return [tool, "-a", "-n", "-b", "--no-heading", "--no-filename", "--no-config", "-F",
                *(f"--regexp={a}" for a in literals), "-"]
    return [tool, "-a", "-n", "-b", "-E", "|".join(_ere_escape(a) for a in literals)]


def _find_tool(prefilter: str) -> str | None:
    """The prefilter to run: ripgrep, else GNU grep (auto), or the named one; None: Python."""
    names = {"auto": ("rg", "grep"), "rg": ("rg",), "grep": ("grep",), "python": ()}[prefilter]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if prefilter in ("rg", "grep"):
        raise RuntimeError(f"prefilter {prefilter} is not installed")
    return None


def _scan_tool(path: Path, tool: str, jobs: int = 0) -> Iterator[_Hit]:
    """An external prefilter (rg or grep) over `jobs` line-aligned byte ranges at once.

    Each range is fed to its own process through a pipe (sendfile: no copy in Python) and ends
    with a sentinel line whose number says how many lines the range had; outputs are read in
    range order, so hits come out in file order and nothing is buffered here."""
    size = path.stat().st_size
    jobs = jobs or min(4, os.cpu_count() or 1)
    bounds = _line_bounds(path, size, max(1, min(jobs, size // MIN_RANGE_BYTES)))
    env = {**os.environ, "LC_ALL": "C"}
    ranges = []
    try:
        for start, end in zip(bounds, bounds[1:]):
            proc = subprocess.Popen(_tool_command(tool), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=env)
            assert proc.stdin is not None and proc.stdout is not None
            _grow_pipe(proc.stdout)
            feeder = threading.Thread(target=_feed, args=(path, start, end, proc.stdin), daemon=True)
            feeder.start()
            ranges.append((start, proc, feeder))
        line_base = 0
        for start, proc, feeder in ranges:
            assert proc.stdout is not None
            lines_in_range = 0
            for raw in proc.stdout:
                line_no, offset, text = raw.split(b":", 2)
                text = text.rstrip(b"\r\n")
                if text == _SENTINEL:
                    lines_in_range = int(line_no) - 1
                    continue
                yield _Hit(line_base + int(line_no), start + int(offset), text.decode("utf-8", "replace"))
            rc = proc.wait()
            feeder.join()
            if rc not in (0, 1):
                raise OSError(f"{tool} failed on {path} (exit {rc})")
            line_base += lines_in_range
    finally:
        for _, proc, _ in ranges:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout:
                proc.stdout.close()


def _line_bounds(path: Path, size: int, parts: int) -> list[int]:
    """Byte offsets that cut the file into `parts` ranges, each starting at a line start."""
    bounds = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(size * i // parts)
            f.readline()
            pos = f.tell()
            if bounds[-1] < pos < size:
                bounds.append(pos)
    return bounds + [size]


def _feed(path: Path, start: int, end: int, pipe: IO[bytes]) -> None:
    """Copy bytes [start, end) of the file into grep's stdin in the kernel, then the sentinel."""
    try:
        with open(path, "rb") as f:
            fd, out, offset = f.fileno(), pipe.fileno(), start
            while offset < end:
                sent = os.sendfile(out, fd, offset, min(end - offset, 1 << 30))
                if sent == 0:
                    break
                offset += sent
            f.seek(end - 1 if end else 0)
            newline = b"" if end == 0 or f.read(1) == b"\n" else b"\n"
        pipe.write(newline + _SENTINEL + b"\n")
    except BrokenPipeError:  # the reader stopped early
        pass
    finally:
        try:
            pipe.close()
        except BrokenPipeError:
            pass


def _grow_pipe(stream: IO[bytes]) -> None:
    """A bigger pipe lets later ranges' greps run ahead while earlier output is read (Linux)."""
    try:
        fcntl.fcntl(stream.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass


def _scan_python(path: Path) -> Iterator[_Hit]:
    """Pure-Python prefilter: per 8 MB block, bytes.find for each anchor (C speed, about twice a
    combined regex), then the hit lines in order, newlines counted only between hits."""
    anchors = [a.encode() for a in ANCHORS]
    line_no, base = 1, 0  # line number at offset `base`
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            data = carry + block
            if not data:
                return
            end = data.rfind(b"\n") + 1 if block else len(data)
            if end == 0:
                carry = data
                continue
            starts: set[int] = set()
            for anchor in anchors:
                i = data.find(anchor, 0, end)
                while i != -1:
                    line_start = data.rfind(b"\n", 0, i) + 1
                    starts.add(line_start)
                    stop = data.find(b"\n", i, end)
                    i = data.find(anchor, end if stop == -1 else stop + 1, end)
            counted = 0
            for start in sorted(starts):
                stop = data.find(b"\n", start, end)
                stop = end if stop == -1 else stop
                line_no += data.count(b"\n", counted, start)
                counted = start
                yield _Hit(line_no, base + start, data[start:stop].rstrip(b"\r").decode("utf-8", "replace"))
            line_no += data.count(b"\n", counted, end)
            base += end
            carry = data[end:]
            if not block:
                return


def _census(path: Path, facts: _Facts) -> None:
    """Ranks and world size from the head and tail of the log, where every rank says hello/bye."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        parts = [f.read(CENSUS_BYTES)]
        if size > 2 * CENSUS_BYTES:
            f.seek(size - CENSUS_BYTES)
            parts.append(f.read())
        elif size > CENSUS_BYTES:
            parts.append(f.read())
    for part in parts:  # whole-block regexes: a Python loop per line would cost more than the scan
        text = part.decode("utf-8", "replace")
        for m in _LINE_PREFIX_RE.finditer(text):
            if m.group(1) or m.group(2):
                _note_rank(facts, int(m.group(1)) if m.group(1) else None, int(m.group(2)) if m.group(2) else None)
        for rx in _WORLD_RES:
            for m in rx.finditer(text):
                facts.world_size = max(facts.world_size, int(m.group(1)))


def _note_rank(facts: _Facts, label: int | None, inner: int | None) -> None:
    if label is None and inner is None:
        return
    facts.labelled = True
    if len(facts.label_pairs) < MAX_LABEL_PAIRS:
        facts.label_pairs.add((label, inner))


def _seen_ranks(facts: _Facts) -> set[int]:
    ranks = {_resolve_rank(facts, label, inner, "") for label, inner in facts.label_pairs}
    return {r for r in ranks if r is not None}


def _node_local_size(facts: _Facts) -> int:
    """Ranks per node when srun labels are node indices, else 0 (cached per label-pair count)."""
    if facts.layout[0] != len(facts.label_pairs):
        inners: dict[int, set[int]] = {}
        for lab, inn in facts.label_pairs:
            if lab is not None and inn is not None:
                inners.setdefault(lab, set()).add(inn)
        node_mode = any(len(v) > 1 for v in inners.values())
        facts.layout = (len(facts.label_pairs), 1 + max(max(v) for v in inners.values()) if node_mode else 0)
    return facts.layout[1]


def _resolve_rank(facts: _Facts, label: int | None, inner: int | None, text: str) -> int | None:
    """Global rank: srun label, unless labels are node indices (one torchrun per srun task: a
    label then carries several torchrun local ranks, and global = label * local size + local)."""
    if label is not None and inner is not None:
        local = _node_local_size(facts)
        if local:
            return label * local + inner
    if label is not None:
        return label
    if inner is not None:
        return inner
    m = _TEXT_RANK_RE.search(text)
    return int(m.group(1)) if m else None


def _classify(text: str) -> tuple[Rule, re.Match[str]] | None:
    """The first rule whose anchor is in the text and whose regex matches it."""
    for rule, rx in _COMPILED:
        if any(a in text for a in rule.anchors):
            m = rx.search(text)
            if m:
                return rule, m
    return None


def _add(facts: _Facts, ev: Evidence) -> None:
    """Keep the first evidence of each kind per rank (state bounded by kinds x ranks)."""
    key = (ev.kind, ev.rank)
    if key not in facts.first:
        facts.first[key] = ev
        if len(facts.evidence) < MAX_EVIDENCE:
            facts.evidence.append(ev)


def _scan(path: Path, facts: _Facts, settings: Settings) -> None:
    tool = _find_tool(settings.prefilter)
    hits = _scan_tool(path, tool, settings.jobs) if tool else _scan_python(path)
    block_count: dict[tuple[str, int | None], int] = {}
    for hit in hits:
        label, inner, text = _split_prefix(hit.text)
        _note_rank(facts, label, inner)
        found = _classify(text)
        if not found:
            continue
        rule, m = found
        rank = _resolve_rank(facts, label, inner, text)
        ev = Evidence(hit.line, text.strip(), rule.kind, rank, rule.name, rule.hint)
        if rule.kind in (TRACEBACK, SUMMARY, STACK_DUMP):
            key = (rule.kind, rank)
            if block_count.get(key, 0) < (8 if rule.kind == SUMMARY else MAX_BLOCKS_PER_RANK):
                block_count[key] = block_count.get(key, 0) + 1
                facts.blocks.append((rule.kind, hit.line, hit.offset, label, inner))
            if rule.kind != STACK_DUMP:
                continue
        if rule.name == "rank_failed":
            facts.deaths_by_pid.append((int(m.group(3)), int(m.group(1)), ev))
            continue
        if rule.name == "srun_task":
            _srun_task(facts, m, ev)
            continue
        if rule.kind == CLOSED:
            facts.closed_pids.setdefault(int(m.group(1)), hit.line)
        elif rule.kind == KILLED:
            facts.killed_pids.add(int(m.group(1)))
        elif rule.kind == PROGRESS and rank is not None:
            facts.enqueued.setdefault(rank, int(m.group(1)))
        elif rule.kind == BARRIER:
            facts.barrier_missing.update(int(r) for r in re.findall(r"\d+", m.group(1)))
        _add(facts, ev)


def _srun_task(facts: _Facts, m: re.Match[str], ev: Evidence) -> None:
    """`srun: error: node: task 3: Killed` -> rank 3 died by SIGKILL (srun task = rank); `Out Of
    Memory` -> rank 3 was OOM-killed."""
    what = m.group(2).strip()
    kind = OOM_KIND if what.startswith("Out Of Memory") else DEATH
    sig = next((s for word, s in SRUN_WORDS.items() if what.startswith(word)), None)
    code = re.search(r"exit code (\d+)", what)
    for part in m.group(1).split(","):
        lo, _, hi = part.partition("-")
        for rank in range(int(lo), int(hi or lo) + 1):
            ex = facts.exits.setdefault(rank, _Exit())
            ex.signal = ex.signal or sig
            if code and ex.exitcode is None:
                ex.exitcode = int(code.group(1))
            _add(facts, Evidence(ev.line, ev.text, kind, rank, ev.rule, SIGNAL_FAULT.get(sig or "")))


# -- multi-line records --------------------------------------------------------------------------


@dataclass
class _Traceback:
    """A rank's Python traceback, reduced to what attribution needs."""

    exc_line: int
    exc_text: str
    exc_class: str
    message: str
    innermost_func: str
    innermost_source: str


def _same_source(raw: str, label: int | None, inner: int | None) -> tuple[bool, str]:
    """Whether a line comes from the same rank stream as a block's first line, and its text."""
    lab, inn, text = _split_prefix(raw)
    return (lab == label and inn == inner), text


def _read_block(f: IO[bytes], offset: int) -> Iterator[str]:
    f.seek(offset)
    for _ in range(BLOCK_LINES):
        raw = f.readline()
        if not raw:
            return
        yield raw.rstrip(b"\r\n").decode("utf-8", "replace")


def _parse_traceback(f: IO[bytes], line: int, offset: int, label: int | None, inner: int | None) -> _Traceback | None:
    """The exception line and innermost frame of the traceback starting at `offset` (same rank)."""
    frames: list[tuple[str, str]] = []  # (function, source line)
    for i, raw in enumerate(_read_block(f, offset)):
        mine, text = _same_source(raw, label, inner)
        if not mine or i == 0:
            continue
        fm = _FRAME_RE.match(text)
        if fm:
            frames.append((fm.group(3), ""))
            continue
        if text.startswith((" ", "\t")) or not text.strip():
            if frames and not frames[-1][1] and text.strip():
                frames[-1] = (frames[-1][0], text.strip())
            continue
        em = _EXC_RE.match(text.strip())
        if not em or not frames:
            return None
        func, source = frames[-1]
        return _Traceback(line + i, text.strip(), em.group(1), (em.group(2) or "").strip(), func, source)
    return None


def _main_stack(f: IO[bytes], offset: int, label: int | None, inner: int | None) -> list[str]:
    """The main thread's frames ("file function", innermost first) in a faulthandler stack dump:
    the thread run from <module>, else the last one listed."""
    threads: list[list[str]] = []
    for i, raw in enumerate(_read_block(f, offset)):
        mine, text = _same_source(raw, label, inner)
        if not mine or i == 0:
            continue
        if text.startswith(("Thread 0x", "Current thread 0x")):
            threads.append([])
            continue
        frame = _FRAME_RE.match(text)
        if frame and threads:
            threads[-1].append(f"{frame.group(1)} {frame.group(3)}")
        elif text.strip():
            break
    return next((t for t in threads if any(fr.endswith(" <module>") for fr in t)), threads[-1] if threads else [])


def _in_collective(frames: list[str]) -> bool:
    """A stack waiting in a collective belongs to a victim; the stalled rank is elsewhere."""
    return any(_COLLECTIVE_FRAME_RE.search(fr) for fr in frames)


def _parse_summary(facts: _Facts, f: IO[bytes], offset: int, label: int | None, inner: int | None) -> None:
    """torchrun's ChildFailedError report: rank -> exitcode and pid."""
    rank: int | None = None
    for i, raw in enumerate(_read_block(f, offset)):
        mine, text = _same_source(raw, label, inner)
        if not mine:
            continue
        if i and text.startswith("====="):
            return
        rm = _SUMMARY_RANK_RE.match(text)
        if rm:
            rank = int(rm.group(1))
            continue
        em = _SUMMARY_EXIT_RE.match(text)
        if em and rank is not None:
            code = int(em.group(1))
            pid = int(em.group(2)) if em.group(2) else None
            ex = facts.exits.setdefault(rank, _Exit())
            ex.exitcode, ex.pid = code, pid
            ex.signal = _signal_of(code) or ex.signal
            if pid is not None:
                facts.pid_rank[pid] = rank
            rank = None


def _signal_of(code: int | None) -> str | None:
    if code is None:
        return None
    if code < 0:
        return SIGNAL_NUMBERS.get(-code, f"signal {-code}")
    if code > 128 and code - 128 in SIGNAL_NUMBERS:
        return SIGNAL_NUMBERS[code - 128]
    return None


def _read_blocks(path: Path, facts: _Facts) -> None:
    """Parse the tracebacks and launcher summaries found by the scan; turn them into evidence."""
    with open(path, "rb") as f:
        for kind, line, offset, label, inner in facts.blocks:
            if kind == SUMMARY:
                _parse_summary(facts, f, offset, label, inner)
                continue
            if kind == STACK_DUMP:
                rank = _resolve_rank(facts, label, inner, "")
                if rank is not None and rank not in facts.main_stacks:
                    facts.main_stacks[rank] = _main_stack(f, offset, label, inner)
                continue
            tb = _parse_traceback(f, line, offset, label, inner)
            if tb is None:
                continue
            rank = _resolve_rank(facts, label, inner, tb.exc_text)
            found = _classify(tb.exc_text)
            kind_ = found[0].kind if found and found[0].kind in (TIMEOUT, PEER_LOST, GPU, OOM_KIND) else EXCEPTION_KIND
            rule = found[0].name if found and kind_ != EXCEPTION_KIND else "python_exception"
            _add(facts, Evidence(tb.exc_line, tb.exc_text, kind_, rank, rule, _exception_hint(tb)))
    # launcher death lines name a pid; the summary maps it to a rank
    for pid, code, ev in facts.deaths_by_pid:
        rank = facts.pid_rank.get(pid)
        if rank is not None:
            ex = facts.exits.setdefault(rank, _Exit())
            ex.exitcode = code if ex.exitcode is None else ex.exitcode
            ex.signal = ex.signal or _signal_of(code)
            _add(facts, Evidence(ev.line, ev.text, DEATH, rank, ev.rule, SIGNAL_FAULT.get(_signal_of(code) or "")))


def _exception_hint(tb: _Traceback) -> str:
    """Which of the exception faults a traceback reads like.

    KeyboardInterrupt -> SIGINT; raised by a signal handler (a signal in the message or the
    innermost function) -> SIGNAL_EXC; no message and the innermost line is not a `raise`
    (an exception injected from outside, e.g. PyThreadState_SetAsyncExc) -> ASYNC_EXC;
    anything else is the program's own exception -> WORKLOAD_EXC.
    """
    if tb.exc_class.rsplit(".", 1)[-1] == "KeyboardInterrupt":
        return "SIGINT"
    if _SIGNAL_NAME_RE.search(tb.message) or re.search(r"(?i)sig|signal", tb.innermost_func):
        return "SIGNAL_EXC"
    if not tb.message and not tb.innermost_source.startswith("raise"):
        return "ASYNC_EXC"
    return "WORKLOAD_EXC"


# -- attribution ---------------------------------------------------------------------------------


def _ranks_with(facts: _Facts, kinds: Iterable[str]) -> set[int]:
    kinds = set(kinds)
    return {r for (k, r) in facts.first if k in kinds and r is not None}


def _attribute(facts: _Facts) -> tuple[str, list[int], list[int], list[Evidence], str]:
    """(cause, primary ranks, secondary ranks, key evidence, reasoning), in this order:
    1. the scheduler ended the job (preemption, node failure, time limit);
    2. it was cancelled from outside before any rank failed;
    3. a crash: some rank failed on its own (its first origin precedes its own symptoms and the
       launcher's stop) before anyone timed out -> the earliest such rank;
    4. a hang: ranks timed out first -> the ranks that did not (see _hang_culprits);
    5. peers were lost and nobody failed visibly -> a rank that died silently, else the network;
    6. no failure: the application finished, or no errors were found."""
    job = {ev.hint: ev for (k, _), ev in facts.first.items() if k == SLURM}
    for cause in ("PREEMPTION", "NODE_FAIL", "TIME_LIMIT"):
        if cause in job:
            return cause, [], sorted(_ranks_with(facts, SYMPTOMS + ORIGINS)), [job[cause]], \
                f"the scheduler ended the job: {job[cause].text}"

    stopped_at = {facts.pid_rank[p]: ln for p, ln in facts.closed_pids.items() if p in facts.pid_rank}
    symptom_at = {r: min(facts.first[(k, r)].line for k in SYMPTOMS if (k, r) in facts.first)
                  for r in _ranks_with(facts, SYMPTOMS)}
    origin_at: dict[int, Evidence] = {}
    for r in _ranks_with(facts, ORIGINS):
        limit = min(symptom_at.get(r, NEVER), stopped_at.get(r, NEVER))
        own = [facts.first[(k, r)] for k in ORIGINS if (k, r) in facts.first and facts.first[(k, r)].line < limit]
        if own:
            origin_at[r] = min(own, key=lambda e: e.line)
    first_origin = min((e.line for e in origin_at.values()), default=NEVER)
    first_symptom = min(symptom_at.values(), default=NEVER)
    first_timeout = min((facts.first[(TIMEOUT, r)].line for r in _ranks_with(facts, [TIMEOUT])), default=NEVER)
    victims = set(symptom_at) | set(stopped_at)

    stop = job.get("CANCELLED") or next((ev for (k, _), ev in facts.first.items() if k == JOB_SIGNAL), None)
    if stop and stop.line < min(first_origin, first_symptom):
        return "CANCELLED", [], sorted(victims | set(origin_at)), [stop], \
            "the job was stopped from outside before any rank failed"

    if origin_at and first_origin < first_timeout:
        early = sorted(r for r, e in origin_at.items() if e.line < first_symptom)
        primary = early if len(early) > 1 else [min(origin_at, key=lambda r: origin_at[r].line)]
        keys = [origin_at[r] for r in primary]
        return _crash_cause(facts, primary[0]), primary, sorted((victims | set(origin_at)) - set(primary)), keys, \
            f"rank {primary[0]} failed on its own first ({keys[0].rule}, line {keys[0].line}) while the " \
            f"other ranks only show symptoms or were stopped by the launcher"

    if first_timeout < NEVER:
        primary, why = _hang_culprits(facts, symptom_at, first_timeout)
        cause = _hang_cause(facts, primary[0]) if len(primary) == 1 else "HANG"
        keys = [facts.first[(TIMEOUT, r)] for r in sorted(_ranks_with(facts, [TIMEOUT]))[:3]]
        return cause, primary, sorted(victims - set(primary)), keys, why

    if symptom_at:
        silent = sorted(r for r, ex in facts.exits.items()
                        if r not in symptom_at and r not in stopped_at and (ex.signal or ex.exitcode))
        keys = [facts.first[(PEER_LOST, r)] for r in sorted(symptom_at) if (PEER_LOST, r) in facts.first][:3]
        if silent:
            return _crash_cause(facts, silent[0]), silent[:1], sorted(victims - set(silent[:1])), keys, \
                f"rank {silent[0]} died without a word while its peers lost their connection to it"
        world = set(range(facts.world_size)) | _seen_ranks(facts)
        quiet = sorted(world - victims)
        if len(quiet) == 1:  # no exit record: the one rank that did not lose a peer is the lost peer
            return "CRASH", quiet, sorted(victims), keys, \
                f"rank {quiet[0]} is the only rank that did not lose a peer: it died without a word"
        return "NETWORK", [], sorted(victims), keys, "connections broke but no rank failed on its own"

    net = [ev for (k, _), ev in facts.first.items() if k == NETWORK_KIND]
    if net:
        return "NETWORK", [], [], net[:3], "network errors without a failing rank"
    done = [ev for (k, _), ev in facts.first.items() if k == DONE]
    if done:
        return "DONE", [], [], done[:1], "the application reported that training finished"
    return "", [], [], [], "no errors found"


def _hang_culprits(facts: _Facts, symptom_at: dict[int, int], first_timeout: int) -> tuple[list[int], str]:
    """In a hang the victims time out; the culprit is the odd one out that did not."""
    if facts.barrier_missing:
        return sorted(facts.barrier_missing), "ranks named by monitoredBarrier as missing"
    world = set(range(facts.world_size)) | _seen_ranks(facts) | set(facts.exits) | _ranks_with(facts, ORIGINS)
    quiet = sorted(world - set(symptom_at))
    outside = sorted(r for r, frames in facts.main_stacks.items() if frames and not _in_collective(frames))
    if len(quiet) > 1:  # narrow: stuck outside a collective, else stopped by the launcher
        stopped = {facts.pid_rank[p] for p in facts.closed_pids if p in facts.pid_rank}
        quiet = [r for r in quiet if r in outside] or [r for r in quiet if r in stopped] or quiet
    if quiet:
        return quiet, f"rank{'s' if len(quiet) > 1 else ''} {', '.join(map(str, quiet))} never timed out while " \
                      f"the others did (first timeout at line {first_timeout})"
    if outside and len(outside) < len(facts.main_stacks):
        return outside, f"every rank timed out, but only {outside} stalled outside a collective (stack dumps)"
    if facts.enqueued and len(set(facts.enqueued.values())) > 1:
        low = min(facts.enqueued.values())
        behind = sorted(r for r, v in facts.enqueued.items() if v == low)
        return behind, f"ranks {behind} are behind the others in enqueued collectives ({low})"
    return [], "every rank timed out; the log cannot tell which one stalled"


def _hang_cause(facts: _Facts, rank: int) -> str:
    """GPU hang, held GIL or stopped process, from what the stalled rank could still print.

    A stuck kernel leaves the rank's threads alive (its Python stall watchdog reports, or its stack
    waits on the device); a held GIL freezes Python threads but faulthandler's C timer still dumps
    stacks; a stopped process prints nothing. Else: how the launcher had to end it.
    """
    if _ranks_with(facts, [STALL]):  # the job has a Python stall watchdog: its silence means something
        if (STALL, rank) in facts.first:
            return "GPU_SLEEP"
        return "LOCK_GIL" if (STACK_DUMP, rank) in facts.first else "SIGSTOP"
    frames = facts.main_stacks.get(rank)
    if frames and _DEVICE_WAIT_RE.search(frames[0]):
        return "GPU_SLEEP"
    if facts.main_stacks and rank not in facts.main_stacks:
        return "SIGSTOP"  # the others dumped stacks; a stopped process cannot
    killed = {facts.pid_rank[p] for p in facts.killed_pids if p in facts.pid_rank}
    ex = facts.exits.get(rank)
    if rank in killed or (ex and ex.signal == "SIGKILL"):
        return "SIGSTOP"
    return "GPU_SLEEP" if (SIGNAL, rank) in facts.first or (ex and ex.signal == "SIGTERM") else "HANG"


def _crash_cause(facts: _Facts, rank: int) -> str:
    """The fault a crashed rank's own evidence names, strongest evidence first."""
    first = facts.first
    if (GPU, rank) in first:
        return "GPU_ERROR"
    if (OOM_KIND, rank) in first:
        return "OOM"
    if (FATAL, rank) in first:
        return first[(FATAL, rank)].hint or "CRASH"
    if (EXCEPTION_KIND, rank) in first:
        return first[(EXCEPTION_KIND, rank)].hint or "WORKLOAD_EXC"
    ex = facts.exits.get(rank)
    if (SIGNAL, rank) in first:
        sig = _signal_name(first[(SIGNAL, rank)].text)
        return SIGNAL_FAULT.get(sig or "", "EXTERNAL_SIGNAL")
    if ex and ex.signal in SIGNAL_FAULT:
        return SIGNAL_FAULT[ex.signal]
    if (NETWORK_KIND, rank) in first:
        return "NETWORK"
    return "CRASH"


def _signal_name(text: str) -> str | None:
    m = re.search(r"\bSIG[A-Z0-9]+\b", text)
    if m:
        return m.group(0)
    m = re.search(r"signal[: ]*(\d+)", text, re.I)
    return SIGNAL_NUMBERS.get(int(m.group(1))) if m else None


# -- public API ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """How to analyze: the mode, the LLM endpoint for llm mode, and which prefilter reads the log."""

    mode: str = "deterministic"
    prefilter: str = "auto"  # auto (rg, else grep, else Python) | rg | grep | python
    jobs: int = 0  # parallel grep ranges for big logs; 0: one per CPU, at most 4
    llm: Any = None  # faultloop.llm.LLMSettings in llm mode


def analyzer_fingerprint(settings: Any = None) -> str:
    """A short hash of this module's source and the settings: changes whenever the rules do."""
    from faultloop.config import source_fingerprint

    return source_fingerprint(sys.modules[__name__], settings=settings)


def analyze_log(path_or_lines: str | os.PathLike[str] | Iterable[str], settings: Settings | None = None) -> Verdict:
    """Attribute a job from its log: a path (streamed) or lines (spooled to a temporary file)."""
    settings = settings or Settings()
    if isinstance(path_or_lines, (str, os.PathLike)):
        verdict = _analyze_path(Path(path_or_lines), settings)
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".log", encoding="utf-8", delete=False) as tmp:
            for line in path_or_lines:
                tmp.write(line if line.endswith("\n") else line + "\n")
        try:
            verdict = _analyze_path(Path(tmp.name), settings)
        finally:
            os.unlink(tmp.name)
    verdict.analyzer_version = analyzer_fingerprint(_fingerprint_settings(settings))
    return verdict


def _fingerprint_settings(settings: Settings) -> tuple[Any, ...]:
    endpoint = settings.llm
    return (settings.mode, getattr(endpoint, "model", None), getattr(endpoint, "base_url", None))


def _analyze_path(path: Path, settings: Settings) -> Verdict:
    if not path.is_file() or not _has_text(path):
        return Verdict(NO_LOGS, [], [], NONE, None, f"no log to analyze at {path}" if not path.is_file()
                       else "the log is empty", "", [], False)
    facts = _Facts()
    _census(path, facts)
    _scan(path, facts, settings)
    _read_blocks(path, facts)
    if not facts.labelled:  # a single process: its lines are rank 0's
        _single_process(facts)
    cause, primary, secondary, keys, why = _attribute(facts)
    checkpoint = any(k == CHECKPOINT for k, _ in facts.first)
    if not cause:
        return Verdict(ERRORS_NOT_FOUND, [], [], NONE, None, "No errors found in the log.", why,
                       facts.evidence[:10], checkpoint)
    policy = POLICY[cause]
    fault_type = cause if cause in FAULTS else None
    evidence = _ordered_evidence(keys, facts.evidence)
    who = f"Rank{'s' if len(primary) != 1 else ''} {', '.join(map(str, primary))}" if primary else "The job"
    victims = f" {len(secondary)} other rank{'s' if len(secondary) != 1 else ''} only show symptoms." if secondary else ""
    explanation = (f"{who} {WHAT_HAPPENED.get(cause, cause.lower())} ({fault_type or cause}, {policy.category})."
                   f"{victims} {'Restart' if policy.restart == RESTART else 'Do not restart'}: {policy.why}.")
    detail = why + (f"; first evidence line {keys[0].line}: {keys[0].text[:200]}" if keys else "")
    if checkpoint:
        detail += "; a checkpoint was saved (reported, decision kept)"
    return Verdict(policy.restart, primary, secondary, policy.category, fault_type, explanation, detail,
                   evidence, checkpoint)


def _has_text(path: Path) -> bool:
    """Whether the file has anything but whitespace (an empty log is NO LOGS, like upstream's)."""
    with open(path, "rb") as f:
        while block := f.read(1 << 16):
            if block.strip():
                return True
    return False


def _single_process(facts: _Facts) -> None:
    """Unlabelled logs come from one process: give rank-less evidence to rank 0."""
    moved: dict[tuple[str, int | None], Evidence] = {}
    for (kind, rank), ev in facts.first.items():
        if rank is None and kind not in (SLURM, JOB_SIGNAL, CLOSED, KILLED, SUMMARY, CHECKPOINT, DONE):
            ev.rank = 0
            moved.setdefault((kind, 0), ev)
        else:
            moved.setdefault((kind, rank), ev)
    facts.first = moved


def _ordered_evidence(keys: list[Evidence], rest: list[Evidence]) -> list[Evidence]:
    """The lines behind the decision first, then the rest in log order (capped)."""
    seen = {id(e) for e in keys}
    return keys + sorted((e for e in rest if id(e) not in seen), key=lambda e: e.line)[: MAX_EVIDENCE - len(keys)]


# -- LLM mode ------------------------------------------------------------------------------------

LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "restart": {"enum": [RESTART, STOP]},
        "primary_ranks": {"type": "array", "items": {"type": "integer"}},
        "secondary_ranks": {"type": "array", "items": {"type": "integer"}},
        "fault_category": {"enum": list(faults.CATEGORIES)},
        "fault_type": {"enum": [*FAULTS, None]},
        "explanation": {"type": "string"},
    },
    "required": ["restart", "primary_ranks", "secondary_ranks", "fault_category", "fault_type", "explanation"],
    "additionalProperties": False,
}
LLM_SYSTEM = (
    "You attribute failures of distributed training jobs from their logs. Ranks that time out or "
    "lose a peer are victims; in a hang the culprit is the rank that did not time out; in a crash "
    "it is the first rank with its own error or death. Restart policy: hard crash, code bug, GPU "
    "error, OOM -> STOP - DONT RESTART IMMEDIATE; transient hang, external signal, preemption, "
    "network flap -> RESTART IMMEDIATE. Answer with one JSON object matching the schema."
)
LLM_TAIL_LINES = 200


def _tail(path: Path, n: int) -> list[str]:
    """The last n lines, read from the end (bounded memory)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 256 * n))
        return f.read().decode("utf-8", "replace").splitlines()[-n:]


def analyze_with_llm(path: Path, settings: Settings) -> Verdict:
    """The LLM's verdict given the engine's evidence and the log tail; the deterministic verdict
    stays beside it, and replaces it (with the error recorded) when the model fails."""
    det = analyze_log(path, Settings(prefilter=settings.prefilter, jobs=settings.jobs))
    version = analyzer_fingerprint(_fingerprint_settings(settings))
    if det.restart in (NO_LOGS, ERRORS_NOT_FOUND):
        det.analyzer_version, det.extra = version, {"llm_error": None, "requested_mode": "llm"}
        return det
    user = json.dumps({
        "deterministic_verdict": {k: v for k, v in det.to_json().items() if k not in ("analyzer_version", "mode")},
        "log_tail": _tail(path, LLM_TAIL_LINES),
    }, indent=1)
    try:
        answer = llm.chat_json(settings.llm, LLM_SYSTEM, user, LLM_SCHEMA, schema_name="logsage_verdict")
    except llm.LLMError as exc:
        det.analyzer_version = version
        det.extra = {"requested_mode": "llm", "llm_error": str(exc)}
        return det
    verdict = Verdict(answer["restart"], sorted(answer["primary_ranks"]), sorted(answer["secondary_ranks"]),
                      answer["fault_category"], answer["fault_type"], answer["explanation"],
                      f"LLM verdict ({settings.llm.model}); deterministic: {det.restart}, primary {det.primary_ranks}",
                      det.evidence, det.checkpoint_saved, mode="llm", analyzer_version=version)
    verdict.extra = {"requested_mode": "llm", "llm_error": None, "deterministic": det.to_json()}
    return verdict


# -- upstream adapter ----------------------------------------------------------------------------


UPSTREAM_MODULE = "nvidia_resiliency_ext.attribution.log_analyzer.nvrx_logsage"


def run_upstream(path: Path, settings: Settings) -> Verdict:
    """Run NVRx's log analyzer (the `logsage` package behind nvrx_logsage.py), when installed, for a
    side-by-side comparison. It needs its own LLM endpoint and key (its environment); its output is
    parsed for the decision, the attribution lists and checkpoint_saved, whatever its layout."""
    missing = [m for m in ("logsage", UPSTREAM_MODULE) if _missing_module(m)]
    if missing:
        raise RuntimeError(f"upstream mode needs NVRx's log analyzer; not installed: {', '.join(missing)}")
    proc = subprocess.run([sys.executable, "-m", UPSTREAM_MODULE, "--log-path", str(path), "--exclude_nvrx_logs",
                           "--emit-stdout"], capture_output=True, text=True, timeout=3600, check=False)
    out = proc.stdout
    decision = re.search("|".join(map(re.escape, (*faults.RESTART_DECISIONS, "LLM FAILURE"))), out)
    if proc.returncode != 0 or not decision:
        raise RuntimeError(f"upstream log analyzer failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    attr = re.search(r"Primary issues: \[([^\]]*)\],? Secondary issues: \[([^\]]*)\]", out)
    primary, secondary = ([int(x) for x in re.findall(r"\d+", g)] for g in (attr.groups() if attr else ("", "")))
    checkpoint = bool(re.search(r"checkpoint_saved\W+true", out, re.I))
    return Verdict(decision.group(0), primary, secondary, OTHER, None, out.strip()[:2000], "", [], checkpoint,
                   mode="upstream", analyzer_version=analyzer_fingerprint(_fingerprint_settings(settings)))


def _missing_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # a parent package is missing
        return True


# -- CLI -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="faultloop logsage", description="Attribute a failed job from its log.")
    parser.add_argument("--log-path", required=True)
    parser.add_argument("--format", choices=("text", "json"), default="text", help="stdout format")
    parser.add_argument("--output-text", help="also write the text form here")
    parser.add_argument("--output-json", help="also write the JSON form here")
    parser.add_argument("--mode", choices=("deterministic", "llm", "upstream"), default="deterministic")
    parser.add_argument("--prefilter", choices=("auto", "rg", "grep", "python"), default="auto",
                        help="line prefilter: ripgrep, GNU grep or pure Python (auto: the first present)")
    llm.add_cli_arguments(parser, timeout_s=60.0)
    args = parser.parse_args(argv)
    path = Path(args.log_path)
    if args.mode == "llm":
        if not args.llm_base_url or not args.llm_model:
            parser.error("--mode llm needs --llm-base-url and --llm-model")
        llm_settings = llm.settings_from_args(args)
        verdict = analyze_with_llm(path, Settings(mode="llm", prefilter=args.prefilter, llm=llm_settings))
    elif args.mode == "upstream":
        try:
            verdict = run_upstream(path, Settings("upstream"))
        except RuntimeError as exc:
            print(f"faultloop logsage: {exc}", file=sys.stderr)
            return 2
    else:
        verdict = analyze_log(path, Settings(prefilter=args.prefilter))
    layout.emit_result(verdict.to_text(), verdict.to_json(), text_path=args.output_text,
                       json_path=args.output_json, stdout_format=args.format)
    return 0


__all__ = ["POLICY", "RULES", "Evidence", "Rule", "Settings", "Verdict", "analyze_log", "analyze_with_llm",
           "analyzer_fingerprint", "main"]

if __name__ == "__main__":
    raise SystemExit(main())

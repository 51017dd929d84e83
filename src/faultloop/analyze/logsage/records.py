"""Multi-line records, read after the scan by seeking to their byte offsets: Python tracebacks
(whole, cut off, or a launcher's own), faulthandler stack dumps and the failure times of
torchrun's summary records.

A line belongs to a record when it comes from the same source (same prefixes) as the record's
first line, so interleaved output of many ranks is untangled. Pasted excerpts lose heads and
tails: a traceback whose exception line is missing still says that its rank raised, and where.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

from faultloop.analyze.logsage.context import COLLECTIVE_FRAMES, DATA_FRAMES, MAIN_FIRST_FRAMES, SETUP_FRAMES
from faultloop.analyze.logsage.facts import Block, Evidence, Facts, Source
from faultloop.analyze.logsage.launchers import (
    FIRST_EXIT_NAMES,
    LAUNCHER_AFTER_RUN,
    LAUNCHER_EXCEPTIONS,
    LAUNCHER_FRAMES,
    MESSAGE_ROWS,
    horovod,
    mpich,
    open_mpi,
)
from faultloop.analyze.logsage.ranks import resolve_rank
from faultloop.analyze.logsage.reading import Reading, classify
from faultloop.analyze.logsage.rules import EXCEPTION_CAUSES
from faultloop.analyze.logsage.scan import MESSAGE_LINES, add, drop, named_gpu, record_exit, signal_of
from faultloop.analyze.logsage.vocab import (
    DEATH,
    EXCEPTION_KIND,
    EXITED,
    FATAL,
    FIRST_EXIT,
    GPU,
    GPU_HARDWARE,
    MISSING,
    NETWORK_KIND,
    OOM_KIND,
    PEER_LOST,
    STACK_DUMP,
    STOPPING,
    SUMMARY,
    TIMEOUT,
    TRACEBACK_CUT,
    Cause,
)
from faultloop.signals import signal_name

BLOCK_LINES = 400
AGENT_CLOSE_TIMEOUT = timedelta(seconds=30)  # torchrun's agent: SIGTERM, then SIGKILL after this (api.py's _close)
FIRST_EXIT_LINES = 6  # how far below a launcher's first-exit header its process name and exit code stand
# the most unindented lines in a row inside a traceback's frames read as the rest of a frame's line that a
# terminal or a paste wrapped (a frame's lines are indented; only the exception line ends a traceback unindented)
WRAPPED_LINES = 2
MISSING_RANK_LINES = 64  # the most lines of a launcher's list of missing ranks read
CHILD_HEADER_GAP = 2  # a launcher's header line this close above a traceback names its child
INNERMOST_FRAMES = 3  # how deep into a traceback "where it failed" looks
# the exception line's classification is kept when it names one of these; else it is the program's
_EXCEPTION_LINE_KINDS = (TIMEOUT, PEER_LOST, GPU, GPU_HARDWARE, OOM_KIND, NETWORK_KIND)
# what a launcher's own traceback may end in and still be the launcher failing (not its report of a
# child): an exception line no rule reads, or one read as an exception, a failure or a lost connection
_LAUNCH_FAILURE_KINDS = (EXCEPTION_KIND, FATAL, TIMEOUT, PEER_LOST, NETWORK_KIND)
_REPORT_KINDS = (DEATH, FIRST_EXIT, STOPPING)  # a launcher's word on its children, not an exception of its own
_LAUNCH_FAILURE = "launcher_failed"  # the rule name of a launcher's own failure
_MESSAGE_ROW_NAMES = {row.name for row in MESSAGE_ROWS}
# the outermost frame of an exception that ended a program: its script, or runpy for `python -m`
_ENTRY_FUNCTIONS = ("<module>", "_run_module_as_main")
_FRAME_RE = re.compile(r'^\s+File "([^"]*)", line (\d+),? in (\S+)')
# an exception line: its class (Ray's RayTaskError(Inner) wraps the class its worker raised), message
_EXC_RE = re.compile(r"^([A-Za-z_][\w.]*)(?:\((\w+)\))?(?::\s?(.*))?$")
_RECORD_TIME_RE = re.compile(r"^\s*time\s*:\s*(\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)")  # torchrun's record
_RECORD_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)")
_SIGNAL_NAME_RE = re.compile(r"\bSIG(?:USR[12]|HUP|TERM|INT|QUIT|ALRM)\b|\bsignal \d+\b", re.I)


@dataclass
class Frame:
    """One traceback frame: file, function and the source line shown under it."""

    file: str
    func: str
    source: str = ""

    def __str__(self) -> str:
        return f"{self.file} {self.func} {self.source}"


@dataclass
class Traceback:
    """A rank's Python traceback, reduced to what attribution needs."""

    line: int  # the exception line, or the traceback's first line when that is cut off
    frames: list[Frame]
    exc_text: str = ""  # empty: the excerpt lost the exception line
    exc_class: str = ""
    message: str = ""
    first_line: int = 0  # the traceback's first line
    message_rest: list[str] = field(default_factory=list)  # the lines the exception's message runs on to

    @property
    def launcher(self) -> bool:
        """A launcher's own traceback: it reports that a worker failed, not why."""
        return self.exc_class.rsplit(".", 1)[-1] in LAUNCHER_EXCEPTIONS or any(
            LAUNCHER_FRAMES.search(fr.file) for fr in self.frames
        )

    @property
    def innermost(self) -> str:
        return " ".join(str(fr) for fr in self.frames[-INNERMOST_FRAMES:])


def _read_block(f: IO[bytes], offset: int) -> Iterator[str]:
    f.seek(offset)
    for _ in range(BLOCK_LINES):
        raw = f.readline()
        if not raw:
            return
        yield raw.rstrip(b"\r\n").decode("utf-8", "replace")


def _block_line(block: Block, raw: str, required: bool = True) -> tuple[Source | None, str]:
    """A line of a record read as its first line was (None: not behind its first line's lead)."""
    return (block.reading or Reading(shows=block.source)).read(raw, required)


def _block_lines(f: IO[bytes], block: Block) -> Iterator[tuple[int, str | None]]:
    """(line number, text without prefixes) of the block's lines after its first, the text None on a
    line of another source (interleaved ranks), so that a reader can bound its window in lines read."""
    for i, raw in enumerate(_read_block(f, block.offset)):
        source, text = _block_line(block, raw)
        if i or block.headless:
            yield block.line + i, text if source == (block.reading.shows if block.reading else block.source) else None


def _same_source(f: IO[bytes], block: Block) -> Iterator[tuple[int, str]]:
    """(line number, text without prefixes) of the block's lines that come from its source."""
    return ((line, text) for line, text in _block_lines(f, block) if text is not None)


def parse_traceback(f: IO[bytes], block: Block) -> Traceback | None:
    """The frames and exception line of the traceback opened at the block (same source); a
    traceback that ends before its exception line is returned cut off (no exc_text)."""
    frames: list[Frame] = []
    frame_indent = 0
    wrapped = 0  # unindented lines in a row inside the frames
    lines = _block_lines(f, block)
    for line, text in lines:
        if text is None:
            continue
        indented = text.startswith((" ", "\t"))
        wrapped = 0 if indented else wrapped + 1
        if frames and not indented and wrapped <= WRAPPED_LINES and not text.startswith("Traceback") and text.strip():
            if not _EXC_RE.match(text.strip()):
                continue  # the rest of a frame's line that a terminal or a paste wrapped: the frames go on
        fm = _FRAME_RE.match(text)
        if fm:
            frames.append(Frame(fm.group(1), fm.group(3)))
            frame_indent = len(text) - len(text.lstrip())
            continue
        indent = len(text) - len(text.lstrip())
        outdented = frames and text.strip() and 0 < indent < frame_indent  # the whole traceback indented
        if outdented and (em := _EXC_RE.match(text.strip())):  # as torchrun's summary prints a child's
            return Traceback(line, frames, text.strip(), em.group(2) or em.group(1), (em.group(3) or "").strip())
        if text.startswith((" ", "\t")) or not text.strip():
            if frames and not frames[-1].source and text.strip():
                frames[-1].source = text.strip()
            continue
        em = _EXC_RE.match(text.strip())
        if em and frames:
            cls, message = em.group(2) or em.group(1), (em.group(3) or "").strip()
            return Traceback(line, frames, text.strip(), cls, message, block.line, _message_rest(lines))
        break
    return Traceback(block.line, frames, first_line=block.line) if frames else None


def _message_rest(lines: Iterator[tuple[int, str | None]]) -> list[str]:
    """The lines an exception's message runs on to after its first, up to a blank line (Ray's
    ActorDiedError lists the actor, then why it died), within MESSAGE_LINES lines of the log: other
    ranks' lines between count, so that a message is never looked for far from its exception line."""
    rest = []
    for _, text in itertools.islice(lines, MESSAGE_LINES):
        if text is None:
            continue
        if not text.strip() or text.startswith("Traceback"):
            break
        rest.append(text.strip())
    return rest


def main_stack(f: IO[bytes], block: Block) -> list[str]:
    """The main thread's frames ("file function", innermost first) in a faulthandler stack dump:
    the thread run from <module>, else the last one listed."""
    threads: list[list[str]] = []
    for _, text in _same_source(f, block):
        if text.startswith(("Thread 0x", "Current thread 0x")):
            threads.append([])
            continue
        frame = _FRAME_RE.match(text)
        if frame and threads:
            threads[-1].append(f"{frame.group(1)} {frame.group(3)}")
        elif text.strip():
            break
    return next((t for t in threads if any(fr.endswith(" <module>") for fr in t)), threads[-1] if threads else [])


def in_collective(frames: list[str]) -> bool:
    """A stack waiting in a collective belongs to a victim; the stalled rank is elsewhere."""
    return any(COLLECTIVE_FRAMES.search(fr) for fr in frames)


def exception_hint(tb: Traceback) -> str:
    """Which cause a whole traceback reads like.

    A class that says more (KeyboardInterrupt -> SIGINT, a missing module -> CONFIG_ERROR);
    raised by a signal handler (a signal in the message or the innermost function) ->
    SIGNAL_EXC; no message and the innermost line is not a `raise` (an exception injected from
    outside, e.g. PyThreadState_SetAsyncExc) -> ASYNC_EXC; raised while reading data ->
    DATA_ERROR; raised in code that only runs while the job sets up (process group, rendezvous,
    store) -> SETUP_EXC; anything else is the program's own exception -> WORKLOAD_EXC.
    """
    cls = tb.exc_class.rsplit(".", 1)[-1]
    if cls in EXCEPTION_CAUSES:
        return EXCEPTION_CAUSES[cls]
    innermost = tb.frames[-1] if tb.frames else Frame("", "")
    if _SIGNAL_NAME_RE.search(tb.message) or re.search(r"(?i)sig|signal", innermost.func):
        return Cause.SIGNAL_EXC
    if not tb.message and not innermost.source.startswith("raise"):
        return Cause.ASYNC_EXC
    if DATA_FRAMES.search(tb.innermost) or DATA_FRAMES.search(tb.message):
        return Cause.DATA_ERROR
    if any(SETUP_FRAMES.search(f"{fr.file} {fr.func}") for fr in tb.frames):
        return Cause.SETUP_EXC  # raised in code that only runs while the job sets up
    return Cause.WORKLOAD_EXC


def _traceback_evidence(facts: Facts, tb: Traceback, source: Source) -> Evidence | None:
    """What a traceback says about its rank: the exception line's own kind when a rule names it
    (a timeout, a lost peer, a GPU error...), else the program's exception; a cut-off traceback
    that was waiting in a collective is a victim's, any other cut-off one a weak origin."""
    if tb.launcher:
        return _launch_failure(tb)
    rank = resolve_rank(facts, source, tb.exc_text)
    header = facts.child_errors.get(source)
    if header and 0 < tb.first_line - header[0] <= CHILD_HEADER_GAP:
        rank = header[1]  # a launcher printed the child's traceback under a header naming it
    if not tb.exc_text:
        if in_collective([str(fr) for fr in tb.frames[-INNERMOST_FRAMES:]]):
            return Evidence(
                tb.line,
                f"traceback cut off inside a collective: {tb.innermost}",
                TIMEOUT,
                rank,
                "traceback_in_collective",
            )
        hint = Cause.DATA_ERROR if DATA_FRAMES.search(tb.innermost) else Cause.WORKLOAD_EXC
        return Evidence(
            tb.line,
            f"traceback cut off before its exception line: {tb.innermost}",
            TRACEBACK_CUT,
            rank,
            "traceback_cut",
            hint,
        )
    said = next((row for row in MESSAGE_ROWS for text in tb.message_rest if re.search(row.pattern, text)), None)
    if said:  # the message's later lines say what happened (a Ray actor's node died)
        return Evidence(tb.line, tb.exc_text, said.kind, None, said.name, said.hint)
    found = classify(tb.exc_text)
    if found and found[0].kind in _REPORT_KINDS:
        return None  # a launcher's report of a child's end, kept by the scan as that child's record
    if found and found[0].kind in _EXCEPTION_LINE_KINDS:
        return Evidence(tb.line, tb.exc_text, found[0].kind, rank, found[0].name, found[0].hint)
    return Evidence(tb.line, tb.exc_text, EXCEPTION_KIND, rank, "python_exception", exception_hint(tb))


def _launch_failure(tb: Traceback) -> Evidence | None:
    """A launcher's own traceback: it reports a child (ChildFailedError, CalledProcessError...), or
    the launcher itself failed (its rendezvous, its store, its arguments) and no worker ran. Only an
    exception that ended the launcher counts (its traceback starts at the program's entry: one it
    logged and went on from, such as the agent's exit barrier after its workers ended, does not),
    and a class that says more (KeyboardInterrupt, a missing module) keeps its own meaning."""
    cls = tb.exc_class.rsplit(".", 1)[-1]
    uncaught = bool(tb.frames) and tb.frames[0].func in _ENTRY_FUNCTIONS
    if not tb.exc_text or not uncaught or cls in LAUNCHER_EXCEPTIONS or cls in EXCEPTION_CAUSES:
        return None
    found = classify(tb.exc_text)
    if found and found[0].kind not in _LAUNCH_FAILURE_KINDS:
        return None  # a report of a child's end (mpirun's or horovodrun's first exit) or a signal
    hint = found[0].hint if found and found[0].kind == FATAL and found[0].hint else Cause.LAUNCH_ENV
    return Evidence(tb.line, tb.exc_text, FATAL, None, _LAUNCH_FAILURE, hint)


def _collective_called(tb: Traceback) -> str | None:
    """The torch.distributed call a traceback ended in (all_reduce, barrier...), if it did."""
    return next((fr.func for fr in reversed(tb.frames) if fr.file.endswith("distributed_c10d.py")), None)


def summary_times(f: IO[bytes], block: Block) -> dict[int, str]:
    """rank -> failure time of each record of a torchrun failure summary section (`time : ...`
    comes before `rank : N` in a record; the section ends at its `=====` rule)."""
    times: dict[int, str] = {}
    when = ""
    for _, text in _same_source(f, block):
        if text.startswith("="):
            break
        if m := _RECORD_TIME_RE.match(text):
            when = m.group(1)
        elif (m := _RECORD_RANK_RE.match(text)) and when:
            times.setdefault(int(m.group(1)), when)
    return times


def _first_exit(facts: Facts, f: IO[bytes], block: Block) -> None:
    """A launcher's first process to end badly: mpirun's or horovodrun's first non-zero exit (its
    rank and exit status a few lines below the header), or mpirun's report of a rank killed by a
    signal wrapped onto the next line (read whatever source prefixes them: the launcher prints the
    block itself)."""
    rank = code = None
    text_above = ""
    named = False  # the report named its process (horovodrun's elastic `host[local]` names no rank)
    lines = (_block_line(block, raw, required=False)[1] for raw in _read_block(f, block.offset))
    for i, text in enumerate(lines):
        if i > FIRST_EXIT_LINES:
            break
        if i == 0 and (m := mpich.RUNNING_RE.search(text)):
            _hydra_status(facts, block, next(lines, ""))
            return
        if i == 0 and (m := open_mpi.WRAPPED_RANK_RE.search(text)):
            rank = int(m.group("rank"))
        elif i == 1 and rank is not None and (m := open_mpi.WRAPPED_SIGNAL_RE.match(text)):
            sig = signal_name(int(m.group(1)))
            ev = Evidence(block.line, f"mpirun: rank {rank} exited on signal {sig}", DEATH, rank, "mpirun_signal")
            record_exit(facts, rank, ev, None, sig)
            return
        elif name := next((m for rx in FIRST_EXIT_NAMES if (m := rx.match(text))), None):
            rank, named = (int(name.group(1)) if name.group(1) else None), True
        elif (m := open_mpi.CODE_RE.match(text)) and named:
            code = int(m.group(1))
            who = f"rank {rank}" if rank is not None else f"{text_above.strip()} (no rank named)"
            ev = Evidence(
                block.line + i,
                f"the launcher: the first process to exit non-zero was {who} (exit code {code})",
                DEATH,
                rank,
                "mpirun_first_exit",
            )
            record_exit(facts, rank, ev, code, None)
            if rank is not None:
                facts.exits[rank].first = True
            return
        text_above = text


def _hydra_status(facts: Facts, block: Block, below: str) -> None:
    """Hydra's block: a process died by the signal its status line below the `RUNNING AT` line says
    (mpich.STATUS_RE); which one failed first, the block does not say (mpich.py)."""
    if m := mpich.STATUS_RE.match(below):
        sig = signal_name(int(m.group("sig")) if m.group("sig") else int(m.group("status")) & 0x7F)
        said = f"Hydra: a process was killed by {sig} ({below.strip()})"
        record_exit(facts, None, Evidence(block.line + 1, said, DEATH, None, "hydra_bad_termination"), None, sig)


def _missing_ranks(facts: Facts, f: IO[bytes], block: Block) -> None:
    """A launcher's list of the ranks a collective waited for (Horovod's stall inspector: one
    `R: [tensors]` line each under its header): a timeout seen by the reporting rank, and the
    ranks it names are the ones that never came."""
    missing = []
    for i, raw in enumerate(_read_block(f, block.offset)):
        if i == 0:
            continue
        source, text = _block_line(block, raw, required=False)
        if source is None or i > MISSING_RANK_LINES:
            break
        if m := horovod.MISSING_RANK_RE.match(text):
            missing.append(int(m.group(1)))
        elif source.label is not None and block.source.label is None and text.startswith("["):
            missing.append(source.label)  # `R: [` reads like srun's --label: the header has none, so it is the list's
        else:
            break
    if missing:
        facts.barrier_missing.update(missing)
        text = f"Horovod's stall inspector: ranks {', '.join(map(str, missing))} never submitted a collective"
        add(facts, Evidence(block.line, text, TIMEOUT, resolve_rank(facts, block.source, ""), "horovod_missing_ranks"))


def _device_below(facts: Facts, f: IO[bytes], block: Block) -> None:
    """The GPU a rank-less exception's message names on the lines it runs on to (its first line
    named none), up to a blank line, a traceback or MESSAGE_LINES."""
    for _, text in itertools.islice(_same_source(f, block), MESSAGE_LINES):
        if not text.strip() or text.startswith("Traceback") or _FRAME_RE.match(text):
            return
        if (gpu := named_gpu(text)) is not None:
            facts.named_device[block.line] = gpu
            return


def read_blocks(path: Path, facts: Facts) -> None:
    """Parse the tracebacks, stack dumps and torchrun summary sections found by the scan; turn them
    into evidence (and the summaries' failure times)."""
    with open(path, "rb") as f:
        for block in facts.blocks:
            if block.kind == FIRST_EXIT:
                _first_exit(facts, f, block)
                continue
            if block.kind == MISSING:
                _missing_ranks(facts, f, block)
                continue
            if block.kind == EXCEPTION_KIND:
                _device_below(facts, f, block)
                continue
            if block.kind == SUMMARY:
                times = summary_times(f, block)
                for failed, when in times.items():
                    facts.failure_time.setdefault(failed, when)
                if "Root Cause" in next(_read_block(f, block.offset), ""):
                    _cut_root_cause(facts, block, times)
                continue
            if block.kind == STACK_DUMP:
                rank = resolve_rank(facts, block.source, "")
                if rank is None:
                    facts.loose_stacks.append(main_stack(f, block))
                elif rank not in facts.main_stacks:
                    facts.main_stacks[rank] = main_stack(f, block)
                continue
            tb = parse_traceback(f, block)
            if tb and tb.launcher and any(LAUNCHER_AFTER_RUN.search(fr.func) for fr in tb.frames):
                for scanned in [e for e in facts.first.values() if e.line == tb.line]:
                    drop(facts, scanned)  # the launcher's own wait after its workers ended: no worker's failure
                continue
            ev = _traceback_evidence(facts, tb, block.source) if tb else None
            if tb and ev and ev.rank is not None and (api := _collective_called(tb)):
                facts.waited_in.setdefault(ev.rank, api)
            if tb and ev and ev.kind == TIMEOUT and any(MAIN_FIRST_FRAMES.search(fr.func) for fr in tb.frames):
                facts.main_first.add(ev.rank)
            if (
                tb
                and ev
                and ev.rank is None
                and (gpu := named_gpu(" ".join([tb.exc_text, *tb.message_rest]))) is not None
            ):
                facts.named_device.setdefault(ev.line, gpu)
            if ev:
                # the exception line read alone: the whole traceback says more (and a launcher's own
                # failure is that, however its exception line read alone)
                launcher = ev.rule == _LAUNCH_FAILURE or ev.rule in _MESSAGE_ROW_NAMES
                for scanned in [e for e in facts.first.values() if e.line == ev.line]:
                    if launcher or (scanned.kind, scanned.rank) == (ev.kind, ev.rank):
                        drop(facts, scanned)
                add(facts, ev)
    _late_stops(facts)


def _cut_root_cause(facts: Facts, block: Block, ranks: dict[int, str]) -> None:
    """torchrun's `Root Cause (first observed failure)` section names the rank that failed first;
    where the excerpt cut its record before its exit code, that rank still failed first, how the
    log does not say: a non-zero exit (the only end the summary records), a weak origin."""
    for rank in ranks:
        if rank not in facts.exits:
            facts.root_cause.add(rank)
            said = f"torchrun's summary: rank {rank} is the first observed failure (its exit code cut off)"
            add(facts, Evidence(block.line, said, EXITED, rank, "summary_first"))


def _late_stops(facts: Facts) -> None:
    """torchrun's agent times a failure when it notices it, one poll for all it finds together, then
    closes the other workers: SIGTERM (`Sending process P closing signal SIGTERM`), and SIGKILL to
    those still running after its close timeout (30 s). A rank it timed after its first observed
    failure that ended by SIGTERM, or by SIGKILL that much later, was ended by that teardown, where
    the agent closed its pid or its closings are not in the log."""
    times = {rank: _when(at) for rank, at in facts.failure_time.items()}
    first = min((t for t in times.values() if t is not None), default=None)
    for rank, when in times.items():
        ex = facts.exits.get(rank)
        if not ex or first is None or when is None or when <= first:
            continue
        closed = ex.pid in facts.closed_pids or not facts.closing_agents
        signal = ex.signal or signal_of(ex.exitcode)
        if closed and (signal == "SIGTERM" or (signal == "SIGKILL" and when - first >= AGENT_CLOSE_TIMEOUT)):
            ex.stopped = True


def _when(at: str) -> datetime | None:
    """A failure time of torchrun's summary (`2026-09-07_13:02:58`), None where it reads otherwise."""
    try:
        return datetime.strptime(at.strip(), "%Y-%m-%d_%H:%M:%S")
    except ValueError:
        return None

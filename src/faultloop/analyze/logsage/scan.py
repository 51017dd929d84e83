"""The line scan: read each prefiltered line's prefixes and rank, match it against RULES and keep
what it says in bounded Facts (first evidence per kind and rank, launcher records, collectives).

Real logs carry prefixes in layers (a collector's, a launcher's, torch's rank prefix, a logging
header); framing.py's grammar peels them, so a rule only ever sees the program's words, and says
which rank the line is from. A progress bar without a newline glues the next line onto its own:
the two are split here first.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from faultloop.analyze.logsage import framing, prefilter, reading, shapes
from faultloop.analyze.logsage.collectives import collective, count_collective
from faultloop.analyze.logsage.context import DEVICE_NAMED_RE, IGNORED_RE, OOM_DEVICE_RE
from faultloop.analyze.logsage.exits import SIGNAL_CAUSES
from faultloop.analyze.logsage.facts import (
    MAX_EVIDENCE,
    MAX_HOSTS,
    Block,
    Death,
    Evidence,
    Exit,
    Facts,
    Source,
)
from faultloop.analyze.logsage.framing import DEVICE
from faultloop.analyze.logsage.launchers import SPAWNED_RES, WHY_ABOVE, WHY_BELOW, torchrun
from faultloop.analyze.logsage.ranks import labels_are_nodes, node_local_size, note_rank, resolve_rank, unranked
from faultloop.analyze.logsage.reading import classify as classify  # the line table's reading (tests use it)
from faultloop.analyze.logsage.repeats import Counted, Repeats, line_of, unrepeated
from faultloop.analyze.logsage.rules import DIVERGED_SKIP_SHARE, STOP_SIGNALS, WARMUP_SKIPS
from faultloop.analyze.logsage.vocab import (
    BUSY,
    CHILD_ERROR,
    CLOSED,
    COLLECTIVE,
    DEATH,
    DIVERGED,
    EXCEPTION_KIND,
    EXITED,
    FATAL,
    FIRST_EXIT,
    GPU,
    GPU_HARDWARE,
    JOB_SIGNAL,
    KILLED,
    MISSING,
    NETWORK_KIND,
    OOM_KIND,
    PEER_LOST,
    PROGRESS,
    RECORD,
    SLURM,
    STACK_DUMP,
    STOPPING,
    SUMMARY,
    SYMPTOMS,
    TEARDOWN,
    TERMINATE,
    TIMEOUT,
    TRACEBACK,
    Cause,
    Rule,
)
from faultloop.signals import exit_signal, signal_name, srun_signal

MAX_BLOCKS_PER_SOURCE = {TRACEBACK: 2, STACK_DUMP: 16, SUMMARY: 2, FIRST_EXIT: 1, MISSING: 1, EXCEPTION_KIND: 1}
LINE_ABOVE_BYTES = 4096  # how far back the line above a record's line is looked for (and on, below it)
MESSAGE_LINES = 12  # the most lines of an exception's message read past its first
FRAME_RUN_LINES = 6  # frame lines this close together belong to one traceback
# faulthandler's header of a dump_traceback_later dump (CPython's faulthandler.c, "Timeout (%s)!")
DUMP_HEADER_RE = re.compile(r"Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!")

_DEVICE_OWN_KINDS = (GPU, OOM_KIND, GPU_HARDWARE)  # what NCCL reports about its own GPU, not about a peer
_MAY_BE_IGNORED = (EXCEPTION_KIND, PEER_LOST, NETWORK_KIND)  # an exception's line, which CPython may say it ignored
_NAMES_ITS_DEVICE = (EXCEPTION_KIND, FATAL, GPU, OOM_KIND)  # a process's own failures, whose message may name its GPU
_GLUE_RE = re.compile(r"(?:/s|/it)[^\]\n]{0,60}\](?=\S)")  # a progress bar's end with the next line glued on


def split_prefix(text: str) -> tuple[Source, str]:
    """Where the line came from (its prefixes) and its text without them (framing's grammar)."""
    return framing.peel(text)


def unglue(text: str) -> list[str]:
    """A line split where a progress bar ended without a newline and the next output followed."""
    if "/s" not in text and "/it" not in text:
        return [text]
    if framing.holds_json(text) and (records := framing.split_message(text, unglue)) is not None:  # its message
        return records
    parts, start = [], 0
    for m in _GLUE_RE.finditer(text):
        parts.append(text[start : m.end()])
        start = m.end()
    return [*parts, text[start:]]


def _device_rank(facts: Facts, source: Source) -> int | None:
    """The rank driving the GPU whose own failure NCCL (or the allocator's OOM report) names: the GPU
    index is the local rank (one rank per GPU); without an srun label that is the global rank only on
    one node, assumed."""
    local = source.inner
    if source.label is None:
        if local is not None:
            facts.assumed.setdefault(
                local,
                ("medium", f"GPU {local}, the failure's own, read as the rank (one GPU per rank; one node assumed)"),
            )
        return local
    return resolve_rank(facts, source._replace(role="default"), "")


def add(facts: Facts, ev: Evidence) -> None:
    """Keep the earliest evidence of each kind per rank (state bounded by kinds x ranks); records
    read after the scan may come before lines the scan kept."""
    key = (ev.kind, ev.rank)
    kept = facts.first.get(key)
    if kept is not None and kept.line <= ev.line:
        return
    facts.first[key] = ev
    if kept is not None and kept in facts.evidence:
        facts.evidence[facts.evidence.index(kept)] = ev
    elif len(facts.evidence) < MAX_EVIDENCE:
        facts.evidence.append(ev)


def drop(facts: Facts, ev: Evidence) -> None:
    """Forget evidence that a later line showed to mean something else."""
    if facts.first.get((ev.kind, ev.rank)) is ev:
        del facts.first[(ev.kind, ev.rank)]
    if ev in facts.evidence:
        facts.evidence.remove(ev)


def signal_of(code: int | None) -> str | None:
    """The signal an exit status names: negative (Python's Popen) or 128+n (shells)."""
    return exit_signal(code, shell=True)


def record_exit(
    facts: Facts,
    rank: int | None,
    ev: Evidence,
    exitcode: int | None,
    signal: str | None,
    pid: int | None = None,
    stopped: bool = False,
) -> None:
    """A rank's end as a launcher reported it: the exit record, and evidence of a signal death
    (or, weaker, of a non-zero exit status)."""
    signal = signal or signal_of(exitcode)
    if rank is not None:
        ex = facts.exits.setdefault(rank, Exit())
        ex.exitcode = exitcode if ex.exitcode is None else ex.exitcode
        ex.signal = ex.signal or signal
        ex.pid = ex.pid if ex.pid is not None else pid
        ex.line = min(ex.line, ev.line)
        ex.stopped |= stopped
        if pid is not None:
            facts.pid_rank[pid] = rank
    if signal or exitcode or ev.hint:  # (a hint: what the report says became of it, a crash)
        kind = DEATH if signal or ev.hint else EXITED
        add(facts, Evidence(ev.line, ev.text, kind, rank, ev.rule, SIGNAL_CAUSES.get(signal or "") or ev.hint))


def scan(
    path: Path, facts: Facts, prefilter_name: str, jobs: int, rows: Iterator[prefilter.Block] | None = None
) -> None:
    """Classify every prefiltered line and keep its facts (`rows`: the prefilter's, when started
    before the census; else started here)."""
    repeats = Repeats()
    with open(path, "rb") as log:
        _scan_hits(facts, prefilter.rows(path, prefilter_name, jobs) if rows is None else rows, log, repeats)
    facts.repeated_lines = repeats.counted()


def _scan_hits(facts: Facts, blocks: Iterator[prefilter.Block], log: IO[bytes], repeats: Repeats) -> None:
    """The scan's loop over the prefiltered lines (`log` is open for the few lines read around a hit)."""
    block_count: dict[tuple[str, Source], int] = {}
    last_traceback_line: dict[Source, int] = {}  # per source: the latest traceback header or frame
    previous: tuple[int, int | None] = (0, None)  # (line, rank) of the last classified line
    terminate: Evidence | None = None  # a C++ terminate line waiting for its what() line
    counted = Counted()

    def caught_up() -> None:
        """The loop's state as if it had seen the repeats unrepeated counted since its last row."""
        nonlocal previous, terminate
        if counted.first is not None and counted.last is not None:
            if terminate and line_of(counted.first) - terminate.line <= 2:
                drop(facts, terminate)
            previous, terminate = (line_of(counted.last), counted.last[2]), None
            counted.first = counted.last = None

    for hit_line, base, within, hit_text, raw in unrepeated(facts, blocks, repeats, counted):
        caught_up()
        if (repeat := repeats.seen(hit_text, len(facts.label_pairs))) is not None:
            repeats.seen_raw(raw, hit_text, len(facts.label_pairs), repeat)
            if repeat.rule is not None:  # a flood: counted, not classified again
                if repeat.work is not None:  # a collective's SeqNum is compared across ranks, in order
                    count_collective(facts, repeat.work(hit_text), hit_text, repeat.rank, repeat.length)
                if terminate and hit_line - terminate.line <= 2:
                    drop(facts, terminate)
                previous, terminate = (hit_line, repeat.rank), None
            continue
        hit_offset = base + int(within)
        prefix = ""  # the prefix of a line a progress bar glued others onto: theirs too
        for part in unglue(hit_text):
            line = reading.read(prefix + part)
            prefix = prefix or line.prefix
            source, text = line.source, line.text
            note_rank(facts, source)
            if "Timeout (" in text and (headers := len(DUMP_HEADER_RE.findall(text))):  # literal first: a hot loop
                facts.dump_headers[source.label] = facts.dump_headers.get(source.label, 0) + headers
            if source.host is not None and len(facts.hosts) < MAX_HOSTS:
                facts.hosts.add(source.host)
                facts.several_processes |= len(facts.hosts) > 1  # several nodes, containers or workers
            found = line.found
            if not found:
                repeats.learn(part, source, text, len(facts.label_pairs), None, None, hit_line)
                continue
            rule, m = found
            named = m.groupdict().get("rank") or m.groupdict().get("rank2")
            rank = int(named) if named is not None else resolve_rank(facts, source, text)
            if rank is None and source.role == DEVICE and rule.kind in _DEVICE_OWN_KINDS:
                rank = _device_rank(facts, source)
            if rank is None and rule.kind == OOM_KIND and (gpu := OOM_DEVICE_RE.search(text)):
                rank = _device_rank(facts, source._replace(role=DEVICE, inner=int(gpu.group(1) or gpu.group(2))))
            wrapped = rule.kind == COLLECTIVE and unranked(facts, source) and previous[0] == hit_line - 1
            if rank is None and wrapped:
                rank = previous[1]  # the rest of a wrapped line
            if not wrapped and ("Rank " not in text or (rank is not None and rank == resolve_rank(facts, source, ""))):
                repeats.learn(part, source, text, len(facts.label_pairs), rule, rank, hit_line)  # its rank: prefixes'
            previous = (hit_line, rank)
            ev = Evidence(hit_line, text.strip(), rule.kind, rank, rule.name, rule.hint)
            if rank is None and rule.kind in _NAMES_ITS_DEVICE and (rule.kind, None) not in facts.first:
                _device_named(facts, ev, source, hit_offset, block_count, line.reading)
            if rule.kind in (TRACEBACK, STACK_DUMP):
                headless = rule.name == "traceback_frame"
                run_goes_on = hit_line - last_traceback_line.get(source, -FRAME_RUN_LINES) < FRAME_RUN_LINES
                if rule.kind == TRACEBACK:
                    last_traceback_line[source] = hit_line
                key = (rule.kind, source)
                if not (headless and run_goes_on) and block_count.get(key, 0) < MAX_BLOCKS_PER_SOURCE[rule.kind]:
                    block_count[key] = block_count.get(key, 0) + 1
                    facts.blocks.append(Block(rule.kind, hit_line, hit_offset, source, headless, line.reading))
                if rule.kind == TRACEBACK:
                    continue
            if rule.kind in (FIRST_EXIT, MISSING):  # a launcher's multi-line report, read after the scan
                if block_count.get((rule.kind, source), 0) < MAX_BLOCKS_PER_SOURCE[rule.kind]:
                    block_count[(rule.kind, source)] = 1
                    facts.blocks.append(Block(rule.kind, hit_line, hit_offset, source, False, line.reading))
                facts.several_processes = True
                continue
            if rule.kind == SUMMARY and block_count.get((SUMMARY, source), 0) < MAX_BLOCKS_PER_SOURCE[SUMMARY]:
                block_count[(SUMMARY, source)] = block_count.get((SUMMARY, source), 0) + 1
                facts.blocks.append(Block(SUMMARY, hit_line, hit_offset, source, False, line.reading))
            if terminate and ev.line - terminate.line <= 2:
                drop(facts, terminate)  # its what() line says why, and is kept instead
            terminate = ev if rule.kind == TERMINATE else None
            if rule.kind == RECORD and m.groupdict().get("rank") is None:  # its rank stands on the line above
                above = next(_lines_above(log, hit_offset, line.reading), (None, ""))
                _summary_rank(facts, source, line.reading.shows, above)
            if (why := WHY_ABOVE.get(rule.name)) and (said := _said_above(log, hit_offset, why, m, line.reading)):
                add(facts, Evidence(hit_line, said, why.kind, ev.rank, why.name, why.hint))  # says more than the line
                facts.several_processes = True  # a launcher's word on one of its workers
                continue
            if rule.kind in _MAY_BE_IGNORED and _ignored(log, hit_offset, line.reading):
                continue  # CPython ignored it and went on
            if rule.kind == DEATH and (spawned := next((s for rx in SPAWNED_RES if (s := rx.search(part))), None)):
                facts.spawned.setdefault(source, int(spawned.group(1)) + 1)  # (its framing may peel the command)
            if (why := WHY_BELOW.get(rule.name)) and (said := _said_below(log, hit_offset, why, line.reading)):
                add(facts, Evidence(hit_line, said, why.kind, None, why.name, why.hint))  # says more than the line
                continue
            _keep(facts, rule, m, ev, source)
    caught_up()


def _keep(facts: Facts, rule: Rule, m: re.Match[str], ev: Evidence, source: Source) -> None:
    """What a classified line adds to the facts beyond its evidence."""
    groups = m.groupdict()
    if rule.kind == DIVERGED and not _diverged(int(groups["step"] or 0), int(groups["skipped"] or 0)):
        return
    if rule.kind == DEATH:
        _death(facts, rule, groups, ev, source)
        return
    if rule.kind == CHILD_ERROR:
        facts.child_errors[source] = (ev.line, int(groups["rank"] or 0))
        facts.several_processes = True
        return
    if rule.kind in (SUMMARY, RECORD):
        _summary(facts, rule, groups, ev, source)
        return
    if rule.kind == TEARDOWN:
        facts.teardowns.setdefault(source, []).append((ev, int(groups["pid"])))
        facts.stop_line = min(facts.stop_line, ev.line)
        facts.several_processes = True
        return
    if rule.kind in (STOPPING, JOB_SIGNAL) or (rule.kind == SLURM and rule.hint == Cause.CANCELLED):
        facts.stop_line = min(facts.stop_line, ev.line)
    if rule.kind == CLOSED:
        facts.closed_pids.setdefault(int(groups["pid"]), ev.line)
        facts.closing_agents.add(source)
        facts.stop_line = min(facts.stop_line, ev.line)
        facts.several_processes = True
    elif rule.kind == KILLED:
        facts.killed_pids.add(int(groups["pid"]))
    elif rule.kind == PROGRESS and ev.rank is not None:
        facts.enqueued.setdefault(ev.rank, int(groups["seq"]))
    elif groups.get("missing"):
        facts.barrier_missing.update(int(r) for r in re.findall(r"\d+", groups["missing"]))
    elif groups.get("ready"):  # the ranks that did submit: the missing ones are the others
        ready = {int(r) for r in re.findall(r"\d+", groups["ready"])}
        facts.barrier_missing.update(set(range(max(facts.world_size, max(ready) + 1))) - ready)
    if rule.kind in (TIMEOUT, COLLECTIVE):
        collective(facts, ev.text, ev.rank)
    if rule.kind in SYMPTOMS:
        facts.several_processes = True  # a collective needs peers
    if rule.kind == BUSY:
        if not any(k == TIMEOUT for k, _ in facts.first):
            facts.last_busy = ev  # the latest one-rank work before anyone timed out
        return
    add(facts, ev)


def _device_named(
    facts: Facts,
    ev: Evidence,
    source: Source,
    offset: int,
    block_count: dict[tuple[str, Source], int],
    how: reading.Reading,
) -> None:
    """The GPU a rank-less failure's message names (culprits.device_rank reads it): on its line, or
    for an exception, on the lines its message runs on to (read after the scan)."""
    if (gpu := named_gpu(ev.text)) is not None:
        facts.named_device[ev.line] = gpu
    elif ev.kind == EXCEPTION_KIND and block_count.get((EXCEPTION_KIND, source), 0) < 1:
        block_count[(EXCEPTION_KIND, source)] = 1
        facts.blocks.append(Block(EXCEPTION_KIND, ev.line, offset, source, False, how))


def named_gpu(text: str) -> int | None:
    """The index of the GPU a failure's text names (context.DEVICE_NAMED_RE, the allocator's OOM report:
    context.OOM_DEVICE_RE), None where it names none."""
    gpu = DEVICE_NAMED_RE.search(text) or OOM_DEVICE_RE.search(text)
    return next(int(g) for g in gpu.groups() if g is not None) if gpu else None


def _diverged(step: int, skipped: int) -> bool:
    """Most steps so far skipped on overflow, beyond what loss-scale warm-up skips."""
    return skipped > WARMUP_SKIPS and skipped >= DIVERGED_SKIP_SHARE * step


def _number(groups: dict[str, str | None], name: str) -> int | None:
    """A regex group's number, None where the line did not have it."""
    value = groups.get(name)
    return int(value) if value else None


def _death(facts: Facts, rule: Rule, groups: dict[str, str | None], ev: Evidence, source: Source) -> None:
    """A launcher's or srun's word that a worker died: by global rank now, else kept until the
    launcher's summary has mapped pids to ranks."""
    facts.several_processes = True
    if groups.get("tasks") is not None:
        _srun_tasks(facts, groups["tasks"] or "", (groups.get("what") or "").strip(), ev)
        return
    code = _number(groups, "code")
    sig = groups.get("sig") or shapes.HOW_SIGNAL.get(groups.get("how") or "")
    if sig and sig.isdigit():
        sig = signal_name(int(sig))
    pid = _number(groups, "pid")
    if groups.get("rank") is not None:
        record_exit(facts, int(groups["rank"] or 0), ev, code, sig, pid)
        return
    local = _number(groups, "local")
    facts.deaths.append(Death(ev, source, pid, local, code, sig))


def _srun_tasks(facts: Facts, tasks: str, what: str, ev: Evidence) -> None:
    """`srun: error: node: task 3: Killed` -> rank 3 died by SIGKILL (srun task = rank, unless the
    labels show one task per node); `Out Of Memory` -> it was OOM-killed. A task terminated after
    the step's teardown began was stopped, not at fault."""
    sig = srun_signal(what)
    code = re.search(r"exit code (\d+)", what)
    tasks_are_nodes = labels_are_nodes(facts)
    for part in tasks.split(","):
        lo, _, hi = part.partition("-")
        for task in range(int(lo), int(hi or lo) + 1):
            rank = None if tasks_are_nodes else task
            if what.startswith("Out Of Memory"):
                add(facts, Evidence(ev.line, ev.text, OOM_KIND, rank, ev.rule, "OOM"))
                continue
            stopped = sig in STOP_SIGNALS and ev.line > facts.stop_line
            record_exit(facts, rank, ev, int(code.group(1)) if code else None, sig, stopped=stopped)


def _summary(facts: Facts, rule: Rule, groups: dict[str, str | None], ev: Evidence, source: Source) -> None:
    """torchrun's ChildFailedError report, read line by line so that a cut or flattened one
    still counts: section headers, `rank : 3 (local_rank: 1)`, then `exitcode : -9 (pid: 123)`."""
    facts.several_processes = True
    if rule.kind == SUMMARY:
        facts.summary_section[source] = rule.hint or ""
        return
    if groups.get("rank") is not None:
        facts.pending_record[source] = int(groups["rank"] or 0)
    if groups.get("code") is None or source not in facts.pending_record:
        return
    rank = facts.pending_record.pop(source)
    code = int(groups["code"] or 0)
    section = facts.summary_section.get(source, "")
    signal = signal_of(code)
    pid = _number(groups, "pid")
    # Among the other failures a stop signal is the teardown's when the agent was stopping that
    # process: it logs each process it closes before its report, so where this agent's closings show
    # and this pid is not among them, or the signal is a SIGKILL, something else ended the rank
    # (OOM killer, operator) and torch, timing a signal death by when it noticed it, may list it
    # after its own victims. Where the agent's closings are not in the log, a SIGTERM is taken for
    # the teardown's.
    teardown = signal in STOP_SIGNALS and (
        pid in facts.closed_pids or (signal != "SIGKILL" and source not in facts.closing_agents)
    )
    record_exit(facts, rank, ev, code, None, pid, stopped=section == "others" and teardown)
    if section == "first":
        facts.root_cause.add(rank)


def _lines_above(log: IO[bytes], offset: int, how: reading.Reading) -> Iterator[tuple[Source | None, str]]:
    """The lines above the line at `offset` that have words after their prefixes (pasted logs
    double their newlines), nearest first, read as that line was (its prefixes by the grammar, or
    by their shape), within LINE_ABOVE_BYTES."""
    start = max(0, offset - LINE_ABOVE_BYTES)
    log.seek(start)
    for raw in reversed(log.read(offset - start).splitlines()[int(start > 0) :]):
        source, text = how.read(raw.decode("utf-8", "replace"))
        if text.strip():
            yield source, text


def _ignored(log: IO[bytes], offset: int, how: reading.Reading) -> bool:
    """Whether the line above says that CPython ignored the exception this line names (context.IGNORED_RE)."""
    return any(IGNORED_RE.match(text) for _, text in itertools.islice(_lines_above(log, offset, how), 1))


def _said_above(log: IO[bytes], offset: int, why: Rule, m: re.Match[str], how: reading.Reading) -> str | None:
    """The nearest line above a launcher's line that says why it happened (launchers.WHY_ABOVE),
    for the same process where both name its pid."""
    for _, text in _lines_above(log, offset, how):
        if (said := re.search(why.pattern, text)) and said.groupdict().get("pid") in (None, m.groupdict().get("pid")):
            return text.strip()
    return None


def _said_below(log: IO[bytes], offset: int, why: Rule, how: reading.Reading) -> str | None:
    """A later line of the message that starts at `offset` that says why (launchers.WHY_BELOW), within
    MESSAGE_LINES and LINE_ABOVE_BYTES."""
    log.seek(offset)
    for raw in log.read(LINE_ABOVE_BYTES).splitlines()[1 : 1 + MESSAGE_LINES]:
        _, text = how.read(raw.decode("utf-8", "replace"))
        if re.search(why.pattern, text.strip()):
            return text.strip()
    return None


def _summary_rank(facts: Facts, source: Source, shows: Source, above: tuple[Source | None, str]) -> None:
    """A summary record's rank, from its `rank : R (local_rank: L)` line above its exit line (torchrun
    prints them in that order), where that line's prefixes show what the record's do."""
    above_source, text = above
    if above_source == shows and (m := torchrun.RECORD_RANK_RE.match(text)):
        facts.pending_record[source] = int(m.group("rank"))


def resolve_deaths(facts: Facts) -> None:
    """Launcher death lines that named a pid or a local rank: the summary's pid map first; an
    unlabelled agent's local rank is the global rank if it ran alone (one node, assumed); with
    node-indexed srun labels, global = node * ranks per node + local."""
    per_node = node_local_size(facts)
    _read_teardowns(facts, per_node)
    for death in facts.deaths:
        rank = facts.pid_rank.get(death.pid) if death.pid is not None else None
        if rank is None and death.pid is None and death.local is None:
            rank = _only_worker(facts, death)
        if rank is None and death.local is not None:
            if unranked(facts, death.source):
                rank = death.local
                facts.assumed.setdefault(
                    rank,
                    (
                        "medium",
                        _ONE_NODE.format(rank),
                    ),
                )
            elif death.source.label is not None and per_node:
                rank = death.source.label * per_node + death.local
        stopped = death.pid in facts.closed_pids and (death.signal or signal_of(death.exitcode)) in STOP_SIGNALS
        record_exit(facts, rank, death.evidence, death.exitcode, death.signal, death.pid, stopped=stopped)
    _oom_killed_ranks(facts)
    if facts.teardowns and not facts.exits and not any(kind in (DEATH, EXITED) for kind, _ in facts.first):
        # no worker's status follows a teardown (cut off): a worker died, how the log does not say
        first = min((kills[0][0] for kills in facts.teardowns.values()), key=lambda ev: ev.line)
        add(facts, Evidence(first.line, first.text, DEATH, None, first.rule, first.hint))


def _read_teardowns(facts: Facts, per_node: int) -> None:
    """A launcher that kills its workers in the order it spawned them (DeepSpeed's: local rank 0
    first) maps each pid of its teardown to its local rank, and so to its global rank where the
    log shows the node (as resolve_deaths reads a local rank); not where the command it reports
    (the last child spawned) names more children than the teardown shows."""
    for source, kills in facts.teardowns.items():
        pids = list(dict.fromkeys(pid for _, pid in kills))
        if facts.spawned.get(source, len(pids)) != len(pids):
            continue  # the command of the last child spawned says there were more: the excerpt cut some
        for local, pid in enumerate(pids):
            if unranked(facts, source):
                facts.pid_rank.setdefault(pid, local)
                facts.assumed.setdefault(local, ("medium", f"{_ONE_NODE.format(local)}, by its place in the teardown"))
            elif source.label is not None and per_node:
                facts.pid_rank.setdefault(pid, source.label * per_node + local)


def _only_worker(facts: Facts, death: Death) -> int | None:
    """The rank of a launcher's only worker, where its teardown killed one child and the command it
    reports (the last child spawned: DeepSpeed's) is local rank 0's, so the teardown is whole: a
    status it reports without naming the child is that child's."""
    pids = {pid for _, pid in facts.teardowns.get(death.source, [])}
    if len(pids) != 1 or len(facts.teardowns) != 1 or facts.spawned.get(death.source) != 1:
        return None
    return facts.pid_rank.get(pids.pop())


def _oom_killed_ranks(facts: Facts) -> None:
    """The kernel's OOM killer names the pid it killed (`Killed process P`): where a launcher's
    report mapped that pid to a rank, that rank died by its SIGKILL."""
    for (kind, rank), ev in list(facts.first.items()):
        if kind != OOM_KIND or rank is not None:
            continue
        for pid in map(int, _KILLED_PID_RE.findall(ev.text)):
            if (killed := facts.pid_rank.get(pid)) is not None:
                record_exit(facts, killed, ev, None, "SIGKILL", pid)


_ONE_NODE = "local_rank {} read as the global rank (one node assumed; the log does not show the node)"
_KILLED_PID_RE = re.compile(r"[Kk]illed process (\d+)")

"""The line scan: read each prefiltered line's prefixes and rank, match it against RULES and keep
what it says in bounded Facts (first evidence per kind and rank, launcher records, collectives).

Real logs carry prefixes in layers (a collector's, a launcher's, torch's rank prefix, a logging
header); framing.py's grammar peels them, so a rule only ever sees the program's words, and says
which rank the line is from. A progress bar without a newline glues the next line onto its own:
the two are split here first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from faultloop.analyze.logsage import framing, prefilter, reading, shapes
from faultloop.analyze.logsage.collectives import collective, count_collective
from faultloop.analyze.logsage.facts import (
    MAX_EVIDENCE,
    MAX_HOSTS,
    MAX_LABEL_PAIRS,
    Block,
    Death,
    Evidence,
    Exit,
    Facts,
    Source,
)
from faultloop.analyze.logsage.framing import DEVICE, GUESSED
from faultloop.analyze.logsage.launchers import WHY_ABOVE, torchrun
from faultloop.analyze.logsage.reading import classify as classify  # the line table's reading (tests use it)
from faultloop.analyze.logsage.repeats import Counted, Repeats, line_of, unrepeated
from faultloop.analyze.logsage.rules import (
    DEVICE_NAMED_RE,
    DIVERGED_SKIP_SHARE,
    LAUNCH_RE,
    OOM_DEVICE_RE,
    PROGRESS_RE,
    SIGNAL_FAULT,
    STOP_SIGNALS,
    WARMUP_SKIPS,
)
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
    OOM_KIND,
    PROGRESS,
    RECORD,
    SLURM,
    STACK_DUMP,
    STOPPING,
    SUMMARY,
    SYMPTOMS,
    TERMINATE,
    TIMEOUT,
    TRACEBACK,
    Cause,
    Rule,
)
from faultloop.signals import exit_signal, signal_name, srun_signal

CENSUS_BYTES = 2 << 20
SHAPED_SAMPLE_BYTES = 64 << 10  # a census part whose start has no line behind a shape is read without shapes
PROGRESS_BYTES = 256 << 10  # how far into the log a sign of training progress is looked for
# a node label's source holds every rank's dump
MAX_BLOCKS_PER_SOURCE = {TRACEBACK: 2, STACK_DUMP: 16, SUMMARY: 2, FIRST_EXIT: 1, MISSING: 1, EXCEPTION_KIND: 1}
LINE_ABOVE_BYTES = 4096  # how far back the line above a record's line is looked for
FRAME_RUN_LINES = 6  # frame lines this close together belong to one traceback
# faulthandler's header of a dump_traceback_later dump (CPython's faulthandler.c, "Timeout (%s)!")
DUMP_HEADER_RE = re.compile(r"Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!")

_LABEL_AT_RE = re.compile(r"[ \t]*(\d+): ")  # srun --label, matched at a line start inside a block
_DEVICE_OWN_KINDS = (GPU, OOM_KIND, GPU_HARDWARE)  # what NCCL reports about its own GPU, not about a peer
_NAMES_ITS_DEVICE = (EXCEPTION_KIND, FATAL, GPU, OOM_KIND)  # a process's own failures, whose message may name its GPU
_GLUE_RE = re.compile(r"(?:/s|/it)[^\]\n]{0,60}\](?=\S)")  # a progress bar's end with the next line glued on
# world size statements; each starts with a literal, so the regex engine's fast prefix search applies
_WORLD_RES = tuple(
    re.compile(p)
    for p in (
        r"world_size\W{0,3}(\d+)",
        r"WORLD_SIZE\W{0,3}(\d+)",
        r"world size\W{0,3}(\d+)",
        r"rank \d+/(\d+)\b",
        r"nranks (\d+)",
        r"dist_world_size=(\d+)",
    )
)
# torchrun's reports of its workers' local ranks (`failed (exitcode: 1) local_rank: 2`, `rank : 6
# (local_rank: 2)`) under an srun label: where the log has fewer labels than ranks, the label is
# the agent's, so a node's, whatever else it shows
_AGENT_LOCAL_RE = re.compile(r"local_rank: (\d+)")  # a literal first (no word boundary): the regex engine's fast search
# signs that several processes wrote the log, even where its lines carry no rank prefix
_SEVERAL_PROCESSES_RE = re.compile(r"\[Rank [1-9]|local_rank: [1-9]|closing signal|:\d+:\d+ \[[1-9]\d*\] NCCL")


def unranked(facts: Facts, source: Source) -> bool:
    """A line whose prefixes name no rank and no one of several hosts: from the log's only process
    or node as far as its prefixes tell."""
    return source.label is None and source.inner is None and (source.host is None or len(facts.hosts) < 2)


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


def census(path: Path, facts: Facts) -> None:
    """Ranks and world size from the head and tail of the log, where every rank says hello/bye."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        parts = [f.read(CENSUS_BYTES)]
        if size > 2 * CENSUS_BYTES:
            f.seek(size - CENSUS_BYTES)
            parts.append(f.read())
        elif size > CENSUS_BYTES:
            parts.append(f.read())
    agent_locals: set[tuple[int, int]] = set()
    for part in parts:  # whole-block regexes: a Python loop per line would cost more than the scan
        text = part.decode("utf-8", "replace")
        prefixes = (m.group("label", "mpi", "role", "inner") for m in framing.LINES_RE.finditer("\n" + text))
        for label, mpi, role, inner in dict.fromkeys(prefixes):  # each once, in order: thousands of lines
            if label or mpi or inner:
                if inner is None and mpi is not None:
                    role, inner = "rank", mpi
                note_rank(facts, Source(int(label) if label else None, None, role, int(inner) if inner else None))
        if framing.SHAPED_LINES_RE.search(text, 0, SHAPED_SAMPLE_BYTES):  # lines behind prefixes read by shape
            for m in framing.SHAPED_LINES_RE.finditer(text):
                source, _, shaped = framing.peel_shapes(m.group())
                if shaped:
                    note_rank(facts, source)
        agent_locals.update(_agent_locals(text))
        # the head's first bytes (a run's first steps; all of an excerpt): their line numbers are the log's
        if part is parts[0] and (launch := LAUNCH_RE.search(text, 0, PROGRESS_BYTES)):
            facts.launch_line = text.count("\n", 0, launch.start()) + 1
        if part is parts[0] and (progress := PROGRESS_RE.search(text, 0, PROGRESS_BYTES)):
            start = text.rfind("\n", 0, progress.start()) + 1
            facts.progress_line = text.count("\n", 0, start) + 1
            facts.progress_text = text[start : text.find("\n", progress.end()) % (len(text) + 1)].strip()[:160]
        for rx in _WORLD_RES:
            for m in rx.finditer(text):
                facts.world_size = max(facts.world_size, int(m.group(1)))
        facts.several_processes |= bool(_SEVERAL_PROCESSES_RE.search(text))
    facts.several_processes |= facts.world_size > 1
    if len({label for label, _, _ in facts.label_pairs if label is not None}) < facts.world_size:
        for label, local in agent_locals:  # fewer labels than ranks: they are the agents', so nodes
            note_rank(facts, Source(label, None, "default", local))


def _device_rank(facts: Facts, source: Source) -> int | None:
    """The rank driving the GPU whose own failure NCCL reports: the GPU index is the local rank
    (one rank per GPU); without an srun label that is the global rank only on one node, assumed."""
    local = source.inner
    if source.label is None:
        if local is not None:
            facts.assumed.setdefault(
                local, ("medium", f"NCCL's GPU index [{local}] read as the rank (one node assumed)")
            )
        return local
    return resolve_rank(facts, source._replace(role="default"), "")


def _agent_locals(text: str) -> Iterator[tuple[int, int]]:
    """(srun label, local rank) of every torchrun report of a worker's local rank in the text."""
    for m in _AGENT_LOCAL_RE.finditer(text):
        label = _LABEL_AT_RE.match(text, text.rfind("\n", 0, m.start()) + 1)
        if label:
            yield int(label.group(1)), int(m.group(1))


def note_rank(facts: Facts, source: Source) -> None:
    if source.role == DEVICE or (source.label is None and source.inner is None):
        return
    facts.labelled = True
    if len(facts.label_pairs) < MAX_LABEL_PAIRS:
        facts.label_pairs.add((source.label, source.role, source.inner))


def seen_ranks(facts: Facts) -> set[int]:
    ranks = {resolve_rank(facts, Source(label, None, role, inner), "") for label, role, inner in facts.label_pairs}
    return {r for r in ranks if r is not None}


def _layout(facts: Facts) -> tuple[int, bool, bool]:
    """How prefixes map to ranks, cached per label-pair count: (ranks per node, whether srun
    labels are node indices, whether [rankN] prefixes are local ranks).

    torch's own [rankN] is the global rank, torchrun's [defaultN] the local one; a [rankN] seen
    under several labels is a torchrun role prefix (local) too. Labels are nodes (one torchrun
    per srun task) when one label carries several ranks: a line with the label alone then comes
    from some rank of that node, not from rank <label>."""
    if facts.layout[0] != len(facts.label_pairs):
        labels_of: dict[int, set[int]] = {}
        inners: dict[int, set[int]] = {}
        for lab, role, inn in facts.label_pairs:
            if lab is not None and inn is not None:
                inners.setdefault(lab, set()).add(inn)
                if role == "rank":
                    labels_of.setdefault(inn, set()).add(lab)
        rank_is_local = any(len(v) > 1 for v in labels_of.values())
        local: dict[int, set[int]] = {}
        for lab, role, inn in facts.label_pairs:
            if lab is not None and inn is not None and (role != "rank" or rank_is_local):
                local.setdefault(lab, set()).add(inn)
        labels_are_nodes = any(len(v) > 1 for v in inners.values())
        per_node = 1 + max(max(v) for v in local.values()) if any(len(v) > 1 for v in local.values()) else 0
        facts.layout = (len(facts.label_pairs), per_node, labels_are_nodes, rank_is_local)
    return facts.layout[1], facts.layout[2], facts.layout[3]


def node_local_size(facts: Facts) -> int:
    """Ranks per node when srun labels are node indices and lines carry local ranks, else 0."""
    return _layout(facts)[0]


def labels_are_nodes(facts: Facts) -> bool:
    return _layout(facts)[1]


def every_rank_dumped(facts: Facts, rank: int) -> bool:
    """Every rank behind the node label `rank` prints through printed a faulthandler header: the
    stalled rank among them dumped too, which a stopped process (SIGSTOP stops faulthandler's
    timer thread with the rest) cannot, even where the dumps interleave too much to be read."""
    per_node, node_labels, _ = _layout(facts)
    return node_labels and per_node > 0 and facts.dump_headers.get(rank // per_node, 0) >= per_node


def resolve_rank(facts: Facts, source: Source, text: str) -> int | None:
    """Global rank: torch's [rankN] prefix; else the srun label, unless labels are node indices
    (then global = label * ranks per node + a local [defaultN], and a line with the label alone
    names no rank); else the inner prefix; else a `[Rank N]` of the default process group in
    the text."""
    label, _, role, inner = source
    if role == DEVICE:  # a GPU index names a rank only for that GPU's own failures (_device_rank)
        inner = None
    per_node, node_labels, rank_is_local = _layout(facts)
    if inner is not None and role == "rank" and not rank_is_local:
        return inner
    if label is not None and node_labels:
        return label * per_node + inner if inner is not None and per_node else reading.text_rank(text)
    if label is not None:
        return label
    if inner is not None:
        if role == GUESSED:
            facts.assumed.setdefault(
                inner,
                ("medium", f"rank {inner} read from a rank-like token in a prefix logsage's grammar does not list"),
            )
        return inner
    return reading.text_rank(text)


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
        add(facts, Evidence(ev.line, ev.text, kind, rank, ev.rule, SIGNAL_FAULT.get(signal or "") or ev.hint))


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
    counted: Counted = [None, None]

    def caught_up() -> None:
        """The loop's state as if it had seen the repeats unrepeated counted since its last row."""
        nonlocal previous, terminate
        if counted[0] is not None and counted[1] is not None:
            if terminate and line_of(counted[0]) - terminate.line <= 2:
                drop(facts, terminate)
            previous, terminate = (line_of(counted[1]), counted[1][2]), None
            counted[0] = counted[1] = None

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
    """The index of the GPU a failure's text names (rules.DEVICE_NAMED_RE), None where it names none."""
    gpu = DEVICE_NAMED_RE.search(text)
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
    # after its own victims. Where the agent's closings are not in the log, a SIGTERM is its own.
    closed = pid in facts.closed_pids
    teardown = signal in STOP_SIGNALS and (closed or (signal != "SIGKILL" and source not in facts.closing_agents))
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


def _said_above(log: IO[bytes], offset: int, why: Rule, m: re.Match[str], how: reading.Reading) -> str | None:
    """The nearest line above a launcher's line that says why it happened (launchers.WHY_ABOVE),
    for the same process where both name its pid."""
    for _, text in _lines_above(log, offset, how):
        if (said := re.search(why.pattern, text)) and said.groupdict().get("pid") in (None, m.groupdict().get("pid")):
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
    for death in facts.deaths:
        rank = facts.pid_rank.get(death.pid) if death.pid is not None else None
        if rank is None and death.local is not None:
            if unranked(facts, death.source):
                rank = death.local
                facts.assumed.setdefault(
                    rank,
                    (
                        "medium",
                        f"local_rank {rank} read as the global rank (one node assumed; the log does not show the node)",
                    ),
                )
            elif death.source.label is not None and per_node:
                rank = death.source.label * per_node + death.local
        stopped = death.pid in facts.closed_pids and (death.signal or signal_of(death.exitcode)) in STOP_SIGNALS
        record_exit(facts, rank, death.evidence, death.exitcode, death.signal, death.pid, stopped=stopped)


def single_process(facts: Facts, owner: tuple[int, str] | None = None) -> None:
    """Unlabelled logs from one process: give rank-less evidence to its rank, `owner` where the log
    says which one (the rank and why, an assumption: medium confidence), else rank 0 (low). Not
    when the log shows several processes or a collective failure (which needs peers): rank-less
    lines are then nobody's in particular."""
    if facts.labelled or facts.several_processes or any(k in SYMPTOMS for k, _ in facts.first):
        return
    rank_of, assumed = owner[0] if owner else 0, ("medium", owner[1]) if owner else ("low", ONE_PROCESS)
    moved: dict[tuple[str, int | None], Evidence] = {}
    for (kind, rank), ev in facts.first.items():
        if rank is None and kind not in (SLURM, JOB_SIGNAL, CLOSED, KILLED, SUMMARY, STOPPING):
            ev.rank = rank_of
            moved.setdefault((kind, rank_of), ev)
            facts.assumed.setdefault(rank_of, assumed)
        else:
            moved.setdefault((kind, rank), ev)
    facts.first = moved


ONE_PROCESS = "the log has no rank prefixes; it was read as one process (rank 0)"

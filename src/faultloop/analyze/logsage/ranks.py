"""Who is who in a log: the ranks and the world size the log's head and tail state (the census),
and how its prefixes map to global ranks (srun labels as ranks or as nodes, torch's [rankN] and
torchrun's [defaultN] as global or local ranks, a rank-like token read by its shape). A log whose
lines name no one is read as one process where nothing says there were several."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from faultloop.analyze.logsage import framing, reading
from faultloop.analyze.logsage.context import LAUNCH_RE
from faultloop.analyze.logsage.facts import MAX_LABEL_PAIRS, Evidence, Facts, Source
from faultloop.analyze.logsage.framing import DEVICE, GUESSED
from faultloop.analyze.logsage.rules import PROGRESS_RE
from faultloop.analyze.logsage.vocab import CLOSED, JOB_SIGNAL, KILLED, SLURM, STOPPING, SUMMARY, SYMPTOMS

CENSUS_BYTES = 2 << 20
SHAPED_SAMPLE_BYTES = 64 << 10  # a census part whose start has no line behind a shape is read without shapes
PROGRESS_BYTES = 256 << 10  # how far into the log a sign of training progress is looked for
_LABEL_AT_RE = re.compile(r"[ \t]*(\d+): ")  # srun --label, matched at a line start inside a block
# a node label's source holds every rank's dump
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

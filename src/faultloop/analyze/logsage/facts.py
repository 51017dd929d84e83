"""What a scan of a log keeps: evidence lines and per-rank facts, bounded whatever the log size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faultloop.analyze.logsage.framing import NO_SOURCE as NO_SOURCE  # where a line came from
from faultloop.analyze.logsage.framing import Source as Source
from faultloop.analyze.logsage.reading import Reading

NEVER = 1 << 62  # a line number after every line
MAX_EVIDENCE = 60
MAX_LABEL_PAIRS = 1 << 16
MAX_HOSTS = 1 << 10


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
        return {"line": self.line, "text": self.text[:300], "kind": self.kind, "rank": self.rank, "rule": self.rule}


@dataclass
class Exit:
    """How a rank ended, by a launcher's or the scheduler's word."""

    exitcode: int | None = None
    signal: str | None = None
    pid: int | None = None
    line: int = NEVER
    stopped: bool = False  # ended by the teardown after another rank failed: a victim
    first: bool = False  # the launcher named it the first to fail (mpirun's first non-zero exit)


@dataclass
class Death:
    """A launcher's line that a worker died, before its rank is known (a pid or a local rank)."""

    evidence: Evidence
    source: Source
    pid: int | None
    local: int | None
    exitcode: int | None
    signal: str | None


@dataclass
class Block:
    """A multi-line record found by the scan and read after it (traceback, stack dump)."""

    kind: str
    line: int
    offset: int
    source: Source
    headless: bool = False  # it starts at its first frame: the excerpt lost the traceback's header
    # how its first line was read, and so its other lines (give it the line's reading.Line.reading;
    # None: by the grammar alone, which misses the record's lines behind prefixes read by shape)
    reading: Reading | None = None


@dataclass
class Facts:
    """Everything the scan keeps: bounded per-rank first lines and a capped evidence list."""

    labelled: bool = False
    several_processes: bool = False  # rank-less lines are then nobody's in particular, not rank 0's
    world_size: int = 0
    hosts: set[str] = field(default_factory=set)  # the host prefixes seen (capped): several are several processes
    label_pairs: set[tuple[int | None, str | None, int | None]] = field(default_factory=set)  # label, role, inner
    layout: tuple[int, int, bool, bool] = (-1, 0, False, False)  # pairs seen, then ranks._layout's answer
    # faulthandler's `Timeout (H:MM:SS)!` headers per srun label, wherever they stand in a line (two
    # ranks' dumps interleaved under one node label glue them into other lines)
    dump_headers: dict[int | None, int] = field(default_factory=dict)
    first: dict[tuple[str, int | None], Evidence] = field(default_factory=dict)  # (kind, rank)
    evidence: list[Evidence] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    exits: dict[int, Exit] = field(default_factory=dict)
    pid_rank: dict[int, int] = field(default_factory=dict)
    deaths: list[Death] = field(default_factory=list)
    closed_pids: dict[int, int] = field(default_factory=dict)  # pid -> line
    closing_agents: set[Source] = field(default_factory=set)  # the launchers' agents whose closings show
    killed_pids: set[int] = field(default_factory=set)
    teardowns: dict[Source, list[tuple[Evidence, int]]] = field(default_factory=dict)  # a launcher's kills: (line, pid)
    spawned: dict[Source, int] = field(default_factory=dict)  # the children a launcher's report says it spawned
    stop_line: int = NEVER  # the first line where a launcher or the scheduler began the teardown
    enqueued: dict[int, int] = field(default_factory=dict)
    barrier_missing: set[int] = field(default_factory=set)
    main_stacks: dict[int, list[str]] = field(default_factory=dict)  # first stack dump per rank
    loose_stacks: list[list[str]] = field(default_factory=list)  # dumps whose rank the prefixes do not tell
    collectives: dict[int, set[tuple[str, str | None]]] = field(default_factory=dict)  # SeqNum -> (op, numel)
    # (SeqNum, op, numel) -> the ranks that timed out on it: the odd collective out names its rank
    collective_ranks: dict[tuple[int, str, str | None], set[int]] = field(default_factory=dict)
    unnumbered_ops: dict[int, str] = field(
        default_factory=dict
    )  # rank -> its first timed-out collective (torch < 1.10)
    first_seq: int | None = None  # the lowest collective number a rank timed out on
    last_busy: Evidence | None = None  # the latest one-rank work (evaluation, saving...) before any timeout
    summary_section: dict[Source, str] = field(default_factory=dict)  # "first" / "others"
    pending_record: dict[Source, int] = field(default_factory=dict)  # a summary record's rank, until its exit line
    assumed: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (confidence, the assumption)
    progress_line: int = NEVER  # the first line of the log's head that shows training moving on
    progress_text: str = ""
    launch_line: int = NEVER  # the first line of the log's head that a launch prints (store barrier, NCCL bootstrap)
    child_errors: dict[Source, tuple[int, int]] = field(default_factory=dict)  # launcher's header: (line, rank)
    root_cause: set[int] = field(default_factory=set)  # ranks torchrun's `Root Cause (first observed failure)` names
    failure_time: dict[int, str] = field(default_factory=dict)  # rank -> when torchrun's summary says it failed
    repeated_lines: int = 0  # lines that repeated a known template: counted, not analysed (scan's repeats)
    named_device: dict[int, int] = field(
        default_factory=dict
    )  # a rank-less failure's line -> the GPU its message names
    main_first: set[int | None] = field(default_factory=set)  # ranks that timed out inside a one-rank-first section
    waited_in: dict[int, str] = field(default_factory=dict)  # rank -> the torch.distributed call its traceback ended in

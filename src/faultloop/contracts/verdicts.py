"""The analyzers' answers and how they came about: verdict.json (`LogVerdict`, every log
analyzer's), fr.json (`FrVerdict`, every flight-recorder analyzer's), run.json and the analysis
indexes (`RunRecord`). Each with one reader, one writer and one validator."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

from faultloop.core import atomic
from faultloop.faults import CATEGORIES, FAULTS, RESTART, STOP

T = TypeVar("T")


class RecordError(ValueError):
    """A record file (verdict.json, fr.json, run.json, score.json, a scores row) that cannot be used."""


def _rank_list(value: Any, name: str) -> list[int]:
    """A rank list as ints ("3" is accepted, as analyzers write either); anything else is an error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"{name} is not a list: {value!r:.80}")
    try:
        return [int(item) for item in value]
    except (TypeError, ValueError):
        raise RecordError(f"{name} holds a non-rank: {value!r:.80}") from None


NodeRef = int | str  # a node of a run's allocation: its index (0-based) or its host name
# Keys of a verdict's `extra` that cross from one analyzer to another: faultloop's analyzer's record
# of the job's life (the decision's rule, its reasons, each attempt) and, in it, the host each rank
# of the failing attempt ran on (the combined verdict drains an FR-named rank's node by it)
LIFE_RECORD, RANK_HOSTS = "life", "rank_hosts"
# Which reading of a log found a verdict (`found_by`): a row of the known templates, the generic
# reading of severities and failure words (exit statuses and signals in any wording too), where the
# log stops (temporal), or which rank differs from the others (spatial). A record written before
# the field existed reads as "" (not said).
ROW, GENERIC, TEMPORAL, SPATIAL = "row", "generic", "temporal", "spatial"
READINGS = (ROW, GENERIC, TEMPORAL, SPATIAL)


def _node_list(value: Any, name: str) -> list[NodeRef]:
    """Nodes as indices (ints, or strings of digits) or host names; anything else is an error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(f"{name} is not a list: {value!r:.80}")
    nodes: list[NodeRef] = []
    for item in value:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        index = isinstance(item, int) and not isinstance(item, bool) and item >= 0
        if not index and not (isinstance(item, str) and item.strip()):
            raise RecordError(
                f"{name} holds {item!r:.40}: a node is its index in the allocation (0, 1, ...) or its host name"
            )
        nodes.append(item.strip() if isinstance(item, str) else item)
    return nodes


def short_host(name: str) -> str:
    """A host name without its domain (`nid001.cluster` -> `nid001`): what SLURM calls the node."""
    return name.split(".", 1)[0] if not name.replace(".", "").isdigit() else name


def node_name(node: NodeRef, nodes: Sequence[str]) -> str | None:
    """The allocation's name of a node a verdict names (an index, a name, or a name with its
    domain where the allocation has the short one); None when the allocation has no such node."""
    if isinstance(node, int):
        return nodes[node] if node < len(nodes) else None
    if node in nodes:
        return node
    return next((n for n in nodes if short_host(n) == short_host(node)), None)


def _read_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: not a JSON object")
    return data


def _in_file(path: Path, read: Callable[[dict[str, Any]], T]) -> T:
    """A record read from a file by its validator; an error names the file."""
    data = _read_object(path)
    try:
        return read(data)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None


# ---- verdict.json: a log analyzer's verdict -----------------------------------------------------


class CitesLine(Protocol):
    """A log line a verdict rests on (logsage's own evidence, or a line read back from a file)."""

    @property
    def line(self) -> int | None: ...
    @property
    def text(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def rank(self) -> int | None: ...
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class VerdictLine:
    """A cited line as verdict.json holds it."""

    line: int | None
    text: str
    kind: str
    rank: int | None = None
    rule: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"line": self.line, "text": self.text, "kind": self.kind, "rank": self.rank}
        return out | {"rule": self.rule} if self.rule else out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VerdictLine:
        line, rank = data.get("line"), data.get("rank")
        return cls(
            line if isinstance(line, int) and not isinstance(line, bool) else None,
            str(data.get("text") or ""),
            str(data.get("kind") or ""),
            rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
            str(data.get("rule") or ""),
        )


@dataclass
class LogVerdict:
    """verdict.json (docs/architecture.md): every log analyzer's answer, whatever its kind.
    `extra` holds what an analyzer adds (logsage's LLM mode: the deterministic verdict beside)."""

    restart: str
    primary_ranks: list[int]
    secondary_ranks: list[int]
    fault_category: str | None
    fault_type: str | None
    explanation: str
    detail: str
    evidence: Sequence[CitesLine]
    checkpoint_saved: bool
    confidence: str = "low"  # high | medium | low: how firmly the log supports the primary ranks
    confidence_reason: str = ""
    mode: str = "deterministic"
    analyzer_version: str = ""
    # The job's life (docs/architecture.md, verdict.json): the nodes to leave out of the next
    # attempt, and the decision for that attempt over the job's earlier attempts where the
    # analyzer states one apart from `restart` (its decision on this log alone, upstream's).
    drain_nodes: list[NodeRef] = field(default_factory=list)
    next_attempt: str = ""
    found_by: str = ""  # the reading that found it (READINGS), "" where the analyzer does not say
    extra: dict[str, Any] = field(default_factory=dict)

    def drained(self, nodes: Sequence[str]) -> list[str]:
        """The allocation's names of the nodes to drain; RecordError naming the field when the
        verdict names a node the allocation (`nodes`, node index -> name) does not have."""
        names = []
        for node in self.drain_nodes:
            name = node_name(node, nodes)
            if name is None:
                have = ", ".join(f"{i}: {n}" for i, n in enumerate(nodes)) or "none"
                raise RecordError(f"drain_nodes: node {node!r} is not one of this run's nodes ({have})")
            names.append(name)
        return list(dict.fromkeys(names))

    def to_json(self) -> dict[str, Any]:
        out = {
            "restart": self.restart,
            "primary_ranks": self.primary_ranks,
            "secondary_ranks": self.secondary_ranks,
            "fault_category": self.fault_category,
            "fault_type": self.fault_type,
            "confidence": self.confidence,
            "confidence_reason": self.confidence_reason,
            "explanation": self.explanation,
            "detail": self.detail,
            "evidence": [e.to_json() for e in self.evidence],
            "checkpoint_saved": self.checkpoint_saved,
            "mode": self.mode,
            "analyzer_version": self.analyzer_version,
            "drain_nodes": self.drain_nodes,
        }
        if self.next_attempt:
            out["next_attempt"] = self.next_attempt
        if self.found_by:
            out["found_by"] = self.found_by
        return out | self.extra

    def to_text(self) -> str:
        """Upstream's five-part text form (what the LLM judge reads)."""
        attribution = f"Attribution: Primary issues: {self.primary_ranks}, Secondary issues: {self.secondary_ranks}"
        parts = [self.restart, self.explanation, attribution, self.detail]
        return "\n".join([*parts, f"checkpoint_saved: {str(self.checkpoint_saved).lower()}"]) + "\n"

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, mode: str = "") -> LogVerdict:
        """Check any analyzer's answer: `restart` is required, ranks must be ranks, nodes nodes
        (indices or host names; whether the run has them is `drained`'s check), `next_attempt`
        RESTART or STOP where given; an unknown category or fault type reads as none named.
        mode: the kind's default mode."""
        restart = data.get("restart")
        if not isinstance(restart, str) or not restart.strip():
            raise RecordError("the verdict has no 'restart' decision")
        next_attempt = data.get("next_attempt") or ""
        if next_attempt not in ("", RESTART, STOP):
            raise RecordError(f"next_attempt must be {RESTART!r} or {STOP!r}, not {next_attempt!r:.60}")
        category, fault_type = data.get("fault_category"), data.get("fault_type")
        found_by = data.get("found_by") or ""
        if found_by not in ("", *READINGS):
            raise RecordError(f"found_by must be one of {', '.join(READINGS)}, not {found_by!r:.60}")
        known = {f.name for f in fields(cls)}
        return cls(
            restart.strip(),
            _rank_list(data.get("primary_ranks"), "primary_ranks"),
            _rank_list(data.get("secondary_ranks"), "secondary_ranks"),
            category if category in CATEGORIES else None,
            fault_type if fault_type in FAULTS else None,
            str(data.get("explanation") or ""),
            str(data.get("detail") or ""),
            [VerdictLine.from_json(e) for e in data.get("evidence") or [] if isinstance(e, Mapping)],
            bool(data.get("checkpoint_saved", False)),
            str(data.get("confidence") or "low"),
            str(data.get("confidence_reason") or ""),
            str(data.get("mode") or mode),
            str(data.get("analyzer_version") or ""),
            drain_nodes=_node_list(data.get("drain_nodes"), "drain_nodes"),
            next_attempt=next_attempt,
            found_by=found_by,
            extra={k: v for k, v in data.items() if k not in known},
        )

    @classmethod
    def read_for(cls, path: Path, nodes: Sequence[str]) -> LogVerdict:
        """A verdict.json of a run whose allocation is `nodes`: a node it names that the run does
        not have is refused, the error naming the file and the field."""
        verdict = cls.read(path)
        try:
            verdict.drained(nodes)
        except RecordError as exc:
            raise RecordError(f"{path}: {exc}") from None
        return verdict

    def write(self, path: Path) -> None:
        atomic.write_json_atomic(path, self.to_json())

    @classmethod
    def read(cls, path: Path) -> LogVerdict:
        return _in_file(path, cls.from_json)


# ---- fr.json: a flight-recorder analyzer's verdict ----------------------------------------------


@dataclass(slots=True)
class SkippedFile:
    """A dump that could not be used (unsafe, truncated, empty, foreign); `rank` from its name."""

    file: str
    error: str
    rank: int | None = None


@dataclass
class FrVerdict:
    """fr.json (docs/architecture.md): every FR analyzer's answer. `details` holds what the tool
    adds (builtin: missing_ranks, ranks_behind, ...; torchfrtrace: its reports), kept beside."""

    no_dumps: bool
    suspect_ranks: list[int]
    scope: str = "none"  # rank | node | segment | job | none
    tool: str = ""
    dumps_read: list[int] = field(default_factory=list)
    ranks_without_dump: list[int] = field(default_factory=list)
    skipped_files: list[SkippedFile] = field(default_factory=list)
    expected_ranks: list[int] = field(default_factory=list)
    secondary_ranks: list[int] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        data["skipped_files"] = [asdict(s) for s in self.skipped_files]
        return data | self.details

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrVerdict:
        try:
            skipped = [SkippedFile(**s) for s in data.get("skipped_files") or []]
        except TypeError as exc:
            raise RecordError(f"skipped_files: {exc}") from None
        known = {f.name for f in fields(cls)}
        return cls(
            bool(data.get("no_dumps", False)),
            _rank_list(data.get("suspect_ranks"), "suspect_ranks"),
            str(data.get("scope") or "none"),
            str(data.get("tool") or ""),
            _rank_list(data.get("dumps_read"), "dumps_read"),
            _rank_list(data.get("ranks_without_dump"), "ranks_without_dump"),
            skipped,
            _rank_list(data.get("expected_ranks"), "expected_ranks"),
            _rank_list(data.get("secondary_ranks"), "secondary_ranks"),
            {k: v for k, v in data.items() if k not in known},
        )

    def write(self, path: Path) -> None:
        atomic.write_json_atomic(path, self.to_json())

    @classmethod
    def read(cls, path: Path) -> FrVerdict:
        return _in_file(path, cls.from_json)


# ---- run.json and the analysis indexes ----------------------------------------------------------


def _counts(value: Any, name: str) -> dict[str, int]:
    """A count per kind: names to non-negative integers; anything else is an error naming the field."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in value.items()
    ):
        raise RecordError(f"run record: {name} is not a count per kind: {value!r:.80}")
    return dict(value)


OK, FAILED = "ok", "failed"


@dataclass
class RunRecord:
    """run.json, and one entry of a cell's index: how an analyzer's result came about. redactions:
    what was replaced in the text it sent to an LLM endpoint, by kind (`analyze.redact`; records
    written before it read as none)."""

    analyzer: str
    kind: str
    fingerprint: str
    input_digest: str
    status: str  # ok | failed
    error: str | None
    stderr_tail: str
    wall_s: float
    finished_at: float
    reused: bool = False
    redactions: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def redacted(self) -> str:
        """The redactions in words: `3 secrets redacted (openai_key 1, url_password 2)`."""
        total = sum(self.redactions.values())
        each = ", ".join(f"{kind} {count}" for kind, count in sorted(self.redactions.items()))
        return f"{total} secret{'s' * (total != 1)} redacted ({each})"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        try:
            record = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except TypeError as exc:
            raise RecordError(f"run record: {exc}") from None
        record.redactions = _counts(record.redactions, "redactions")
        return record

    def write(self, path: Path) -> None:
        atomic.write_json_atomic(path, self.to_json())

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        return _in_file(path, cls.from_json)


def write_index(path: Path, records: list[RunRecord]) -> None:
    """analysis/analyzers.json or analysis/fr/analyzers.json: the cell's run records, in order."""
    atomic.write_json_atomic(path, {"analyzers": [r.to_json() for r in records]})


def read_index(path: Path) -> list[RunRecord]:
    """A cell's index; an absent or unreadable one lists no analyzer."""
    try:
        entries = _read_object(path).get("analyzers", [])
    except RecordError:
        return []
    return [RunRecord.from_json(e) for e in entries if isinstance(e, dict)]

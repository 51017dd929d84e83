"""How logs are framed: the one grammar of line prefixes, peeled in layers before a rule looks.

A line a program prints reaches the reader behind the prefixes of whatever carried it, outermost
first: a collector's (journald's `May 01 10:00:00 node01 python3[4242]: `, a cloud console's
`| 2026-05-01T10:00:00.123Z | `, docker compose's `worker-1  | `, kubectl's `[pod/name/container] `,
Ray's `(RayTrainWorker pid=4242, ip=10.0.0.2) `), a launcher's (pdsh's and DeepSpeed's
`node01: ` or `10.0.0.1: `, srun --label's `3: `, mpirun --tag-output's `[1,3]<stderr>:`,
Horovod's `[3]<stderr>:`, torchrun's `[default3]:`), torch's own `[rank3]:`, then the program's
logging header (a timestamp in the common formats, `- ERROR - `, `ERROR:root:`, `[INFO] `,
DeepSpeed's `[launch.py:151:main] `, glog's `E0501 10:00:00.123456 1234 file.cc:12] `, a
kernel's `[12345.678901] `), with ANSI colour codes anywhere and indentation between layers.

Each layer is one alternative of LAYERS; `peel` takes them off from the left, any number and in
any order, and keeps what they say about the line's origin: the srun label, a host (any form of
node, container or worker name) and the innermost rank prefix (the last one peeled wins:
`[default0]:[rank12]:` is rank 12). The program's words are what is left, indentation kept
(tracebacks need it). Rules then match those words wherever they stand.

Prefixes no row lists are read by their shape (`peel_shapes`, SHAPE_LAYERS): a tag in brackets,
parentheses, angle brackets or braces, `key=value` headers, a timestamp in another format, a host
or container name before a separator, a logger's dotted name, a JSON record with the message in
one of its fields; LAYERS' rows still read whatever stands behind them. A rank-like token in such
a prefix (`rank=3`, `<rank 3>`, a JSON record's `rank`) names the line's rank with the role
GUESSED, which says it was guessed. The reader turns to shapes only where the grammar's own
reading finds no rule or no rank (logsage/reading.py), so what LAYERS reads is read as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

MAX_LAYERS = 10
LEAD_MAX = 120  # how far into a line a torch rank prefix may sit behind prefixes the grammar lacks

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)"
# a time zone as loggers and journalctl print it: an offset, or a zone's abbreviation
_ZONE = r"(?:Z|UTC|GMT|[CEW]ES?T|EES?T|WES?T|BST|IST|JST|KST|HKT|SGT|AES?DT|AEST|[ECMP][SD]T|[+-]\d\d:?\d\d)"
_DATE_TIME = rf"(?:{_WEEKDAY} )?\d{{4}}[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: ?{_ZONE})?"
# A host name as launchers print it: an IPv4 address, localhost, or a lower-case name with a digit
# (node01, gpu-a100-3.cluster): never an exception's CamelCase class, never a bare word. SLURM's
# daemons print their own name with the node's (`slurmstepd-node3: error: ...`): a program's word.
_HOST = r"(?!slurmstepd|srun|slurmd)(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|[a-z][a-z0-9-]*\d[a-z0-9-]*(?:\.[a-z0-9-]+)*)"

# LAYERS: (name, regex) -- the grammar, one row per prefix family. The regex matches at the
# current position (after optional indentation); named groups carry what the layer says: label
# (srun), host (a node, container or worker), role and inner (a rank prefix), mpi (a global rank).
LAYERS: tuple[tuple[str, str], ...] = (
    ("srun_label", r"(?P<label>\d{1,5}): "),  # srun --label (src/srun/step_io: "%*d: ")
    ("mpirun_tag", r"\[(?:\d+,)?(?P<mpi>\d+)\]<std(?:out|err|diag)>: ?"),  # Open MPI --tag-output; Horovod
    ("torch_rank", r"\[(?P<role>[a-z]+)(?P<inner>\d+)\]: ?"),  # torch [rank3]:, torchrun [default3]:
    ("journald", rf"{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<jhost>[\w.-]+) [\w./@:-]+?(?:\[\d+\])?: "),
    # journald's other time formats (short-iso, -monotonic, -full) put their time in front of the
    # same `host program[pid]: ` (the kernel's without a pid), which the time layers peel first
    ("syslog_host", r"(?P<shost>[\w.-]+) (?:kernel|[\w./@-]+\[\d+\]): "),
    ("cri", r"(?:stdout|stderr) [FP] "),  # the CRI log format (containerd, CRI-O): `<time> stderr F `
    ("cloud_table", r"\|[ \t]+(?=\d{4}-\d\d-\d\d)"),  # a console's `| 2026-... | message` columns
    ("date_time", rf"\[?{_DATE_TIME}\]?(?:[ \t]+\|[ \t]+|[ \t]+-[ \t]+|:? |\]|(?=\[))"),
    ("time_of_day", r"\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?: - | |(?=\[))"),
    ("dmesg", r"\[ *\d+\.\d+\] "),  # the kernel's seconds since boot
    ("glog", r"\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\] ?|\[[IWEF] [\w./-]+:\d+\] ?"),
    ("logger_name", rf"[\w.]+ - (?={_LEVEL} - )"),  # logging's `%(name)s - %(levelname)s - `
    ("level", rf"\[?{_LEVEL}\]?(?::[\w.<>]+:| +\| +| - |:? )"),  # `ERROR - `, `ERROR:root:`, `[INFO] `
    ("source_location", r"\[[\w./-]+\.(?:py|cc|cpp|h|hpp):\d+(?::[\w<>]+)?\] ?"),  # DeepSpeed's logger
    ("loguru_location", r"[\w.]+:[\w<>]+:\d+ - "),
    ("compose", r"(?P<service>[A-Za-z][\w.-]*?[-_]\d+) +\| "),  # docker compose `worker-1  | `
    ("kubectl", r"\[pod/(?P<pod>[\w.-]+)/[\w.-]+\] "),
    ("ray", r"\((?:(?P<actor>[\w.-]+) )?pid=(?P<raypid>\d+)(?:, ip=(?P<rayip>[\d.]+))?\) "),
    ("host_label", rf"(?P<host>{_HOST}): "),  # pdsh, DeepSpeed's multi-node runner
)
# SHAPE_LAYERS: prefixes no row of LAYERS lists, by their shape (the grammar of shapes). Each
# matches at the current position and takes its separator with it; named groups carry what it
# says: a tag's contents, a key and its value, a host.
_CLOCK = rf"\d{{1,2}}:\d\d(?::\d\d)?(?:[.,]\d{{1,9}})?(?: ?[AaPp][Mm])?(?: ?{_ZONE})?"
_DAY = (  # `Fri, May 1 2026`, `01-May-2026`, `2026/05/01`, `05/01/2026`
    rf"(?:{_WEEKDAY}[a-z]*,? )?(?:{_MONTH}[a-z]*[ -]+\d{{1,2}}(?:,? \d{{4}})?"
    rf"|\d{{1,2}}[ -/]{_MONTH}[a-z]*[ -/]\d{{2,4}}"
    r"|\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})"
)
_EPOCH = r"\d{10}(?:\d{3})?(?:\.\d{1,9})?"  # seconds (or milliseconds) since 1970
_VALUE = r"\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|[^\s\"',;|\]]{0,200}"  # quoted, or up to a blank or separator
_BEFORE_SEPARATOR = r"(?=[ \t]*(?:\||>|»|::?[ \t]| - ))"
# after a shape: a colon, a pipe, a punctuation mark before a blank (`>`, `::`, ` - `), then one blank
# at most (the indentation of a traceback's lines follows)
_SEPARATOR = r"(?::(?![:/]))?(?:[ \t]*\|+|[ \t]*(?:>+|»|::?|[,;])(?=[ \t]|$)|[ \t]+-(?=[ \t]))?[ \t]?"
# fmt: off
SHAPE_LAYERS: tuple[tuple[str, str], ...] = (
    ("bracket_tag", r"\[(?P<bracket>[^\[\]\n]{1,100})\]"),  # `[job 7f3a]`, `[2026-05-01 10:00]`, `[c10d]`
    ("paren_tag", r"\((?P<paren>[^()\n]{1,100})\)(?=[ \t:|>\[(<{]|$)"),  # `(worker rank=3)`
    ("angle_tag", r"<(?P<angle>[^<>\n]{1,60})>"),  # `<node07>`, `<rank 3>`
    ("brace_tag", r"\{(?![ \t]*\")(?P<brace>[^{}\n]{1,100})\}(?=[ \t:|>\[(<{]|$)"),  # `{rank: 3}`, never JSON
    ("key_value", rf"(?P<key>[A-Za-z_][\w.-]{{0,40}})=(?P<value>{_VALUE})(?=[\s,;|:]|$)"),  # `level=info host=n07`
    # a time in any common format: `Jan 07 20:36:55`, `01-May-2026 10:00`, `2026/05/01-10:00:00`, epoch seconds
    ("stamp", rf"(?:{_DAY}[ T_:-]?{_CLOCK}|{_DAY}|{_CLOCK}|\d{{8}}[ T_-]?{_CLOCK}|{_EPOCH})(?![\w:.])"),
    ("stream", r"(?:stdout|stderr|STDOUT|STDERR)(?=[ \t:|>\]])"),
    # a node, pod or container name before a separator (`node07 | `, `trainer-7d9f-x2k4p/trainer > `)
    ("host_tag", rf"(?P<ghost>(?:{_HOST}|[A-Za-z][\w.-]*[-_.][\w.-]*\d[\w.-]*)(?:/[\w.-]+)*){_BEFORE_SEPARATOR}"),
    # a logger's dotted name (`megatron.core.dist_checkpointing: `; never a program's `train.py: `)
    ("logger", r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*){2,}:(?= )"),
    # a rank named bare before a separator (`RANK 3 :: `): never the program's `Rank 1 reached ...`
    ("rank_word", rf"(?P<rankword>(?i:(?:global[_ ]?)?rank)[ \t]*[=:#]?[ \t]*\d{{1,6}}){_BEFORE_SEPARATOR}"),
)
# fmt: on
_LAYER_RE = re.compile(
    r"[ \t]*(?:" + "|".join(f"(?P<L_{name}>{rx})" for name, rx in LAYERS) + ")",
)
# LAYERS first (what the grammar knows reads as it does), then the shapes, each with its separator;
# a shape only where the line or the prefix before it ends (never behind indentation: the source
# lines a traceback shows are indented)
_SHAPED_RE = re.compile(
    "(?:"
    + _LAYER_RE.pattern
    + "|(?:"
    + "|".join(f"(?P<S_{name}>{rx})" for name, rx in SHAPE_LAYERS)
    + ")"
    + _SEPARATOR
    + ")"
)
# The prefixes of every line of a text at once (a census of ranks reads megabytes: one regex, no
# Python loop per line): the layers repeated after each newline, searched in "\n" + text (a newline
# first, the regex engine skips from line to line in C; `^` under re.M tries every position: a third of
# the census's time); the last rank prefix captured is the innermost.
LINES_RE = re.compile(r"\n(?:" + _LAYER_RE.pattern + r")+")
# the lines that open with a prefix the grammar does not list (a JSON record too), with what follows
# it: the census reads their ranks through peel_shapes
SHAPED_LINES_RE = re.compile(r"^[ \t]*(?:" + "|".join(rx for _, rx in SHAPE_LAYERS) + r'|\{\s*")[^\n]*', re.M)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_INNER_IN_LEAD_RE = re.compile(r"\[(rank|default)(\d+)\]: ?")  # a rank prefix behind unknown prefixes
_NCCL_RE = re.compile(r"[ \t]*[\w.-]+:\d+:\d+ \[(\d+)\] ")  # NCCL's own host:pid:tid [cuda device]
DEVICE = "device"  # the role of NCCL's [N]: the local GPU index, a local rank where one rank drives one GPU
GUESSED = "guessed"  # the role of a rank read from a rank-like token in a prefix the grammar does not list
# a rank-like token: `rank=3`, `rank 3`, `RANK:3`, `global_rank=3`; never a local, node or group rank,
# nor the rank of a process group other than the default one (torch's own `[PG ID 1 ... Rank 3]`)
RANK_LIKE_RE = re.compile(
    r"(?<![\w])(?<!local[ -])(?<!node[ -])(?<!group[ -])(?:global[_ -]?)?rank[ \t]*[=:#_-]?[ \t]*(\d{1,6})(?!\d)", re.I
)
_OTHER_GROUP_RE = re.compile(r"\bPG (?:ID )?(?!0 )\d")
# a structured log record: the line is one JSON object with the program's words in a field
JSON_MAX = 1 << 16
MESSAGE_KEYS = ("message", "msg", "MESSAGE", "log", "text", "line", "event", "body", "@message")
RANK_KEYS = ("rank", "RANK", "global_rank", "globalRank", "rank_id")
HOST_KEYS = (
    "host",
    "hostname",
    "_HOSTNAME",
    "node",
    "nodename",
    "node_name",
    "pod",
    "pod_name",
    "container",
    "container_name",
    "instance",
)


class Source(NamedTuple):
    """Where a line came from, by its prefixes; lines of one multi-line record share it."""

    label: int | None  # srun --label: a task (= rank), or a node when one torchrun runs per node
    host: str | None  # a node, container or worker name (pdsh, compose, Ray, journald, kubectl)
    # the word of the innermost rank prefix: "rank" (global: torch, mpirun), "default" (local),
    # DEVICE (NCCL's GPU index), GUESSED (a rank-like token in a prefix read by its shape)
    role: str | None
    inner: int | None  # the number of that prefix


NO_SOURCE = Source(None, None, None, None)


def peel(text: str) -> tuple[Source, str]:
    """Where the line came from (its prefixes, by LAYERS) and the program's words without them."""
    source, words, _ = peel_known(text)
    return source, words


def peel_known(text: str) -> tuple[Source, str, bool]:
    """`peel`, and whether the rank prefix it read stood behind text no layer reads."""
    return _peel_known_memo(text) if len(text) <= MEMO_LINE else _peel_known(text)


def _peel_known(text: str) -> tuple[Source, str, bool]:
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    source, pos, _ = _peel_layers(text, _LAYER_RE, NO_SOURCE)
    return _rank_in_lead(source, text[pos:])


def peel_shapes(text: str, depth: int = 0) -> tuple[Source, str, bool]:
    """`peel`, with the prefixes LAYERS does not list read by their shape (SHAPE_LAYERS, a JSON
    record's fields): where the line came from, the program's words, and whether a shape was
    read (False: `peel`'s reading)."""
    return _peel_shapes_memo(text) if len(text) <= MEMO_LINE and not depth else _peel_shapes(text, depth)


def _peel_shapes(text: str, depth: int = 0) -> tuple[Source, str, bool]:
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    source, pos, shaped = _peel_layers(text, _SHAPED_RE, NO_SOURCE)
    if depth == 0 and text.endswith("}") and (record := _json_record(text[pos:])) is not None:
        fields, message = record
        inner_source, words, _ = _peel_shapes(message, 1)
        return _merged(_merged(source, inner_source), fields), words, True
    source, words, _ = _rank_in_lead(source, text[pos:])
    return source, words, shaped


# A line is peeled by every stage that reads it (the census, the classifier, a record's reader), and
# a log repeats its lines: the last lines peeled are remembered, each at most MEMO_LINE characters
# (MEMO_LINES x MEMO_LINE bounds the memory).
MEMO_LINES = 4096
MEMO_LINE = 2048
_peel_known_memo = lru_cache(maxsize=MEMO_LINES)(_peel_known)
_peel_shapes_memo = lru_cache(maxsize=MEMO_LINES)(_peel_shapes)


def _peel_layers(text: str, layer_re: re.Pattern[str], source: Source) -> tuple[Source, int, bool]:
    """The prefixes at the start of the text, as far as `layer_re` reads them: what they say of the
    line's origin, where the program's words start, and whether a shape (not a LAYERS row) was read."""
    label, host, role, inner = source
    pos, shaped = 0, False
    for _ in range(MAX_LAYERS):
        m = layer_re.match(text, pos)
        if not m or m.end() == pos:
            break
        if m["label"] is not None and (label is not None or inner is not None):
            break  # srun labels the whole line: a number behind other prefixes is the program's
        layer = m.lastgroup or ""
        is_shape = layer.startswith("S_")
        if is_shape and pos and m.end(layer) == m.end() and not text[m.end() :].strip():
            break  # a shape behind prefixes that ends the line with no separator is the program's words
        pos = m.end()
        if m["label"] is not None:
            label = int(m["label"])
        elif m["mpi"] is not None:
            role, inner = "rank", int(m["mpi"])
        elif m["inner"] is not None:
            role, inner = m["role"], int(m["inner"])
        elif not is_shape:
            named = _host(m)  # a host behind a host (a collector's, then a launcher's): both name the origin
            host = named if host is None else f"{host} {named}" if named else host
        else:
            shaped = True
            guess, named = _shape_says(m)
            if guess is not None and inner is None:
                role, inner = GUESSED, guess
            if named:
                host = named if host is None else f"{host} {named}"
    return Source(label, host, role, inner), pos, shaped


def _rank_in_lead(source: Source, text: str) -> tuple[Source, str, bool]:
    """A torch or torchrun rank prefix behind prefixes not read (and the layers behind it: the
    innermost names the rank), or NCCL's own header; and whether text was skipped to find it."""
    if source.inner is None:
        if m := _INNER_IN_LEAD_RE.search(text, 0, LEAD_MAX):
            words = text[m.end() :]
            source, pos, _ = _peel_layers(words, _LAYER_RE, source._replace(role=m.group(1), inner=int(m.group(2))))
            return source, words[pos:], m.start() > 0
        if m := _NCCL_RE.match(text):
            return source._replace(role=DEVICE, inner=int(m.group(1))), text[m.end() :], False
    return source, text, False


def _host(groups: re.Match[str]) -> str | None:
    """The name a host layer gives the line's origin (a Ray worker is its ip and pid)."""
    if groups["raypid"] is not None:
        return f"{groups['rayip'] or ''}/{groups['raypid']}"
    return groups["host"] or groups["service"] or groups["pod"] or groups["jhost"] or groups["shost"]


def _shape_says(groups: re.Match[str]) -> tuple[int | None, str | None]:
    """(rank, host) a shape says: a rank-like token in a tag or a `rank=` header, a host tag or
    a `host=` header."""
    if (key := groups["key"]) is not None:
        value = (groups["value"] or "").strip("\"'")
        if key in RANK_KEYS and value.isdigit():
            return int(value), None
        return None, value if key in HOST_KEYS and value else None
    if groups["ghost"] is not None:
        return None, groups["ghost"]
    tag = groups["bracket"] or groups["paren"] or groups["angle"] or groups["brace"] or groups["rankword"]
    return (rank_like(tag) if tag else None), None


def rank_like(text: str) -> int | None:
    """The rank a rank-like token in a prefix names (RANK_LIKE_RE), None where there is none."""
    if _OTHER_GROUP_RE.search(text):
        return None
    m = RANK_LIKE_RE.search(text)
    return int(m.group(1)) if m else None


def json_like(text: str) -> bool:
    """Whether the words may be a JSON log record (a wrapper whose message field holds the line)."""
    return text.startswith("{") and text.rstrip().endswith("}")


def holds_json(line: str) -> bool:
    """Whether the line may end in a JSON log record (behind prefixes or not)."""
    return '{"' in line and line.rstrip().endswith("}")


def _json_record(text: str) -> tuple[dict[str, Any], str] | None:
    """A JSON log record's fields and its message (the first message field, else its longest
    string), None where the text is no JSON object with a message."""
    if not json_like(text) or len(text) > JSON_MAX:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    fields = {**{k: v for nested in record.values() if isinstance(nested, dict) for k, v in nested.items()}, **record}
    message = next((fields[k] for k in MESSAGE_KEYS if isinstance(fields.get(k), str)), None)
    if message is None:
        strings = [v for v in fields.values() if isinstance(v, str)]
        message = max(strings, key=len, default=None)
    return (fields, message.rstrip("\r\n")) if message is not None else None


def split_message(text: str, split: Callable[[str], list[str]]) -> list[str] | None:
    """A JSON log record's line as one line per piece `split` cuts its message into (each its own
    record, with the record's other fields), None where the line is no JSON record."""
    start = text.find("{")
    if start < 0 or not json_like(text[start:]) or len(text) > JSON_MAX:
        return None
    try:
        record = json.loads(text[start:])
    except ValueError:
        return None
    key = next((k for k in MESSAGE_KEYS if isinstance(record, dict) and isinstance(record.get(k), str)), None)
    if key is None:
        return None
    first, *rest = split(record[key])
    words = peel_shapes(first, 1)[1]
    prefix = first[: len(first) - len(words)] if first.endswith(words) else ""  # the rest stands behind it too
    return [text[:start] + json.dumps({**record, key: piece}) for piece in (first, *(prefix + p for p in rest))]


def _merged(outer: Source, inner: Source | dict[str, Any]) -> Source:
    """A line's source from an outer reading and an inner one (the message's own prefixes win;
    a JSON record's fields name a rank and a host where they do not)."""
    if isinstance(inner, dict):
        rank = next((int(v) for k in RANK_KEYS if str(v := inner.get(k, "")).isdigit()), None)
        host = next((str(inner[k]) for k in HOST_KEYS if inner.get(k)), None)
        inner = Source(None, host, GUESSED if rank is not None else None, rank)
    label = outer.label if outer.label is not None else inner.label
    host = " ".join(h for h in (outer.host, inner.host) if h) or None
    if inner.inner is not None:
        return Source(label, host, inner.role, inner.inner)
    return Source(label, host, outer.role, outer.inner)

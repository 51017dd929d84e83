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
"""

from __future__ import annotations

import re
from typing import NamedTuple

MAX_LAYERS = 10
LEAD_MAX = 120  # how far into a line a torch rank prefix may sit behind prefixes the grammar lacks

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|NOTICE)"
_DATE_TIME = r"\d{4}[-/]\d\d[-/]\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: ?(?:Z|UTC|[+-]\d\d:?\d\d))?"
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
    ("journald", rf"{_MONTH} [ \d]\d \d\d:\d\d:\d\d (?P<jhost>[\w.-]+) [\w./@:-]+?(?:\[\d+\])?: "),
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
_LAYER_RE = re.compile(
    r"[ \t]*(?:" + "|".join(f"(?P<L_{name}>{rx})" for name, rx in LAYERS) + ")",
)
# The prefixes of every line of a text at once (a census of ranks reads megabytes: one regex, no
# Python loop per line): the layers repeated from each line start; the last rank prefix captured
# is the innermost.
LINES_RE = re.compile(r"^(?:" + _LAYER_RE.pattern + r")+", re.M)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_INNER_IN_LEAD_RE = re.compile(r"\[(rank|default)(\d+)\]: ?")  # a rank prefix behind unknown prefixes
_NCCL_RE = re.compile(r"[ \t]*[\w.-]+:\d+:\d+ \[(\d+)\] ")  # NCCL's own host:pid:tid [cuda device]
DEVICE = "device"  # the role of NCCL's [N]: the local GPU index, a local rank where one rank drives one GPU


class Source(NamedTuple):
    """Where a line came from, by its prefixes; lines of one multi-line record share it."""

    label: int | None  # srun --label: a task (= rank), or a node when one torchrun runs per node
    host: str | None  # a node, container or worker name (pdsh, compose, Ray, journald, kubectl)
    role: str | None  # the word of the innermost rank prefix: "rank" (global: torch, mpirun), "default" (local)
    inner: int | None  # the number of that prefix


NO_SOURCE = Source(None, None, None, None)


def peel(text: str) -> tuple[Source, str]:
    """Where the line came from (its prefixes, by LAYERS) and the program's words without them."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    label = host = role = inner = None
    pos = 0
    for _ in range(MAX_LAYERS):
        m = _LAYER_RE.match(text, pos)
        if not m or m.end() == pos:
            break
        g = m.groupdict()
        if g["label"] is not None and (label is not None or inner is not None):
            break  # srun labels the whole line: a number behind other prefixes is the program's
        pos = m.end()
        if g["label"] is not None:
            label = int(g["label"])
        elif g["mpi"] is not None:
            role, inner = "rank", int(g["mpi"])
        elif g["inner"] is not None:
            role, inner = g["role"], int(g["inner"])
        else:  # a host behind a host (a collector's, then a launcher's): both name the origin
            named = _host(g)
            host = named if host is None else f"{host} {named}" if named else host
    text = text[pos:]
    if inner is None:
        if m := _INNER_IN_LEAD_RE.search(text, 0, LEAD_MAX):
            role, inner, text = m.group(1), int(m.group(2)), text[m.end() :]
        elif m := _NCCL_RE.match(text):
            role, inner, text = DEVICE, int(m.group(1)), text[m.end() :]
    return Source(label, host, role, inner), text


def _host(groups: dict[str, str | None]) -> str | None:
    """The name a host layer gives the line's origin (a Ray worker is its ip and pid)."""
    if groups["raypid"] is not None:
        return f"{groups['rayip'] or ''}/{groups['raypid']}"
    return groups["host"] or groups["service"] or groups["pod"] or groups["jhost"]

"""How people paste logs: the same log with its timestamps removed, its rank prefixes in another
launcher's style, its head cut, its traceback header dropped, its lines wrapped, its ranks' lines
interleaved differently. Each transformation maps a log's lines to the lines a reader might get."""

from __future__ import annotations

import re
from collections.abc import Callable

from faultloop.analyze.logsage import Settings, Verdict, analyze_log
from faultloop.analyze.logsage.facts import Source
from faultloop.analyze.logsage.scan import split_prefix

Lines = list[str]
TAIL_LINES = 40
WRAP_COLUMNS = 200
_TIMESTAMP_RE = re.compile(
    r"\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?\]? ?"  # ISO date and time, bracketed or not
    r"|(?<=[IWEF]\d{4}) \d\d:\d\d:\d\d\.\d+"  # glog (torch's C++ and the elastic agent)
    r"|\b\d\d:\d\d:\d\d(?:[.,]\d+)? ?"  # a bare time of day
)


def strip_timestamps(lines: Lines) -> Lines:
    return [_TIMESTAMP_RE.sub("", line) for line in lines]


def other_launcher_prefixes(lines: Lines) -> Lines:
    """srun's `N: ` labels become torch's `[rankN]:` and torch's `[rankN]:` alone an srun label.
    Where labels are node indices (one torchrun per node), a local `[rankN]:` (torchrun's role
    prefix, seen under several labels) becomes its `[defaultN]:`; with global `[rankN]:` prefixes
    the node labels become pdsh host names (DeepSpeed's multi-node runner)."""
    sources = [split_prefix(line) for line in lines]
    inners_of: dict[int, set[int]] = {}
    labels_of: dict[int, set[int]] = {}
    for source, _ in sources:
        if source.label is not None and source.inner is not None:
            inners_of.setdefault(source.label, set()).add(source.inner)
            labels_of.setdefault(source.inner, set()).add(source.label)
    labels_are_nodes = any(len(inners) > 1 for inners in inners_of.values())
    rank_is_local = any(len(labels) > 1 for labels in labels_of.values())
    return [
        _restyle(line, source, text, labels_are_nodes, rank_is_local)
        for line, (source, text) in zip(lines, sources, strict=True)
    ]


def _restyle(line: str, source: Source, text: str, labels_are_nodes: bool, rank_is_local: bool) -> str:
    if source.host is not None or source.role == "device" or (source.label is None and source.role != "rank"):
        return line
    inner = f"[{source.role}{source.inner}]:" if source.inner is not None else ""
    if labels_are_nodes and rank_is_local:
        return f"{source.label}: {inner.replace('[rank', '[default')}{text}"
    if labels_are_nodes:
        return f"10.0.0.{source.label}: {inner}{text}"
    if source.label is not None:  # the line's rank: a global [rankN] under the label where it has one
        rank = (
            source.inner if source.role == "rank" and source.inner is not None and not rank_is_local else source.label
        )
        return f"[rank{rank}]:{text}"
    return f"{source.inner}: {text}"


def tail(lines: Lines) -> Lines:
    return lines[-TAIL_LINES:]


def drop_traceback_header(lines: Lines) -> Lines:
    return [line for line in lines if not split_prefix(line)[1].startswith("Traceback (most recent call last)")]


def wrap(lines: Lines) -> Lines:
    return [line[i : i + WRAP_COLUMNS] for line in lines for i in range(0, max(len(line), 1), WRAP_COLUMNS)]


def interleave(lines: Lines) -> Lines:
    """Adjacent lines of two different ranks swapped, as concurrent writers order them either way."""
    out = list(lines)
    i = 0
    while i + 1 < len(out):
        a, b = split_prefix(out[i])[0], split_prefix(out[i + 1])[0]
        if a != b and _names_a_process(a) and _names_a_process(b):
            out[i], out[i + 1] = out[i + 1], out[i]
            i += 1
        i += 1
    return out


def _names_a_process(source: Source) -> bool:
    return source.label is not None or source.inner is not None


TRANSFORMATIONS: dict[str, Callable[[Lines], Lines]] = {
    "no timestamps": strip_timestamps,
    "other prefixes": other_launcher_prefixes,
    "last 40 lines": tail,
    "no traceback header": drop_traceback_header,
    "wrapped at 200": wrap,
    "interleaved": interleave,
}


SURVIVES, BROKEN, CUT, SAME = "yes", "no", "cut", "="


def verdict_key(v: Verdict, named: bool) -> tuple[object, ...]:
    """What must hold: category, restart, and the culprit where the original named one on more
    than an assumption (a rank read as the only process's is no finding about a culprit)."""
    return (v.fault_category, v.restart, tuple(v.primary_ranks) if named else None)


def survival(lines: Lines) -> dict[str, str]:
    """Per transformation: SURVIVES (same verdict), CUT (another verdict, but the last 40 lines
    lost lines the verdict rested on, so they cannot carry it), BROKEN (another verdict although
    they could) or SAME (the transformation changes nothing)."""
    settings = Settings(prefilter="python")
    base = analyze_log(lines, settings)
    named = base.confidence != "low"
    first_evidence = min((e.line for e in base.evidence), default=len(lines))
    out = {}
    for name, transform in TRANSFORMATIONS.items():
        changed = transform(lines)
        if changed == lines:
            out[name] = SAME
        elif verdict_key(analyze_log(changed, settings), named) == verdict_key(base, named):
            out[name] = SURVIVES
        else:
            out[name] = CUT if transform is tail and first_evidence <= len(lines) - TAIL_LINES else BROKEN
    return out


# -- prefix families: what carried the log to the reader (logsage/framing.py's grammar) ----------
# Outer families stand in front of the whole line (collectors, launchers' host labels); inner ones
# between the line's rank prefixes and the program's words (logging headers, colour). Each takes
# the line's number, so timestamps move on as real ones do.
OUTER_FAMILIES: dict[str, Callable[[int], str]] = {
    "pdsh host": lambda i: "node01: ",
    "docker compose": lambda i: "worker-1  | ",
    "journald": lambda i: f"May 01 10:{i // 60 % 60:02}:{i % 60:02} node01 python3[4242]: ",
    "cloud timestamp": lambda i: f"2026-05-01T10:{i // 60 % 60:02}:{i % 60:02}.{i % 1000:03}Z ",
    "ray worker": lambda i: "(RayTrainWorker pid=4242, ip=10.0.0.2) ",
    "kubectl": lambda i: "[pod/trainer-0/pytorch] ",
    "bracketed time": lambda i: f"[10:{i // 60 % 60:02}:{i % 60:02}] ",
}
INNER_FAMILIES: dict[str, Callable[[int], str]] = {
    "python logging": lambda i: f"2026-05-01 10:00:{i % 60:02},{i % 1000:03} - ERROR - ",
    "logging with name": lambda i: f"2026-05-01 10:00:{i % 60:02},123 - train - WARNING - ",
    "deepspeed logger": lambda i: f"[2026-05-01 10:00:{i % 60:02},123] [INFO] [engine.py:{100 + i}:step] ",
    "glog": lambda i: f"E0501 10:00:{i % 60:02}.123456  4242 train.cc:{i}] ",
    "ansi level": lambda i: "\x1b[1;31mERROR\x1b[0m: ",
}


def behind(outer: Callable[[int], str] | None, inner: Callable[[int], str] | None) -> Callable[[Lines], Lines]:
    """Every line behind an outer prefix and/or with an inner one between its rank prefixes and
    its words."""

    def transform(lines: Lines) -> Lines:
        out = []
        for i, line in enumerate(lines):
            if inner is not None:
                source, text = split_prefix(line)
                cut = len(line) - len(text)
                if source.role == "device":  # NCCL's host:pid:tid [N] is the program's own header
                    cut = line.rindex(" [", 0, cut) - len(line[: line.rindex(" [", 0, cut)].split()[-1])
                line = line[:cut] + inner(i) + line[cut:]
            out.append((outer(i) if outer else "") + line)
        return out

    return transform


def mpirun_tags(lines: Lines) -> Lines:
    """torch's global `[rankN]:` as mpirun --tag-output's `[1,N]<stderr>:`."""
    return [re.sub(r"^(\s*)\[rank(\d+)\]:", r"\1[1,\2]<stderr>:", line) for line in lines]


def torchrun_around_rank(lines: Lines) -> Lines:
    """torch's global `[rankN]:` behind torchrun's `[defaultL]:` (L a local rank of 8 per node):
    the innermost prefix names the rank."""
    return [
        re.sub(r"^(\s*)\[rank(\d+)\]:", lambda m: f"{m[1]}[default{int(m[2]) % 8}]:[rank{m[2]}]:", line)
        for line in lines
    ]


def indented(lines: Lines) -> Lines:
    """Indentation in front of the prefixes of lines that have any."""
    return ["  " + line if split_prefix(line)[0] != Source(None, None, None, None) else line for line in lines]


PREFIX_FAMILIES: dict[str, Callable[[Lines], Lines]] = {
    **{name: behind(prefix, None) for name, prefix in OUTER_FAMILIES.items()},
    **{name: behind(None, prefix) for name, prefix in INNER_FAMILIES.items()},
    "mpirun tags": mpirun_tags,
    "torchrun around rank": torchrun_around_rank,
    "indented prefixes": indented,
}
# two layers at once: a collector's and a logging header, a launcher's and colour
TWO_LAYERS: dict[str, Callable[[Lines], Lines]] = {
    "pdsh host + python logging": behind(OUTER_FAMILIES["pdsh host"], INNER_FAMILIES["python logging"]),
    "docker compose + ansi level": behind(OUTER_FAMILIES["docker compose"], INNER_FAMILIES["ansi level"]),
    "journald + deepspeed logger": behind(OUTER_FAMILIES["journald"], INNER_FAMILIES["deepspeed logger"]),
    "cloud timestamp + glog": behind(OUTER_FAMILIES["cloud timestamp"], INNER_FAMILIES["glog"]),
    "kubectl + mpirun tags": lambda lines: behind(OUTER_FAMILIES["kubectl"], None)(mpirun_tags(lines)),
}


def unchanged_behind(lines: Lines, families: dict[str, Callable[[Lines], Lines]]) -> list[str]:
    """The families behind which the log's verdict changes (empty: it holds behind all)."""
    settings = Settings(prefilter="python")
    base = analyze_log(lines, settings)
    named = base.confidence != "low"
    key = verdict_key(base, named)
    return [
        name
        for name, transform in families.items()
        if (changed := transform(lines)) != lines and verdict_key(analyze_log(changed, settings), named) != key
    ]

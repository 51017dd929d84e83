"""Prefixes and wrappers no table of logsage lists, generated (Hypothesis strategies): random
bracket tags, `key=value` headers, host and container tags, JSON log records with the message in a
field, CRI and journald framing, and the corpus's interleaved ranks named by rank-like tags in
styles no layer knows. Each strategy draws a Wrapper, which maps a log's lines to the lines a
reader gets behind it; a wrapper adds nothing a reader could take for the line's rank but what
the line's own prefixes said."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from faultloop.analyze.logsage.scan import split_prefix, unglue

Lines = list[str]
_HOSTS = st.sampled_from(
    [
        "node07",
        "gpu-node-12",
        "trainer-7d9f8b-x2k4p",
        "ip-10-0-3-17.ec2.internal",
        "worker_3",
        "dgx-a100-042",
        "10.0.4.21",
    ]
)
_LEVELS = st.sampled_from(["INFO", "info", "ERROR", "warning", "W", "E", "debug", "NOTICE"])
_SEPARATORS = st.sampled_from([" ", " | ", ": ", " - ", " > ", " :: ", "\t", "|"])
_STREAMS = st.sampled_from(["stdout", "stderr"])
# a tag must not read as a rank prefix or name a rank: only the rank wrapper names ranks
_NAMES_A_RANK = re.compile(r"(?i)rank|default|^[a-z]+\d+$|^[\d,]+$")


@dataclass(frozen=True)
class Wrapper:
    """A way a log reaches its reader: `describe` for the failure message, `wrap` the lines."""

    describe: str
    wrap: Callable[[Lines], Lines]

    def __call__(self, lines: Lines) -> Lines:
        return self.wrap(lines)


def _stamp(rnd: random.Random, style: int, i: int) -> str:
    """A timestamp of line i in one of the formats collectors and loggers print."""
    h, m, s, frac = 10 + i // 3600 % 10, i // 60 % 60, i % 60, rnd.randrange(10**6)
    return [
        f"2026-05-01T{h}:{m:02}:{s:02}.{frac:06}Z",
        f"May 01 {h}:{m:02}:{s:02}",
        f"01-May-2026 {h}:{m:02}:{s:02}",
        f"2026/05/01-{h}:{m:02}:{s:02}.{frac // 1000:03}",
        f"{1777629600 + i}.{frac:06}",
        f"{h}:{m:02}:{s:02}.{frac // 1000:03}",
        f"2026-05-01 {h}:{m:02}:{s:02} +0200",
    ][style]


def _tag_text(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.one_of(
                st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8),
                st.integers(0, 99999).map(str),
                st.sampled_from(["-", "_", ".", ":", "/", "#", "@", " ", "job", "svc", "app", "train", "c10d", "ctr"]),
            ),
            min_size=1,
            max_size=6,
        )
    )
    tag = "".join(parts).strip() or "tag"
    return tag if not _NAMES_A_RANK.search(tag) else f"t-{tag.replace('rank', 'rnk').replace('default', 'dflt')}x"


@st.composite
def bracket_tags(draw: st.DrawFn) -> Wrapper:
    """Random tags in brackets in front of every line: one fixed tag, or a new one each line (a
    request or trace id), in brackets, parentheses, angle brackets or braces."""
    opening, closing = draw(st.sampled_from(["[]", "()", "<>", "{}"]))
    tags = [_tag_text(draw) for _ in range(draw(st.integers(1, 3)))]
    per_line = draw(st.booleans())
    separator = draw(_SEPARATORS)
    seed = draw(st.integers(0, 2**32))

    def wrap(lines: Lines) -> Lines:
        rnd = random.Random(seed)
        out = []
        for line in lines:
            chosen = [f"{t}-{rnd.randrange(16**4):04x}" if per_line else t for t in tags]
            out.append("".join(f"{opening}{t}{closing}" for t in chosen) + separator + line)
        return out

    return Wrapper(f"tags {opening}{tags}{closing} per_line={per_line} sep={separator!r}", wrap)


@st.composite
def key_value_headers(draw: st.DrawFn) -> Wrapper:
    """`key=value` headers (logfmt's) in front of every line: a time, a level, a host, a component,
    ids; values quoted where they hold blanks."""
    keys = draw(
        st.lists(
            st.sampled_from(
                ["ts", "time", "level", "lvl", "host", "app", "job", "component", "caller", "pid", "stream"]
            ),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    host, level, stamp_style = draw(_HOSTS), draw(_LEVELS), draw(st.integers(0, 6))
    separator = draw(st.sampled_from([" ", " | ", ": ", " - "]))
    seed = draw(st.integers(0, 2**32))

    def value(key: str, rnd: random.Random, i: int) -> str:
        stamp = _stamp(rnd, stamp_style, i)
        return {
            "ts": f'"{stamp}"' if " " in stamp else stamp,
            "time": f'"{stamp}"' if " " in stamp else stamp,
            "level": level,
            "lvl": level.lower(),
            "host": host,
            "app": '"trainer job"',
            "job": f"j-{seed % 10**6}",
            "component": "torch.distributed",
            "caller": f"train.py:{rnd.randrange(1, 999)}",
            "pid": str(4000 + seed % 1000),
            "stream": "stderr",
        }[key]

    def wrap(lines: Lines) -> Lines:
        rnd = random.Random(seed)
        return [" ".join(f"{k}={value(k, rnd, i)}" for k in keys) + separator + line for i, line in enumerate(lines)]

    return Wrapper(f"key=value {keys} sep={separator!r}", wrap)


@st.composite
def host_tags(draw: st.DrawFn) -> Wrapper:
    """A node's, pod's or container's name in front of every line, in the forms collectors print."""
    host = draw(_HOSTS)
    form = draw(st.sampled_from(["{h} | ", "[{h}] ", "{h}> ", "<{h}> ", "{h} - ", "{h}: ", "{h}/trainer | ", "({h}) "]))
    return Wrapper(f"host {form.format(h=host)!r}", lambda lines: [form.format(h=host) + line for line in lines])


@st.composite
def json_records(draw: st.DrawFn) -> Wrapper:
    """Every line a JSON log record with the message in a field (docker's json-file `log` with its
    newline, a structured logger's `msg` or `message`), beside a time, a stream, a level, a host."""
    message_key = draw(st.sampled_from(["log", "msg", "message", "MESSAGE"]))
    extra = draw(st.lists(st.sampled_from(["time", "stream", "level", "host", "logger"]), max_size=4, unique=True))
    newline = message_key == "log"
    host, stamp_style, seed = draw(_HOSTS), draw(st.integers(0, 6)), draw(st.integers(0, 2**32))
    message_first = draw(st.booleans())

    def record(line: str, rnd: random.Random, i: int) -> str:
        fields = {
            "time": _stamp(rnd, stamp_style, i),
            "stream": "stderr",
            "level": "info",
            "host": host,
            "logger": "train",
        }
        others = {k: fields[k] for k in extra}
        message = {message_key: line + ("\n" if newline else "")}
        return json.dumps({**message, **others} if message_first else {**others, **message})

    def wrap(lines: Lines) -> Lines:
        rnd = random.Random(seed)
        return [record(line, rnd, i) for i, line in enumerate(lines)]

    return Wrapper(f"json {message_key} with {extra}", wrap)


@st.composite
def cri_lines(draw: st.DrawFn) -> Wrapper:
    """The CRI log format (containerd, CRI-O; `kubectl logs` on the node): `<RFC 3339 time> <stream> F `."""
    stream, seed = draw(_STREAMS), draw(st.integers(0, 2**32))

    def wrap(lines: Lines) -> Lines:
        rnd = random.Random(seed)
        return [
            f"2026-05-01T10:{i // 60 % 60:02}:{i % 60:02}.{rnd.randrange(10**9):09}Z {stream} F {line}"
            for i, line in enumerate(lines)
        ]

    return Wrapper(f"cri {stream}", wrap)


@st.composite
def journald_lines(draw: st.DrawFn) -> Wrapper:
    """journalctl's output formats (short, short-iso, short-precise, short-monotonic, short-full):
    a time, the host, the program and its pid."""
    style = draw(st.sampled_from(["short", "short-iso", "short-precise", "short-monotonic", "short-full"]))
    host, program = (
        draw(_HOSTS.filter(lambda h: not h[0].isdigit())),
        draw(st.sampled_from(["python3", "torchrun", "srun"])),
    )
    pid = draw(st.integers(100, 4_000_000))

    def stamp(i: int) -> str:
        m, s = i // 60 % 60, i % 60
        return {
            "short": f"May 01 10:{m:02}:{s:02}",
            "short-iso": f"2026-05-01T10:{m:02}:{s:02}+0200",
            "short-precise": f"May 01 10:{m:02}:{s:02}.{i % 10**6:06}",
            "short-monotonic": f"[{12345 + i}.{i % 10**6:06}]",
            "short-full": f"Fri 2026-05-01 10:{m:02}:{s:02} CEST",
        }[style]

    return Wrapper(
        f"journald {style}",
        lambda lines: [f"{stamp(i)} {host} {program}[{pid}]: {line}" for i, line in enumerate(lines)],
    )


_TORCH_RANK_RE = re.compile(r"^(\s*)\[rank(\d+)\]: ?")


@st.composite
def rank_tags(draw: st.DrawFn) -> Wrapper:
    """The corpus's ranks, interleaved as they are, named in styles no layer lists: torch's
    `[rankN]:` at a line's start (where no srun label stands, so it is the global rank) becomes a
    rank-like tag (`rank=N | `, `<rank N> `, `(rank:N) `, `{rank=N} `, a JSON record's `rank`)."""
    form = draw(
        st.sampled_from(["rank={r} | ", "<rank {r}> ", "(rank:{r}) ", "[worker rank={r}] ", "RANK {r} :: ", "json"])
    )

    def restyle(line: str) -> str:
        m = _TORCH_RANK_RE.match(line)
        if not m or split_prefix(line)[0].label is not None:
            return line
        rest, rank = line[m.end() :], int(m.group(2))
        if form == "json":
            return json.dumps({"rank": rank, "msg": m.group(1) + rest})
        return m.group(1) + form.format(r=rank) + rest

    return Wrapper(f"rank tags {form!r}", lambda lines: [restyle(line) for line in lines])


@st.composite
def words_in_front(draw: st.DrawFn) -> Wrapper:
    """Words no shape reads between a line's prefixes and the program's words (a tool's own tag,
    a file name and an arrow): the templates are found behind them."""
    lead = draw(st.sampled_from(["myjob >>> ", "train.out => ", "stdout ~ ", "app says: ", "worker log -> "]))

    def in_front(part: str) -> str:
        _, words = split_prefix(part)
        cut = len(part) - len(words)
        return part[:cut] + lead + part[cut:] if words.strip() else part

    def wrap(lines: Lines) -> Lines:  # (the program's lines a progress bar glued together each have them)
        return ["".join(in_front(part) for part in unglue(line)) for line in lines]

    return Wrapper(f"words in front {lead!r}", wrap)


WRAPPERS: dict[str, st.SearchStrategy[Wrapper]] = {
    "bracket tags": bracket_tags(),
    "key=value headers": key_value_headers(),
    "host and container tags": host_tags(),
    "JSON records": json_records(),
    "CRI framing": cri_lines(),
    "journald framing": journald_lines(),
    "rank tags": rank_tags(),
    "words in front": words_in_front(),
}


@st.composite
def stacked(draw: st.DrawFn) -> Wrapper:
    """Two wrappers, one inside the other (a collector's framing around a logger's header), a JSON
    record at most once."""
    inner_name = draw(st.sampled_from(sorted(WRAPPERS)))
    outers = sorted(name for name in WRAPPERS if name not in ("rank tags", "words in front", inner_name))
    inner, outer = draw(WRAPPERS[inner_name]), draw(WRAPPERS[draw(st.sampled_from(outers))])
    return Wrapper(f"{outer.describe} around {inner.describe}", lambda lines: outer(inner(lines)))

"""The prefilter: find the few lines worth a look in a log of any size, with their byte offsets.

Every rule's literal anchors are searched by ripgrep (SIMD multi-literal search) or GNU grep when
present, over several line-aligned byte ranges at once, else by bytes.find in Python over 8 MB
blocks. Hits come out in file order with their line numbers; nothing else is kept in memory.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from faultloop.analyze.logsage.rules import RULES

ANCHORS: tuple[str, ...] = tuple(sorted({a for rule in RULES for a in rule.anchors}))
CHUNK = 8 << 20
MIN_RANGE_BYTES = 64 << 20  # below this one grep does the whole file
_SENTINEL = b"\x01faultloop-logsage-range-end\x01"


@dataclass(slots=True)
class Hit:
    """A prefiltered line: where it is and what it says."""

    line: int
    offset: int
    text: str


def hits(path: Path, prefilter: str = "auto", jobs: int = 0, anchors: tuple[str, ...] = ANCHORS) -> Iterator[Hit]:
    """The lines of `path` holding an anchor (default: the rules'), in file order, read by the
    chosen prefilter."""
    tool = find_tool(prefilter)
    return scan_tool(path, tool, jobs, anchors) if tool else scan_python(path, anchors)


# A hit as the scan's loop takes it: (line, offset base, offset from the base as the prefilter printed
# it, text). The byte offset (base + int(...)) is parsed only for lines read in full: a flood's
# million repeats need none, and each is one object fewer to build than a Hit.
Row = tuple[int, int, str, str]
# Hits as the prefilter printed them, a block of its output at a time: (line base, offset base, lines
# `line:offset:text` as bytes, undecoded: a flood's repeats are recognised by their bytes alone).
Block = tuple[int, int, list[bytes]]


def rows(path: Path, prefilter: str = "auto", jobs: int = 0) -> Generator[Block]:
    """The rules' hits as blocks (rows_of reads them as rows). An external prefilter is running
    when this returns, so that it reads while the caller does other work (the census); close()
    stops it."""
    tool = find_tool(prefilter)
    if tool:
        return _started(_tool_blocks(path, tool, jobs, ANCHORS))
    return ((0, 0, [f"{hit.line}:{hit.offset}:{hit.text}".encode()]) for hit in scan_python(path))


def rows_of(blocks: Iterator[Block]) -> Iterator[Row]:
    """Blocks' lines as rows."""
    for line_base, start, lines in blocks:
        for raw in lines:
            yield row(line_base, start, raw)


def row(line_base: int, start: int, raw: bytes) -> Row:
    """One line of a block (`line:offset:text` as the prefilter printed it) as a row."""
    line_no, offset, text = raw.decode("utf-8", "replace").split(":", 2)
    return line_base + int(line_no), start, offset, text.rstrip("\r")


def _ere_escape(literal: str) -> str:
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", literal)


def _teddy_order(literals: tuple[str, ...]) -> list[str]:
    """The literals in the order ripgrep's SIMD search (Teddy, ripgrep 13 with 33 to 64 literals)
    costs least. The literals at places i, i + 16, i + 32, ... share one of its 16 buckets (one that
    shares an earlier literal's first three bytes' low nibbles joins that one's) and it stops at every
    byte whose two nibbles each match some literal of a bucket's at each of three places: literals
    with unlike bytes in one bucket make it stop at bytes none of them holds (the ten `N%|` in ten
    buckets made the 1 GB log a quarter slower). Sorted by their bytes, the literals fall into 16
    runs of neighbours (each run what one bucket's places can take), one run a bucket: a quarter
    less of ripgrep's time on an ordinary log than the places of issue 27's order."""
    ordered = sorted(literals, key=str.encode)
    sizes = [len(range(bucket, len(ordered), 16)) for bucket in range(16)]
    runs = [ordered[sum(sizes[:bucket]) : sum(sizes[: bucket + 1])] for bucket in range(16)]
    return [runs[place % 16][place // 16] for place in range(len(ordered))]


def _tool_command(tool: str, anchors: tuple[str, ...] = ANCHORS) -> list[str]:
    """A prefilter reading stdin and printing `line:byte offset:text` for lines with an anchor."""
    literals = (*anchors, _SENTINEL.decode())
    if Path(tool).name == "rg":  # ripgrep: SIMD multi-literal search (Teddy), several times grep's
        return [
            tool,
            "-a",
            "-n",
            "-b",
            "--no-heading",
            "--no-filename",
            "--no-config",
            "-F",
            *(f"--regexp={a}" for a in _teddy_order(literals)),
            "-",
        ]
    return [tool, "-a", "-n", "-b", "-E", "|".join(_ere_escape(a) for a in literals)]


def find_tool(prefilter: str) -> str | None:
    """The prefilter to run: ripgrep, else GNU grep (auto), or the named one; None: Python."""
    names = {"auto": ("rg", "grep"), "rg": ("rg",), "grep": ("grep",), "python": ()}[prefilter]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if prefilter in ("rg", "grep"):
        raise RuntimeError(f"prefilter {prefilter} is not installed")
    return None


def scan_tool(path: Path, tool: str, jobs: int = 0, anchors: tuple[str, ...] = ANCHORS) -> Iterator[Hit]:
    """An external prefilter (rg or grep) over `jobs` line-aligned byte ranges at once (_tool_blocks)."""
    return (
        Hit(line, base + int(within), text)
        for line, base, within, text in rows_of(_started(_tool_blocks(path, tool, jobs, anchors)))
    )


def _started(running: Generator[Block]) -> Generator[Block]:
    """_tool_blocks with its processes started (its first item says so)."""
    next(running)
    return running


def _tool_blocks(path: Path, tool: str, jobs: int, anchors: tuple[str, ...]) -> Generator[Block]:
    """An external prefilter's hits as blocks, over `jobs` line-aligned byte ranges (a block's offset
    base is its range's start), after a first item (0, 0, []) once every process has started.

    Each range but the last is fed to its own process through a pipe (sendfile: no copy in
    Python) and ends with a sentinel line whose number says how many lines the range had; the
    last one's process reads the file itself (a pipe costs its searcher about a third more).
    Outputs are read in range order, so hits come out in file order and nothing is buffered here."""
    size = path.stat().st_size
    jobs = jobs or min(4, os.cpu_count() or 1)
    bounds = _line_bounds(path, size, max(1, min(jobs, size // MIN_RANGE_BYTES)))
    env = {**os.environ, "LC_ALL": "C"}
    command = _tool_command(tool, anchors)
    ranges = []
    try:
        for start, end in itertools.pairwise(bounds):
            if end == size:  # the last range: the file itself, from the range's start
                with open(path, "rb") as rest:
                    rest.seek(start)
                    proc = subprocess.Popen(command, stdin=rest, stdout=subprocess.PIPE, env=env)
                feeder = None
            else:
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                assert proc.stdin is not None
                feeder = threading.Thread(target=_feed, args=(path, start, end, proc.stdin), daemon=True)
                feeder.start()
            assert proc.stdout is not None
            _grow_pipe(proc.stdout)
            ranges.append((start, proc, feeder))
        yield 0, 0, []
        line_base = 0
        for start, proc, feeder in ranges:
            assert proc.stdout is not None
            lines_in_range = 0
            for data in _output_blocks(proc.stdout):
                lines = data.split(b"\n")
                if _SENTINEL in data:  # (the range's last line; any line that holds only its text)
                    kept = []
                    for raw in lines:
                        line_no, _, text = raw.split(b":", 2)
                        if text.rstrip(b"\r") == _SENTINEL:
                            lines_in_range = int(line_no) - 1
                        else:
                            kept.append(raw)
                    lines = kept
                if lines:
                    yield line_base, start, lines
            rc = proc.wait()
            if feeder:
                feeder.join()
            if rc not in (0, 1):
                raise OSError(f"{tool} failed on {path} (exit {rc})")
            line_base += lines_in_range
    finally:
        for _, proc, _ in ranges:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout:
                proc.stdout.close()


def _output_blocks(stream: IO[bytes]) -> Iterator[bytes]:
    """A prefilter's output a megabyte at a time, cut at a line's end, without the last newline,
    undecoded (a flood prints a million lines: reading them one by one costs more; a line decodes
    alike either way, a newline never being part of a UTF-8 character)."""
    carry = b""
    while block := os.read(stream.fileno(), 1 << 20):
        data = carry + block
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield data[: cut - 1]
    if carry:
        yield carry


def _line_bounds(path: Path, size: int, parts: int) -> list[int]:
    """Byte offsets that cut the file into `parts` ranges, each starting at a line start."""
    bounds = [0]
    with open(path, "rb") as f:
        for i in range(1, parts):
            f.seek(size * i // parts)
            f.readline()
            pos = f.tell()
            if bounds[-1] < pos < size:
                bounds.append(pos)
    return [*bounds, size]


def _feed(path: Path, start: int, end: int, pipe: IO[bytes]) -> None:
    """Copy bytes [start, end) of the file into grep's stdin in the kernel, then the sentinel."""
    try:
        with open(path, "rb") as f:
            fd, out, offset = f.fileno(), pipe.fileno(), start
            while offset < end:
                sent = os.sendfile(out, fd, offset, min(end - offset, 1 << 30))
                if sent == 0:
                    break
                offset += sent
            f.seek(end - 1 if end else 0)
            newline = b"" if end == 0 or f.read(1) == b"\n" else b"\n"
        pipe.write(newline + _SENTINEL + b"\n")
    except BrokenPipeError:  # the reader stopped early
        pass
    finally:
        try:
            pipe.close()
        except BrokenPipeError:
            pass


def _grow_pipe(stream: IO[bytes]) -> None:
    """A bigger pipe lets later ranges' greps run ahead while earlier output is read (Linux)."""
    try:
        fcntl.fcntl(stream.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass


def scan_python(path: Path, literals: tuple[str, ...] = ANCHORS) -> Iterator[Hit]:
    """Pure-Python prefilter: per 8 MB block, bytes.find for each anchor (C speed, about twice a
    combined regex), then the hit lines in order, newlines counted only between hits."""
    anchors = [a.encode() for a in literals]
    line_no, base = 1, 0  # line number at offset `base`
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            data = carry + block
            if not data:
                return
            end = data.rfind(b"\n") + 1 if block else len(data)
            if end == 0:
                carry = data
                continue
            starts: set[int] = set()
            for anchor in anchors:
                i = data.find(anchor, 0, end)
                while i != -1:
                    line_start = data.rfind(b"\n", 0, i) + 1
                    starts.add(line_start)
                    stop = data.find(b"\n", i, end)
                    i = data.find(anchor, end if stop == -1 else stop + 1, end)
            counted = 0
            for start in sorted(starts):
                stop = data.find(b"\n", start, end)
                stop = end if stop == -1 else stop
                line_no += data.count(b"\n", counted, start)
                counted = start
                yield Hit(line_no, base + start, data[start:stop].rstrip(b"\r").decode("utf-8", "replace"))
            line_no += data.count(b"\n", counted, end)
            base += end
            carry = data[end:]
            if not block:
                return

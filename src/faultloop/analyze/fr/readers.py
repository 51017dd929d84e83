"""Reading dumps in reader processes, each dump under its own CPU-time bound.

Some pickles of plain values cost stack or time in C code that nothing short of simulating
them foresees, and that cannot be interrupted: a dict key that is a tuple nested 300,000 deep
overflows the C stack when the unpickler hashes it (a 300 KB file); one built of shared halves,
(t, t) forty times over, hashes 2**40 times (207 bytes); integer keys chosen to share a hash
make a dict quadratic (30,000 of them, 390 KB: 29 s). So dumps are read in forked reader
processes, and before each dump its reader's CPU time is limited to `reading.cpu_bound` of the
dump's size (RLIMIT_CPU, whose SIGXCPU ends the reader). A reader that dies is the refusal of the
dump it was reading, one line naming the file and why, and a fresh reader goes on with the rest.
Readers take chunks of dumps as they finish their last, so a slow core holds up one chunk at most.
"""

from __future__ import annotations

import faulthandler
import math
import os
import pickle
import resource
import signal
import sys
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from typing import Any, TypeVar

from faultloop.analyze.fr.reading import MAX_DUMP_BYTES, cpu_bound
from faultloop.analyze.running import exit_reason

R = TypeVar("R")
# Dumps a reader is given at a time: few enough to balance the readers, enough that the
# parent's messages cost nothing beside reading.
CHUNK = 16


@dataclass(slots=True)
class _Reader:
    pid: int
    conn: Connection
    pending: deque[int] = field(default_factory=deque)  # indices sent, not yet answered, in order


@dataclass(slots=True)
class _Failure:
    """`read` raised in a reader (not a refusal: the process's memory limit, a fault): raised again
    in the caller, the reader's traceback in its notes."""

    error: BaseException


def cpu_seconds(path: str) -> float:
    """CPU seconds a reader may spend on `path`: `reading.cpu_bound` of its size."""
    try:
        size = min(os.stat(path).st_size, MAX_DUMP_BYTES)
    except OSError:
        size = 0
    return cpu_bound(size)


def read_each(
    paths: Sequence[str], read: Callable[[str], R], refuse: Callable[[str, str], R], workers: int
) -> Iterator[R]:
    """`read(path)` for each path in at most `workers` reader processes, yielded in the order of
    `paths`; a dump whose reader died is `refuse(path, why)`. `read` answers every dump itself,
    its own refusals included."""
    todo = deque(list(range(start, min(start + CHUNK, len(paths)))) for start in range(0, len(paths), CHUNK))
    done: dict[int, R] = {}
    readers: dict[Connection, _Reader] = {}
    emitted = 0
    try:
        while emitted < len(paths):
            while todo and len(readers) < max(1, workers):
                reader = _start(paths, read, readers)
                readers[reader.conn] = reader
                _give(reader, todo.popleft())
            ready = wait(list(readers))
            for reader in [reader for conn, reader in readers.items() if conn in ready]:
                try:
                    index, item = reader.conn.recv()
                except (EOFError, OSError):  # it died on the first dump it had not answered
                    del readers[reader.conn]
                    index = reader.pending.popleft()
                    done[index] = refuse(paths[index], _why(paths[index], _reap(reader)))
                    if reader.pending:
                        todo.appendleft(list(reader.pending))
                    continue
                reader.pending.popleft()
                if isinstance(item, _Failure):
                    raise item.error
                done[index] = item
                if not reader.pending:
                    if todo:
                        _give(reader, todo.popleft())
                    else:
                        del readers[reader.conn]
                        _send(reader, None)
                        _reap(reader)
            while emitted in done:
                yield done.pop(emitted)
                emitted += 1
    finally:
        for reader in readers.values():  # stopped early (an error, a consumer that stopped)
            os.kill(reader.pid, signal.SIGKILL)
            _reap(reader)


def _give(reader: _Reader, chunk: list[int]) -> None:
    reader.pending.extend(chunk)
    _send(reader, chunk)


def _send(reader: _Reader, message: list[int] | None) -> None:
    try:
        reader.conn.send(message)
    except OSError:  # it was killed from outside (the kernel's OOM killer): its EOF tells
        pass


def _reap(reader: _Reader) -> int:
    reader.conn.close()
    _, status = os.waitpid(reader.pid, 0)
    return os.waitstatus_to_exitcode(status)


def _why(path: str, code: int) -> str:
    if code == -signal.SIGXCPU:
        return f"{path}: refused: took more than {cpu_seconds(path):.3g} s of CPU time to read (its time bound)"
    return f"{path}: refused: its reader {'was ' if code < 0 else ''}{exit_reason(code)} while reading it"


def _start(paths: Sequence[str], read: Callable[[str], Any], readers: dict[Connection, _Reader]) -> _Reader:
    parent_end, child_end = Pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the reader's coverage is not collected
        code = 0
        try:
            parent_end.close()
            for other in readers:  # so that each reader sees its parent go
                other.close()
            _serve(child_end, paths, read)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    child_end.close()
    return _Reader(pid, parent_end)


def _serve(conn: Connection, paths: Sequence[str], read: Callable[[str], Any]) -> None:
    """The reader: chunks of indices in, one answer per dump out, each dump under its CPU bound."""
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    faulthandler.disable()  # a reader's crash is a dump's refusal, not a fault to trace
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    while (chunk := conn.recv()) is not None:
        for index in chunk:
            usage = resource.getrusage(resource.RUSAGE_SELF)  # RLIMIT_CPU counts whole seconds
            soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_seconds(paths[index]))
            resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
            try:
                answer = read(paths[index])
            except Exception as exc:
                exc.add_note(f"in the reader of {paths[index]}:\n{traceback.format_exc()}")
                answer = _Failure(exc)
            try:
                conn.send((index, answer))
            except (pickle.PicklingError, TypeError, AttributeError):  # an error that does not pickle
                conn.send((index, _Failure(RuntimeError(f"reading {paths[index]} failed: {answer}"))))

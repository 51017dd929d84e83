"""A memory limit per process for analyzers that read untrusted files (logs, flight-recorder dumps).

A hostile or broken input must not take the machine: each log or FR analyzer's attempt on a cell
runs in a forked child under an address-space limit (RLIMIT_AS, inherited by every program it
starts, so ripgrep, torchfrtrace, NVRx's tools and a user's command are held too). Going over is
that analyzer's recorded failure for the cell, with the limit named; the workflow and the other
analyzers carry on.

The limit is `FAULTLOOP_ANALYZER_MEMORY_GB` (GiB; 0 turns it off), by default 16 GiB or three
quarters of the machine's memory where that is less.
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faultloop.analyze.running import Outcome

ENV = "FAULTLOOP_ANALYZER_MEMORY_GB"
DEFAULT_BYTES = 16 << 30
# How running out shows in a failure or the tail of a program's stderr (Python, C++, the loader).
_OUT_OF_MEMORY = ("MemoryError", "std::bad_alloc", "failed to map segment", "Cannot allocate memory")


def memory_limit() -> int | None:
    """The limit in bytes from the environment or the default; None when turned off."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            gib = float(text)
        except ValueError:
            raise ValueError(f"{ENV}={text!r}: expected a number of GiB (0: no limit)") from None
        return int(gib * (1 << 30)) if gib > 0 else None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return DEFAULT_BYTES
    return min(DEFAULT_BYTES, physical * 3 // 4)


def describe(limit: int) -> str:
    return f"{limit / (1 << 30):g} GiB"


def over_limit(limit: int) -> str:
    return f"went over its memory limit of {describe(limit)} ({ENV})"


def limit_this_process(limit: int) -> None:
    """Hold this process, and every process it starts afterwards, to `limit` bytes of address space."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextmanager
def held_to(limit: int | None) -> Iterator[None]:
    """This process, and what it starts meanwhile, under `limit` (None: as it is) for the block
    only: a caller that runs a command's main in its own process (a test, a notebook) gets its
    address space back, so a browser or a JIT it starts later is not held to an analyzer's limit."""
    before = resource.getrlimit(resource.RLIMIT_AS)
    if limit is not None:
        limit_this_process(limit)
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def _child(attempt: Callable[[], Outcome], limit: int, write_fd: int) -> None:
    """In the forked child: the attempt under the limit, its outcome pickled to the parent."""
    from faultloop.analyze.running import TAIL_CHARS, Outcome  # (as run_limited's import)

    try:
        limit_this_process(limit)
        outcome = attempt()
        said = f"{outcome.error} {outcome.stderr_tail[-300:]}"
        if outcome.error and any(sign in said for sign in _OUT_OF_MEMORY):
            outcome.error = f"{outcome.error}: {over_limit(limit)}"
        payload = pickle.dumps(outcome)
    except BaseException as exc:  # whatever happens, the parent gets an outcome
        error = over_limit(limit) if isinstance(exc, MemoryError) else f"crashed: {type(exc).__name__}: {exc}"
        try:
            payload = pickle.dumps(Outcome(None, "", None, error, traceback.format_exc()[-TAIL_CHARS:], 0.0))
        except BaseException:
            payload = b""
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(payload)


def run_limited(attempt: Callable[[], Outcome], limit: int | None = None) -> Outcome:
    """Run one analyzer attempt in a forked child under the memory limit (`memory_limit()` when
    not given); the child's outcome, or a failure naming the limit when the child died."""
    # here, not at the top: `faultloop logsage` holds itself to the limit before it starts ripgrep,
    # and the records of analyzer runs (and their contracts) are not what it needs first
    from faultloop.analyze.running import Outcome, exit_reason

    limit = memory_limit() if limit is None else limit
    if limit is None:
        return attempt()
    start = time.perf_counter()
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        os.close(read_fd)
        code = 0
        try:
            _child(attempt, limit, write_fd)
        except BaseException:
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if payload:
        outcome: Outcome = pickle.loads(payload)  # our own child's outcome, not an input file
        return outcome
    reason = exit_reason(os.waitstatus_to_exitcode(status))
    error = f"its process {reason} before it answered (memory limit {describe(limit)})"
    return Outcome(None, "", None, error, "", time.perf_counter() - start)

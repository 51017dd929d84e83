"""Running a reader of untrusted input in a child process and holding it to stated bounds.

`run_bounded` starts a fresh interpreter for a list of files; `in_child` forks one per input
(for property-based tests). The child measures itself (`resource.getrusage(RUSAGE_SELF).ru_maxrss`
before and after the work; `in_child` also the processes it started, FR's dump readers) and runs
under an address-space limit, so a regression fails the test instead of taking the machine; the
parent enforces the time bound with a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings

SRC = str(Path(__file__).resolve().parents[1] / "src")
CHILD_ADDRESS_SPACE = 3 << 30  # a backstop for the test machine, far above any bound below

_CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
{setup}
results = []
for path in sys.argv[1:]:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        outcome = "ok:" + str({call}(path))
    except {refusals} as exc:
        outcome = "refused:" + type(exc).__name__ + ": " + str(exc)
    results.append({{
        "path": path,
        "outcome": outcome,
        "seconds": time.perf_counter() - start,
        "grew_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
    }})
print(json.dumps(results))
"""


@dataclass
class Result:
    path: str
    outcome: str  # "ok:<what the call returned>" or "refused:<exception>: <message>"
    seconds: float
    grew_kib: int  # growth of the child's peak RSS during this input


def run_bounded(setup: str, call: str, refusals: str, paths: list[Path], timeout_s: float) -> list[Result]:
    """Run `call(path)` for each path in one fresh child (after `setup`, which imports and warms
    up); anything but a result or one of `refusals` fails the child, and so the test."""
    code = _CHILD.format(limit=CHILD_ADDRESS_SPACE, setup=setup, call=call, refusals=refusals)
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [Result(**r) for r in json.loads(proc.stdout)]


@dataclass
class ChildOutcome:
    outcome: str  # what `work` returned, or "crashed: <exception>" / "killed: <why>"
    seconds: float
    grew_kib: int  # growth of the peak RSS of the child, or of a process it started, while it ran `work`


def _virtual_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) << 10
    return 0


def in_child(work: Callable[[], str], *, memory_bytes: int, timeout_s: float) -> ChildOutcome:
    """Run `work` in a forked child (milliseconds, so one per Hypothesis example) whose address
    space may grow by at most `memory_bytes`; it measures its own time and peak RSS. A child
    past `timeout_s` is killed, and the outcome says so."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        try:
            limit = _virtual_size() + memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            start = time.perf_counter()
            try:
                outcome = work()
            except BaseException as exc:
                outcome = f"crashed: {type(exc).__name__}: {exc}"[:2000]
            seconds = time.perf_counter() - start
            grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
            # a process it started (a dump reader) begins with its RSS: what it grew is its peak less that
            grew = max(grew, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss - before)
            payload = json.dumps({"outcome": outcome, "seconds": seconds, "grew_kib": grew}).encode()
            os.write(write_fd, payload)
        finally:
            os._exit(0)
    os.close(write_fd)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return ChildOutcome(f"killed: ran past {timeout_s} s", timeout_s, 0)
        time.sleep(0.002)
    with os.fdopen(read_fd, "rb") as pipe:
        payload = pipe.read()
    if not payload:
        return ChildOutcome(f"killed: the child ended with status {status} and no outcome", 0.0, 0)
    return ChildOutcome(**json.loads(payload))


def fuzz_settings(*, suite_examples: int, cost: int = 1) -> settings:
    """Hypothesis's settings for a fuzz test: `suite_examples` per property in the suite,
    deterministic and offline; FAULTLOOP_FUZZ_EXAMPLES more (`make fuzz`; divided by `cost`, what
    one example costs against one of the byte fuzzers), then with fresh randomness and the example
    database. The time bound is the child's, not Hypothesis's."""
    fuzz = os.environ.get("FAULTLOOP_FUZZ_EXAMPLES")
    examples = max(suite_examples, int(fuzz) // cost) if fuzz else suite_examples
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=fuzz is None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None if fuzz is None else settings.default.database,
    )

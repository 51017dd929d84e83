"""Running a reader of untrusted input in a child process and holding it to stated bounds.

The child measures itself (`resource.getrusage(RUSAGE_SELF).ru_maxrss` before and after the work)
and runs under an address-space limit, so a regression fails the test instead of taking the
machine; the parent enforces the time bound with a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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

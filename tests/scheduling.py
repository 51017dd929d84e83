"""How the suite spreads over pytest-xdist's workers (`make test` runs `-n 2`).

A test module is one unit of work (`--dist loadscope`): its tests run on one worker, in order, so a
module-scoped fixture (a module's real jobs, a workflow copy its tests take turns on) is built once,
and a test added to a module later shares it the same way. (xdist's finer `loadgroup` relies on
renaming node ids, which pytest 9 no longer allows: its groups are silently ignored.) Fixtures
shared across modules must hold across processes: `slurm_fixture.slurm_cluster` does, through a
lock file; `conftest.gloo_hang` is built at most once per worker.

A worker takes the next module in the queue when it is nearly done with its own, so the longest
modules go first (the longest-first rule of list scheduling) and the quick ones fill the other
worker around them at the end; xdist keeps that order (`--no-loadscope-reorder`). The longest are
named in LONGEST, in the order of their measured times (benchmarks/README.md, "The test suite");
other modules that hold `slow` tests (real jobs, services) follow, most slow tests first. One test
runs per worker at a time, so at most two real-job tests run at once on two workers.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

# longest first, as they ran in the whole suite (the 20 slowest it prints, and each module alone:
# benchmarks/README.md); a module that grows long joins this list at its place
LONGEST = (
    "tests/run/test_slurm.py",
    "tests/loop/test_interruptions.py",
    "tests/analyze/test_logsage_metamorphic.py",
    "tests/loop/test_loop.py",
    "tests/run/test_workload.py",
    "tests/run/test_cluster_faults.py",
    "tests/analyze/test_logsage_ablation.py",
    "tests/run/test_fw_exits.py",
    "tests/run/test_fw_ray_train.py",
    "tests/adopt/test_adopt.py",
    "tests/run/test_life_jobs.py",
    "tests/run/test_fw_lightning.py",
    "tests/loop/test_analyzers_loop.py",
)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a serial run keeps the files' order
    slow = Counter(_module(item) for item in items if item.get_closest_marker("slow"))
    order = [*LONGEST, *(module for module, _ in slow.most_common() if module not in LONGEST)]
    rank = {module: i for i, module in enumerate(order)}
    items.sort(key=lambda item: rank.get(_module(item), len(rank)))  # stable: each module keeps its order

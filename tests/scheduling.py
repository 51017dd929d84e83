"""How the suite spreads over pytest-xdist's workers (`make test` runs `-n 2`).

A test module is one unit of work (`--dist loadscope`): its tests run on one worker, in order, so a
module-scoped fixture (a module's real jobs, a workflow copy its tests take turns on) is built once,
and a test added to a module later shares it the same way. (xdist's finer `loadgroup` relies on
renaming node ids, which pytest 9 no longer allows: its groups are silently ignored.) Fixtures
shared across modules must hold across processes: `slurm_fixture.slurm_cluster` does, through a
lock file; `conftest.gloo_hang` is built at most once per worker.

On a worker, the modules that hold `slow` tests (real jobs, services) come first, most slow tests
first, so they start at once and the quick modules fill the other worker around them; xdist keeps
that order (`--no-loadscope-reorder`). One test runs per worker at a time, so at most two real-job
tests run at once on two workers.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a serial run keeps the files' order
    slow = Counter(_module(item) for item in items if item.get_closest_marker("slow"))
    rank = {module: i for i, (module, _) in enumerate(slow.most_common())}
    items.sort(key=lambda item: rank.get(_module(item), len(rank)))  # stable: each module keeps its order

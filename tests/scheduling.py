"""How the suite spreads over pytest-xdist's workers (`make test` runs `-n 2 --dist loadgroup`).

Tests that share an expensive fixture must run on one worker, or every worker would build its own
copy (a module's real jobs run twice, two workers start the one SLURM cluster). So a test gets an
`xdist_group` from what it uses, never from a list of names, and a test added later is grouped the
same way:

- a fixture of the tests' own with module or class scope: the module is one group (its real jobs,
  its workflow copy that the tests take turns on);
- one with session or package scope: one group per fixture, across modules;
- the `slurm` mark: the `slurm_cluster` group, so the one cluster of this machine serves one test
  at a time (the dry runs beside it, on the repository's own .snakemake/, included).

On a worker, the tests of groups that hold a `slow` test (real jobs, services) come first, biggest
first, so they start at once and the quick tests fill the other worker around them; xdist keeps that
order (`--no-loadscope-reorder`). At most one test runs per worker, so at most two real-job tests
run at once on the two workers.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SHARED_SCOPES = {"module", "class", "package", "session"}
SLURM_GROUP = "slurm_cluster"


def _own_fixture(fixturedef) -> bool:
    """Defined in this test tree (pytest's and plugins' fixtures such as tmp_path_factory are cheap)."""
    return Path(fixturedef.func.__code__.co_filename).resolve().is_relative_to(TESTS)


def group_of(item: pytest.Item) -> str | None:
    """The xdist group a test must share with the other users of its expensive fixtures, if any."""
    if item.get_closest_marker("slurm"):
        return SLURM_GROUP
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    if fixtureinfo is None:
        return None
    session_wide, module_wide = [], False
    for name in item.fixturenames:
        defs = fixtureinfo.name2fixturedefs.get(name)
        if not defs or not _own_fixture(defs[-1]) or defs[-1].scope not in SHARED_SCOPES:
            continue
        if defs[-1].scope in {"session", "package"}:
            session_wide.append(name)
        else:
            module_wide = True
    if session_wide:
        return sorted(session_wide)[0]
    return item.nodeid.split("::", 1)[0] if module_wide else None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        if group := group_of(item):
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a serial run keeps the files' order
    # slow groups first (by their count of slow tests), then slow singletons, then the rest as collected
    slow = Counter(groups.get(item.nodeid, item.nodeid) for item in items if item.get_closest_marker("slow"))
    order = {unit: rank for rank, (unit, _) in enumerate(slow.most_common())}
    items.sort(key=lambda item: order.get(groups.get(item.nodeid, item.nodeid), len(order)))

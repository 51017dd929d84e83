"""How many real training jobs the test processes of one session run at once, all workers together.

A module that starts several jobs side by side (test_workload's and test_cluster_faults' cells) takes
one slot per job. Two such modules on two xdist workers would otherwise run ten jobs of four ranks on
two cores, and jobs past their 200 s limit end TIMEOUT instead of failing the way their fault
dictates. JOB_SLOTS is what the suite ran at most before it ran in parallel (one module's six).

The slots are lock files in the session's temporary folder, shared by its workers; a lock is
released when its holder ends, however it ends.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

JOB_SLOTS = 6


class JobSlots:
    def __init__(self, folder: Path) -> None:
        self.paths = [folder / f"job-slot-{i}.lock" for i in range(JOB_SLOTS)]

    @contextmanager
    def held(self) -> Iterator[None]:
        """Wait for a free slot and hold it while the block runs one job."""
        while True:
            for path in self.paths:
                with open(path, "a") as handle:
                    try:
                        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    yield
                    return
            time.sleep(0.2)


@pytest.fixture(scope="session")
def job_slots(tmp_path_factory: pytest.TempPathFactory) -> JobSlots:
    base = tmp_path_factory.getbasetemp()
    return JobSlots(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)

"""The machine's one SLURM test cluster (scripts/slurm-cluster.sh) as a session fixture that holds
under pytest-xdist: whichever test process needs it first starts it, the last one done with it
stops it, and a cluster that was already up (a developer's, or one started before pytest) is left
running.

The processes agree through one lock file beside the cluster's folder: each holds it shared while
it uses the cluster, and takes it exclusively only to start a cluster that is down or to find out,
at the end, that it is the last user (a non-blocking exclusive lock succeeds only when no other
process holds it). So two xdist workers, or two pytest sessions, may both use it, and neither
stops it under the other's test.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "scripts" / "slurm-cluster.sh"
SLURM_DIR = Path(os.environ.get("FAULTLOOP_SLURM_DIR", "/tmp/faultloop-slurm"))
USERS_LOCK = SLURM_DIR.with_name(SLURM_DIR.name + ".users.lock")
# Written by the fixture that started the cluster; the last user stops only a cluster that has it.
STARTED_BY_TESTS = SLURM_DIR.with_name(SLURM_DIR.name + ".started-by-tests")


def cluster_is_up() -> bool:
    return subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, timeout=60).returncode == 0


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """Start the loopback cluster (unless one is already up) and stop it only if a test started it
    and no other test process still uses it."""
    if not Path("/usr/sbin/slurmctld").exists():
        pytest.skip("slurmctld is not installed: run `bash scripts/slurm-cluster.sh install` (make test does)")
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster needs root (daemons run as SlurmUser=root)")
    with open(USERS_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # a user: the cluster stays up while any process holds this
        if not cluster_is_up():
            fcntl.flock(lock, fcntl.LOCK_EX)  # waits until no process uses it, then starts it alone
            if not cluster_is_up():
                STARTED_BY_TESTS.touch()
                subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=120)
            fcntl.flock(lock, fcntl.LOCK_SH)
        yield SLURM_DIR
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # another test process still uses it; the last one stops it
        if STARTED_BY_TESTS.exists():
            subprocess.run(["bash", str(CLUSTER), "stop"], timeout=120)
            STARTED_BY_TESTS.unlink()

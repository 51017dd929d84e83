"""The chaos harness (benchmarks/chaos.py) on a small pool: ten seeded interruptions of Snakemake, a
launcher, a rank or an analysis job (kill -9, SIGTERM, Ctrl-C's SIGINT), each followed by a plain
rerun, lose, corrupt and re-run nothing, leave nothing behind (HOST_OOM's cell puts its ranks in
memory cgroups, which must go too) and score as a clean run does. The benchmark runs fifty
(benchmarks/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

FAILURES = ("lost", "corrupt", "rerun", "refused", "left", "differ")


def test_ten_seeded_interruptions_lose_corrupt_and_rerun_nothing(tmp_path):
    record = tmp_path / "chaos.json"
    command = [
        sys.executable, str(REPO / "benchmarks" / "chaos.py"), "--interruptions", "10", "--seed", "4",
        "--pool", "WORKLOAD_EXC:0:3:1 HOST_OOM:1:3:1", "--max-delay-s", "3",
        "--workdir", str(tmp_path / "work"), "--json", str(record),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    said = result.stdout + result.stderr[-5000:]
    assert record.is_file(), said
    counts = json.loads(record.read_text())
    assert counts["interruptions"] >= 10, said
    assert {k: counts[k] for k in FAILURES} == dict.fromkeys(FAILURES, 0), said
    assert result.returncode == 0, said
    assert "lost 0, corrupt 0, re-run 0, refused 0, left 0, differ 0" in result.stdout
    # Seed 4 draws every kind of target and every signal (the draws do not depend on timing);
    # each was a real signal to a real process, and plain reruns followed.
    assert {e["target"] for e in counts["log"]} == {"snakemake", "launcher", "rank", "analysis"}
    assert {e["signal"] for e in counts["log"]} == {"SIGKILL", "SIGTERM", "SIGINT"}
    assert counts["runs"] > counts["rounds"] and all(event["pid"] > 0 for event in counts["log"])

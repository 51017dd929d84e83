"""logsage on the logs of the faults clusters see (config/pools/cluster.tsv), as the built-in
workload left them: one cell per fault at one node (middle rank) and at two nodes (rank 0), from
a preset run, markers stripped, the checkout's path and the caller's cgroup prefix replaced.
The real jobs themselves run in tests/run/test_cluster_faults.py (slow)."""

from __future__ import annotations

import csv
import gzip

import pytest

from conftest import TESTS
from faultloop.analyze import logsage
from faultloop.faults import FAULTS

CORPUS = TESTS / "data" / "logs" / "cluster_faults"
with open(CORPUS / "truth.tsv") as handle:
    CASES = list(csv.DictReader(handle, delimiter="\t"))


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
@pytest.mark.parametrize("prefilter", ["python", "auto"])
def test_restart_sole_culprit_category_and_fault(case: dict[str, str], prefilter: str) -> None:
    lines = gzip.decompress((CORPUS / case["file"]).read_bytes()).decode().splitlines()
    fault = FAULTS[case["fault"]]
    v = logsage.analyze_log(lines, logsage.Settings(prefilter=prefilter))
    assert (v.restart, v.primary_ranks, v.fault_category, v.fault_type) == (
        fault.restart,
        [int(case["rank"])],
        fault.category,
        fault.name,
    ), v.detail


def test_a_desync_of_two_ranks_names_no_culprit() -> None:
    """Of two ranks waiting in different collectives neither is the odd one out: a desync, STOP,
    nobody named (the two-node DESYNC log with every rank but two cut away)."""
    case = next(c for c in CASES if c["fault"] == "DESYNC" and c["nodes"] == "2")
    lines = gzip.decompress((CORPUS / case["file"]).read_bytes()).decode().splitlines()
    two = [line for line in lines if not any(f"[rank{r}]" in line for r in range(2, 8))]
    v = logsage.analyze_log(two)
    assert (v.restart, v.fault_category, v.fault_type) == (FAULTS["DESYNC"].restart, "hang", "DESYNC")
    assert v.primary_ranks == [], v.detail

"""The five faults faultloop added (faults.CLUSTER_FAULT_NAMES): rows of the one fault table beside
upstream's twelve, the cluster preset that runs them, and planning's refusal of them for a site
workload that has not declared them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from faultloop.faults import CLUSTER_FAULT_NAMES, FAULT_NAMES, FAULTS, NETWORK, OOM, OTHER, RESTART, STOP
from faultloop.plan import config
from faultloop.plan.pool import Cell, PoolError, load_pool

ADDED = ("DESYNC", "NET_DROP", "HOST_OOM", "NAN_LOSS", "STORAGE_FULL")


def test_the_rows_sit_after_upstreams_twelve() -> None:
    assert len(FAULT_NAMES) == 12 and FAULT_NAMES[-1] == "SIGSTOP"
    assert CLUSTER_FAULT_NAMES == ADDED and tuple(FAULTS) == FAULT_NAMES + ADDED
    assert len({f.value for f in FAULTS.values()}) == len(FAULTS)
    expect = {
        "DESYNC": ("hang", STOP),
        "NET_DROP": (NETWORK, RESTART),
        "HOST_OOM": (OOM, STOP),
        "NAN_LOSS": ("exception", STOP),
        "STORAGE_FULL": (OTHER, STOP),
    }
    assert {n: (FAULTS[n].category, FAULTS[n].restart) for n in ADDED} == expect


def test_the_cluster_preset_runs_each_at_one_and_two_nodes_on_a_middle_rank_and_rank_0() -> None:
    cells = load_pool(pool_file=REPO / "config" / "pools" / "cluster.tsv", gpus_per_node=4)
    assert cells == [Cell(fault, rank, 5, nodes) for fault in ADDED for nodes, rank in ((1, 2), (1, 0), (2, 4), (2, 0))]


def _site_settings(tmp_path: Path, pool: str, faults: list[str] | None) -> dict:
    site = tmp_path / "site.yaml"
    entry = {"script": "workflow/workloads/llama4_scout.sh", "min_nodes": 2}
    site.write_text(
        yaml.safe_dump({"workloads": {"llama4_scout": {**entry, **({"faults": faults} if faults else {})}}})
    )
    return config.load({"workload": "llama4_scout", "pool": pool, "site_file": str(site)})


def test_a_site_workload_refuses_an_undeclared_fault_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(PoolError) as refused:
        config.pool_cells(_site_settings(tmp_path, "HOST_OOM:1:5:2 SIGKILL:1:5:2 NAN_LOSS:0:5:2", None))
    problems = refused.value.problems
    assert len(problems) == 2 and all(len(p.splitlines()) == 1 for p in problems)
    assert "llama4_scout does not inject HOST_OOM" in problems[0] and "workloads.llama4_scout.faults" in problems[0]
    assert "NAN_LOSS" in problems[1]
    cells = config.pool_cells(_site_settings(tmp_path, "HOST_OOM:1:5:2 SIGKILL:1:5:2", ["HOST_OOM"]))
    assert [c.fault_type for c in cells] == ["HOST_OOM", "SIGKILL"]


def test_the_builtin_workload_injects_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    pool = " ".join(f"{name}:0:5:1" for name in FAULTS)
    assert len(config.pool_cells(config.load({"pool": pool}))) == len(FAULTS)

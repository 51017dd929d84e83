"""The matrix: a cell's workload and launcher in the pool (TSV columns, a token's `@` suffix), in
its name, and refused at planning, one line naming the row, when they cannot run it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from faultloop.core.cell import Cell, cell_name_pattern, run_name_pattern
from faultloop.frameworks import CPU_RUNS, FRAMEWORKS
from faultloop.plan.pool import PoolError, load_pool, read_pool_file, write_pool_file
from faultloop.run.matrix import refuser

CELLS = [
    Cell("SIGKILL", 1, 3, 2),
    Cell("GPU_ERROR", 1, 3, 2, 3, "hf_trainer", "mpirun_tagged"),
    Cell("SIGKILL", 0, 3, 1, 1, "", "mpirun"),
    Cell("SIGKILL", 0, 3, 1, 2, "lightning", ""),
]


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: c.name)
def test_a_cells_name_carries_its_workload_and_launcher_and_reads_back(cell: Cell) -> None:
    assert Cell.from_name(cell.name) == cell
    assert re.fullmatch(cell_name_pattern(), cell.name) and re.fullmatch(run_name_pattern(), f"{cell.name}/attempt_2")
    assert re.fullmatch(r"[\w.-]+", cell.name)  # a folder name and a Snakemake wildcard value


def test_a_cell_of_the_sessions_workload_and_launcher_keeps_upstreams_name() -> None:
    assert Cell("SIGKILL", 1, 3, 2).name == "n2_SIGKILL_r1_i3"
    assert Cell("SIGKILL", 1, 3, 2, 1, "hf_trainer", "mpirun").name == "n2_SIGKILL_r1_i3_w-hf_trainer_l-mpirun"
    with pytest.raises(ValueError, match="_w-<WORKLOAD>"):
        Cell.from_name("n2_SIGKILL_r1_i3_w-Lightning")


def test_tsv_columns_and_tokens_give_the_same_cells_and_the_sessions_is_no_suffix(tmp_path: Path) -> None:
    tsv = tmp_path / "pool.tsv"
    tsv.write_text(
        "FAULT_TYPE\tRANK\tITER\tNODES\tWORKLOAD\tLAUNCHER\n"
        "SIGKILL\t1\t3\t2\t-\t-\n"
        "SIGKILL\t1\t3\t2\tcpu_gloo\tmpiexec\n"
        "SIGKILL\t1\t3\t2\tcpu_gloo\ttorchrun\n"  # the session's, spelled out: the first cell again
    )
    with pytest.raises(PoolError, match="line 4: duplicate cell SIGKILL:1:3:2"):
        load_pool(pool_file=tsv, gpus_per_node=2)
    tsv.write_text("\n".join(tsv.read_text().splitlines()[:3]) + "\n")
    from_file = load_pool(pool_file=tsv, gpus_per_node=2)
    from_spec = load_pool(pool_spec="SIGKILL:1:3:2 SIGKILL:1:3:2@cpu_gloo/mpiexec", gpus_per_node=2)
    assert from_file == from_spec == [Cell("SIGKILL", 1, 3, 2), Cell("SIGKILL", 1, 3, 2, 1, "", "mpiexec")]
    assert [c.spec for c in from_spec] == ["SIGKILL:1:3:2", "SIGKILL:1:3:2@/mpiexec"]
    out = tmp_path / "out.tsv"
    write_pool_file(from_file, out)
    assert out.read_text().splitlines()[0] == "FAULT_TYPE\tRANK\tITER\tNODES\tLAUNCHER"
    assert load_pool(pool_file=out, gpus_per_node=2) == from_file


def test_a_framework_named_alone_runs_under_the_sessions_launcher_where_it_can_else_its_own() -> None:
    # a framework without the session's launcher (torchrun) among its own, where the table has one
    own = next((f for f in FRAMEWORKS.values() if "torchrun" not in f.launchers), None)
    tokens = "SIGKILL:1:3:2@lightning" + (f" SIGKILL:1:3:2@{own.name}" if own else "")
    cells = load_pool(pool_spec=tokens, gpus_per_node=2)
    assert (cells[0].workload, cells[0].launcher) == ("lightning", "")
    if own:
        assert (cells[1].workload, cells[1].launcher) == (own.name, own.launchers[0])
    under_mpirun = load_pool(pool_spec="SIGKILL:1:3:2@lightning", gpus_per_node=2, default_launcher="mpirun")
    assert under_mpirun[0].launcher == ""


def test_a_header_with_optional_columns_out_of_order_is_refused(tmp_path: Path) -> None:
    tsv = tmp_path / "pool.tsv"
    tsv.write_text("FAULT_TYPE\tRANK\tITER\tNODES\tLAUNCHER\tWORKLOAD\nSIGKILL\t1\t3\t2\tmpirun\tcpu_gloo\n")
    with pytest.raises(PoolError, match="ATTEMPTS WORKLOAD LAUNCHER in this order"):
        read_pool_file(tsv)


@pytest.mark.parametrize(
    ("token", "says"),
    [
        ("SIGKILL:0:3:1@nope", "unknown workload 'nope' (known: cpu_gloo"),
        ("SIGKILL:0:3:1@cpu_gloo/bogus", "unknown launcher 'bogus' (known: torchrun"),
        ("SIGKILL:0:3:1@cpu_gloo/Bad-Name", "LAUNCHER: 'Bad-Name' does not match"),
        ("SIGKILL:0:3:1@lightning/accelerate", "workload lightning does not run under launcher 'accelerate'"),
        ("STORAGE_FULL:0:3:1@lightning/torchrun", "workload lightning cannot host fault STORAGE_FULL"),
    ],
)
def test_a_cell_that_cannot_run_is_refused_with_one_line_naming_the_row(token: str, says: str) -> None:
    with pytest.raises(PoolError) as info:
        load_pool(pool_spec=f"SIGKILL:0:3:1 {token}", gpus_per_node=2, refuse=refuser("cpu_gloo", "torchrun"))
    assert info.value.problems == [f"pool token 2 {token!r}: " + info.value.problems[0].split(": ", 1)[1]]
    assert says in info.value.problems[0]


def test_a_framework_not_installed_is_refused_with_how_to_install_it() -> None:
    missing = [f for f in FRAMEWORKS.values() if f.missing()]
    if not missing:
        pytest.skip("every framework is installed here")
    token = f"SIGKILL:0:3:1@{missing[0].name}/{missing[0].launchers[0]}"
    with pytest.raises(PoolError, match=r"not installed: pip install"):
        load_pool(pool_spec=token, gpus_per_node=2, refuse=refuser("cpu_gloo", "torchrun"))


def test_the_frameworks_preset_is_every_framework_under_each_launcher_over_the_faults_it_hosts() -> None:
    from faultloop.faults import FAULTS

    rows = read_pool_file(Path(__file__).resolve().parents[2] / "config" / "pools" / "frameworks.tsv")
    found = {(r.workload, r.launcher, r.fields[0], int(r.fields[3])) for r in rows}
    expected = {
        (f.name, launcher, fault, nodes)
        for f in FRAMEWORKS.values()
        if f.cpu == CPU_RUNS
        for launcher in f.launchers
        for fault in FAULTS
        if fault not in f.refuses
        for nodes in (1, 2)
    }
    assert found == expected and len(rows) == len(found)
    cells = load_pool(
        pool_file=Path(__file__).resolve().parents[2] / "config" / "pools" / "frameworks.tsv", gpus_per_node=4
    )
    assert len(cells) == len(rows)  # none collapses into another: the names tell every one apart

"""Pool parsing and validation: every error is reported at once, naming its row."""

import re
from pathlib import Path

import pytest
import yaml

from faultloop.core.cell import Cell, cell_name_pattern
from faultloop.faults import FAULT_NAMES, FAULTS, Recurrence
from faultloop.plan import config
from faultloop.plan.pool import PoolError, load_pool, read_pool_file, write_pool_file

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pool.tsv"
    path.write_text("FAULT_TYPE\tRANK\tITER\tNODES\n" + body)
    return path


def test_default_pool_is_the_seed_pool_in_order():
    cells = load_pool(pool_file=REPO / "config/pool.tsv", gpus_per_node=4)
    assert len(cells) == 34
    assert cells[0] == Cell("GPU_SLEEP", 1, 5, 2)
    assert cells[-1] == Cell("SIGNAL_EXC", 1, 5, 2)
    gpu_rows = [i for i, c in enumerate(cells) if c.fault_type.startswith("GPU_")]
    assert gpu_rows == list(range(18)), "GPU faults come first"
    assert {c.fault_type for c in cells} == set(FAULT_NAMES)


@pytest.mark.parametrize("preset", ["quick", "iter3", "iter4", "n3_super", "lifecycle"])
def test_presets_are_valid(preset):
    cells = load_pool(pool_file=REPO / f"config/pools/{preset}.tsv", gpus_per_node=4)
    assert cells
    if preset == "iter3":
        assert {c.iter for c in cells} == {2, 10}
    if preset == "iter4":
        assert {c.fault_type for c in cells} == {"SEGFAULT", "LOCK_GIL"} and {c.nodes for c in cells} == {4, 8}
    if preset == "n3_super":
        assert {c.nodes for c in cells} == {8}


def test_quick_pool_covers_crash_hang_exception_and_signal():
    from faultloop.faults import FAULTS

    cells = load_pool(pool_file=REPO / "config/pools/quick.tsv", gpus_per_node=4)
    assert 6 <= len(cells) <= 8 and max(c.nodes for c in cells) <= 2
    assert {"crash", "hang", "exception", "external_signal"} <= {FAULTS[c.fault_type].category for c in cells}


def test_one_line_syntax_matches_tsv(tmp_path):
    spec = load_pool(pool_spec="GPU_SLEEP:1:5:2 SIGKILL:0:5:2", gpus_per_node=4)
    tsv = load_pool(pool_file=write(tmp_path, "GPU_SLEEP\t1\t5\t2\nSIGKILL\t0\t5\t2\n"), gpus_per_node=4)
    assert spec == tsv == [Cell("GPU_SLEEP", 1, 5, 2), Cell("SIGKILL", 0, 5, 2)]


def test_spec_wins_over_file(tmp_path):
    cells = load_pool(pool_file=write(tmp_path, "GPU_SLEEP\t1\t5\t2\n"), pool_spec="SIGTERM:0:3:1", gpus_per_node=4)
    assert cells == [Cell("SIGTERM", 0, 3, 1)]


def test_all_problems_reported_at_once_with_rows(tmp_path):
    path = write(
        tmp_path,
        "GPU_SLEEP\t1\t5\t2\n"
        "GPU_MELT\t1\t5\t2\n"  # line 3: unknown fault
        "SIGKILL\t8\t5\t2\n"  # line 4: rank out of range (8 ranks)
        "GPU_SLEEP\t1\t5\t2\n"  # line 5: duplicate of line 2
        "SEGFAULT\tone\tx\t2\n",  # line 6: two non-integers
    )
    with pytest.raises(PoolError) as info:
        load_pool(pool_file=path, gpus_per_node=4)
    problems = info.value.problems
    message = str(info.value)
    assert f"{path} line 3: unknown fault type 'GPU_MELT'" in message
    assert f"{path} line 4: RANK 8 is out of range for 2 nodes x 4 GPUs (ranks 0-7)" in message
    assert f"{path} line 5: duplicate cell GPU_SLEEP:1:5:2 (first at {path} line 2)" in message
    assert f"{path} line 6: ITER must be a non-negative integer, got 'x'" in message
    assert f"{path} line 6: RANK must be an integer, 'mid' or 'last', got 'one'" in message
    assert len(problems) == 5


def test_min_nodes_and_zero_values(tmp_path):
    path = write(tmp_path, "GPU_SLEEP\t0\t5\t1\nSIGKILL\t0\t0\t2\nSIGKILL\t0\t5\t0\n")
    with pytest.raises(PoolError) as info:
        load_pool(pool_file=path, gpus_per_node=4, min_nodes=2, workload="llama4_scout")
    message = str(info.value)
    assert "line 2: NODES 1 is below llama4_scout's minimum of 2" in message
    assert "line 3: ITER must be at least 1" in message
    assert "line 4: NODES must be at least 1" in message


def test_empty_pool_and_bad_header(tmp_path):
    with pytest.raises(PoolError, match="the pool is empty"):
        load_pool(pool_file=write(tmp_path, "# nothing yet\n"), gpus_per_node=4)
    bad = tmp_path / "bad.tsv"
    bad.write_text("TYPE\tRANK\n")
    with pytest.raises(PoolError, match=r"line 1: header must be FAULT_TYPE RANK ITER NODES"):
        read_pool_file(bad)
    with pytest.raises(PoolError, match="no such pool file"):
        read_pool_file(tmp_path / "missing.tsv")
    with pytest.raises(PoolError, match="the pool is empty"):
        load_pool(pool_file=write(tmp_path, ""), gpus_per_node=4)


def test_bad_token_names_the_token():
    with pytest.raises(PoolError) as info:
        load_pool(pool_spec="GPU_SLEEP:1:5 SIGKILL:0:5:2:2:9", gpus_per_node=4)
    assert "pool token 1 'GPU_SLEEP:1:5': expected 4 fields" in str(info.value)
    assert "pool token 2 'SIGKILL:0:5:2:2:9': expected 4 fields" in str(info.value)


def test_symbolic_ranks_resolve():
    cells = load_pool(pool_spec="GPU_SLEEP:mid:5:4 GPU_SLEEP:last:5:4 sigkill:last:5:2", gpus_per_node=4)
    assert [c.rank for c in cells] == [8, 15, 7]
    assert cells[2].fault_type == "SIGKILL"


def test_cell_names_round_trip(tmp_path):
    cell = Cell("SIGNAL_EXC", 31, 10, 8)
    assert cell.name == "n8_SIGNAL_EXC_r31_i10"
    assert Cell.from_name(cell.name) == cell
    with pytest.raises(ValueError):
        Cell.from_name("n8_x")
    path = tmp_path / "out.tsv"
    write_pool_file([cell, Cell("SIGKILL", 0, 5, 2)], path)
    assert load_pool(pool_file=path, gpus_per_node=4) == [cell, Cell("SIGKILL", 0, 5, 2)]


def test_the_fault_names_exist_once():
    """The schema does not copy the fault table; the cell-name pattern is built from it."""
    schema = (REPO / "workflow/schemas/pool.schema.yaml").read_text()
    assert not any(name in schema for name in FAULT_NAMES)
    assert all(re.fullmatch(cell_name_pattern(), Cell(name, 1, 5, 2).name) for name in FAULT_NAMES)
    assert not re.fullmatch(cell_name_pattern(), "n2_GPU_MELT_r1_i5")


def test_a_row_beyond_the_built_in_workloads_iterations_is_refused(monkeypatch):
    """`SIGKILL:1:100000:1` could only end "fault never fired": refused before anything runs, for
    the built-in workload only (a site workload has its own iteration count)."""
    monkeypatch.chdir(REPO)
    settings = config.load({"pool": "SIGKILL:1:30:1 SIGKILL:1:100000:1"})
    with pytest.raises(PoolError) as info:
        config.pool_cells(settings)
    assert info.value.problems == [
        "pool token 2 'SIGKILL:1:100000:1': ITER 100000 is beyond cpu_gloo's 30 iterations "
        "(run_job.iterations): the fault could never fire"
    ]
    assert config.pool_cells(config.load({"pool": "SIGKILL:1:100000:2", "workload": "llama4_scout"}))


# ---- ATTEMPTS: a job's life -----------------------------------------------------------------------


def test_attempts_as_a_fifth_field_and_an_optional_column(tmp_path):
    life = Cell("GPU_ERROR", 1, 5, 2, 3)
    assert (life.name, life.spec) == ("n2_GPU_ERROR_r1_i5_a3", "GPU_ERROR:1:5:2:3")
    assert Cell.from_name(life.name) == life and re.fullmatch(cell_name_pattern(), life.name)
    assert load_pool(pool_spec="GPU_ERROR:1:5:2:3 SIGKILL:0:5:2", gpus_per_node=4, max_attempts=5) == [
        life,
        Cell("SIGKILL", 0, 5, 2),
    ]
    path = tmp_path / "life.tsv"
    path.write_text("FAULT_TYPE\tRANK\tITER\tNODES\tATTEMPTS\nGPU_ERROR\t1\t5\t2\t3\nSIGKILL\t0\t5\t2\t1\n")
    cells = load_pool(pool_file=path, gpus_per_node=4, max_attempts=3)
    assert cells == [life, Cell("SIGKILL", 0, 5, 2)] and cells[1].name == "n2_SIGKILL_r0_i5"  # 1: upstream's name
    out = tmp_path / "out.tsv"
    write_pool_file(cells, out)
    assert out.read_text().splitlines()[0] == "FAULT_TYPE\tRANK\tITER\tNODES\tATTEMPTS"
    assert load_pool(pool_file=out, gpus_per_node=4) == cells
    write_pool_file([Cell("SIGKILL", 0, 5, 2)], out)  # upstream's four columns when no cell needs more
    assert out.read_text() == "FAULT_TYPE\tRANK\tITER\tNODES\nSIGKILL\t0\t5\t2\n"


def test_one_attempt_given_or_not_is_one_cell():
    with pytest.raises(PoolError, match=r"token 2 'SIGKILL:0:5:2:1': duplicate cell SIGKILL:0:5:2"):
        load_pool(pool_spec="SIGKILL:0:5:2 SIGKILL:0:5:2:1", gpus_per_node=4)


def test_bad_attempts_are_one_line_each_naming_row_and_field(tmp_path):
    path = tmp_path / "life.tsv"
    path.write_text(
        "FAULT_TYPE\tRANK\tITER\tNODES\tATTEMPTS\n"
        "GPU_ERROR\t1\t5\t2\t0\nGPU_ERROR\t1\t5\t2\ttwo\nGPU_ERROR\t1\t5\t2\t9\nGPU_ERROR\t1\t5\t2\n"
    )
    with pytest.raises(PoolError) as info:
        load_pool(pool_file=path, gpus_per_node=4, max_attempts=5)
    assert info.value.problems == [
        f"{path} line 5: expected 5 fields (FAULT_TYPE RANK ITER NODES ATTEMPTS), got 4",
    ]
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:4]))
    with pytest.raises(PoolError) as info:
        load_pool(pool_file=path, gpus_per_node=4, max_attempts=5)
    assert info.value.problems == [
        f"{path} line 2: ATTEMPTS must be at least 1",
        f"{path} line 3: ATTEMPTS must be a positive integer, got 'two'",
        f"{path} line 4: ATTEMPTS 9 is above the configured maximum of 5 (max_attempts)",
    ]


def test_the_configured_maximum_and_the_workload_bound_attempts(monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(PoolError) as info:
        config.pool_cells(config.load({"pool": "NET_DROP:1:5:2:2 NET_DROP:1:5:2:3", "max_attempts": 2}))
    assert info.value.problems == [
        "pool token 2 'NET_DROP:1:5:2:3': ATTEMPTS 3 is above the configured maximum of 2 (max_attempts)"
    ]
    with pytest.raises(PoolError) as info:
        config.pool_cells(config.load({"pool": "SIGKILL:1:5:2:2", "workload": "llama4_scout"}))
    assert info.value.problems == [
        "pool token 1 'SIGKILL:1:5:2:2': ATTEMPTS 2: llama4_scout does not resume a restarted job from its "
        "checkpoint (the built-in workload does); use 1"
    ]


def test_the_lifecycle_preset_covers_every_fault_and_each_behaviours_combinations():
    cells = load_pool(pool_file=REPO / "config/pools/lifecycle.tsv", gpus_per_node=4, max_attempts=3)
    assert {c.fault_type for c in cells} == set(FAULTS)
    for kind in Recurrence:
        shapes = {(c.nodes, c.attempts) for c in cells if FAULTS[c.fault_type].on_restart == kind}
        assert shapes == {(1, 2), (1, 3), (2, 2), (2, 3)}, kind

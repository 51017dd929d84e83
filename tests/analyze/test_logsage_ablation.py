"""Leaving a program out (issue 39): `faultloop eval-logs --ablate PROGRAM` grades logsage without every
row, launcher adapter and catalog entry of that program, the measure of reading a program never met."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from conftest import REAL_LOG_CORPUS, needs_real_logs
from faultloop.analyze.logsage import ablation, launchers, messages, rules
from faultloop.cli import eval_logs as eval_logs_cli

# the programs the acceptance names: each left out alone must keep the floors below
NINE = ("torch-elastic", "c10d", "nccl", "cuda", "slurm", "deepspeed", "horovod", "open-mpi", "ray")
# over the corpus, with one program left out: nothing found on at most this share of failure logs,
# the category and the restart decision right on at least these
NOT_FOUND_MAX, CATEGORY_MIN, RESTART_MIN = 0.05, 0.80, 0.75


def _cli(*args: str, left_out: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, ablation.ENV: left_out}
    return subprocess.run(
        [sys.executable, "-m", "faultloop.cli", "eval-logs", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@functools.cache
def _graded(*flags: str, left_out: str = "") -> dict[str, Any]:
    """eval-logs' summary of the whole corpus, graded once per test process for each way of asking
    (the floors' NCCL grading is the one the cost of leaving NCCL out compares)."""
    return json.loads(_cli(*map(str, REAL_LOG_CORPUS), "--format", "json", *flags, left_out=left_out).stdout)


@pytest.mark.parametrize(
    ("origin", "names"),
    [
        (("torch", "torch/distributed/elastic/multiprocessing/errors/__init__.py"), ("torch-elastic",)),
        (("torch", "torch/distributed/run.py, launcher/api.py"), ("torch-elastic",)),
        (("torch", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"), ("c10d",)),
        (("torch", "torch/distributed/distributed_c10d.py (_store_based_barrier)"), ("c10d",)),
        (("torch", "c10/cuda/CUDACachingAllocator.cpp"), ("torch",)),
        (("CUDA runtime", "cuda_runtime_api.h"), ("cuda",)),
        (("Open MPI", "orte/tools/orterun/help-orterun.txt"), ("open-mpi",)),
        (("Lightning, UCX", "signal_connector.py; ucs/debug/debug.c"), ("lightning", "ucx")),
    ],
)
def test_a_program_is_named_by_the_origin_its_entries_carry(origin: tuple[str, str], names: tuple[str, ...]) -> None:
    assert ablation.programs_of(origin) == names


def test_an_entry_several_programs_print_goes_only_with_all_of_them() -> None:
    shared = ("Lightning, UCX", "signal_connector.py; ucs/debug/debug.c")
    assert ablation.keeps(shared, frozenset({"lightning"}))
    assert not ablation.keeps(shared, frozenset({"lightning", "ucx"}))
    assert ablation.keeps(("NCCL", "src/init.cc"), frozenset())


def test_every_program_the_tables_name_can_be_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_logs_cli.main(["--ablate", "list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == rules.programs() and set(NINE) <= set(listed)
    named = {n for r in rules.EVERY_RULE for n in ablation.programs_of(r.origin)}
    named |= {n for t in messages.load_catalog() for n in ablation.programs_of((t.program, t.source))}
    assert named <= set(listed)
    assert eval_logs_cli.main([".", "--ablate", "no-such-program"]) == 2
    assert "unknown program(s) no-such-program" in capsys.readouterr().err


def test_a_left_out_program_has_no_row_adapter_or_catalog_entry() -> None:
    """The tables of a process that leaves NCCL and Open MPI out: none of their rows, adapters or
    catalog entries, every other one kept, and the tables derived from them (the prefilter's
    anchors) built from what is left."""
    probe = (
        "import json\n"
        "from faultloop.analyze.logsage import ablation, launchers, messages, prefilter, rules\n"
        "programs = lambda origins: sorted({n for o in origins for n in ablation.programs_of(o)})\n"
        "print(json.dumps({'rows': programs(r.origin for r in rules.RULES),"
        " 'adapters': programs(a.ORIGIN for a in launchers.ADAPTERS),"
        " 'catalog': programs((t.program, t.source) for t in messages.load_catalog()),"
        " 'rows_kept': len(rules.RULES), 'anchors': list(prefilter.ANCHORS)}))\n"
    )
    env = {**os.environ, ablation.ENV: "nccl,open-mpi"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    left = json.loads(proc.stdout)
    for table in ("rows", "adapters", "catalog"):
        assert not {"nccl", "open-mpi"} & set(left[table]), table
    assert {"c10d", "torch-elastic", "slurm"} <= set(left["rows"])
    gone = [r for r in rules.EVERY_RULE if set(ablation.programs_of(r.origin)) <= {"nccl", "open-mpi"}]
    assert gone and left["rows_kept"] == len(rules.EVERY_RULE) - len(gone)
    kept_anchors = {a for r in rules.EVERY_RULE if r not in gone for a in r.anchors}
    assert set(left["anchors"]) == kept_anchors < {a for r in rules.RULES for a in r.anchors}
    assert launchers.ADAPTERS == launchers.EVERY_ADAPTER  # this process leaves nothing out


@needs_real_logs
def test_a_left_out_program_costs_what_only_its_rows_read() -> None:
    """Graded with NCCL left out, logs whose failure only NCCL's lines state lose their category; a
    process whose tables were built without NCCL grades in place, alike."""
    by_flag = _graded("--ablate", "nccl")
    by_env = _graded("--ablate", "nccl", left_out="nccl")
    full = _graded()
    assert by_flag["overall"] == by_env["overall"]
    assert by_flag["overall"]["category"]["right"] < full["overall"]["category"]["right"]


@needs_real_logs
@pytest.mark.slow
@pytest.mark.parametrize("program", NINE)
def test_reading_a_program_never_met_keeps_the_floors(program: str) -> None:
    """The acceptance of issue 39: each of the nine left out alone, over the whole corpus (379 logs: about
    7 s each on an idle core, one process per program; NCCL's is the one the test above compares)."""
    # (the tables built without the program from the start: the grading needs no second process)
    summary = _graded("--ablate", program, left_out=program)
    overall = summary["overall"]
    report = json.dumps({"program": program, "overall": overall, "misses": summary["misses"]}, indent=1)
    not_found = overall["errors_not_found_on_failure_logs"]
    assert not_found["not_found"] <= NOT_FOUND_MAX * not_found["total"], report
    assert overall["category"]["rate"] >= CATEGORY_MIN, report
    assert overall["restart"]["rate"] >= RESTART_MIN, report

"""logsage over a job's life (logsage.life, logsage.attempts): restarts inside one log read from the
templates the programs print (the catalog's rows), the decision over earlier attempts, the node to
drain, and the analysis runner's refusal of a node the run does not have."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from conftest import TESTS
from faultloop.analyze import registry
from faultloop.analyze.analyzer import Input, LogSource
from faultloop.analyze.logsage import attempts, framing, messages
from faultloop.analyze.logsage.life import (
    FOLLOWS_JOB,
    NODE,
    OWN,
    RECURS,
    UNEXPLAINED_FIRST,
    AttemptView,
    analyze_life,
    decide,
)
from faultloop.contracts import FAILED, read_index
from faultloop.faults import RESTART, STOP

TEMPLATES = messages.load_catalog()
CPU_GLOO = TESTS / "data" / "logs" / "cpu_gloo"


def boundary_rows() -> list[messages.Template]:
    """The catalog's rows a BOUNDARY reads (the restart lines of torch, NVRx and SLURM)."""
    return [
        t
        for t in TEMPLATES
        if any(b.pattern.search(framing.peel(line)[1]) for b in attempts.BOUNDARIES for line in t.example())
    ]


def test_every_boundary_is_a_catalog_row_of_its_program() -> None:
    for boundary in attempts.BOUNDARIES:
        rows = [t for t in boundary_rows() if any(boundary.pattern.search(framing.peel(x)[1]) for x in t.example())]
        assert rows, boundary.anchor
        assert any(t.program == boundary.program for t in rows), boundary.anchor


def attempt(last_step: int, exitcode: int, pid: int) -> list[str]:
    """An attempt that trains to `last_step`, then its rank 1 dies (torch's agent reports it)."""
    steps = [
        f"[2026-12-01 10:00:{i:02d}] iteration {i:8d}/      10 | consumed samples: {i * 128:12d} | lm loss: 7.0E-01 |"
        for i in range(1, last_step + 1)
    ]
    return [
        *steps,
        f"E1201 10:00:30.000000 4000 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: "
        f"{exitcode}) local_rank: 1 (pid: {pid}) of binary: /usr/bin/python3",
    ]


def write(tmp_path: Path, lines: list[str], name: str = "main.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("row", boundary_rows(), ids=lambda t: t.where)
def test_a_restart_row_cuts_the_log_into_attempts(row: messages.Template, tmp_path: Path) -> None:
    log = write(tmp_path, [*attempt(4, -15, 4242), *row.example(), *attempt(4, -15, 4343)])
    parts = attempts.segments(log, "python")
    assert len(parts) == 2, row.template
    assert parts[1].attempt == parts[0].attempt + 1
    assert [attempts.last_step(log, p) for p in parts] == [4, 4]


@pytest.mark.parametrize("prefilter", ["python", "auto"])
def test_the_same_failure_at_the_same_step_in_each_attempt_of_one_log_is_stop(prefilter: str, tmp_path: Path) -> None:
    restart = "[default] Worker group FAILED. 3/3 attempts left; will restart worker group"
    again = write(tmp_path, [*attempt(4, -15, 4242), restart, *attempt(4, -15, 4343)])
    once = write(tmp_path, [*attempt(4, -15, 4242)], "once.log")
    assert analyze_life(once).restart == RESTART  # SIGTERM from outside, once: restart
    verdict = analyze_life(again)
    assert (verdict.restart, verdict.next_attempt) == (STOP, STOP)
    assert verdict.extra["life"]["rule"] == RECURS and "own restarts" in verdict.explanation
    progressed = write(tmp_path, [*attempt(4, -15, 4242), restart, *attempt(7, -15, 4343)], "progress.log")
    assert analyze_life(progressed).restart == RESTART  # a failure after progress is a new attempt's


def test_agents_of_several_nodes_reporting_one_restart_cut_once(tmp_path: Path) -> None:
    lines = [
        *attempt(4, -15, 4242),
        "0: [default] Worker group FAILED. 3/3 attempts left; will restart worker group",
        "1: [default] Worker group FAILED. 3/3 attempts left; will restart worker group",
        "1: [default] Joining cluster restart (group_rank=1)",
        "0:   restart_count=1",
        *attempt(4, -15, 4343),
        "0: [default] Worker group FAILED. 2/3 attempts left; will restart worker group",
        *attempt(2, -15, 4444),
    ]
    parts = attempts.segments(write(tmp_path, lines), "python")
    assert [p.attempt for p in parts] == [1, 2, 3]


def test_a_log_that_begins_mid_life_numbers_its_attempts_from_the_restart_count(tmp_path: Path) -> None:
    lines = [*attempt(2, 1, 4242), "[default] Worker group FAILED. 2/3 attempts left; will restart worker group"]
    assert [p.attempt for p in attempts.segments(write(tmp_path, lines), "python")] == [2]  # nothing after it
    lines.append("[default] Starting worker group")
    assert [p.attempt for p in attempts.segments(write(tmp_path, lines), "python")] == [2, 3]


def test_a_requeue_printed_by_every_node_is_one_restart(tmp_path: Path) -> None:
    requeue = "slurmstepd: error: *** STEP 81234.0 ON node0{} CANCELLED AT 2026-12-01T10:00:00 DUE TO JOB REQUEUE ***"
    lines = [*attempt(3, -15, 1), requeue.format(1), requeue.format(2), "SLURM_RESTART_COUNT=1", *attempt(3, -15, 2)]
    assert [p.attempt for p in attempts.segments(write(tmp_path, lines), "python")] == [1, 2]


def test_a_log_without_restarts_is_one_attempt() -> None:
    log = CPU_GLOO / "job_001.log.gz"
    text = gzip.decompress(log.read_bytes())
    assert b"attempts left" not in text


# ---- which host each rank ran on ------------------------------------------------------------------------


def test_rank_hosts_from_what_ranks_say_torchs_summary_and_prefixes(tmp_path: Path) -> None:
    lines = [
        "0: [2026-12-01 09:42:42.252321] > rank 0/4 (local rank 0) on node0: process group ready (gloo, timeout 10 s)",
        "1: [2026-12-01 09:42:42.248165] > rank 2/4 (local rank 0) on node1: process group ready (gloo, timeout 10 s)",
        "nid0017: [rank5]: starting",
        "[0]:",
        "  time      : 2026-12-01_10:00:00",
        "  host      : nid0042.cluster",
        "  rank      : 3 (local_rank: 1)",
        "  exitcode  : -9 (pid: 4242)",
        "  host      : localhost",
        "  rank      : 1 (local_rank: 1)",
    ]
    log = write(tmp_path, lines)
    part = attempts.segments(log, "python")[0]
    assert attempts.rank_hosts(log, part, "python") == {0: "node0", 2: "node1", 5: "nid0017", 3: "nid0042.cluster"}


def test_a_gpu_error_drains_its_ranks_node_and_a_workload_fault_drains_none(tmp_path: Path) -> None:
    log = write(tmp_path, gzip.decompress((CPU_GLOO / "job_001.log.gz").read_bytes()).decode().splitlines())
    verdict = analyze_life(log)  # GPU_ERROR on rank 1, which ran on node0 (2 nodes x 2 ranks)
    assert (verdict.restart, verdict.next_attempt, verdict.drain_nodes) == (STOP, RESTART, ["node0"])
    assert verdict.extra["life"]["rule"] == NODE
    truth = (TESTS / "data" / "logs" / "cpu_gloo_truth.tsv").read_text().splitlines()
    exc = next(r.split("\t")[0] for r in truth if "\tWORKLOAD_EXC\t" in r)
    workload = write(tmp_path, gzip.decompress((CPU_GLOO / exc).read_bytes()).decode().splitlines(), "exc.log")
    verdict = analyze_life(workload)
    assert (verdict.next_attempt, verdict.drain_nodes) == (STOP, [])


# ---- the decision over earlier attempts (pure) -----------------------------------------------------------


def seen(
    cause: str, *, step: int | None = 5, hosts: tuple[str, ...] = (), ranks: tuple[int, ...] = (1,)
) -> AttemptView:
    own = RESTART if cause in ("NET_DROP", "GPU_SLEEP", "SIGTERM") else STOP
    return AttemptView("an attempt", cause, ranks, hosts, step, own)


def test_the_first_occurrence_of_an_unexplained_failure_restarts_and_its_recurrence_stops() -> None:
    assert (decide(seen("SIGKILL"), []).decision, decide(seen("SIGKILL"), []).rule) == (RESTART, UNEXPLAINED_FIRST)
    again = decide(seen("SIGKILL"), [seen("SIGKILL")])
    assert (again.decision, again.rule, again.repeats) == (STOP, RECURS, 1)


def test_a_failure_after_progress_is_a_new_attempts() -> None:
    call = decide(seen("SIGKILL", step=9), [seen("SIGKILL", step=5)])
    assert (call.decision, call.rule) == (RESTART, UNEXPLAINED_FIRST)
    assert decide(seen("NET_DROP", step=9), [seen("NET_DROP")]).decision == RESTART


def test_a_transient_cause_that_recurs_at_the_same_step_stops() -> None:
    assert decide(seen("NET_DROP"), []).decision == RESTART
    assert decide(seen("NET_DROP"), [seen("NET_DROP")]).decision == STOP
    assert decide(seen("NET_DROP"), [seen("SIGTERM"), seen("NET_DROP")]).repeats == 1  # another failure ends it
    assert decide(seen("NET_DROP"), [seen("NET_DROP"), seen("SIGTERM")]).decision == RESTART


def test_without_steps_the_same_ranks_are_the_same_place() -> None:
    assert decide(seen("NET_DROP", step=None), [seen("NET_DROP", step=None)]).decision == STOP
    other = decide(seen("NET_DROP", step=None), [seen("NET_DROP", step=None, ranks=(3,))])
    assert other.decision == RESTART


def test_a_workload_fault_keeps_its_own_decision() -> None:
    call = decide(seen("WORKLOAD_EXC"), [])
    assert (call.decision, call.drain, call.rule) == (STOP, (), OWN)


def test_a_node_bound_fault_drains_its_node_and_one_that_follows_the_job_stops() -> None:
    first = decide(seen("GPU_ERROR", hosts=("node1",)), [])
    assert (first.decision, first.drain, first.rule) == (RESTART, ("node1",), NODE)
    moved = decide(seen("GPU_ERROR", hosts=("node2",)), [seen("GPU_ERROR", hosts=("node1",))])
    assert (moved.decision, moved.drain, moved.rule) == (STOP, (), FOLLOWS_JOB)
    stayed = decide(seen("GPU_ERROR", hosts=("node1",)), [seen("GPU_ERROR", hosts=("node1",))])
    assert (stayed.decision, stayed.drain) == (RESTART, ("node1",))
    unnamed = decide(seen("HOST_OOM"), [])  # no host known: the cause's own decision, no drain
    assert (unnamed.decision, unnamed.drain) == (STOP, ())


def test_earlier_attempts_logs_decide_the_next_attempt(tmp_path: Path) -> None:
    first = write(tmp_path, attempt(4, -15, 4242), "attempt1.log")
    second = write(tmp_path, attempt(4, -15, 4343), "attempt2.log")
    alone = analyze_life(second)
    assert (alone.restart, alone.next_attempt) == (RESTART, RESTART)
    verdict = analyze_life(second, [first])
    assert (verdict.restart, verdict.next_attempt) == (RESTART, STOP)  # one log's own decision kept
    assert [a["where"] for a in verdict.extra["life"]["attempts"]] == ["attempt 1's log", "this log"]


# ---- the runner refuses a node the run does not have ------------------------------------------------------


def test_a_verdict_naming_a_node_the_run_does_not_have_is_that_analyzers_failure(tmp_path: Path) -> None:
    answer = {"restart": RESTART, "primary_ranks": [1], "drain_nodes": ["node9"]}
    script = tmp_path / "drains.py"
    script.write_text(f"import json; print(json.dumps({answer!r}))\n")
    config = {"analyzers": {"drains": {"kind": "command", "command": f"{sys.executable} {script} {{log}}"}}}
    specs = registry.selected(config, Input.LOG)
    run = tmp_path / "run"
    (run / "analysis").mkdir(parents=True)
    log = write(run / "analysis", attempt(3, -15, 1), "main_workload.log")
    (record,) = registry.run_cell(Input.LOG, specs, LogSource(log, nodes=("node0", "node1")), run)
    assert record.status == FAILED
    assert record.error == (
        "analysis/drains/verdict.json: drain_nodes: node 'node9' is not one of this run's nodes (0: node0, 1: node1)"
    )
    assert read_index(run / "analysis" / "analyzers.json")[0].error == record.error
    fine = LogSource(log, nodes=("node0", "node9"))  # a run's nodes change only with its log: forced here
    (record,) = registry.run_cell(Input.LOG, specs, fine, run, fresh=True)
    assert record.status == "ok"
    assert json.loads((run / "analysis" / "drains" / "verdict.json").read_text())["drain_nodes"] == ["node9"]


def test_history_is_part_of_a_history_kinds_input_and_no_other_kinds(tmp_path: Path) -> None:
    """faultloop's analyzer re-runs when an earlier attempt's log changes; a kind without history
    (first_error) is reused, its verdict depending on its own log only."""
    config = {"analyzers": {"faultloop": {"kind": "faultloop"}, "first_error": {"kind": "first_error"}}}
    specs = registry.selected(config, Input.LOG)
    earlier = write(tmp_path, attempt(4, -15, 4242), "attempt1.log")
    run = tmp_path / "run"
    (run / "analysis").mkdir(parents=True)
    log = write(run / "analysis", attempt(4, -15, 4343), "main_workload.log")
    source = LogSource(log, earlier=(earlier,))
    first = registry.run_cell(Input.LOG, specs, source, run)
    assert [r.reused for r in registry.run_cell(Input.LOG, specs, source, run)] == [True, True]
    earlier.write_text(earlier.read_text().replace("iteration        4/", "iteration        3/"))
    again = registry.run_cell(Input.LOG, specs, source, run)
    assert [r.reused for r in again] == [False, True]
    assert again[0].input_digest != first[0].input_digest and again[1].input_digest == first[1].input_digest
    verdict = json.loads((run / "analysis" / "faultloop" / "verdict.json").read_text())
    assert verdict["next_attempt"] == RESTART  # attempt 2 got further than attempt 1 now: a new attempt's


def test_a_flood_of_restarts_reads_only_the_latest_as_attempts(tmp_path: Path) -> None:
    lines = [line for k in range(1, 200) for line in (f"step {k}", f"SLURM_RESTART_COUNT={k}")]
    parts = attempts.segments(write(tmp_path, lines), "python")
    assert len(parts) == attempts.MAX_ATTEMPTS and parts[-1].attempt == 200
    assert analyze_life(write(tmp_path, ["hello"]), [tmp_path / "missing.log"]).next_attempt == ""

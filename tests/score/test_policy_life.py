"""Scoring a job's life (score.life) on constructed lives: every behaviour of a fault on restart,
right and wrong policies, drains and their cost in node-minutes."""

from __future__ import annotations

from typing import Any

import pytest

from faultloop.contracts import Grade, LogVerdict, Manifest, RecordError
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP
from faultloop.score.life import Call, Decision, grade_life, oracle, read_decision

NODES = ["node0", "node1"]


def job(fault: str, attempt: int, state: str, *, fired: bool = True, minutes: float = 1.0, **fields: Any) -> Manifest:
    """Attempt `attempt` of a 2-node life, `minutes` long (2 nodes: twice that in node-minutes)."""
    values: dict[str, Any] = dict(
        job_id=f"local-{attempt}",
        workload="cpu_gloo",
        fault_type=fault,
        fault_rank=1,
        fault_iter=5,
        nodes=2,
        gpus_per_node=2,
        world_size=4,
        state=state,
        main_log="logs/slurm/x.log",
        launch_out=None,
        fault_fired=fired,
        run_valid=True,
        invalid_reason=None,
        node_names=list(NODES),
        start_time=1000.0,
        end_time=1000.0 + 60 * minutes,
        attempt=attempt,
        attempts=3,
        fault_node="node0" if fired else None,
        fault_fired_iter=5 if fired else None,
    )
    return Manifest(**(values | fields))


def said(*texts: str) -> list[Decision | None]:
    return [Decision.parse(t) for t in texts]


# ---- the oracle -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("NET_DROP", Decision(Call.RESTART)),
        ("SIGKILL", Decision(Call.RESTART)),
        ("WORKLOAD_EXC", Decision(Call.STOP)),
        ("NAN_LOSS", Decision(Call.STOP)),
        ("GPU_ERROR", Decision(Call.RESTART_WITHOUT, ("node0",))),
        ("HOST_OOM", Decision(Call.RESTART_WITHOUT, ("node0",))),
    ],
)
def test_the_oracle_follows_the_faults_recurrence(fault: str, expected: Decision) -> None:
    assert oracle(job(fault, 1, "FAILED")) == expected


def test_the_oracle_grades_only_attempts_that_failed_by_their_fault() -> None:
    assert oracle(job("NET_DROP", 2, "COMPLETED", fired=False)) is None
    assert oracle(job("NET_DROP", 2, "FAILED", fired=False)) is None
    assert oracle(job("GPU_ERROR", 1, "FAILED", fault_node=None)) is None


# ---- reading a verdict as a decision ----------------------------------------------------------------


def verdict(restart: str, **fields: Any) -> LogVerdict:
    return LogVerdict.from_json({"restart": restart, **fields})


def test_a_drain_reads_as_a_restart_without_those_nodes_whatever_restart_says() -> None:
    assert read_decision(verdict(STOP, drain_nodes=[1]), NODES) == Decision(Call.RESTART_WITHOUT, ("node1",))
    assert read_decision(verdict(RESTART, drain_nodes=["node0"]), NODES) == Decision(Call.RESTART_WITHOUT, ("node0",))
    assert str(read_decision(verdict(STOP, drain_nodes=["node1.cluster"]), NODES)) == "restart without node1"


def test_next_attempt_decides_before_restart_and_anything_else_is_no_decision() -> None:
    assert read_decision(verdict(STOP, next_attempt=RESTART), NODES).call == Call.RESTART
    assert read_decision(verdict(RESTART), NODES).call == Call.RESTART
    assert read_decision(verdict(STOP), NODES).call == Call.STOP
    assert read_decision(verdict(ERRORS_NOT_FOUND), NODES).call == Call.NONE
    assert read_decision(None, NODES).call == Call.NONE


def test_a_node_the_run_does_not_have_is_refused_naming_the_field() -> None:
    with pytest.raises(RecordError, match=r"drain_nodes: node 'node7' is not one of this run's nodes \(0: node0"):
        read_decision(verdict(RESTART, drain_nodes=["node7"]), NODES)
    with pytest.raises(RecordError, match="drain_nodes: node 2 is not one of"):
        read_decision(verdict(RESTART, drain_nodes=[2]), NODES)


@pytest.mark.parametrize("bad", [[True], [-1], [""], "node0", [{"node": 1}]])
def test_drain_nodes_must_be_nodes(bad: Any) -> None:
    with pytest.raises(RecordError, match="drain_nodes"):
        verdict(RESTART, drain_nodes=bad)


def test_next_attempt_must_be_a_decision() -> None:
    with pytest.raises(RecordError, match="next_attempt"):
        verdict(RESTART, next_attempt="MAYBE")


def test_a_decision_round_trips_as_text() -> None:
    for decision in (
        Decision(Call.RESTART),
        Decision(Call.STOP),
        Decision(Call.NONE),
        Decision(Call.RESTART_WITHOUT, ("a", "b")),
    ):
        assert Decision.parse(str(decision)) == decision


# ---- a fault that passes ------------------------------------------------------------------------------


def passes() -> list[Manifest]:
    return [job("NET_DROP", 1, "FAILED", minutes=3), job("NET_DROP", 2, "COMPLETED", fired=False, minutes=5)]


def test_passes_restarting_is_right_and_costs_nothing() -> None:
    life = grade_life(passes(), said("restart", "none"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.TRUE, Grade.TRUE, 0.0)
    assert [s.policy for s in life.steps] == [Grade.TRUE, Grade.NA]  # a completed attempt asks for nothing
    assert life.steps[1].happened == "the fault did not come back, COMPLETED"


def test_passes_a_stop_forfeits_the_attempt_the_job_still_needed() -> None:
    life = grade_life(passes(), said("stop", "none"))
    assert (life.policy, life.drain) == (Grade.FALSE, Grade.TRUE)
    assert life.cost_node_min == 10.0 and not life.estimated  # attempt 2: 2 nodes x 5 minutes, measured
    assert life.steps[0].cost_kind == "stop not needed"


def test_passes_a_needless_drain_is_a_drain_miss_but_the_right_policy() -> None:
    life = grade_life(passes(), said("restart without node0", "none"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.TRUE, Grade.FALSE, 0.0)


def test_an_analyzer_without_a_verdict_gives_no_decision_a_miss() -> None:
    life = grade_life(passes(), said("none", "none"))
    assert (life.policy, life.cost_node_min) == (Grade.FALSE, 10.0)


def test_a_one_attempt_life_prices_an_unneeded_stop_by_its_own_attempt_an_estimate() -> None:
    life = grade_life([job("SIGKILL", 1, "FAILED", minutes=2)], said("stop"))
    assert (life.policy, life.cost_node_min, life.estimated) == (Grade.FALSE, 4.0, True)
    assert grade_life([job("SIGKILL", 1, "FAILED")], said("restart")).policy == Grade.TRUE


# ---- a fault that recurs at the same step -----------------------------------------------------------------


def same_step() -> list[Manifest]:
    return [job("WORKLOAD_EXC", 1, "FAILED", minutes=3), job("WORKLOAD_EXC", 2, "FAILED", minutes=1)]


def test_same_step_stopping_at_every_attempt_is_right() -> None:
    life = grade_life(same_step(), said("stop", "stop"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.TRUE, Grade.TRUE, 0.0)
    assert [s.expected for s in life.steps] == ["stop", "stop"]


def test_same_step_a_restart_costs_the_attempt_that_failed_again() -> None:
    life = grade_life(same_step(), said("restart", "stop"))
    assert (life.policy, life.cost_node_min, life.estimated) == (Grade.FALSE, 2.0, False)
    assert [s.cost_kind for s in life.steps] == ["restart that failed again", ""]


def test_same_step_restarting_past_the_last_attempt_is_estimated() -> None:
    life = grade_life(same_step(), said("restart", "restart"))
    assert (life.policy, life.cost_node_min, life.estimated) == (Grade.FALSE, 4.0, True)


def test_same_step_a_wrong_decision_after_a_stop_is_a_miss_that_costs_nothing() -> None:
    life = grade_life(same_step(), said("stop", "restart"))  # its path ended at the stop
    assert (life.policy, life.cost_node_min) == (Grade.FALSE, 0.0)


# ---- a fault that recurs on the same node until it is drained --------------------------------------------


def same_node() -> list[Manifest]:
    return [
        job("GPU_ERROR", 1, "FAILED", minutes=3),
        job(
            "GPU_ERROR", 2, "COMPLETED", fired=False, minutes=4, drained_nodes=["node0"], node_names=["node2", "node1"]
        ),
    ]


def test_same_node_restarting_without_the_faults_node_is_right() -> None:
    life = grade_life(same_node(), said("restart without node0", "none"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.TRUE, Grade.TRUE, 0.0)
    assert life.steps[1].happened == "without node0, the fault did not come back, COMPLETED"


def test_same_node_a_plain_restart_meets_the_fault_again_an_estimated_failing_attempt() -> None:
    life = grade_life(same_node(), said("restart", "none"))
    assert (life.policy, life.drain) == (Grade.FALSE, Grade.FALSE)
    assert (life.cost_node_min, life.estimated) == (6.0, True)  # as long as attempt 1, which it repeats


def test_same_node_draining_the_wrong_node_is_wrong_twice() -> None:
    life = grade_life(same_node(), said("restart without node1", "none"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.FALSE, Grade.FALSE, 6.0)


def test_same_node_a_stop_is_upstreams_not_on_this_hardware_but_no_node_named() -> None:
    life = grade_life(same_node(), said("stop", "none"))
    assert (life.policy, life.drain, life.cost_node_min, life.estimated) == (Grade.FALSE, Grade.FALSE, 8.0, False)


def test_same_node_draining_more_than_the_faults_node_restarts_right_but_drains_wrong() -> None:
    life = grade_life(same_node(), said("restart without node0 node1", "none"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.TRUE, Grade.FALSE, 0.0)


# ---- what is not graded ---------------------------------------------------------------------------------


def test_a_life_without_a_graded_attempt_is_not_applicable() -> None:
    life = grade_life([job("NET_DROP", 1, "FAILED", fired=False)], said("restart"))
    assert (life.policy, life.drain, life.cost_node_min) == (Grade.NA, Grade.NA, None)


def test_a_record_without_decisions_is_not_graded() -> None:
    assert grade_life(passes(), [None, None]).policy == Grade.NA


def test_unmeasured_times_leave_the_cost_unknown() -> None:
    jobs = [job("NET_DROP", 1, "FAILED"), job("NET_DROP", 2, "COMPLETED", fired=False, start_time=None)]
    life = grade_life(jobs, said("stop", "none"))
    assert (life.policy, life.cost_node_min) == (Grade.FALSE, None)

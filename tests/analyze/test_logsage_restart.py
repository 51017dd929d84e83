"""logsage's restart decisions from what the printing program means (issue 32), each on lines
rendered from that program's template, never a corpus excerpt: a call on a communicator torch had
aborted is a victim's (the failure it suffered is elsewhere), and a traceback whose frame lines a
terminal or a paste wrapped still ends in its exception line."""

from __future__ import annotations

import re

import pytest

from faultloop.analyze import logsage
from faultloop.analyze.logsage import rules
from faultloop.faults import RESTART, STOP

PYTHON = logsage.Settings(prefilter="python")


def analyze(lines: list[str]) -> logsage.Verdict:
    return logsage.analyze_log(lines, PYTHON)


# -- a communicator torch had aborted ------------------------------------------------------------
# torch/csrc/distributed/c10d/NCCLUtils.hpp, getNcclComm on a communicator the watchdog aborted after a
# collective on it failed or timed out: `NCCL communicator was aborted.` (< 1.10), `NCCL communicator was
# aborted on rank {rank}. ` then `Original reason for failure was: {reason}` where torch kept one (>= 1.10)


def _backward(error: str, prefix: str = "") -> list[str]:
    return [
        f"{prefix}Traceback (most recent call last):",
        f'{prefix}  File "train.py", line 40, in <module>',
        f"{prefix}    loss.backward()",
        f'{prefix}  File "/usr/lib/python3/site-packages/torch/autograd/__init__.py", line 200, in backward',
        f"{prefix}    Variable._execution_engine.run_backward(",
        f"{prefix}RuntimeError: {error}",
    ]


@pytest.mark.parametrize(
    "error", ["NCCL communicator was aborted.", "NCCL communicator was aborted on rank 2. "], ids=["<1.10", ">=1.10"]
)
def test_a_call_on_an_aborted_communicator_is_a_victim_of_a_failure_it_does_not_name(error: str) -> None:
    v = analyze(["epoch 3 step 120 loss 2.31", *_backward(error)])
    assert (v.fault_category, v.restart, v.primary_ranks) == ("network", RESTART, []), v.detail


def test_the_reason_torch_kept_for_the_abort_decides() -> None:
    reason = "NCCL communicator was aborted on rank 1. Original reason for failure was: NCCL error: invalid usage"
    v = analyze(["epoch 3 step 120 loss 2.31", *_backward(reason, "[rank1]:")])
    assert (v.restart, v.primary_ranks) == (STOP, [1]), v.detail


def test_the_rank_that_failed_first_is_the_culprit_not_the_aborted_communicator() -> None:
    lines = [
        "[rank3]:Traceback (most recent call last):",
        '[rank3]:  File "train.py", line 3, in <module>',
        "[rank3]:    raise ValueError('bad batch')",
        "[rank3]:ValueError: bad batch",
        *_backward("NCCL communicator was aborted on rank 0. ", "[rank0]:"),
    ]
    v = analyze(lines)
    assert (v.fault_category, v.restart, v.primary_ranks) == ("exception", STOP, [3]), v.detail


# -- wrapped frame lines -------------------------------------------------------------------------


def test_frame_lines_a_terminal_wrapped_do_not_cut_the_traceback_off_its_exception_line() -> None:
    """A cut-off traceback would be a failure of its own ahead of the exception line that says the
    rank only suffered one."""
    call = "    n_iters = one_epoch(model, criterion, opt, config, train_dataloader, val_dataloader, device, epoch)"
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 727, in main',
        call[:80],
        call[80:],
        '  File "train.py", line 398, in one_epoch',
        "    total_loss.backward()",
        "RuntimeError: NCCL communicator was aborted.",
    ]
    v = analyze(lines)
    assert (v.fault_category, v.restart, v.primary_ranks) == ("network", RESTART, []), v.detail


# -- torch's distributed test harness names a rank that never ended --------------------------------
# torch/testing/_internal/common_distributed.py (MultiProcessTestCase._check_return_codes: `Process {i}
# terminated or timed out after {elapsed} seconds`; MultiThreadedTestCase: `Thread {i} ...`) and
# test/test_distributed.py before 1.5 (`Timeout waiting for rank %d to terminate`): the harness's time ran
# out with that rank still running; a rank that raised is reported with its exception instead


def _harness(error: str, raised_at: str) -> list[str]:
    return [
        "======================================================================",
        "ERROR: test_allreduce_sum (__main__.TestDistBackendWithSpawn)",
        "----------------------------------------------------------------------",
        "Traceback (most recent call last):",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/testing/_internal/common_distributed.py", line 540, '
        "in wrapper",
        "    self._join_processes(fn)",
        f'  File "/opt/conda/lib/python3.10/site-packages/torch/testing/_internal/common_distributed.py", line 760, '
        f"in {raised_at}",
        "    raise RuntimeError(",
        error,
    ]


@pytest.mark.parametrize(
    "error, raised_at",
    [
        ("RuntimeError: Process 2 terminated or timed out after 300.0312 seconds", "_check_return_codes"),
        ("RuntimeError: Thread 2 terminated or timed out after 300 seconds", "_join_threads"),
        ("AssertionError: True is not false : Timeout waiting for rank 2 to terminate", "_join_and_reduce"),
    ],
)
def test_the_rank_a_test_harness_timed_out_on_hung(error: str, raised_at: str) -> None:
    v = analyze(_harness(error, raised_at))
    assert (v.fault_category, v.restart, v.primary_ranks) == ("hang", RESTART, [2]), v.detail


def test_a_rank_the_harness_reports_with_its_exception_raised() -> None:
    error = "RuntimeError: Process 2 exited with error code 10 and exception:"
    lines = [
        *_harness(error, "_check_return_codes"),
        "Traceback (most recent call last):",
        '  File "test_c10d.py", line 88, in test_allreduce_sum',
        "    self.assertEqual(t, expected)",
        "AssertionError: Tensor-likes are not equal!",
    ]
    v = analyze(lines)
    assert v.restart == STOP and v.fault_category != "hang", v.detail


# -- a checkpoint write the storage failed ---------------------------------------------------------
# an I/O error of the storage (EIO 5, EREMOTEIO 121) means the same wherever it is printed: Megatron's async
# checkpoint writer (megatron/core/dist_checkpointing/strategies/filesystem_async.py: `Local process {i}
# encountered an error: {e}`) or the exception a save raised after training progress (Python's
# `OSError: [Errno N] message`); a full volume (ENOSPC 28) stays full


def _megatron(error: str) -> str:
    return (
        "ERROR:megatron.core.dist_checkpointing.strategies.filesystem_async:Local process 0 encountered an error: "
        + error
    )


def _save_raised(error: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "train.py", line 90, in save_checkpoint',
        "    torch.save(state, path)",
        f"OSError: {error}",
    ]


@pytest.mark.parametrize("error", ["[Errno 5] Input/output error", "[Errno 121] Remote I/O error"])
def test_the_storages_io_error_passes_wherever_it_is_printed(error: str) -> None:
    progress = " iteration      200/   10000 | consumed samples: 51200 | lm loss: 2.31"
    written, raised = analyze([progress, _megatron(error)]), analyze([progress, *_save_raised(error)])
    assert (written.restart, written.fault_category, written.primary_ranks) == (RESTART, "other", []), written.detail
    assert raised.restart == RESTART, raised.detail


@pytest.mark.parametrize(
    "lines", [[_megatron("[Errno 28] No space left on device")], _save_raised("[Errno 28] No space left on device")]
)
def test_a_full_volume_stays_full(lines: list[str]) -> None:
    v = analyze([" iteration      200/   10000 | lm loss: 2.31", *lines])
    assert v.restart == STOP, v.detail


# -- a remote service's HTTP status -----------------------------------------------------------------
# requests/models.py raise_for_status (`{status} Server Error: {reason} for url: {url}`), which huggingface_hub's
# HfHubHTTPError wraps, raised behind rich's traceback panel (rich/traceback.py: its source lines numbered
# behind a `│ ❱ 301 │` gutter, then the exception line)
def _hub_commit_failed(status: str) -> list[str]:
    return [
        "│   299 │   │   # Convert `HTTPError` into a `HfHubHTTPError` to display request information       │",
        "│ ❱ 301 │   │   raise HfHubHTTPError(str(e), response=response) from e                             │",
        "╰──────────────────────────────────────────────────────────────────────────────────────────────────╯",
        f"HfHubHTTPError: {status} for url: https://huggingface.co/api/models/user/model/commit/main",
    ]


@pytest.mark.parametrize(
    ("status", "restart"),
    [
        ("504 Server Error: Gateway Time-out", RESTART),
        ("503 Server Error: Service Unavailable", RESTART),
        ("429 Client Error: Too Many Requests", RESTART),
        ("401 Client Error: Unauthorized", STOP),
        ("404 Client Error: Not Found", STOP),
    ],
)
def test_a_remote_services_own_failure_clears_and_a_refused_request_recurs(status: str, restart: str) -> None:
    v = analyze(_hub_commit_failed(status))
    assert (v.fault_category, v.restart) == ("exception", restart), v.detail
    assert v.evidence[0].text.startswith("HfHubHTTPError: "), v.evidence[0]  # not the panel's source line


# -- a hang's odd rank out ---------------------------------------------------------------------------
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, the watchdog's report of a timed-out collective (2.x)
def _hang_without(silent: int) -> list[str]:
    lines = [f"[rank{r}]: epoch 2 step 300 loss 1.2{r}" for r in range(4)]
    return lines + [
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=3021, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600043 "
        "milliseconds before timing out."
        for r in range(4)
        if r != silent
    ]


def test_the_main_rank_that_kept_the_others_waiting_was_busy_with_one_rank_work() -> None:
    """Rank 0 runs a job's one-rank work (saving, evaluating): where it is the one the others
    waited for and nothing says how it stalled, that work recurs at the same step."""
    v = analyze(_hang_without(0))
    assert (v.fault_category, v.restart, v.primary_ranks, v.extra["cause"]) == ("hang", STOP, [0], "SLOW_RANK")
    assert "one-rank work" in v.detail


def test_another_rank_that_kept_the_others_waiting_is_a_transient_hang() -> None:
    v = analyze(_hang_without(2))
    assert (v.fault_category, v.restart, v.primary_ranks, v.extra["cause"]) == ("hang", RESTART, [2], "HANG")


# -- words a Python exception line never has, a class that names the transport ---------------------
# NCCL's src/misc/shmutils.cc: WARN("Error: failed to extend %s to %ld bytes", ...), then the caller's
# WARN("Error while creating shared memory segment %s (size %ld)", ...), each behind NCCL's own framing
def test_nccls_warning_that_begins_with_error_is_its_shared_memory_setup_not_a_python_exception() -> None:
    v = analyze(
        [
            "node00:1:1 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-x1 to 9637892 bytes",
            "node00:1:1 [0] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment "
            "/dev/shm/nccl-x1 (size 9637888)",
            "node00:1:1 [0] NCCL INFO transport/shm.cc:114 -> 2",
        ]
    )
    assert (v.fault_category, v.restart, v.extra["cause"]) == ("network", STOP, "NCCL_SETUP"), v.detail


@pytest.mark.parametrize(
    ("line", "python"),
    [
        ("Error: failed to extend /dev/shm/nccl-x1 to 9637892 bytes", False),  # a C program's wording
        ("shutil.Error: [('a', 'b', 'Permission denied')]", True),  # a module's class named Error
        ("ValueError: host not found", True),
        ("torch.distributed.DistBackendError: NCCL error", True),
    ],
)
def test_a_python_exception_line_names_its_class_with_its_module_unless_builtin(line: str, python: bool) -> None:
    """Python prints `module.Class: message`, leaving the module out for builtins and __main__
    only: a bare `Error:` is no builtin's."""
    row = next(r for r in rules.RULES if r.name == "exception_line")
    assert bool(re.search(row.pattern, line)) is python


def test_a_backend_error_whose_message_is_cut_is_the_collectives_transport() -> None:
    """c10d raises NCCL's and Gloo's failures as DistBackendError (torch >= 2.1); Ray's driver
    re-raises a worker's as RayTaskError(DistBackendError) with its own header first."""
    v = analyze(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/ray/_private/worker.py", line 2547, in get',
            "    raise value.as_instanceof_cause()",
            "ray.exceptions.RayTaskError(DistBackendError): ray::_RayTrainWorker__execute.get_next() "
            "(pid=917, ip=10.0.0.2, actor_id=a3e4)",
            '  File "/usr/lib/python3/site-packages/ray/train/_internal/worker_group.py", line 33, in __execute',
            "    raise skipped from exception_cause(skipped)",
        ]
    )
    assert (v.fault_category, v.restart, v.extra["cause"]) == ("network", RESTART, "NETWORK"), v.detail

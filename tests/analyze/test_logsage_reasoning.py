"""logsage's reasoning from what an excerpt shows (issue 32): each culprit step and each decision
tested on lines rendered from the template of the program that prints them, never a corpus
excerpt. The culprits: the rank whose GPU a rank-less failure names (one node), the one rank in
a different collective, the rank every waiter fetches a store key from. The decisions: a desync
recurs (STOP), a node that died mid-run passes (RESTART)."""

from __future__ import annotations

import pytest

from faultloop.analyze import logsage
from faultloop.faults import RESTART, STOP

PYTHON = logsage.Settings(prefilter="python")


def analyze(lines: list[str]) -> logsage.Verdict:
    return logsage.analyze_log(lines, PYTHON)


# -- the rank whose GPU a rank-less failure names ------------------------------------------------
# torch's tensor repr (torch/_tensor_str.py: `device='cuda:N'`) inside an exception's message, on its
# line or on the lines the message runs on to, and aten's device check
# (`Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!`)


def _tensor(value: str, gpu: int) -> str:
    return f"tensor({value}, device='cuda:{gpu}', grad_fn=<AddBackward0>)"


@pytest.mark.parametrize(
    "lines, rank",
    [
        ([f"ValueError: loss is not finite: {_tensor('nan', 3)}"], 3),
        (  # a message over several lines (an f-string with a dict of tensors)
            [
                "FloatingPointError: Loss became infinite or NaN at iteration=12!",
                f"loss_dict = {{'loss_cls': {_tensor('nan', 2)}, 'loss_box': {_tensor('0.25', 2)}}}",
            ],
            2,
        ),
        (
            [
                "Traceback (most recent call last):",
                '  File "train.py", line 9, in <module>',
                "    out = model(x)",
                "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
                "cuda:1 and cpu!",
            ],
            1,
        ),
    ],
)
def test_a_rank_less_failure_is_the_rank_of_the_gpu_it_names(lines: list[str], rank: int) -> None:
    v = analyze(lines)
    assert v.primary_ranks == [rank] and v.confidence == "medium", v.detail
    assert f"GPU {rank}" in v.detail


@pytest.mark.parametrize(
    "lines",
    [
        # two GPUs named: which one is the process's own is not said
        [
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
        ],
        # two hosts: a GPU's index is only a local rank
        [
            "node001: Traceback (most recent call last):",
            f"node002: ValueError: loss is not finite: {_tensor('nan', 3)}",
        ],
        # a world of two has no rank 3
        ["world_size: 2", f"ValueError: loss is not finite: {_tensor('nan', 3)}"],
    ],
)
def test_a_gpu_index_names_no_rank_where_the_log_does_not_say_which(lines: list[str]) -> None:
    v = analyze(lines)
    assert 3 not in v.primary_ranks and 1 not in v.primary_ranks, v.detail


# -- the one rank in a different collective (torch < 1.10 numbers no collective) -----------------
# torch/lib/c10d/ProcessGroupNCCL.cpp (abortTimedOutCollectives, torch <= 1.9):
# "[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(OpType={op}[, TensorShape=[..]],
# Timeout(ms)={ms}) ran for {ms} milliseconds before timing out."


def _unnumbered(rank: int, op: str) -> str:
    return (
        f"[E ProcessGroupNCCL.cpp:566] [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(OpType={op}, Timeout(ms)=1800000) ran for 18010{rank}0 milliseconds before timing out."
    )


@pytest.mark.parametrize(
    "ops, culprit, cause",
    [
        (["ALLREDUCE", "BROADCAST", "BROADCAST", "BROADCAST"], [0], "DESYNC"),
        (["BROADCAST", "BROADCAST", "ALLREDUCE", "BROADCAST", "BROADCAST"], [2], "DESYNC"),
        (["ALLREDUCE", "ALLREDUCE", "BROADCAST", "BROADCAST"], [], "DESYNC"),  # two against two
    ],
)
def test_the_rank_first_timed_out_on_another_collective_took_another_code_path(
    ops: list[str], culprit: list[int], cause: str
) -> None:
    v = analyze([_unnumbered(rank, op) for rank, op in enumerate(ops)])
    assert (v.fault_type, v.restart, v.primary_ranks) == (cause, STOP, culprit), v.detail


def test_ranks_that_first_timed_out_on_one_collective_are_no_desync() -> None:
    v = analyze([_unnumbered(rank, "ALLREDUCE") for rank in (1, 2, 3)])
    assert v.fault_type != "DESYNC" and v.fault_category == "hang", v.detail


def test_a_ranks_later_reports_do_not_count_only_its_first() -> None:
    """Each rank's watchdog reports every timed-out collective in order: the first is its oldest."""
    lines = [
        _unnumbered(0, "ALLREDUCE"),
        *(_unnumbered(r, "BROADCAST") for r in (1, 2, 3)),
        _unnumbered(0, "BROADCAST"),
    ]
    assert analyze(lines).primary_ranks == [0]


# -- the rank every waiter fetches a store key from ----------------------------------------------
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (broadcastUniqueNCCLID, torch >= 1.13): the group's
# rank 0 publishes each communicator's ncclUniqueId under a counter key, the lower rank of a
# point-to-point pair under `low:high`; the others fetch it.


def _fetch(waiter: int, key: str, error: str = "Socket Timeout", prefix: str = "") -> str:
    return (
        f"{prefix}torch.distributed.DistBackendError: [{waiter}] is setting up NCCL communicator and retrieving "
        f"ncclUniqueId from [0] via c10d key-value store by key '{key}', but store->get('{key}') got error: {error}"
    )


@pytest.mark.parametrize(
    "lines, culprit",
    [
        ([_fetch(w, "0", prefix=f"[rank{w}]: ") for w in (1, 2, 3)], [0]),
        ([_fetch(1, "0")], [0]),  # a lone waiter still names the publisher
        ([_fetch(3, "2:3", error="wait timeout after 600000ms, keys: /default_pg/0//cuda//2:3")], [2]),  # a pair's
        ([_fetch(w, "1", prefix=f"[rank{w + 4}]: ") for w in (1, 2, 3)], []),  # a subgroup's rank 0 is not rank 0
    ],
)
def test_waiters_for_a_communicators_id_name_the_rank_that_publishes_it(lines: list[str], culprit: list[int]) -> None:
    v = analyze(lines)
    assert (v.fault_category, v.restart, v.primary_ranks) == ("hang", STOP, culprit), v.detail
    assert v.confidence != "high"


# -- a node that died mid-run passes -------------------------------------------------------------
# torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (_keep_alive, torch >= 1.9): "The node
# '{node}' has failed to send a keep-alive heartbeat to the rendezvous '{run_id}' due to an error of
# type {type}." Keep-alives run only between a completed rendezvous and the next one.


def _keep_alive(error: str) -> str:
    return (
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'node07_31337_0' has failed "
        f"to send a keep-alive heartbeat to the rendezvous 'job42' due to an error of type {error}."
    )


@pytest.mark.parametrize("error", ["RendezvousConnectionError", "RendezvousTimeoutError", "RendezvousStateError"])
def test_an_agent_that_lost_the_rendezvous_mid_run_lost_a_node(error: str) -> None:
    v = analyze(["[default0]:step 120 loss 2.31", _keep_alive(error), _keep_alive(error)])
    assert (v.fault_category, v.restart, v.primary_ranks) == ("other", RESTART, []), v.detail
    assert "node" in v.explanation


def test_a_ranks_own_failure_before_the_lost_rendezvous_decides() -> None:
    lines = [
        "[default1]:Traceback (most recent call last):",
        '[default1]:  File "train.py", line 3, in <module>',
        "[default1]:    raise ValueError('bad batch')",
        "[default1]:ValueError: bad batch",
        _keep_alive("RendezvousConnectionError"),
    ]
    v = analyze(lines)
    assert (v.fault_category, v.restart, v.primary_ranks) == ("exception", STOP, [1]), v.detail


@pytest.mark.parametrize(
    ("error", "cause"), [("RendezvousTimeoutError", "SIGKILL"), ("RendezvousConnectionError", "NODE_FAIL")]
)
def test_a_keep_alive_past_its_own_deadline_lost_no_node(error: str, cause: str) -> None:
    """A keep-alive that ran past its deadline with the store in reach says its own host stalled:
    the worker the agent then reports killed is the failure; one that could not reach the store lost
    the node that hosts it, which explains what follows."""
    lines = [
        "[default0]:step 120 loss 2.31",
        _keep_alive(error),
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4242 closing signal SIGTERM",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 4250) of "
        "binary: /usr/bin/python",
    ]
    v = analyze(lines)
    assert v.extra["cause"] == cause, v.detail
    assert v.restart == (STOP if cause == "SIGKILL" else RESTART), v.detail


def test_a_rendezvous_that_failed_at_launch_is_not_a_lost_node() -> None:
    v = analyze(
        [
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
            "has failed. See inner exception for details."
        ]
    )
    assert (v.fault_category, v.restart) == ("other", STOP), v.detail


# -- a one-rank path visible in the log recurs ---------------------------------------------------
# a rank that timed out waiting inside a one-rank-first section (transformers' training_args.py
# `main_process_first`, accelerate's state.py `main_process_first`, Lightning Fabric's
# `rank_zero_first`, YOLOv5's utils/torch_utils.py `torch_distributed_zero_first`): the others wait
# at its barrier while the main process runs the block


def _waiting_in(rank: int, section: str, file: str) -> list[str]:
    frames = [
        "Traceback (most recent call last):",
        '  File "train.py", line 40, in <module>',
        f"    with {section}():",
        '  File "/usr/lib/python3.10/contextlib.py", line 135, in __enter__',
        "    return next(self.gen)",
        f'  File "/env/lib/python3.10/site-packages/{file}", line 2496, in {section}',
        "    dist.barrier()",
        '  File "/env/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 4551, in barrier',
        "    work = group.barrier(opts=opts)",
        _fetch(rank, "0"),
    ]
    return [f"[rank{rank}]: {line}" for line in frames]


@pytest.mark.parametrize(
    "section, file",
    [
        ("main_process_first", "transformers/training_args.py"),
        ("local_main_process_first", "accelerate/state.py"),
        ("rank_zero_first", "lightning/fabric/fabric.py"),
        ("torch_distributed_zero_first", "utils/torch_utils.py"),
    ],
)
def test_ranks_waiting_in_a_one_rank_first_section_waited_for_the_main_ranks_work(section: str, file: str) -> None:
    v = analyze([line for rank in (1, 2, 3) for line in _waiting_in(rank, section, file)])
    assert (v.fault_category, v.restart, v.primary_ranks) == ("hang", STOP, [0]), v.detail
    assert "one-rank" in v.explanation and v.confidence == "medium"


def test_a_main_rank_that_waited_in_the_section_too_is_not_its_culprit() -> None:
    lines = [
        line for rank in (0, 1) for line in _waiting_in(rank, "main_process_first", "transformers/training_args.py")
    ]
    assert "one-rank" not in analyze(lines).explanation


# -- a hang's silent rank, and one-rank work no rank is named for ---------------------------------
# gloo's reports of a collective that failed (third_party/gloo/gloo/transport/tcp/pair.cc and
# unbound_buffer.cc), as torch's excepthook prefixes them per rank, and the Trainer's
# `Saving model checkpoint to {output_dir}` (transformers/trainer.py), which names no rank
GLOO = "[/pytorch/third_party/gloo/gloo/transport/tcp/"


def _closed(rank: int) -> str:
    return (
        f"[rank{rank}]: RuntimeError: {GLOO}pair.cc:553] Connection closed by peer [127.0.0.1]:21640. This is "
        "typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error."
    )


def _timed_out(rank: int) -> str:
    return f"[rank{rank}]: RuntimeError: {GLOO}unbound_buffer.cc:78] Timed out waiting 15000ms for recv operation to complete"


def test_a_lost_connection_printed_first_in_a_hang_does_not_hide_the_one_silent_rank() -> None:
    """Rank 1 was stopped: every other rank timed out waiting for it, and one of them lost its
    connection to a peer that had already given up, a report that reached the log before the
    timeouts. The one rank that said nothing is the one they waited on, not a link that went down."""
    lines = [_closed(5)] + [_timed_out(r) for r in (0, 2, 3, 4, 6, 7)]
    v = analyze(lines)
    assert (v.restart, v.primary_ranks, v.fault_category) == (RESTART, [1], "hang")


def test_a_cut_rank_that_reports_its_own_lost_links_is_still_a_link_down() -> None:
    v = analyze([_closed(1)] + [_closed(r) for r in (0, 2, 3, 4, 5, 6, 7)])
    assert (v.primary_ranks, v.fault_type) == ([1], "NET_DROP")


def test_one_rank_work_no_rank_is_named_for_was_rank_0s_and_done_when_rank_0_timed_out() -> None:
    """Saving a checkpoint runs on rank 0 by convention; rank 0 then timed out like the others, so
    its save held nobody up: the hang is the silent rank's, and a restart passes."""
    v = analyze(
        ["[transformers] Saving model checkpoint to /ckpt/checkpoint-10"] + [_timed_out(r) for r in range(8) if r != 1]
    )
    assert (v.restart, v.primary_ranks, v.fault_category) == (RESTART, [1], "hang")


def test_the_pair_closure_gloo_signals_after_a_timeout_is_the_same_wait_not_a_failure() -> None:
    """Once one operation of a rank's gloo context times out, gloo closes all of the context's
    pairs, and its other operations fail with `Application timeout caused pair closure`
    (unbound_buffer.cc): a victim's wait, not a failure of its own, so the silent rank is named."""
    closure = [f"[rank{r}]: RuntimeError: Application timeout caused pair closure" for r in (2, 0, 7, 3)]
    v = analyze(closure + [_timed_out(r) for r in (6, 5, 4)])
    assert (v.restart, v.primary_ranks, v.fault_category) == (RESTART, [1], "hang")

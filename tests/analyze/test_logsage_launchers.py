"""The launcher layer: each adapter reads its program's reports, rendered from the message catalog's
templates (one case per wording the program printed across its versions), into the child's death
record (rank, exit status or signal), a launch failure, or the culprit the report names."""

from __future__ import annotations

import pytest

from faultloop.analyze import logsage
from faultloop.analyze.logsage import launchers, messages, rules
from faultloop.analyze.logsage.scan import classify
from faultloop.faults import ERRORS_NOT_FOUND, RESTART, STOP

CATALOG = messages.load_catalog()
VALUES = {**messages.SAMPLE_VALUES, "rank": "5", "local": "2"}  # a culprit that no fallback (rank 0, 3) names


def render(words: str, versions: str | None = None) -> list[str]:
    """The log lines of the one catalog template that is or holds `words` (and prints in `versions`)."""
    found = [t for t in CATALOG if words in t.template and versions in (None, t.versions)]
    found = [t for t in found if t.template == words] or [t for t in found if t.template.endswith(words)] or found
    assert len(found) == 1, (words, versions, [t.where for t in found])
    return found[0].template.format(**VALUES).split("\\n")


LAUNCH_FAILURE = ("other", STOP, [], None)  # no worker ran: nobody's fault among the ranks
# adapter -> (template words, versions, expected (category, restart, primary ranks, fault type))
CASES: dict[str, list[tuple[str, str | None, tuple[str, str, list[int], str | None]]]] = {
    "torchrun": [
        # the agent's death signal: a number before 2.1; from 2.1 as Python prints a Signals member
        ("Received 15 death signal", ">=1.10,<2.1", ("external_signal", RESTART, [], None)),
        ("Received 2 death signal", ">=2.1", ("external_signal", RESTART, [], None)),
        ("Received Signals.SIGTERM death signal", ">=2.1", ("external_signal", RESTART, [], None)),
        ("SignalException: Process {pid} got signal: 2", ">=1.10", ("external_signal", RESTART, [], None)),
        # a worker's death by local rank (one node: the global rank), and the summary's record by rank
        ("failed (exitcode: -9) local_rank: {local} (pid: {pid}) of binary", ">=1.10", ("crash", STOP, [2], "SIGKILL")),
        ("failed (exitcode: -9) local_rank: {local} (pid: {pid}) of fn", ">=1.10", ("crash", STOP, [2], "SIGKILL")),
        ("exitcode  : -9 (pid: {pid}) SIGKILL", ">=2.12", ("crash", STOP, [5], "SIGKILL")),
        ("exitcode  : -11 (pid: {pid})\\n", ">=1.10,<2.12", ("crash", STOP, [5], "SEGFAULT")),
        # the summary's first format (`Root Cause:` first, `msg:` lines): its record's rank above its status
        ('  msg: "Signal 9 (SIGKILL) received by PID {pid}"', None, ("crash", STOP, [5], "SIGKILL")),
        # the agent's own failures: its rendezvous, its store
        ("RendezvousStateError", ">=1.10", LAUNCH_FAILURE),
        # another agent closed the rendezvous as its run ended: a consequence of a peer's end
        ("RendezvousClosedError", ">=1.10", ("other", RESTART, [], None)),
        ("RendezvousTimeoutError", None, LAUNCH_FAILURE),
        ("The client socket has timed out after 900s", ">=2.1", LAUNCH_FAILURE),
    ],
    "spawn": [
        (
            "ProcessExitedException: process {rank} terminated with signal SIGKILL",
            ">=1.10",
            ("crash", STOP, [5], "SIGKILL"),
        ),
        (
            "ProcessExitedException: process {rank} terminated with signal SIGSEGV",
            None,
            ("crash", STOP, [5], "SEGFAULT"),
        ),
        (
            "Exception: process {rank} terminated with signal SIGKILL",
            "<1.8",
            ("crash", STOP, [5], "SIGKILL"),
        ),
        ("-- Process {rank} terminated with the following error:", None, ("exception", STOP, [5], "WORKLOAD_EXC")),
    ],
    "launch": [
        ("returned non-zero exit status 1.", "<1.9", ("exception", STOP, [2], "WORKLOAD_EXC")),
        ("--local_rank={local}']' died with <Signals.SIGKILL: 9>.", None, ("crash", STOP, [2], "SIGKILL")),
    ],
    "deepspeed": [
        # the command in the report is the last child spawned: its --local_rank names nobody
        ("exits with return code = -9", ">=0.5.8", ("crash", STOP, [], "SIGKILL")),
        ("Main process received SIGTERM, exiting", ">=0.3.12", ("external_signal", RESTART, [], None)),
    ],
    "accelerate": [
        ("died with <Signals.SIGKILL: 9>.", ">=0.5.0", ("crash", STOP, [], "SIGKILL")),
        ("You need to use at least 2 processes to use `--multi_gpu`.", ">=0.20.0", LAUNCH_FAILURE),
    ],
    "lightning": [
        ("Child process with PID {pid} terminated with code -9", ">=2.1", ("crash", STOP, [2], "SIGKILL")),
        ("Handling auto-requeue signal: 10", ">=2.0", ("external_signal", RESTART, [], None)),
        ("handling auto-requeue signal", ">=1.8,<2.0", ("external_signal", RESTART, [], None)),
        ("[rank: {rank}] Received SIGTERM: 15\\nBypassing", ">=2.0", ("external_signal", RESTART, [5], "SIGTERM")),
    ],
    "srun": [
        ("task {rank}: Segmentation fault (core dumped)", ">=17.11", ("crash", STOP, [5], "SEGFAULT")),
        ("task {rank}: Hangup", ">=17.11", ("external_signal", RESTART, [5], "SIGTERM")),
        ("Unable to create step for job", ">=17.11", LAUNCH_FAILURE),
        ("Task launch for StepId={job}.0 failed", ">=20.11", LAUNCH_FAILURE),
    ],
    "open_mpi": [
        ("on node {host} exited on signal 9 (Killed).", ">=1.10,<5.0.6", ("crash", STOP, [5], "SIGKILL")),
        ("on node xxxxxxxx exited on signal 9", ">=1.10,<5.0.6", ("crash", STOP, [5], "SIGKILL")),
        ("exited on\\nsignal 9 (Killed).", ">=5.0.6", ("crash", STOP, [5], "SIGKILL")),
        ("exited on\\nsignal 11", ">=5.0.6", ("crash", STOP, [5], "SEGFAULT")),
        ("Process name: [[50371,1],{rank}]", ">=1.10,<5", ("exception", STOP, [5], "WORKLOAD_EXC")),
        ("status, thus causing\\nthe job", ">=5.0.3,<5.0.6", ("exception", STOP, [5], "WORKLOAD_EXC")),
        ("status,\\nthus causing", ">=5.0.6", ("exception", STOP, [5], "WORKLOAD_EXC")),
        ("and potentially your MPI job)", ">=1.10,<5", LAUNCH_FAILURE),
        ("and MPI will try to terminate your MPI job as well)", ">=5", LAUNCH_FAILURE),
        # a rank that ended without MPI_Finalize; a daemon (its node) lost mid-run, or never reached
        ("node {host} exiting improperly.", ">=1.10,<5", ("crash", STOP, [5], None)),
        ("ORTE has lost communication with a remote daemon.", ">=2.1,<5", ("other", RESTART, [], None)),
        ("An ORTE daemon has unexpectedly failed after launch", ">=1.10,<5", LAUNCH_FAILURE),
    ],
    "mpich": [
        # Hydra's block and mpiexec's exit string: the death's signal, no rank (strsignal's words for SIGSEGV
        # are the shell's, read as the log's one process)
        ("(signal 9)", ">=3.2", ("crash", STOP, [], "SIGKILL")),
        ("Segmentation fault (signal 11)", ">=3.2", ("crash", STOP, [0], "SEGFAULT")),
        # the block alone, its closing line cut: its raw wait status (128 + 11, a core dumped) is the signal; the
        # process it names may be one the clean-up killed, so no rank, in MPICH's block as in Intel MPI's
        ("=   EXIT CODE: 139\\n=   CLEANING UP REMAINING PROCESSES", ">=3.2", ("crash", STOP, [], "SEGFAULT")),
        ("=   KILLED BY SIGNAL: 9 (Killed)\\n====", None, ("crash", STOP, [], "SIGKILL")),
    ],
    "kubernetes": [
        # the container's, the kubelet's and the Job controller's reasons: none names a rank (one process, read alone)
        ("Reason:       OOMKilled\\n      Exit Code:    137", None, ("oom", STOP, [0], None)),
        ("reason: Error", None, ("exception", STOP, [0], "WORKLOAD_EXC")),
        ("CrashLoopBackOff   5 (2m ago)    10m", None, ("crash", STOP, [], None)),
        ("The node was low on resource: memory.", None, ("external_signal", RESTART, [], None)),
        ("reason: DeadlineExceeded", None, ("external_signal", STOP, [], None)),
        ("reason: BackoffLimitExceeded", None, ("none", ERRORS_NOT_FOUND, [], None)),
    ],
    "kubeflow": [
        # the operator's word names a replica type, never a rank or a cause: nothing to attribute alone
        ("is failed because 1 Worker replica(s) failed.", None, ("none", ERRORS_NOT_FOUND, [], None)),
    ],
    "ray": [
        # the driver's word names no worker: read as the log's one process
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            ">=2.11",
            ("crash", STOP, [0], None),
        ),
        (
            "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
            ">=2.5,<2.11",
            ("crash", STOP, [0], None),
        ),
        # the message's later lines give the reason: the actor's node died (declared dead: NODE_LOST)
        (
            "ActorDiedError: The actor died unexpectedly before finishing this task.\\n",
            ">=2.11",
            ("external_signal", RESTART, [], None),
        ),
        (
            "RayActorError: The actor died unexpectedly before finishing this task.\\n",
            ">=2.5,<2.11",
            ("external_signal", RESTART, [], None),
        ),
        # ... in the older wording, below an exception line that stands without its traceback
        (
            "The actor is dead because its node has died. Node Id: e8ccd37e",
            ">=2.0,<2.11",
            ("external_signal", RESTART, [], None),
        ),
        ("The Ray Train run failed", ">=2.5", ("none", ERRORS_NOT_FOUND, [], None)),  # it says: look above
        # Ray's own reports: its memory monitor's kills (the driver's word: the log's one process), a worker's
        # death as the raylet reports it (a death record naming no rank), a node lost (the GCS, the raylet)
        ("0 Workers crashed due to other reasons", None, ("oom", STOP, [0], None)),
        ("exit detail: Task was killed due to the node running low on memory.", None, ("oom", STOP, [0], None)),
        ("Worker unexpectedly exits with a connection error code 2. End of file.", None, ("crash", STOP, [], None)),
        ("(OOM, preempted node, etc.)", None, ("external_signal", RESTART, [], None)),
        ("or has lagging heartbeats.", None, ("external_signal", RESTART, [], None)),
        ("[Rank {rank} Error Snippet]:", ">=2.49", ("exception", STOP, [5], "WORKLOAD_EXC")),
    ],
    "dask": [
        ("Worker process {pid} was killed by signal 9", ">=1.17.1", ("crash", STOP, [], "SIGKILL")),
        ("Worker process {pid} was killed by signal 11", ">=1.17.1", ("crash", STOP, [], "SEGFAULT")),
        # a worker the nanny terminated for memory (its warning read back from the death line)
        ("(pid={pid}) exceeded 95% memory budget", ">=2022.05.1", ("oom", STOP, [], None)),
        ("Worker exceeded 95% memory budget", ">=1.22.1,<2022.05.1", ("oom", STOP, [], None)),
        # a task that raised in its worker: the training function's own exception (one worker in view: the
        # log's one process, as the driver's word for Ray)
        ("Exception: 'AssertionError()'", ">=2022.05.0,<2024.6.0", ("exception", STOP, [0], "WORKLOAD_EXC")),
        ("State:     executing", ">=2024.6.0", ("exception", STOP, [0], "WORKLOAD_EXC")),
    ],
    "horovod": [
        # the stall inspector's missing ranks, in its three wordings: the ranks it names are the culprits
        ("Missing ranks:", ">=0.20.1", ("hang", RESTART, [5], None)),
        ("Stalled ranks:", ">=0.16.2,<0.20.1", ("hang", RESTART, [5], None)),
        ("[missing ranks: {rank}]", ">=0.13.6,<0.16.2", ("hang", RESTART, [5], None)),
        ("Process name: {rank}\\nExit code: 1", ">=0.18.1", ("exception", STOP, [5], "WORKLOAD_EXC")),
        ("Process {rank} exit with status code -9.", ">=0.17.0", ("crash", STOP, [5], "SIGKILL")),
        # before 0.13.6 each stalled op lists the ranks that did submit: the one left out is the culprit
        ("[ready ranks: 0, 1, 2, 3, 4, 6, 7]", ">=0.9.0,<0.13.6", ("hang", RESTART, [5], None)),
        # a shell's status 137 is a death by SIGKILL; the elastic driver's `host[local]` names no rank
        ("Process name: {rank}\\nExit code: 137", ">=0.18.1", ("crash", STOP, [5], "SIGKILL")),
        ("Process name: {host}[{local}]\\nExit code: 137", ">=0.20.0", ("crash", STOP, [], "SIGKILL")),
    ],
    "submitit": [
        # the scheduler's signals, read as the scheduler's: stopping, preempting, or at the time limit
        ("Bypassing signal SIGTERM", ">=1.4.0", ("external_signal", RESTART, [], None)),
        ("Bypassing signal 15", ">=1.0.0,<1.4.0", ("external_signal", RESTART, [], None)),
        ("this job is preempted.", ">=1.4.0", ("external_signal", RESTART, [], None)),
        ("this job is timed-out.", ">=1.4.0", ("external_signal", STOP, [], None)),
    ],
    "torch_tests": [
        # the test harness's time ran out with the rank it names still running: that rank hung
        ("Timeout waiting for rank {rank} to terminate", ">=1.0,<1.5", ("hang", RESTART, [5], None)),
        ("Process {rank} terminated or timed out", ">=1.5", ("hang", RESTART, [5], None)),
        ("Thread {rank} terminated or timed out", ">=2.0", ("hang", RESTART, [5], None)),
    ],
}
PARAMS = [(adapter, words, versions, want) for adapter, cases in CASES.items() for words, versions, want in cases]


@pytest.mark.parametrize(("adapter", "words", "versions", "want"), PARAMS, ids=[f"{p[0]}: {p[1][:40]}" for p in PARAMS])
def test_each_wording_gives_the_record_the_launcher_reports(
    adapter: str, words: str, versions: str | None, want: tuple[str, str, list[int], str | None]
) -> None:
    v = logsage.analyze_log(render(words, versions), logsage.Settings(prefilter="python"))
    assert (v.fault_category, v.restart, v.primary_ranks, v.fault_type) == want, v.detail


def test_every_adapter_is_tested() -> None:
    assert set(CASES) == {adapter.__name__.rsplit(".", 1)[-1] for adapter in launchers.ADAPTERS}


def test_a_launch_failure_is_the_launchers_not_the_workloads() -> None:
    """The agent's traceback ending in a store error: the launcher's failure, not rank 0's exception."""
    v = logsage.analyze_log(render("The client socket has timed out after 900s"), logsage.Settings(prefilter="python"))
    assert [ev.rule for ev in v.evidence][:1] == ["launcher_failed"], v.detail


def test_a_traceback_the_launcher_logged_and_went_on_from_is_no_launch_failure() -> None:
    """The agent logs its exit barrier's timeout (`log.exception` in agent/server/api.py, every
    version read) after its workers ended: the worker's death stays the record, not a launch failure."""
    agent = "/usr/lib/python3/site-packages/torch/distributed/elastic"
    lines = [
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 2 (pid: 4242) of binary: /usr/bin/python3",
        "ERROR:torch.distributed.elastic.agent.server.api:Error waiting on exit barrier. Elapsed: 309.2 seconds",
        "Traceback (most recent call last):",
        f'  File "{agent}/agent/server/api.py", line 906, in _exit_barrier',
        "    store_util.barrier(",
        f'  File "{agent}/utils/store.py", line 31, in get_all',
        '    data = store.get(f"{prefix}{idx}")',
        "RuntimeError: Socket Timeout",
    ]
    v = logsage.analyze_log(lines, logsage.Settings(prefilter="python"))
    assert (v.fault_category, v.primary_ranks, v.fault_type) == ("crash", [2], "OS_ABORT"), v.detail
    assert "launcher_failed" not in [ev.rule for ev in v.evidence]


def test_spawns_parent_traceback_reports_the_child_its_header_names() -> None:
    """mp.spawn's parent raises ProcessRaisedException from its own frames, the child's traceback
    under the header: the child (spawn index 5) raised, the parent only reports it."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 50, in <module>',
        "    mp.spawn(main, nprocs=8)",
        '  File "/usr/lib/python3/site-packages/torch/multiprocessing/spawn.py", line 158, in join',
        "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
        *render("-- Process {rank} terminated with the following error:"),
    ]
    v = logsage.analyze_log(lines, logsage.Settings(prefilter="python"))
    assert (v.fault_category, v.primary_ranks, v.fault_type) == ("exception", [5], "WORKLOAD_EXC"), v.detail


def test_a_launchers_report_of_a_child_is_no_launch_failure() -> None:
    """horovodrun raises from its own frames to report the first child to exit: that child's record."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/horovodrun", line 8, in <module>',
        "    sys.exit(run_commandline())",
        '  File "/usr/local/lib/python3.10/site-packages/horovod/runner/gloo_run.py", line 284, in launch_gloo',
        "    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '",
        *render("Process name: {rank}\\nExit code: 1"),
    ]
    v = logsage.analyze_log(lines, logsage.Settings(prefilter="python"))
    assert (v.fault_category, v.primary_ranks) == ("exception", [5]), v.detail


@pytest.mark.parametrize(
    ("text", "rule", "pid"),
    [
        ("Unable to shutdown process 4242 via 15, forcefully exitting via 9", "launcher_kill", 4242),  # torch < 2.0
        (
            "Unable to shutdown process 4242 via 15, forcefully exiting via 9",
            "launcher_kill",
            4242,
        ),  # 2.0; 2.1+ on Python >= 3.11
        (
            "Unable to shutdown process 4242 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL",
            "launcher_kill",
            4242,
        ),
        ("Sending process 4242 closing signal SIGTERM", "launcher_close", 4242),
    ],
)
def test_the_agents_teardown_is_read_in_every_spelling(text: str, rule: str, pid: int) -> None:
    found = classify(text)
    assert found is not None and found[0].name == rule and int(found[1].group("pid")) == pid


def test_every_adapter_row_stands_in_rules_once_and_in_its_order() -> None:
    """rules.RULES is composed of the adapters' rows: none lost, none twice, each adapter's in order."""
    names = [rule.name for rule in rules.RULES]
    for adapter in launchers.ADAPTERS:
        for splice in ("VICTIM_ROWS", "FAILURE_ROWS", "REPORT_ROWS", "WORKER_ROWS"):
            rows = [rule.name for rule in getattr(adapter, splice, ())]
            assert all(names.count(name) == 1 for name in rows), (adapter.__name__, rows)
            assert [names.index(name) for name in rows] == sorted(names.index(name) for name in rows)


def test_every_adapter_row_names_its_program_and_every_launcher_template_its_versions() -> None:
    for adapter in launchers.ADAPTERS:
        for splice in ("VICTIM_ROWS", "FAILURE_ROWS", "REPORT_ROWS", "WORKER_ROWS"):
            assert all(all(rule.origin) for rule in getattr(adapter, splice, ())), adapter.__name__
    unread = [t.where for t in CATALOG if t.where.startswith("launchers.tsv") and t.versions == messages.UNCHECKED]
    assert not unread


def test_wordings_that_changed_have_a_template_per_version() -> None:
    """Where a program changed its words, the catalog holds each version's (the acceptance of issue 25)."""
    for words in ("death signal", "exited on", "ranks:", "auto-requeue signal", "forcefully exit", "non-zero status"):
        versions = {t.versions for t in CATALOG if words in t.template and t.where.startswith("launchers.tsv")}
        assert len(versions) >= 2, (words, versions)

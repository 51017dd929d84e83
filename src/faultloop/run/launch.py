"""run_job for the built-in workload: start one cell's job the way a cluster starts it, record it.

Two layouts (`run_job.launcher`):

* ``torchrun``: one torch launcher per node (`python -m torch.distributed.run --nnodes N
  --node-rank i --nproc-per-node G --max-restarts 0`): every launcher line in the log (worker
  start, failures, SIGTERMs, the failure summary) is torch's own. Static rendezvous on this
  machine, c10d rendezvous under SLURM.
* ``srun``: one process per rank and no torchrun, as many Megatron sbatch scripts run.

faultloop adds only what the scheduler adds: `srun --label` prefixes (the node index under
torchrun, the global rank under srun) and `--kill-on-bad-exit=1`. Inside a SLURM allocation that
is the real srun; elsewhere `LocalSrun` does the same for processes on this machine.

The manifest is read from what torch and the launcher report: torch's worker events (torchrun's
`--event-log-handler console`, kept apart from the main log), the exit codes of the processes
the launcher started, srun's task report, and the fault-injection markers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil

from faultloop.contracts import Manifest, RankExit
from faultloop.core import layout
from faultloop.faults import FAULTS
from faultloop.marker import Marker, is_marker, marker_times, read_marker
from faultloop.run import memcg, slurm
from faultloop.run.spec import FAULT_NODE_ENV, RANK_NODE_RE, RESUME_ENV, JobSpec
from faultloop.run.srun import JobLog, LocalSrun, Task, TaskExit
from faultloop.signals import exit_signal, srun_signal

# Every process of a cell's run carries this in its environment: an earlier attempt's leftovers
# are found by it (stop_leftovers), whatever process group or session they moved to.
CELL_ENV = "FAULTLOOP_CELL"
# srun's own report of a task that ended badly: `srun: error: n1: tasks 2-3: Exited with exit code 1`
SRUN_TASK_RE = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)")
# The rank process: the command-line layer's entry, which parses the rank's options.
RANK_MODULE = "faultloop.cli.workload"


# -- processes ---------------------------------------------------------------------------------


def stop_leftovers(cell_dir: Path, grace_s: float = 2.0) -> list[int]:
    """Kill what an earlier attempt at this cell left running (found by their CELL_ENV)."""
    mark = f"{CELL_ENV}={cell_dir.resolve()}".encode()
    found = []
    for proc in psutil.process_iter():
        try:
            with open(f"/proc/{proc.pid}/environ", "rb") as handle:
                if mark in handle.read().split(b"\0") and proc.pid != os.getpid():
                    found.append(proc)
        except (OSError, psutil.Error):
            continue
    for proc in found:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)
    return [p.pid for p in found]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


# -- the job -----------------------------------------------------------------------------------


class RunJob:
    """One cell: launch, wait, write job.json (or infra_failure.json when the fault never had a
    chance to fire because the job could not run)."""

    def __init__(self, spec: JobSpec, driver_pid: int | None = None) -> None:
        self.spec = spec
        self.driver_pid = driver_pid or os.getppid()  # the job stops once this parent is gone
        self.cell = spec.cell_dir.resolve()
        slurm_job = slurm.job_id()
        self.on_slurm = spec.settings.scheduler == "slurm" or (
            spec.settings.scheduler == "auto" and slurm_job is not None
        )
        self.job_id = slurm_job if self.on_slurm and slurm_job else f"local-{uuid.uuid4().hex[:12]}"
        self.paths = layout.RunPaths(self.job_id)
        hierarchy = memcg.hierarchy()
        # where a rank injecting HOST_OOM puts its memory cgroup; removed after every attempt
        self.memcg_folder = memcg.cell_folder(hierarchy, self.cell) if hierarchy else None

    def workload_argv(self) -> list[str]:
        return ["-m", RANK_MODULE, *self.spec.rank_argv()]

    def torchrun_argv(self, rendezvous: list[str]) -> list[str]:
        s = self.spec
        return [
            s.settings.python,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            str(s.nodes),
            "--nproc-per-node",
            str(s.gpus_per_node),
            *rendezvous,
            "--max-restarts",
            "0",
            "--shutdown-timeout",
            str(int(s.settings.shutdown_timeout_s)),
            "--event-log-handler",
            "console",
            *self.workload_argv(),
        ]

    def env(self) -> dict[str, str]:
        s = self.spec
        injection = s.injection
        env = dict(
            os.environ,
            # upstream's contract; NONE: this attempt injects nothing (a fault that passed, a drained node)
            FAULT_TYPE=s.fault_type if injection else "NONE",
            FAULT_RANK=str(injection.rank if injection else s.rank),
            FAULT_AT_ITER=str(injection.at_iter if injection else s.iter),
            FAULT_DELAY=str(injection.delay_s if injection else s.fault_delay),
            GPUS_PER_NODE=str(s.gpus_per_node),
            EXPERIMENT_DIR=str(self.cell),
            TORCH_FR_DUMP_TEMP_FILE=str(self.cell / layout.FR_DUMP_PREFIX),
            PYTHONUNBUFFERED="1",
            OMP_NUM_THREADS="1",
        )
        env[CELL_ENV] = str(self.cell)
        env.pop(FAULT_NODE_ENV, None)
        if injection and injection.node:
            env[FAULT_NODE_ENV] = injection.node  # the rank on this node with FAULT_RANK's local rank
        env.pop(RESUME_ENV, None)
        if s.resume is not None:
            env[RESUME_ENV] = str(s.resume.folder)
        if self.memcg_folder is not None:
            env[memcg.MEMCG_ENV] = str(self.memcg_folder)
        env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
        src = str(Path(__file__).resolve().parents[2])  # ranks import faultloop from here too
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        return env

    def local_tasks(self, port: int) -> list[Task]:
        """The job as srun would start it on this machine: one task per node or per rank."""
        s, env = self.spec, self.env()
        names = s.local_node_names  # node index -> simulated node (a drained node's index moved to a spare)
        if s.settings.launcher == "torchrun":
            rdzv = ["--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(port)]
            return [
                Task(
                    node,
                    [*self.torchrun_argv([*rdzv, "--node-rank", str(node)])],
                    dict(
                        env,
                        FAULTLOOP_NODE_NAME=names[node],
                        TORCHELASTIC_ERROR_FILE=str(self.cell / self.paths.torchrun_error(node)),
                    ),
                    names[node],
                )
                for node in range(s.nodes)
            ]
        return [
            Task(
                rank,
                [s.settings.python, *self.workload_argv()],
                dict(
                    env,
                    SLURM_PROCID=str(rank),
                    SLURM_LOCALID=str(rank % s.gpus_per_node),
                    SLURM_NODEID=str(rank // s.gpus_per_node),
                    SLURM_NTASKS=str(s.world_size),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    FAULTLOOP_NODE_NAME=names[rank // s.gpus_per_node],
                ),
                names[rank // s.gpus_per_node],
            )
            for rank in range(s.world_size)
        ]

    def slurm_argv(self, hosts: list[str], port: int) -> list[str]:
        """The real srun: one torchrun per node, or one task per rank."""
        s = self.spec
        srun = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}"]
        if s.settings.launcher == "torchrun":
            rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts[0]}:{port}", "--rdzv-id", self.job_id]
            return [*srun, f"--ntasks={s.nodes}", "--ntasks-per-node=1", *self.torchrun_argv(rdzv)]
        return [
            *srun,
            f"--ntasks={s.world_size}",
            f"--ntasks-per-node={s.gpus_per_node}",
            s.settings.python,
            *self.workload_argv(),
        ]

    def prepare(self) -> None:
        stop_leftovers(self.cell)
        if self.memcg_folder is not None:
            memcg.remove_folder(self.memcg_folder)  # what an interrupted attempt left
        for sub in layout.CELL_SUBDIRS:
            (self.cell / sub).mkdir(parents=True, exist_ok=True)
        for stale in [
            self.cell / layout.MANIFEST,
            self.cell / layout.INFRA_FAILURE,
            *(self.cell / layout.FR_DUMP_PREFIX).parent.glob("_dump_*"),
        ]:
            stale.unlink(missing_ok=True)

    def run(self) -> int:
        """Run the job; its processes and the cell's memory cgroups are gone however it ends, also
        when the workflow stops run_job with SIGTERM or SIGHUP (a SIGKILL leaves them to the next
        attempt). A rank whose launcher was killed would live on otherwise: a job step ends with
        none of its processes left, as SLURM's does."""
        previous = _exit_on_termination()
        try:
            return self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            stop_leftovers(self.cell)
            if self.memcg_folder is not None:
                removed = memcg.remove_folder(self.memcg_folder)
                if removed:
                    when = f"{dt.datetime.now():%Y-%m-%d %H:%M:%S}"
                    with open(self.cell / self.paths.launch_out, "a") as out:
                        out.writelines(f"[{when}] memory cgroup {name}: oom_kill {n}, removed\n" for name, n in removed)

    def _run(self) -> int:
        s = self.spec
        self.prepare()
        start = time.time()
        start_monotonic = time.monotonic()
        deadline = start + s.settings.job_timeout_s
        with (
            open(self.cell / self.paths.launch_out, "a", buffering=1) as out,
            open(self.cell / self.paths.main_log, "ab") as log,
            open(self.cell / self.paths.events, "ab") as events,
        ):

            def note(msg: str) -> None:
                out.write(f"[{dt.datetime.now():%Y-%m-%d %H:%M:%S}] {msg}\n")

            if s.attempts > 1:
                note(self.life_summary())

            joblog = JobLog(log, events)
            port = free_port()
            if self.on_slurm:
                hosts = slurm.nodes()
                argv = self.slurm_argv(hosts, port)
                note(f"job {self.job_id}: {shlex.join(argv)}")
                if kept := sorted(set(hosts) & set(s.drained)):
                    note(f"the allocation holds drained node(s) {', '.join(kept)}: was it submitted without --exclude?")
                exits, timed_out = self._run_srun(
                    argv, joblog, deadline, dict(self.env(), MASTER_ADDR=hosts[0], MASTER_PORT=str(port))
                )
                node_names = hosts
            else:
                tasks = self.local_tasks(port)
                note(
                    f"job {self.job_id}: {s.settings.launcher} layout, {len(tasks)} task(s) on this machine, "
                    f"first: {shlex.join(tasks[0].argv)}"
                )
                parent = self.driver_pid
                exits, timed_out = LocalSrun(
                    joblog, s.settings.term_delay_s, s.settings.kill_grace_s, f"{self.job_id}.0"
                ).run(tasks, deadline, driver_alive=lambda: os.getppid() == parent)
                if os.getppid() != parent:
                    note("the process that started this job is gone: every task was stopped, nothing recorded")
                    raise SystemExit(1)
                node_names = s.local_node_names
            for e in exits:
                note(f"task {e.label} exited with code {e.exitcode}" + (" after being signalled" if e.stopped else ""))
            if self.memcg_folder is not None:
                # the job's epilog: the kernel's lines about the job's own cgroups, as journald frames them
                kernel = memcg.kernel_lines(self.memcg_folder, start_monotonic, time.monotonic())
                log.writelines(f"{line}\n".encode() for line in kernel)
                if kernel:
                    note(f"appended {len(kernel)} kernel log line(s) about the job's memory cgroups")
            manifest = self.manifest(start, time.time(), exits, timed_out, node_names, joblog.last)
            infra = manifest.state != "COMPLETED" and not manifest.fault_fired
            note(
                f"job {self.job_id} ended: state {manifest.state}, "
                + (f"infrastructure failure: {manifest.invalid_reason}" if infra else f"run_valid {manifest.run_valid}")
            )
        manifest.write(self.cell / (layout.INFRA_FAILURE if infra else layout.MANIFEST))
        if infra:
            print(
                f"faultloop run-job: infrastructure failure in {self.cell.name}: {manifest.invalid_reason}",
                file=sys.stderr,
            )
            return 1
        return 0

    def life_summary(self) -> str:
        """What this attempt of a job's life is, for launch.out."""
        s = self.spec
        injection = s.injection
        if injection is None:
            injects = f"injects nothing ({s.fault_type} {FAULTS[s.fault_type].on_restart})"
        else:
            where = f"node {injection.node}" if injection.node else f"rank {injection.rank}"
            injects = f"injects {s.fault_type} on {where} from iteration {injection.at_iter} + {injection.delay_s:g} s"
        return (
            f"attempt {s.attempt} of {s.attempts}: "
            + (f"resumes from the checkpoint of iteration {s.resume.iteration}" if s.resume else "starts from scratch")
            + (f", without drained node(s) {', '.join(s.drained)}" if s.drained else "")
            + f", {injects}"
        )

    def _run_srun(
        self, argv: list[str], joblog: JobLog, deadline: float, env: dict[str, str]
    ) -> tuple[list[TaskExit], bool]:
        """Run the real srun; its exit code stands for every task it started."""
        proc = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert proc.stdout is not None
        pump = joblog.pump(proc.stdout, None)
        timed_out = False
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.send_signal(signal.SIGTERM)  # srun forwards it to every task
            try:
                code = proc.wait(timeout=self.spec.settings.kill_grace_s + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        pump.join(timeout=5)
        return [TaskExit(0, code, time.time(), timed_out)], timed_out

    def rank_exits(self, exits: list[TaskExit]) -> dict[int, RankExit]:
        """How each rank ended, from what the launcher reports: torch's worker events under
        torchrun, the exit codes of the rank processes (local srun) or srun's task report."""
        s = self.spec
        ranks = {r: RankExit(rank=r) for r in range(s.world_size)}
        if s.settings.launcher == "torchrun":
            ranks.update(read_worker_events(self.cell / self.paths.events))
            for e in exits:  # a node launcher stopped before torch reported its workers
                if e.stopped and not self.on_slurm:
                    for r in range(e.label * s.gpus_per_node, (e.label + 1) * s.gpus_per_node):
                        if ranks[r].state == "UNKNOWN":
                            ranks[r] = RankExit(rank=r, state="TERMINATED")
        elif not self.on_slurm:
            for e in exits:
                state = "SUCCEEDED" if e.exitcode == 0 else "TERMINATED" if e.stopped else "FAILED"
                ranks[e.label] = RankExit(
                    e.label, _as_returncode(e.exitcode), exit_signal(_as_returncode(e.exitcode)), state
                )
        else:
            main_log = (self.cell / self.paths.main_log).read_text(errors="replace").splitlines()
            ranks.update(read_srun_report(main_log))
        return ranks

    def manifest(
        self,
        start: float,
        end: float,
        exits: list[TaskExit],
        timed_out: bool,
        node_names: list[str],
        last_lines: dict[int, str],
    ) -> Manifest:
        s = self.spec
        lines = (self.cell / self.paths.main_log).read_text(errors="replace").splitlines()
        injected = self.injected(lines)
        fault_rank = injected.rank if injected else s.injection.rank if s.injection and not s.injection.node else s.rank
        scheduled, fired = marker_times(lines, fault_rank)
        on_node = rank_nodes(lines)
        ranks = self.rank_exits(exits)
        failed = [e for e in exits if e.exitcode != 0]
        state = "TIMEOUT" if timed_out else "FAILED" if failed else "COMPLETED"
        # attempt >= 2 of a job's life where nothing was to fire (a fault that passed, a drained node)
        unscheduled = s.attempt > 1 and s.injection is None
        reason = None
        if fired is None and state == "COMPLETED" and unscheduled:
            pass
        elif fired is None and state == "COMPLETED" and s.attempt > 1:
            reason = f"the fault was to fire again ({FAULTS[s.fault_type].on_restart}) but the job completed without it"
        elif fired is None and state == "COMPLETED":
            reason = (
                f"fault never fired: the job completed all {s.settings.iterations} iterations before "
                f"iteration {s.iter} + {s.fault_delay:g} s"
            )
        elif fired is None:
            first = min(failed, key=lambda e: e.time) if failed else None
            errors = [r.error for r in ranks.values() if r.error]
            said = errors[0] if errors else last_lines.get(first.label, "(no output)") if first else ""
            why = f"task {first.label} ended with exit code {first.exitcode}: {said}" if first else f"state {state}"
            reason = f"job failed before the fault fired ({why})"
        return Manifest(
            job_id=self.job_id,
            workload="cpu_gloo",
            launcher=s.settings.launcher,
            fault_type=s.fault_type,
            fault_rank=fault_rank,
            fault_iter=s.iter,
            nodes=s.nodes,
            gpus_per_node=s.gpus_per_node,
            world_size=s.world_size,
            state=state,
            main_log=self.paths.main_log,
            launch_out=self.paths.launch_out,
            node_names=by_node_rank(node_names, on_node, s.gpus_per_node),
            rank_exits=[ranks[r] for r in sorted(ranks)],
            start_time=start,
            fault_scheduled_time=scheduled,
            fault_fired_time=fired,
            end_time=end,
            fault_fired=fired is not None,
            run_valid=fired is not None or (state == "COMPLETED" and unscheduled),
            invalid_reason=reason,
            attempt=s.attempt,
            attempts=s.attempts,
            resumed_from_iter=s.resume.iteration if s.resume else None,
            drained_nodes=list(s.drained),
            fault_node=on_node.get(fault_rank) if injected or s.injection else None,
            fault_fired_iter=injected.iteration if injected and fired is not None else None,
        )

    @staticmethod
    def injected(lines: list[str]) -> Marker | None:
        """The marker of the rank that fired the fault (or only scheduled it), if any did."""
        markers = [m for line in lines if is_marker(line) and (m := read_marker(line))]
        return next((m for m in markers if m.fired), markers[0] if markers else None)


def rank_nodes(lines: Iterable[str]) -> dict[int, str]:
    """Each rank's node, as the rank stated it at start."""
    return {int(m[1]): m[2] for line in lines if (m := RANK_NODE_RE.search(line))}


def by_node_rank(hosts: list[str], on_node: dict[int, str], gpus_per_node: int) -> list[str]:
    """The allocation's node names in node-rank order (node i holds ranks i*G ...): torch's c10d
    rendezvous assigns node ranks itself, so the allocation's order need not be theirs. Where the
    ranks' own statements do not give every node once, the allocation's order is kept."""
    ordered = [on_node.get(node * gpus_per_node) for node in range(len(hosts))]
    if sorted(n for n in ordered if n) == sorted(hosts) and all(ordered):
        return [n for n in ordered if n]
    return list(hosts)


def _exit_on_termination() -> dict[signal.Signals, Any]:
    """SIGTERM and SIGHUP raise SystemExit (so cleanup runs) while a job runs; the previous handlers."""

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, leave) for sig in (signal.SIGTERM, signal.SIGHUP)}


def _as_returncode(code: int) -> int:
    """Popen's code for a signal death is -signal; a shell's is 128 + signal."""
    return code - 256 if code > 128 + 64 else code


def read_worker_events(path: Path) -> dict[int, RankExit]:
    """Per-rank exits from torch's worker events (`torchelastic.worker.status.<STATE>`, source
    WORKER): FAILED with the exit code and the worker's recorded error, SUCCEEDED, or TERMINATED
    (stopped by its agent after another worker failed)."""
    ranks: dict[int, RankExit] = {}
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        try:
            event = json.loads(line)
            meta = event["metadata"]
            if event.get("source") != "WORKER" or meta.get("global_rank") is None:
                continue
            state = str(meta.get("state"))
            if state not in ("FAILED", "SUCCEEDED", "TERMINATED"):
                continue
            detail = json.loads(meta.get("metadata") or "{}")
            code = (detail.get("exit_code") or [None])[0]
            error = json.loads(meta["raw_error"]).get("message") if meta.get("raw_error") else None
            message = error.get("message") if isinstance(error, dict) else None
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        rank = int(meta["global_rank"])
        ranks[rank] = RankExit(rank, code if state != "SUCCEEDED" else 0, exit_signal(code), state, message)
    return ranks


def read_srun_report(lines: Iterable[str]) -> dict[int, RankExit]:
    """Per-rank exits from srun's own report lines (`srun: error: n1: task 3: Killed`)."""
    ranks: dict[int, RankExit] = {}
    for line in lines:
        m = SRUN_TASK_RE.search(line)
        if not m:
            continue
        what = m.group(3).strip()
        sig = srun_signal(what)
        code = re.search(r"exit code (\d+)", what)
        exitcode = -signal.Signals[sig].value if sig else int(code.group(1)) if code else None
        for rank in _task_ids(m.group(2)):
            ranks.setdefault(rank, RankExit(rank, exitcode, sig, "FAILED"))
    return ranks


def _task_ids(text: str) -> Iterator[int]:
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        yield from range(int(lo), int(hi or lo) + 1)

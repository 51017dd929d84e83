"""run_job: start one cell's job the way a cluster starts it, record it.

The cell's workload (a row of faultloop.frameworks.FRAMEWORKS: its rank module) runs under the
cell's launcher (a row of faultloop.run.launchers.LAUNCHERS: torchrun or an MPI's launcher on
each node or for the whole job, srun per rank, a framework's own). The log is what the launcher
and the workload print; faultloop adds only what the scheduler adds (`srun --label` prefixes and
`--kill-on-bad-exit=1` where srun starts the launchers) and the fault's marker. Inside a SLURM
allocation srun is the real one; elsewhere `LocalSrun` does the same for processes on this machine.

The manifest is read from what the launcher reports (faultloop.run.launchers: torch's worker
events, srun's task report, an MPI's abort summary) and the fault-injection markers.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from faultloop.contracts import Manifest
from faultloop.core import layout
from faultloop.faults import FAULTS
from faultloop.frameworks import FRAMEWORKS
from faultloop.marker import Marker, is_marker, marker_times, read_marker
from faultloop.run import memcg, slurm
from faultloop.run.launchers import LAUNCHERS
from faultloop.run.launchers.base import JobEnd, LaunchJob
from faultloop.run.launchers.rank_records import RANK_EXIT_ENV
from faultloop.run.spec import FAULT_NODE_ENV, RANK_NODE_RE, RESUME_ENV, JobSpec
from faultloop.run.srun import JobLog, LocalSrun, TaskExit

# Every process of a cell's run carries this in its environment: an earlier attempt's leftovers
# are found by it (stop_leftovers), whatever process group or session they moved to.
CELL_ENV = "FAULTLOOP_CELL"


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
        self.launcher = LAUNCHERS[spec.launcher_name]

    def rank_command(self) -> tuple[str, ...]:
        """The workload's rank process: its module (the command-line layer's entry, which parses
        the rank's options) and options."""
        return (self.spec.settings.python, "-m", FRAMEWORKS[self.spec.workload].module, *self.spec.rank_argv())

    def launch_job(self, port: int) -> LaunchJob:
        return LaunchJob(self.spec, self.rank_command(), self.env(), port, self.job_id, self.cell, self.paths)

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
        env[RANK_EXIT_ENV] = str(self.cell / self.paths.rank_exit_prefix)
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
            *(self.cell / layout.SLURM_LOGS).glob(f"{Path(self.paths.rank_exit_prefix).name}*"),
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
            job = self.launch_job(free_port())
            if self.on_slurm:
                hosts = slurm.nodes()
                argv = self.launcher.allocation_argv(job, hosts)
                note(f"job {self.job_id}: {shlex.join(argv)}")
                if kept := sorted(set(hosts) & set(s.drained)):
                    note(f"the allocation holds drained node(s) {', '.join(kept)}: was it submitted without --exclude?")
                exits, timed_out = self._run_allocation(
                    argv, joblog, deadline, dict(job.env, MASTER_ADDR=hosts[0], MASTER_PORT=str(job.port))
                )
                node_names = hosts
            else:
                tasks = [replace(t, srun=self.launcher.srun_lines) for t in self.launcher.local_tasks(job)]
                note(
                    f"job {self.job_id}: {s.workload} under {s.launcher_name}, {len(tasks)} task(s) on this machine, "
                    f"first: {shlex.join(tasks[0].argv)}"
                )
                parent = self.driver_pid
                exits, timed_out = LocalSrun(
                    joblog, s.settings.term_delay_s, s.settings.kill_grace_s, f"{self.job_id}.0"
                ).run(
                    tasks,
                    deadline,
                    driver_alive=lambda: os.getppid() == parent,
                )
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
            manifest = self.manifest(
                start,
                time.time(),
                JobEnd(job, exits, self.on_slurm, ()),
                timed_out,
                node_names,
                joblog.last,
            )
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

    def _run_allocation(
        self, argv: list[str], joblog: JobLog, deadline: float, env: dict[str, str]
    ) -> tuple[list[TaskExit], bool]:
        """Run the launcher inside the allocation (srun, or an MPI's launcher that starts its own
        daemons); its exit code stands for every task it started."""
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
        joblog.close()
        return [TaskExit(0, code, time.time(), timed_out)], timed_out

    def manifest(
        self,
        start: float,
        end_time: float,
        end: JobEnd,
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
        ranks = self.launcher.rank_exits(replace(end, lines=lines))
        failed = [e for e in end.exits if e.exitcode != 0]
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
            workload=s.workload,
            launcher=s.launcher_name,
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
            end_time=end_time,
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

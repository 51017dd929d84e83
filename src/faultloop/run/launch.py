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

import argparse
import ctypes
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from faultloop.contracts import Manifest, RankExit, signal_name
from faultloop.faults import FAULTS
from faultloop.plan import layout
from faultloop.run import slurm

LAYOUTS = ("torchrun", "srun")
POLL_S = 0.1
# Every process of a cell's run carries this in its environment: an earlier attempt's leftovers
# are found by it (stop_leftovers), whatever process group or session they moved to.
CELL_ENV = "FAULTLOOP_CELL"
MARKER_TIME_RE = re.compile(
    r"^\d+: \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] FAULT INJECTION: Rank (\d+) "
    r"(will inject fault|firing fault) (\w+)"
)
# torch's worker events (one JSON object per line), after an optional srun label
EVENT_RE = re.compile(rb'^(?:\s*\d+: )?(\{"name": "torchelastic\.)')
# srun's own report of a task that ended badly: `srun: error: n1: tasks 2-3: Exited with exit code 1`
SRUN_TASK_RE = re.compile(r"srun: error: (\S+): tasks? ([\d,\-]+): (.*)")
SRUN_WORDS = {
    "Killed": "SIGKILL",
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Terminated": "SIGTERM",
    "Interrupt": "SIGINT",
    "Bus error": "SIGBUS",
}


# -- processes ---------------------------------------------------------------------------------


def _task_preexec() -> None:
    """preexec_fn of a task: default signal dispositions, as slurmstepd starts tasks (a shell that
    started us in the background ignores SIGINT and SIGQUIT, and exec keeps that), and SIGKILL when
    this process dies (Linux prctl PR_SET_PDEATHSIG)."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def signal_tree(pid: int, sig: signal.Signals) -> None:
    """Signal a process and every descendant (torchrun's workers run in sessions of their own)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


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


# -- the job's output --------------------------------------------------------------------------


class JobLog:
    """The main log as srun writes it: whole lines, each with its task's label. torch's worker
    events go to their own file; the last line of each label explains an early death.

    The real srun cuts lines longer than its buffer (1 KiB) into labelled pieces; an event's
    pieces are joined again (they follow each other within their label)."""

    MAX_PIECES = 64

    def __init__(self, log: IO[bytes], events: IO[bytes]) -> None:
        self._log = log
        self._events = events
        self._lock = threading.Lock()
        self._pending: dict[bytes, list[bytes]] = {}  # srun label -> pieces of an event so far
        self.last: dict[int, str] = {}

    def line(self, label: int | None, raw: bytes) -> None:
        """One line of a task's output; label None: the line already carries srun's label."""
        data = raw.rstrip(b"\r\n")
        with self._lock:
            if label is None:
                self._srun_line(data)
                return
            if EVENT_RE.match(data):
                self._event(data[data.index(b"{") :])
                return
            if raw.strip():
                self.last[label] = raw.strip().decode(errors="replace")
            self._write(f"{label}: ".encode() + data)

    def _srun_line(self, data: bytes) -> None:
        tag, sep, text = data.partition(b": ")
        tag = tag.strip() if sep and tag.strip().isdigit() else b""
        pieces = self._pending.get(tag)
        if pieces is not None:
            pieces.append(text)
            joined = b"".join(pieces)
            if _is_json(joined):
                del self._pending[tag]
                self._event(joined)
            elif len(pieces) >= self.MAX_PIECES:
                self._give_back(tag)
            return
        if EVENT_RE.match(data):
            event = data[data.index(b"{") :]
            if _is_json(event):
                self._event(event)
            else:
                self._pending[tag] = [event]
            return
        self._write(data)

    def srun(self, text: str) -> None:
        """A line srun prints itself (on its stderr, unlabelled)."""
        with self._lock:
            self._write(text.encode())

    def _give_back(self, tag: bytes) -> None:
        """Pieces that never made an event are ordinary lines after all."""
        for piece in self._pending.pop(tag):
            self._write(tag + b": " + piece if tag else piece)

    def finish(self) -> None:
        with self._lock:
            for tag in list(self._pending):
                self._give_back(tag)

    def _event(self, event: bytes) -> None:
        self._events.write(event + b"\n")
        self._events.flush()

    def _write(self, data: bytes) -> None:
        self._log.write(data + b"\n")
        self._log.flush()

    def pump(self, source: IO[bytes], label: int | None) -> threading.Thread:
        def run() -> None:
            for raw in iter(source.readline, b""):
                self.line(label, raw)
            source.close()
            if label is None:
                self.finish()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


@dataclass
class Task:
    """One srun task: its label (task id), command line, environment and node."""

    label: int
    argv: list[str]
    env: dict[str, str]
    node: str = "node0"


@dataclass
class TaskExit:
    label: int
    exitcode: int
    time: float
    stopped: bool  # it ended after kill-on-bad-exit or the time limit signalled it


class LocalSrun:
    """`srun --label --kill-on-bad-exit=1` for tasks on this machine.

    Every line a task prints gets its label; srun reports every task that ends badly (`srun:
    error: <node>: task <id>: <how>`); when a task exits non-zero the others get SIGTERM after
    `term_delay_s` (their own failures surface first, as srun's step teardown allows) and SIGKILL
    `kill_wait_s` later (SLURM's KillWait). Signals reach each task's whole process tree, as
    slurmstepd signals every process of a step.
    """

    def __init__(self, log: JobLog, term_delay_s: float, kill_wait_s: float, step_id: str = "0.0") -> None:
        self.log = log
        self.term_delay_s = term_delay_s
        self.kill_wait_s = kill_wait_s
        self.step_id = step_id

    def run(
        self, tasks: list[Task], deadline: float, driver_alive: Callable[[], bool] = lambda: True
    ) -> tuple[list[TaskExit], bool]:
        """Run the tasks to the end; returns their exits and whether the time limit was hit.

        When the driver is gone (Snakemake killed), every task is stopped at once: SIGTERM, then
        SIGKILL a second later, so no rank outlives the run that started it."""
        procs: dict[int, subprocess.Popen[bytes]] = {}
        exits: dict[int, TaskExit] = {}
        pumps = []
        for task in tasks:
            try:
                proc = subprocess.Popen(
                    task.argv,
                    env=task.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_task_preexec,
                )
            except OSError as exc:
                self.log.line(task.label, f"{task.argv[0]}: {exc.strerror or exc}".encode())
                exits[task.label] = TaskExit(task.label, 127, time.time(), False)
                self._report(task, 127)
                continue
            procs[task.label] = proc
            assert proc.stdout is not None
            pumps.append(self.log.pump(proc.stdout, task.label))
        by_label = {t.label: t for t in tasks}
        bad_at = min((e.time for e in exits.values() if e.exitcode), default=None)
        termed_at: float | None = None
        timed_out = killed = False
        while len(exits) < len(tasks):
            now = time.time()
            if not driver_alive() and termed_at is None:
                termed_at, self.kill_wait_s = now, min(self.kill_wait_s, 1.0)
                self._signal(procs, exits, signal.SIGTERM)
            for label, proc in procs.items():
                if label not in exits and (code := proc.poll()) is not None:
                    exits[label] = TaskExit(label, code, now, termed_at is not None)
                    self._report(by_label[label], code)
                    if code and bad_at is None:
                        bad_at = now
            if termed_at is None and (now >= deadline or (bad_at is not None and now >= bad_at + self.term_delay_s)):
                timed_out = now >= deadline and (bad_at is None or now < bad_at + self.term_delay_s)
                termed_at = now
                if not timed_out and len(exits) < len(tasks):
                    self.log.srun(f"srun: launch/slurm: _step_signal: Terminating StepId={self.step_id}")
                self._signal(procs, exits, signal.SIGTERM)
            elif termed_at is not None and not killed and now >= termed_at + self.kill_wait_s:
                killed = True
                self._signal(procs, exits, signal.SIGKILL)
            time.sleep(POLL_S)
        for thread in pumps:
            thread.join(timeout=5)
        return [exits[t.label] for t in tasks], timed_out

    def _report(self, task: Task, code: int) -> None:
        """srun's own line for a task that ended badly (its wording: strsignal for a signal)."""
        if code == 0:
            return
        how = f"Exited with exit code {code}" if code > 0 else signal.strsignal(-code) or f"Signal {-code}"
        self.log.srun(f"srun: error: {task.node}: task {task.label}: {how}")

    @staticmethod
    def _signal(procs: dict[int, subprocess.Popen[bytes]], exits: dict[int, TaskExit], sig: signal.Signals) -> None:
        for label, proc in procs.items():
            if label not in exits:
                signal_tree(proc.pid, sig)


# -- the job -----------------------------------------------------------------------------------


@dataclass
class JobSpec:
    """One cell's job: the fault, the shape, the layout and the timing knobs."""

    cell_dir: Path
    fault_type: str
    rank: int
    iter: int
    nodes: int
    gpus_per_node: int
    launcher: str = "torchrun"
    fault_delay: float = 0.0
    iterations: int = 30
    iter_time_s: float = 0.1
    pg_timeout_s: float = 15.0
    init_timeout_s: float = 0.0  # 0: 60 s + 3 s per rank
    stall_timeout_s: float = 8.0
    term_delay_s: float = 2.0
    kill_grace_s: float = 3.0
    shutdown_timeout_s: float = 30.0
    job_timeout_s: float = 600.0
    python: str = sys.executable
    scheduler: str = "auto"  # auto | local | slurm

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node


class RunJob:
    """One cell: launch, wait, write job.json (or infra_failure.json when the fault never had a
    chance to fire because the job could not run)."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.cell = spec.cell_dir.resolve()
        slurm_job = slurm.job_id()
        self.on_slurm = spec.scheduler == "slurm" or (spec.scheduler == "auto" and slurm_job is not None)
        self.job_id = slurm_job if self.on_slurm and slurm_job else f"local-{uuid.uuid4().hex[:12]}"
        self.paths = layout.RunPaths(self.job_id)

    def workload_argv(self) -> list[str]:
        s = self.spec
        init_timeout = s.init_timeout_s or 60.0 + 3.0 * s.world_size
        return [
            "-m",
            "faultloop.run.workload",
            "--iterations",
            str(s.iterations),
            "--iter-time-s",
            str(s.iter_time_s),
            "--pg-timeout-s",
            str(s.pg_timeout_s),
            "--init-timeout-s",
            str(init_timeout),
            "--stall-timeout-s",
            str(s.stall_timeout_s),
        ]

    def torchrun_argv(self, rendezvous: list[str]) -> list[str]:
        s = self.spec
        return [
            s.python,
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
            str(int(s.shutdown_timeout_s)),
            "--event-log-handler",
            "console",
            *self.workload_argv(),
        ]

    def env(self) -> dict[str, str]:
        s = self.spec
        env = dict(
            os.environ,
            FAULT_TYPE=s.fault_type,
            FAULT_RANK=str(s.rank),
            FAULT_AT_ITER=str(s.iter),
            FAULT_DELAY=str(s.fault_delay),
            GPUS_PER_NODE=str(s.gpus_per_node),
            EXPERIMENT_DIR=str(self.cell),
            TORCH_FR_DUMP_TEMP_FILE=str(self.cell / layout.FR_DUMP_PREFIX),
            PYTHONUNBUFFERED="1",
            OMP_NUM_THREADS="1",
        )
        env[CELL_ENV] = str(self.cell)
        env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
        src = str(Path(__file__).resolve().parents[2])  # ranks import faultloop from here too
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        return env

    def local_tasks(self, port: int) -> list[Task]:
        """The job as srun would start it on this machine: one task per node or per rank."""
        s, env = self.spec, self.env()
        if s.launcher == "torchrun":
            rdzv = ["--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(port)]
            return [
                Task(
                    node,
                    [*self.torchrun_argv([*rdzv, "--node-rank", str(node)])],
                    dict(
                        env,
                        FAULTLOOP_NODE_NAME=f"node{node}",
                        TORCHELASTIC_ERROR_FILE=str(self.cell / self.paths.torchrun_error(node)),
                    ),
                    f"node{node}",
                )
                for node in range(s.nodes)
            ]
        return [
            Task(
                rank,
                [s.python, *self.workload_argv()],
                dict(
                    env,
                    SLURM_PROCID=str(rank),
                    SLURM_LOCALID=str(rank % s.gpus_per_node),
                    SLURM_NODEID=str(rank // s.gpus_per_node),
                    SLURM_NTASKS=str(s.world_size),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                    FAULTLOOP_NODE_NAME=f"node{rank // s.gpus_per_node}",
                ),
                f"node{rank // s.gpus_per_node}",
            )
            for rank in range(s.world_size)
        ]

    def slurm_argv(self, hosts: list[str], port: int) -> list[str]:
        """The real srun: one torchrun per node, or one task per rank."""
        s = self.spec
        srun = ["srun", "--label", "--kill-on-bad-exit=1", f"--nodes={s.nodes}"]
        if s.launcher == "torchrun":
            rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts[0]}:{port}", "--rdzv-id", self.job_id]
            return [*srun, f"--ntasks={s.nodes}", "--ntasks-per-node=1", *self.torchrun_argv(rdzv)]
        return [
            *srun,
            f"--ntasks={s.world_size}",
            f"--ntasks-per-node={s.gpus_per_node}",
            s.python,
            *self.workload_argv(),
        ]

    def prepare(self) -> None:
        stop_leftovers(self.cell)
        for sub in layout.CELL_SUBDIRS:
            (self.cell / sub).mkdir(parents=True, exist_ok=True)
        for stale in [
            self.cell / layout.MANIFEST,
            self.cell / layout.INFRA_FAILURE,
            *(self.cell / layout.FR_DUMP_PREFIX).parent.glob("_dump_*"),
        ]:
            stale.unlink(missing_ok=True)

    def run(self) -> int:
        s = self.spec
        self.prepare()
        start = time.time()
        deadline = start + s.job_timeout_s
        with (
            open(self.cell / self.paths.launch_out, "a", buffering=1) as out,
            open(self.cell / self.paths.main_log, "ab") as log,
            open(self.cell / self.paths.events, "ab") as events,
        ):

            def note(msg: str) -> None:
                out.write(f"[{dt.datetime.now():%Y-%m-%d %H:%M:%S}] {msg}\n")

            joblog = JobLog(log, events)
            port = free_port()
            if self.on_slurm:
                hosts = slurm.nodes()
                argv = self.slurm_argv(hosts, port)
                note(f"job {self.job_id}: {shlex.join(argv)}")
                exits, timed_out = self._run_srun(
                    argv, joblog, deadline, dict(self.env(), MASTER_ADDR=hosts[0], MASTER_PORT=str(port))
                )
                node_names = hosts
            else:
                tasks = self.local_tasks(port)
                note(
                    f"job {self.job_id}: {s.launcher} layout, {len(tasks)} task(s) on this machine, "
                    f"first: {shlex.join(tasks[0].argv)}"
                )
                parent = os.getppid()
                exits, timed_out = LocalSrun(joblog, s.term_delay_s, s.kill_grace_s, f"{self.job_id}.0").run(
                    tasks, deadline, driver_alive=lambda: os.getppid() == parent
                )
                if os.getppid() != parent:
                    note("the process that started this job is gone: every task was stopped, nothing recorded")
                    raise SystemExit(1)
                node_names = [f"node{i}" for i in range(s.nodes)]
            for e in exits:
                note(f"task {e.label} exited with code {e.exitcode}" + (" after being signalled" if e.stopped else ""))
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
                code = proc.wait(timeout=self.spec.kill_grace_s + 30)
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
        if s.launcher == "torchrun":
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
                    e.label, _as_returncode(e.exitcode), signal_name(_as_returncode(e.exitcode)), state
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
        scheduled, fired = parse_markers(lines, s.rank)
        ranks = self.rank_exits(exits)
        failed = [e for e in exits if e.exitcode != 0]
        state = "TIMEOUT" if timed_out else "FAILED" if failed else "COMPLETED"
        reason = None
        if fired is None and state == "COMPLETED":
            reason = (
                f"fault never fired: the job completed all {s.iterations} iterations before "
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
            launcher=s.launcher,
            fault_type=s.fault_type,
            fault_rank=s.rank,
            fault_iter=s.iter,
            nodes=s.nodes,
            gpus_per_node=s.gpus_per_node,
            world_size=s.world_size,
            state=state,
            main_log=self.paths.main_log,
            launch_out=self.paths.launch_out,
            node_names=node_names,
            rank_exits=[ranks[r] for r in sorted(ranks)],
            start_time=start,
            fault_scheduled_time=scheduled,
            fault_fired_time=fired,
            end_time=end,
            fault_fired=fired is not None,
            run_valid=fired is not None,
            invalid_reason=reason,
        )


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
        ranks[rank] = RankExit(rank, code if state != "SUCCEEDED" else 0, signal_name(code), state, message)
    return ranks


def read_srun_report(lines: Iterable[str]) -> dict[int, RankExit]:
    """Per-rank exits from srun's own report lines (`srun: error: n1: task 3: Killed`)."""
    ranks: dict[int, RankExit] = {}
    for line in lines:
        m = SRUN_TASK_RE.search(line)
        if not m:
            continue
        what = m.group(3).strip()
        sig = next((s for word, s in SRUN_WORDS.items() if what.startswith(word)), None)
        code = re.search(r"exit code (\d+)", what)
        exitcode = -signal.Signals[sig].value if sig else int(code.group(1)) if code else None
        for rank in _task_ids(m.group(2)):
            ranks.setdefault(rank, RankExit(rank, exitcode, sig, "FAILED"))
    return ranks


def _task_ids(text: str) -> Iterator[int]:
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        yield from range(int(lo), int(hi or lo) + 1)


def parse_markers(lines: Iterable[str], rank: int) -> tuple[float | None, float | None]:
    """(scheduled, fired) times of the injected rank's marker lines."""
    scheduled = fired = None
    for line in lines:
        m = MARKER_TIME_RE.match(line)
        if not m or int(m.group(2)) != rank:
            continue
        t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp()
        if m.group(3) == "will inject fault" and scheduled is None:
            scheduled = t
        elif m.group(3) == "firing fault" and fired is None:
            fired = t
    return scheduled, fired


# -- CLI ---------------------------------------------------------------------------------------


def add_job_args(parser: argparse.ArgumentParser) -> None:
    """The launcher options run_job's rule passes (after `--`) and `faultloop run-job` takes."""
    d = JobSpec(Path("."), "", 0, 0, 1, 1)
    parser.add_argument(
        "--launcher",
        choices=LAYOUTS,
        default=d.launcher,
        help="torchrun: one torch launcher per node; srun: one process per rank",
    )
    parser.add_argument(
        "--scheduler",
        choices=("auto", "local", "slurm"),
        default=d.scheduler,
        help="auto: the real srun inside a SLURM allocation, else this machine",
    )
    parser.add_argument("--iterations", type=int, default=d.iterations)
    parser.add_argument("--iter-time-s", type=float, default=d.iter_time_s)
    parser.add_argument("--pg-timeout-s", type=float, default=d.pg_timeout_s, help="collective timeout")
    parser.add_argument(
        "--init-timeout-s", type=float, default=d.init_timeout_s, help="rendezvous timeout (0: 60 s + 3 s per rank)"
    )
    parser.add_argument(
        "--stall-timeout-s",
        type=float,
        default=d.stall_timeout_s,
        help="no progress for this long: ranks log stacks and dump FR",
    )
    parser.add_argument(
        "--term-delay-s",
        type=float,
        default=d.term_delay_s,
        help="kill-on-bad-exit: after a task failed, the others get SIGTERM this much later",
    )
    parser.add_argument(
        "--kill-grace-s",
        type=float,
        default=d.kill_grace_s,
        help="kill-on-bad-exit: SIGTERM to SIGKILL (SLURM's KillWait)",
    )
    parser.add_argument(
        "--shutdown-timeout-s",
        type=float,
        default=d.shutdown_timeout_s,
        help="torchrun --shutdown-timeout: SIGTERM to SIGKILL of its workers",
    )
    parser.add_argument("--job-timeout-s", type=float, default=d.job_timeout_s)
    parser.add_argument("--python", default=d.python, help="interpreter for the launchers and ranks")


def spec_from_args(
    args: argparse.Namespace,
    cell_dir: Path,
    fault_type: str,
    rank: int,
    iter_: int,
    nodes: int,
    gpus_per_node: int,
    fault_delay: float,
) -> JobSpec:
    return JobSpec(
        cell_dir,
        fault_type,
        rank,
        iter_,
        nodes,
        gpus_per_node,
        launcher=args.launcher,
        fault_delay=fault_delay,
        iterations=args.iterations,
        iter_time_s=args.iter_time_s,
        pg_timeout_s=args.pg_timeout_s,
        init_timeout_s=args.init_timeout_s,
        stall_timeout_s=args.stall_timeout_s,
        term_delay_s=args.term_delay_s,
        kill_grace_s=args.kill_grace_s,
        shutdown_timeout_s=args.shutdown_timeout_s,
        job_timeout_s=args.job_timeout_s,
        python=args.python,
        scheduler=args.scheduler,
    )


def main(argv: list[str]) -> int:
    """`faultloop run-job`: run one cell's job with the built-in workload and write its manifest."""
    parser = argparse.ArgumentParser(prog="faultloop run-job", description=main.__doc__)
    parser.add_argument("--cell-dir", required=True, type=Path)
    parser.add_argument("--fault-type", required=True, choices=sorted(FAULTS))
    parser.add_argument("--rank", type=int, required=True, help="global rank to inject")
    parser.add_argument("--iter", type=int, required=True, help="iteration at which to inject")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, default=4, help="ranks per node")
    parser.add_argument("--fault-delay", type=float, default=0.0, help="seconds after --iter")
    add_job_args(parser)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus_per_node < 1:
        parser.error("--nodes and --gpus-per-node must be >= 1")
    if not 0 <= args.rank < args.nodes * args.gpus_per_node:
        parser.error(f"--rank {args.rank} outside world size {args.nodes * args.gpus_per_node}")
    spec = spec_from_args(
        args, args.cell_dir, args.fault_type, args.rank, args.iter, args.nodes, args.gpus_per_node, args.fault_delay
    )
    return RunJob(spec).run()

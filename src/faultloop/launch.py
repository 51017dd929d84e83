"""Node launchers and run_job: start one pool cell's job, label its log, write its manifest.

Like a real cluster job, each simulated node has its own launcher that sees only its own ranks
(`faultloop node-launch`); it labels every rank's output `<global rank>: ` the way `srun --label`
does, prints torchrun's ChildFailedError-style summary, and stops its ranks soon after any rank of
the job failed (torchrun's fixed 30 s SIGTERM grace would make every hang cell slow). Launchers
share failures through files in the cell (a shared filesystem under SLURM).

`faultloop run-job` starts the N launchers itself (`--launcher local`) or once per node through
`srun` (`--launcher srun`, the default inside a SLURM allocation), then writes `job.json`, or
`infra_failure.json` and exits non-zero when the job died before the fault fired.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Iterable

from faultloop import layout
from faultloop.faults import FAULTS

WORKLOADS = ("cpu_gloo",)
POLL_S = 0.1
MARKER_TIME_RE = re.compile(r"^\d+: \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] FAULT INJECTION: Rank (\d+) "
                            r"(will inject fault|firing fault) (\w+)")


# -- records -----------------------------------------------------------------------------------


@dataclass
class RankExit:
    """How one rank ended, as its node launcher saw it."""

    rank: int
    local_rank: int
    pid: int | None
    exitcode: int
    time: float
    stopped_by_launcher: bool = False
    last_output: str = ""  # the rank's last non-empty line: the infra-failure reason

    @property
    def signal(self) -> str | None:
        if self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"SIG{-self.exitcode}"


@dataclass
class NodeResult:
    """One node launcher's record, written to the coordination dir for run_job."""

    node_rank: int
    node_name: str
    start_time: float
    end_time: float
    timed_out: bool
    first_failure: int | None  # global rank of the first local rank that failed
    ranks: list[RankExit] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> NodeResult:
        raw = json.loads(path.read_text())
        raw["ranks"] = [RankExit(**r) for r in raw["ranks"]]
        return cls(**raw)


@dataclass
class Manifest:
    """job.json (docs/architecture.md); infra_failure.json has the same keys."""

    job_id: str
    workload: str
    fault_type: str
    fault_rank: int
    fault_iter: int
    nodes: int
    gpus_per_node: int
    world_size: int
    state: str
    main_log: str
    launch_out: str
    node_names: list[str]
    rank_exits: dict[str, dict[str, int | str | None]]
    start_time: float
    fault_scheduled_time: float | None
    fault_fired_time: float | None
    end_time: float
    fault_fired: bool
    run_valid: bool
    invalid_reason: str | None


def glog(level: str, message: str) -> str:
    """A launcher line in torch.distributed.elastic's (glog) format."""
    now = dt.datetime.now()
    return f"{level}{now:%m%d %H:%M:%S.%f} {os.getpid()} faultloop/launch.py] {message}"


# -- the node launcher -------------------------------------------------------------------------


def add_job_args(parser: argparse.ArgumentParser) -> None:
    """Options shared by run-job and node-launch (run-job passes them through)."""
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, default=4, help="ranks per node")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--iter-time-s", type=float, default=0.1)
    parser.add_argument("--pg-timeout-s", type=float, default=15.0, help="collective timeout")
    parser.add_argument("--init-timeout-s", type=float, default=0.0,
                        help="rendezvous timeout (0: 60 s + 3 s per rank)")
    parser.add_argument("--stall-timeout-s", type=float, default=8.0,
                        help="no progress for this long: ranks log stacks and dump FR")
    parser.add_argument("--term-delay-s", type=float, default=2.0,
                        help="after a rank failed, let the others fail on their own this long")
    parser.add_argument("--kill-grace-s", type=float, default=3.0, help="SIGTERM to SIGKILL")
    parser.add_argument("--job-timeout-s", type=float, default=600.0)
    parser.add_argument("--python", default=sys.executable, help="interpreter for the ranks")


def job_arg_list(args: argparse.Namespace) -> list[str]:
    return ["--nodes", str(args.nodes), "--gpus-per-node", str(args.gpus_per_node),
            "--iterations", str(args.iterations), "--iter-time-s", str(args.iter_time_s),
            "--pg-timeout-s", str(args.pg_timeout_s), "--init-timeout-s", str(args.init_timeout_s),
            "--stall-timeout-s", str(args.stall_timeout_s), "--term-delay-s", str(args.term_delay_s),
            "--kill-grace-s", str(args.kill_grace_s), "--job-timeout-s", str(args.job_timeout_s),
            "--python", args.python]


class LabelledWriter:
    """Writes whole lines to a binary stream with a `<rank>: ` prefix, one writer at a time."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.last: dict[int, bytes] = {}  # per rank: last non-empty line of its own output

    def line(self, label: int, text: bytes | str, from_rank: bool = True) -> None:
        data = text.encode() if isinstance(text, str) else text
        with self._lock:
            if from_rank and data.strip():
                self.last[label] = data.strip()
            self._stream.write(f"{label}: ".encode() + data.rstrip(b"\n") + b"\n")
            self._stream.flush()

    def pump(self, label: int, source: IO[bytes]) -> threading.Thread:
        def run() -> None:
            for raw in iter(source.readline, b""):
                self.line(label, raw)
            source.close()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


@dataclass
class Worker:
    rank: int
    local_rank: int
    proc: subprocess.Popen[bytes] | None
    exit: RankExit | None = None
    reported: bool = False


class NodeLauncher:
    """Runs one node's ranks to the end and records how each one ended."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.node_rank: int = args.node_rank
        self.node_name: str = args.node_name
        self.coord = Path(args.coord_dir)
        self.out = LabelledWriter(sys.stdout.buffer)
        self.label = self.node_rank * args.gpus_per_node  # launcher lines: the node's first rank
        self.workers: list[Worker] = []
        self.stop_requested = False
        self.stopping = False  # the launcher has begun stopping ranks itself

    def say(self, level: str, message: str) -> None:
        self.out.line(self.label, glog(level, message), from_rank=False)

    def run(self) -> int:
        a = self.args
        start = time.time()
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        world = a.nodes * a.gpus_per_node
        first = self.node_rank * a.gpus_per_node
        self.say("I", f"Starting {a.gpus_per_node} workers on {self.node_name} (ranks {first}-"
                      f"{first + a.gpus_per_node - 1} of {world}), master {a.master_addr}:{a.master_port}")
        pumps = [t for lr in range(a.gpus_per_node) if (t := self._start(first + lr, lr, world))]
        timed_out = self._supervise(start)
        for thread in pumps:
            thread.join(timeout=5)
        exits = [w.exit for w in self.workers if w.exit]
        for e in exits:
            e.last_output = self.out.last.get(e.rank, b"").decode(errors="replace")
        failures = sorted((e for e in exits if e.exitcode != 0), key=lambda e: e.time)
        if failures:
            self._print_summary(failures)
        result = NodeResult(self.node_rank, self.node_name, start, time.time(), timed_out,
                            failures[0].rank if failures else None, exits)
        layout.write_atomic(self.coord / f"node{self.node_rank}.json", json.dumps(asdict(result), indent=1))
        return 1 if failures else 0

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stop_requested = True

    def _start(self, rank: int, local_rank: int, world: int) -> threading.Thread | None:
        a = self.args
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world),
                   LOCAL_WORLD_SIZE=str(a.gpus_per_node), GROUP_RANK=str(self.node_rank),
                   MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port),
                   FAULTLOOP_NODE_NAME=self.node_name, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        init_timeout = a.init_timeout_s or 60.0 + 3.0 * world
        cmd = [a.python, "-m", "faultloop.workload", "--iterations", str(a.iterations),
               "--iter-time-s", str(a.iter_time_s), "--pg-timeout-s", str(a.pg_timeout_s),
               "--init-timeout-s", str(init_timeout), "--stall-timeout-s", str(a.stall_timeout_s)]
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self.out.line(rank, f"failed to start worker: {exc}")
            self.workers.append(Worker(rank, local_rank, None, RankExit(rank, local_rank, None, 127, time.time())))
            return None
        worker = Worker(rank, local_rank, proc)
        self.workers.append(worker)
        threading.Thread(target=self._reap, args=(worker,), daemon=True).start()
        assert proc.stdout is not None
        return self.out.pump(rank, proc.stdout)

    def _reap(self, worker: Worker) -> None:
        """Wait in a thread so the exit time is exact: the root cause is the earliest exit."""
        assert worker.proc is not None
        rc = worker.proc.wait()
        worker.exit = RankExit(worker.rank, worker.local_rank, worker.proc.pid, rc, time.time(),
                               self.stopping)

    def _supervise(self, start: float) -> bool:
        """Poll ranks; after any failure (here or on another node) stop the rest: SIGTERM after
        term_delay, SIGKILL after kill_grace. Returns whether the job hit its time limit."""
        a = self.args
        failed_flag = self.coord / "failed"
        failure_at: float | None = None
        termed_at: float | None = None
        killed = timed_out = False
        while True:
            now = time.time()
            for w in self.workers:
                if w.exit and not w.reported and w.exit.exitcode != 0 and not self.stopping:
                    self.say("E", f"failed (exitcode: {w.exit.exitcode}) local_rank: {w.local_rank} "
                                  f"(pid: {w.exit.pid}) of binary: {a.python}")
                w.reported = w.exit is not None
            alive = [w for w in self.workers if w.exit is None]
            if not alive:
                return timed_out
            if failure_at is None:
                if any(w.exit and w.exit.exitcode != 0 for w in self.workers):
                    failure_at = now
                    self._flag(failed_flag, f"node {self.node_rank}")
                elif failed_flag.exists():
                    failure_at = now
                    self.say("W", "Another node reported a failed worker; stopping local workers")
                elif self.stop_requested:
                    failure_at = now - a.term_delay_s
                    self.say("W", "Launcher received a stop signal; stopping local workers")
                elif now - start > a.job_timeout_s:
                    failure_at, timed_out = now - a.term_delay_s, True
                    self._flag(failed_flag, f"node {self.node_rank} time limit")
                    self.say("E", f"Job time limit of {a.job_timeout_s:.0f} s reached; stopping workers")
            elif termed_at is None and now >= failure_at + a.term_delay_s:
                termed_at = now
                self.stopping = True
                for w in alive:
                    self.say("W", f"Sending process {w.proc.pid} closing signal SIGTERM")
                    _signal(w, signal.SIGTERM)
            elif termed_at is not None and not killed and now >= termed_at + a.kill_grace_s:
                killed = True
                for w in alive:
                    self.say("W", f"Unable to shutdown process {w.proc.pid} via Signals.SIGTERM, "
                                  f"forcefully exiting via Signals.SIGKILL")
                    _signal(w, signal.SIGKILL)
            time.sleep(POLL_S)

    @staticmethod
    def _flag(path: Path, text: str) -> None:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        with os.fdopen(fd, "w") as f:
            f.write(text)

    def _print_summary(self, failures: list[RankExit]) -> None:
        """torchrun's ChildFailedError report: other failures first, then the root cause."""
        def block(index: int, e: RankExit) -> list[str]:
            when = dt.datetime.fromtimestamp(e.time).strftime("%Y-%m-%d_%H:%M:%S")
            tb = (f"Signal {-e.exitcode} ({e.signal}) received by PID {e.pid}" if e.exitcode < 0
                  else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
            return [f"[{index}]:", f"  time      : {when}", f"  host      : {self.node_name}",
                    f"  rank      : {e.rank} (local_rank: {e.local_rank})",
                    f"  exitcode  : {e.exitcode} (pid: {e.pid})", "  error_file: <N/A>",
                    f"  traceback : {tb}"]
        rule = "=" * 60
        lines = ["ChildFailedError: ", rule, "faultloop.workload FAILED",
                 "-" * 60, "Failures:"]
        others = failures[1:]
        if others:
            for i, e in enumerate(others, 1):
                lines += block(i, e)
        else:
            lines.append("  <NO_OTHER_FAILURES>")
        lines += ["-" * 60, "Root Cause (first observed failure):", *block(0, failures[0]), rule]
        for text in lines:
            self.out.line(self.label, text, from_rank=False)


def _signal(worker: Worker, sig: signal.Signals) -> None:
    try:
        os.kill(worker.proc.pid, sig)  # type: ignore[union-attr]
    except ProcessLookupError:
        pass


def node_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="faultloop node-launch",
                                     description="Launch one node's ranks (run by run-job or srun).")
    add_job_args(parser)
    parser.add_argument("--coord-dir", required=True, help="shared dir for launcher records")
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--node-rank", type=int, default=None, help="default: $SLURM_NODEID")
    parser.add_argument("--node-name", default=None, help="default: $SLURMD_NODENAME or node<i>")
    args = parser.parse_args(argv)
    if args.node_rank is None:
        args.node_rank = int(os.environ.get("SLURM_NODEID", os.environ.get("SLURM_PROCID", "0")))
    if args.node_name is None:
        args.node_name = os.environ.get("SLURMD_NODENAME") or f"node{args.node_rank}"
    return NodeLauncher(args).run()


# -- run_job ---------------------------------------------------------------------------------


def first_host(nodelist: str) -> str:
    """First host of a SLURM nodelist (`scontrol show hostnames` when present)."""
    if shutil.which("scontrol"):
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                             text=True, check=False).stdout.split()
        if out:
            return out[0]
    m = re.match(r"([^,\[]+)(?:\[(\d+))?", nodelist)
    if not m:
        raise ValueError(f"cannot parse SLURM nodelist {nodelist!r}")
    return m.group(1) + (m.group(2) or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


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


class RunJob:
    """One cell: launch, wait, record."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cell = Path(args.cell_dir).resolve()
        self.world = args.nodes * args.gpus_per_node
        slurm_job = os.environ.get("SLURM_JOB_ID")
        self.mode = args.launcher if args.launcher != "auto" else ("srun" if slurm_job else "local")
        self.job_id = slurm_job if self.mode == "srun" and slurm_job else f"local-{uuid.uuid4().hex[:12]}"
        self.main_log_rel = f"logs/slurm/{self.job_id}.0.1.main_workload.log"
        self.launch_out_rel = f"logs/slurm/{self.job_id}.launch.out"
        self.coord = self.cell / ".launch" / self.job_id

    def prepare(self) -> None:
        for sub in ("logs/slurm", "checkpoints", "tensorboard"):
            (self.cell / sub).mkdir(parents=True, exist_ok=True)
        for stale in [self.cell / "job.json", self.cell / "infra_failure.json",
                      *(self.cell / "checkpoints").glob("_dump_*")]:
            stale.unlink(missing_ok=True)
        self.coord.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        a = self.args
        env = dict(os.environ, FAULT_TYPE=a.fault_type, FAULT_RANK=str(a.rank),
                   FAULT_AT_ITER=str(a.iter), FAULT_DELAY=str(a.fault_delay),
                   GPUS_PER_NODE=str(a.gpus_per_node), EXPERIMENT_DIR=str(self.cell),
                   TORCH_FR_DUMP_TEMP_FILE=str(self.cell / "checkpoints" / "_dump_"))
        env.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
        src = str(Path(__file__).resolve().parents[1])  # ranks import faultloop from here too
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
        return env

    def commands(self) -> list[list[str]]:
        a = self.args
        if self.mode == "srun":
            master = first_host(os.environ.get("SLURM_JOB_NODELIST", socket.gethostname()))
        else:
            master = "127.0.0.1"
        common = ["-m", "faultloop.cli", "node-launch", *job_arg_list(a), "--coord-dir", str(self.coord),
                  "--master-addr", master, "--master-port", str(free_port())]
        if self.mode == "srun":
            return [["srun", f"--nodes={a.nodes}", f"--ntasks={a.nodes}", "--ntasks-per-node=1",
                     "--kill-on-bad-exit=0", "--unbuffered", sys.executable, *common]]
        return [[sys.executable, *common, "--node-rank", str(i)] for i in range(a.nodes)]

    def run(self) -> int:
        a = self.args
        self.prepare()
        start = time.time()
        main_log = self.cell / self.main_log_rel
        with open(self.cell / self.launch_out_rel, "a", buffering=1) as out, open(main_log, "ab") as log:
            def note(msg: str) -> None:
                out.write(f"[{dt.datetime.now():%Y-%m-%d %H:%M:%S}] {msg}\n")
            note(f"job {self.job_id}: {a.workload}, {a.nodes} node(s) x {a.gpus_per_node} ranks, "
                 f"launcher {self.mode}, cell {self.cell}")
            procs, pumps = [], []
            lock = threading.Lock()
            for cmd in self.commands():
                proc = subprocess.Popen(cmd, env=self.env(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=out, start_new_session=True)
                procs.append(proc)
                pumps.append(threading.Thread(target=_copy_lines, args=(proc.stdout, log, lock), daemon=True))
                pumps[-1].start()
            deadline = start + a.job_timeout_s + a.term_delay_s + a.kill_grace_s + 30
            codes = [_wait(p, deadline) for p in procs]
            for thread in pumps:
                thread.join(timeout=5)
            for i, code in enumerate(codes):
                note(f"node launcher {i} exited with code {code}")
            manifest, infra = self.manifest(start, time.time())
            note(f"job {self.job_id} ended: state {manifest.state}, "
                 + ("infrastructure failure: " + str(manifest.invalid_reason) if infra else
                    f"run_valid {manifest.run_valid}"))
        target = self.cell / ("infra_failure.json" if infra else "job.json")
        layout.write_atomic(target, json.dumps(asdict(manifest), indent=2) + "\n")
        if infra:
            print(f"faultloop run-job: infrastructure failure in {self.cell.name}: "
                  f"{manifest.invalid_reason}", file=sys.stderr)
            return 1
        return 0

    def manifest(self, start: float, end: float) -> tuple[Manifest, bool]:
        a = self.args
        results = {}
        for i in range(a.nodes):
            path = self.coord / f"node{i}.json"
            if path.exists():
                results[i] = NodeResult.load(path)
        lines = (self.cell / self.main_log_rel).read_text(errors="replace").splitlines()
        scheduled, fired = parse_markers(lines, a.rank)
        exits = sorted((e for r in results.values() for e in r.ranks), key=lambda e: e.rank)
        failures = sorted((e for e in exits if e.exitcode != 0), key=lambda e: e.time)
        if any(r.timed_out for r in results.values()):
            state = "TIMEOUT"
        elif failures or len(results) < a.nodes:
            state = "FAILED"
        else:
            state = "COMPLETED"
        reason = None
        infra = False
        if len(results) < a.nodes:
            missing = sorted(set(range(a.nodes)) - set(results))
            reason = f"node launcher(s) {missing} left no record (launcher failed to start or was killed)"
            infra = True
        elif fired is None and state == "COMPLETED":
            reason = (f"fault never fired: the job completed all {a.iterations} iterations before "
                      f"iteration {a.iter} + {a.fault_delay:g} s")
        elif fired is None:
            first = failures[0] if failures else None
            why = (f"rank {first.rank} ended with exitcode {first.exitcode}: "
                   f"{first.last_output or '(no output)'}"
                   if first else f"state {state}")
            reason = f"job failed before the fault fired ({why})"
            infra = True
        manifest = Manifest(
            job_id=self.job_id, workload=a.workload, fault_type=a.fault_type, fault_rank=a.rank,
            fault_iter=a.iter, nodes=a.nodes, gpus_per_node=a.gpus_per_node, world_size=self.world,
            state=state, main_log=self.main_log_rel, launch_out=self.launch_out_rel,
            node_names=[results[i].node_name if i in results else f"node{i}" for i in range(a.nodes)],
            rank_exits={str(e.rank): {"exitcode": e.exitcode, "signal": e.signal} for e in exits},
            start_time=start, fault_scheduled_time=scheduled, fault_fired_time=fired, end_time=end,
            fault_fired=fired is not None, run_valid=fired is not None, invalid_reason=reason)
        return manifest, infra


def _copy_lines(source: IO[bytes], sink: IO[bytes], lock: threading.Lock) -> None:
    for raw in iter(source.readline, b""):
        with lock:
            sink.write(raw)
            sink.flush()
    source.close()


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> int:
    """Wait for a launcher; past the deadline stop it (it stops its ranks), then kill it."""
    try:
        return proc.wait(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="faultloop run-job", description=__doc__.splitlines()[0])
    parser.add_argument("--cell-dir", required=True)
    parser.add_argument("--fault-type", required=True, choices=sorted(FAULTS))
    parser.add_argument("--rank", type=int, required=True, help="global rank to inject")
    parser.add_argument("--iter", type=int, required=True, help="iteration at which to inject")
    parser.add_argument("--fault-delay", type=float, default=0.0, help="seconds after --iter")
    parser.add_argument("--workload", default="cpu_gloo", choices=WORKLOADS)
    parser.add_argument("--launcher", default="auto", choices=("auto", "local", "srun"),
                        help="auto: srun inside a SLURM allocation, else local")
    add_job_args(parser)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus_per_node < 1:
        parser.error("--nodes and --gpus-per-node must be >= 1")
    if not 0 <= args.rank < args.nodes * args.gpus_per_node:
        parser.error(f"--rank {args.rank} outside world size {args.nodes * args.gpus_per_node}")
    return args


def main(argv: list[str]) -> int:
    return RunJob(parse_args(argv)).run()

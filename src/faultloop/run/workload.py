"""The built-in `cpu_gloo` workload: one rank of a small data-parallel training job on gloo.

Started once per rank by `faultloop.run.launch` (through `faultloop.cli.workload`, which reads the
rank's options) under any launcher: its identity is the launcher's (torchrun's RANK/WORLD_SIZE,
srun's, Open MPI's, MPICH's: faultloop.run.launchers.identity). It behaves like a real job so its
logs are worth analysing: faulthandler on, a stall watchdog that prints stacks, flight-recorder
dumps written by the job itself (gloo never dumps on its own), Megatron-style iteration lines on
the last rank.

The fault in FAULT_TYPE/FAULT_RANK/FAULT_AT_ITER/FAULT_DELAY (upstream's env contract) is injected
with the real mechanism; with FAULT_NODE, by the rank on that node with FAULT_RANK's local rank
(a node-bound fault in a restarted job). Only the two `FAULT INJECTION` lines say so; every other
name, message and traceback line reads like an ordinary job, so an analyzer cannot read the answer
off the log. A restarted job resumes from the checkpoint folder in FAULTLOOP_RESUME_FROM (its
parameters and iteration), saying so in Megatron's words.
"""

from __future__ import annotations

import _thread
import ctypes
import datetime as dt
import faulthandler
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from faultloop.core import layout
from faultloop.marker import firing_line, scheduled_line
from faultloop.run import memcg
from faultloop.run.launchers.identity import RankIdentity, rank_identity
from faultloop.run.rank_io import Checkpointer, FlightRecorder, log
from faultloop.run.spec import RESUME_ENV, FaultPlan, JobSettings, rank_node_line
from faultloop.signals import signal_name

# Signals the launcher (or an operator) uses to stop a rank. Blocked in every thread and taken by a
# sigwait thread: a Python handler cannot run while the main thread waits inside a C++ collective.
SHUTDOWN_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
FAILING_GRACE_S = 5.0  # how long a failing rank may finish its report after a shutdown signal
# Set once a failing rank's report is out (torchrun's error file written, traceback printed).
REPORTED = threading.Event()

# The text torch prints for an illegal memory access (the CPU stand-in for GPU_ERROR).
CUDA_ILLEGAL_ACCESS = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)

FEATURES = 128
HIDDEN = 512
BATCH = 32
SHARD_ROWS = 4096
CHECKPOINT_EVERY = 5  # iterations between checkpoints (every rank saves its replica)
FULL_DEVICE = "/dev/full"  # every write to it fails with ENOSPC, as on a full volume
OOM_HEADROOM_BYTES = 64 << 20  # HOST_OOM: the cgroup's limit is the rank's use plus this


@dataclass(frozen=True)
class Settings:
    """One rank's identity and the job's timing knobs."""

    rank: int
    local_rank: int
    world_size: int
    master_addr: str
    master_port: int
    node_name: str
    iterations: int
    iter_time_s: float
    pg_timeout_s: float
    init_timeout_s: float
    stall_timeout_s: float
    dump_prefix: str
    agent_store: bool  # under torchrun: the elastic agent hosts the store, every rank is a client
    resume_from: str = ""  # a restarted job's checkpoint folder (one file per rank), else empty


class Device:
    """Where kernels run: CUDA when present, else the CPU with a stream-like completion flag.

    Work is "launched" asynchronously and `synchronize` waits for it, as with a CUDA stream, so a
    stuck kernel or a sticky device error surfaces at the next sync point like on a GPU.
    """

    def __init__(self, local_rank: int) -> None:
        self.cuda = torch.cuda.is_available()
        self.name = f"cuda:{local_rank % torch.cuda.device_count()}" if self.cuda else "cpu"
        self._idle = threading.Event()
        self._idle.set()
        self._sticky_error: str | None = None

    def launch_spin(self) -> None:
        if self.cuda:
            with torch.cuda.device(self.name):
                torch.cuda._sleep(1 << 62)
        else:
            self._idle.clear()

    def launch_bad_access(self) -> None:
        if self.cuda:
            # A kernel on freed storage: the device faults on address ~0 (illegal memory access).
            data = torch.ones(1 << 20, device=self.name)
            view = torch.empty(0, device=self.name).set_(data.untyped_storage(), 0, (1 << 20,), (1,))
            data.untyped_storage().resize_(0)
            view.mul_(2)
        else:
            self._sticky_error = CUDA_ILLEGAL_ACCESS

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.name)
            return
        self._idle.wait()
        if self._sticky_error:
            raise torch.AcceleratorError(self._sticky_error)


class Trainer:
    """A 2-layer MLP trained with manual SGD; gradients averaged by one gloo all_reduce per step."""

    def __init__(self, settings: Settings, plan: FaultPlan | None) -> None:
        self.s = settings
        self.plan = plan if plan and plan.targets(settings.rank, settings.local_rank, settings.node_name) else None
        self.fr = FlightRecorder(settings.dump_prefix, settings.rank)
        # the run folder's checkpoints/model/, beside the FR dumps in checkpoints/
        ckpt_root = (
            Path(settings.dump_prefix).parent / Path(layout.MODEL_CHECKPOINTS).name if settings.dump_prefix else None
        )
        self.checkpoint = Checkpointer(ckpt_root, settings.rank)
        self.device = Device(settings.local_rank)
        self.last_progress = time.monotonic()
        self.first_iter = 1  # a resumed job's is the one after its checkpoint's
        self.done_iter = 0
        self.finished = False
        self.failing = threading.Event()  # an exception is on its way out of the rank
        self._sample_offset = 0
        gen = torch.Generator().manual_seed(1234)  # identical initial weights on every rank
        self.params = [
            (torch.randn(FEATURES, HIDDEN, generator=gen) / math.sqrt(FEATURES)).requires_grad_(),
            torch.zeros(HIDDEN, requires_grad=True),
            (torch.randn(HIDDEN, FEATURES, generator=gen) / math.sqrt(HIDDEN)).requires_grad_(),
            torch.zeros(FEATURES, requires_grad=True),
        ]
        self.teacher = torch.randn(FEATURES, FEATURES, generator=gen) / math.sqrt(FEATURES)
        shard = torch.randn(SHARD_ROWS, FEATURES, generator=torch.Generator().manual_seed(settings.rank))
        self._shard = (ctypes.c_float * shard.numel())()
        ctypes.memmove(self._shard, shard.numpy().ctypes.data, shard.numel() * 4)
        self._shard_addr = ctypes.addressof(self._shard)
        # The mechanisms the fault table's rows name (Fault.injector); a signal fault sends its signal.
        # Plain callables, bound here: the line that calls one shows in the rank's traceback, so it
        # must say no more than `action()` (nothing an analyzer reads may name the injection).
        self.timer = FaultTrigger(
            self.plan,
            {
                "gpu_error": self.device.launch_bad_access,
                "gpu_sleep": self.device.launch_spin,
                "shard_overrun": self._skip_to_shard_end,
                "bad_pointer": self._remap_shard,
                "poison_gradients": self._refresh_shard,
                "fill_checkpoint_volume": self._move_checkpoints,
            },
            "the workload",
        )

    # -- process setup -------------------------------------------------------------------------

    def run(self) -> None:
        _die_with_parent()
        faulthandler.enable(all_threads=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)  # before any thread starts
        signal.signal(signal.SIGUSR1, on_user_signal)
        threading.Thread(target=self._shutdown_listener, name="signal-listener", daemon=True).start()
        self._init_distributed()
        if self.s.resume_from:
            self._resume(Path(self.s.resume_from))
        threading.Thread(target=self._progress_watchdog, name="progress-watchdog", daemon=True).start()
        try:
            self._train()
        except BaseException:
            self.failing.set()
            faulthandler.cancel_dump_traceback_later()
            self.fr.dump("exception")
            raise
        self.finished = True
        faulthandler.cancel_dump_traceback_later()
        dist.destroy_process_group()

    def _init_distributed(self) -> None:
        """Join a store-based barrier first: 32 ranks importing torch on 2 cores arrive seconds
        apart, longer than the collective timeout, so the join gets its own timeout. Under
        torchrun the store is the elastic agent's (every rank a client), as env:// would do."""
        s = self.s
        store = dist.TCPStore(
            s.master_addr,
            s.master_port,
            s.world_size,
            is_master=s.rank == 0 and not s.agent_store,
            timeout=dt.timedelta(seconds=s.init_timeout_s),
            wait_for_workers=False,
        )
        store.add("rendezvous/arrived", 1)
        deadline = time.monotonic() + s.init_timeout_s
        while (joined := store.add("rendezvous/arrived", 0)) < s.world_size:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"rendezvous timed out after {s.init_timeout_s:.0f} s: {joined}/{s.world_size} ranks joined"
                )
            time.sleep(0.2)
        dist.init_process_group(
            "gloo",
            store=dist.PrefixStore("default_pg", store),
            rank=s.rank,
            world_size=s.world_size,
            timeout=dt.timedelta(seconds=s.pg_timeout_s),
        )
        self._store = store  # rank 0 may serve it; keep it alive for the whole job
        log(
            rank_node_line(s.rank, s.world_size, s.local_rank, s.node_name)
            + f"process group ready (gloo, timeout {s.pg_timeout_s:.0f} s)"
        )
        if s.rank == 0:
            n = sum(p.numel() for p in self.params)
            log(f"> building MLP model ... number of parameters: {n}")
            log(f"> training for {s.iterations} iterations, global batch size {BATCH * s.world_size}")

    def _resume(self, folder: Path) -> None:
        """Load this rank's checkpoint and go on from the iteration after it; rank 0 says so as
        Megatron's load_checkpoint does."""
        load_dir = layout.MODEL_CHECKPOINTS  # the job's --load folder, as its command line names it
        if self.s.rank == 0:
            iteration = int(folder.name[len(layout.CHECKPOINT_ITERATION_PREFIX) :])
            log(f" loading checkpoint from {load_dir} at iteration {iteration}")
        iteration = self.checkpoint.load(folder, self.params)
        self.first_iter, self.done_iter = iteration + 1, iteration
        if self.s.rank == 0:
            log(f"  successfully loaded checkpoint from {load_dir} [ t 0, p 0 ] at iteration {iteration}")

    def _shutdown_listener(self) -> None:
        """Take SIGTERM/SIGINT/SIGHUP, write the FR dump, then end the way the signal dictates."""
        sig = signal.Signals(signal.sigwait(SHUTDOWN_SIGNALS))
        log(f"received {sig.name}, shutting down")
        if self.failing.is_set():
            # The rank is already failing: let it finish its own report (traceback, torchrun's
            # error file) rather than cut that file half-written, which crashes torch's agent.
            REPORTED.wait(FAILING_GRACE_S)
        self.fr.dump(sig.name)
        if sig == signal.SIGINT:
            _thread.interrupt_main(signal.SIGINT)  # KeyboardInterrupt in the training loop
            time.sleep(10.0)  # main thread stuck in C++: end it here
            os._exit(128 + sig)
        _die_by(sig)

    def _progress_watchdog(self) -> None:
        """Report a stall once per stalled iteration and dump FR; stacks come from faulthandler's
        own timer (armed per iteration), which prints even while something holds the GIL."""
        reported = 0
        while not self.finished:
            time.sleep(0.5)
            idle = time.monotonic() - self.last_progress
            warm = self.done_iter > self.first_iter  # the first iteration's slow warm-up is over
            if warm and idle >= self.s.stall_timeout_s and reported != self.done_iter:
                reported = self.done_iter
                log(
                    f"WARNING: no training progress for {idle:.1f} s (last completed iteration "
                    f"{self.done_iter}); dumping flight recorder"
                )
                self.fr.dump("stall", final=False)

    # -- training --------------------------------------------------------------------------------

    def _train(self) -> None:
        s = self.s
        for it in range(self.first_iter, s.iterations + 1):
            start = time.monotonic()
            self._housekeeping(it)
            x, y = self._next_batch(it)
            loss = self._forward_backward(x, y)
            self.device.synchronize()
            loss_avg, grad_norm = self._all_reduce_grads(loss)
            self._sgd_step(lr=1e-3)
            if it % CHECKPOINT_EVERY == 0:
                self.checkpoint.save(it, self.params)
            if it == self.first_iter:
                self.checkpoint.warm_up(self.params)
            self.done_iter, self.last_progress = it, time.monotonic()
            if it > self.first_iter:  # the second iteration waits out every rank's slow warm-up
                faulthandler.dump_traceback_later(s.stall_timeout_s, exit=False)
            if s.rank == s.world_size - 1:
                elapsed_ms = (time.monotonic() - start) * 1000
                log(
                    f"iteration {it:8d}/{s.iterations:8d} | consumed samples: "
                    f"{it * BATCH * s.world_size:12d} | elapsed time per iteration (ms): "
                    f"{elapsed_ms:.1f} | learning rate: 1.000000E-03 | global batch size: "
                    f"{BATCH * s.world_size:5d} | lm loss: {loss_avg:.6E} | loss scale: 1.0 | "
                    f"grad norm: {grad_norm:.3f} | number of skipped iterations:   0 | "
                    f"number of nan iterations:   0 |"
                )
            time.sleep(max(0.0, s.iter_time_s - (time.monotonic() - start)))
        if s.rank == s.world_size - 1:
            log(f"[after training is done] finished {s.iterations} iterations")

    def _next_batch(self, it: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = (it * self.s.world_size + self.s.rank) * BATCH % SHARD_ROWS + self._sample_offset
        if start + BATCH > SHARD_ROWS:
            raise IndexError(f"index {start + BATCH - 1} is out of bounds for dimension 0 with size {SHARD_ROWS}")
        x = self._read_shard(start, BATCH)
        return x, torch.tanh(x @ self.teacher)

    def _read_shard(self, row: int, rows: int) -> torch.Tensor:
        nbytes = rows * FEATURES * 4
        raw = ctypes.string_at(self._shard_addr + row * FEATURES * 4, nbytes)
        return torch.frombuffer(bytearray(raw), dtype=torch.float32).view(rows, FEATURES)

    def _forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = self.params
        out = torch.tanh(x @ w1 + b1) @ w2 + b2
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        return loss.detach()

    def _all_reduce_grads(self, loss: torch.Tensor) -> tuple[float, float]:
        """One collective per step: all gradients and the loss in one flat buffer. The local
        gradient norm is checked first, as Megatron's check_for_nan_in_grad does, so a rank
        whose gradients are NaN fails on its own instead of poisoning every replica."""
        grads = [p.grad for p in self.params]
        assert all(g is not None for g in grads), "backward ran first"
        flat = torch.cat([g.reshape(-1) for g in grads if g is not None] + [loss.reshape(1)])
        norm = flat[:-1].norm()
        assert not norm.isnan(), (
            f"Rank {self.s.rank}: found NaN in local grad norm in backward pass before data-parallel "
            f"communication collective. Device: {self.s.local_rank}, node: {self.s.node_name}"
        )
        dist.all_reduce(flat)
        flat /= self.s.world_size
        offset = 0
        for p, g in zip(self.params, grads, strict=True):
            if g is not None:
                g.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        return float(flat[-1]), float(flat[:-1].norm())

    def _sgd_step(self, lr: float) -> None:
        with torch.no_grad():
            for p in self.params:
                if p.grad is not None:
                    p -= lr * p.grad
                p.grad = None

    # -- periodic work (the injected fault fires here on its rank) ------------------------------

    def _housekeeping(self, it: int) -> None:
        self.timer.tick(self.s.rank, it, self.device.name)

    def _skip_to_shard_end(self) -> None:
        self._sample_offset = SHARD_ROWS

    def _remap_shard(self) -> None:
        self._shard_addr = 16

    def _refresh_shard(self) -> None:
        """Every byte 0xFF: each float of the shard reads as NaN."""
        ctypes.memset(self._shard_addr, 0xFF, SHARD_ROWS * FEATURES * 4)

    def _move_checkpoints(self) -> None:
        self.checkpoint.volume = FULL_DEVICE


def _die_with_parent() -> None:
    """End with the launcher that started this rank (Linux PR_SET_PDEATHSIG): torchrun starts
    ranks in sessions of their own, so nothing else stops them if the launcher is killed."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def on_user_signal(signum: int, frame: object) -> None:
    """SIGUSR1's handler: the signal surfaces as an exception where the job is (SIGNAL_EXC)."""
    raise RuntimeError(f"Received signal {signum} ({signal_name(signum)})")


def _release_buffers() -> None:
    os.abort()


def _compact_buffers() -> None:
    """A C call made without releasing the GIL; libc sleep returns early on signals, so loop."""
    libc = ctypes.PyDLL(None)
    while True:
        libc.sleep(3600)


def _start_metrics_writer() -> None:
    main_ident = threading.main_thread().ident
    threading.Thread(target=_flush_metrics, args=(main_ident,), name="metrics-writer", daemon=True).start()


def _flush_metrics(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(RuntimeError))


def _sync_before_logging() -> None:
    """A collective only this rank issues: the others are already in their gradient all-reduce."""
    dist.barrier()


def _recycle_connections() -> None:
    """Cut the receiving side of every connected TCP socket of this process (its links to its
    peers and to the store), as a link that stops delivering to this host does: nothing reaches
    the rank any more and its next read fails. A duplicate of each socket is kept open, so the
    peers see their connections end only when this process does, as they see a dead link only
    when the other side gives up."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
            try:
                sock.getpeername()  # connected (listening sockets stay: gloo treats a failed accept as fatal)
                sock.shutdown(socket.SHUT_RD)
                _CUT_LINKS.append(sock)
                continue
            except OSError:
                pass
        sock.close()


_CUT_LINKS: list[socket.socket] = []  # kept open until the process ends


def _grow_cache() -> None:
    """Move into a memory cgroup limited a little above this rank's use, then allocate past the
    limit (touching every page) until the kernel's OOM killer ends the process."""
    memcg.confine(Path(os.environ[memcg.MEMCG_ENV]), OOM_HEADROOM_BYTES)
    cache = []
    while True:
        cache.append(b"\x01" * (8 << 20))


def _spawn_worker(sig: signal.Signals) -> None:
    """A forked child signals this process, as an external sender would (upstream's way). It
    waits a moment so the signal lands in the training loop, not in the parent's at-fork hooks
    (where a raising handler's exception would be ignored)."""
    parent = os.getpid()
    if os.fork() == 0:
        try:
            time.sleep(0.2)
            os.kill(parent, sig)
        finally:
            os._exit(0)


def signal_sender(sig: signal.Signals) -> Callable[[], None]:
    """The send_signal injector for one signal."""
    return partial(_spawn_worker, sig)


# The injectors that act on the process alone, not on the Trainer's data, device or checkpoints:
# a framework workload (faultloop.run.frameworks) injects them the same way from its own hook.
PROCESS_MECHANISMS: dict[str, Callable[[], None]] = {
    "async_raise": _start_metrics_writer,
    "abort": _release_buffers,
    "hold_gil": _compact_buffers,
    "extra_collective": _sync_before_logging,
    "cut_connections": _recycle_connections,
    "exceed_memory_limit": _grow_cache,
}


class FaultTrigger:
    """The injected fault's clock and injector, shared by the built-in workload and the framework
    workloads: scheduled at the first iteration >= its ITER on its rank (a resumed job may start
    past it), fired FAULT_DELAY later by the mechanism its row names: `mechanisms`, the workload's
    own on its data, device and checkpoints, and the process-level ones."""

    def __init__(self, plan: FaultPlan | None, mechanisms: Mapping[str, Callable[[], None]], who: str) -> None:
        self.plan = plan
        self.fired = False
        self._fire_at: float | None = None
        self._action: Callable[[], None] | None = None
        if plan is None:
            return
        fault = plan.fault
        # Plain callables, bound here: the line that calls one shows in the rank's traceback, so it
        # must say no more than `action()` (nothing an analyzer reads may name the injection).
        bound = {**mechanisms, **PROCESS_MECHANISMS}
        if fault.injector == "exceed_memory_limit" and (
            memcg.hierarchy() is None or not os.environ.get(memcg.MEMCG_ENV)
        ):
            raise RuntimeError(f"fault {fault.name} needs a writable memory cgroup hierarchy and {memcg.MEMCG_ENV}")
        if fault.injector == "send_signal":
            assert fault.signal is not None, f"fault {fault.name} sends no signal"
            bound["send_signal"] = signal_sender(fault.signal)
        if fault.injector not in bound:
            raise ValueError(f"fault {fault.name}: {who} has no injector {fault.injector!r}")
        self._action = bound[fault.injector]

    def tick(self, rank: int, it: int, device: str) -> None:
        """Iteration `it` is about to train on `rank`: schedule the fault, or fire it when its time came."""
        plan = self.plan
        if plan is None or self.fired:
            return
        if it >= plan.at_iter and self._fire_at is None:
            self._fire_at = time.time() + plan.delay_s
            log(scheduled_line(rank, plan.name, self._fire_at, it, plan.delay_s))
        if self._fire_at is not None and time.time() >= self._fire_at:
            self.fired = True
            log(firing_line(rank, plan.name, it, device=device, pid=os.getpid()))
            action = self._action
            assert action is not None
            action()


def _die_by(sig: signal.Signals) -> None:
    """End the process by `sig` with its default action, so the launcher sees a signal death."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    if threading.current_thread() is threading.main_thread():
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(5.0)
    os._exit(128 + sig)


def settings_from(job: JobSettings, env: Mapping[str, str], identity: RankIdentity) -> Settings:
    """The rank's identity as its launcher gave it (torchrun's, srun's, an MPI's: rank_identity),
    the node it runs on and the job's knobs."""
    return Settings(
        rank=identity.rank,
        local_rank=identity.local_rank,
        world_size=identity.world_size,
        master_addr=identity.master_addr,
        master_port=identity.master_port,
        node_name=env.get("FAULTLOOP_NODE_NAME") or env.get("SLURMD_NODENAME") or socket.gethostname(),
        iterations=job.iterations,
        iter_time_s=job.iter_time_s,
        pg_timeout_s=job.pg_timeout_s,
        init_timeout_s=job.init_timeout_s,
        stall_timeout_s=job.stall_timeout_s,
        dump_prefix=env.get("TORCH_FR_DUMP_TEMP_FILE", ""),
        agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        resume_from=env.get(RESUME_ENV, ""),
    )


@record
def train(job: JobSettings) -> None:
    """One rank's life. A failure is left uncaught, as in a real training script: torch's
    excepthook prints it (every line prefixed `[rankN]:`), @record writes torchrun's error file,
    and a signal ends the process the way the signal does."""
    settings = settings_from(job, os.environ, rank_identity())
    torch.set_num_threads(1)
    Trainer(settings, FaultPlan.from_env(os.environ)).run()


def run_rank(job: JobSettings) -> int:
    """Run this process as one rank of the job; its exit status (a signal ends it instead)."""
    try:
        train(job)
    except KeyboardInterrupt:
        # Python ends on an uncaught KeyboardInterrupt by re-raising SIGINT, which this process
        # keeps blocked for its sigwait thread: print it the usual way, then die by the signal.
        sys.excepthook(*sys.exc_info())
        _die_by(signal.SIGINT)
    except Exception:
        # What Python does with an uncaught exception (torch's excepthook prints it, exit code 1),
        # done here so that a shutdown signal waits for the report and no longer.
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
        REPORTED.set()
        return 1
    return 0

"""What every framework workload's rank shares: who it is, the data it reads, the fault it injects.

A framework rank is a real training job of that framework; faultloop adds what the built-in
workload adds and no more: the rank states its node (`rank_node_line`), the fault of upstream's
env contract is injected by the fault row's injector from the framework's own extension point
(`FaultHook.at_iteration`, with the two marker lines), and torch's flight recorder is dumped the
way the built-in workload dumps it (`rank_io.FlightRecorder`, on an exception or a shutdown
signal). Everything else the log holds is the framework's and its launcher's own.

The batch a step trains on is read inside the step from a per-rank memory-mapped-style shard
(`Shard`, as Megatron's indexed datasets read theirs): the data faults (WORKLOAD_EXC's overrun,
SEGFAULT's bad pointer, NAN_LOSS's poisoned rows) then surface in the step they fire in, whatever
the framework's data loader prefetches.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import faulthandler
import importlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from faultloop.core import layout
from faultloop.run.launchers.identity import RankIdentity, rank_identity
from faultloop.run.launchers.rank_records import RANK_EXIT_ENV, ExitRecorder
from faultloop.run.rank_io import FlightRecorder, log
from faultloop.run.spec import FaultPlan, JobSettings, rank_node_line
from faultloop.run.workload import Device, FaultTrigger, on_user_signal

FEATURES = 32
BATCH = 8  # rows per rank and step
SHARD_ROWS = 1024
CHECKPOINT_EVERY = 5  # steps between the framework's own checkpoints, as the built-in workload's
DEFAULT_INIT_TIMEOUT_S = 60.0  # JobSpec.init_timeout_s's floor, where the rank is started without one
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_started: list[Rank] = []  # the rank this process became (start_rank), whose exit exit_recorded writes


def checkpoint_root(env: Mapping[str, str]) -> Path | None:
    """Where the framework saves its checkpoints: the run folder's checkpoints/model/, beside the
    FR dumps (the built-in workload's folder); None outside run_job."""
    prefix = env.get("TORCH_FR_DUMP_TEMP_FILE", "")
    return Path(prefix).parent / Path(layout.MODEL_CHECKPOINTS).name if prefix else None


def process_group_timeout(job: JobSettings) -> dt.timedelta:
    """The framework's one process-group timeout: it bounds the rendezvous too (torch's store
    connect), so it is the longer of the collective and the rendezvous timeouts; ranks that import
    a framework on a loaded machine arrive many seconds apart. From the first step on the
    collectives wait `pg_timeout_s` (collectives_time_out)."""
    return dt.timedelta(seconds=max(job.pg_timeout_s, job.init_timeout_s or DEFAULT_INIT_TIMEOUT_S))


def collectives_time_out(job: JobSettings) -> None:
    """From the first step on, a collective waits `pg_timeout_s`, as the built-in workload's do:
    the framework set up its process group with process_group_timeout, which its rendezvous and
    its start-up collectives (DDP's broadcast of the parameters) need, while a rank that hangs
    or left would hold every other rank that long in its next collective. Every group the
    framework made, not only the default one: DeepSpeed's data-parallel group is a `new_group`
    with gloo's default of 30 minutes. torch's own setter of a group's timeout (`_set_pg_timeout`,
    gloo's and NCCL's backends) over torch's table of the groups."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    c10d = dist.distributed_c10d
    for group in list(c10d._world.pg_map):
        if not c10d._rank_not_in_group(group):
            c10d._set_pg_timeout(dt.timedelta(seconds=job.pg_timeout_s), group)


@dataclass(frozen=True)
class RankContext:
    """One framework rank: its identity as its launcher gave it, its node, the job's knobs."""

    identity: RankIdentity
    node_name: str
    job: JobSettings
    dump_prefix: str  # torch's TORCH_FR_DUMP_TEMP_FILE: the FR dump of rank r is <prefix><r>

    @property
    def rank(self) -> int:
        return self.identity.rank

    @property
    def world_size(self) -> int:
        return self.identity.world_size

    @property
    def local_rank(self) -> int:
        return self.identity.local_rank

    @classmethod
    def from_env(cls, job: JobSettings, identity: RankIdentity | None = None) -> RankContext:
        """The launcher's identity (rank_identity also exports torch's env:// where the launcher
        did not), or the one a framework that launched its own ranks gives."""
        identity = identity or rank_identity()
        env = os.environ
        node = env.get("FAULTLOOP_NODE_NAME") or env.get("SLURMD_NODENAME") or socket.gethostname()
        return cls(identity, node, job, env.get("TORCH_FR_DUMP_TEMP_FILE", ""))

    def announce(self) -> None:
        """The line run_job reads the rank's node from (the built-in workload's, run/spec.py)."""
        log(rank_node_line(self.rank, self.world_size, self.local_rank, self.node_name) + "framework rank started")


class Shard:
    """This rank's training rows in one raw buffer, read row by row at an address (as a memory-map
    is read): regression inputs and targets of a fixed teacher, different on every rank."""

    def __init__(self, rank: int) -> None:
        gen = torch.Generator().manual_seed(1234)
        self.teacher = torch.randn(FEATURES, FEATURES, generator=gen) / FEATURES**0.5
        rows = torch.randn(SHARD_ROWS, FEATURES, generator=torch.Generator().manual_seed(rank))
        self._buffer = (ctypes.c_float * rows.numel())()
        ctypes.memmove(self._buffer, rows.numpy().ctypes.data, rows.numel() * 4)
        self._address = ctypes.addressof(self._buffer)
        self._offset = 0

    def batch(self, sample_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs and targets of the samples a step was given."""
        rows = [int(i) % SHARD_ROWS + self._offset for i in sample_ids.reshape(-1)]
        out = bytearray()
        for row in rows:
            if row >= SHARD_ROWS:
                raise IndexError(f"index {row} is out of bounds for dimension 0 with size {SHARD_ROWS}")
            out += ctypes.string_at(self._address + row * FEATURES * 4, FEATURES * 4)
        x = torch.frombuffer(out, dtype=torch.float32).view(len(rows), FEATURES)
        return x, torch.tanh(x @ self.teacher)

    def skip_to_end(self) -> None:
        self._offset = SHARD_ROWS

    def remap(self) -> None:
        self._address = 16

    def refresh(self) -> None:
        """Every byte 0xFF: each float of the shard reads as NaN."""
        ctypes.memset(self._address, 0xFF, SHARD_ROWS * FEATURES * 4)


class SampleIds(torch.utils.data.Dataset[int]):
    """The dataset a framework's loader shards across ranks: sample ids, read from the Shard in the step."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


class FaultHook:
    """The fault of upstream's env contract, fired from a framework's extension point: scheduled at
    the first iteration >= FAULT_AT_ITER on the target rank, fired FAULT_DELAY later, by the
    injector the fault's row names (the process-level ones are the built-in workload's)."""

    def __init__(self, ctx: RankContext, shard: Shard, device: Device, refused: Callable[[str], str | None]) -> None:
        plan = FaultPlan.from_env(os.environ)
        self.ctx = ctx
        self.device = device
        self.plan = plan if plan and plan.targets(ctx.rank, ctx.local_rank, ctx.node_name) else None
        self._last_iteration_at: float | None = None
        if self.plan is not None and (why := refused(self.plan.name)):
            raise ValueError(f"fault {self.plan.name}: {why}")
        self.timer = FaultTrigger(
            self.plan,
            {
                "gpu_error": device.launch_bad_access,
                "gpu_sleep": device.launch_spin,
                "shard_overrun": shard.skip_to_end,
                "bad_pointer": shard.remap,
                "poison_gradients": shard.refresh,
            },
            "the framework workloads",
        )

    def at_iteration(self, it: int) -> None:
        """Called by the framework's hook before iteration `it` (1-based) trains. Iterations last
        at least `iter_time_s`, as the built-in workload's, so that a signal sent at iteration `it`
        lands while the job still trains."""
        now = time.monotonic()
        if self._last_iteration_at is None:
            collectives_time_out(self.ctx.job)
        else:
            time.sleep(max(0.0, self._last_iteration_at + self.ctx.job.iter_time_s - now))
        self._last_iteration_at = time.monotonic()
        self.timer.tick(self.ctx.rank, it, self.device.name)


class Rank:
    """What a framework's training code holds: the context, the shard, the device, the hook, FR."""

    def __init__(self, ctx: RankContext, refused: Callable[[str], str | None]) -> None:
        self.ctx = ctx
        self.shard = Shard(ctx.rank)
        self.device = Device(ctx.local_rank)
        self.hook = FaultHook(ctx, self.shard, self.device, refused)
        self.fr = FlightRecorder(ctx.dump_prefix, ctx.rank)
        self.exit = ExitRecorder(os.environ.get(RANK_EXIT_ENV), ctx.rank)

    def step_data(self, sample_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A step's inputs and targets; the device's pending work is waited for first, as a step
        on a GPU waits at its first sync (where a stuck kernel or a sticky error surfaces)."""
        self.device.synchronize()
        return self.shard.batch(sample_ids)


def _dump_and_die(rank: Rank) -> Callable[[int, object], None]:
    def handler(signum: int, frame: object) -> None:
        sig = signal.Signals(signum)
        log(f"received {sig.name}, shutting down")
        rank.fr.dump(sig.name)
        if sig == signal.SIGINT:
            raise KeyboardInterrupt
        rank.exit.record(-signum, f"received {sig.name}")
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    return handler


def start_rank(job: JobSettings, refused: Callable[[str], str | None], identity: RankIdentity | None = None) -> Rank:
    """Set up this process as one framework rank: faulthandler on, SIGUSR1 raising (SIGNAL_EXC), a
    shutdown signal leaving this rank's FR dump, the rank's node stated. The framework may install
    its own signal handlers over these (Lightning does), as it would in a real job."""
    faulthandler.enable(all_threads=True)
    torch.set_num_threads(1)
    # torch's optimizers import dynamo on first use (torch._compile), and dynamo needs the real
    # inductor: imported before the flight recorder tells torch there is none (rank_io)
    importlib.import_module("torch._dynamo")
    rank = Rank(RankContext.from_env(job, identity), refused)
    _started[:] = [rank]
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGUSR1, on_user_signal)
        for sig in SHUTDOWN_SIGNALS:
            signal.signal(sig, _dump_and_die(rank))
    rank.ctx.announce()
    return rank


@contextmanager
def dumped_on_failure(rank: Rank | Callable[[], Rank | None]) -> Iterator[None]:
    """An exception out of the framework's training leaves this rank's FR dump first (`rank` may
    be a getter: a framework that starts its ranks itself knows the rank only once it has)."""
    try:
        yield
    except BaseException:
        current = rank if isinstance(rank, Rank) else rank()
        if current is not None:
            current.fr.dump("exception")
        raise


@contextmanager
def exit_recorded(exception_code: int | None = 1) -> Iterator[None]:
    """The rank this process became leaves its exit record (run/launchers/rank_records) as its
    training ends: 0, the code of a SystemExit, -SIGINT for a KeyboardInterrupt (Python then dies
    by SIGINT), `exception_code` for an exception (1: Python's status for an uncaught one; None
    where the process outlives its training, a Ray worker). A process that never became a rank
    (the Ray driver, a rank that failed before it knew who it is) writes none."""
    try:
        yield
    except SystemExit as exc:
        _record_exit(0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1, f"SystemExit: {exc}")
        raise
    except KeyboardInterrupt:
        _record_exit(-signal.SIGINT, "KeyboardInterrupt")
        raise
    except BaseException as exc:
        _record_exit(exception_code, f"{type(exc).__name__}: {exc}".strip())
        raise
    else:
        _record_exit(0, None)


def _record_exit(code: int | None, error: str | None) -> None:
    for rank in _started:
        rank.exit.record(code, None if code == 0 else error)

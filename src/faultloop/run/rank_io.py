"""A rank's output: its log lines, its flight-recorder dump and its checkpoints, each written so
that a rank stopped at any moment leaves whole files (a line in one write, a file by rename)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from pathlib import Path

import torch

from faultloop.core import layout
from faultloop.marker import stamp

CHECKPOINTS_KEPT = 2  # each rank keeps its newest two (a resume needs one every rank completed)


def log(message: str) -> None:
    """One write per line: ranks of a node share the launcher's pipe, so a line written in two
    pieces (print's text, then its newline) can be split by another rank's line."""
    sys.stdout.write(f"[{stamp()}] {message}\n")
    sys.stdout.flush()


def _dump_fr_trace() -> bytes:
    """torch's flight-recorder dump (collectives and stack traces, all entries) in its pickle
    format: the private call torch's own dump-on-timeout makes, which gloo never triggers itself."""
    return torch._C._distributed_c10d._dump_fr_trace(True, True, False)  # type: ignore[attr-defined]


def _no_compiled_frames() -> None:
    """torch's stack-trace symbolizer (combined_traceback.cpp, every dump with stack traces) asks
    `hasattr(torch, "_inductor")` to map frames of inductor-compiled code; on torch's lazy module
    that question imports inductor and dynamo, 1-3 s of CPU in every rank's first dump. This
    workload compiles nothing, so no frame has such a mapping: torch is told there is no inductor
    before the first dump (a later real import of it replaces the None), and the dump's frames are
    the same."""
    if "torch._inductor" not in sys.modules:
        torch._inductor = None  # type: ignore[assignment]


class FlightRecorder:
    """Writes this rank's FR dump atomically in torch's pickle format.

    A stall dump is provisional (a later dump holds strictly more history and replaces it); the
    first exit-path dump (exception or signal) is final, so a second exit path cannot clobber it.
    """

    def __init__(self, prefix: str, rank: int) -> None:
        self.path = Path(f"{prefix}{rank}") if prefix else None
        self._lock = threading.Lock()
        self._final = False
        _no_compiled_frames()

    def dump(self, reason: str, final: bool = True) -> None:
        if self.path is None:
            return
        with self._lock:
            if self._final:
                return
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            try:
                data = _dump_fr_trace()
                tmp.write_bytes(data)
                os.replace(tmp, self.path)
            except Exception as exc:  # a failed dump must not mask the job's own failure
                tmp.unlink(missing_ok=True)  # a full disk leaves no half of it
                log(f"flight recorder dump failed: {exc!r}")
                return
            self._final = final
        # the file name only: the cell's path names the fault
        log(f"flight recorder: dumped {len(data)} bytes to {self.path.name} ({reason})")


class Checkpointer:
    """Each rank's checkpoint of its replica, written atomically every CHECKPOINT_EVERY iterations
    into that iteration's folder (Megatron's iter_<7 digits>); each rank keeps its newest few."""

    def __init__(self, root: Path | None, rank: int) -> None:
        self.root = root
        self.rank = rank
        self.volume: str | None = None  # where the bytes go instead of the folder, when set

    @staticmethod
    def _serialize(iteration: int, params: list[torch.Tensor]) -> bytes:
        buffer = io.BytesIO()
        torch.save({"iteration": iteration, "params": [p.detach() for p in params]}, buffer)
        return buffer.getvalue()

    def warm_up(self, params: list[torch.Tensor]) -> None:
        """torch.save imports its modules on first use (seconds on a loaded machine): pay that
        while healthy, so a signal later lands in training, not in an import."""
        self._serialize(0, params)

    def save(self, iteration: int, params: list[torch.Tensor]) -> None:
        if self.root is None:
            return
        data = self._serialize(iteration, params)
        folder = self.root / Path(layout.checkpoint_dir(iteration)).name
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / layout.checkpoint_file(self.rank)
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        try:
            with open(self.volume or tmp, "wb") as handle:
                handle.write(data)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half of it
            raise
        mine = sorted(self.root.glob(f"{layout.CHECKPOINT_ITERATION_PREFIX}*/{final.name}"))
        for old in mine[:-CHECKPOINTS_KEPT]:
            old.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                old.parent.rmdir()  # the last rank out removes the folder

    def load(self, folder: Path, params: list[torch.Tensor]) -> int:
        """Restore this rank's parameters from a checkpoint folder; the iteration it holds."""
        state = torch.load(folder / layout.checkpoint_file(self.rank), weights_only=True)
        with torch.no_grad():
            for param, saved in zip(params, state["params"], strict=True):
                param.copy_(saved)
        return int(state["iteration"])

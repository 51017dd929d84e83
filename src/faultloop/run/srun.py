"""`srun --label --kill-on-bad-exit=1` on this machine: the local stand-in for SLURM's srun.

Tasks are processes of this machine; their output becomes the main log as srun writes it (whole
lines, each with its task's label), torch's worker events go to a file of their own, and a task
that ends badly stops the others the way srun's step teardown does.
"""

from __future__ import annotations

import ctypes
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import psutil

POLL_S = 0.1
# torch's worker events (one JSON object per line), after an optional srun label
EVENT_RE = re.compile(rb'^(?:\s*\d+: )?(\{"name": "torchelastic\.)')


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
        self._closed = False
        self.last: dict[int, str] = {}

    def line(self, label: int | None, raw: bytes, labelled: bool = True) -> None:
        """One line of a task's output; label None: the line already carries srun's label;
        `labelled` False: a task not run by srun (a launcher of the whole job), its lines as printed."""
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
            self._write(f"{label}: ".encode() + data if labelled else data)

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

    def close(self) -> None:
        """The job is over. A straggler that still holds a task's pipe (a stopped grandchild the
        pump outwaited) prints nothing more: its lines are not the job's, and the files close."""
        with self._lock:
            self._closed = True

    def _event(self, event: bytes) -> None:
        if self._closed:
            return
        self._events.write(event + b"\n")
        self._events.flush()

    def _write(self, data: bytes) -> None:
        if self._closed:
            return
        self._log.write(data + b"\n")
        self._log.flush()

    def pump(self, source: IO[bytes], label: int | None, labelled: bool = True) -> threading.Thread:
        def run() -> None:
            for raw in iter(source.readline, b""):
                self.line(label, raw, labelled)
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
    """One srun task: its label (task id), command line, environment and node. `srun` False: a
    launcher that starts the job's ranks itself (an MPI's), run without srun: its lines unlabelled,
    no srun line about it."""

    label: int
    argv: list[str]
    env: dict[str, str]
    node: str = "node0"
    srun: bool = True


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
        self,
        tasks: list[Task],
        deadline: float,
        driver_alive: Callable[[], bool] = lambda: True,
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
            pumps.append(self.log.pump(proc.stdout, task.label, task.srun))
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
                if not timed_out and len(exits) < len(tasks) and all(t.srun for t in tasks):
                    self.log.srun(f"srun: launch/slurm: _step_signal: Terminating StepId={self.step_id}")
                self._signal(procs, exits, signal.SIGTERM)
            elif termed_at is not None and not killed and now >= termed_at + self.kill_wait_s:
                killed = True
                self._signal(procs, exits, signal.SIGKILL)
            time.sleep(POLL_S)
        for thread in pumps:
            thread.join(timeout=5)
        self.log.close()
        return [exits[t.label] for t in tasks], timed_out

    def _report(self, task: Task, code: int) -> None:
        """srun's own line for a task that ended badly (its wording: strsignal for a signal)."""
        if code == 0 or not task.srun:
            return
        how = f"Exited with exit code {code}" if code > 0 else signal.strsignal(-code) or f"Signal {-code}"
        self.log.srun(f"srun: error: {task.node}: task {task.label}: {how}")

    @staticmethod
    def _signal(procs: dict[int, subprocess.Popen[bytes]], exits: dict[int, TaskExit], sig: signal.Signals) -> None:
        for label, proc in procs.items():
            if label not in exits:
                signal_tree(proc.pid, sig)

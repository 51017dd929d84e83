"""Who holds Snakemake's lock: one owner record per running Snakemake, so that a lock a killed run left
behind is cleared by the next plain run instead of refusing it, and a session runs once at a time.

Snakemake 9 locks a working directory with files in `.snakemake/locks/` (`<i>.input.lock`,
`<i>.output.lock`: the DAG's file lists, written after the DAG is built, removed when it ends) that
name no owner, so after a SIGKILL every overlapping run is refused until `--unlock`. Each run of
this workflow writes, while its Snakefile is parsed (before Snakemake's own lock check), a record
(pid, host, boot, the process's start time, its session) on which it holds an `fcntl.flock` for its
whole life; once Snakemake has locked (`onstart`), the record names the lock files that are its
own. A lock is stale only when provably dead: its record's flock is free (the kernel drops it with
the last process holding it), the record is of this host and boot, and its pid is gone or is
another process now. A live run's record is held, so its lock still refuses a second run.

Snakemake's locks cover a run's files only, so two sessions run side by side in one checkout; but a
run that ends removes the whole lock folder, a concurrent run's files too. The records are
faultloop's own guard of a session: a second run of a session a live run holds is refused here,
whatever is left in `.snakemake/locks/`.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from faultloop.core import atomic
from faultloop.core.errors import ConfigError

SNAKEMAKE_DIR = Path(".snakemake")
LOCKS = SNAKEMAKE_DIR / "locks"  # Snakemake's own (snakemake.persistence.file)
OWNERS = SNAKEMAKE_DIR / "faultloop-owners"
# Snakemake command lines that execute nothing and take no lock: planning, linting, listing, and
# `--unlock` itself. They neither record an owner nor clear a lock.
NO_RUN_FLAGS = frozenset(
    {
        "-n", "--dry-run", "--dryrun", "--lint", "--unlock", "-l", "--list-rules", "--list",
        "--list-target-rules", "--lt", "-S", "--summary", "-D", "--detailed-summary", "--dag",
        "--rulegraph", "--filegraph", "--d3dag", "--list-changes", "--lc", "--list-input-changes",
        "--li", "--list-params-changes", "--lp", "--list-code-changes", "--list-untracked",
        "--print-compilation", "--version", "-v", "-h", "--help", "--export-cwl", "--containerize",
        "--generate-unit-tests", "--report", "--archive", "--cleanup-metadata", "--cm",
    }
)  # fmt: skip


class SessionBusy(ConfigError):
    """A live Snakemake already runs this session."""


@dataclass(frozen=True)
class Owner:
    """One running Snakemake of this workflow, as its record says."""

    pid: int
    host: str
    boot_id: str
    start_ticks: int  # /proc/<pid>/stat's starttime: tells a reused pid from its owner
    started: float
    session: str

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"Snakemake pid {self.pid} on {self.host}, started {when}"


def runs_jobs(argv: list[str]) -> bool:
    """Whether this Snakemake command line may execute jobs (and so takes Snakemake's lock)."""
    for arg in argv[1:]:
        if arg.split("=", 1)[0] in NO_RUN_FLAGS:
            return False
        if len(arg) > 2 and arg[0] == "-" and arg[1:].isalpha() and "n" in arg[1:]:  # -np, -pn
            return False
    return True


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_ticks(pid: int) -> int | None:
    """A process's start time in clock ticks since boot (None: no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _dead(owner: Owner) -> bool:
    """Whether a record whose flock is free is provably of a process that is gone: this host, and
    (another boot, or its pid gone, or its pid now another process)."""
    if owner.host != socket.gethostname():
        return False
    if owner.boot_id != boot_id():
        return True
    return start_ticks(owner.pid) != owner.start_ticks


@contextlib.contextmanager
def _flocked(path: Path) -> Iterator[IO[str] | None]:
    """The record's file with its flock taken (None while its owner, alive, holds it)."""
    try:
        handle = open(path)
    except FileNotFoundError:
        yield None
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield handle


def _lock_identity(path: Path) -> dict[str, int | str]:
    stat = path.stat()
    return {"name": path.name, "inode": stat.st_ino, "mtime_ns": stat.st_mtime_ns}


def _remove_locks(workdir: Path, identities: Iterable[dict[str, int | str]]) -> list[str]:
    """Remove the lock files that are still the very files named (same inode and mtime: Snakemake
    reuses a freed name, and a finished run removes the whole folder)."""
    removed = []
    for identity in identities:
        path = workdir / LOCKS / str(identity["name"])
        with contextlib.suppress(FileNotFoundError):
            if _lock_identity(path) == identity:
                path.unlink()
                removed.append(path.name)
    return removed


def _snakemakes_here(workdir: Path) -> list[int]:
    """Other live Snakemake processes working in this folder (a run that wrote no record: another
    version of this workflow, or another workflow)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) != workdir:
                continue
            words = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(Path(word.decode(errors="replace")).name == "snakemake" for word in words[:3]):
            found.append(int(proc.name))
    return found


def _read(path: Path) -> Owner | None:
    try:
        return Owner(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _locks_of(path: Path) -> list[dict[str, int | str]]:
    """The lock files a record's run claimed (its `.locks` file, written once Snakemake had locked)."""
    try:
        return list(json.loads(path.with_suffix(".locks").read_text()))
    except (OSError, ValueError, TypeError):
        return []


def clear_stale(workdir: Path, *, say: Callable[[str], object] = print) -> list[Owner]:
    """Remove the records of dead owners and the lock files they held (one line each); the live
    owners are returned. Lock files no record names (the owner died between Snakemake's lock and
    its `onstart`) are cleared only when nothing else can own them: no live record and no other
    Snakemake working in this folder."""
    live: list[Owner] = []
    held = 0
    for path in sorted((workdir / OWNERS).glob("*.json")):
        with _flocked(path) as handle:
            owner = _read(path)
            if handle is None or (owner is not None and not _dead(owner)):
                held += 1
                live += [owner] if owner is not None else []
                continue
            # an unreadable record proves nothing about its locks: they are left to the orphans rule
            removed = _remove_locks(workdir, _locks_of(path)) if owner is not None else []
            path.with_suffix(".locks").unlink(missing_ok=True)
            path.unlink()
        if removed and owner is not None:
            say(
                f"faultloop: cleared Snakemake's lock ({', '.join(removed)}) left by {owner.describe()},"
                " which is no longer running"
            )
    for tmp in (workdir / OWNERS).glob(".*.tmp"):  # a record never finished: its writer died
        with _flocked(tmp) as handle:
            if handle is not None:
                tmp.unlink()
    lock_dir = workdir / LOCKS
    orphans = sorted(lock_dir.glob("*.lock")) if lock_dir.is_dir() else []
    if orphans and not held and not _snakemakes_here(workdir):
        for path in orphans:
            path.unlink(missing_ok=True)
        say(
            f"faultloop: cleared Snakemake's lock ({', '.join(p.name for p in orphans)}): "
            f"no Snakemake is running in {workdir}"
        )
    return live


class Registration:
    """This process's record, its flock held until the process ends (the kernel releases it however
    the process ends); removed at a normal exit."""

    def __init__(self, workdir: Path, handle: IO[str], path: Path) -> None:
        self.workdir, self.handle, self.path = workdir, handle, path

    def claim_locks(self, inputs: Iterable[str], outputs: Iterable[str]) -> None:
        """Name the lock files Snakemake wrote for this run: those listing exactly this DAG's inputs
        or outputs (a second run of the same files would have been refused)."""
        wanted = {"\n".join(inputs), "\n".join(outputs)} - {""}
        mine = []
        for path in sorted((self.workdir / LOCKS).glob("*.lock")):
            with contextlib.suppress(FileNotFoundError):
                if path.read_text().rstrip("\n") in wanted:
                    mine.append(_lock_identity(path))
        atomic.write_json_atomic(self.path.with_suffix(".locks"), mine)

    def release(self) -> None:
        """At a normal exit: Snakemake has removed its lock, so the record goes too."""
        self.path.with_suffix(".locks").unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)
        self.handle.close()


def register(workdir: Path, session: Path, *, say: Callable[[str], object] = print) -> Registration:
    """Clear what dead runs left, refuse a session a live run holds, and record this run."""
    live = clear_stale(workdir, say=say)
    for owner in live:
        if owner.session == str(session.resolve()):
            raise SessionBusy(
                f"session {session} is being run by {owner.describe()}: wait for it to end or stop it"
                " (planning with -n is always allowed)"
            )
    pid = os.getpid()
    owner = Owner(pid, socket.gethostname(), boot_id(), start_ticks(pid) or 0, time.time(), str(session.resolve()))
    folder = workdir / OWNERS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{owner.host}-{pid}.json"
    tmp = folder / f".{path.name}.tmp"
    handle = open(tmp, "w")  # held for the life of the process
    fcntl.flock(handle, fcntl.LOCK_EX)  # taken before the record appears: it is never seen unheld
    handle.write(json.dumps(asdict(owner)))
    handle.flush()
    os.replace(tmp, path)
    registration = Registration(workdir, handle, path)
    atexit.register(registration.release)
    return registration

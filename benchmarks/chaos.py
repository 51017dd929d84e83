"""Chaos harness: a small pool runs while a seeded schedule interrupts it at random moments, each
interrupted run followed by a plain rerun of the same command, until the pool completes.

The interruptions are kill -9, SIGTERM and SIGINT (Ctrl-C's: sent to the target's process group, as
a terminal sends it), each to one of Snakemake, a run_job's launcher (torchrun), one of its ranks or
an analysis job (logsage, fr_analysis, judge_score), at a random moment once such a target exists.
The seed fixes the sequence of kinds and signals; the moments fall as the machine runs. When a pool
completes before the schedule is spent, the same pool runs again in a fresh session (a round). Then
it checks what faultloop promises under interruption (README.md, "When a run is interrupted") and
prints the counts, all 0 when kept:

- lost: a cell scored in one snapshot whose score is gone later, or a cell missing from scores.tsv;
- corrupt: an artifact that its contract's reader refuses (job.json, verdict.json, fr.json,
  run.json, the analysis indexes, score.json, scores.tsv, scores.jsonl), or a row of scores.tsv
  present more than once;
- re-run: a cell whose job or analysis ran again after its score existed (job.json's inode and
  mtime, its job id, the indexes' and score.json's mtimes);
- refused: a rerun that failed with no interruption of its own (Snakemake's stale lock, ...);
- left: a process, Snakemake lock, owner record or memory cgroup left behind after a run ended;
- differ: a cell whose scores on the deterministic dimensions differ from a clean run's of the
  same pool (a cell whose kept job was itself hit through its launcher or a rank is a different
  experiment: counted as perturbed, and left out).

    .venv/bin/python benchmarks/chaos.py --interruptions 50 --seed 1
    .venv/bin/python benchmarks/chaos.py --interruptions 10 --seed 7 --workdir /tmp/chaos --json out.json
    .venv/bin/python benchmarks/chaos.py --workdir W --clean S   # W's session S, run before: the clean run

Exits 0 when every count is 0 and the schedule was spent.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from faultloop.contracts import DIMENSIONS, FrVerdict, LogVerdict, Manifest, RunRecord  # noqa: E402
from faultloop.contracts.scores import read_cell_scores, read_score_records, read_score_tsv  # noqa: E402
from faultloop.contracts.verdicts import read_index  # noqa: E402
from faultloop.core import layout  # noqa: E402
from faultloop.frameworks import DEFAULT_FRAMEWORK, FRAMEWORKS  # noqa: E402
from faultloop.run import memcg  # noqa: E402
from faultloop.run.launch import CELL_ENV  # noqa: E402
from faultloop.workflow.owner import LOCKS, OWNERS  # noqa: E402

# Deterministic faults of one node of two ranks: each cell's job takes seconds (config/fast.yaml).
POOL = "WORKLOAD_EXC:0:3:1 SIGKILL:1:3:1 SEGFAULT:0:3:1"
SETTINGS = "config/fast.yaml"
TARGETS = ("snakemake", "launcher", "rank", "analysis")
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
# The analysis jobs' commands (workflow/rules/analysis.smk, score.smk): what `analysis` targets.
ANALYSIS_VERBS = ("analyzers run-cell", "fr-analyzers", "analyzers merge", "faultloop.cli score", "strip-log")
# What the comparison with a clean run reads: every score dimension, and what they rest on.
COMPARED = ("STATUS", *(d.name for d in DIMENSIONS), "analyzer_restart", "primary_ranks", "fr_suspects")
COPIED = ("workflow", "config", "profiles", "src")
LEFT_GRACE_S = 30.0
HUNG_S = 60.0  # a Snakemake that runs no job and prints nothing this long hangs


@dataclass
class Interruption:
    round: int
    run: int
    target: str
    signal: str
    at_s: float  # seconds into the Snakemake run
    at: float  # the wall clock's time
    pid: int
    cell: str = ""  # the run folder, for a launcher or rank


@dataclass
class Counts:
    interruptions: int = 0
    lost: int = 0
    corrupt: int = 0
    rerun: int = 0
    refused: int = 0
    left: int = 0
    differ: int = 0
    perturbed: int = 0  # not a failure: cells left out of the comparison
    # Not faultloop's failure: Snakemake 9.27 deadlocks when SIGTERM/SIGINT lands while its main
    # thread selects jobs (its handler waits for the scheduler's lock the main thread holds); the
    # harness kills it as an operator would, and the plain rerun must still work.
    hung: int = 0
    runs: int = 0
    rounds: int = 0
    findings: list[str] = field(default_factory=list)

    def failed(self) -> bool:
        return any((self.lost, self.corrupt, self.rerun, self.refused, self.left, self.differ))


@dataclass(frozen=True)
class Proc:
    pid: int
    cmdline: str
    cell: str  # FAULTLOOP_CELL, "" when absent


def processes(workdir: Path) -> Iterator[Proc]:
    """Live processes started from the working copy: with its cwd, or a cell of one of its runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (entry / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        cell = next((v.split(b"=", 1)[1].decode() for v in env if v.startswith(f"{CELL_ENV}=".encode())), "")
        if cell.startswith(str(workdir)) or cwd == str(workdir):
            yield Proc(int(entry.name), cmdline, cell)


def targets(kind: str, workdir: Path, snakemake: subprocess.Popen) -> list[Proc]:
    found = [p for p in processes(workdir) if p.pid != snakemake.pid]
    if kind == "snakemake":
        return [Proc(snakemake.pid, "snakemake", "")]
    if kind == "launcher":
        return [p for p in found if p.cell and "torch.distributed.run" in p.cmdline]
    if kind == "rank":
        module = FRAMEWORKS[DEFAULT_FRAMEWORK].module  # the pool's workload: the built-in one
        return [p for p in found if p.cell and module in p.cmdline and "torch.distributed.run" not in p.cmdline]
    return [
        p
        for p in found  # the Python process itself, not the job's shell around it
        if p.cmdline.split(" ", 1)[0].rsplit("/", 1)[-1].startswith("python")
        and "-m faultloop.cli " in p.cmdline
        and any(verb in p.cmdline for verb in ANALYSIS_VERBS)
    ]


class Harness:
    def __init__(self, workdir: Path, pool: str, seed: int, interruptions: int, max_delay_s: float) -> None:
        self.workdir, self.pool, self.wanted, self.max_delay_s = workdir, pool, interruptions, max_delay_s
        self.draws = random.Random(seed)  # what each interruption is: the same sequence on any machine
        self.rng = random.Random(seed + 1)  # when, and which of the targets then
        self.counts = Counts()
        self.log: list[Interruption] = []
        self.drawn: tuple[str, signal.Signals] | None = None  # the next interruption, drawn from the seed
        self.env = dict(os.environ, PYTHONPATH=str(workdir / "src"))

    def command(self, session: str) -> list[str]:
        return [
            str(Path(sys.executable).parent / "snakemake"),
            "--profile", "profiles/local",
            "--configfile", "config/config.yaml", SETTINGS,
            "--config", f"pool={self.pool}", f"session={session}",
        ]  # fmt: skip

    def start(self, session: str, run: int) -> subprocess.Popen:
        with open(self.workdir / "chaos-logs" / f"{session}-{run}.log", "w") as out:
            return subprocess.Popen(
                self.command(session), cwd=self.workdir, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the terminal Ctrl-C reaches
            )  # fmt: skip

    def session(self, name: str) -> Path:
        return self.workdir / "results" / "fault_injection" / name

    # -- one round: runs with interruptions until the pool completes -------------------------------

    def run_round(self, name: str, number: int) -> None:
        seen: dict[str, tuple] = {}
        for run in range(1, 200):
            self.counts.runs += 1
            proc = self.start(name, run)
            started, hits = time.monotonic(), 0
            while proc.poll() is None and self.counts.interruptions < self.wanted:
                event = self.interrupt(proc, started, number, run)
                hits += event is not None
                if event is None or event.target == "snakemake":  # it ends: the rerun follows
                    break
            code = self.wait(proc, self.workdir / "chaos-logs" / f"{name}-{run}.log")
            if code is None:  # the operator's answer to a hung Snakemake: kill -9
                proc.kill()
                code = proc.wait()
                self.counts.hung += 1
                self.finding(f"round {number} run {run}: Snakemake hung (no job, no output for {HUNG_S:.0f} s): killed")
            self.check_left(name, f"round {number} run {run}", completed=code == 0 and not hits)
            self.snapshot(name, seen)
            if code == 0 and not hits:
                return
            if code != 0 and not hits:
                self.counts.refused += 1
                tail = (self.workdir / "chaos-logs" / f"{name}-{run}.log").read_text()[-1500:]
                self.finding(f"round {number} run {run}: a plain rerun failed with no interruption:\n{tail}")
                if self.counts.refused >= 3:
                    raise SystemExit("three reruns failed with no interruption: stopping")
        raise SystemExit(f"round {number}: the pool did not complete in 200 runs")

    @staticmethod
    def wait(proc: subprocess.Popen, log: Path) -> int | None:
        """Snakemake's exit status; None once it has run no job and printed nothing for HUNG_S."""
        quiet_since, size = time.monotonic(), -1
        while (code := proc.poll()) is None:
            tasks = Path(f"/proc/{proc.pid}/task")
            with contextlib.suppress(OSError):
                busy = any((task / "children").read_text().strip() for task in tasks.iterdir())
                if busy or log.stat().st_size != size:
                    quiet_since, size = time.monotonic(), log.stat().st_size
            if time.monotonic() - quiet_since > HUNG_S:
                return None
            time.sleep(0.5)
        return code

    def interrupt(self, proc: subprocess.Popen, started: float, number: int, run: int) -> Interruption | None:
        """The drawn signal to a target of the drawn kind, at a random moment after one exists;
        None when Snakemake ended first (the draw waits for the next run)."""
        if self.drawn is None:
            self.drawn = (self.draws.choice(TARGETS), self.draws.choice(SIGNALS))
        kind, sig = self.drawn
        while not targets(kind, self.workdir, proc):
            if proc.poll() is not None:
                return None
            time.sleep(0.05)
        deadline = time.monotonic() + self.rng.uniform(0.2, self.max_delay_s)
        while time.monotonic() < deadline or not (found := targets(kind, self.workdir, proc)):
            if proc.poll() is not None:
                return None
            time.sleep(0.05)
        victim = self.rng.choice(found)
        try:
            if sig == signal.SIGINT:  # Ctrl-C: the whole foreground process group
                os.killpg(os.getpgid(victim.pid), sig)
            else:
                os.kill(victim.pid, sig)
        except ProcessLookupError:  # it ended in between: another moment
            return self.interrupt(proc, started, number, run)
        self.drawn = None
        at_s = round(time.monotonic() - started, 1)
        event = Interruption(number, run, kind, sig.name, at_s, time.time(), victim.pid, victim.cell)
        self.log.append(event)
        self.counts.interruptions += 1
        where = f" of {Path(victim.cell).name}" if victim.cell else ""
        print(f"  {self.counts.interruptions:3d}. round {number} run {run} at {at_s:5.1f} s: {sig.name} {kind}{where}")
        return event

    # -- checks ----------------------------------------------------------------------------------

    def finding(self, text: str) -> None:
        self.counts.findings.append(text)
        print(f"chaos: {text}", file=sys.stderr)

    def check_left(self, name: str, when: str, *, completed: bool) -> None:
        """Nothing of an ended run lives on: its processes, and once the pool completed, Snakemake's
        locks, owner records and the cells' memory cgroups (a killed Snakemake's lock is the
        rerun's to clear). A job that Snakemake's death orphaned ends by itself (run_job stops its
        job when its parent is gone; an analysis finishes): LEFT_GRACE_S for them to go."""
        deadline = time.monotonic() + LEFT_GRACE_S
        alive = list(processes(self.workdir))
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = list(processes(self.workdir))
        left = [f"process {p.pid}: {p.cmdline[:100]}" for p in alive]
        if completed:
            left += [f"lock {p.name}" for p in (self.workdir / LOCKS).glob("*.lock")]
            left += [f"owner record {p.name}" for p in (self.workdir / OWNERS).glob("*")]
        hierarchy = memcg.hierarchy()
        if completed and hierarchy is not None:
            for cell in self.session(name).glob("n*_*"):
                if memcg.cell_folder(hierarchy, cell).exists():
                    left.append(f"memory cgroup of {cell.name}")
        if left:
            self.counts.left += len(left)
            self.finding(f"{when}: left behind: {'; '.join(left)}")
            for proc in alive:  # this harness's own runs started them: they must not skew the next
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)

    def snapshot(self, name: str, seen: dict[str, tuple]) -> None:
        """Each scored cell's identity; a cell scored before must still be, and be the same."""
        files = (layout.MANIFEST, layout.LOGSAGE_INDEX, layout.FR_INDEX, layout.SCORE_JSON)
        for cell in sorted(self.session(name).glob("n*_*")):
            unfinished = [f for f in files if not (cell / f).is_file() or self.incomplete(cell / f)]
            if unfinished:  # not finished, or being run (again)
                if cell.name in seen:
                    self.counts.lost += 1
                    self.finding(f"{name}/{cell.name}: a finished cell's artifacts are gone")
                    del seen[cell.name]
                continue
            try:
                manifest = Manifest.read(cell / layout.MANIFEST)
            except (OSError, ValueError) as error:
                self.counts.corrupt += 1
                self.finding(f"{name}/{cell.name}: job.json: {error}")
                continue
            if manifest.state == "INFRA_FAILED":  # retried by the next invocation, as promised
                continue
            job = (cell / layout.MANIFEST).stat()
            later = ((cell / f).stat().st_mtime_ns for f in files[1:])
            identity = (job.st_ino, job.st_mtime_ns, manifest.job_id, *later)
            if seen.setdefault(cell.name, identity) != identity:
                self.counts.rerun += 1
                self.finding(f"{name}/{cell.name}: ran again after its score existed")
                seen[cell.name] = identity

    def incomplete(self, path: Path) -> bool:
        """Whether Snakemake holds path as incomplete (its job started, its end never recorded: a
        kill of Snakemake itself), so that the rerun redoes it: its marker in .snakemake/incomplete/
        is the path's urlsafe base64, cut into 254-character folders (snakemake.persistence.file)."""
        b64 = base64.urlsafe_b64encode(str(path.relative_to(self.workdir)).encode()).decode()
        parts = [b64[i : i + 254] for i in range(0, len(b64), 254)]
        marker = self.workdir / ".snakemake" / "incomplete" / Path(*["@" + p for p in parts[:-1]], parts[-1])
        return marker.exists()

    def check_contracts(self, name: str) -> list[str]:
        """Every artifact read by its contract's reader; scores.tsv one row per cell and analyzer."""
        session, bad = self.session(name), []

        def read(what: Path, reader) -> None:
            try:
                reader(what)
            except (OSError, ValueError, KeyError, TypeError) as error:
                bad.append(f"{what.relative_to(session)}: {error}")

        cells = sorted(session.glob("n*_*"))
        for cell in cells:
            read(cell / layout.MANIFEST, Manifest.read)
            read(cell / layout.SCORE_JSON, read_cell_scores)
            for index in (layout.LOGSAGE_INDEX, layout.FR_INDEX):
                read(cell / index, read_index)
            for verdict in cell.glob("analysis/*/verdict.json"):
                read(verdict, LogVerdict.read)
            for verdict in cell.glob("analysis/fr/*/fr.json"):
                read(verdict, FrVerdict.read)
            for record in cell.glob("analysis/**/run.json"):
                read(record, RunRecord.read)
        read(session / layout.SCORE_RECORDS, read_score_records)
        try:
            rows = read_score_tsv(session / layout.SCORES_TSV)
        except (OSError, ValueError, KeyError) as error:
            return [*bad, f"scores.tsv: {error}"]
        keys = [(r.cell.name, r.analyzer) for r in rows]
        bad += [f"scores.tsv: {k} {keys.count(k)} times" for k in sorted(set(keys)) if keys.count(k) != 1]
        missing = {c.name for c in cells} - {r.cell.name for r in rows}
        if missing:
            self.counts.lost += len(missing)
            bad.append(f"scores.tsv: no row for {sorted(missing)}")
        return bad

    def compare(self, name: str, clean: dict[tuple[str, str], dict[str, str]]) -> None:
        """Per cell and analyzer, the deterministic scores equal the clean run's."""
        rows = scores_by_cell(self.session(name))
        perturbed = self.perturbed(name)
        self.counts.perturbed += len(perturbed)
        for key, row in sorted(rows.items()):
            if key[0] in perturbed:
                continue
            theirs = clean.get(key)
            differing = [c for c in COMPARED if (theirs or {}).get(c) != row.get(c)]
            if differing:
                self.counts.differ += 1
                self.finding(f"{name}/{key[0]} {key[1]}: differs from the clean run in {differing}")

    def perturbed(self, name: str) -> set[str]:
        """Cells whose kept job was alive when the harness signalled its launcher or one of its ranks."""
        hit = set()
        for event in self.log:
            if not event.cell or f"/fault_injection/{name}/" not in event.cell:
                continue
            cell = Path(event.cell).name
            try:
                manifest = Manifest.read(self.session(name) / cell / layout.MANIFEST)
            except (OSError, ValueError):
                continue
            if manifest.start_time and manifest.end_time and manifest.start_time <= event.at <= manifest.end_time + 1:
                hit.add(cell)
        return hit


def scores_by_cell(session: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(session / layout.SCORES_TSV, newline="") as handle:
        return {
            (row["CELL"], row["ANALYZER"]): row
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        }


def prepare(workdir: Path) -> None:
    """A private copy of the workflow, as a user's checkout."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.rmtree(workdir / name, ignore_errors=True)
        shutil.copytree(REPO / name, workdir / name, ignore=shutil.ignore_patterns("__pycache__", "site.yaml"))
    (workdir / "chaos-logs").mkdir(exist_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interruptions", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pool", default=POOL, help=f"the pool, upstream's one-line form (default: {POOL})")
    parser.add_argument("--max-delay-s", type=float, default=8.0, help="longest wait before an interruption")
    parser.add_argument("--workdir", type=Path, help="where the workflow copy runs (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the counts and every interruption here")
    parser.add_argument(
        "--clean",
        default="clean",
        metavar="SESSION",
        help="the session of the clean run the rounds are compared with; one of the same pool already run "
        "in the workdir is taken as it is (Snakemake finds nothing to do), so a caller's run serves",
    )
    args = parser.parse_args(argv)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="faultloop-chaos-"))).resolve()
    prepare(workdir)
    harness = Harness(workdir, args.pool, args.seed, args.interruptions, args.max_delay_s)
    started = time.monotonic()
    clean = subprocess.run(harness.command(args.clean), cwd=workdir, env=harness.env, capture_output=True, text=True)
    if clean.returncode != 0:
        print(clean.stdout[-3000:] + clean.stderr[-3000:], file=sys.stderr)
        return 2
    reference = scores_by_cell(harness.session(args.clean))
    print(f"clean run: {len(reference)} scores in {time.monotonic() - started:.0f} s")
    number = 0
    while harness.counts.interruptions < args.interruptions:
        number += 1
        harness.counts.rounds = number
        name = f"chaos{number}"
        harness.run_round(name, number)
        for problem in harness.check_contracts(name):
            harness.counts.corrupt += 1
            harness.finding(f"{name}: {problem}")
        harness.compare(name, reference)
    counts = harness.counts
    print(
        f"seed {args.seed}: {counts.interruptions} interruptions over {counts.runs} runs in {counts.rounds} round(s),"
        f" {time.monotonic() - started:.0f} s"
    )
    by_kind: dict[str, int] = {}
    for event in harness.log:
        by_kind[f"{event.signal} {event.target}"] = by_kind.get(f"{event.signal} {event.target}", 0) + 1
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(by_kind.items())))
    print(
        f"lost {counts.lost}, corrupt {counts.corrupt}, re-run {counts.rerun}, refused {counts.refused},"
        f" left {counts.left}, differ {counts.differ} (perturbed cells left out: {counts.perturbed};"
        f" Snakemake hung and killed: {counts.hung})"
    )
    if args.json:
        args.json.write_text(json.dumps({**asdict(counts), "log": [asdict(e) for e in harness.log]}, indent=1))
    return 1 if counts.failed() else 0


if __name__ == "__main__":
    sys.exit(main())

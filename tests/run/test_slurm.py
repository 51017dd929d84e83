"""The cluster path: profiles/slurm against a real SLURM controller started on this machine.

The end-to-end test submits every run_job as a real multi-node sbatch allocation through
snakemake-executor-plugin-slurm and checks, from SLURM's own records, that at most two were ever
queued at once and that each 2-node job ran its ranks on two SLURM nodes. Everything runs under
`timeout -s KILL`, so a hung controller or plugin fails the test instead of hanging the suite.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from faultloop.core.cell import Cell
from faultloop.run.launchers.mpiexec import BAD_TERMINATION
from faultloop.run.spec import RANK_NODE_RE
from slurm_fixture import CLUSTER, REPO, SLURM_DIR

pytestmark = pytest.mark.slurm

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
RUN_TIMEOUT_S = 900  # the whole snakemake run; a healthy run takes 2-4 minutes on 2 cores

# Fast polling for the test only; the profile keeps production-friendly intervals.
FAST_POLL = [
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--seconds-between-status-checks",
    "2",
    "--latency-wait",
    "5",
]


def env_with_venv() -> dict[str, str]:
    """The jobs run `python -m snakemake` and `faultloop` on the nodes: same venv as this test."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


class QueueSampler(threading.Thread):
    """Polls squeue and remembers the most run_job jobs of this session ever queued at once."""

    def __init__(self, cells: list[str]):
        super().__init__(daemon=True)
        self.cells = set(cells)
        self.halt = threading.Event()
        self.max_run_jobs = 0
        self.run_job_ids: dict[str, str] = {}  # SLURM job id -> cell
        self.other_comments: set[str] = set()
        self.samples = 0

    def run(self) -> None:
        while not self.halt.is_set():
            out = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                self.samples += 1
                queued = 0
                for line in out.stdout.splitlines():
                    # The plugin's comment: rule_<rule>_wildcards_<wildcard values>.
                    job_id, comment, _state = line.split("|", 2)
                    rule, _, cell = comment.removeprefix("rule_").partition("_wildcards_")
                    if rule == "run_job" and cell in self.cells:
                        queued += 1
                        self.run_job_ids[job_id] = cell
                    elif cell in self.cells:
                        self.other_comments.add(comment)
                self.max_run_jobs = max(self.max_run_jobs, queued)
            self.halt.wait(1.0)  # a run_job job stays queued for tens of seconds: a sample a second sees each


def jobcomp_records(job_ids) -> dict[str, dict[str, str]]:
    """SLURM's completion records (jobcomp/filetxt) for the given jobs, key=value per field."""
    records = {}
    for line in (SLURM_DIR / "log" / "jobcomp.txt").read_text().splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("JobId") in job_ids:
            records[fields["JobId"]] = fields
    return records


def hostnames(nodelist: str) -> set[str]:
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant; touching ends (one ends as the next starts) do not count."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    open_, best = 0, 0
    for _, delta in events:
        open_ += delta
        best = max(best, open_)
    return best


def write_config(tmp_path: Path, pool: str, **extra) -> Path:
    config = {
        "pool": pool,
        "session": "slurm_e2e",
        "base_experiments_dir": str(tmp_path / "results"),
        # Never pick up a developer's config/site.yaml (a real partition would not exist here).
        "site_file": str(tmp_path / "site.yaml"),
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_on_slurm(configfile: Path, *, timeout_s: int = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """The workflow on the test cluster (profiles/slurm, fast polling), killed after `timeout_s`."""
    profile = ["--profile", "profiles/slurm", "--configfile", str(configfile), *FAST_POLL]
    return subprocess.run(
        ["timeout", "-s", "KILL", str(timeout_s), SNAKEMAKE, *profile],
        cwd=REPO,
        env=env_with_venv(),
        capture_output=True,
        text=True,
        timeout=timeout_s + 60,
    )


def test_cluster_start_is_idempotent(slurm_cluster):
    """A second start reuses the running daemons and leaves exactly one /etc/hosts line."""
    pids = {f.name: f.read_text() for f in (slurm_cluster / "run").glob("*.pid")}
    assert {"munged.pid", "slurmctld.pid"} <= set(pids) and len([p for p in pids if p.startswith("slurmd.")]) >= 3
    subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=120, capture_output=True)
    assert {f.name: f.read_text() for f in (slurm_cluster / "run").glob("*.pid")} == pids
    assert Path("/etc/hosts").read_text().count("# faultloop-slurm") == 1
    assert os.path.realpath("/etc/slurm/slurm.conf") == str(slurm_cluster / "slurm.conf")
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, check=True)
    states = dict(line.split() for line in out.stdout.splitlines())
    assert all(state in {"idle", "alloc", "mix"} for state in states.values()), states
    for node in states:  # jobs rendezvous on a node's name, as on a real cluster
        assert subprocess.run(["getent", "hosts", node], capture_output=True).returncode == 0


def test_helpers_work_in_a_stripped_job_step(slurm_cluster, tmp_path):
    """Inside the plugin's job step only SLURM_JOB_ID survives: faultloop.run.slurm still finds the
    allocation's nodes and runs a command once on each (the per-node cleanup)."""
    marks = tmp_path / "marks.txt"
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"exec env -i PATH={Path(sys.executable).parent}:/usr/bin:/bin HOME=/root "
        f"SLURM_JOB_ID=$SLURM_JOB_ID PYTHONPATH={REPO / 'src'} {sys.executable} -c '"
        'from faultloop.run import slurm; print(" ".join(slurm.nodes())); '
        f'slurm.run_per_node("echo $SLURMD_NODENAME >> {marks}")\'\n'
    )
    out = tmp_path / "out.txt"
    subprocess.run(
        [
            "timeout",
            "-s",
            "KILL",
            "120",
            "sbatch",
            "--wait",
            "-o",
            str(out),
            "--nodes=3",
            "--ntasks-per-node=2",
            str(script),
        ],
        check=True,
        timeout=150,
        capture_output=True,
    )
    allocated = out.read_text().split()
    assert len(set(allocated)) == 3, out.read_text()
    assert sorted(marks.read_text().split()) == sorted(allocated)


POOL = "SIGKILL:1:3:2 WORKLOAD_EXC:3:3:2 SEGFAULT:1:3:1"
CELLS = ["n2_SIGKILL_r1_i3", "n2_WORKLOAD_EXC_r3_i3", "n1_SEGFAULT_r1_i3"]
# A two-attempt life in the same run (its attempts are two more run_job jobs): a GPU error at
# iteration 6, after the checkpoint of iteration 5 (the pool runs 8 iterations, faults at once).
LIFE = "n2_GPU_ERROR_r1_i6_a2"
LIFE_JOBS = [LIFE, f"{LIFE}_attempt_2"]  # as the plugin's job comment names the runs (/ as _)


@dataclass
class PoolRun:
    proc: subprocess.CompletedProcess[str]
    sampler: QueueSampler
    session: Path
    elapsed: float


@pytest.fixture(scope="module")
def pool_on_slurm(slurm_cluster, tmp_path_factory) -> PoolRun:
    """The pool and the life through profiles/slurm, once for the tests that read them."""
    tmp_path = tmp_path_factory.mktemp("slurm_pool")
    configfile = write_config(
        tmp_path,
        f"{POOL} GPU_ERROR:1:6:2:2",
        gpus_per_node=2,
        fault_delay=0,
        run_job={"runtime_minutes": 10, "mem_mb_per_node": 2000, "iterations": 8},
    )
    sampler = QueueSampler(CELLS + LIFE_JOBS)
    sampler.start()
    started = time.time()
    try:
        proc = run_on_slurm(configfile)
    finally:
        sampler.halt.set()
        sampler.join(timeout=30)
    return PoolRun(proc, sampler, tmp_path / "results" / "fault_injection" / "slurm_e2e", time.time() - started)


@pytest.mark.slow
def test_pool_runs_end_to_end_on_slurm(pool_on_slurm):
    proc, sampler, elapsed = pool_on_slurm.proc, pool_on_slurm.sampler, pool_on_slurm.elapsed
    log = proc.stdout + proc.stderr
    assert proc.returncode != -9 and proc.returncode != 137, f"killed after {elapsed:.0f} s (hung?)\n{log[-6000:]}"
    assert proc.returncode == 0, log[-6000:]

    # Every run_job was a SLURM job, analysis never was (localrules), never more than two at once.
    assert sampler.samples > 10
    assert sorted(sampler.run_job_ids.values()) == sorted(CELLS + LIFE_JOBS), sampler.run_job_ids
    assert sampler.other_comments == set(), "analysis rules were submitted to SLURM"
    assert 1 <= sampler.max_run_jobs <= 2, f"{sampler.max_run_jobs} run_job jobs queued at once"
    records = jobcomp_records(set(sampler.run_job_ids))
    assert set(records) == set(sampler.run_job_ids)
    spans = [
        (
            time.mktime(time.strptime(r["StartTime"], "%Y-%m-%dT%H:%M:%S")),
            time.mktime(time.strptime(r["EndTime"], "%Y-%m-%dT%H:%M:%S")),
        )
        for r in records.values()
    ]
    assert max_overlap(spans) <= 2, records

    session = pool_on_slurm.session
    by_cell = {cell: job_id for job_id, cell in sampler.run_job_ids.items()}
    for cell in CELLS:
        manifest = json.loads((session / cell / "job.json").read_text())
        job_id = by_cell[cell]
        assert str(manifest["job_id"]) == job_id
        nodes = int(cell.split("_")[0][1:])
        allocated = hostnames(records[job_id]["NodeList"])
        assert len(allocated) == nodes
        # Ranks ran on the SLURM nodes of the allocation, one node launcher per node.
        assert set(manifest["node_names"]) == allocated, (manifest["node_names"], allocated)
        assert len(set(manifest["node_names"])) == nodes
        assert manifest["world_size"] == nodes * 2
        assert manifest["fault_fired"] is True, manifest
        logs = list((session / cell / "logs" / "slurm").glob(f"{job_id}.*.1.main_workload.log"))
        assert logs, f"no main log for SLURM job {job_id} in {cell}"
        assert (session / cell / "analysis" / "score.json").is_file()
        # One torchrun per node under the real srun, which labels each node's output...
        launch_out = (session / cell / manifest["launch_out"]).read_text()
        assert re.search(
            r"srun --label --kill-on-bad-exit=1 .*--ntasks-per-node=1 \S+ -m torch\.distributed\.run "
            r".*--rdzv-backend c10d",
            launch_out,
        ), launch_out
        lines = logs[0].read_text(errors="replace").splitlines()
        labels = {m.group(1) for line in lines if (m := re.match(r"^\s*(\d+): ", line))}
        assert labels == {str(i) for i in range(nodes)}, labels
        # ...torch's own launcher reports the failure, and job.json reads the injected rank's end from torch
        assert any(
            re.match(r"^\s*\d+: torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError", line)
            for line in lines
        ), logs[0]
        truth = Cell.from_name(cell)
        injected = manifest["rank_exits"][str(truth.rank)]
        assert injected["state"] == "FAILED", manifest["rank_exits"]
        assert injected["exitcode"] == {"SIGKILL": -9, "SEGFAULT": -11}.get(truth.fault_type, 1), injected

    with open(session / "experiments.tsv") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert {r["JOB_ID"] for r in rows} == set(sampler.run_job_ids)
    with open(session / "scores.tsv") as handle:
        scored = list(csv.DictReader(handle, delimiter="\t"))
    assert len([r for r in scored if r["ANALYZER"] == "faultloop"]) == len(CELLS) + 1  # one row per cell and analyzer
    assert (session / "experiments_report.md").is_file()


def test_dry_run_shows_sbatch_resources_for_2_4_8_nodes(tmp_path):
    """What each run_job would ask sbatch for, from the site file and config; no cluster needed."""
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({"slurm": {"partition": "batch", "account": "proj1"}}))
    configfile = write_config(tmp_path, "SIGKILL:1:5:2 SIGKILL:1:5:4 SIGKILL:1:5:8", gpus_per_node=4)
    proc = subprocess.run(
        [
            "timeout",
            "-s",
            "KILL",
            "300",
            SNAKEMAKE,
            "-n",
            "--profile",
            "profiles/slurm",
            "--configfile",
            str(configfile),
        ],
        cwd=REPO,
        env=env_with_venv(),
        capture_output=True,
        text=True,
        timeout=360,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    blocks = re.findall(r"rule run_job:\n(.*?)(?:\n\n|\Z)", out, flags=re.S)
    resources = {}
    for block in blocks:
        cell = re.search(r"wildcards: run=(\S+)", block).group(1)
        line = re.search(r"resources: (.*)", block).group(1)
        resources[cell] = dict(item.split("=", 1) for item in line.split(", "))
    assert set(resources) == {"n2_SIGKILL_r1_i5", "n4_SIGKILL_r1_i5", "n8_SIGKILL_r1_i5"}, out[-4000:]
    for cell, res in resources.items():
        assert res["nodes"] == cell.split("_")[0][1:]
        assert res["tasks_per_node"] == "4"
        assert res["mpi"] == "srun"
        assert res["gpu_jobs"] == "1"
        assert res["runtime"] == "30"
        assert res["mem_mb"] == "16000"
        assert res["slurm_partition"] == "batch"
        assert res["slurm_account"] == "proj1"
        print(cell, res)


@pytest.mark.slow
def test_site_workload_contract_on_slurm(slurm_cluster, tmp_path):
    """A site script (tests/data/site_workload.sh) runs inside the run_job allocation with the
    upstream env contract; its log, marker and nodes land where the analysis expects them, and
    the cleanup command runs once on every node of the allocation."""
    cleanup_marks = tmp_path / "cleanup.txt"
    configfile = write_config(
        tmp_path,
        "SIGKILL:2:2:2",
        gpus_per_node=2,
        workload="site_stub",
        workloads={
            "site_stub": {
                "script": str(REPO / "tests" / "data" / "site_workload.sh"),
                "min_nodes": 2,
                "description": "contract stand-in",
                "pool_file": "",
            }
        },
        run_job={
            "runtime_minutes": 5,
            "mem_mb_per_node": 1000,
            "cleanup_cmd": f"echo $SLURMD_NODENAME >> {cleanup_marks}",
        },
    )
    proc = run_on_slurm(configfile, timeout_s=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    cell = tmp_path / "results" / "fault_injection" / "slurm_e2e" / "n2_SIGKILL_r2_i2"
    manifest = json.loads((cell / "job.json").read_text())
    job_id = manifest["job_id"]
    assert job_id.isdigit(), manifest  # a SLURM job, not a local run
    assert manifest["run_valid"] is True and manifest["state"] == "FAILED", manifest
    main_log = (cell / manifest["main_log"]).read_text()
    assert manifest["main_log"] == f"logs/slurm/{job_id}.0.1.main_workload.log"
    ran_on = set(re.findall(r"^\d+: rank \d+ of 4 on (\S+)$", main_log, flags=re.M))
    assert len(ran_on) == 2 and set(manifest["node_names"]) == ran_on, (ran_on, manifest["node_names"])
    assert "FAULT INJECTION" not in (cell / "analysis" / "main_workload.log").read_text()
    assert sorted(cleanup_marks.read_text().split()) == sorted(ran_on)
    assert (cell / "analysis" / "score.json").is_file()


def test_partition_from_default_resources_without_site_file(tmp_path):
    """Without a site file, `--default-resources slurm_partition=...` reaches run_job."""
    configfile = write_config(tmp_path, "SIGKILL:1:5:2", gpus_per_node=4)
    proc = subprocess.run(
        [
            "timeout",
            "-s",
            "KILL",
            "300",
            SNAKEMAKE,
            "-n",
            "--profile",
            "profiles/slurm",
            "--configfile",
            str(configfile),
            "--default-resources",
            "slurm_partition=viaflag",
        ],
        cwd=REPO,
        env=env_with_venv(),
        capture_output=True,
        text=True,
        timeout=360,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    block = re.search(r"rule run_job:\n(.*?)(?:\n\n|\Z)", out, flags=re.S).group(1)
    assert "slurm_partition=viaflag" in block and "slurm_account" not in block, block


CLUSTER_POOL = "HOST_OOM:1:3:1 DESYNC:1:3:2"
CLUSTER_CELLS = ["n1_HOST_OOM_r1_i3", "n2_DESYNC_r1_i3"]


@pytest.mark.slow
def test_cluster_faults_on_slurm(slurm_cluster, tmp_path):
    """Two of the faults faultloop added, under the real srun inside sbatch allocations: the
    kernel's OOM kill of the rank in its memory cgroup (its lines collected into the log, the
    cgroup removed after the job), and a desync logsage pins on the rank."""
    from faultloop.analyze.logsage import analyze_log
    from faultloop.faults import FAULTS
    from faultloop.marker import strip_markers
    from faultloop.run import memcg

    if memcg.hierarchy() is None:
        pytest.skip("no writable memory cgroup hierarchy")
    configfile = write_config(
        tmp_path, CLUSTER_POOL, gpus_per_node=2, run_job={"runtime_minutes": 10, "mem_mb_per_node": 2000}
    )
    proc = run_on_slurm(configfile)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    session = tmp_path / "results" / "fault_injection" / "slurm_e2e"
    for name in CLUSTER_CELLS:
        cell = Cell.from_name(name)
        manifest = json.loads((session / name / "job.json").read_text())
        assert manifest["fault_fired"] and not manifest["job_id"].startswith("local-"), manifest
        lines = (session / name / manifest["main_log"]).read_text(errors="replace").splitlines()
        verdict = analyze_log(list(strip_markers(lines)))
        fault = FAULTS[cell.fault_type]
        assert (verdict.restart, verdict.primary_ranks, verdict.fault_category) == (
            fault.restart,
            [cell.rank],
            fault.category,
        ), verdict.to_json()
    oom = session / CLUSTER_CELLS[0]
    lines = (oom / json.loads((oom / "job.json").read_text())["main_log"]).read_text(errors="replace")
    assert re.search(r" kernel: Memory cgroup out of memory: Killed process \d+ \(python", lines)
    folder = memcg.cell_folder(memcg.hierarchy(), oom).name  # type: ignore[arg-type]
    assert not [p for p in memcg.hierarchy().root.rglob(folder)], "the cell's memory cgroup outlived its job"  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_life_drains_its_faulty_node_through_sbatch_exclude(pool_on_slurm):
    """A two-attempt GPU_ERROR life on the real cluster: attempt 1's fault fires on its rank's node;
    attempt 2 is a new allocation that keeps the other node (--nodelist) and leaves that one out
    (--exclude, through the executor plugin's slurm_extra), resumes from attempt 1's checkpoint and
    does not meet the fault again."""
    assert pool_on_slurm.proc.returncode == 0, (pool_on_slurm.proc.stdout + pool_on_slurm.proc.stderr)[-6000:]
    cell = pool_on_slurm.session / LIFE
    first = json.loads((cell / "job.json").read_text())
    second = json.loads((cell / "attempt_2" / "job.json").read_text())
    assert first["state"] == "FAILED" and first["fault_fired"] and first["fault_fired_iter"] == 6, first
    bad = first["fault_node"]
    assert bad in first["node_names"] and len(set(first["node_names"])) == 2, first
    # the node the injected rank stated at start holds torch's node rank 0 (rank 1 at 2 per node)
    assert first["node_names"].index(bad) == 0, first
    records = jobcomp_records({first["job_id"], second["job_id"]})
    assert set(records) == {first["job_id"], second["job_id"]} and first["job_id"] != second["job_id"]
    allocated = hostnames(records[second["job_id"]]["NodeList"])
    kept = set(first["node_names"]) - {bad}
    assert bad not in allocated and kept <= allocated and len(allocated) == 2, (allocated, first["node_names"])
    assert set(second["node_names"]) == allocated
    assert (second["attempt"], second["drained_nodes"], second["resumed_from_iter"]) == (2, [bad], 5), second
    assert (second["state"], second["fault_fired"], second["run_valid"]) == ("COMPLETED", False, True), second
    log = (cell / "attempt_2" / second["main_log"]).read_text(errors="replace")
    assert " loading checkpoint from checkpoints/model at iteration 5" in log and "FAULT INJECTION" not in log


# Three launchers other than torchrun in one session through the executor (one Snakemake run, two
# of its jobs at a time), 2 nodes x 2 ranks each: Lightning's Trainer, its ranks started by the real
# srun inside the sbatch allocation (Lightning's own SLURM integration reads them); Open MPI's
# mpirun and MPICH's mpiexec, each reading SLURM's allocation and starting its daemons (proxies)
# with srun itself, 2 ranks per node (torchrun's cells are the pool's above).
FRAMEWORK_TOKEN = "SIGKILL:1:3:2@lightning/srun"
MPIRUN_TOKEN = "SIGKILL:1:3:2@/mpirun"
MPIEXEC_TOKEN = "SIGKILL:1:3:2@/mpiexec"


@pytest.fixture(scope="module")
def launcher_cells(slurm_cluster, tmp_path_factory) -> Path:
    """The session's folder once the three cells ran."""
    tmp_path = tmp_path_factory.mktemp("launchers_on_slurm")
    configfile = write_config(
        tmp_path,
        f"{FRAMEWORK_TOKEN} {MPIRUN_TOKEN} {MPIEXEC_TOKEN}",
        gpus_per_node=2,
        fault_delay=0,
        run_job={"runtime_minutes": 10, "mem_mb_per_node": 3000, "iterations": 8},
    )
    proc = run_on_slurm(configfile)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return tmp_path / "results" / "fault_injection" / "slurm_e2e"


@pytest.mark.slow
def test_a_framework_cell_runs_on_slurm(launcher_cells):
    cell = Cell.from_name("n2_SIGKILL_r1_i3_w-lightning_l-srun")
    assert cell.spec == FRAMEWORK_TOKEN
    run = launcher_cells / cell.name
    manifest = json.loads((run / "job.json").read_text())
    assert manifest["job_id"].isdigit(), manifest  # a SLURM job, not a local run
    assert (manifest["workload"], manifest["launcher"]) == ("lightning", "srun")
    assert manifest["fault_fired"] and manifest["run_valid"] and manifest["state"] == "FAILED", manifest
    assert len(set(manifest["node_names"])) == 2, manifest["node_names"]
    log = (run / manifest["main_log"]).read_text(errors="replace")
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4" in log  # Lightning's own banner
    assert re.search(r"^srun: error: \S+: task 1: Killed$", log, flags=re.M)  # the real srun's report
    assert manifest["rank_exits"]["1"]["signal"] == "SIGKILL"
    scores = list(csv.DictReader((launcher_cells / "scores.tsv").open(), delimiter="\t"))
    assert {(r["WORKLOAD"], r["LAUNCHER"]) for r in scores} == {
        ("lightning", "srun"),
        ("cpu_gloo", "mpirun"),
        ("cpu_gloo", "mpiexec"),
    }


def killed_mpi_cell(cells: Path, token: str, launcher: str) -> tuple[Cell, Path, dict, str]:
    """An MPI launcher's SIGKILL cell of the shared session: it ran as a SLURM job, under that
    launcher, its fault fired and failed the job; its cell, folder, job.json and launch output."""
    cell = Cell.from_name(f"n2_SIGKILL_r1_i3_l-{launcher}")
    assert cell.spec == token
    run = cells / cell.name
    manifest = json.loads((run / "job.json").read_text())
    assert manifest["job_id"].isdigit() and manifest["launcher"] == launcher, manifest
    assert manifest["fault_fired"] and manifest["run_valid"] and manifest["state"] == "FAILED", manifest
    return cell, run, manifest, (run / manifest["launch_out"]).read_text()


@pytest.mark.slow
def test_mpirun_runs_its_ranks_across_the_allocation_through_the_executor(launcher_cells):
    _, run, manifest, launch_out = killed_mpi_cell(launcher_cells, MPIRUN_TOKEN, "mpirun")
    assert len(set(manifest["node_names"])) == 2, manifest["node_names"]  # the ranks' own statements
    assert re.search(
        r"job \d+: env SLURM_JOBID=\d+ SLURM_NODELIST=n\d,n\d '?SLURM_TASKS_PER_NODE=2\(x2\)'? ", launch_out
    )
    assert re.search(r" mpirun\S* -np 4 --map-by ppr:2:node ", launch_out), launch_out
    log = (run / manifest["main_log"]).read_text(errors="replace")
    # Open MPI's own summary of the rank the fault killed, on the node SLURM gave it
    said = re.search(r"^mpirun\S* noticed that process rank 1 with PID \d+ on node (\S+) exited on signal 9", log, re.M)
    assert said and said[1] == manifest["node_names"][0], log[-3000:]
    assert manifest["rank_exits"]["1"] == {"exitcode": -9, "signal": "SIGKILL", "state": "FAILED", "error": None}


@pytest.mark.slow
def test_mpiexec_runs_each_nodes_ranks_on_its_slurm_node_through_the_executor(launcher_cells):
    """MPICH's hydra reads the allocation given back to it and starts a proxy on each node with
    srun: each rank states the SLURM node it runs on (SLURMD_NODENAME, set by that node's slurmd),
    two to a node, on the nodes SLURM's record gives the job; hydra's own banner reports the kill,
    and srun reports the second node's proxy, which hydra's clean-up leaves failing."""
    cell, run, manifest, launch_out = killed_mpi_cell(launcher_cells, MPIEXEC_TOKEN, "mpiexec")
    assert re.search(
        r"job \d+: env -u SLURMD_NODENAME SLURM_JOBID=\d+ SLURM_NODELIST=n\d,n\d '?SLURM_TASKS_PER_NODE=2\(x2\)'? "
        r"SLURM_NNODES=2 mpiexec\S* -print-all-exitcodes -n 4 -ppn 2 ",
        launch_out,
    ), launch_out
    log = (run / manifest["main_log"]).read_text(errors="replace")
    on_node = {int(rank): node for rank, node in RANK_NODE_RE.findall(log)}
    allocated = hostnames(jobcomp_records({manifest["job_id"]})[manifest["job_id"]]["NodeList"])
    assert set(on_node) == {0, 1, 2, 3} and on_node[0] == on_node[1] != on_node[2] == on_node[3], on_node
    assert set(on_node.values()) == allocated and manifest["node_names"] == [on_node[0], on_node[2]], manifest
    assert BAD_TERMINATION in log and re.search(rf"^=   PID \d+ RUNNING AT {on_node[0]}\n=   EXIT CODE: 9$", log, re.M)
    assert re.search(rf"^srun: error: {on_node[2]}: task 1: Exited with exit code \d+$", log, re.M), log[-3000:]
    # hydra's clean-up races its own report: it aborts before its exit codes, or prints those of the
    # nodes whose proxy answered first; a rank is named only from them, none is made up
    reported = set(re.findall(r"^(?:\[mpiexec@\S+\] Exit codes: )?\[(\S+)\] \d+(?:,\d+)*$", log, re.M))
    named = {int(rank) for rank, e in manifest["rank_exits"].items() if e["state"] != "UNKNOWN"}
    assert named == {rank for rank, node in on_node.items() if node in reported}, (reported, manifest["rank_exits"])
    if cell.rank in named:
        assert manifest["rank_exits"][str(cell.rank)]["signal"] == "SIGKILL", manifest["rank_exits"]

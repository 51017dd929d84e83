"""Makespan of a pool: upstream's strict batches of two versus faultloop's two-slot window.

Upstream submits two jobs, waits for both to finish, then submits the next two; Snakemake keeps
two run_job slots busy and starts the next cell as soon as either slot frees. Durations come from
a session's job.json manifests (--session) or, by default, from the per-fault times measured in
a CPU gloo job (shared/reference/cpu-lab.md: 4 ranks, fault on rank 1), scaled by node count.

    python benchmarks/bench_schedule.py [--pool config/pool.tsv] [--session DIR] [--poll 30]
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path

from faultloop.core.cell import Cell
from faultloop.plan.pool import load_pool

# Seconds from launch to job end per fault, measured at 4 ranks (cpu-lab.md).
MEASURED_S = {
    "GPU_ERROR": 13, "SIGKILL": 10, "SIGTERM": 14, "SIGINT": 15, "SEGFAULT": 12, "OS_ABORT": 14,
    "WORKLOAD_EXC": 14, "ASYNC_EXC": 12, "SIGNAL_EXC": 14, "GPU_SLEEP": 31, "SIGSTOP": 61, "LOCK_GIL": 61,
}  # fmt: skip


def batched_makespan(durations: list[float], poll_s: float) -> float:
    """Upstream: batches of two; the next batch starts at the first poll after both finished."""
    total = 0.0
    for i in range(0, len(durations), 2):
        longest = max(durations[i : i + 2])
        total += poll_s * -(-longest // poll_s) if poll_s else longest
    return total


def sliding_makespan(durations: list[float], slots: int = 2) -> float:
    """Snakemake: the next cell in priority order starts as soon as a slot frees."""
    free_at = [0.0] * slots
    for duration in durations:
        start = heapq.heappop(free_at)
        heapq.heappush(free_at, start + duration)
    return max(free_at)


def durations_from_session(session: Path, cells: list[Cell]) -> list[float]:
    out = []
    for cell in cells:
        manifest = json.loads((session / cell.name / "job.json").read_text())
        out.append(float(manifest["end_time"]) - float(manifest["start_time"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default="config/pool.tsv")
    parser.add_argument("--session", type=Path, help="take durations from this session's job.json files")
    parser.add_argument("--poll", type=float, default=30.0, help="upstream's squeue poll interval (s)")
    args = parser.parse_args()
    cells = load_pool(pool_file=args.pool, gpus_per_node=4)
    if args.session:
        durations, source = durations_from_session(args.session, cells), f"job.json in {args.session}"
    else:
        # Startup grows with ranks (cpu-lab.md: 7 s at 4 ranks, 16 s at 16): add ~0.6 s per rank over 4.
        durations = [MEASURED_S[c.fault_type] + 0.6 * max(0, c.nodes * 4 - 4) for c in cells]
        source = "cpu-lab.md per-fault times scaled by ranks"
    rows = [
        (f"upstream strict batches of 2 (poll {args.poll:g}s)", batched_makespan(durations, args.poll)),
        ("upstream strict batches of 2 (no poll delay)", batched_makespan(durations, 0)),
        ("faultloop 2-slot sliding window", sliding_makespan(durations)),
    ]
    print(f"pool {args.pool}: {len(cells)} cells, durations from {source}, sum {sum(durations):.0f} s\n")
    print("| schedule | makespan (s) | ratio vs faultloop |")
    print("|---|---|---|")
    ours = rows[-1][1]
    for name, value in rows:
        print(f"| {name} | {value:.0f} | {value / ours:.2f} |")


if __name__ == "__main__":
    main()

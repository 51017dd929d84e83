"""How long a run_job cell takes, per fault type and layout: launch to job end, and fault to job end.

Run by hand (tens of minutes; one cell at a time so the timings are not skewed by each other):
    .venv/bin/python benchmarks/bench_run_job.py [--shapes 2x4,8x4] [--launchers torchrun,srun]
        [--faults SIGKILL,GPU_SLEEP] [--shutdown-timeouts 30,5]
Timings use run_job's defaults (config/config.yaml) unless given after `--`, e.g. `-- --pg-timeout-s 10`.
`--shutdown-timeouts` repeats the torchrun cells with each torch `--shutdown-timeout` (the elastic
agent's wait between SIGTERM and SIGKILL of its workers), to show what torch's 30 s costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from faultloop.faults import FAULT_NAMES


@dataclass
class Timing:
    fault: str
    shape: str
    launcher: str
    shutdown_timeout: str
    state: str
    launch_to_end_s: float
    fault_to_end_s: float | None


def run_cell(
    root: Path, fault: str, nodes: int, per_node: int, launcher: str, shutdown: str, extra: list[str]
) -> Timing:
    cell = root / f"n{nodes}x{per_node}_{launcher}_{shutdown}_{fault}"
    cmd = [
        sys.executable,
        "-m",
        "faultloop.cli",
        "run-job",
        "--cell-dir",
        str(cell),
        "--fault-type",
        fault,
        "--rank",
        "1",
        "--iter",
        "5",
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(per_node),
        "--launcher",
        launcher,
        "--scheduler",
        "local",
        "--fault-delay",
        "1",
        *(["--shutdown-timeout-s", shutdown] if launcher == "torchrun" else []),
        *extra,
    ]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.time() - t0
    manifest = cell / ("job.json" if proc.returncode == 0 else "infra_failure.json")
    m = json.loads(manifest.read_text())
    fired = m["fault_fired_time"]
    return Timing(
        fault,
        f"{nodes}x{per_node}",
        launcher,
        shutdown if launcher == "torchrun" else "-",
        m["state"] if proc.returncode == 0 else "INFRA",
        elapsed,
        m["end_time"] - fired if fired else None,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2x4,8x4")
    parser.add_argument("--launchers", default="torchrun,srun")
    parser.add_argument("--faults", default=",".join(FAULT_NAMES))
    parser.add_argument("--shutdown-timeouts", default="30", help="torchrun --shutdown-timeout values")
    parser.add_argument("extra", nargs="*", help="run-job options after --")
    args = parser.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    print(
        f"{'fault':<14}{'shape':>6}  {'launcher':<9}{'shutdown':>9}  {'state':<10}{'launch->end s':>14}"
        f"{'fault->end s':>14}"
    )
    with tempfile.TemporaryDirectory(prefix="bench_run_job_") as tmp:
        for nodes, per_node in shapes:
            for launcher in args.launchers.split(","):
                timeouts = args.shutdown_timeouts.split(",") if launcher == "torchrun" else ["-"]
                for shutdown in timeouts:
                    for fault in args.faults.split(","):
                        t = run_cell(Path(tmp), fault, nodes, per_node, launcher, shutdown, args.extra)
                        after = f"{t.fault_to_end_s:14.1f}" if t.fault_to_end_s is not None else f"{'-':>14}"
                        print(
                            f"{t.fault:<14}{t.shape:>6}  {t.launcher:<9}{t.shutdown_timeout:>9}  {t.state:<10}"
                            f"{t.launch_to_end_s:14.1f}{after}",
                            flush=True,
                        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

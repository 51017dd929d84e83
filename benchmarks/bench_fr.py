"""Benchmark the FR analyzer against torch's own (torchfrtrace) and the unpickle floor.

On the same synthetic dumps in the same run, each tool runs as its own process; the table shows
wall time and CPU time, peak memory (sum of RSS over the tool's process tree, sampled every
20 ms), ratios,
and whether faultloop's suspects equal the ranks torchfrtrace reports missing. With an NVRx checkout
(`--nvrx-src`, default $NVRX_SRC; its interpreter `--nvrx-python`, default $NVRX_PYTHON), NVRx's
fr_attribution (faultloop's nvrx_fr kind) is timed on the same dumps, in a second table.

usage: python benchmarks/bench_fr.py [--sizes 64 1024] [--entries 2000] [--torch-max 8192] [--with-missing]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # fr_synth
from faultloop.analyze import nvrx
from faultloop.analyze.nvrx import outputs as nvrx_outputs
from faultloop.analyze.nvrx import tools as nvrx_tools
from fr_synth import generate

HERE = os.path.dirname(os.path.abspath(__file__))
FLOOR = (
    "import glob, pickle, sys\n"
    "for f in sorted(glob.glob(sys.argv[1] + '/_dump_*')):\n"
    "    with open(f, 'rb') as fh: pickle.load(fh)\n"
)


@dataclass(slots=True)
class Run:
    seconds: float
    peak_bytes: int
    stdout: str
    ok: bool
    note: str = ""
    cpu_seconds: float = 0.0


def _tree_rss(root: int) -> int:
    """Sum of RSS over `root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def measure(cmd: list[str], timeout: float, mem_limit: int | None = None, env: dict[str, str] | None = None) -> Run:
    def limit() -> None:
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=limit, env=env)
    peak = 0
    out_parts: list[str] = []
    import threading

    reader = threading.Thread(target=lambda: out_parts.append(proc.stdout.read()), daemon=True)
    reader.start()
    note = ""
    # wait4 instead of Popen.poll: it also returns the CPU time of the tool and the workers it reaped
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss(proc.pid))
        if not note and time.perf_counter() - start > timeout:
            proc.kill()
            note = f"timeout {timeout:.0f}s"
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    return Run(
        seconds,
        peak,
        "".join(out_parts),
        proc.returncode == 0 and not note,
        note or ("" if proc.returncode == 0 else f"exit {proc.returncode}"),
        usage.ru_utime + usage.ru_stime,
    )


def torch_missing(stdout: str) -> set[int]:
    ranks: set[int] = set()
    for match in re.finditer(r"missing ranks: \{([\d, ]*)\}", stdout):
        ranks.update(int(x) for x in match.group(1).split(",") if x.strip())
    return ranks


def bench(
    size: int,
    entries: int,
    torch_max: int,
    torch_timeout: float,
    out_root: str,
    with_missing: bool,
    repeat: int,
    checkout: nvrx_tools.Checkout | None = None,
) -> dict:
    # torchfrtrace names no rank once a dump is missing, so agreement is checked on hangs only
    hung, missing = {size // 3}, ({size // 2 + 1} if with_missing else set())
    out = os.path.join(out_root, f"synth_{size}x{entries}" + ("_missing" if with_missing else ""))
    stamp = os.path.join(out, ".complete")
    if not os.path.exists(stamp):
        generate(out, size, entries, hung, missing)
        open(stamp, "w").close()
    py = sys.executable
    subprocess.run(["sh", "-c", f"cat {out}/_dump_* > /dev/null"], check=True)  # warm the page cache
    # the cheap tools run `repeat` times, interleaved, keeping the fastest: on a shared machine the
    # minimum is the least disturbed measurement
    floors, ourss = [], []
    for _ in range(repeat):
        floors.append(measure([py, "-c", FLOOR, out], timeout=3600))
        ourss.append(measure([py, "-m", "faultloop.cli", "fr", "--fr-path", out, "--format", "json"], timeout=3600))
    floor = min(floors, key=lambda r: r.seconds)
    ours = min(ourss, key=lambda r: r.seconds)
    suspects = json.loads(ours.stdout)["suspect_ranks"] if ours.ok else None
    row = {
        "ranks": size,
        "entries": entries,
        "floor": floor,
        "faultloop": ours,
        "torch": None,
        "nvrx": None,
        "suspects": suspects,
        "truth": sorted(hung | missing),
    }
    if size <= torch_max:
        row["torch"] = measure(
            [py, "-m", "torch.distributed.flight_recorder.fr_trace", out, "-p", "_dump_", "--allow-incomplete-ranks"],
            timeout=torch_timeout,
            mem_limit=16 << 30,
        )
    if checkout is not None:
        row["nvrx"] = measure(nvrx_tools.fr_argv(checkout.python, Path(out)), timeout=torch_timeout, env=checkout.env())
    return row


def fmt_nvrx(row: dict) -> str:
    """NVRx's fr_attribution beside faultloop's fr on the same dumps."""
    ours, theirs = row["faultloop"], row["nvrx"]
    named = nvrx_outputs.fr_suspects(nvrx_outputs.fr_rows(theirs.stdout)) if theirs.ok else None
    wall = f"{theirs.seconds:.2f} ({theirs.cpu_seconds:.1f})" if theirs.ok else f"failed ({theirs.note})"
    return (
        f"| {row['ranks']} x {row['entries']} | {ours.seconds:.2f} ({ours.cpu_seconds:.1f}) | {wall} | "
        f"{theirs.peak_bytes / (1 << 30):.2f} | {theirs.seconds / ours.seconds:.1f}x | {named} | "
        f"{row['suspects']} (truth {row['truth']}) |"
    )


def fmt(row: dict) -> str:
    floor, ours, torch = row["floor"], row["faultloop"], row["torch"]
    gib = 1 << 30
    if torch is None:
        t_time, t_mem, speedup, agree = "skipped", "-", "-", "-"
    elif not torch.ok:
        t_time, t_mem, speedup, agree = (
            f"failed ({torch.note}, {torch.seconds:.1f} s)",
            f"{torch.peak_bytes / gib:.2f}",
            "-",
            "-",
        )
    else:
        t_time, t_mem = f"{torch.seconds:.2f}", f"{torch.peak_bytes / gib:.2f}"
        speedup = f"{torch.seconds / ours.seconds:.1f}x"
        agree = (
            "yes"
            if set(row["suspects"] or []) == torch_missing(torch.stdout)
            else f"no (torch {sorted(torch_missing(torch.stdout))})"
        )
    if torch is not None and torch.ok:
        t_time += f" ({torch.cpu_seconds:.1f})"
    return (
        f"| {row['ranks']} x {row['entries']} | {ours.seconds:.2f} ({ours.cpu_seconds:.1f}) | "
        f"{ours.peak_bytes / gib:.2f} | {floor.seconds:.2f} ({floor.cpu_seconds:.1f}) | "
        f"{floor.peak_bytes / gib:.2f} | {t_time} | {t_mem} | "
        f"{ours.seconds / floor.seconds:.2f} | {speedup} | {row['suspects']} (truth {row['truth']}) | "
        f"{agree} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--torch-max", type=int, default=8192, help="largest size torchfrtrace runs at")
    parser.add_argument("--torch-timeout", type=float, default=1800)
    parser.add_argument("--out", default=os.path.join(HERE, "out"))
    parser.add_argument("--with-missing", action="store_true", help="also drop one rank's dump")
    parser.add_argument("--repeat", type=int, default=3, help="runs of faultloop and the floor (fastest kept)")
    parser.add_argument("--nvrx-src", default=os.environ.get(nvrx.SRC_ENV, ""), help="an NVRx checkout's src/")
    parser.add_argument("--nvrx-python", default=os.environ.get(nvrx.PYTHON_ENV, "") or sys.executable)
    args = parser.parse_args()
    checkout = nvrx_tools.Checkout(args.nvrx_src, args.nvrx_python) if args.nvrx_src else None
    print(
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        "times are wall seconds (CPU seconds of the process tree)"
    )
    print(
        "| ranks x entries | faultloop s | faultloop GiB | floor s | floor GiB | torchfrtrace s | "
        "torchfrtrace GiB | faultloop/floor | torchfrtrace/faultloop | faultloop suspects | "
        "agree with torchfrtrace |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for size in args.sizes:
        rows.append(
            bench(
                size,
                args.entries,
                args.torch_max,
                args.torch_timeout,
                args.out,
                args.with_missing,
                args.repeat,
                checkout,
            )
        )
        print(fmt(rows[-1]), flush=True)
    if checkout is not None:
        header = ("ranks x entries", "faultloop s", "nvrx_fr s", "nvrx_fr GiB", "nvrx_fr/faultloop", "nvrx_fr suspects")
        print("\n| " + " | ".join((*header, "faultloop suspects")) + " |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print(fmt_nvrx(row), flush=True)


if __name__ == "__main__":
    main()

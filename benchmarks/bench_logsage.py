"""logsage throughput and memory on big logs, against `grep -c` of one pattern on the same file.

Writes realistic srun-labelled logs (Megatron iteration lines, NCCL INFO chatter, torch warnings,
checkpoint saves, then a 16-rank NCCL hang with rank 11 silent) at two sizes, warms the page cache,
and times in the same run, interleaved: `grep -c "Timed out waiting" FILE` and `faultloop logsage`
with its prefilters: auto (ripgrep if installed, else grep) and GNU grep; pure Python once on the
smallest log. Peak RSS is the analyzer
process's own (wait4), so a flat column means memory does not grow with the log.

With --peer-src, another checkout's package (its src folder) runs beside this one in the same
interleaved loop, e.g. the analyzer before a change:

    git archive main src | tar -x -C /tmp/peer      # main's src/ into /tmp/peer/src
    python benchmarks/bench_logsage.py [--sizes-mb 256 1024] [--out benchmarks/out] [--peer-src /tmp/peer/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GREP_PATTERN = "Timed out waiting"
RANKS = 16
CULPRIT = 11


def _block(rnd: random.Random, first_iter: int, n_iters: int) -> str:
    """Ordinary training output: what fills a big log before anything goes wrong."""
    out = []
    for it in range(first_iter, first_iter + n_iters):
        ms = 1400 + rnd.random() * 40
        out.append(
            f"{RANKS - 1}:  [2026-11-30 12:{it // 60 % 60:02d}:{it % 60:02d}.{rnd.randrange(10**6):06d}] "
            f"iteration {it:8d}/ 5000000 | consumed samples: {it * 1024:12d} | elapsed time per iteration "
            f"(ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 412.{rnd.randrange(10)} | learning rate: "
            f"2.999{rnd.randrange(100):02d}E-04 | global batch size:  1024 | lm loss: {2 + rnd.random():.6E} | "
            f"loss scale: 1.0 | grad norm: {rnd.random() + 0.5:.3f} | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |"
        )
        r = rnd.randrange(RANKS)
        out.append(
            f"{r}: node-{r // 8 + 1:03d}:{4100 + r}:{4300 + r} [{r % 8}] NCCL INFO Channel {it % 32:02d}/0 : "
            f"{r}[{r % 8}] -> {(r + 1) % RANKS}[{(r + 1) % 8}] [send] via NET/IB/{r % 4}/GDRDMA"
        )
        if it % 50 == 0:
            out.append(
                f"{r}: [rank{r}]:[W1130 12:00:00.{it % 10**6:06d} {4100 + r} ProcessGroupNCCL.cpp:4561] "
                f"Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now (function operator())"
            )
        if it % 1000 == 0:
            out.append(f"0:  [2026-11-30 12:00:00] saving checkpoint at iteration {it:8d} to /ckpt/gpt")
            out.append(f"0:   successfully saved checkpoint from iteration {it:8d} to /ckpt/gpt [ t 1/1, p 1/1 ]")
    return "\n".join(out) + "\n"


def _failure() -> str:
    out = []
    for r in range(RANKS):
        if r != CULPRIT:
            out.append(
                f"{r}: [rank{r}]:[E1130 13:10:06.{r:06d} {4100 + r} ProcessGroupNCCL.cpp:632] [Rank {r}] "
                f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9843, OpType=ALLREDUCE, "
                f"NumelIn=25231360, NumelOut=25231360, Timeout(ms)=600000) ran for 600046 milliseconds "
                f"before timing out."
            )
    out.append("srun: error: node-002: task 11: Killed")
    return "\n".join(out) + "\n"


def write_log(path: Path, size_mb: int) -> None:
    rnd = random.Random(size_mb)
    target, written, it = size_mb << 20, 0, 1
    head = "".join(
        f"{r}: node-{r // 8 + 1:03d}:{4100 + r}:{4300 + r} [{r % 8}] NCCL INFO comm 0x55d4c8a0 rank {r} "
        f"nranks {RANKS} cudaDev {r % 8} busId {r % 8}b000 - Init COMPLETE\n"
        for r in range(RANKS)
    )
    with open(path, "w") as f:
        f.write(head)
        block = _block(rnd, it, 20000)  # ~9 MB, reused so writing 1 GB takes seconds
        while written < target:
            f.write(block)
            written += len(block)
        f.write(_failure())


@dataclass
class Run:
    """One contender on one log: best wall time and CPU time (with its children) over the
    repeats, and the peak RSS of the analyzer process itself."""

    seconds: float = float("inf")
    cpu_seconds: float = float("inf")
    rss_mb: float = 0.0
    stdout: str = ""

    def add(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.stdout = proc.stdout.read() if proc.stdout else ""
        _, _, usage = os.wait4(proc.pid, 0)  # includes the children it waited for (rg/grep)
        self.seconds = min(self.seconds, time.perf_counter() - start)
        self.cpu_seconds = min(self.cpu_seconds, usage.ru_utime + usage.ru_stime)
        self.rss_mb = max(self.rss_mb, usage.ru_maxrss / 1024)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--peer-src", type=Path, help="another checkout's src folder to time in the same run")
    args = parser.parse_args(argv)
    peer_env = {**os.environ, "PYTHONPATH": str(args.peer_src.resolve())} if args.peer_src else None
    args.out.mkdir(parents=True, exist_ok=True)
    logsage = [sys.executable, "-m", "faultloop.cli", "logsage", "--format", "json", "--log-path"]
    rows = []
    for n, size_mb in enumerate(args.sizes_mb):
        path = args.out / f"bench_{size_mb}mb.log"
        write_log(path, size_mb)
        size = path.stat().st_size / 1e6
        with open(path, "rb") as f:  # warm the page cache for every contender alike
            while f.read(16 << 20):
                pass
        grep, auto, with_grep, python, peer, peer_grep = Run(), Run(), Run(), Run(), Run(), Run()
        for _ in range(args.repeats):  # interleaved, so load from others hits every contender alike
            grep.add(["grep", "-c", GREP_PATTERN, str(path)])
            auto.add([*logsage, str(path)])
            with_grep.add([*logsage, str(path), "--prefilter", "grep"])
            if peer_env:
                peer.add([*logsage, str(path)], peer_env)
                peer_grep.add([*logsage, str(path), "--prefilter", "grep"], peer_env)
        if n == 0:  # the pure-Python fallback is slow: once, on the smallest log
            python.add([*logsage, str(path), "--prefilter", "python"])
        for run in (auto, with_grep, python, peer, peer_grep):
            if run.stdout:
                verdict = json.loads(run.stdout)
                assert verdict["primary_ranks"] == [CULPRIT] and verdict["restart"] == "RESTART IMMEDIATE", verdict
        rows.append((size, grep, auto, with_grep, python, peer, peer_grep))
        if not args.keep:
            path.unlink()
    tool = "rg" if shutil.which("rg") else "grep" if shutil.which("grep") else "python"
    print(
        f"cores: {os.cpu_count()}, load average after: {os.getloadavg()[0]:.2f}; grep -c pattern "
        f"{GREP_PATTERN!r}; best of {args.repeats} interleaved runs; auto prefilter = {tool}"
    )
    print(
        "| log MB | grep -c MB/s | logsage auto MB/s | ratio | CPU s grep / logsage | peak RSS MB "
        "| logsage --prefilter grep MB/s | ratio | --prefilter python MB/s | its RSS MB "
        "| peer auto MB/s | speed vs peer | CPU s logsage / peer | peer --prefilter grep MB/s | speed vs peer "
        "| CPU s logsage / peer |"
    )
    print("|---" * 16 + "|")
    for size, grep, auto, with_grep, python, peer, peer_grep in rows:
        py = f"{size / python.seconds:.0f} | {python.rss_mb:.0f}" if python.stdout else "- | -"
        peers = " | ".join(
            f"{size / other.seconds:.0f} | {other.seconds / mine.seconds:.2f} | "
            f"{mine.cpu_seconds:.2f} / {other.cpu_seconds:.2f}"
            if other.stdout
            else "- | - | -"
            for mine, other in ((auto, peer), (with_grep, peer_grep))
        )
        print(
            f"| {size:.0f} | {size / grep.seconds:.0f} | {size / auto.seconds:.0f} | {grep.seconds / auto.seconds:.2f} "
            f"| {grep.cpu_seconds:.2f} / {auto.cpu_seconds:.2f} | {auto.rss_mb:.0f} "
            f"| {size / with_grep.seconds:.0f} | {grep.seconds / with_grep.seconds:.2f} | {py} | {peers} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

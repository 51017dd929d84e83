"""logsage's log targets in one run: a flood against an ordinary log, big logs against grep -c and before.

Issue 27's and 33's targets, measured together so that the ratios share one machine state: a flood
(bench_flood.py's million NCCL watchdog lines) costs at most 10x an ordinary log of the same size
(bench_logsage.py's training output); the 1 GB benchmark log keeps the speed of the analyzer before
the flood memo and the bounds (--peer-rev, 34c5b11 by default; within 10 %) with its peak RSS flat;
at 0.5 GB and at 1 GB logsage reads at least a third of `grep -c`'s rate (bench_logsage.py's one
pattern, on the same file in the same loop). The peer is that commit's `src/`, unpacked with `git
archive` into a temporary folder outside the repository and run from the same virtual environment;
every contender runs in the same interleaved loop, best of --repeats, and every verdict must name
the silent rank. The peer does not run the flood (the pre-memo analyzer takes about 35 s on it;
bench_flood.py --peer-src times it).

    make bench-logs                       # or: python benchmarks/bench_logs.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_flood import write_flood
from bench_logsage import CULPRIT, GREP_PATTERN, ROOT, Run, write_log

PEER_REV = "34c5b11"  # main before issue 27 (the flood memo, the bounds): "today's" speed
FLOOD_MAX_RATIO = 10.0
SPEED_MIN_RATIO = 0.9
GREP_MIN_RATIO = 1 / 3


def unpack_peer(rev: str, into: Path) -> Path:
    """The commit's src/ folder, unpacked under `into` (no worktree, nothing in the repository)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="failure lines in the flood")
    parser.add_argument("--half-mb", type=int, default=512, help="size of the half-size ordinary log")
    parser.add_argument("--big-mb", type=int, default=1024, help="size of the big ordinary log")
    parser.add_argument("--peer-rev", default=PEER_REV, help="the commit whose analyzer the big log is timed against")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    names = ("flood", "ordinary", "half", "big")
    flood, ordinary, half, big = logs = [args.out / f"bench_logs_{name}.log" for name in names]
    # as installed: compiled modules cached, whatever this shell says (both contenders alike)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="faultloop-peer-") as peer_dir:
        envs = {"mine": env, "peer": {**env, "PYTHONPATH": str(unpack_peer(args.peer_rev, Path(peer_dir)))}}
        try:
            write_flood(flood, args.lines)
            write_log(ordinary, max(1, round(flood.stat().st_size / (1 << 20))))
            write_log(half, args.half_mb)
            write_log(big, args.big_mb)
            runs = measure(logs, envs, args.repeats, grepped=(half, big))
        finally:
            sizes = {path: path.stat().st_size / 1e6 for path in logs if path.exists()}
            for path in logs:
                path.unlink(missing_ok=True)
    print(
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, commit {commit()}, peer {args.peer_rev}; cores: "
        f"{os.cpu_count()}, load average after: {os.getloadavg()[0]:.2f}; best of {args.repeats} interleaved "
        f"runs; flood of {args.lines} failure lines; {time.perf_counter() - started:.0f} s in all"
    )
    print(
        "| log | MB | logsage s | CPU s | MB/s | peak RSS MB | / ordinary (s) | / ordinary (CPU) | peer s "
        "| peer CPU s | peer RSS MB | speed vs peer | CPU vs peer | grep -c s | speed vs grep -c |"
    )
    print("|---" * 15 + "|")
    base = runs[ordinary, "mine"]
    for name, path in zip(names, logs, strict=True):
        size, mine, peer, grep = sizes[path], runs[path, "mine"], runs.get((path, "peer")), runs.get((path, "grep"))
        peer_cols = (
            f"{peer.seconds:.2f} | {peer.cpu_seconds:.2f} | {peer.rss_mb:.0f} | {peer.seconds / mine.seconds:.2f} "
            f"| {mine.cpu_seconds / peer.cpu_seconds:.2f}"
            if peer
            else "- | - | - | - | -"
        )
        print(
            f"| {name} | {size:.0f} | {mine.seconds:.2f} | {mine.cpu_seconds:.2f} | {size / mine.seconds:.0f} "
            f"| {mine.rss_mb:.0f} | {mine.seconds / base.seconds:.1f}x | {mine.cpu_seconds / base.cpu_seconds:.1f}x "
            f"| {peer_cols} | {f'{grep.seconds:.2f} | {grep.seconds / mine.seconds:.2f}' if grep else '- | -'} |"
        )
    flood_ratio = max(runs[flood, "mine"].seconds / base.seconds, runs[flood, "mine"].cpu_seconds / base.cpu_seconds)
    speed = runs[big, "peer"].seconds / runs[big, "mine"].seconds
    rss, peer_rss = runs[big, "mine"].rss_mb, runs[big, "peer"].rss_mb
    vs_grep = min(runs[path, "grep"].seconds / runs[path, "mine"].seconds for path in (half, big))
    print(
        f"\nflood / ordinary at most {flood_ratio:.1f}x, in seconds and in CPU (target <= {FLOOD_MAX_RATIO:g}x): "
        f"{'met' if flood_ratio <= FLOOD_MAX_RATIO else 'NOT met'}; big log speed vs peer {speed:.2f} "
        f"(target >= {SPEED_MIN_RATIO:g}): {'met' if speed >= SPEED_MIN_RATIO else 'NOT met'}; "
        f"peak RSS {rss:.0f} MB on the big log, {base.rss_mb:.0f} MB on the ordinary, peer {peer_rss:.0f} MB; "
        f"speed vs grep -c at least {vs_grep:.2f} at {args.half_mb} MB and {args.big_mb} MB (target >= 0.33): "
        f"{'met' if vs_grep >= GREP_MIN_RATIO else 'NOT met'}"
    )
    return 0


def measure(
    paths: list[Path], envs: dict[str, dict[str, str]], repeats: int, grepped: tuple[Path, ...] = ()
) -> dict[tuple[Path, str], Run]:
    """Every contender on its logs, interleaved; the peer on all but the first (the flood), `grep -c`
    on the `grepped` ones."""
    logsage = [sys.executable, "-m", "faultloop.cli", "logsage", "--format", "json", "--log-path"]
    runs = {(path, who): Run() for path in paths for who in envs if who == "mine" or path != paths[0]}
    runs.update({(path, "grep"): Run() for path in grepped})
    for path in paths:  # warm the page cache for every contender alike
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass
    empty = paths[0].with_name("bench_logs_empty.log")
    empty.write_bytes(b"")
    for env in envs.values():  # and each one's compiled modules
        subprocess.run([*logsage, str(empty)], env=env, stdout=subprocess.DEVNULL, check=True)
    empty.unlink()
    for _ in range(repeats):  # interleaved, so load from others hits every contender alike
        for (path, who), run in runs.items():
            if who == "grep":
                run.add(["grep", "-c", GREP_PATTERN, str(path)], envs["mine"])
            else:
                run.add([*logsage, str(path)], envs[who])
    for key, run in runs.items():
        if key[1] == "grep":
            continue
        verdict = json.loads(run.stdout)
        assert verdict["primary_ranks"] == [CULPRIT], (key, verdict)
    return runs


def commit() -> str:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"], capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    raise SystemExit(main())

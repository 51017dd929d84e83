"""A log flood against an ordinary log of the same size: what a chatty rank costs logsage.

The flood is what 15 ranks printing NCCL's watchdog timeout every few milliseconds look like
(srun-labelled, `[rankN]:` prefixed, every line a failure line with its own SeqNum, time and
duration) while rank 11 stays silent until srun kills it; the ordinary log is
bench_logsage.py's training output of the same size with the same hang at its end. Both are
timed in the same run, interleaved, best of --repeats; peak RSS is the analyzer process's own.
With --peer-src (another checkout's src folder, e.g. main's before a change) the peer is timed
on the same files and its verdicts must equal this checkout's.

    git archive main src | tar -x -C /tmp/peer
    python benchmarks/bench_flood.py [--lines 1000000] [--peer-src /tmp/peer/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_logsage import CULPRIT, RANKS, ROOT, Run, write_log


def write_flood(path: Path, lines: int) -> None:
    rnd = random.Random(lines)
    talkers = [r for r in range(RANKS) if r != CULPRIT]
    with open(path, "w") as f:
        for r in range(RANKS):
            f.write(
                f"{r}: node-{r // 8 + 1:03d}:{4100 + r}:{4300 + r} [{r % 8}] NCCL INFO comm 0x55d4c8a0 rank {r} "
                f"nranks {RANKS} cudaDev {r % 8} busId {r % 8}b000 - Init COMPLETE\n"
            )
        for i in range(lines):
            r = talkers[i % len(talkers)]
            f.write(
                f"{r}: [rank{r}]:[E1130 13:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{rnd.randrange(10**6):06d} "
                f"{4100 + r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum={9843 + i // len(talkers)}, OpType=ALLREDUCE, NumelIn=25231360, "
                f"NumelOut=25231360, Timeout(ms)=600000) ran for {600000 + rnd.randrange(5000)} milliseconds "
                f"before timing out.\n"
            )
        f.write(f"srun: error: node-002: task {CULPRIT}: Killed\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="failure lines in the flood")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/out")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--peer-src", type=Path, help="another checkout's src folder to time in the same run")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    flood, ordinary = args.out / "bench_flood.log", args.out / "bench_flood_ordinary.log"
    write_flood(flood, args.lines)
    write_log(ordinary, max(1, round(flood.stat().st_size / (1 << 20))))
    logsage = [sys.executable, "-m", "faultloop.cli", "logsage", "--format", "json", "--log-path"]
    peer_env = {**os.environ, "PYTHONPATH": str(args.peer_src.resolve())} if args.peer_src else None
    runs = {(name, who): Run() for name in ("flood", "ordinary") for who in ("mine", "peer")}
    for path in (flood, ordinary):  # warm the page cache for every contender alike
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass
    for _ in range(args.repeats):  # interleaved, so load from others hits every contender alike
        for name, path in (("flood", flood), ("ordinary", ordinary)):
            runs[name, "mine"].add([*logsage, str(path)])
            if peer_env:
                runs[name, "peer"].add([*logsage, str(path)], peer_env)
    verdicts = {key: json.loads(run.stdout) for key, run in runs.items() if run.stdout}
    for key, verdict in verdicts.items():
        verdict.pop("analyzer_version", None)
        assert verdict["primary_ranks"] == [CULPRIT], (key, verdict)
    if peer_env:
        for name in ("flood", "ordinary"):
            assert verdicts[name, "mine"] == verdicts[name, "peer"], f"{name}: the verdict changed"
    print(
        f"cores: {os.cpu_count()}, load average after: {os.getloadavg()[0]:.2f}; best of {args.repeats} "
        f"interleaved runs; flood of {args.lines} failure lines"
    )
    print("| log | MB | logsage s | MB/s | peak RSS MB | / ordinary | peer s | peer / ordinary | speed vs peer |")
    print("|---" * 9 + "|")
    base, peer_base = runs["ordinary", "mine"], runs["ordinary", "peer"]
    for name, path in (("flood", flood), ("ordinary", ordinary)):
        size = path.stat().st_size / 1e6
        mine, peer = runs[name, "mine"], runs[name, "peer"]
        peer_cols = (
            f"{peer.seconds:.2f} | {peer.seconds / peer_base.seconds:.1f}x | {peer.seconds / mine.seconds:.1f}x"
            if peer.stdout
            else "- | - | -"
        )
        print(
            f"| {name} | {size:.0f} | {mine.seconds:.2f} | {size / mine.seconds:.0f} | {mine.rss_mb:.0f} "
            f"| {mine.seconds / base.seconds:.1f}x | {peer_cols} |"
        )
    if not args.keep:
        flood.unlink()
        ordinary.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

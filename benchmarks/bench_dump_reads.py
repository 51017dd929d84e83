"""What the bounds cost a dump read: faultloop's bounded read against a plain pickle.load.

On the same dumps in the same process, interleaved, best of --repeats: `pickle.load` of each file
(the C unpickler, unbounded: what the issue's 9-byte dump took 12.6 GB through), the opcode walk
alone (`pickle_bounds.check`: what naming the bound of a refused dump costs), and
`dumps.load_dump` (the size check, the memory bound, the restricted unpickler and the structural
check: what `fr`'s readers and the copies for other tools do to every dump). Dumps: `fr_synth`'s
NCCL-shaped ones at --entries per rank, and the shared real NCCL dumps where present.

    python benchmarks/bench_dump_reads.py [--entries 2000 20000] [--files 64]
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))  # fr_synth
from faultloop.analyze.fr import pickle_bounds
from faultloop.analyze.fr.dumps import load_dump
from fr_synth import START_SEQ, make_dump

ROOT = Path(__file__).resolve().parents[1]
REAL_DUMPS = ROOT.parent / "shared" / "fixtures" / "nvrx_fr"


def plain_load(path: Path) -> None:
    with open(path, "rb") as fh:
        pickle.load(fh)


def walk(path: Path) -> None:
    pickle_bounds.check(path.read_bytes())


def bounded_read(path: Path) -> None:
    load_dump(str(path))


def best_seconds(files: list[Path], repeats: int) -> dict[str, float]:
    """Seconds per dump of each reader over `files`, interleaved, best of `repeats`."""
    readers: dict[str, Callable[[Path], None]] = {"load": plain_load, "walk": walk, "bounded": bounded_read}
    best = dict.fromkeys(readers, float("inf"))
    for _ in range(repeats):
        for name, read in readers.items():
            start = time.process_time()
            for path in files:
                read(path)
            best[name] = min(best[name], (time.process_time() - start) / len(files))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[2000, 20000], help="entries per synthetic dump")
    parser.add_argument("--files", type=int, default=32, help="synthetic dumps per size (64 ranks each)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}; CPU ms per dump, best of "
        f"{args.repeats} interleaved runs in one process"
    )
    print("| dumps | KB each | pickle.load ms | walk ms | bounded read ms | walk / load | bounded / load |")
    print("|---|---|---|---|---|---|---|")
    cases: list[tuple[str, list[Path]]] = []
    with tempfile.TemporaryDirectory(prefix="faultloop-dumps-") as tmp:
        for entries in args.entries:
            blob = pickle.dumps(make_dump(64, entries, START_SEQ + entries), protocol=2)
            files = []
            for rank in range(args.files):
                path = Path(tmp) / f"{entries}" / f"_dump_{rank}"
                path.parent.mkdir(exist_ok=True)
                path.write_bytes(blob)
                files.append(path)
            cases.append((f"synthetic, {entries} entries x {args.files}", files))
        real = sorted(REAL_DUMPS.glob("*/_dump_*"))
        if real:
            cases.append((f"shared real NCCL x {len(real)}", real))
        for name, files in cases:
            kb = sum(path.stat().st_size for path in files) / len(files) / 1e3
            best = best_seconds(files, args.repeats)
            print(
                f"| {name} | {kb:.0f} | {best['load'] * 1e3:.2f} | {best['walk'] * 1e3:.2f} | "
                f"{best['bounded'] * 1e3:.2f} | {best['walk'] / best['load']:.2f} | "
                f"{best['bounded'] / best['load']:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

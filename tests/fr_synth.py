"""Generate synthetic flight-recorder dumps in torch's pickle format (NCCL flavour).

N ranks x E entries of all_reduce on the default process group. Hung ranks stopped one
collective early (their ring buffer ends one seq behind); missing ranks write no file. Files
of the same kind are byte-identical, so generation is bound by disk writes, not pickling.

usage: python tests/fr_synth.py OUT_DIR --ranks N --entries E [--hung 5 ...] [--missing 7 ...]
"""

from __future__ import annotations

import argparse
import os
import pickle
from typing import Any

START_SEQ = 100_000  # seq ids of a long-running job: the buffer holds only the last E


def make_dump(world: int, entries: int, last_seq: int) -> dict[str, Any]:
    """One rank's dump whose ring buffer ends at collective `last_seq`."""
    ranks_text = str(list(range(world)))
    rows = []
    for i in range(entries):
        seq = last_seq - entries + 1 + i
        rows.append(
            {
                "record_id": seq,
                "pg_id": 0,
                "process_group": ("0", "default_pg"),
                "collective_seq_id": seq,
                "p2p_seq_id": 0,
                "op_id": seq,
                "profiling_name": "nccl:all_reduce",
                "time_created_ns": 1_700_000_000_000_000_000 + seq * 1000,
                "duration_ms": 0.5,
                "input_sizes": [[4096, 1024]],
                "input_dtypes": ["Float"],
                "output_sizes": [[4096, 1024]],
                "output_dtypes": ["Float"],
                "state": "completed",
                "time_discovered_started_ns": None,
                "time_discovered_completed_ns": None,
                "retired": True,
                "timeout_ms": 600000,
                "is_p2p": False,
                "frames": [],
                "thread_id": "140000000000000",
                "thread_name": "python",
            }
        )
    rows[-1]["state"] = "scheduled"
    rows[-1]["retired"] = False
    return {
        "version": "2.10",
        "nccl_version": "2.27.3",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks_text}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": last_seq,
                "last_started_collective": last_seq,
                "last_completed_collective": last_seq - 1,
            }
        },
        "entries": rows,
    }


def generate(out: str, world: int, entries: int, hung: set[int], missing: set[int]) -> None:
    """Write `_dump_<rank>` for every rank not in `missing`."""
    os.makedirs(out, exist_ok=True)
    last = START_SEQ + entries
    blobs = {
        False: pickle.dumps(make_dump(world, entries, last), protocol=2),
        True: pickle.dumps(make_dump(world, entries, last - 1), protocol=2),
    }
    for rank in range(world):
        if rank in missing:
            continue
        with open(os.path.join(out, f"_dump_{rank}"), "wb") as fh:
            fh.write(blobs[rank in hung])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--hung", type=int, nargs="*", default=[])
    parser.add_argument("--missing", type=int, nargs="*", default=[])
    args = parser.parse_args()
    generate(args.out, args.ranks, args.entries, set(args.hung), set(args.missing))


if __name__ == "__main__":
    main()

"""A real 4-rank gloo job with the flight recorder on, for the FR analyzer tests.

Rank `culprit` stops before iteration `stall_at`'s all_reduce. In `hang` mode it stays stuck and
its stall watchdog dumps (as the CPU workload's does); the others time out on the short
process-group timeout and dump from their exception handler. In `crash` mode the culprit exits
without a dump, as a SIGKILLed rank would.

usage: python fr_gloo_job.py OUT_DIR MODE PORT
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

WORLD, CULPRIT, STALL_AT, TIMEOUT_S = 4, 1, 3, 3


def dump(out: str, rank: int) -> None:
    import torch

    data = torch._C._distributed_c10d._dump_fr_trace(True, False, False)
    tmp = f"{out}/._dump_{rank}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, f"{out}/_dump_{rank}")


def rank_main(rank: int, out: str, mode: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCH_FR_BUFFER_SIZE="200")
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    tensor = torch.ones(16)
    try:
        for step in range(6):
            if rank == CULPRIT and step == STALL_AT:
                if mode == "crash":
                    os._exit(9)
                # stall watchdog: dump while the main thread is stuck, then die like a killed rank
                threading.Timer(TIMEOUT_S + 1, lambda: (dump(out, rank), os._exit(15))).start()
                time.sleep(600)
            dist.all_reduce(tensor)
    except Exception:
        dump(out, rank)
        os._exit(1)
    dump(out, rank)
    os._exit(0)


def main() -> None:
    import multiprocessing as mp

    import torch

    out, mode, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=rank_main, args=(r, out, mode, port)) for r in range(WORLD)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()


if __name__ == "__main__":
    main()

"""What a failure's surroundings say, beyond the line that reports it: a traceback's frames (setup,
a collective, a one-rank-first section, data loading, a wait on the device), a job's start-up lines,
a timed-out collective's description (its number, op, sizes and group), the GPU a message names,
CPython's note that it ignored an exception, and the thresholds the decisions read them with. What
a line itself reports is RULES, in rules.py, the file to patch for a missed or misread line."""

from __future__ import annotations

import re

# code that only runs while a job sets up: an exception raised there happened before any training step
SETUP_FRAMES = re.compile(
    r"init_process_group|rendezvous|_store_based_barrier|_create_c10d_store|TCPStore|init_device_mesh|"
    r"initialize_model_parallel|init_distributed|_init_dist_|new_group\b"
)
# lines a job prints while it launches (torch's store barrier, NCCL's bootstrap, DeepSpeed's and
# torchrun's start-up reports): where the log shows them and no progress before a failure, the
# failure came during setup; where an excerpt shows neither, nothing says it did
LAUNCH_RE = re.compile(
    r"store_based_barrier_key|NCCL INFO Bootstrap|Initializing TorchBackend|WORLD INFO DICT|"
    r"Starting elastic_operator|Rendezvous complete for workers|Added key: store_based_barrier"
)
SETUP_SEQ = 8  # a collective at or below this number times out before a training step ran through

# a frame waiting in a collective: the rank is a victim, the stalled rank is elsewhere
COLLECTIVE_FRAMES = re.compile(
    r"distributed_c10d|\b(?:all_reduce|allreduce|all_gather|reduce_scatter|broadcast|"
    r"barrier|monitored_barrier|all_to_all)\b|main_process_first|wait_for_everyone"
)
# a one-rank-first section: the main process runs the block while the others wait at its barrier, then
# they run it (transformers' TrainingArguments.main_process_first, accelerate's PartialState.main_process_first
# and local_main_process_first, Lightning Fabric's rank_zero_first, YOLOv5's and ultralytics'
# torch_distributed_zero_first); a rank that timed out inside one waited for the main rank's one-rank work
MAIN_FIRST_FRAMES = re.compile(r"\b(?:(?:local_)?main_process_first|rank_zero_first|torch_distributed_zero_first)\b")
# a frame reading data: an exception there is a data error
DATA_FRAMES = re.compile(r"torch/utils/data/|__getitem__|(?i:data_?loader)")
# a frame waiting on the device: a stalled rank stuck there hangs on the GPU
DEVICE_WAIT_FRAMES = re.compile(r"synchroni[sz]e|cuda|wait_stream|\bEvent\b|_sleep")
# a timed-out collective as ProcessGroupNCCL describes it (torch < 1.10 numbers none: `WorkNCCL(OpType=ALLREDUCE,
# TensorShape=[..], Timeout(ms)=..)`); ranks that disagree at one SeqNum, or on the first collective they time
# out on, desynchronized
WORK_RE = re.compile(r"WorkNCCL\((?:SeqNum=(\d+), )?OpType=(\w+)(?:, NumelIn=(\d+))?(?:, NumelOut=(\d+))?")
# a rank fetching a communicator's id from the rank that publishes it on the store (ProcessGroupNCCL's
# broadcastUniqueNCCLID, torch >= 1.13): `[waiter] is setting up NCCL communicator and retrieving ncclUniqueId
# from [0] via c10d key-value store by key 'K'`; K counts a group's communicators (published by its rank 0), or
# names a point-to-point pair `low:high` (published by the lower rank)
STORE_FETCH_RE = re.compile(
    r"\[(\d+)\] is setting up NCCL communicator and retrieving ncclUniqueId from \[\d+\] via c10d key-value store "
    r"by key '(?:\d+|(\d+):\d+)'"
)
# the GPU a failure's message names: torch's tensor repr (torch/_tensor_str.py, `device='cuda:1'`: printed for a
# tensor off the current device, and by older releases for every CUDA tensor), aten's device check (`found at
# least two devices, cuda:1 and cpu!`); one GPU per process, its index is the process's local rank
DEVICE_NAMED_RE = re.compile(r"device='cuda:(\d+)'|two devices, (?:cuda:(\d+) and cpu|cpu and cuda:(\d+))!")
# a gather's output is its input times the group's size, a reduce-scatter's the other way round
GATHERS = ("ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED")
SCATTERS = ("REDUCE_SCATTER", "_REDUCE_SCATTER_BASE")
# a collective of the default process group: torch names it PG ID 0, older versions name no group
DEFAULT_GROUP_RE = re.compile(r"\[PG ID 0 |^(?!.*\bPG\b)")
# CPython's report of an exception it ignored (Python/errors.c, the unraisable hook: a __del__, a
# flush of stdout at exit into a closed pipe), on the line above the exception's: the program went on
IGNORED_RE = re.compile(r"^Exception ignored\b")
# the GPU an allocator's OOM message names (c10/cuda/CUDACachingAllocator.cpp: `(GPU 1; 10.76 GiB total
# capacity` before torch 2.1, `GPU 1 has a total capacity of` after): the rank driving it on one node
OOM_DEVICE_RE = re.compile(r"\(GPU (\d+); |GPU (\d+) has a total capaci?ty")
FIRST_SEQ = 1  # a timeout at or below this collective number: the job never got going
BUSY_WINDOW_LINES = 200  # one-rank work this close before the first timeout explains it

"""logsage's line tables: what log lines mean (RULES) and the small tables. The file to patch.

HOW TO PATCH BETWEEN LOOP ITERATIONS
  * A log line is missed or misread -> edit RULES: one row per (anchor literals, regex, kind,
    hint, origin). The regex matches a template a program prints (read it in that program's
    source; origin names the program and the file), never one log's line. The anchors must be
    substrings of every line the regex can match; they are the prefilter. First matching row
    wins, so put specific rows above general ones. Named groups carry facts: rank (global),
    local (local rank), pid, code (exit status), sig (signal), tasks and what (srun), missing
    (ranks a barrier waited for), seq (a collective's number), step and skipped (DeepSpeed). A
    rank group names the line's rank where its prefix cannot (a dump file named by rank). Add
    the template to the message catalog too (catalog/*.tsv: template, program, source, meaning,
    the verdict it should lead to); tests/analyze/test_logsage_catalog.py checks every row.
  * A decision is wrong for a whole cause -> edit policy.POLICY, the cause table (cause ->
    category, restart, why, what happened, fault type, whether it blames a rank): logsage's own
    reasoning, never read from the scorer's faults.FAULTS; a new injected fault needs its row
    there. A new kind of evidence or a new cause is a name in vocab.py.
  * A launcher's or orchestrator's report of its workers (torchrun, spawn, DeepSpeed, mpirun, srun,
    Ray, Dask, Horovod...) is missed or misread, or its own failure is read as the workload's ->
    edit that launcher's adapter in launchers/ (its rows, the files of its tracebacks, the
    exception classes it reports a child with); RULES splices the adapters' rows in.
  * A prefix in front of a program's words hides them (a host label, a timestamp, a logging
    header) -> add its row to framing.LAYERS, the grammar of line prefixes (framing.SHAPE_LAYERS
    reads the prefixes it lacks by their shape; shapes.SHAPES the wordings no row knows).
  * An exception class or OS error means more than "the program raised" -> EXCEPTION_MEANING
    (origin, recoverability, and what it means during setup); what training progress looks like
    -> PROGRESS_RE.
  * The order in which decisions are taken is attribute.DECISIONS, documented there.
  * What a traceback's exception class means -> EXCEPTION_CAUSES; which signals stop a job ->
    STOP_SIGNALS (the tables at the end). What a traceback's frames, a timed-out collective's
    description or a job's start-up lines say -> context.py.
"""

from __future__ import annotations

import re

from faultloop.analyze.logsage import ablation, messages
from faultloop.analyze.logsage.launchers import (
    EVERY_ADAPTER,
    dask,
    deepspeed,
    horovod,
    kubeflow,
    kubernetes,
    launch,
    lightning,
    mpich,
    open_mpi,
    ray,
    spawn,
    srun,
    submitit,
    torch_tests,
    torchrun,
)
from faultloop.analyze.logsage.launchers import EXCEPTION_CAUSES as LAUNCHER_EXCEPTION_CAUSES
from faultloop.analyze.logsage.vocab import (
    BUSY,
    CHECKPOINT,
    COLLECTIVE,
    CUDA_HINT,
    DIVERGED,
    DONE,
    EXCEPTION_KIND,
    FATAL,
    GPU,
    GPU_HARDWARE,
    NETWORK_KIND,
    OOM_KIND,
    PEER_LOST,
    PROGRESS,
    REPORTED,
    SIGNAL,
    SLURM,
    STACK_DUMP,
    STALL,
    STOPPING,
    TERMINATE,
    TIMEOUT,
    TRACEBACK,
    Cause,
    Rule,
)

# Where the lines a rule matches come from: (program, source file that prints the template).

GLOO_TCP = ("gloo", "gloo/transport/tcp/pair.cc")
C10D_NCCL = ("torch", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp")
C10D_NCCL_UTILS = ("torch", "torch/csrc/distributed/c10d/NCCLUtils.hpp")
C10D_GLOO = ("torch", "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp")
C10D_WRAPPER = ("torch", "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp")
C10D_STORE = ("torch", "torch/csrc/distributed/c10d/TCPStore.cpp")
C10D_PY = ("torch", "torch/distributed/distributed_c10d.py")
C10D_BACKEND = ("torch", "torch/csrc/distributed/c10d/Backend.hpp")
TORCH_DATALOADER = ("torch", "torch/csrc/DataLoader.cpp")
TORCH_ALLOCATOR = ("torch", "c10/cuda/CUDACachingAllocator.cpp")
TORCH_CUDA_CHECK = ("torch", "c10/cuda/CUDAException.cpp")
NCCL_CHECKS = ("NCCL", "src/include/checks.h (CUDACHECK), src/include/cudawrap.h (CUCHECK)")
NCCL_ERRORS = ("NCCL", "src/init.cc (ncclGetErrorString)")
NCCL_IB = ("NCCL", "src/transport/net_ib.cc")
NCCL_IBVWRAP = ("NCCL", "src/misc/ibvwrap.cc")
NCCL_SHM = ("NCCL", "src/misc/shmutils.cc")
NCCL_SOCKET = ("NCCL", "src/misc/socket.cc (src/include/socket.h before 2.12, src/os/linux.cc from 2.29)")
NCCL_BOOTSTRAP = ("NCCL", "src/bootstrap.cc")
NCCL_CONNECTIONS = ("NCCL", "src/misc/socket.cc, src/transport/net_socket.cc, src/proxy.cc, src/misc/ipcsocket.cc")
NCCL_SIZE_CHECKS = ("NCCL", "src/transport/net_socket.cc, src/transport/net_ib.cc")
NCCL_PROXY = ("NCCL", "src/proxy.cc (proxyService, ncclProxyCallBlocking)")
NCCL_INIT = ("NCCL", "src/init.cc (src/graph/topo.cc in 2.30.3 and 2.30.4)")
NCCL_ENQUEUE = ("NCCL", "src/enqueue.cc (getAlgoInfo; topoGetAlgoInfo from 2.24)")
NCCL_INTERFACES = ("NCCL", "src/bootstrap.cc, src/misc/socket.cc, src/transport/net_socket.cc")
CUDA_DEVICE_ASSERT = (
    "CUDA runtime, HIP",
    "the device-side __assert_fail (CUDA's device runtime; HIP's device library), via c10's CUDA_KERNEL_ASSERT",
)
CUDA_RUNTIME = ("CUDA runtime", "cuda_runtime_api.h (cudaGetErrorString), via c10/cuda/CUDAException.h")
NVIDIA_DRIVER = ("NVIDIA driver", "nvidia.ko (NVRM: Xid), nvidia-smi / NVML (nvmlErrorString)")
ROCM = ("ROCm", "ROCR-Runtime src/core/runtime/runtime.cpp")
KERNEL_OOM = ("Linux", "mm/oom_kill.c, mm/memcontrol.c")
SLURM_STEPD = ("SLURM", "src/slurmd/slurmstepd/req.c")
SLURM_SRUN = ("SLURM", "src/srun/launch.c, src/api/step_launch.c")
SLURM_CGROUP = ("SLURM", "src/plugins/task/cgroup/task_cgroup_memory.c")
C10D_SOCKET = ("torch", "torch/csrc/distributed/c10d/socket.cpp")
DEEPSPEED_ENGINE = ("DeepSpeed", "deepspeed/runtime/engine.py")
SIGNAL_REPORTS = ("Lightning, UCX", "lightning/pytorch/trainer/connectors/signal_connector.py; ucs/debug/debug.c")
CPYTHON = ("CPython", "Python/pythonrun.c (the exception line), Modules/main.c")
CPYTHON_FAULTHANDLER = ("CPython", "Modules/faulthandler.c")
CPYTHON_IMPORT = ("CPython", "Python/import.c; Lib/argparse.py")
LIBSTDCXX = ("libstdc++", "libsupc++/vterminate.cc")
CPP_CHECK = ("glog, abseil", "glog src/glog/logging.h (CHECK), src/logging.cc; abseil absl/log/internal/check_op.h")
OFI_NCCL = ("aws-ofi-nccl", "src/nccl_ofi_rdma.cpp, src/nccl_ofi_sendrecv.cpp (src/nccl_ofi_net.c before 1.7)")
RDMA_CORE = ("rdma-core", "providers/mlx5/cq.c (the mlx5 verbs provider's dump of an error completion)")
UCX_IB = ("UCX", "src/uct/ib/mlx5/ib_mlx5_log.c (uct_ib_mlx5_completion_with_err)")
SHELL = ("bash", "jobs.c (the death of a foreground job)")
TVM_FFI = ("tvm-ffi", "src/ffi/backtrace.cc (TVMFFISegFaultHandler, built with TVM_FFI_BACKTRACE_ON_SEGFAULT)")
MEGATRON = ("Megatron-LM", "megatron/training/training.py")
TRANSFORMERS = ("transformers", "src/transformers/trainer.py")
TQDM = ("tqdm", "tqdm/std.py (format_meter: `{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}`)")
TRAINING_SCRIPTS = ("training scripts", "common wording of evaluation, checkpointing and preprocessing loops")
FAULTLOOP_WORKLOAD = ("faultloop", "src/faultloop/run/workload.py (the built-in workload's stall watchdog)")
LIBC_ERRNO = (
    "glibc, CPython",
    "string/_strerror.c (strerror(ENOSPC)), Objects/exceptions.c (OSError's [Errno N] text)",
)
LIBC_ENOMEM = ("CPython, glibc", "Objects/exceptions.c (MemoryError; OSError's [Errno N]), string/_strerror.c (ENOMEM)")
RUST_ALLOC = ("Rust std", "library/std/src/alloc.rs (default_alloc_error_hook)")
MEGATRON_ASYNC_CKPT = ("Megatron-LM", "megatron/core/dist_checkpointing/strategies/filesystem_async.py")
MEGATRON_DDP = ("Megatron-LM", "megatron/core/distributed/param_and_grad_buffer.py (check_for_nan_in_grad)")


# fmt: off
# RULES: the table to patch (see "HOW TO PATCH" above). kind decides the role of a line: symptom,
# origin, launcher/scheduler fact or context; hint names the cause it points to; origin the
# program and source file of the template. Anchors are the prefilter's literals, searched all at
# once: reuse the short ones below ("rror", "ignal", "exit", "ailed", "NCCL WARN" for every line
# NCCL's WARN level prints, ...) rather than adding new ones. ripgrep runs a set of at most ~47
# literals of three bytes or more with SIMD, several times faster than a bigger one (tests hold the
# table to that; `make bench-logs` measures it).
EVERY_RULE: tuple[Rule, ...] = (
    # -- the scheduler ended the job (these explain everything after them) --------------------
    *ray.NODE_ROWS,  # an orchestrator lost a node
    *kubernetes.NODE_ROWS,  # an orchestrator ended the pod or the Job
    Rule("preempted", SLURM, ("CANCELLED", "reempt"), r"CANCELLED.*DUE TO PREEMPTION|\b[Pp]reempted\b", Cause.PREEMPTION,
         SLURM_STEPD),
    Rule("time_limit", SLURM, ("CANCELLED",), r"CANCELLED.*DUE TO TIME LIMIT", Cause.TIME_LIMIT, SLURM_STEPD),
    Rule("node_fail", SLURM, ("CANCELLED", "ailure"), r"CANCELLED.*DUE TO NODE FAIL|[Nn]ode failure", Cause.NODE_FAIL,
         SLURM_SRUN),
    Rule("cancelled", SLURM, ("CANCELLED",), r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED", Cause.CANCELLED, SLURM_STEPD),
    # the same line cut after its node (an excerpt's last line): slurmstepd prints it only to end the step
    Rule("cancelled_cut", SLURM, ("rror",), r"rror: \*\*\* (?:JOB|STEP) \S+ ON(?: \S+)?\s*$", Cause.CANCELLED, SLURM_STEPD),
    # srun's teardown of its step: `forcing job termination`, `Job step aborted` (17.11 on), `Force Terminated job
    # J.S` (< 20.11; `Force Terminated StepId=J.S` after), `Terminating job step StepId=J.S` (23.02 on)
    Rule("step_teardown", STOPPING, ("erminat", "borted"),
         r"Terminating (?:job step )?StepId|forcing job termination|Job step aborted|Force Terminated (?:job |StepId)",
         origin=SLURM_SRUN),
    # -- network errors on a line that also says "failed or timed out" (NCCL's flattened reports)
    Rule("ib_error", NETWORK_KIND, ("peer",),
         r"NET/IB\S* ?: Got completion from peer .*(?:error [1-9]|status=(?:[1-9]|[A-Z_]*ERR)|vendor[ _]err(?:=| )[1-9])",
         origin=NCCL_IB),
    # -- hang symptoms: the rank waited for a peer that never came ---------------------------
    Rule("gloo_timeout", TIMEOUT, ("imed out",), r"Timed out waiting \d+ ?ms for (?:recv|send) operation", origin=GLOO_TCP),
    # what every other operation on the rank's gloo context fails with once one timed out (gloo closes
    # all of the context's pairs: unbound_buffer.cc, waitRecv/waitSend): the same wait, not a failure of its own;
    # raised as an exception, so its line carries the class (RuntimeError, DistBackendError): anchored there
    Rule("gloo_timeout_closure", TIMEOUT, ("rror",), r"Application timeout caused pair closure",
         origin=("gloo", "gloo/transport/tcp/unbound_buffer.cc")),
    Rule("nccl_watchdog_timeout", TIMEOUT, ("atchdog",), r"Watchdog caught collective", origin=C10D_NCCL),
    # the watchdog's later reports of a failed or timed-out collective (2.4-2.5, >= 2.6), the flight
    # recorder's dump request (>= 2.5) and a timed-out blocking wait (TORCH_NCCL_BLOCKING_WAIT)
    Rule("nccl_watchdog_report", TIMEOUT, ("atchdog", "ignal", "imed out"),
         r"failure detected by watchdog at work sequence id|\(either an error or timeout\) detected by watchdog at work"
         r"|Received a dump signal due to a collective timeout|\) timed out in blocking wait"
         r"|Observed flight recorder dump signal from another rank", origin=C10D_NCCL),
    Rule("nccl_watchdog_stuck", TIMEOUT, ("imed out", "atchdog"),
         r"[Hh]eartbeat monitor timed out|watchdog got stuck|ProcessGroupNCCL watchdog hang", Cause.WATCHDOG_HANG, C10D_NCCL),

    # the C++ backtrace of the watchdog's timeout exception (c10::Error's `frame #N:` lines), what is
    # left where the excerpt cut its what() line
    Rule("nccl_timeout_frame", TIMEOUT, ("Timeout",), r"ProcessGroupNCCL::WorkNCCL::checkTimeout\(", origin=C10D_NCCL),
    # (the store's error: `Socket Timeout`, `timed out`, torch >= 2.5's `wait timeout after {ms}ms, keys: ...`)
    Rule("setup_store_timeout", TIMEOUT, ("Timeout", "imed out", "rror"),
         r"is setting up NCCL communicator and retrieving ncclUniqueId.*(?:[Tt]imeout|timed out)", Cause.SETUP_HANG,
         C10D_NCCL),
    Rule("dist_timeout", TIMEOUT, ("rror",), r"DistBackendError.*[Tt]ime(?:d ?out)", origin=C10D_BACKEND),
    # the store's server waited for its clients at startup (TCPStore's waitForWorkers): setup never completed
    Rule("store_clients", TIMEOUT, ("imed out",), r"Timed out after \d+ seconds waiting for clients\. \d+/\d+ clients joined",
         Cause.SETUP_HANG, C10D_STORE),
    Rule("store_barrier", TIMEOUT, ("arrier",),
         r"Waiting in store based barrier to initialize process group for rank: (?P<rank>\d+)|Waiting in store based barrier"
         r"|[Tt]imed out initializing process group in store based barrier(?: on rank:? (?P<rank2>\d+))?", Cause.SETUP_HANG,
         C10D_PY),
    # a key the rank waits for on the store never came (the ncclUniqueId exchange, a barrier: torch >= 2.5's wording)
    Rule("store_wait_timeout", TIMEOUT, ("rror",), r"DistStoreError: wait timeout after \d+ms, keys:", Cause.SETUP_HANG,
         C10D_STORE),
    Rule("store_timeout", TIMEOUT, ("Timeout", "rror"), r"Socket Timeout|DistStoreError.*[Tt]ime", origin=C10D_STORE),
    Rule("monitored_barrier", TIMEOUT, ("arrier",), r"Ranks? (?P<missing>[\d, ]+) failed to pass monitoredBarrier",
         origin=C10D_GLOO),
    # a non-root rank of a monitored barrier: the root (rank 0) never answered; it names the rank to blame
    Rule("monitored_barrier_root", TIMEOUT, ("arrier",),
         r"successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank (?P<missing>\d+)",
         origin=C10D_GLOO),
    *torch_tests.STALL_ROWS,  # torch's test harness names a rank that never ended
    Rule("collective_mismatch", TIMEOUT, ("rror",), r"Error: Detected mismatch between collectives", Cause.DESYNC,
         C10D_WRAPPER),
    # -- OOM and GPU errors (before the generic NCCL/CUDA rows) ------------------------------
    Rule("dataloader_killed", OOM_KIND, ("ignal",), r"DataLoader worker \(pid \d+\) is killed by signal: Killed",
         origin=TORCH_DATALOADER),
    # a DataLoader worker's own handler of a fatal signal (`ERROR: Unexpected segmentation fault encountered in
    # worker.`, `... bus error ... This might be caused by insufficient shared memory (shm).`), before its exit
    Rule("dataloader_worker_fault", FATAL, ("egmentat", "rror"),
         r"Unexpected (?:segmentation fault|bus error) encountered in worker", Cause.SEGFAULT, TORCH_DATALOADER),
    Rule("cuda_oom", OOM_KIND, ("of memory", "rror"), r"(?:CUDA|HIP) out of memory|OutOfMemoryError\b(?!')|CUDA error: out of memory",
         origin=TORCH_ALLOCATOR),
    Rule("nccl_cuda_oom", OOM_KIND, ("ailure",), r"Cuda failure (?:\d+ )?'out of memory'", origin=NCCL_CHECKS),
    Rule("slurm_oom", OOM_KIND, ("rror",), r"oom[-_]kill event", origin=SLURM_CGROUP),
    Rule("host_oom", OOM_KIND, ("Kill", "of memory"), r"oom[-_]kill|Out of memory: Kill|[Mm]emory cgroup out of memory",
         origin=KERNEL_OOM),
    # the host's memory ran out under the process: Python's MemoryError, an OS error ENOMEM (12), Rust std's
    # default alloc error hook (a native extension such as HF tokenizers), C++'s operator new
    Rule("python_oom", OOM_KIND, ("rror", "rrno"), r"\bMemoryError\b|\[Errno 12\] Cannot allocate memory", origin=LIBC_ENOMEM),
    Rule("rust_alloc_failed", OOM_KIND, ("ailed",), r"memory allocation of \d+ bytes failed", origin=RUST_ALLOC),
    Rule("cpp_bad_alloc", OOM_KIND, ("erminat",), r"terminate called after throwing an instance of 'std::bad_alloc'",
         origin=LIBSTDCXX),
    Rule("gpu_hardware", GPU_HARDWARE, ("Xid", "rror", "lost"),
         r"NVRM: Xid \(|[Uu]ncorrectable ECC error|ErrorECCUncorrectable|Unable to determine the device handle for GPU"
         r"|\bGPU is lost\b", Cause.GPU_ERROR, NVIDIA_DRIVER),
    Rule("cuda_error", GPU, ("rror",),
         r"CUDA (?:driver )?error: \w|AcceleratorError|[Cc]u[Dd][Nn][Nn] error|illegal memory access|device-side assert triggered",
         Cause.GPU_ERROR, CUDA_RUNTIME),
    Rule("nccl_cuda_error", GPU, ("rror", "ailure"), r"unhandled cuda error|ncclUnhandledCudaError|Cuda failure (?:\d+ )?'",
         Cause.GPU_ERROR, NCCL_CHECKS),
    Rule("rocm_fault", GPU, ("eason:",), r"Memory access fault by GPU", Cause.GPU_ERROR, ROCM),
    # a kernel's device-side assert, printed by the device runtime's __assert_fail (CUDA: `file:line: func: block:
    # [x,y,z], thread: [x,y,z] Assertion `cond` failed.`; torch's CUDA_KERNEL_ASSERT_PRINTF (2.13, 2.14; not 2.6)
    # adds `: Assertion failed: `cond`: msg`; HIP: `file:line: func: Device-side assertion `cond' failed.`) before
    # the host's `device-side assert triggered`
    Rule("cuda_device_assert", GPU, ("ailed",),
         r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\]:? Assertion (?:`.*` failed|failed:)"
         r"|: Device-side assertion `.*' failed", Cause.GPU_ERROR, CUDA_DEVICE_ASSERT),
    Rule("cuda_hint", CUDA_HINT, ("rror",), r"errors might be asynchronously reported", Cause.GPU_ERROR, TORCH_CUDA_CHECK),
    # -- NCCL could not set up its transport: the node's system or configuration -------------
    Rule("nccl_setup", NETWORK_KIND, ("rror",), r"ncclSystemError|unhandled system error", Cause.NCCL_SETUP, NCCL_ERRORS),
    Rule("nccl_ibv", NETWORK_KIND, ("rror",), r"Call to ibv_\w+ failed with error", Cause.NCCL_SETUP, NCCL_IBVWRAP),
    Rule("nccl_shm", NETWORK_KIND, ("rror",), r"Error while creating shared memory segment", Cause.NCCL_SETUP, NCCL_SHM),
    # NCCL's own socket, bootstrap and net warnings (`host:pid:tid [dev] file.cc:line NCCL WARN ...`, NCCL
    # 2.10 to 2.30; catalog/nccl.tsv has each wording with its releases). What they mean, not where:
    # the job's settings name no interface, address or device NCCL can use (nor a NET device its topology lists,
    # 2.21 on: ncclInternalError): a restart repeats it (not
    # NET/IB's `No IP interface found` or `Unable to open device`: NCCL skips that device or falls back
    # to sockets, and the job may run on)
    Rule("nccl_no_interface", NETWORK_KIND, ("NCCL WARN",),
         r"NCCL WARN (?:.*\b(?:no socket interface found|No usable listening interface found|no interface found|"
         r"no device found (?:matching|after excluding))|"
         r"Invalid NCCL_COMM_ID|Net : (?:No valid \S+ pair found|error encountered when getting address info)|"
         r"Could not find NET with id \w+)",
         Cause.NCCL_SETUP, NCCL_INTERFACES),
    # a connection that could not be made (refused, timed out, unreachable, out of retries): during
    # setup the addresses and interfaces the job chose, after progress the network's state
    Rule("nccl_connect_failed", NETWORK_KIND, ("NCCL WARN",),
         r"NCCL WARN (?:.*\b[Cc]onnect to \S+ (?:failed|returned .*(?:exceeded error retry count|errno \d))|"
         r"(?:socketStartConnect|socketPollConnect): exceeded (?:retries|timeouts)|.*: connect returned .*exceeded error "
         r"retry count|(?:ncclOs)?[Ss]ocketPollConnect(?: to \S+ failed with error| poll\(\) failed))",
         Cause.NCCL_SETUP, NCCL_SOCKET),
    # a proxy operation that sets a transport connection up failed (`[Proxy Service R] Failed to execute operation
    # Connect from rank P, retcode N`, the caller's `Proxy Call to rank P failed (Connect)`; ncclProxyMsgTypeStr's
    # Init, SharedInit, Setup, Connect): NCCL could not connect its transport to that peer
    Rule("nccl_proxy_setup", NETWORK_KIND, ("NCCL WARN",),
         r"NCCL WARN (?:\[Proxy Service \d+\] Failed to execute operation (?:Init|SharedInit|Setup|Connect) from|"
         r"Proxy Call to rank \d+ failed \((?:Init|SharedInit|Setup|Connect)\))", Cause.NCCL_SETUP, NCCL_PROXY),
    # NCCL's INFO line for the last retry of a connect (2.24 on; `connect to A returned` from 2.27): the retries are
    # spent, and NCCL gives up (the WARN above) unless this one goes through
    Rule("nccl_connect_retries", NETWORK_KIND, ("etrying",), r"connect (?:to \S+ )?returned .*, retrying \((\d+)/\1\)",
         Cause.NCCL_SETUP, NCCL_SOCKET),
    # before 2.24 the INFO line of every 1000th refused connect (`Call to connect returned Connection refused,
    # retrying`, 2.10 to 2.23) counts nothing: a peer not listening yet, or never; weak, it counts where
    # nothing stronger does (a log that ends in it)
    Rule("nccl_connect_refused", REPORTED, ("etrying",), r"Call to connect returned [^,]+, retrying\s*$",
         Cause.NCCL_SETUP, NCCL_SOCKET),
    # the network plugins under NCCL, which log through NCCL's logger: aws-ofi-nccl (`NET/OFI `) on a
    # failed completion of libfabric's queue; UCX's InfiniBand transport on a work request that completed
    # in error (the retry-count syndromes carry no prefilter anchor)
    Rule("ofi_completion_error", NETWORK_KIND, ("NCCL WARN",),
         r"NCCL WARN NET/OFI (?:Request \S+(?: \([^)]*\))? completed with error|Remote write completed with error|"
         r"Unable to retrieve completion queue entries|Unable to read from fi_cq_readerr)", Cause.NETWORK, OFI_NCCL),
    Rule("ucx_ib_error", NETWORK_KIND, ("rror",),
         r"\b(?:Local (?:length|QP operation|protection|access)|Remote (?:access|operation)|Memory window bind) error on \S+ "
         r"\(synd 0x", Cause.NETWORK, UCX_IB),
    # a connection that was made and then failed under it: a bootstrap message (fixed sizes, NCCL's
    # own protocol: ncclInternalError) came longer than the exchange expects, crossed or cut; the port
    # of an InfiniBand device failed
    Rule("nccl_truncated", NETWORK_KIND, ("NCCL WARN",), r"NCCL WARN Message truncated : received [\d,]+ bytes",
         Cause.NETWORK, NCCL_BOOTSTRAP),
    Rule("nccl_ib_async", NETWORK_KIND, ("NCCL WARN",),
         r"NCCL WARN NET/IB : (?:(?:\S+ )?Got async event : [\w ]*(?:error|catastrophic)|\S+ Got async error event|"
         r"\S+ async fatal event)", Cause.NETWORK, NCCL_IB),
    # the verbs provider under NCCL's IB transport, UCX and libfabric: mlx5 dumps a failed completion (not a flush or
    # a retry-count one) after `mlx5: HOST: got completion with error:` (Ray's log deduplication may count it)
    Rule("ibv_completion_error", NETWORK_KIND, ("rror",), r"\bgot completion with error:(?: \[repeated \d+x across cluster\])?\s*$",
         Cause.NETWORK,
         RDMA_CORE),
    # the other end of a connection went away (recv or send failed, the proxy's socket died): a victim
    Rule("nccl_socket_failed", PEER_LOST, ("NCCL WARN",),
         r"NCCL WARN (?:.*Call to (?:recv from|send to) \S+ failed|NET/Socket : socket progress error|"
         r"Socket recv failed while polling|\[Service thread\] Could not receive type from localRank|"
         r"UDS: (?:Receiving|Sending) data over socket.* failed|ncclProxy\w+ call to (?:top parent rank|tpRank) \d+.* failed)",
         origin=NCCL_CONNECTIONS),
    # the socket transport got a bigger message than this rank posted: NCCL returns ncclInvalidUsage and
    # names "a mismatch in collective sizes or environment settings (NCCL_PROTO, NCCL_ALGO) between ranks"
    # (NET/IB's sender finds the receiver's posted buffer smaller, and returns ncclInternalError)
    Rule("nccl_size_mismatch", FATAL, ("NCCL WARN",),
         r"NCCL WARN NET/(?:Socket : peer \S+ message truncated : receiving|"
         r"IB : (?:req \S+ tag \S+ )?peer \S+ (?:collective mismatch error|posted incorrect receive info))",
         Cause.WORKLOAD_EXC, NCCL_SIZE_CHECKS),
    # two ranks on one GPU: the launch maps ranks to devices wrongly
    # (2.30's wording: `Multiple ranks detected using` in 2.30.3 and 2.30.4, `Multiple Ranks are using` since)
    Rule("nccl_duplicate_gpu", FATAL, ("NCCL WARN",),
         r"NCCL WARN (?:Duplicate GPU detected : rank \d+ and rank \d+|Multiple [Rr]anks (?:are|detected) using the same GPU)",
         Cause.CONFIG_ERROR, NCCL_INIT),
    # no algorithm and protocol NCCL may use for a collective: the job's NCCL_ALGO / NCCL_PROTO (or the
    # topology they meet) admit none, and NCCL returns ncclInvalidUsage where they are set (2.5 to 2.23 bare;
    # from 2.24 `... for function F with datatype T.` and the settings; `No algorithm` from 2.30)
    Rule("nccl_no_algorithm", FATAL, ("NCCL WARN",), r"NCCL WARN (?:Error : no|No) algorithm/protocol available",
         Cause.CONFIG_ERROR, NCCL_ENQUEUE),
    # -- peer lost: the rank's partner died or the link broke --------------------------------
    Rule("nccl_peer_closed", PEER_LOST, ("peer",), r"Connection closed by remote peer", origin=NCCL_SOCKET),
    Rule("peer_closed", PEER_LOST, ("peer",), r"[Cc]onnection closed by peer|reset by peer|remote peer", origin=GLOO_TCP),
    Rule("nccl_ops_failed", PEER_LOST, ("imed out",), r"NCCL operations have failed or timed out", origin=C10D_NCCL),
    Rule("nccl_remote", PEER_LOST, ("rror",), r"ncclRemoteError|remote process exited", origin=NCCL_ERRORS),
    Rule("store_peer_lost", PEER_LOST, ("rash",),
         r"possible application crash on rank|Did the remote server shutdown or crash", origin=C10D_STORE),
    Rule("broken_pipe", PEER_LOST, ("rror",), r"BrokenPipeError|Broken pipe", origin=CPYTHON),
    *horovod.VICTIM_ROWS,  # a launcher's word that a survivor lost its peers
    *open_mpi.VICTIM_ROWS,
    # the caller's misuse of NCCL (ncclInvalidUsage, ncclInvalidArgument): ncclGetErrorString's words, with
    # `(run with NCCL_DEBUG=WARN for details)` from NCCL 2.18, bare before, then torch's `, NCCL version`
    Rule("nccl_usage", FATAL, ("rror",), r"NCCL error.*invalid (?:usage|argument)(?: \(run with NCCL_DEBUG|, NCCL version|$)",
         Cause.WORKLOAD_EXC, C10D_NCCL_UTILS),
    Rule("nccl_error", PEER_LOST, ("rror",), r"NCCL error", origin=C10D_NCCL_UTILS),
    # a call on a communicator that ProcessGroupNCCL had aborted (its watchdog does so once a collective on it
    # failed: NCCL reported an error, or the collective timed out; `NCCL communicator was aborted.` before 1.10,
    # `... on rank N.` from 1.10, with the original reason where torch kept one, which its own row reads first):
    # the rank that raises it only suffered a failure elsewhere, which the bare wording does not name
    Rule("nccl_comm_aborted", PEER_LOST, ("borted",), r"NCCL communicator was aborted(?: on rank (?P<rank>\d+))?\.",
         origin=C10D_NCCL_UTILS),
    # -- the job is misconfigured or its launch environment failed: every rank fails the same way
    # a port taken on the node (c10d's socket: `name: EADDRINUSE`; Python's `[Errno 98]`): the launch's settings
    Rule("port_in_use", FATAL, ("rror",), r"rror\b.*(?:EADDRINUSE|[Aa]ddress already in use)", Cause.LAUNCH_ADDRESS,
         C10D_SOCKET),
    # c10d's server socket could bind to no address (>= 1.11; >= 2.4's libuv store adds `port: P, ..., name: E`):
    # the port or address the launch chose is taken, privileged (errno 13) or not the node's (errno 99). Each
    # family's `failed to bind to A (errno: N - M)` before it is a warning only: another family may bind.
    Rule("store_listen_failed", FATAL, ("ailed",), r"The server socket has failed to listen on any local network address",
         Cause.LAUNCH_ADDRESS, C10D_SOCKET),
    # the master's host name does not resolve (c10d's getaddrinfo: EAI_NONAME -2, EAI_FAIL -4, EAI_NODATA -5; CPython's
    # socket.gaierror): the name the launch was given; EAI_AGAIN (-3), a DNS server's transient failure, is not read
    Rule("name_unresolved", FATAL, ("rror",),
         r"cannot be retrieved \(gai error: -[245] |gaierror: \[Errno -[245]\]", Cause.LAUNCH_ADDRESS, C10D_SOCKET),
    Rule("config_error", FATAL, ("rrno", "rror"),
         r"can't open file '[^']*': \[Errno|ModuleNotFoundError: No module named|error: unrecognized arguments"
         r"|Too many open files\. Communication with the workers|environment variable \w+ expected, but not set"
         r"|Distributed package doesn't have \w+ built in",
         Cause.CONFIG_ERROR, CPYTHON_IMPORT),
    # the store's client never reached its server (the master): c10d's socket (>= 1.11; each address's `failed to
    # connect to A (errno: N - M)` before it is a warning only), TCPStore (>= 2.5) and tcputils (< 1.11) wordings
    Rule("store_unreachable", FATAL, ("ailed", "imed out"),
         r"The client socket has (?:timed out after|failed to connect to any network address)"
         r"|TCP client failed to connect/validate to host \S+ - timed out|connect\(\) timed out\. Original timeout was",
         Cause.LAUNCH_ENV, C10D_SOCKET),
    # the launchers' own failures (MPI_Init, the rendezvous, srun's step) and srun's task ends
    *open_mpi.FAILURE_ROWS,
    *torchrun.FAILURE_ROWS,
    *srun.FAILURE_ROWS,
    # -- fatal errors (faulthandler, shells, C++ runtime) -------------------------------------
    Rule("fatal_segv", FATAL, ("rror",), r"Fatal Python error: Segmentation fault", Cause.SEGFAULT, CPYTHON_FAULTHANDLER),
    Rule("fatal_bus", FATAL, ("rror",), r"Fatal Python error: Bus error", Cause.SEGFAULT, CPYTHON_FAULTHANDLER),
    Rule("fatal_abort", FATAL, ("rror",), r"Fatal Python error: Aborted", Cause.OS_ABORT, CPYTHON_FAULTHANDLER),
    Rule("fatal_other", FATAL, ("rror",), r"Fatal Python error: ", origin=CPYTHON_FAULTHANDLER),
    Rule("cpp_terminate", TERMINATE, ("erminat",), r"terminate called after throwing an instance of", Cause.OS_ABORT,
         LIBSTDCXX),
    # a C++ CHECK that failed: glog's and abseil's fatal log aborts the process (SIGABRT) after its line
    # (`F1207 12:00:00.000000 123 file.cc:42] Check failed: x == y (1 vs. 2)`, framing peels the header)
    # and glog's stack dump header
    Rule("check_failed", FATAL, ("ailed", "ailure"), r"\bCheck failed: |\*\*\* Check failure stack trace: \*\*\*",
         Cause.OS_ABORT, CPP_CHECK),
    Rule("shell_segv", FATAL, ("egmentat",), r"Segmentation fault", Cause.SEGFAULT, SHELL),
    # tvm-ffi's SIGSEGV handler (loaded with torch's and FlashInfer's C++ extensions): its banner, then the
    # stack as `File "<unknown>", line 0, in F` frames, then the signal re-raised
    Rule("tvm_ffi_segv", FATAL, ("Segfault enc",), r"!{7} Segfault encountered !{7}", Cause.SEGFAULT, TVM_FFI),
    Rule("shell_abort", FATAL, ("borted",), r"Aborted\s+\(core dumped\)", Cause.OS_ABORT, SHELL),
    # -- a Python traceback (classified by its exception line, read after the scan) ----------
    Rule("traceback", TRACEBACK, ("Traceback",), r"^Traceback \(most recent call last\):", origin=CPYTHON),
    # (its anchor without the quote, which a JSON log record escapes: `File \"`)
    Rule("traceback_frame", TRACEBACK, ("File ",), r'^\s+File "[^"]*", line \d+, in ', origin=CPYTHON),  # lost header
    # -- launchers and orchestrators: their reports of the children's ends and of signals to them
    *torchrun.REPORT_ROWS,
    *spawn.REPORT_ROWS,
    *deepspeed.REPORT_ROWS,
    *lightning.REPORT_ROWS,
    *open_mpi.REPORT_ROWS,
    *mpich.REPORT_ROWS,
    *horovod.REPORT_ROWS,
    *launch.REPORT_ROWS,
    *dask.REPORT_ROWS,
    *submitit.REPORT_ROWS,
    *kubeflow.REPORT_ROWS,
    *kubernetes.REPORT_ROWS,
    Rule("signal_received", SIGNAL, ("ignal", "eceived SIG"),
         r"\b(?:[Rr]eceived (?:signal[: ]*)?|(?:[Gg]ot|[Cc]aught) signal[: ]*)(?:SIG[A-Z0-9]+|\d+)", origin=SIGNAL_REPORTS),
    # -- training that runs on but learns nothing -----------------------------------------------
    Rule("skipped_steps", DIVERGED, ("kipped=",), r"\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+)", Cause.DIVERGED,
         DEEPSPEED_ENGINE),
    # -- context ------------------------------------------------------------------------------
    Rule("stall_watchdog", STALL, ("dump",), r"no (?:training )?progress (?:for|in) \d", origin=FAULTLOOP_WORKLOAD),
    Rule("stall_dump", STALL, ("dump",), r"dumped \d+ bytes to \S*_dump_(?P<rank>\d+) \(stall\)",
         origin=FAULTLOOP_WORKLOAD),  # names its rank
    Rule("faulthandler_timeout", STACK_DUMP, ("Timeout",), r"^Timeout \(\d+:\d\d:\d\d", origin=CPYTHON_FAULTHANDLER),
    Rule("nccl_progress", PROGRESS, ("atchdog", "Timeout"), r"last enqueued (?:NCCL )?work: (?P<seq>-?\d+)", origin=C10D_NCCL),
    # a collective's description: WorkNCCL's operator<< ends it with `Timeout(ms)=N)` in every version
    Rule("nccl_work", COLLECTIVE, ("Timeout",), r"WorkNCCL\(SeqNum=\d+.*Timeout\(ms\)=", origin=C10D_NCCL),
    Rule("one_rank_work", BUSY, ("valuat", "alidat", "mAP@", "eckpoint"),
         r"[Ee]valuating|[Vv]alidating|\bmAP@|[Ss]aving (?:\w+ ){0,2}checkpoint",
         origin=TRAINING_SCRIPTS),
    # an unfinished progress bar (tqdm: `{desc}: {percentage}%|{bar}|`) whose description says what the
    # work does: evaluate or predict, save or export, prepare, preprocess, tokenize or map a data set;
    # work of that kind runs on one rank (rank 0 by convention, or the rank the description names);
    # anchored on the percentage's last digit too (`%|` alone, two bytes, slows the whole prefilter 3x)
    Rule("one_rank_bar", BUSY, tuple(f"{digit}%|" for digit in range(10)),
         r"^(?=[^|]*?\b(?:[Ee]valuat|[Vv]alidat|[Pp]redict|[Ii]nfer|[Gg]enerat|[Tt]est(?:ing)?\b|[Ss]av(?:e|ing)\b|"
         r"[Ee]xport|[Pp]repar|[Pp]re-?process|[Tt]okeniz|Map\b|[Ff]ilter\b))(?:[^|]*?\brank[= ](?P<rank>\d+))?"
         r"[^|]*?:? +(?:\d|[1-9]\d)%\|", origin=TQDM),
    Rule("checkpoint_saved", CHECKPOINT, ("eckpoint",), r"\b[Ss]aved checkpoint|checkpoint (?:saved|written)",
         origin=TRAINING_SCRIPTS),
    Rule("job_done", DONE, ("is done",), r"after training is done", Cause.DONE, MEGATRON),
    Rule("trainer_done", DONE, ("completed",), r"[Tt]raining completed", Cause.DONE, TRANSFORMERS),
    # -- a rank's own write or step failed (before the plain exception line reads it as a code bug)
    # Megatron's async checkpoint writer: a write process's exception, logged by the coordinator (core 0.8 to 0.12);
    # an I/O error (EIO 5, EREMOTEIO 121) is the storage's, which clears (EXCEPTION_MEANING); a full volume is the next row's
    Rule("checkpoint_io_error", FATAL, ("rror",), r"Local process \d+ encountered an error: .*\[Errno (?:5|121)\]",
         Cause.STORAGE_ERROR, MEGATRON_ASYNC_CKPT),
    Rule("disk_full", FATAL, ("rror",), r"No space left on device|\bENOSPC\b", Cause.STORAGE_FULL, LIBC_ERRNO),
    Rule("nan_grad", FATAL, ("rror",), r"found NaN in local grad norm", Cause.NAN_LOSS, MEGATRON_DDP),
    # -- read what is there: a plain failure line with none of the context above ----------------
    # an orchestrator's word on its workers (Ray's driver: a worker died, its node died, it raised)
    *ray.WORKER_ROWS,
    # Python's exception line: `module.Class: message`, the module left out for builtins and __main__ only, so a
    # bare `Error: ...` is no Python exception's but the wording of C programs and NCCL's WARN lines (shmutils.cc:
    # `NCCL WARN Error: failed to extend /dev/shm/...`), which their own rows read
    Rule("exception_line", EXCEPTION_KIND, ("rror",),
         r"^\s*(?:[A-Za-z_]\w*\.)*(?!ChildFailedError|CalledProcessError|nccl)(?:[A-Za-z_]+|(?<=\.))Error(?:\(\w+\))?"
         r"(?::(?!\s*[\d.eE+-]+\s*$)|$)", Cause.WORKLOAD_EXC, CPYTHON),
    Rule("program_error", REPORTED, ("rror",), r"^\s*[\w./-]+: [Ee]rror:|\b[Ff]atal [Ee]rror:", Cause.PROGRAM_ERROR,
         ("any program", "the `prog: error:` convention of C programs (err(3), SLURM's error()) and argparse")),
)
# fmt: on
# the rows of the programs this process reads: all but those left out (ablation.py)
RULES: tuple[Rule, ...] = tuple(rule for rule in EVERY_RULE if ablation.keeps(rule.origin))

# A DeepSpeed step report is a failure when most steps so far were skipped on fp16 overflow, and
# more than loss-scale warm-up skips: the scale halves on each overflow, from 2**32 (DeepSpeed's
# default initial_scale_power) down to 1 in 32 steps.
DIVERGED_SKIP_SHARE = 0.5
WARMUP_SKIPS = 32


# -- what a traceback says ------------------------------------------------------------------------
# exception class (last dotted part) -> cause, where the class says more than "the program raised"
EXCEPTION_CAUSES: dict[str, str] = {
    "KeyboardInterrupt": Cause.SIGINT,
    "ModuleNotFoundError": Cause.CONFIG_ERROR,
    "ImportError": Cause.CONFIG_ERROR,
    # c10d's class for the communication backend's own errors (torch >= 2.1 raises NCCL's and Gloo's failures as
    # DistBackendError: torch/csrc/distributed/c10d/exception.h, NCCLUtils.hpp's C10D_NCCL_CHECK): where its
    # message is cut or says nothing a row reads (Ray's `RayTaskError(DistBackendError)` header alone), the
    # class still names the collectives' transport, as a bare `NCCL error` line does
    **({"DistBackendError": Cause.NETWORK} if ablation.keeps(C10D_BACKEND) else {}),
    **LAUNCHER_EXCEPTION_CAUSES,
}
# What an exception means: where it comes from (the workload's code, or the infrastructure it runs
# on: storage, network, a remote service, the rendezvous store) and whether the next attempt may
# recover (transient) or meets it again (deterministic), in the vocabulary of NVRx's Restart Agent
# taxonomy; and, for a transient one, what it means during setup (before training made progress):
# an endpoint that could not be reached or timed out is the addresses, ports and settings the job
# chose, which the next attempt meets again (recurs); a connection that was made and then broke
# (reset, aborted, cut short) says nothing about them (passes). Rows: (class names, last dotted
# part; OS error numbers, `[Errno N]`), origin, recoverability, in setup. From Python's built-in
# exception hierarchy, errno(3), the requests/urllib3 errors and c10d's DistError family
# (torch/csrc/distributed/c10d/exception.h). A deterministic class is the program's whenever it
# comes.
WORKLOAD, INFRASTRUCTURE = "workload", "infrastructure"
TRANSIENT, DETERMINISTIC = "transient", "deterministic"
RECURS, PASSES = "recurs", "passes"
# fmt: off
EXCEPTION_MEANING: tuple[tuple[tuple[str, ...], tuple[int, ...], str, str, str], ...] = (
    # OS errors that a retry can outlive: resets and aborts of a made connection (104, 103), timeouts
    # (110), unreachable networks and hosts (101, 113), I/O (5), a stale NFS handle (116), a remote I/O
    # error (121)
    (("ConnectionResetError", "ConnectionAbortedError", "RemoteDisconnected", "IncompleteRead", "ProtocolError",
      "ChunkedEncodingError"), (104, 103), INFRASTRUCTURE, TRANSIENT, PASSES),
    (("TimeoutError", "timeout", "ReadTimeout", "ConnectTimeout", "ReadTimeoutError"), (110,),
     INFRASTRUCTURE, TRANSIENT, RECURS),
    (("ConnectionError", "DistNetworkError", "DistStoreError"), (101, 113), INFRASTRUCTURE, TRANSIENT, RECURS),
    ((), (5, 116, 121), INFRASTRUCTURE, TRANSIENT, RECURS),
    # the program's own: they recur with the same code, data and settings (a missing file (2), access (13),
    # a directory for a file (21), a full disk (28))
    (("ValueError", "TypeError", "KeyError", "IndexError", "AttributeError", "AssertionError", "NameError",
      "ImportError", "ModuleNotFoundError", "NotImplementedError", "ZeroDivisionError", "RecursionError",
      "UnboundLocalError", "SyntaxError", "FileNotFoundError", "IsADirectoryError", "PermissionError"),
     (2, 13, 21, 28), WORKLOAD, DETERMINISTIC, RECURS),
)
# fmt: on
ERRNO_RE = re.compile(r"\[Errno (-?\d+)\]")
# a line that shows training moving on: an iteration, step or epoch counter past zero, a progress
# bar's count past zero (tqdm: `| 18625/20000 [`), a Trainer's loss report (transformers, Lightning,
# Megatron's `iteration 100/ 5000 |`, DeepSpeed's `step=100,`); read from the log's head
PROGRESS_RE = re.compile(
    r"\b(?:[Ii]ter(?:ation)?|[Ss]tep|[Ee]poch|global_step)[ :=\[]+0*[1-9]\d*|\| *0*[1-9]\d* ?/ ?\d+ \[|"
    r"\{'loss': |\bstep=0*[1-9]\d*, skipped="
)

# -- exit statuses and signals ---------------------------------------------------------------------
# (the cause a rank's death by each signal shows: exits.SIGNAL_CAUSES, every signal the shells name)
# signals launchers and schedulers send to stop the rest of a job: a rank ended by one after the
# stop began is a victim
STOP_SIGNALS = ("SIGTERM", "SIGKILL", "SIGHUP", "SIGINT")


def programs() -> list[str]:
    """Every program the tables name, the names `faultloop eval-logs --ablate` leaves out: of the
    rows, the launcher adapters and the catalog's entries (ablation.py)."""
    origins = [
        *(rule.origin for rule in EVERY_RULE),
        *(adapter.ORIGIN for adapter in EVERY_ADAPTER),
        *((t.program, t.source) for t in messages.load_catalog(left_out=frozenset())),
    ]
    return sorted({name for origin in origins for name in ablation.programs_of(origin)})

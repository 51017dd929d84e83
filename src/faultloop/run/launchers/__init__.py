"""The launchers a cell's job runs under: one module per launcher, one row each in `LAUNCHERS`.

A row says which program starts the ranks, how many of it a job has, which variables tell a rank
who it is (`identity.SOURCES`), what it prints when a rank fails, how it builds the job's
processes on this machine and inside a SLURM allocation, and how its exits are read for the
manifest. Adding a launcher: a module with `local_tasks`, `allocation_argv` and `rank_exits`, and
its row here (docs/frameworks.md, "Launchers").
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from faultloop.run.launchers import frameworks as fw
from faultloop.run.launchers import mpiexec, mpirun, srun, torchrun
from faultloop.run.launchers.base import JobEnd, Launcher, LauncherLine, LaunchJob
from faultloop.run.launchers.base import Outcome as When

# The lines torch's elastic launcher prints (torchrun's, and accelerate's, which runs it in-process)
_TORCH = "torch/distributed/elastic"
TORCH_WORKER_FAILED = LauncherLine(
    When.FAILED,
    (r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of binary",),
    f"{_TORCH}/multiprocessing/api.py (the agent's report of a failed worker)",
)
TORCH_STOPPED = LauncherLine(
    When.STOPPED,
    (r"Received \S+ death signal, shutting down workers",),
    f"{_TORCH}/agent/server/api.py (the agent stopped by a signal)",
)
# Open MPI 4.1's mpirun: its summary of the first rank to fail, between dashed rules, one wording
# for a non-zero exit code and another for a signal (orte's errmgr help texts)
_OPEN_MPI = "Open MPI 4.1 mpirun, orte/mca/errmgr's help texts"
OPEN_MPI_EXIT = r"Primary job\s+terminated normally, but \d+ process(?:es)? returned"
# the tool names itself as it was called (`mpirun`, Debian's `mpirun.openmpi`)
OPEN_MPI_SIGNAL = r"\S+ noticed that process rank \d+ with PID \d+ on node \S+ exited on signal \d+"
OPEN_MPI_LINES = (
    LauncherLine(When.FAILED, (OPEN_MPI_EXIT, OPEN_MPI_SIGNAL), _OPEN_MPI),
    LauncherLine(When.BY_EXIT_CODES, (OPEN_MPI_EXIT,), _OPEN_MPI),
    LauncherLine(When.BY_SIGNALS_ONLY, (OPEN_MPI_SIGNAL,), _OPEN_MPI),
)

LAUNCHERS: Mapping[str, Launcher] = {
    launcher.name: launcher
    for launcher in (
        Launcher(
            "torchrun",
            program="python -m torch.distributed.run",
            package="torch",
            spans="node",
            identity="torch",
            on_rank_failure="`ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1`, "
            "SIGTERMs to the others, then its `ChildFailedError` summary table of the root cause",
            local_tasks=torchrun.local_tasks,
            allocation_argv=torchrun.allocation_argv,
            rank_exits=torchrun.rank_exits,
            own_lines=(TORCH_WORKER_FAILED, TORCH_STOPPED),
        ),
        Launcher(
            "srun",
            program="srun --label --kill-on-bad-exit=1",
            package="slurm-client (this machine: faultloop.run.srun.LocalSrun)",
            spans="rank",
            identity="slurm",
            on_rank_failure="`srun: error: node1: task 3: Exited with exit code 1` (or `Killed`), then "
            "`srun: launch/slurm: _step_signal: Terminating StepId=...`",
            local_tasks=srun.local_tasks,
            allocation_argv=srun.allocation_argv,
            rank_exits=srun.rank_exits,
            own_lines=(
                LauncherLine(
                    When.FAILED,
                    (r"^srun: error: \S+: tasks? [\d,-]+: ",),
                    "slurm's srun, its report of a task that failed (here faultloop.run.srun.LocalSrun prints it)",
                ),
            ),
        ),
        Launcher(
            "mpirun",
            program="mpirun (Open MPI)",
            package="openmpi-bin",
            spans="job",
            identity="openmpi",
            on_rank_failure="between dashed rules: `Primary job  terminated normally, but 1 process returned a "
            "non-zero exit code.` and `mpirun detected that one or more processes exited with non-zero status "
            "... Process name: [[1234,1],1] Exit code: 1`, or `mpirun noticed that process rank 1 with PID 0 on "
            "node n1 exited on signal 9 (Killed).`",
            local_tasks=mpirun.local_tasks,
            allocation_argv=mpirun.allocation_argv,
            rank_exits=mpirun.rank_exits,
            srun_lines=False,
            programs=mpirun.NAMES,
            own_lines=OPEN_MPI_LINES,
        ),
        Launcher(
            "mpirun_tagged",
            program="mpirun --tag-output (Open MPI)",
            package="openmpi-bin",
            spans="job",
            identity="openmpi",
            on_rank_failure="as mpirun; every line of a rank is prefixed `[1,<rank>]<stdout>:` or `<stderr>:`",
            local_tasks=partial(mpirun.local_tasks, tagged=True),
            allocation_argv=partial(mpirun.allocation_argv, tagged=True),
            rank_exits=mpirun.rank_exits,
            srun_lines=False,
            programs=mpirun.NAMES,
            own_lines=(
                *OPEN_MPI_LINES,
                LauncherLine(When.STARTED, (r"^\[\d+,\d+\]<std(?:out|err)>:",), "Open MPI 4.1 mpirun --tag-output"),
            ),
        ),
        Launcher(
            "mpiexec",
            program="mpiexec (MPICH hydra)",
            package="mpich",
            spans="job",
            identity="pmi",
            on_rank_failure="for a rank killed by a signal, the banner `BAD TERMINATION OF ONE OF YOUR APPLICATION "
            "PROCESSES` / `PID <pid> RUNNING AT <host>` / `EXIT CODE: 9` and `YOUR APPLICATION TERMINATED WITH "
            "THE EXIT STRING: Killed (signal 9)`; a non-zero exit code is not reported; inside a SLURM allocation "
            "the other nodes' proxies then fail hydra's clean-up (`assert (!closed) failed`, srun's `task 1: Exited "
            "with exit code 7`) and mpiexec aborts before its exit codes",
            local_tasks=mpiexec.local_tasks,
            allocation_argv=mpiexec.allocation_argv,
            rank_exits=mpiexec.rank_exits,
            own_lines=(
                LauncherLine(
                    When.ENDED, (r"^\[mpiexec@\S+\] Exit codes: ",), "MPICH 4.0 hydra's mpiexec, -print-all-exitcodes"
                ),
                LauncherLine(
                    When.BY_A_SIGNAL,
                    (mpiexec.BAD_TERMINATION,),
                    "MPICH 4.0 hydra's mpiexec, its banner for a process that died by a signal",
                ),
            ),
            silent={
                When.STOPPED: "hydra waits for every rank, a stopped one for ever; stopped at the job's limit "
                "(SIGTERM, then SIGKILL, as SLURM stops a step at its time limit) it prints nothing (MPICH 4.0.2 here)"
            },
            srun_lines=False,
            programs=mpiexec.NAMES,
        ),
        Launcher(
            "accelerate",
            program="accelerate launch --multi_gpu (torch's elastic launcher in-process)",
            package="accelerate",
            spans="node",
            identity="torch",
            on_rank_failure="torch's lines as under torchrun (`failed (exitcode: 1) local_rank: 1`, the "
            "`ChildFailedError` table of the root cause), after accelerate's own warnings",
            local_tasks=fw.accelerate_tasks,
            allocation_argv=fw.accelerate_allocation,
            rank_exits=fw.accelerate_exits,
            own_lines=(
                LauncherLine(
                    When.STARTED,
                    (r"The following values were not passed to `accelerate launch` and had defaults used instead",),
                    "accelerate/commands/launch.py (_validate_launch_command)",
                ),
                TORCH_WORKER_FAILED,
                TORCH_STOPPED,
            ),
        ),
        Launcher(
            "deepspeed",
            program="deepspeed --no_ssh --node_rank i (deepspeed.launcher.launch on each node)",
            package="deepspeed",
            spans="node",
            identity="torch",
            on_rank_failure="`[launch.py:...:sigkill_handler] Killing subprocess <pid>` for every local rank, then "
            "`[launch.py:...:sigkill_handler] [...] exits with return code = 1`",
            local_tasks=fw.deepspeed_tasks,
            allocation_argv=fw.deepspeed_allocation,
            rank_exits=fw.deepspeed_exits,
            own_lines=(
                LauncherLine(
                    When.STARTED,
                    (r"\[launch\.py:\d+:main\] process \d+ spawned with command",),
                    "deepspeed/launcher/launch.py (main)",
                ),
                LauncherLine(
                    When.FAILED,
                    (r"\[launch\.py:\d+:sigkill_handler\] Killing subprocess \d+",),
                    "deepspeed/launcher/launch.py (sigkill_handler)",
                ),
            ),
        ),
        Launcher(
            "lightning",
            program="the rank module once per node (Lightning's _SubprocessScriptLauncher starts the others)",
            package="lightning",
            spans="node",
            identity="torch",
            on_rank_failure="`Child process with PID <pid> terminated with code 1. Forcefully terminating all other "
            "processes to avoid zombies`, from its process observer",
            local_tasks=fw.lightning_tasks,
            allocation_argv=fw.lightning_allocation,
            rank_exits=fw.lightning_exits,
            # Lightning's launcher prints nothing at start; its observer names a failed child only
            # when it polls (every 5 s) before the node's first rank has failed too
            own_lines=(
                LauncherLine(
                    When.SOMETIMES,
                    (r"Child process with PID \d+ terminated with code -?\d+\. Forcefully terminating",),
                    "lightning/fabric/strategies/launchers/subprocess_script.py (_ChildProcessObserver)",
                ),
            ),
        ),
        Launcher(
            "ray",
            program="the Ray Train driver once (TorchTrainer starts the workers on a local Ray cluster)",
            package="ray[train]",
            spans="job",
            identity="torch",
            on_rank_failure="the worker's traceback with Ray's `(RayTrainWorker pid=<pid>)` prefix, then the "
            "driver's `ray.train.base_trainer.TrainingFailedError`",
            local_tasks=fw.ray_tasks,
            allocation_argv=fw.ray_allocation,
            rank_exits=fw.ray_exits,
            own_lines=(
                LauncherLine(When.STARTED, (r"Started a local Ray instance\.",), "ray/_private/worker.py (init)"),
                LauncherLine(
                    When.STARTED,
                    (r"^\(RayTrainWorker pid=\d+\) ",),
                    "ray/_private/worker.py (the prefix of a worker's line the driver prints)",
                ),
                LauncherLine(
                    When.FAILED, (r"Training failed due to worker errors:",), "ray/train/v2/api/exceptions.py"
                ),
            ),
            srun_lines=False,
        ),
    )
}

__all__ = ["LAUNCHERS", "JobEnd", "LaunchJob", "Launcher", "LauncherLine"]

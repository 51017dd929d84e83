"""Ray Train: the driver runs the training function in actors (RayTrainWorker) and raises in the
driver when one of them fails.

Where an actor's process or node died: `ActorDiedError: The actor died unexpectedly before
finishing this task.` (RayActorError before Ray 2.11), `WorkerCrashedError: The worker died
unexpectedly while executing this task.` (python/ray/exceptions.py, 2.5 ... 2.52 read). The
message runs on: the actor (`\tclass_name: ...`, `\tpid: ...`) and the core worker's reason, as
`The actor died because its node has died. Node Id: ...` where its node went (src/ray/gcs; `The actor
is dead because ...` before 2.11): that later line, read with the traceback or below an exception
line that stands without it (WHY_BELOW), makes it a node lost from outside the job.
Where a worker raised, the driver re-raises it as `RayTaskError(Inner)` (read as the Inner class by
records.py). Ray Train then ends the run: `TrainingFailedError: The Ray Train run failed. Please
inspect the previous error messages for a cause.` (Train v1), or Train v2's `WorkerGroupError:
Training failed due to worker errors:` followed by `[Rank R Error Snippet]:` over each failed
worker's traceback (ray/train/v2/_internal/execution/worker_group/poll.py): the header names the rank.
Ray's own reports to the driver: the raylet's `A worker died or was killed while executing a task by
an unexpected system error. ... Worker exit type: SYSTEM_ERROR Worker exit detail: D` (D: `Task was
killed due to the node running low on memory.` where its memory monitor killed it; OutOfMemoryError
says the same; the monitor's summary `N Workers (tasks / actors) killed due to memory pressure
(OOM), M Workers crashed due to other reasons at node ...`: src/ray/raylet/node_manager.cc), the
GCS's `The node with node id: N and address: A and node name: H has been marked dead because the
detector has missed too many heartbeats from it. This can happen when a (1) raylet crashes
unexpectedly (OOM, preempted node, etc.)` (`and ip: A ... when a raylet crashes unexpectedly or
has lagging heartbeats` in Ray 1.x: src/ray/gcs/gcs_server/gcs_node_manager.cc), and a node's
raylet gone: `Raylet is terminated. Termination is unexpected.`
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import CHILD_ERROR, DEATH, FATAL, OOM_KIND, SLURM, STOPPING, Cause, Rule

EXCEPTIONS = ("Ray", "python/ray/exceptions.py (ActorDiedError, WorkerCrashedError, RayTaskError)")
GCS = ("Ray", "src/ray/gcs/gcs_server/gcs_actor_manager.cc (the reason an actor died with its node)")
NODES = (
    "Ray",
    "src/ray/gcs/gcs_server/gcs_node_manager.cc (a node marked dead), printed by python/ray/_private/worker.py",
)
RAYLET = (
    "Ray",
    "src/ray/raylet/node_manager.cc (a worker's death, the memory monitor's kills), src/ray/raylet/main.cc",
)
TRAIN = (
    "Ray",
    "python/ray/train/base_trainer.py (v1); python/ray/train/v2/api/exceptions.py, worker_group/poll.py (v2)",
)

# fmt: off
# with the scheduler's rows (a node lost explains everything after it), before the preemption row that
# the GCS's list of reasons (`preempted node`) would meet
NODE_ROWS: tuple[Rule, ...] = (
    Rule("ray_node_marked_dead", SLURM, ("rash",),
         r"has been marked dead because the detector has missed too many heartbeats", Cause.NODE_LOST, NODES),
    Rule("ray_raylet_died", SLURM, ("erminat",), r"Raylet is terminated\. Termination is unexpected", Cause.NODE_FAIL,
         RAYLET),
)
# before the plain exception line, which would read these as the driver's own exception
WORKER_ROWS: tuple[Rule, ...] = (
    Rule("ray_memory_monitor", OOM_KIND, ("rror", "rash"),
         r"Worker exit detail: Task was killed due to the node running low on memory|OutOfMemoryError: Task was killed due "
         r"to the node running low on memory|Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
         Cause.HOST_OOM, RAYLET),
    # the raylet's report of a worker's death (as a launcher's of its child): its own lines, or a network
    # error under it, say more
    Rule("ray_system_error", DEATH, ("rror",),
         r"A worker died or was killed while executing a task by an unexpected system error", Cause.CRASH, RAYLET),
    Rule("ray_node_died", SLURM, ("rror",), r"(?:ActorDied|RayActor)Error: The actor died because its node has died",
         Cause.NODE_LOST, EXCEPTIONS),
    Rule("ray_worker_died", FATAL, ("rror",),
         r"(?:ActorDied|RayActor|WorkerCrashed)Error: The (?:actor|worker) died unexpectedly", Cause.CRASH, EXCEPTIONS),
    Rule("ray_train_failed", STOPPING, ("rror",),
         r"TrainingFailedError: The Ray Train run failed|WorkerGroupError: Training failed due to worker errors", origin=TRAIN),
    Rule("ray_rank_snippet", CHILD_ERROR, ("rror",), r"^\[Rank (?P<rank>\d+)(?:, \d+)* Error Snippet\]:", origin=TRAIN),
)
# fmt: on
# read on the later lines of an exception's message (records.py), not prefiltered: GenNodeDiedCause's
# `The actor is dead because its node has died. Node Id: N` (Ray 2.x before 2.11), `The actor died ...` since
MESSAGE_ROWS: tuple[Rule, ...] = (
    Rule(
        "ray_actor_node_died", SLURM, (), r"The actor (?:is dead|died) because its node has died", Cause.NODE_LOST, GCS
    ),
)
# the same later lines below an exception line that stands without its traceback (a logger's `ERROR ... --
# The actor died unexpectedly`, or a paste that cut the header): a worker's row -> the row of its message
WHY_BELOW = {"ray_worker_died": MESSAGE_ROWS[0]}
FRAMES = ""  # the driver is the user's script
REPORT_EXCEPTIONS = ("TrainingFailedError", "WorkerGroupError")
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = TRAIN

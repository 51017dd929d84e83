"""Ray Train: the driver runs the training function in actors (RayTrainWorker) and raises in the
driver when one of them fails.

Where an actor's process or node died: `ActorDiedError: The actor died unexpectedly before
finishing this task.` (RayActorError before Ray 2.11), `WorkerCrashedError: The worker died
unexpectedly while executing this task.` (python/ray/exceptions.py, 2.5 ... 2.52 read). The
message runs on: the actor (`\tclass_name: ...`, `\tpid: ...`) and the core worker's reason, as
`The actor died because its node has died. Node Id: ...` where its node went (src/ray/gcs): that
later line, read with the traceback, makes it the node's failure.
Where a worker raised, the driver re-raises it as `RayTaskError(Inner)` (read as the Inner class by
records.py). Ray Train then ends the run: `TrainingFailedError: The Ray Train run failed. Please
inspect the previous error messages for a cause.` (Train v1), or Train v2's `WorkerGroupError:
Training failed due to worker errors:` followed by `[Rank R Error Snippet]:` over each failed
worker's traceback (ray/train/v2/_internal/execution/worker_group/poll.py): the header names the rank.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import CHILD_ERROR, FATAL, SLURM, STOPPING, Cause, Rule

EXCEPTIONS = ("Ray", "python/ray/exceptions.py (ActorDiedError, WorkerCrashedError, RayTaskError)")
GCS = ("Ray", "src/ray/gcs/gcs_server/gcs_actor_manager.cc (the reason an actor died with its node)")
TRAIN = (
    "Ray",
    "python/ray/train/base_trainer.py (v1); python/ray/train/v2/api/exceptions.py, worker_group/poll.py (v2)",
)

# fmt: off
# before the plain exception line, which would read these as the driver's own exception
WORKER_ROWS: tuple[Rule, ...] = (
    Rule("ray_node_died", SLURM, ("rror",), r"(?:ActorDied|RayActor)Error: The actor died because its node has died",
         Cause.NODE_FAIL, EXCEPTIONS),
    Rule("ray_worker_died", FATAL, ("rror",),
         r"(?:ActorDied|RayActor|WorkerCrashed)Error: The (?:actor|worker) died unexpectedly", Cause.CRASH, EXCEPTIONS),
    Rule("ray_train_failed", STOPPING, ("rror",),
         r"TrainingFailedError: The Ray Train run failed|WorkerGroupError: Training failed due to worker errors", origin=TRAIN),
    Rule("ray_rank_snippet", CHILD_ERROR, ("rror",), r"^\[Rank (?P<rank>\d+)(?:, \d+)* Error Snippet\]:", origin=TRAIN),
)
# fmt: on
# read on the later lines of an exception's message (records.py), not prefiltered
MESSAGE_ROWS: tuple[Rule, ...] = (
    Rule("ray_actor_node_died", SLURM, (), r"^The actor died because its node has died", Cause.NODE_FAIL, GCS),
)
FRAMES = ""  # the driver is the user's script
REPORT_EXCEPTIONS = ("TrainingFailedError", "WorkerGroupError")
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = TRAIN

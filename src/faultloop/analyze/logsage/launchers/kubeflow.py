"""Kubeflow's training operator (PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob): the job's
condition where a replica (a pod) failed, as its controller words it in the job's status and event
(pkg/controller.v1/<framework>/*_controller.go): `PyTorchJob NS/NAME is failed because N Worker
replica(s) failed.`, `... has failed because ...` (TFJob), `... is restarting because N Worker
replica(s) failed.` where the restart policy restarts it. It names a replica type, never a rank or
a cause: the operator ending or restarting the job, after the failed pod's own lines.
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import STOPPING, Rule

CONTROLLER = ("Kubeflow training-operator", "pkg/controller.v1/pytorch/pytorchjob_controller.go (and each framework's)")

# fmt: off
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("operator_replica_failed", STOPPING, ("ailed",),
         r"\b(?:PyTorch|TF|MPI|XGBoost|Paddle|JAX|MX|Deepspeed)Job \S+ (?:is|has) (?:failed|restarting) because \d+ \w+ "
         r"replica\(s\) failed", origin=CONTROLLER),
)
# fmt: on
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = CONTROLLER

"""Kubernetes: a pod's and a Job's status as `kubectl describe` (`Reason:   OOMKilled`) and `kubectl
get -o yaml` (`reason: OOMKilled`) print it, pasted beside the worker's own lines.

A container's end is its runtime's word (containerd's CRI, internal/cri/server/events.go:
`OOMKilled` where its cgroup's memory limit was hit, `Error` for another non-zero exit, beside its
`exitCode`); `CrashLoopBackOff` is the kubelet's reason for a container it waits to restart
because it keeps ending (pkg/kubelet/container/sync_result.go); `Evicted` the kubelet's for a pod
it ended for the node's resource pressure (pkg/kubelet/eviction/eviction_manager.go: `The node was
low on resource: memory.`); `BackoffLimitExceeded` (`Job has reached the specified backoff
limit`) and `DeadlineExceeded` (`Job was active longer than specified deadline`) the Job
controller's conditions (pkg/controller/job/job_controller.go). None names a rank: the pod's own
lines say which worker it ran. The reasons are read behind `reason:` (anchor `eason:`) or by their
own words where they carry an anchor (`OOMKilled`, `CrashLoopBackOff` in `kubectl get pods`).
"""

from __future__ import annotations

from faultloop.analyze.logsage.vocab import DEATH, EXITED, OOM_KIND, SLURM, STOPPING, Cause, Rule

RUNTIME = ("Kubernetes", "containerd internal/cri/server/events.go (the container's reason), pkg/kubelet")
KUBELET = ("Kubernetes", "pkg/kubelet/eviction/eviction_manager.go, pkg/kubelet/container/sync_result.go")
JOBS = ("Kubernetes", "pkg/controller/job/job_controller.go (the Job's Failed condition)")

_REASON = r"\b[Rr]eason:\s*"  # describe's `Reason:   X`, yaml's `reason: X`

# fmt: off
# with the scheduler's rows: the orchestrator ended the pod or the Job, which explains what follows
NODE_ROWS: tuple[Rule, ...] = (
    Rule("k8s_evicted", SLURM, ("eason:",), _REASON + r"Evicted\b", Cause.PREEMPTION, KUBELET),
    Rule("k8s_deadline", SLURM, ("eason:",), _REASON + r"DeadlineExceeded\b", Cause.TIME_LIMIT, JOBS),
)
REPORT_ROWS: tuple[Rule, ...] = (
    Rule("k8s_oom_killed", OOM_KIND, ("Kill",), r"\bOOMKilled\b", Cause.HOST_OOM, RUNTIME),
    # the container keeps ending and the kubelet waits before it restarts it again: it died, and will again
    Rule("k8s_crash_loop", DEATH, ("rash",), r"\bCrashLoopBackOff\b", Cause.CRASH, KUBELET),
    # a container that exited non-zero (its exitCode on another line)
    Rule("k8s_error", EXITED, ("eason:",), _REASON + r"Error\b", origin=RUNTIME),
    # the Job controller gave up after its pods failed: their own lines say why
    Rule("k8s_backoff_limit", STOPPING, ("eason:",), _REASON + r"BackoffLimitExceeded\b", origin=JOBS),
)
# fmt: on
FRAMES = ""
REPORT_EXCEPTIONS: tuple[str, ...] = ()
# the program this adapter reads (ablation.programs_of): its frames and exception classes are that program's
ORIGIN = RUNTIME

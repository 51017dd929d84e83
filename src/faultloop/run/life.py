"""A job's life on the run side: what attempt k of a cell does, decided from the attempts before it.

Attempt k+1 runs while attempt k failed (docs/architecture.md, "A job's life"). It resumes from the
newest checkpoint every rank of the earlier attempts completed, on the same nodes except those
drained, and injects what the fault's row says a restart meets (`faults.Recurrence`): a fault that
passes is not injected again; a same-step fault fires again at the step it fired at; a node-bound
fault fires again on whichever rank runs on its node, and not at all once that node is drained.
The drain follows the truth: a node-bound fault's node is left out of every later attempt, on one
machine by moving its ranks to a spare node index, on SLURM by excluding the host (`sbatch_placement`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from faultloop.contracts import NOT_NEEDED, Manifest, ManifestError
from faultloop.core import layout
from faultloop.core.cell import Cell
from faultloop.faults import FAULTS, Recurrence
from faultloop.frameworks import DEFAULT_FRAMEWORK
from faultloop.run.frameworks import checkpoints
from faultloop.run.spec import Injection, Resume

# Attempt k's end states after which the job is restarted (the job itself failed)
RESTARTED_AFTER = ("FAILED", "TIMEOUT")


@dataclass(frozen=True)
class AttemptPlan:
    """What one attempt of a cell does."""

    cell: Cell
    attempt: int
    not_needed: str | None = None  # why this attempt runs no job, else None
    drained: tuple[str, ...] = ()  # node names left out (every earlier attempt's drain, and the new one)
    previous_nodes: tuple[str, ...] = ()  # attempt k-1's node names, index by index
    resume: Resume | None = None
    reinjection: Injection | None = None


def earlier_runs(cell_dir: Path, attempt: int) -> list[Manifest]:
    """The job.json of attempts 1..attempt-1, in order (ManifestError when one cannot be used)."""
    return [Manifest.read(run / layout.MANIFEST) for run in layout.run_dirs(cell_dir, attempt - 1)]


def drained_after(previous: Manifest) -> list[str]:
    """The nodes the attempt after `previous` leaves out: those already drained, and the node a
    node-bound fault fired on."""
    drained = list(previous.drained_nodes)
    fault = FAULTS.get(previous.fault_type)
    if (
        fault is not None
        and fault.on_restart == Recurrence.SAME_NODE
        and previous.fault_fired
        and previous.fault_node
        and previous.fault_node not in drained
    ):
        drained.append(previous.fault_node)
    return drained


def why_not_needed(previous: Manifest) -> str | None:
    """Why the attempt after `previous` runs no job; None when it runs (the job failed)."""
    if previous.state in RESTARTED_AFTER:
        return None
    if previous.state == "COMPLETED":
        return f"attempt {previous.attempt} completed: the job's life ended there"
    if previous.state == NOT_NEEDED:
        return f"attempt {previous.attempt} was not needed: the job's life ended before it"
    if previous.state == "INFRA_FAILED":
        return f"attempt {previous.attempt} was an infrastructure failure: the job's life ends there"
    return f"attempt {previous.attempt} ended {previous.state}: the job's life ends there"


def reinjection(cell: Cell, earlier: list[Manifest], drained: list[str], fault_delay: float) -> Injection | None:
    """What a restarted attempt injects, as the fault's row says a restart meets it."""
    fault = FAULTS[cell.fault_type]
    fired = [m for m in earlier if m.fault_fired]
    if fault.on_restart == Recurrence.PASSES:
        return None
    if fault.on_restart == Recurrence.SAME_STEP:
        # the step it fired at, at once: the resumed job reaches the same data with the same weights
        last = next((m for m in reversed(fired) if m.fault_fired_iter is not None), None)
        if last is None or last.fault_fired_iter is None:
            return Injection(cell.rank, cell.iter, fault_delay)
        return Injection(last.fault_rank, last.fault_fired_iter, 0.0)
    node = next((m.fault_node for m in fired if m.fault_node), None)
    if node is None:
        return Injection(cell.rank, cell.iter, fault_delay)
    if node in drained:
        return None
    return Injection(cell.rank, cell.iter, fault_delay, node=node)


def newest_checkpoint(run_dirs: list[Path], world_size: int, workload: str = DEFAULT_FRAMEWORK) -> Resume | None:
    """The newest iteration every rank checkpointed, across the job's earlier runs (the job's
    checkpoint folder spans its attempts), in the workload's own format; None when there is none."""
    return checkpoints.newest(workload, run_dirs, world_size)


def plan_attempt(
    cell_dir: Path, attempt: int, *, gpus_per_node: int, fault_delay: float, workload: str = DEFAULT_FRAMEWORK
) -> AttemptPlan:
    """Attempt `attempt` of the cell in `cell_dir`, from the job.json of the attempts before it;
    `workload` is the session's, which the cell's own (its name's) overrides."""
    cell = Cell.from_name(cell_dir.name)
    if attempt == 1:
        return AttemptPlan(cell, 1)
    earlier = earlier_runs(cell_dir, attempt)
    previous = earlier[-1]
    drained = drained_after(previous)
    skip = why_not_needed(previous)
    if skip is not None:
        return AttemptPlan(cell, attempt, skip, tuple(drained), tuple(previous.node_names))
    resume = newest_checkpoint(
        layout.run_dirs(cell_dir, attempt - 1), cell.nodes * gpus_per_node, cell.workload or workload
    )
    return AttemptPlan(
        cell,
        attempt,
        None,
        tuple(drained),
        tuple(previous.node_names),
        resume,
        reinjection(cell, earlier, drained, fault_delay),
    )


def local_nodes(nodes: int, previous: tuple[str, ...], drained: tuple[str, ...]) -> tuple[str, ...]:
    """Node names of an attempt on one machine: the previous attempt's, index by index, with a
    drained node's index moved to the next spare node (node<N>, node<N+1>, ...)."""
    names = list(previous) if len(previous) == nodes else [f"node{i}" for i in range(nodes)]
    taken = set(names) | set(drained)
    spare = nodes
    for index, name in enumerate(names):
        if name in drained:
            while f"node{spare}" in taken:
                spare += 1
            names[index] = f"node{spare}"
            taken.add(names[index])
    return tuple(names)


def not_needed_manifest(plan: AttemptPlan, *, workload: str, gpus_per_node: int) -> Manifest:
    """job.json of an attempt that runs no job (its run_valid false, the reason given)."""
    cell = plan.cell
    return Manifest(
        job_id="",
        workload=workload,
        fault_type=cell.fault_type,
        fault_rank=cell.rank,
        fault_iter=cell.iter,
        nodes=cell.nodes,
        gpus_per_node=gpus_per_node,
        world_size=cell.nodes * gpus_per_node,
        state=NOT_NEEDED,
        main_log=None,
        launch_out=None,
        fault_fired=False,
        run_valid=False,
        invalid_reason=plan.not_needed,
        attempt=plan.attempt,
        attempts=cell.attempts,
        drained_nodes=list(plan.drained),
    )


def sbatch_placement(previous_manifest: str | Path | None) -> str:
    """sbatch flags that place attempt k+1 of a job's life as its truth says: on attempt k's nodes
    (`--nodelist`), without the drained ones (`--exclude`). Empty for attempt 1, and while attempt
    k's job.json is not there yet: Snakemake evaluates this while planning (which only reads) and
    again once the job's input is present, before it submits it."""
    if not previous_manifest:
        return ""
    path = Path(previous_manifest)
    if not path.is_file():
        return ""
    try:
        previous = Manifest.read(path)
    except ManifestError:
        return ""
    if why_not_needed(previous) is not None:
        return ""
    drained = drained_after(previous)
    keep = [name for name in previous.node_names if name not in drained]
    flags = [f"--nodelist={','.join(keep)}"] if keep else []
    flags += [f"--exclude={','.join(drained)}"] if drained else []
    return shlex.join(flags)

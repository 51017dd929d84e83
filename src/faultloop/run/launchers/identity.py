"""Which rank this process is, whichever launcher started it.

Every launcher tells its ranks who they are in its own variables: torchrun (and accelerate, the
deepspeed launcher, Ray Train, which set torch's) RANK/WORLD_SIZE/LOCAL_RANK/GROUP_RANK, Open MPI
OMPI_COMM_WORLD_*, MPICH's hydra (and Intel MPI) PMI_RANK/PMI_SIZE/MPI_LOCALRANKID, MVAPICH
MV2_COMM_WORLD_*, srun SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID. `rank_identity`
reads the first family present (in `SOURCES`' order: a launcher started inside a SLURM allocation
inherits the allocation's SLURM_* variables, so srun's come last) and exports torch's env://
variables where the launcher did not, so `dist.init_process_group()` works under every launcher.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

# torch's default rendezvous port (torchrun's --master-port)
DEFAULT_MASTER_PORT = 29500
# Where this machine plays several nodes under one MPI launcher (faultloop's local stand-in: one
# app context per simulated node), the context names its node's index and its ranks per node:
# the MPI's own local rank counts every rank of the one real host.
SIMULATED_NODE_ENV = "FAULTLOOP_NODE_RANK"
SIMULATED_LOCAL_SIZE_ENV = "FAULTLOOP_LOCAL_SIZE"


@dataclass(frozen=True)
class IdentitySource:
    """One launcher family's variables: its rank and size (required), local rank, node index and
    ranks on this node (optional: "" where the family has none)."""

    name: str
    rank: str
    size: str
    local_rank: str = ""
    node_rank: str = ""
    local_size: str = ""


SOURCES: tuple[IdentitySource, ...] = (
    # name, rank, size, local rank, node rank, ranks on the node
    IdentitySource("torch", "RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE"),
    IdentitySource(
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "",  # OMPI_COMM_WORLD_NODE_RANK is a rank within the node, not the node's index
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    IdentitySource(
        "mvapich",
        "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "",
        "MV2_COMM_WORLD_LOCAL_SIZE",
    ),
    IdentitySource("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "", "MPI_LOCALNRANKS"),
    IdentitySource("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE"),
)


@dataclass(frozen=True)
class RankIdentity:
    """One rank as its launcher placed it, and where torch's rendezvous is."""

    source: str  # the IdentitySource that gave it
    rank: int
    world_size: int
    local_rank: int
    node_rank: int  # the node's index in the job
    local_world_size: int  # ranks on this node
    master_addr: str
    master_port: int


class IdentityError(ValueError):
    """No launcher's variables, or unreadable ones: names the variable."""


def _int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name, "").strip() if name else ""
    if not value:
        return None
    # SLURM_NTASKS_PER_NODE may read "2(x3)" for a heterogeneous count: the first node's
    head = value.split("(")[0].split(",")[0]
    try:
        return int(head)
    except ValueError:
        raise IdentityError(f"{name}={value!r} is not a number") from None


def read_identity(environ: Mapping[str, str]) -> RankIdentity:
    """The rank's identity from the first launcher family present; reads, changes nothing."""
    for source in SOURCES:
        rank, size = _int(environ, source.rank), _int(environ, source.size)
        if rank is None or size is None:
            continue
        if not 0 <= rank < size:
            raise IdentityError(f"{source.rank}={rank} is outside {source.size}={size}")
        local_size = _int(environ, SIMULATED_LOCAL_SIZE_ENV) or _int(environ, source.local_size)
        node_rank = _int(environ, SIMULATED_NODE_ENV)
        if node_rank is not None and local_size:
            local_rank = rank - node_rank * local_size
        else:
            given = _int(environ, source.local_rank)
            local_rank = rank if given is None else given
            node_rank = _int(environ, source.node_rank)
            if node_rank is None:  # ranks fill nodes in order (--map-by ppr:G:node, -ppn G)
                node_rank = rank // local_size if local_size else 0
        return RankIdentity(
            source=source.name,
            rank=rank,
            world_size=size,
            local_rank=local_rank,
            node_rank=node_rank,
            local_world_size=local_size or size,
            master_addr=environ.get("MASTER_ADDR") or "127.0.0.1",
            master_port=_int(environ, "MASTER_PORT") or DEFAULT_MASTER_PORT,
        )
    raise IdentityError(
        "no launcher's rank variables in the environment: expected one of "
        + ", ".join(f"{s.rank}/{s.size}" for s in SOURCES)
    )


def torch_env(identity: RankIdentity) -> dict[str, str]:
    """torch.distributed's env:// variables for this rank."""
    return {
        "RANK": str(identity.rank),
        "WORLD_SIZE": str(identity.world_size),
        "LOCAL_RANK": str(identity.local_rank),
        "LOCAL_WORLD_SIZE": str(identity.local_world_size),
        "GROUP_RANK": str(identity.node_rank),
        "MASTER_ADDR": identity.master_addr,
        "MASTER_PORT": str(identity.master_port),
    }


def rank_identity(environ: MutableMapping[str, str] = os.environ) -> RankIdentity:
    """This rank's identity; sets torch's env:// variables the launcher did not (a launcher's own
    are kept: torchrun's stay torchrun's)."""
    identity = read_identity(environ)
    for name, value in torch_env(identity).items():
        environ.setdefault(name, value)
    if SIMULATED_NODE_ENV in environ:
        # the MPI's own local variables count the one real host's ranks; a program that checks
        # them against LOCAL_RANK (DeepSpeed's engine asserts OMPI_COMM_WORLD_LOCAL_RANK ==
        # LOCAL_RANK) must see the simulated node's, as it would on a real one
        source = next(s for s in SOURCES if s.name == identity.source)
        for variable, count in (
            (source.local_rank, identity.local_rank),
            (source.local_size, identity.local_world_size),
        ):
            if variable:
                environ[variable] = str(count)
    return identity

"""rank_identity: the rank, world and node every launcher's variables give, and torch's env://."""

from __future__ import annotations

import pytest

from faultloop.run.launchers.identity import IdentityError, rank_identity, read_identity


@pytest.mark.parametrize(
    ("env", "source", "rank", "world", "local", "node"),
    [
        ({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "torch", 5, 8, 1, 2),
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
          "OMPI_COMM_WORLD_NODE_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, "openmpi", 3, 4, 1, 1),
        ({"PMI_RANK": "6", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "4"}, "pmi", 6, 8, 2, 1),
        ({"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2"}, "mvapich", 1, 2, 1, 0),
        ({"SLURM_PROCID": "7", "SLURM_NTASKS": "8", "SLURM_LOCALID": "3", "SLURM_NODEID": "1"}, "slurm", 7, 8, 3, 1),
    ],
)  # fmt: skip
def test_each_launcher_family_gives_the_rank(env, source, rank, world, local, node):
    identity = read_identity(env)
    assert (identity.source, identity.rank, identity.world_size, identity.local_rank, identity.node_rank) == (
        source, rank, world, local, node,
    )  # fmt: skip


def test_a_launcher_inside_a_slurm_allocation_wins_over_the_allocations_variables():
    # mpirun in an sbatch script: the batch step's SLURM_PROCID=0 is every rank's, OMPI's is its own
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}
    assert read_identity(env).rank == 2 and read_identity(env).source == "openmpi"
    torch_env = dict(env, RANK="3", WORLD_SIZE="4")  # torchrun started by srun
    assert read_identity(torch_env).source == "torch" and read_identity(torch_env).rank == 3


def test_torch_env_is_exported_where_the_launcher_gave_none_and_kept_where_it_did():
    env = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MASTER_PORT": "1234"}
    identity = rank_identity(env)
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "2" and env["LOCAL_RANK"] == "1"
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "1234") and identity.master_port == 1234
    torchrun = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "n1", "MASTER_PORT": "29400"}
    before = dict(torchrun)
    rank_identity(torchrun)
    assert {k: torchrun[k] for k in before} == before


def test_a_simulated_node_gives_the_node_local_rank():
    # one host plays two nodes of two ranks each: the MPI's local rank counts the host's four
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3",
           "FAULTLOOP_NODE_RANK": "1", "FAULTLOOP_LOCAL_SIZE": "2"}  # fmt: skip
    identity = read_identity(env)
    assert (identity.node_rank, identity.local_rank, identity.local_world_size) == (1, 1, 2)
    rank_identity(env)  # and the MPI's own local variables say so, as on a real node (DeepSpeed checks them)
    assert (env["OMPI_COMM_WORLD_LOCAL_RANK"], env["OMPI_COMM_WORLD_LOCAL_SIZE"], env["LOCAL_RANK"]) == ("1", "2", "1")


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, "RANK/WORLD_SIZE"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x'"),
        ({"PMI_RANK": "4", "PMI_SIZE": "4"}, "PMI_RANK=4 is outside PMI_SIZE=4"),
    ],
)
def test_unreadable_identity_is_one_clear_error(env, names):
    with pytest.raises(IdentityError, match=names):
        read_identity(env)

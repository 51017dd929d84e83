#!/usr/bin/env bash
# llama4_scout: Llama4-Scout (reduced to 12 layers) with Megatron-LM in a pyxis/enroot container,
# at least 2 nodes (expert parallel 8 over 4 GPUs per node). An example of a site workload: it
# needs GPUs, pyxis and a Megatron-LM checkout, so it cannot run on the test machine.
#
# faultloop runs it INSIDE the run_job allocation (not through sbatch) with the contract exported:
# FAULT_TYPE FAULT_RANK FAULT_AT_ITER FAULT_DELAY GPUS_PER_NODE EXPERIMENT_DIR BASE_EXPERIMENTS_DIR,
# plus CONTAINER_IMAGE and MEGATRON_REPO_HOST_PATH exported in the shell that starts Snakemake
# (sbatch --export=ALL carries them here). It must leave
#   logs/slurm/${SLURM_JOB_ID}.<n>.1.main_workload.log   every rank's output, `srun --label`ed,
#                                                        with Megatron's "FAULT INJECTION" marker
#   checkpoints/_dump_<rank>                             NCCL flight-recorder dumps
#   tensorboard/
# under EXPERIMENT_DIR. See docs/slurm.md.
set -euo pipefail
: "${FAULT_TYPE:?}" "${FAULT_RANK:?}" "${FAULT_AT_ITER:?}" "${EXPERIMENT_DIR:?}" "${SLURM_JOB_ID:?}"
: "${BASE_EXPERIMENTS_DIR:?}" "${CONTAINER_IMAGE:?export CONTAINER_IMAGE before snakemake}"
: "${MEGATRON_REPO_HOST_PATH:?export MEGATRON_REPO_HOST_PATH before snakemake}"
export FAULT_DELAY=${FAULT_DELAY:-15} GPUS_PER_NODE=${GPUS_PER_NODE:-4}

# The executor plugin's job step drops SLURM_NNODES and friends: ask the controller.
NNODES=${SLURM_NNODES:-$(squeue -h -j "$SLURM_JOB_ID" -o %D)}
LOG=$EXPERIMENT_DIR/logs/slurm/$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}.1.main_workload.log
mkdir -p "$EXPERIMENT_DIR"/{logs/slurm,checkpoints,tensorboard} "$BASE_EXPERIMENTS_DIR/datacache"

# Flight recorder on, dumped on a collective timeout as /checkpoints/_dump_<rank>.
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 \
    TORCH_FR_DUMP_TEMP_FILE=/checkpoints/_dump_ TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20 \
    NCCL_DEBUG=WARN PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1

MOUNTS=$MEGATRON_REPO_HOST_PATH:/megatron-lm,$EXPERIMENT_DIR/checkpoints:/checkpoints
MOUNTS+=,$EXPERIMENT_DIR/tensorboard:/tensorboard,$BASE_EXPERIMENTS_DIR/datacache:/datacache

# One task per GPU; the variables above reach the container through srun's default --export=ALL.
srun --label --output="$LOG" --error="$LOG" \
    --nodes="$NNODES" --ntasks-per-node="$GPUS_PER_NODE" --ntasks=$((NNODES * GPUS_PER_NODE)) \
    --kill-on-bad-exit=0 --mpi=none \
    --container-image="$CONTAINER_IMAGE" --container-mounts="$MOUNTS" --container-workdir=/megatron-lm \
    bash -c 'exec python3 pretrain_gpt.py \
        --local-rank "$SLURM_LOCALID" \
        --fault-injector-ranks "$FAULT_RANK" --fault-injector-fault-types "$FAULT_TYPE" \
        --fault-injector-fault-delay "$FAULT_DELAY" \
        --fault-injector-delay-start-iteration "$FAULT_AT_ITER" \
        --flight-recorder-dump-path /checkpoints --tensorboard-dir /tensorboard \
        --mock-data --data-cache-path /datacache --tokenizer-type NullTokenizer \
        --vocab-size 238600 --seq-length 8192 --max-position-embeddings 8192 \
        --num-layers 12 --hidden-size 5120 --ffn-hidden-size 16384 --num-attention-heads 40 \
        --group-query-attention --num-query-groups 8 --kv-channels 128 \
        --num-experts 16 --moe-ffn-hidden-size 8192 --moe-router-topk 1 \
        --moe-shared-expert-intermediate-size 8192 --moe-token-dispatcher-type alltoall \
        --moe-grouped-gemm --expert-model-parallel-size 8 \
        --swiglu --normalization RMSNorm --position-embedding-type rope --rotary-base 500000 \
        --disable-bias-linear --untie-embeddings-and-output-weights --use-mcore-models \
        --transformer-impl transformer_engine --bf16 \
        --use-distributed-optimizer --micro-batch-size 1 --global-batch-size 64 \
        --train-samples 10240000 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine \
        --log-interval 1 --eval-iters 0 --distributed-timeout-minutes 10'

#!/usr/bin/env bash
# A site workload that follows docs/slurm.md's contract with plain srun and no GPUs, so the test
# cluster can check the contract end to end: exported variables in, one `srun --label`ed main log
# at logs/slurm/${SLURM_JOB_ID}.0.1.main_workload.log, the FAULT INJECTION marker, a crash of the
# injected rank that its peers notice, a non-zero exit.
set -euo pipefail
: "${FAULT_TYPE:?}" "${FAULT_RANK:?}" "${FAULT_AT_ITER:?}" "${FAULT_DELAY:?}" "${GPUS_PER_NODE:?}"
: "${EXPERIMENT_DIR:?}" "${BASE_EXPERIMENTS_DIR:?}" "${SLURM_JOB_ID:?}"
NNODES=${SLURM_NNODES:-$(squeue -h -j "$SLURM_JOB_ID" -o %D)}
LOG=$EXPERIMENT_DIR/logs/slurm/$SLURM_JOB_ID.0.1.main_workload.log
mkdir -p "$EXPERIMENT_DIR"/{logs/slurm,checkpoints,tensorboard}
srun --label --output="$LOG" --error="$LOG" --kill-on-bad-exit=0 \
    --nodes="$NNODES" --ntasks-per-node="$GPUS_PER_NODE" --ntasks=$((NNODES * GPUS_PER_NODE)) \
    bash -c '
        echo "rank $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME"
        for i in $(seq 1 "$FAULT_AT_ITER"); do echo " iteration $i/ 10 | lm loss: 1.0"; sleep 0.1; done
        if [[ $SLURM_PROCID == "$FAULT_RANK" ]]; then
            echo "[$(date "+%F %T.%6N")] FAULT INJECTION: Rank $FAULT_RANK will inject fault $FAULT_TYPE at $(date +%s)"
            sleep "$FAULT_DELAY"; kill -9 $$
        fi
        sleep "$FAULT_DELAY"; sleep 1
        echo "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer"
        exit 1'

#!/usr/bin/env bash
# Warm spares across hosts: two hosts, 2 ranks and 1 warm spare each
# (--in-process-recovery --warm-spares 1), the demo trainer saving every
# step to the memory tier (a per-rank 1 MiB shard it checks after every
# restore). A rank on h2 is SIGKILLed: h2's parked spare
# (the process parked before the kill) takes its rank, the three survivors on
# both hosts keep their processes, nothing is cold-started, every rank of
# the new generation restores one step from memory, and the final weights
# equal a fault-free run's (the same trainer, 4 ranks on one host).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-spr}
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/spares_cluster.sh"
netns_skip_unless_able
netns_setup 2
TRAINER=$(cluster_demo_trainer)
STEPS=200
# No disk step in reach (like memckpt_spare.sh): the restore comes from memory,
# which is what this scenario checks.
TRAIN=(--steps "$STEPS" --step-ms 20 --ckpt-every 100000 --memory-every 1 --state-mib 1)
spares_job spares-job 60
CLUSTER_JOB_FLAGS+=(--no-python)

mkdir -p "$CLUSTER_DIR/ckpt"
for i in 1 2; do
    cluster_start_memory_node "$i" "$TRAINER" --ckpt-dir "$CLUSTER_DIR/ckpt" \
        --result "$CLUSTER_DIR/result.txt" "${TRAIN[@]}"
done
spares_wait_running 60 30
spares_kill_and_check_recovery 120
faulty=$(cat "$CLUSTER_DIR/result.txt")

# The fault-free run: the same 4 ranks (the trainer's result depends on the world size only).
mkdir -p "$CLUSTER_DIR/clean"
netns_exec 1 "$ELASTICRUN" --standalone --nproc-per-node 4 --no-python "$TRAINER" \
    --ckpt-dir "$CLUSTER_DIR/clean" --result "$CLUSTER_DIR/clean.txt" --steps "$STEPS" --step-ms 0 \
    >"$CLUSTER_DIR/clean.log" 2>&1 || { cat "$CLUSTER_DIR/clean.log" >&2; cluster_fail "the fault-free run failed"; }
clean=$(cat "$CLUSTER_DIR/clean.txt")
[ "$faulty" = "$clean" ] || cluster_fail "weights differ: '$faulty' after the kill, '$clean' without"
netns_log "restored step $SPARES_RESTORED_STEP from local memory; promoted pid $SPARES_PARKED; $faulty"
echo "warm spares across hosts: ok"

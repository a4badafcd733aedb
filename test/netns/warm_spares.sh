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
TRAINER=${ELASTIC_EXAMPLE_DIR:-$here/../../build/release/examples}/demo_trainer
[ -x "$ELASTICRUN" ] && [ -x "$TRAINER" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
STEPS=200
# No disk step in reach (like memckpt_spare.sh): the plan may restore a memory
# step older than the trainer's own newest disk step (the agent does not know
# that directory), and saving that disk step again would fail (EEXIST).
TRAIN=(--steps "$STEPS" --step-ms 20 --ckpt-every 100000 --memory-every 1 --state-mib 1)

start_node() { # start_node I
    local host=$1 conf="last_call_timeout=1,join_timeout=60"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 2:2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" \
        --rdzv-id spares-job --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 3 \
        --in-process-recovery --warm-spares 1 --memory-ckpt --memory-ckpt-limit 256M \
        --event-log "$(cluster_events "$host")" --no-python \
        "$TRAINER" --ckpt-dir "$CLUSTER_DIR/ckpt" --result "$CLUSTER_DIR/result.txt" "${TRAIN[@]}"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

mkdir -p "$CLUSTER_DIR/ckpt"
for i in 1 2; do start_node "$i"; done
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 60 || cluster_fail "h$i never joined"
    cluster_wait "$i" '"event":"spare_parked"' 60 || cluster_fail "h$i's spare never parked"
    cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 30 || cluster_fail "h$i saved nothing"
done
spares_ranks 4
victim=$(spares_victim 4)
parked=$(spares_event_pid 2 '"event":"spare_parked"')
cluster_mark
netns_log "killing rank $victim (pid ${SPARES_PID[$victim]}) on h2; h2's parked spare is pid $parked"
kill -KILL "${SPARES_PID[$victim]}"
spares_check_recovery 4 "$victim" "$parked"
for i in 1 2; do spares_wait_agent "$i" 120; done
spares_none_cold_started
faulty=$(cat "$CLUSTER_DIR/result.txt")

# The fault-free run: the same 4 ranks (the trainer's result depends on the world size only).
mkdir -p "$CLUSTER_DIR/clean"
netns_exec 1 "$ELASTICRUN" --standalone --nproc-per-node 4 --no-python "$TRAINER" \
    --ckpt-dir "$CLUSTER_DIR/clean" --result "$CLUSTER_DIR/clean.txt" --steps "$STEPS" --step-ms 0 \
    >"$CLUSTER_DIR/clean.log" 2>&1 || { cat "$CLUSTER_DIR/clean.log" >&2; cluster_fail "the fault-free run failed"; }
clean=$(cat "$CLUSTER_DIR/clean.txt")
[ "$faulty" = "$clean" ] || cluster_fail "weights differ: '$faulty' after the kill, '$clean' without"
netns_log "restored step $SPARES_RESTORED_STEP from local memory; promoted pid $parked; $faulty"
echo "warm spares across hosts: ok"

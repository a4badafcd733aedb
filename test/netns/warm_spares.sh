#!/usr/bin/env bash
# Warm spares across hosts: two hosts, 2 ranks and 1 warm spare each
# (--in-process-recovery --warm-spares 1), the demo trainer saving every
# step to the memory tier (a per-rank 1 MiB shard it checks after every
# restore) and every 10 to disk. A rank on h2 is SIGKILLed: h2's parked spare
# (the process parked before the kill) takes its rank, the three survivors on
# both hosts keep their processes, nothing is cold-started, every rank of
# the new generation restores one step from memory, and the final weights
# equal a fault-free run's (the same trainer, 4 ranks on one host).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-spr}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
netns_setup 2
TRAINER=${ELASTIC_EXAMPLE_DIR:-$here/../../build/release/examples}/demo_trainer
[ -x "$ELASTICRUN" ] && [ -x "$TRAINER" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
STEPS=200
TRAIN=(--steps "$STEPS" --step-ms 20 --ckpt-every 10 --memory-every 1 --state-mib 1)

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

# event_pid I REGEX...: the pid of host I's first event matching every REGEX ("" when none).
event_pid() {
    local host=$1 lines
    shift
    lines=$(cat "$(cluster_events "$host")" 2>/dev/null)
    for pattern in "$@"; do lines=$(grep -E -- "$pattern" <<<"$lines" || true); done
    sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$lines" | head -1
}

wait_agent() { # wait_agent I: its elasticrun exits 0 within 120 s
    local deadline=$(( SECONDS + $(cluster_scale 120) ))
    while kill -0 "${CLUSTER_AGENT_PIDS[$1]}" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$1's job did not finish"
        sleep 0.1
    done
    wait "${CLUSTER_AGENT_PIDS[$1]}" || cluster_fail "h$1's elasticrun failed"
}

mkdir -p "$CLUSTER_DIR/ckpt"
for i in 1 2; do start_node "$i"; done
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 60 || cluster_fail "h$i never joined"
    cluster_wait "$i" '"event":"spare_parked"' 60 || cluster_fail "h$i's spare never parked"
    cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 30 || cluster_fail "h$i saved nothing"
done
declare -A before
for rank in 0 1 2 3; do
    host=$(( rank / 2 + 1 ))
    before[$rank]=$(event_pid "$host" '"event":"worker_started"' '"generation":1,' "\"rank\":$rank,")
    [ -n "${before[$rank]}" ] || cluster_fail "no pid for rank $rank"
done
parked=$(event_pid 2 '"event":"spare_parked"')
victim=${before[3]}
cluster_mark
netns_log "killing rank 3 (pid $victim) on h2; h2's parked spare is pid $parked"
kill -KILL "$victim"

cluster_wait 2 '"event":"spare_promoted"' 60 || cluster_fail "h2's spare was not promoted"
promoted=$(event_pid 2 '"event":"spare_promoted"')
[ "$promoted" = "$parked" ] || cluster_fail "rank 3 went to pid $promoted, not the spare parked before the kill ($parked)"
grep -E '"event":"spare_promoted".*"rank":3,' "$(cluster_events 2)" >/dev/null || cluster_fail "the spare did not take rank 3"
for rank in 0 1 2; do # the survivors, on both hosts, keep their processes
    host=$(( rank / 2 + 1 ))
    cluster_wait "$host" "\"event\":\"worker_reconfigured\".*\"rank\":$rank,.*\"pid\":${before[$rank]}[,}]" 60 ||
        cluster_fail "rank $rank (pid ${before[$rank]}) was not reconfigured in place"
done
for i in 1 2; do
    cluster_wait_count "$i" '"event":"checkpoint_restored".*"source":"local"' 2 60 ||
        cluster_fail "h$i's ranks did not restore from local memory"
done
steps=$(for i in 1 2; do grep -E '"event":"checkpoint_restored"' "$(cluster_events "$i")"; done |
        sed -n 's/.*"step":\([0-9]*\).*/\1/p' | sort -u)
[ "$(wc -l <<<"$steps")" = 1 ] || cluster_fail "the ranks restored different steps: $steps"
for i in 1 2; do wait_agent "$i"; done
for i in 1 2; do # nothing was cold-started: the generation after the kill started no process
    if grep -E '"event":"worker_started"' "$(cluster_events "$i")" | grep -vq '"generation":1,'; then
        cluster_fail "h$i cold-started a worker after the kill"
    fi
done
faulty=$(cat "$CLUSTER_DIR/result.txt")

# The fault-free run: the same 4 ranks (the trainer's result depends on the world size only).
mkdir -p "$CLUSTER_DIR/clean"
netns_exec 1 "$ELASTICRUN" --standalone --nproc-per-node 4 --no-python "$TRAINER" \
    --ckpt-dir "$CLUSTER_DIR/clean" --result "$CLUSTER_DIR/clean.txt" --steps "$STEPS" --step-ms 0 \
    >"$CLUSTER_DIR/clean.log" 2>&1 || { cat "$CLUSTER_DIR/clean.log" >&2; cluster_fail "the fault-free run failed"; }
clean=$(cat "$CLUSTER_DIR/clean.txt")
[ "$faulty" = "$clean" ] || cluster_fail "weights differ: '$faulty' after the kill, '$clean' without"
netns_log "restored step $steps from local memory; promoted pid $promoted; $faulty"
echo "warm spares across hosts: ok"

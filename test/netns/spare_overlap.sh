#!/usr/bin/env bash
# Overlapping faults with a spare: 4 hosts, --nnodes=3:3, c10d (h1 hosts the
# store), the demo trainer with checkpoints. h2 is cut off for 3 s (the spare
# h4 takes its place), then, as h2 heals, h3 is frozen for 4 s (h2 takes its
# place). The job finishes with the fault-free weights; h3, left out as a
# spare when the job succeeded, says so and exits 0; its waiting line never
# names the nodes running the job as missing.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-chaos}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
TRAINER="${ELASTIC_EXAMPLE_DIR:-$(cd "$here/../.." && pwd)/build/release/examples}/demo_trainer"
[ -x "$TRAINER" ] || { echo "FAIL: no $TRAINER (run make)" >&2; exit 1; }
STEPS=${SPARE_OVERLAP_STEPS:-1500}
ckpt=$CLUSTER_DIR/ckpt
declare -A EXIT_CODE=()

# start_agent I CKPT RESULT: host I's agent running the demo trainer (one worker).
start_agent() {
    local host=$1 conf="last_call_timeout=1,join_timeout=120"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 3:3 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" \
        --rdzv-id overlap-job --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 5 \
        --event-log "$(cluster_events "$host")" --metrics-port "$CLUSTER_METRICS_PORT" --no-python \
        "$TRAINER" --ckpt-dir "$2" --steps "$STEPS" --result "$3"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# freeze_host I SECONDS: SIGSTOP every process on host I, SIGCONT after SECONDS.
freeze_host() {
    local pids
    pids=$(ip netns pids "$(netns_name "$1")" | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -STOP $pids && netns_log "froze h$1 ($pids) for $2 s"
    # shellcheck disable=SC2086
    (sleep "$2"; kill -CONT $pids 2>/dev/null; netns_log "thawed h$1") &
}

# wait_exit I TIMEOUT_S: waits for host I's agent to exit; its status in EXIT_CODE[I].
wait_exit() {
    local pid=${CLUSTER_AGENT_PIDS[$1]} deadline=$(( SECONDS + $2 ))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$1's agent still runs after $2 s"
        sleep 0.1
    done
    local rc=0
    wait "$pid" || rc=$?
    EXIT_CODE[$1]=$rc
}

netns_setup 4
mkdir -p "$ckpt"
for i in 1 2 3; do start_agent "$i" "$ckpt" "$CLUSTER_DIR/result.txt"; done
for i in 1 2 3; do
    cluster_wait "$i" '"event":"worker_started"' 60 || cluster_fail "h$i's worker did not start"
done
start_agent 4 "$ckpt" "$CLUSTER_DIR/result.txt"
cluster_wait 4 '"event":"agent_started"' 30 || cluster_fail "the spare h4 did not start"
netns_log "h1..h3 run the job, h4 waits as the spare"
# Let the job commit a checkpoint before the faults.
deadline=$(( SECONDS + 60 ))
until ls "$ckpt" 2>/dev/null | grep -q .; do
    [ "$SECONDS" -lt "$deadline" ] || cluster_fail "no checkpoint after 60 s"
    sleep 0.1
done

cluster_mark
netns_cut 2
cluster_wait 4 '"event":"worker_started"' 30 || cluster_fail "the spare h4 did not take h2's place"
netns_wait_until_ms() { while [ "$(netns_now_ms)" -lt "$1" ]; do sleep 0.05; done; }
netns_wait_until_ms $(( CLUSTER_T0 + 3000 ))
netns_heal 2
freeze_host 3 4
cluster_wait 2 '"event":"generation_formed"' 60 || cluster_fail "h2 did not rejoin after healing"
for i in 1 2 4; do wait_exit "$i" 180; done
wait_exit 3 60
for i in 1 2 4; do
    [ "${EXIT_CODE[$i]}" = 0 ] || cluster_fail "h$i exited ${EXIT_CODE[$i]} although the job succeeded"
done
[ "${EXIT_CODE[3]}" = 0 ] || cluster_fail "h3, left out as a spare, exited ${EXIT_CODE[3]} although the job succeeded"
log3=$(cluster_log 3)
grep -q "lost the job's store" "$log3" && cluster_fail "h3 claims the store was lost"
grep -q "the job failed" "$log3" && cluster_fail "h3 says the job failed"
grep -Eq "spare.*(job|finished|succeeded)|(job|finished|succeeded).*spare" "$log3" ||
    cluster_fail "h3 does not say it was left out as a spare of a job that succeeded"
# Nodes running the job are never "missing" in h3's waiting lines.
node_of() { grep -m1 '"event":"agent_started"' "$(cluster_events "$1")" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p'; }
for i in 1 2 4; do
    node=$(node_of "$i")
    [ -n "$node" ] || cluster_fail "h$i's node id not found"
    if grep "waiting for nodes" "$log3" | grep -q "missing: .*$node"; then
        cluster_fail "h3 lists $node (h$i, running the job) as missing"
    fi
done
grep -q '"event":"job_end".*"status":"left_out","exit_code":0' "$(cluster_events 3)" ||
    cluster_fail "h3's job_end is not left_out with exit code 0"
# The weights equal a fault-free run's, bit for bit (the same trainer standalone, 3 workers).
clean=$CLUSTER_DIR/clean
mkdir -p "$clean/ckpt"
"$ELASTICRUN" --standalone --nproc-per-node 3 --no-python "$TRAINER" --ckpt-dir "$clean/ckpt" \
    --steps "$STEPS" --step-ms 0 --result "$clean/result.txt" >"$clean/console.txt" 2>&1 ||
    cluster_fail "the fault-free run failed: $(tail -5 "$clean/console.txt")"
cmp -s "$clean/result.txt" "$CLUSTER_DIR/result.txt" ||
    cluster_fail "weights differ: faulty '$(cat "$CLUSTER_DIR/result.txt")' clean '$(cat "$clean/result.txt")'"
netns_log "h3: $(grep -E 'spare' "$log3" | tail -1)"
echo "spare after overlapping faults: ok ($(cat "$CLUSTER_DIR/result.txt"))"

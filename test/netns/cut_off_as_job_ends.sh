#!/usr/bin/env bash
# A node cut off as a c10d job ends learns that it succeeded (issue 26): 3
# hosts, --nnodes=2:2, h1 hosts the store, the demo trainer with checkpoints,
# h3 waits as the spare. Near the job's end h2 is partitioned (silent loss);
# h3 takes its place and the job succeeds while h2 is still cut off, and h2
# stays cut off 3 s more (the store's host used to serve 2 s after the close,
# then h2 found the store gone and exited 1, "lost the job's store"). The
# host now serves until h2 has learned the outcome: h2 exits 0 as left out,
# says so, and the host exits after h2 learned it, within outcome_timeout.
# Then the other way round: a node that dies holds the host up for nothing.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-cutend}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
TRAINER="${ELASTIC_EXAMPLE_DIR:-$(cd "$here/../.." && pwd)/build/release/examples}/demo_trainer"
[ -x "$TRAINER" ] || { echo "FAIL: no $TRAINER (run make)" >&2; exit 1; }
STEPS=1500
OUTCOME_TIMEOUT_S=30 # the default outcome_timeout
declare -A EXIT_CODE=()

# start_agent I RUN_ID: host I's agent running the demo trainer (one worker).
start_agent() {
    local host=$1 conf="last_call_timeout=1,join_timeout=120"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=info "$ELASTICRUN" \
        --nnodes 2:2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" \
        --rdzv-id "$2" --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 5 \
        --event-log "$(cluster_events "$host")" --no-python \
        "$TRAINER" --ckpt-dir "$CLUSTER_DIR/ckpt-$2" --steps "$STEPS" --step-ms 10 --result "$CLUSTER_DIR/result-$2.txt"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# wait_exit I TIMEOUT_S: waits for host I's agent to exit; its status in EXIT_CODE[I].
wait_exit() {
    local pid=${CLUSTER_AGENT_PIDS[$1]} deadline=$(( SECONDS + $2 ))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$1's agent still runs after $2 s"
        sleep 0.05
    done
    local rc=0
    wait "$pid" || rc=$?
    EXIT_CODE[$1]=$rc
}

# top_step I: the newest checkpointed step in host I's events (0: none).
top_step() {
    grep -o '"event":"checkpoint".*"step":[0-9]*' "$(cluster_events "$1")" 2>/dev/null |
        sed 's/.*"step":\([0-9]*\)/\1/' | sort -n | tail -1 || true
}

# start_job RUN_ID: h1 and h2 run it, h3 waits as the spare.
start_job() {
    local i
    cluster_mark
    for i in 1 2; do start_agent "$i" "$1"; done
    for i in 1 2; do cluster_wait "$i" '"event":"worker_started"' 60 || cluster_fail "h$i's worker did not start"; done
    start_agent 3 "$1"
    cluster_wait 3 '"event":"agent_started"' 30 || cluster_fail "the spare h3 did not start"
    local deadline=$(( SECONDS + 90 ))
    until [ "$(top_step 1)" -ge $(( STEPS - 300 )) ] 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "no checkpoint near the end after 90 s"
        sleep 0.05
    done
}

netns_setup 3

# ---- 1: cut off as the job ends, healed 3 s after it succeeded -------------
start_job cutend-1
netns_partition 2
cluster_wait 3 '"event":"worker_started"' 30 || cluster_fail "the spare h3 did not take h2's place"
cluster_wait 1 '"event":"job_end".*"status":"succeeded"' 60 || cluster_fail "the job did not succeed"
ended=$(cluster_ts 1 '"event":"job_end"')
while [ "$(netns_now_ms)" -lt $(( ended + 3000 )) ]; do sleep 0.05; done # the fault's length
kill -0 "${CLUSTER_AGENT_PIDS[1]}" 2>/dev/null || cluster_fail "the store's host left while h2 was cut off"
netns_unpartition 2
healed=$(netns_now_ms)
wait_exit 2 "$(cluster_scale $(( OUTCOME_TIMEOUT_S + 10 )))"
wait_exit 1 "$(cluster_scale 20)"
wait_exit 3 "$(cluster_scale 20)"
for i in 1 2 3; do
    [ "${EXIT_CODE[$i]}" = 0 ] || cluster_fail "h$i exited ${EXIT_CODE[$i]} although the job succeeded"
done
log2=$(cluster_log 2)
grep -q "lost the job's store" "$log2" && cluster_fail "h2 claims the store was lost"
grep -q "the job failed" "$log2" && cluster_fail "h2 says the job failed"
grep -q "left out as a spare: the job succeeded" "$log2" || cluster_fail "h2 does not say the job succeeded without it"
grep -q '"event":"job_end".*"status":"left_out","exit_code":0' "$(cluster_events 2)" ||
    cluster_fail "h2's job_end is not left_out with exit code 0"
grep -q "every node learned how the job ended" "$(cluster_log 1)" ||
    cluster_fail "h1 does not say it served until every node learned the outcome"
learned=$(cluster_ts 2 '"event":"job_end"')
netns_log "h2 learned the outcome $(( learned - healed )) ms after the heal, $(( learned - ended )) ms after the job ended"
cluster_assert_within "h2 learned the outcome after the heal" $(( learned - healed )) \
    "$(cluster_scale $(( OUTCOME_TIMEOUT_S * 1000 )))"

# ---- 2: a node SIGKILLed as the job ends does not hold the host ------------
start_job cutend-2
kill -KILL "${CLUSTER_AGENT_PIDS[2]}"
cluster_wait 3 '"event":"worker_started"' 30 || cluster_fail "the spare h3 did not take h2's place"
cluster_wait 1 '"event":"job_end".*"status":"succeeded"' 60 || cluster_fail "the second job did not succeed"
ended=$(cluster_ts 1 '"event":"job_end"')
wait_exit 1 "$(cluster_scale 20)"
wait_exit 3 "$(cluster_scale 20)"
gone=$(netns_now_ms)
[ "${EXIT_CODE[1]}" = 0 ] && [ "${EXIT_CODE[3]}" = 0 ] ||
    cluster_fail "h1 or h3 exited ${EXIT_CODE[1]}/${EXIT_CODE[3]} although the job succeeded"
# Far less than outcome_timeout: the dead agent's connection closed, its mark with it.
cluster_assert_within "the host's exit after the job ended, a node dead" $(( gone - ended )) \
    "$(cluster_scale 10000)"
cmp -s "$CLUSTER_DIR/result-cutend-1.txt" "$CLUSTER_DIR/result-cutend-2.txt" ||
    cluster_fail "the two jobs' weights differ"
echo "cut off as the job ends: ok (h2 learned it $(( learned - healed )) ms after the heal)"

#!/usr/bin/env bash
# A deterministic bug on three simulated hosts (issue 37), with the defaults
# and --max-restarts 10: a C trainer whose ranks (one per host) go through
# their steps in lockstep and find the same bad batch at step 37 (an error
# file naming it and its frame). The failure policy finds it on most ranks at
# once: the job stops in its first generation (in its second, by the repeat
# rule, when the first failure's stop reached the other ranks before their
# own bad batch: said in the test's log), one decision for every node,
# every elasticrun exits 70, one node says the cause line and the others name
# it as the job's closing cause, and `elasticctl explain` over the three event logs names the
# rule. Nothing is restarted ten times.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
worker=${ELASTIC_HELPER_DIR:-$(cd "$here/../.." && pwd)/build/release/test/helpers}/step_bug_worker
ctl=$(dirname "$ELASTICRUN")/elasticctl
[ -x "$worker" ] && [ -x "$ELASTICRUN" ] && [ -x "$ctl" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
netns_setup 3

start_bug_node() {
    local host=$1 conf="last_call_timeout=1,join_timeout=60"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 3 --nproc-per-node 1 --rdzv-backend c10d \
        --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" --rdzv-id bug-job --rdzv-conf "$conf" \
        --local-addr "$(netns_addr "$host")" --max-restarts 10 --event-log "$(cluster_events "$host")" \
        --no-python "$worker" --fail-at-step 37 --step-ms 20 --lockstep 1
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# wait_exit I LIMIT_S: host I's elasticrun exit status in EXIT_RC (fails the
# test past the limit; not in a subshell: only this shell may wait for it).
wait_exit() {
    local deadline=$(( SECONDS + $(cluster_scale "$2") ))
    while kill -0 "${CLUSTER_AGENT_PIDS[$1]}" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$1's elasticrun did not exit"
        sleep 0.1
    done
    EXIT_RC=0
    wait "${CLUSTER_AGENT_PIDS[$1]}" || EXIT_RC=$?
}

for i in 1 2 3; do start_bug_node "$i"; done
for i in 1 2 3; do
    wait_exit "$i" 60
    [ "$EXIT_RC" = 70 ] || cluster_fail "h$i's elasticrun exited $EXIT_RC, not 70"
done
# The first generation, by most_ranks: no restart replayed the bug. A node
# that hears the first node's end of the generation before its own rank's
# failure (the ranks exit within a few ms of each other) still classifies
# that failure (the worker failed by itself, not by our stop): every rank's
# failure reaches the job-wide history in generation 1.
all_events() { cat "$(cluster_events 1)" "$(cluster_events 2)" "$(cluster_events 3)"; }
generations=$(grep -c '"event":"generation_formed"' "$(cluster_events 1)" || true)
for i in 2 3; do
    [ "$(grep -c '"event":"generation_formed"' "$(cluster_events "$i")")" = "$generations" ] ||
        cluster_fail "h$i formed another number of generations than h1 ($generations)"
done
# Which rule can stop it depends on how many ranks failed by themselves in
# generation 1: the first failure ends the generation at once, and a rank
# that our stop reached before its own bad batch (a loaded machine skews the
# lockstep ranks by more than the few ms a stop takes) did not fail. Two or
# three of the three: most_ranks in generation 1. One: the repeat rule in
# generation 2. Never a third generation.
gen1_failures=$(all_events | grep '"event":"failure_classified"' | grep -c '"generation":1,' || true)
if [ "$gen1_failures" -ge 2 ]; then
    want_generations=1 rules=most_ranks said_where='on [23] ranks at once in generation 1'
else
    want_generations=2 rules=repeat said_where='in generations 1 and 2'
    netns_log "only $gen1_failures rank failed by itself in generation 1 (the others were stopped first): the repeat rule's turn"
fi
[ "$generations" = "$want_generations" ] ||
    cluster_fail "the job formed $generations generations, not $want_generations ($gen1_failures ranks failed in generation 1): the bug was replayed"
all_events | grep -E "\"decision\":\"stop_bug\",\"rule\":\"($rules)\"" | grep -q . ||
    cluster_fail "no node decided stop_bug by $rules"
all_events | grep '"decision":"stop_bug"' | grep -v "\"generation\":$generations," | grep -q . &&
    cluster_fail "a stop was decided in another generation than the last"
cat "$(cluster_events 1)" "$(cluster_events 2)" "$(cluster_events 3)" |
    grep '"event":"failure_classified"' | grep -v '"step":37,' | grep -q . &&
    cluster_fail "a failure was classified at another step than 37"
# The deciding node says the cause line; the others exit naming it.
said=0 told=0
for i in 1 2 3; do
    if grep -q 'stopping the job: a deterministic bug in the training code: BadBatchError at step_bug_worker.c:.* at step 37, '"$said_where" "$(cluster_log "$i")"; then
        said=$((said + 1))
    elif grep -q 'it was closed while this node waited.*deterministic bug: BadBatchError at step_bug_worker.c:' "$(cluster_log "$i")"; then
        told=$((told + 1))
    else
        cluster_fail "h$i said neither the cause nor that the job was closed for it"
    fi
done
[ "$said" -ge 1 ] && [ $((said + told)) = 3 ] || cluster_fail "said $said, told $told"
# explain over the three logs names the rule and the stop.
"$ctl" explain "$(cluster_events 1)" "$(cluster_events 2)" "$(cluster_events 3)" \
    >"$CLUSTER_DIR/explain.out" 2>&1 || cluster_fail "elasticctl explain failed: $(cat "$CLUSTER_DIR/explain.out")"
for needle in 'the same error' 'decided:   stop now: a deterministic bug (exit 70)' \
    'error:     BadBatchError at step_bug_worker.c:' 'the job ended: failed, exit 70'; do
    grep -qF -- "$needle" "$CLUSTER_DIR/explain.out" ||
        cluster_fail "explain does not say \"$needle\": $(cat "$CLUSTER_DIR/explain.out")"
done
grep -qE "rule:      ($rules): the same error" "$CLUSTER_DIR/explain.out" ||
    cluster_fail "explain does not name the rule: $(cat "$CLUSTER_DIR/explain.out")"
echo "deterministic bug on 3 hosts: stopped in generation $generations ($said said, $told told): ok"

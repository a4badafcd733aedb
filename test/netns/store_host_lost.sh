#!/usr/bin/env bash
# SIGKILL the agent that hosts the c10d store: every other agent notices within
# the keep-alive timeout, fences (its workers stop), and exits non-zero with one
# root-cause line naming the lost store host's address and when.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[1]}"
store="$(netns_addr 1):$CLUSTER_PORT"
for i in 2 3; do
    cluster_wait "$i" '"event":"job_end".*"status":"failed"' 20 || cluster_fail "h$i did not end the job"
    fenced=$(cluster_after "$i" '"event":"fenced"')
    stopped=$(cluster_after "$i" '"event":"generation_stopped"')
    ended=$(cluster_after "$i" '"event":"job_end"')
    cluster_assert_within "h$i fenced after" "$fenced" "$(cluster_scale 2500)"
    cluster_assert_within "h$i workers stopped after" "$stopped" "$(cluster_scale 3000)"
    cluster_assert_within "h$i exited after" "$ended" "$(cluster_scale 5000)"
    wait "${CLUSTER_AGENT_PIDS[$i]}" && cluster_fail "h$i's agent exited 0"
    grep -q "lost the job's store at $store (the store's host) at 20" "$(cluster_log "$i")" ||
        cluster_fail "h$i's root cause does not name the lost store host $store"
    [ "$(grep -c "the job failed" "$(cluster_log "$i")")" = 1 ] || cluster_fail "h$i: not exactly one root-cause line"
done
echo "store host lost: ok"

#!/usr/bin/env bash
# SIGKILL a node's agent: its workers die with it, the survivors re-form at
# once (its connection closes, so its lease ends without waiting for a timeout).
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

workers=$(cluster_workers_of "${CLUSTER_AGENT_PIDS[3]}")
[ -n "$workers" ] || cluster_fail "h3's workers not found"
cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[3]}"
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 15 || cluster_fail "h$i did not re-form at 4"
done
detected=$(cluster_after 1 '"event":"generation_ended"')
reformed=$(cluster_after 1 '"event":"generation_formed".*"world_size":4,')
cluster_assert_within "loss detected after" "$detected" "$(cluster_scale 1500)"
cluster_assert_within "survivors running again after" "$reformed" "$(cluster_scale 2500)"
deadline=$(( SECONDS + 5 ))
for pid in $workers; do
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "worker $pid outlived its SIGKILLed agent"
        sleep 0.05
    done
done
echo "kill node: ok"

#!/usr/bin/env bash
# Nodes that fail a fatal check before they join never join and say why: one
# with a GPU missing (7 present, --expected-gpus 8), one whose site health
# command hangs past --health-check-timeout. The healthy pair runs meanwhile.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=health
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/health_cluster.sh"
netns_skip_unless_able
[ -x "$ELASTICRUN" ] || { echo "FAIL: no $ELASTICRUN (run make)" >&2; exit 1; }
HEALTH_NNODES=2:3
netns_setup 4
health_state 3 'gpus 7\n'
health_start_agent 1 --expected-gpus 8
health_start_agent 2 --expected-gpus 8
health_start_agent 3 --expected-gpus 8
health_start_agent 4 --health-check-cmd "echo checking the node; sleep 600" --health-check-timeout 1
for i in 3 4; do
    cluster_wait "$i" '"event":"job_end".*"status":"unhealthy"' "$(cluster_scale 30)" ||
        cluster_fail "h$i did not end as unhealthy before joining"
done
grep -E '"event":"health_check".*"check":"gpu_count".*"verdict":"fatal"' "$(cluster_events 3)" |
    grep -q '"value":7' || cluster_fail "h3's event does not say 7 GPUs"
grep -q '7 GPUs present, 8 expected' "$(cluster_log 3)" || cluster_fail "h3 does not say why it did not join"
grep -E '"event":"health_check".*"check":"site_cmd".*"verdict":"fatal"' "$(cluster_events 4)" |
    grep -q 'did not finish in 1000 ms: checking the node' || cluster_fail "h4's event does not say the command hung"
grep -q 'did not finish in 1000 ms' "$(cluster_log 4)" || cluster_fail "h4 does not say why it did not join"
for i in 3 4; do
    [ "$(cluster_count "$i" '"event":"generation_formed"')" = 0 ] || cluster_fail "h$i joined a generation"
    deadline=$(( SECONDS + $(cluster_scale 10) ))
    while kill -0 "${CLUSTER_AGENT_PIDS[$i]}" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$i's agent did not exit"
        sleep 0.05
    done
    wait "${CLUSTER_AGENT_PIDS[$i]}" && cluster_fail "h$i's agent exited 0"
done
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' "$(cluster_scale 60)" ||
        cluster_fail "h$i did not form a generation of the two healthy nodes"
done
echo "unhealthy nodes never joined: ok"

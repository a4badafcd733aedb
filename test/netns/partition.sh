#!/usr/bin/env bash
# Partition a node that does not host the store (iptables DROP both ways): it
# fences itself (workers stopped within keep-alive timeout + 1 s), the
# survivors re-form without it and without spending restart budget, and after
# the heal it rejoins as a new member.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

cluster_mark
netns_partition 3
cluster_wait 3 '"event":"generation_stopped"' 15 || cluster_fail "h3 never stopped its workers"
cluster_wait 1 '"event":"generation_formed".*"world_size":4,' 15 || cluster_fail "survivors did not re-form at 4"
cluster_wait 2 '"event":"generation_formed".*"world_size":4,' 15 || cluster_fail "h2 did not re-form at 4"
fenced=$(cluster_after 3 '"event":"fenced"')
stopped=$(cluster_after 3 '"event":"generation_stopped"')
reformed=$(cluster_after 1 '"event":"generation_formed".*"world_size":4,')
cluster_assert_within "cut-off node fenced after" "$fenced" "$(cluster_scale 3000)"
cluster_assert_within "cut-off node's workers stopped after" "$stopped" "$(cluster_scale 3000)"
cluster_assert_within "survivors running again after" "$reformed" "$(cluster_scale 6000)"
[ -z "$(cluster_workers_of "${CLUSTER_AGENT_PIDS[3]}")" ] || cluster_fail "h3's workers still run after fencing"
[ "$(grep -c "fenced out of generation" "$(cluster_log 3)")" = 1 ] || cluster_fail "h3 did not say once that it fenced itself"
grep -q '"restart_count":0' <<<"$(grep '"world_size":4,' "$(cluster_events 1)")" ||
    cluster_fail "the survivors' re-formation consumed restart budget"

cluster_mark
netns_unpartition 3
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 30 || cluster_fail "h$i: no generation of 6 after the heal"
done
rejoined=$(cluster_after 3 '"event":"generation_formed".*"world_size":6,')
cluster_assert_within "healed node running again after" "$rejoined" "$(cluster_scale 10000)"
grep '"world_size":6,' "$(cluster_events 1)" | tail -1 | grep -q '"restart_count":0' ||
    cluster_fail "the rejoin consumed restart budget"
kill -0 "${CLUSTER_AGENT_PIDS[3]}" || cluster_fail "h3's agent exited instead of rejoining"
echo "partition: ok"

#!/usr/bin/env bash
# SIGSTOP a node's agent for 5 s: the survivors re-form without it after the
# keep-alive timeout; once thawed it learns at once that its lease is gone,
# fences (stops the workers that ran on unsupervised) and rejoins as a new member.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

cluster_mark
netns_freeze "${CLUSTER_AGENT_PIDS[3]}" 5
thaw_ms=$(( CLUSTER_T0 + 5000 ))
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 15 || cluster_fail "h$i did not re-form at 4"
done
reformed=$(cluster_after 1 '"event":"generation_formed".*"world_size":4,')
cluster_assert_within "survivors running again after" "$reformed" "$(cluster_scale 4000)"
cluster_wait 3 '"event":"fenced"' 20 || cluster_fail "h3 did not fence itself after the thaw"
fenced=$(cluster_after 3 '"event":"fenced"')
netns_log "thawed node fenced $(( fenced - 5000 )) ms after SIGCONT"
[ $(( fenced - 5000 )) -le "$(cluster_scale 1000)" ] || cluster_fail "h3 fenced $(( fenced - 5000 )) ms after SIGCONT"
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 30 || cluster_fail "h$i: no generation of 6 after the thaw"
done
echo "freeze: ok (thaw at $thaw_ms)"

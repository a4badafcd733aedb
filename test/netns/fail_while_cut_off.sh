#!/usr/bin/env bash
# A worker dies while its node is cut off from the store: the agent's loop
# never waits for the store, so the failure is recorded and the other worker
# stopped at once, /healthz keeps answering fast, the node fences, and after
# the heal it rejoins; the failure's root cause stays the worker's signal.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

victim=$(cluster_workers_of "${CLUSTER_AGENT_PIDS[3]}" | head -1)
[ -n "$victim" ] || cluster_fail "no worker on h3"
netns_partition 3 # in place when it returns (iptables): no wait needed
cluster_mark
kill -KILL "$victim"
cluster_wait 3 '"event":"generation_stopped"' 10 || cluster_fail "h3 did not stop its generation"
failure=$(cluster_after 3 '"event":"failure".*"signal":9')
stopped=$(cluster_after 3 '"event":"generation_stopped"')
cluster_assert_within "failure recorded after" "$failure" "$(cluster_scale 500)"
cluster_assert_within "other worker stopped after" "$stopped" "$(cluster_scale 1000)"
# A loop that waited for the store would answer only after the store call's
# deadline (the 2 s keep-alive timeout, or more): every answer well under a
# second says it does not; the fastest of five, under 100 ms, that it serves
# promptly (one slow answer on a loaded machine is the scheduler, not a wait).
best=999999
for probe in 1 2 3 4 5; do
    ms=$(cluster_healthz_ms 3) || cluster_fail "/healthz on h3 did not answer while cut off"
    cluster_assert_within "/healthz while cut off" "$ms" "$(cluster_scale 1000)"
    [ "$ms" -lt "$best" ] && best=$ms
done
cluster_assert_within "fastest /healthz while cut off" "$best" "$(cluster_scale 100)"
cluster_wait 3 '"event":"fenced"' 10 || cluster_fail "h3 did not fence itself"
netns_unpartition 3
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 40 || cluster_fail "h$i: no generation of 6 after the heal"
done
echo "fail while cut off: ok"

#!/usr/bin/env bash
# A node whose workers report 3x the others' compute time is replaced by the
# waiting spare: it evicts itself (straggler_evicted), its workers stop, the
# spare's start, no restart budget is spent, and it stays out for the quarantine.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=spare
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/straggler_cluster.sh"
netns_skip_unless_able
spare_start 20 -- 60
workers=$(cluster_workers_of "${CLUSTER_AGENT_PIDS[3]}")
[ -n "$workers" ] || cluster_fail "h3's workers not found"

cluster_wait 3 '"event":"straggler_evicted"' "$(cluster_scale 60)" || cluster_fail "h3 was not evicted"
grep -q '"event":"straggler_evicted".*"replacement":"[^"]' "$(cluster_events 3)" ||
    cluster_fail "the eviction does not name the replacement"
[ "$(cluster_count 1 '"event":"straggler_evicted"')" = 0 ] || cluster_fail "h1 evicted itself"
# The spare runs in the next generation, with h1, at the job's full size; no budget spent.
cluster_wait 2 '"event":"generation_formed".*"world_size":4,.*"restart_count":0' "$(cluster_scale 30)" ||
    cluster_fail "the spare h2 did not join a generation of 4 without a restart"
cluster_wait_count 2 '"event":"worker_started"' 2 "$(cluster_scale 20)" || cluster_fail "h2's workers did not start"
cluster_wait_count 1 '"event":"generation_formed".*"restart_count":0' 2 "$(cluster_scale 30)" ||
    cluster_fail "h1 did not re-form without spending budget"
# The slow node's workers are gone.
deadline=$(( SECONDS + $(cluster_scale 15) ))
for pid in $workers; do
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h3's worker $pid outlived the eviction"
        sleep 0.05
    done
done
# Out for the quarantine, then back as a waiting node (the job is full: no generation).
cluster_wait 3 '"event":"quarantine_ended"' "$(cluster_scale 60)" || cluster_fail "h3's quarantine never ended"
evicted=$(cluster_ts 3 '"event":"straggler_evicted"')
back=$(cluster_ts 3 '"event":"quarantine_ended"')
[ $(( back - evicted )) -ge $(( SPARE_QUARANTINE * 1000 )) ] ||
    cluster_fail "h3 came back $(( back - evicted )) ms after its eviction, before the ${SPARE_QUARANTINE} s quarantine"
[ "$(grep -c '"event":"generation_formed"' "$(cluster_events 3)")" = 1 ] || cluster_fail "h3 rejoined a generation"
kill -0 "${CLUSTER_AGENT_PIDS[3]}" || cluster_fail "h3's agent exited instead of waiting as a spare"
netns_log "evicted $(( evicted - $(cluster_ts 3 '"event":"generation_formed"') )) ms after h3 started; back after $(( back - evicted )) ms"
echo "straggler replaced by the spare: ok"

#!/usr/bin/env bash
# No spare, but --nnodes=2:3 lets the job run without the slow one of three
# nodes: it evicts itself, and with --straggler-quarantine 0 its agent leaves
# the job (exit 0, job_end "evicted"); the other two re-form at once, without
# spending restart budget.
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=spare
SPARE_NNODES=2:3
SPARE_QUARANTINE=0
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/straggler_cluster.sh"
netns_skip_unless_able
[ -x "$ELASTICRUN" ] && [ -x "$PROBE_WORKER" ] || { echo "FAIL: build first (make test)" >&2; exit 1; }
netns_setup 3
spare_start_agent 1 20
spare_start_agent 2 20
spare_start_agent 3 60
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 60 || cluster_fail "h$i never joined the 3-node job"
done
cluster_wait 3 '"event":"straggler_evicted".*"spares_waiting":0,' "$(cluster_scale 60)" || cluster_fail "h3 was not evicted"
cluster_wait 3 '"event":"job_end".*"status":"evicted"' "$(cluster_scale 20)" || cluster_fail "h3 did not leave the job"
for i in 1 2; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":4,.*"restart_count":0' "$(cluster_scale 20)" ||
        cluster_fail "h$i did not re-form as 2 nodes without spending budget"
    [ "$(cluster_count "$i" '"event":"straggler_evicted"')" = 0 ] || cluster_fail "h$i evicted itself too"
done
deadline=$(( SECONDS + $(cluster_scale 20) ))
while kill -0 "${CLUSTER_AGENT_PIDS[3]}" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h3's agent did not exit"
    sleep 0.05
done
wait "${CLUSTER_AGENT_PIDS[3]}" && rc=0 || rc=$?
[ "$rc" = 0 ] || cluster_fail "h3's agent exited $rc, not 0"
echo "straggler left a job that still has min nodes: ok"

#!/usr/bin/env bash
# A node sitting out its quarantine (evicted as the job's straggler, the
# default-like 300 s) when the job finishes without it: it learns the outcome
# within seconds and exits 0, left out, instead of sitting out the rest of
# its quarantine and then finding the c10d store's host gone (it serves such
# a node 30 s): exit 1 for a job that succeeded (a chaos soak, seed 2026).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=spareend
SPARE_QUARANTINE=300
. "$here/netns.sh"
. "$here/cluster.sh"
. "$here/straggler_cluster.sh"
netns_skip_unless_able
export PROBE_WORKER_DONE_FILE="$CLUSTER_DIR/job-done"
rm -f "$PROBE_WORKER_DONE_FILE"
spare_start 20 -- 60

cluster_wait 3 '"event":"straggler_evicted"' "$(cluster_scale 60)" || cluster_fail "h3 was not evicted"
cluster_wait 2 '"event":"generation_formed".*"world_size":4,' "$(cluster_scale 30)" ||
    cluster_fail "the spare h2 did not take h3's place"
cluster_wait_count 2 '"event":"worker_started"' 2 "$(cluster_scale 20)" || cluster_fail "h2's workers did not start"
kill -0 "${CLUSTER_AGENT_PIDS[3]}" || cluster_fail "h3's agent exited instead of sitting out its quarantine"
# The job finishes: every worker of h1 and h2 exits 0.
touch "$PROBE_WORKER_DONE_FILE"
cluster_wait_agent 1 60
cluster_wait_agent 2 60
ended=$(cluster_ts 1 '"event":"job_end"')
# h3 learns it within its look (every second) and the rejoin, not 300 s later.
cluster_wait 3 '"event":"job_end"' "$(cluster_scale 15)" || cluster_fail "h3 sat out its quarantine after the job ended"
cluster_wait_agent 3 10
grep -q '"event":"job_end".*"status":"left_out","exit_code":0' "$(cluster_events 3)" ||
    cluster_fail "h3's job_end is not left_out with exit code 0"
grep -q "the job was closed while this node sat out its quarantine" "$(cluster_log 3)" ||
    cluster_fail "h3 does not say why its quarantine ended early"
netns_log "h3 exited $(( $(cluster_ts 3 '"event":"job_end"') - ended )) ms after the job ended"
echo "quarantined node as the job ends: ok"

#!/usr/bin/env bash
# An Xid 79 on one GPU of a running node (and the GPU then lost): the node's
# health check turns fatal at once (the Xid watcher runs a round), it steps
# aside, the waiting spare takes over within one check period, and the sick
# node sits out its quarantine, then (its GPU still lost) does not rejoin.
# No restart is spent, with HEALTH_MAX_RESTARTS=0 (--max-restarts 0) too,
# and the job then finishes on h1 and the spare.
set -euo pipefail
here=$(dirname "$0")
. "$here/health_cluster.sh"
HEALTH_DONE_FILE=$CLUSTER_DIR/health_xid_job.done # touched at the end: the job finishes
rm -f "$HEALTH_DONE_FILE"
health_start
workers=$(cluster_workers_of "${CLUSTER_AGENT_PIDS[3]}")
[ -n "$workers" ] || cluster_fail "h3's workers not found"

cluster_mark
health_state 3 'gpus 8\nxid 5 79\nlost 5\n'
cluster_wait 3 '"event":"health_check".*"check":"xid".*"verdict":"fatal"' "$(cluster_scale 20)" ||
    cluster_fail "h3 reported no fatal Xid"
grep -E '"event":"health_check".*"check":"xid"' "$(cluster_events 3)" |
    grep '"gpu":5' | grep '"uuid":"GPU-d0b1e000-0000-4000-8000-000000000005"' |
    grep '"pci_bus_id":"00000000:15:00.0"' | grep -q '"value":79' ||
    cluster_fail "the Xid event does not name GPU 5 by index, UUID and PCI bus id with value 79"
grep -q 'GPU 5 .*Xid 79: the GPU has fallen off the bus' "$(cluster_log 3)" ||
    cluster_fail "h3's console does not name the GPU and what Xid 79 means"
cluster_wait 3 '"event":"health_stepped_aside".*"replacement":"[^"]' "$(cluster_scale 20)" ||
    cluster_fail "h3 did not step aside for the spare"
health_spare_takes_over
[ "$(cluster_count 1 '"event":"health_stepped_aside"')" = 0 ] || cluster_fail "h1 stepped aside"
# The sick node's workers are gone; no restart budget was spent.
health_wait_gone $workers
cluster_wait 1 '"event":"generation_formed".*"world_size":4,.*"restart_count":0' "$(cluster_scale 30)" ||
    cluster_fail "h1 did not re-form without spending budget"
takeover=$(cluster_after 2 '"event":"worker_started"')
cluster_assert_within "injected Xid 79 -> the spare's workers running" "$takeover" \
    "$(cluster_scale $(( HEALTH_INTERVAL * 1000 )))"
# After its quarantine the check before rejoining still fails (GPU 5 is lost): it leaves.
cluster_wait 3 '"event":"job_end".*"status":"unhealthy"' "$(cluster_scale 60)" ||
    cluster_fail "h3 did not end as unhealthy after its quarantine"
[ "$(grep -c '"event":"generation_formed"' "$(cluster_events 3)")" = 1 ] || cluster_fail "h3 rejoined a generation"
kill -0 "${CLUSTER_AGENT_PIDS[2]}" || cluster_fail "h2's agent exited before the job ended"
# The job finishes on the nodes left (h1 and the spare h2), still without a restart spent.
touch "$HEALTH_DONE_FILE"
for i in 1 2; do
    cluster_wait "$i" '"event":"job_end".*"status":"succeeded".*"restarts":0' "$(cluster_scale 30)" ||
        cluster_fail "h$i's job did not succeed without a restart"
done
# The budget the agents ran with (HEALTH_MAX_RESTARTS=0: none to spend at all).
for i in 1 2 3; do
    grep -q "\"event\":\"agent_started\".*\"max_restarts\":$HEALTH_MAX_RESTARTS," "$(cluster_events $i)" ||
        cluster_fail "h$i did not run with --max-restarts $HEALTH_MAX_RESTARTS"
done
echo "Xid 79 -> the spare took over in $takeover ms (--max-restarts $HEALTH_MAX_RESTARTS): ok"

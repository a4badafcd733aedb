#!/usr/bin/env bash
# A node restarting after its own worker failed, waiting in the rendezvous,
# when the c10d store's host dies: the store is why the job ended, and the
# one root-cause line says so. (A chaos soak saw such nodes blame their
# recovered worker failure: "first failure: ... then the rendezvous failed:
# the store closed the connection".) h3's agent is frozen meanwhile, so the
# next generation cannot form before the host is gone.
set -euo pipefail
here=$(dirname "$0")
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
cluster_start 3

kill -STOP "${CLUSTER_AGENT_PIDS[3]}"
cluster_mark
victim=$(cluster_workers_of "${CLUSTER_AGENT_PIDS[2]}" | head -n 1)
[ -n "$victim" ] || { kill -CONT "${CLUSTER_AGENT_PIDS[3]}"; cluster_fail "h2 has no worker to kill"; }
kill -KILL "$victim"
cluster_wait 2 '"event":"generation_stopped"' 20 ||
    { kill -CONT "${CLUSTER_AGENT_PIDS[3]}"; cluster_fail "h2 did not stop its generation after its worker died"; }
kill -KILL "${CLUSTER_AGENT_PIDS[1]}"
kill -CONT "${CLUSTER_AGENT_PIDS[3]}"
store="$(netns_addr 1):$CLUSTER_PORT"
for i in 2 3; do
    cluster_wait "$i" '"event":"job_end".*"status":"failed"' 30 || cluster_fail "h$i did not end the job"
    wait "${CLUSTER_AGENT_PIDS[$i]}" && cluster_fail "h$i's agent exited 0"
    log=$(cluster_log "$i")
    grep -q "the job failed: lost the job's store at $store (the store's host)" "$log" ||
        cluster_fail "h$i's root cause does not name the lost store host $store"
    [ "$(grep -c "the job failed" "$log")" = 1 ] || cluster_fail "h$i: not exactly one root-cause line"
    grep -q "then the rendezvous failed" "$log" && cluster_fail "h$i blames a failure it had recovered from"
done
grep -q "while this node waited to join" "$(cluster_log 2)" ||
    netns_log "h2 was fenced before it rejoined (the rendezvous path was not taken this time)"
echo "store host lost while rejoining: ok"

#!/usr/bin/env bash
# The same fault as store_host_lost.sh, on etcd: h1 runs etcd, h2..h4 run the
# job with --rdzv-backend etcd. SIGKILL the agent hosting the generation's
# store: the others end the generation at once (their store connections
# drop), re-form when the host's etcd lease has lapsed (keep-alive timeout,
# 2 s here: a single etcd member on a loaded machine needs the slack) on a
# store re-hosted by one of them, and the job goes on (--max-restarts 0: it
# costs no budget).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=etcd
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
command -v etcd >/dev/null 2>&1 || { echo "SKIP: etcd is not installed (Debian: etcd-server)"; exit 77; }
netns_setup 4

etcd_addr=$(netns_addr 1)
netns_spawn 1 "$CLUSTER_DIR/etcd.log" etcd --name e1 --data-dir "$CLUSTER_DIR/etcd-data" \
    --listen-client-urls "http://$etcd_addr:2379" --advertise-client-urls "http://$etcd_addr:2379" \
    --listen-peer-urls "http://$etcd_addr:2380" --initial-advertise-peer-urls "http://$etcd_addr:2380" \
    --initial-cluster "e1=http://$etcd_addr:2380" --heartbeat-interval 50 --election-timeout 500 --log-level warn
deadline=$(( SECONDS + 30 ))
until netns_exec 2 curl -s -m 1 -d '{"key":"AA=="}' "http://$etcd_addr:2379/v3/kv/range" | grep -q header; do
    [ "$SECONDS" -lt "$deadline" ] || { cat "$CLUSTER_DIR/etcd.log" >&2; echo "FAIL: etcd did not start" >&2; exit 1; }
    sleep 0.1 # etcd has no readiness signal but its gateway answering
done

for i in 2 3 4; do
    rm -f "$(cluster_events "$i")"
    netns_spawn "$i" "$(cluster_log "$i")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 2:3 --nproc-per-node 2 --rdzv-backend etcd --rdzv-endpoint "$etcd_addr:2379" \
        --rdzv-id etcd-job --rdzv-conf "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4" \
        --local-addr "$(netns_addr "$i")" --max-restarts 0 --event-log "$(cluster_events "$i")" \
        --no-python sleep 600
    CLUSTER_AGENT_PIDS[$i]=$NETNS_LAST_PID
done
host=""
for i in 2 3 4; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":6,' 60 || cluster_fail "h$i never joined the job"
    grep -q '"event":"generation_formed".*"group_rank":0,' "$(cluster_events "$i")" && host=$i
done
[ -n "$host" ] || cluster_fail "no agent is group rank 0"
for i in 2 3 4; do
    cluster_wait_count "$i" '"event":"worker_started"' 2 20 || cluster_fail "h$i's workers did not start"
done
netns_log "job running; h$host hosts the job's store"

cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[$host]}"
for i in 2 3 4; do
    [ "$i" = "$host" ] && continue
    cluster_wait "$i" '"event":"worker_started"' 15 || cluster_fail "h$i did not restart its workers"
    ended=$(cluster_after "$i" '"event":"generation_ended"')
    reformed=$(cluster_after "$i" '"event":"generation_formed".*"world_size":4,')
    cluster_assert_within "h$i generation ended after" "$ended" "$(cluster_scale 1000)"
    cluster_assert_within "h$i running again (store re-hosted) after" "$reformed" "$(cluster_scale 4500)"
    [ "$(cluster_count "$i" '"event":"job_end"')" = 0 ] || cluster_fail "h$i ended the job"
    kill -0 "${CLUSTER_AGENT_PIDS[$i]}" || cluster_fail "h$i's agent is gone"
done
echo "etcd store host lost: ok"

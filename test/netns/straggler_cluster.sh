# Agents for the straggler-replacement scenarios: --nnodes=2:2 on simulated
# hosts, workers that report their compute time (probe_worker compute), job-wide
# scores every 2 s, --straggler-evict. Source after netns.sh and cluster.sh.

PROBE_WORKER="${ELASTIC_HELPER_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/release/test/helpers}/probe_worker"
SPARE_QUARANTINE=${SPARE_QUARANTINE:-8}
SPARE_NNODES=${SPARE_NNODES:-2:2}
SPARE_BACKEND=${SPARE_BACKEND:-c10d}   # or etcd: etcd runs on h1, each generation's rank 0 hosts the job store

# spare_start_agent I STEP_MS [STALL_STEP STALL_MS]: host I's agent (h1 hosts the store).
spare_start_agent() {
    local host=$1 conf="last_call_timeout=1,join_timeout=120" endpoint="$(netns_addr 1):$CLUSTER_PORT"
    shift
    if [ "$SPARE_BACKEND" = etcd ]; then
        endpoint="$(netns_addr 1):2379"
        conf="$conf,keep_alive_interval=0.5,keep_alive_max_attempt=4"
    elif [ "$host" = 1 ]; then conf="$conf,is_host=1"
    else conf="$conf,is_host=0"; fi
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes "$SPARE_NNODES" --nproc-per-node 2 --rdzv-backend "$SPARE_BACKEND" --rdzv-endpoint "$endpoint" \
        --rdzv-id spare-job --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 3 \
        --monitor-interval 0.2 --straggler-window 3 --straggler-rounds 3 --straggler-evict \
        --straggler-quarantine "$SPARE_QUARANTINE" --event-log "$(cluster_events "$host")" \
        --metrics-port "$CLUSTER_METRICS_PORT" --no-python "$PROBE_WORKER" compute "$@"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# spare_start FAST_ARGS... -- SLOW_ARGS...: h1 and h3 form generation 1, then
# h2 (fast) joins as the waiting spare.
spare_start() {
    [ -x "$ELASTICRUN" ] || { echo "FAIL: no $ELASTICRUN (run make)" >&2; exit 1; }
    [ -x "$PROBE_WORKER" ] || { echo "FAIL: no $PROBE_WORKER (make test builds it)" >&2; exit 1; }
    local h1=() h3=()
    while [ "$1" != -- ]; do h1+=("$1"); shift; done
    shift
    h3=("$@")
    netns_setup 3
    [ "$SPARE_BACKEND" = etcd ] && spare_start_etcd
    spare_start_agent 1 "${h1[@]}"
    spare_start_agent 3 "${h3[@]}"
    for i in 1 3; do
        cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' 60 || cluster_fail "h$i never formed"
        cluster_wait_count "$i" '"event":"worker_started"' 2 20 || cluster_fail "h$i's workers did not start"
    done
    spare_start_agent 2 20
    netns_log "h1 and h3 running, h2 waiting as the spare"
}

# spare_start_etcd: a one-member etcd on h1 (skips the test when etcd is not installed).
spare_start_etcd() {
    command -v etcd >/dev/null 2>&1 || { echo "SKIP: etcd is not installed (Debian: etcd-server)"; exit 77; }
    local addr deadline
    addr=$(netns_addr 1)
    netns_spawn 1 "$CLUSTER_DIR/etcd.log" etcd --name e1 --data-dir "$CLUSTER_DIR/etcd-data" \
        --listen-client-urls "http://$addr:2379" --advertise-client-urls "http://$addr:2379" \
        --listen-peer-urls "http://$addr:2380" --initial-advertise-peer-urls "http://$addr:2380" \
        --initial-cluster "e1=http://$addr:2380" --heartbeat-interval 50 --election-timeout 500 --log-level warn
    deadline=$(( SECONDS + 30 ))
    until netns_exec 2 curl -s -m 1 -d '{"key":"AA=="}' "http://$addr:2379/v3/kv/range" | grep -q header; do
        [ "$SECONDS" -lt "$deadline" ] || { cat "$CLUSTER_DIR/etcd.log" >&2; echo "FAIL: etcd did not start" >&2; exit 1; }
        sleep 0.1 # etcd has no readiness signal but its gateway answering
    done
}

# Agents with node health checks on simulated hosts: --nnodes=2:2 (HEALTH_NNODES),
# c10d with h1 hosting the store, 2 workers each; each host's GPUs are the NVML
# double's, described by a state file of its own (health_state rewrites it
# mid-run), its sysfs an empty tree (no InfiniBand ports); checks every
# HEALTH_INTERVAL s, --max-restarts HEALTH_MAX_RESTARTS (3). The health
# scripts' one start: it sources netns.sh (as NETNS_TAG=health) and
# cluster.sh, and skips the script where namespaces cannot be made.

NETNS_TAG=health
. "$(dirname "${BASH_SOURCE[0]}")/netns.sh"
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
netns_skip_unless_able

HEALTH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NVML_DOUBLE=${ELASTIC_NVML_DOUBLE:-$HEALTH_ROOT/build/release/test/libnvml_double.so}
HEALTH_INTERVAL=${HEALTH_INTERVAL:-5}
HEALTH_QUARANTINE=${HEALTH_QUARANTINE:-4}
HEALTH_NNODES=${HEALTH_NNODES:-2:2}
HEALTH_MAX_RESTARTS=${HEALTH_MAX_RESTARTS:-3} # 0: a step-aside for the spare must spend none
case "$HEALTH_MAX_RESTARTS" in '' | *[!0-9]*) echo "FAIL: HEALTH_MAX_RESTARTS=$HEALTH_MAX_RESTARTS" >&2; exit 1 ;; esac

# The workers: they sleep (the job runs until the script ends), or with
# HEALTH_DONE_FILE set each exits 0 once that file exists (the job can finish),
# 600 s at most either way.
health_worker() {
    if [ -n "${HEALTH_DONE_FILE:-}" ]; then
        HEALTH_WORKER=(sh -c 'i=0; while [ ! -e "$1" ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i + 1)); done' sh "$HEALTH_DONE_FILE")
    else
        HEALTH_WORKER=(sleep 600)
    fi
}

health_state_file() { echo "$CLUSTER_DIR/nvml.h$1"; }

# health_state I TEXT: host I's GPUs (printf %b: "\n" separates settings), replaced at once.
health_state() {
    printf '%b' "$2" >"$(health_state_file "$1").new"
    mv -f "$(health_state_file "$1").new" "$(health_state_file "$1")"
}

# health_start_agent I [FLAGS...]: host I's agent (8 healthy GPUs unless health_state said else).
health_start_agent() {
    local host=$1 conf="last_call_timeout=1,join_timeout=120"
    shift
    health_worker
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    [ -f "$(health_state_file "$host")" ] || health_state "$host" 'gpus 8\n'
    mkdir -p "$CLUSTER_DIR/sys.h$host"
    rm -f "$(cluster_events "$host")"
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn \
        ELASTIC_NVML_LIBRARY="$NVML_DOUBLE" NVML_DOUBLE_STATE="$(health_state_file "$host")" \
        ELASTIC_HEALTH_SYSFS_ROOT="$CLUSTER_DIR/sys.h$host" "$ELASTICRUN" \
        --nnodes "$HEALTH_NNODES" --nproc-per-node 2 --rdzv-backend c10d \
        --rdzv-endpoint "$(netns_addr 1):$CLUSTER_PORT" --rdzv-id health-job --rdzv-conf "$conf" \
        --local-addr "$(netns_addr "$host")" --max-restarts "$HEALTH_MAX_RESTARTS" --health-check-interval "$HEALTH_INTERVAL" \
        --straggler-quarantine "$HEALTH_QUARANTINE" --event-log "$(cluster_events "$host")" \
        --metrics-port "$CLUSTER_METRICS_PORT" "$@" --no-python "${HEALTH_WORKER[@]}"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# health_start [H3_FLAGS...]: h1 and h3 form generation 1 (world size 4), then h2
# joins as the waiting spare. H3_FLAGS go to h3's agent only.
health_start() {
    [ -x "$ELASTICRUN" ] || { echo "FAIL: no $ELASTICRUN (run make)" >&2; exit 1; }
    [ -f "$NVML_DOUBLE" ] || { echo "FAIL: no $NVML_DOUBLE (make test builds it)" >&2; exit 1; }
    netns_setup 3
    health_start_agent 1
    health_start_agent 3 "$@"
    for i in 1 3; do
        cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' "$(cluster_scale 60)" ||
            cluster_fail "h$i never formed"
        cluster_wait_count "$i" '"event":"worker_started"' 2 "$(cluster_scale 20)" ||
            cluster_fail "h$i's workers did not start"
    done
    health_start_agent 2
    cluster_wait 2 '"event":"waiting"' "$(cluster_scale 30)" || cluster_fail "h2 is not waiting as the spare"
    netns_log "h1 and h3 running, h2 waiting as the spare"
}

# health_wait_gone PIDS...: every one has exited (fails the test after 15 s, scaled).
health_wait_gone() {
    local deadline=$(( SECONDS + $(cluster_scale 15) )) pid
    for pid in "$@"; do
        while kill -0 "$pid" 2>/dev/null; do
            [ "$SECONDS" -lt "$deadline" ] || cluster_fail "process $pid outlived the step-aside"
            sleep 0.05
        done
    done
}

# health_spare_takes_over: h2 runs in a generation of 4 with h1, its workers started.
health_spare_takes_over() {
    cluster_wait 2 '"event":"generation_formed".*"world_size":4,' "$(cluster_scale 30)" ||
        cluster_fail "the spare h2 did not join a generation of 4"
    cluster_wait_count 2 '"event":"worker_started"' 2 "$(cluster_scale 20)" ||
        cluster_fail "h2's workers did not start"
}

# A small elasticrun job on simulated hosts, for the fault scenarios in this
# directory: N agents (one per host, 2 workers each, --nnodes=2:N, c10d with
# h1 hosting the store), each writing its own JSONL event log; helpers that
# wait for and time events. Source after netns.sh.

CLUSTER_PORT=${CLUSTER_PORT:-29400}   # inside our private namespaces only
CLUSTER_METRICS_PORT=${CLUSTER_METRICS_PORT:-29401}  # /healthz on each host's loopback
CLUSTER_DIR=${TMPDIR:-/tmp}
CLUSTER_T0=0
declare -a CLUSTER_AGENT_PIDS=()
ELASTICRUN="${ELASTIC_BIN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bin}/elasticrun"

cluster_events() { echo "$CLUSTER_DIR/events.h$1.jsonl"; }
cluster_log() { echo "$CLUSTER_DIR/agent.h$1.log"; }

# cluster_start_agent I [ENDPOINT] [EXTRA_CONF]: starts host I's agent in the background.
cluster_start_agent() {
    local host=$1 endpoint=${2:-"$(netns_addr 1):$CLUSTER_PORT"} conf="last_call_timeout=1,join_timeout=60"
    [ "$host" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    [ -n "${3:-}" ] && conf="$conf,$3"
    rm -f "$(cluster_events "$host")" # events are appended: start from an empty log
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes "2:$NETNS_HOSTS" --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$endpoint" \
        --rdzv-id faults-job --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 3 \
        --event-log "$(cluster_events "$host")" --metrics-port "$CLUSTER_METRICS_PORT" --no-python sleep 600
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# cluster_start_memory_node I COMMAND [ARG]...: host I's agent with the memory
# checkpoint tier (--memory-ckpt, 256 MiB) running COMMAND, for the memory-tier
# and warm-spare scripts. A script describes its job once, before the first call:
#   CLUSTER_JOB_ID      --rdzv-id
#   CLUSTER_JOB_NNODES  --nnodes
#   CLUSTER_JOB_CONF    --rdzv-conf (is_host is added for c10d)
# and may change CLUSTER_JOB_BACKEND (c10d; etcd: its endpoint is h1:2379),
# CLUSTER_JOB_NPROC (--nproc-per-node, 1), CLUSTER_JOB_RESTARTS (--max-restarts, 3)
# CLUSTER_JOB_FLAGS (an array: more elasticrun flags) and CLUSTER_JOB_LOCAL_ADDR
# (1: --local-addr with the host's address; 0: none, the agent finds it).
CLUSTER_JOB_BACKEND=c10d
CLUSTER_JOB_LOCAL_ADDR=1
CLUSTER_JOB_NPROC=1
CLUSTER_JOB_RESTARTS=3
declare -a CLUSTER_JOB_FLAGS=()
cluster_start_memory_node() {
    local host=$1 conf=$CLUSTER_JOB_CONF endpoint="$(netns_addr 1):$CLUSTER_PORT"
    shift
    if [ "$CLUSTER_JOB_BACKEND" = etcd ]; then endpoint="$(netns_addr 1):2379"
    elif [ "$host" = 1 ]; then conf="$conf,is_host=1"
    else conf="$conf,is_host=0"; fi
    local -a addr=(--local-addr "$(netns_addr "$host")")
    [ "$CLUSTER_JOB_LOCAL_ADDR" = 1 ] || addr=()
    rm -f "$(cluster_events "$host")" # events are appended: start from an empty log
    netns_spawn "$host" "$(cluster_log "$host")" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes "$CLUSTER_JOB_NNODES" --nproc-per-node "$CLUSTER_JOB_NPROC" \
        --rdzv-backend "$CLUSTER_JOB_BACKEND" --rdzv-endpoint "$endpoint" --rdzv-id "$CLUSTER_JOB_ID" \
        --rdzv-conf "$conf" ${addr[@]+"${addr[@]}"} --max-restarts "$CLUSTER_JOB_RESTARTS" \
        --memory-ckpt --memory-ckpt-limit 256M --event-log "$(cluster_events "$host")" \
        ${CLUSTER_JOB_FLAGS[@]+"${CLUSTER_JOB_FLAGS[@]}"} "$@"
    CLUSTER_AGENT_PIDS[$host]=$NETNS_LAST_PID
}

# cluster_demo_trainer: the demo trainer's path (fails the test when it is not built).
cluster_demo_trainer() {
    local trainer
    trainer=${ELASTIC_EXAMPLE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/release/examples}/demo_trainer
    [ -x "$ELASTICRUN" ] && [ -x "$trainer" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
    echo "$trainer"
}

# cluster_wait_agent I LIMIT_S: host I's elasticrun exits 0 in time (scaled).
cluster_wait_agent() {
    local deadline=$(( SECONDS + $(cluster_scale "$2") ))
    while kill -0 "${CLUSTER_AGENT_PIDS[$1]}" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || cluster_fail "h$1's job did not finish"
        sleep 0.1
    done
    wait "${CLUSTER_AGENT_PIDS[$1]}" || cluster_fail "h$1's elasticrun failed"
}

# cluster_start N: N hosts, one agent each; waits until all run world size 2*N.
cluster_start() {
    local count=$1 i
    netns_setup "$count"
    [ -x "$ELASTICRUN" ] || { echo "FAIL: no $ELASTICRUN (run make)" >&2; exit 1; }
    for ((i = 1; i <= count; i++)); do cluster_start_agent "$i"; done
    for ((i = 1; i <= count; i++)); do
        cluster_wait "$i" "\"event\":\"generation_formed\".*\"world_size\":$((2 * count))," 60 ||
            cluster_fail "h$i never joined a generation of $count nodes"
    done
    for ((i = 1; i <= count; i++)); do
        cluster_wait_count "$i" '"event":"worker_started"' 2 20 || cluster_fail "h$i's workers did not start"
    done
    netns_log "job running on $count hosts"
}

cluster_fail() {
    local i
    echo "FAIL: $*" >&2
    for ((i = 1; i <= NETNS_HOSTS; i++)); do
        echo "--- h$i events:" >&2; cat "$(cluster_events "$i")" >&2 2>/dev/null
        echo "--- h$i agent output:" >&2; tail -n 20 "$(cluster_log "$i")" >&2 2>/dev/null
    done
    exit 1
}

# cluster_mark: the fault's time (wall ms, the clock of the events' ts_ms).
cluster_mark() { CLUSTER_T0=$(netns_now_ms); }

# cluster_ts I REGEX: ts_ms of host I's first event matching REGEX at or after the mark; "" when none.
cluster_ts() {
    grep -E -- "$2" "$(cluster_events "$1")" 2>/dev/null |
        sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | awk -v t0="$CLUSTER_T0" '$1 >= t0 { print; exit }'
}

# cluster_wait I REGEX TIMEOUT_S: waits for such an event (after the mark).
cluster_wait() {
    local deadline=$(( SECONDS + $3 ))
    until [ -n "$(cluster_ts "$1" "$2")" ]; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# cluster_wait_count I REGEX COUNT TIMEOUT_S: waits for COUNT such events after the mark.
cluster_wait_count() {
    local deadline=$(( SECONDS + $4 ))
    until [ "$(cluster_count "$1" "$2")" -ge "$3" ]; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

cluster_count() {
    grep -E -- "$2" "$(cluster_events "$1")" 2>/dev/null |
        sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | awk -v t0="$CLUSTER_T0" '$1 >= t0' | wc -l
}

# cluster_after I REGEX: ms from the mark to that event (fails the test when absent).
cluster_after() {
    local ts
    ts=$(cluster_ts "$1" "$2")
    [ -n "$ts" ] || cluster_fail "h$1 has no event matching $2"
    echo $(( ts - CLUSTER_T0 ))
}

# cluster_assert_within NAME MS LIMIT_MS: one timing, printed, and bounded.
cluster_assert_within() {
    netns_log "$1: $2 ms (limit $3 ms)"
    [ "$2" -le "$3" ] || cluster_fail "$1 took $2 ms, more than $3 ms"
}

# The bounds scale with ELASTIC_TEST_TIMEOUT_SCALE (sanitizer builds, loaded machines).
cluster_scale() { echo $(( $1 * ${ELASTIC_TEST_TIMEOUT_SCALE:-1} )); }

# cluster_workers_of PID: the pids of the agent's worker processes (its children but the reaper).
cluster_workers_of() { ps --ppid "$1" -o pid=,comm= 2>/dev/null | awk '$2 != "elastic-reaper" { print $1 }'; }

# cluster_healthz_ms I: how long host I's /healthz takes to answer (ms); fails after 2 s.
cluster_healthz_ms() {
    netns_exec "$1" python3 - "$CLUSTER_METRICS_PORT" <<'PY'
import socket, sys, time
t = time.monotonic()
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as c:
    c.sendall(b"GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = c.recv(4096)
        if not chunk:
            break
        data += chunk
assert data.startswith(b"HTTP/1."), data[:80]
print(int((time.monotonic() - t) * 1000))
PY
}

# cluster_metric I NAME: the lines of host I's /metrics that start with NAME.
cluster_metric() {
    netns_exec "$1" python3 - "$CLUSTER_METRICS_PORT" "$2" <<'PY'
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as c:
    c.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
for line in data.decode(errors="replace").splitlines():
    if line.startswith(sys.argv[2]):
        print(line)
PY
}

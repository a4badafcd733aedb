# Simulated hosts for multi-host tests: a shell library (source it from bash).
# Each "host" is a network namespace with one veth link into a bridge that lives
# in a switch namespace of its own; faults (cut, partition, loss, latency) are
# applied inside those namespaces only. Usage and rules: test/netns/README.md.

# Namespace names start with "<tag>-<creator pid>-" so that a sweep can remove
# the ones whose creator died (SIGKILLed test, runner timeout) without touching
# anyone else's. Other branches set NETNS_TAG to their own tag before sourcing.
NETNS_TAG=${NETNS_TAG:-faults}
NETNS_PREFIX="${NETNS_TAG}-$$-"
NETNS_SUBNET=${NETNS_SUBNET:-10.213.$(( $$ % 250 + 1 ))}  # a /24 that exists only in our namespaces
NETNS_HOSTS=0
NETNS_PIDS=()
NETNS_PROXY_PIDS=()

netns_log() { printf '[netns %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }

# netns_skip_unless_able: exits 77 (the runner's "skipped") with the reason
# when this machine cannot make namespaces.
netns_skip_unless_able() {
    if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for ip netns" >&2; exit 77; fi
    local tool
    for tool in ip iptables; do
        command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: $tool is not installed" >&2; exit 77; }
    done
    local probe="${NETNS_PREFIX}probe"
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "SKIP: ip netns add fails here (no CAP_SYS_ADMIN or no netns support)" >&2; exit 77
    fi
    ip netns del "$probe"
}

# netns_sweep_stale: removes namespaces "<tag>-<pid>-*" whose creator pid is gone,
# killing what still runs inside them first.
netns_sweep_stale() {
    local name pid
    for name in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$name" in "${NETNS_TAG}"-[0-9]*-*) ;; *) continue ;; esac
        pid=${name#"${NETNS_TAG}"-}; pid=${pid%%-*}
        [ -d "/proc/$pid" ] && continue
        netns_log "sweeping stale namespace $name (creator $pid is gone)"
        _netns_kill_inside "$name"
        ip netns del "$name" 2>/dev/null || true
    done
}

_netns_kill_inside() {
    local p
    for p in $(ip netns pids "$1" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
}

netns_switch() { echo "${NETNS_PREFIX}sw"; }
netns_name() { echo "${NETNS_PREFIX}h$1"; }
netns_addr() { echo "${NETNS_SUBNET}.$(( $1 + 10 ))"; }

# netns_setup N: N hosts h1..hN on one bridge; installs the teardown trap.
netns_setup() {
    local count=$1 i sw
    [ "$count" -ge 1 ] && [ "$count" -le 32 ] || { netns_log "netns_setup: 1..32 hosts"; return 1; }
    netns_sweep_stale
    trap netns_teardown EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    sw=$(netns_switch)
    ip netns add "$sw" || return 1
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for ((i = 1; i <= count; i++)); do
        ip netns add "$(netns_name "$i")" || return 1
        ip -n "$(netns_name "$i")" link set lo up
        # Both ends are created straight inside the namespaces: nothing appears in the root one.
        ip link add name eth0 netns "$(netns_name "$i")" type veth peer name "p$i" netns "$sw" || return 1
        ip -n "$sw" link set "p$i" master br0
        ip -n "$sw" link set "p$i" up
        ip -n "$(netns_name "$i")" addr add "$(netns_addr "$i")/24" dev eth0
        ip -n "$(netns_name "$i")" link set eth0 up
    done
    NETNS_HOSTS=$count
    netns_log "$count hosts up: $(for ((i = 1; i <= count; i++)); do printf 'h%d=%s ' "$i" "$(netns_addr "$i")"; done)"
}

# netns_teardown: kills everything started in our namespaces and deletes them.
netns_teardown() {
    local i pid
    trap - EXIT
    for pid in "${NETNS_PROXY_PIDS[@]}" "${NETNS_PIDS[@]}"; do
        { kill -KILL "$pid" && wait "$pid"; } 2>/dev/null || true # wait: no "Killed" job notice
    done
    for ((i = 1; i <= NETNS_HOSTS; i++)); do
        _netns_kill_inside "$(netns_name "$i")"
        ip netns del "$(netns_name "$i")" 2>/dev/null || true
    done
    ip netns del "$(netns_switch)" 2>/dev/null || true
    NETNS_HOSTS=0
}

# netns_exec I CMD...: runs CMD on host I in the foreground.
netns_exec() { local host=$1; shift; ip netns exec "$(netns_name "$host")" "$@"; }

# netns_spawn I LOG CMD...: runs CMD on host I in the background, output to LOG;
# sets NETNS_LAST_PID (the command's own pid: ip netns exec execs it).
netns_spawn() {
    local host=$1 log=$2; shift 2
    ip netns exec "$(netns_name "$host")" "$@" >"$log" 2>&1 &
    NETNS_LAST_PID=$!
    NETNS_PIDS+=("$NETNS_LAST_PID")
}

# netns_cut I / netns_heal I: the host's switch port goes down / up (carrier lost).
netns_cut() { ip -n "$(netns_switch)" link set "p$1" down; netns_log "cut h$1"; }
netns_heal() { ip -n "$(netns_switch)" link set "p$1" up; netns_log "healed h$1"; }

# netns_partition I / netns_unpartition I: silent loss of every packet between
# host I and the others (iptables DROP on the receiving side, so senders get
# no error — as with a dead switch port, without carrier news).
netns_partition() {
    local host=$1 i
    netns_exec "$host" iptables -w -I INPUT -i eth0 -j DROP -m comment --comment netns-partition
    for ((i = 1; i <= NETNS_HOSTS; i++)); do
        [ "$i" = "$host" ] && continue
        netns_exec "$i" iptables -w -I INPUT -s "$(netns_addr "$host")" -j DROP -m comment --comment netns-partition
    done
    netns_log "partitioned h$host"
}
netns_unpartition() {
    local host=$1 i
    netns_exec "$host" iptables -w -D INPUT -i eth0 -j DROP -m comment --comment netns-partition
    for ((i = 1; i <= NETNS_HOSTS; i++)); do
        [ "$i" = "$host" ] && continue
        netns_exec "$i" iptables -w -D INPUT -s "$(netns_addr "$host")" -j DROP -m comment --comment netns-partition
    done
    netns_log "unpartitioned h$host"
}

# netns_loss I PROBABILITY: drops that fraction of the packets host I receives
# (0.0-1.0; this kernel has no sch_netem). netns_loss I 0 removes it.
netns_loss() {
    local host=$1 probability=$2 rule
    local -a words
    # Remove an earlier loss rule first (iptables -S prints it as "-A ...").
    while read -r rule; do
        read -ra words <<<"${rule/#-A /-D }"
        netns_exec "$host" iptables -w "${words[@]}"
    done < <(netns_exec "$host" iptables -w -S INPUT | grep -- '--comment netns-loss')
    [ "$probability" = 0 ] && { netns_log "no loss on h$host"; return 0; }
    netns_exec "$host" iptables -w -I INPUT -i eth0 -m comment --comment netns-loss \
        -m statistic --mode random --probability "$probability" -j DROP
    netns_log "loss $probability on h$host"
}

# netns_delay_proxy I LISTEN_PORT TARGET_ADDR TARGET_PORT DELAY_MS: a TCP proxy
# on host I that forwards to the target with DELAY_MS added in each direction
# (build/*/test/helpers/delay_proxy; ELASTIC_HELPER_DIR names the directory).
netns_delay_proxy() {
    local host=$1 port=$2 target=$3 target_port=$4 delay=$5 log
    local helper="${ELASTIC_HELPER_DIR:-build/release/test/helpers}/delay_proxy"
    [ -x "$helper" ] || { netns_log "no $helper (make build/release/test/helpers/delay_proxy)"; return 1; }
    log=$(mktemp "${TMPDIR:-/tmp}/netns-proxy.XXXXXX")
    ip netns exec "$(netns_name "$host")" "$helper" "$(netns_addr "$host")" "$port" "$target" \
        "$target_port" "$delay" >"$log" 2>&1 &
    NETNS_PROXY_PIDS+=("$!")
    # The proxy prints "listening" once bound; wait for it with a deadline.
    local deadline=$(( SECONDS + 10 ))
    until grep -q listening "$log" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || { netns_log "delay proxy did not start: $(cat "$log")"; rm -f "$log"; return 1; }
        kill -0 "${NETNS_PROXY_PIDS[-1]}" 2>/dev/null || { netns_log "delay proxy died: $(cat "$log")"; rm -f "$log"; return 1; }
        sleep 0.05
    done
    rm -f "$log"
    netns_log "delay proxy on h$host:$port -> $target:$target_port (+${delay} ms each way)"
}

# netns_freeze PID SECONDS: SIGSTOP, then SIGCONT after SECONDS in the background.
netns_freeze() {
    kill -STOP "$1" && netns_log "froze pid $1 for $2 s"
    (sleep "$2"; kill -CONT "$1" 2>/dev/null; netns_log "thawed pid $1") &
}

# netns_wait_for FILE PATTERN TIMEOUT_S: waits until grep -E PATTERN FILE matches.
netns_wait_for() {
    local file=$1 pattern=$2 deadline=$(( SECONDS + $3 ))
    until grep -Eq -- "$pattern" "$file" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# netns_reachable FROM TO: true when host FROM gets an answer (even a refusal) from
# host TO's address within 1.5 s (there is no ping here; a TCP connect to a closed
# port is answered by a reset when the path works and by silence when it does not).
netns_reachable() {
    local out
    out=$(netns_exec "$1" timeout 1.5 bash -c "exec 3<>/dev/tcp/$(netns_addr "$2")/9" 2>&1) && return 0
    case "$out" in *refused*) return 0 ;; esac
    return 1
}

# netns_now_ms: wall-clock milliseconds (the agents' event logs use the same clock).
netns_now_ms() { date +%s%3N; }

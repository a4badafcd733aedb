#!/usr/bin/env bash
# Multi-host faults: elasticrun against torchrun (Debian's, python3 -m
# torch.distributed.run), same simulated hosts (test/netns), same worker
# (bench/fault_worker.sh logs its start and stop times), same faults, in the
# same run. Three hosts, 2 workers each, --nnodes=2:3, c10d, h1 hosts the store.
#   FAULTS_WINDOW   seconds to watch after each fault (default 20); no reaction: "never"
# Needs root (network namespaces); prints a skip line otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
NETNS_TAG=faults
. "$root/test/netns/netns.sh"
if [ "$(id -u)" != 0 ]; then echo "run_faults: skipped (needs root for network namespaces)"; exit 0; fi
ELASTICRUN=${ELASTIC_BIN_DIR:-$root/bin}/elasticrun
WINDOW=${FAULTS_WINDOW:-20}
PORT=29400
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/run_faults.XXXXXX")
have_torch=1
"$python" -c "import torch.distributed.run" 2>/dev/null || have_torch=0

# start_agent TOOL HOST: one agent on host HOST.
start_agent() {
    local tool=$1 host=$2 is_host=0 cmd
    [ "$host" = 1 ] && is_host=1
    local endpoint="$(netns_addr 1):$PORT" conf="is_host=$is_host,last_call_timeout=1"
    if [ "$tool" = elastic ]; then
        cmd=("$ELASTICRUN" --nnodes 2:3 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$endpoint"
            --rdzv-id bench --rdzv-conf "$conf" --local-addr "$(netns_addr "$host")" --max-restarts 3
            --event-log "$work/$tool.events.h$host.jsonl" --no-python)
    else # Debian's torch spells its flags with underscores and has no --local-addr
        cmd=("$python" -m torch.distributed.run --nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d
            --rdzv_endpoint "$endpoint" --rdzv_id bench --rdzv_conf "$conf" --max_restarts 3
            --redirects 2 --tee 2 --no_python)
    fi
    netns_spawn "$host" "$work/$tool.agent.h$host.log" env FAULT_LOG="$work/$tool.workers.log" FAULT_HOST="$host" \
        "${cmd[@]}" /bin/sh "$here/fault_worker.sh"
    agent_pid[$host]=$NETNS_LAST_PID
}

# started_ms WORLD AFTER_MS COUNT [HOSTS_RE]: when the COUNT-th worker of that world started after AFTER_MS.
started_ms() {
    awk -v w="world=$1" -v t="$2" -v n="$3" -v h="${4:-.}" '$1 == "start" && $2 >= t && $4 == w && $3 ~ h { c++; if (c == n) { print $2; exit } }' "$log"
}
# stopped_ms AFTER_MS HOSTS_RE: the first stop on those hosts after AFTER_MS.
stopped_ms() { awk -v t="$1" -v h="$2" '$1 == "stop" && $2 >= t && $3 ~ h { print $2; exit }' "$log"; }

# first_event HOSTS(1,2) REGEX: the earliest elasticrun event matching REGEX on those hosts after t0.
first_event() {
    local h files=()
    for h in ${1//,/ }; do files+=("$work/elastic.events.h$h.jsonl"); done
    cat "${files[@]}" 2>/dev/null | grep -E -- "$2" | sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | sort -n |
        awk -v t="$t0" '$1 >= t { print; exit }'
}

since() { if [ -n "$1" ]; then echo "$(( $1 - t0 )) ms"; else echo never; fi; }

# run_fault TOOL FAULT: prints "detected|survivors running|cut-off fenced" for one fault.
run_fault() {
    local tool=$1 fault=$2 i
    log="$work/$tool.workers.log"
    : > "$log"
    rm -f "$work"/"$tool".events.h*.jsonl
    netns_setup 3 >/dev/null 2>&1
    for i in 1 2 3; do start_agent "$tool" "$i"; done
    local deadline=$(( SECONDS + 120 ))
    until [ -n "$(started_ms 6 0 6)" ]; do
        if [ "$SECONDS" -ge "$deadline" ]; then echo "did not start|-|-"; netns_teardown; return; fi
        sleep 0.1
    done
    sleep 1
    t0=$(netns_now_ms)
    case "$fault" in
    kill-node) kill -KILL "${agent_pid[3]}" ;;
    partition) netns_partition 3 2>/dev/null ;;
    freeze) netns_freeze "${agent_pid[3]}" 5 2>/dev/null ;;
    kill-store-host) kill -KILL "${agent_pid[1]}" ;;
    esac
    sleep "$WINDOW"
    local survivors='host=[12]$' cut='host=3$'
    [ "$fault" = kill-store-host ] && survivors='host=[23]$' cut='host=[23]$'
    local detected running fenced
    detected=$(stopped_ms "$t0" "$survivors")
    running=$(started_ms 4 "$t0" 4 "$survivors")
    fenced=$(stopped_ms "$t0" "$cut")
    # elasticrun kills a fenced node's workers at once (SIGKILL: no "stop" line); its event
    # logs say when a generation ended or a node fenced itself.
    if [ "$tool" = elastic ]; then
        local survivor_hosts=1,2 cut_hosts=3
        [ "$fault" = kill-store-host ] && survivor_hosts=2,3 cut_hosts=2,3
        detected=$(first_event "$survivor_hosts" '"event":"(generation_ended|fenced)"')
        fenced=$(first_event "$cut_hosts" '"event":"fenced"')
    fi
    [ "$fault" = kill-node ] && fenced="" # the node is dead: nothing to fence
    local fenced_cell running_cell
    fenced_cell=$(since "$fenced")
    running_cell=$(since "$running")
    [ "$fault" = kill-node ] && fenced_cell="(killed)"
    [ "$fault" = kill-store-host ] && running_cell="(c10d cannot go on)"
    echo "$(since "$detected")|$running_cell|$fenced_cell"
    netns_teardown
}

faults="kill-node partition freeze kill-store-host"
declare -A result
declare -a agent_pid
for fault in $faults; do
    result[elastic,$fault]=$(run_fault elastic "$fault")
    if [ "$have_torch" = 1 ]; then result[torch,$fault]=$(run_fault torch "$fault"); else result[torch,$fault]="no torch|-|-"; fi
done

echo
echo "Multi-host faults: 3 simulated hosts x 2 workers, --nnodes=2:3, c10d (store on h1), default keep-alive;"
echo "times from the fault; window ${WINDOW} s; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| fault | detected after | survivors running again | cut-off node fenced after | torchrun: detected / running again / fenced |"
echo "|---|---|---|---|---|"
for fault in $faults; do
    IFS='|' read -r d r f <<<"${result[elastic,$fault]}"
    IFS='|' read -r td tr tf <<<"${result[torch,$fault]}"
    echo "| $fault | $d | $r | $f | $td / $tr / $tf |"
done
rm -rf "$work"

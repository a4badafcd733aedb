#!/usr/bin/env bash
# make chaos: a seeded random schedule of overlapping faults against the demo
# trainer on simulated hosts, and the invariants it must keep (analyze.py).
#
#   CHAOS_MINUTES=N (default 5)  how long to run: job after job, c10d and etcd in turn
#   CHAOS_SEED=S (default: random, printed)  the schedule; a failing one re-runs from it
#   CHAOS_BACKENDS="c10d etcd"   which backends, in turn
#   CHAOS_STEPS=3000             steps per job (10 ms each, a checkpoint every 10)
#   CHAOS_KEEP=1                 keep the run's directory (kept anyway on failure)
#
# Hosts h1..h4 run the job (--nnodes=4:4, one worker each: the world size, and
# so the bitwise result, never changes), h5 waits as the spare. c10d: h1 hosts
# the store; etcd: a 3-member etcd on h1..h3. The checkpoints live on a small
# tmpfs shared by every host (one directory, as a shared filesystem would be).
# Faults (at most two at once, at most one that takes a node out):
#   worker_kill   SIGKILL a worker            worker_hang  SIGSTOP a worker (--hang-timeout)
#   agent_kill    SIGKILL an agent; a supervisor restarts it 1-3 s later
#   freeze        SIGSTOP every process of a host for 2-5 s
#   partition     a host silently cut off for 2-5 s
#   loss          5 % of a host's packets dropped for 4-10 s (iptables -m statistic)
#   etcd_kill     an etcd member SIGKILLed, restarted 3 s later (etcd only)
#   ckpt_full     the checkpoint filesystem full for 2-4 s
#   store_kill    the store's host agent SIGKILLed (c10d only): the job cannot go on
#                 by design; every agent must fail saying so, then the operator
#                 restarts the job, which resumes from its checkpoint (counted)
#   corrupt       (one job in two, chosen at its start) silent data corruption: the
#                 job also saves to the memory tier every 10 steps and one rank of its
#                 first generation flips a bit of its replicated weights after a step
#                 (demo trainer --corrupt R:S); the save finds the replicas different,
#                 that rank's node steps aside for the spare. Invariant: no diverged
#                 step (nor one trained after it) is ever restored, and the job ends
#                 with the fault-free result (docs/CHECKPOINT.md, "Divergence check")
# Every event, fault and process-table sample goes to the run directory;
# analyze.py checks the invariants and prints the table. Needs root, ip, iptables.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
NETNS_TAG=${NETNS_TAG:-chaos}
. "$root/test/netns/netns.sh"
netns_skip_unless_able

MINUTES=${CHAOS_MINUTES:-5}
SEED=${CHAOS_SEED:-$(( $(date +%s%N) % 1000000 ))}
BACKENDS=${CHAOS_BACKENDS:-"c10d etcd"}
STEPS=${CHAOS_STEPS:-3000}
ELASTICRUN="${ELASTIC_BIN_DIR:-$root/bin}/elasticrun"
TRAINER="${ELASTIC_EXAMPLE_DIR:-$root/build/release/examples}/demo_trainer"
[ -x "$ELASTICRUN" ] && [ -x "$TRAINER" ] || { echo "FAIL: build first (make)" >&2; exit 1; }
if [ "$BACKENDS" != c10d ] && ! command -v etcd >/dev/null 2>&1; then
    echo "SKIP: etcd is not installed (Debian: etcd-server)"; exit 77
fi
RUN=$(mktemp -d "${TMPDIR:-/tmp}/chaos-XXXXXX")
FAULTS=$RUN/faults.tsv   # start_ms end_ms job type host detail
PROCS=$RUN/procs.tsv     # ts_ms job host pid generation
HANG_TIMEOUT=3
PORT=29400
RANDOM=$SEED
REPRO="make chaos CHAOS_MINUTES=$MINUTES CHAOS_SEED=$SEED${CHAOS_BACKENDS:+ CHAOS_BACKENDS=\"$BACKENDS\"}"
export CHAOS_REPRO=$REPRO # analyze.py names it beside a broken invariant
echo "chaos: seed $SEED, $MINUTES min, backends: $BACKENDS, run dir $RUN (re-run: $REPRO)"
# Any failure, the harness's own included (a job that never started), says
# how to reproduce it; the run directory is kept.
say_repro() { echo "chaos: FAILED (exit $1); reproduce with: $REPRO; run directory kept: $RUN" >&2; }
now_ms() { date +%s%3N; }
log() { netns_log "$*"; }

# ---- the fault-free reference: the same trainer standalone, 4 workers ------
mkdir -p "$RUN/clean/ckpt"
trap 'rc=$?; kill -TERM "${CLEAN_PID:-0}" 2>/dev/null || true; [ "$rc" = 0 ] || say_repro "$rc"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$ELASTICRUN" --standalone --nproc-per-node 4 --no-python --log-dir "$RUN/clean/logs" \
    --event-log "$RUN/clean/events.jsonl" "$TRAINER" --ckpt-dir "$RUN/clean/ckpt" \
    --steps "$STEPS" --step-ms 10 --result "$RUN/clean/result.txt" >"$RUN/clean/console.txt" 2>&1 &
CLEAN_PID=$!
wait "$CLEAN_PID" || { echo "FAIL: the fault-free run failed" >&2; cat "$RUN/clean/console.txt" >&2; exit 1; }
CLEAN_PID=
du -sk "$RUN/clean/ckpt" | cut -f1 >"$RUN/clean/ckpt_kib.txt"
before_shm=$(ls /dev/shm 2>/dev/null | sort)

netns_setup 5
CKFS=$RUN/ckptfs
mkdir -p "$CKFS"
mount -t tmpfs -o size=2m,mode=0755 chaos-ckpt "$CKFS"
cleanup_fs() { umount -l "$CKFS" 2>/dev/null || true; }
trap 'rc=$?; netns_teardown; cleanup_fs; [ "$rc" = 0 ] || say_repro "$rc"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

declare -a AGENT=() INCARN=()
# Each agent's exit status, taken as soon as it is gone: bash forgets a
# child's status once a new child of its own gets the same pid, and pids
# wrap within minutes here (pid_max 32768). Waiting only at the job's end
# read 127 for agents that had exited 4 minutes before (a quarantined node
# kept the job open). Key: job.tag.
declare -A AGENT_RC=()
collect_exits() {
    local h key rc
    for h in 1 2 3 4 5; do
        [ -n "${AGENT[$h]:-}" ] || continue
        key="$JOB.h$h.${INCARN[$h]}"
        [ -z "${AGENT_RC[$key]:-}" ] || continue
        alive "${AGENT[$h]}" && continue
        rc=0; wait "${AGENT[$h]}" 2>/dev/null || rc=$?
        AGENT_RC[$key]=$rc
    done
}
JOB=0 BACKEND=c10d JOBDIR=""
ETCD_EPS=""
declare -a ETCD_PID=()

start_agent() { # start_agent HOST
    local h=$1 conf endpoint
    local -a memory=() corrupt=()
    if [ -n "$CORRUPT" ]; then
        # the node that steps aside sits out 2 s, not 5 min, so the job ends in time
        memory=(--memory-ckpt --memory-ckpt-limit 64M --straggler-quarantine 2)
        corrupt=(--memory-every 10 --corrupt "$CORRUPT")
    fi
    INCARN[$h]=$(( ${INCARN[$h]:-0} + 1 ))
    local tag="h$h.${INCARN[$h]}"
    if [ "$BACKEND" = c10d ]; then
        endpoint="$(netns_addr 1):$PORT"
        conf="last_call_timeout=1,join_timeout=300"
        [ "$h" = 1 ] && conf="$conf,is_host=1" || conf="$conf,is_host=0"
    else
        endpoint=$ETCD_EPS
        conf="last_call_timeout=1,join_timeout=300"
    fi
    netns_spawn "$h" "$JOBDIR/agent.$tag.log" env ELASTIC_LOG_LEVEL=warn "$ELASTICRUN" \
        --nnodes 4:4 --nproc-per-node 1 --rdzv-backend "$BACKEND" --rdzv-endpoint "$endpoint" \
        --rdzv-id "chaos-$SEED-$JOB" --rdzv-conf "$conf" --local-addr "$(netns_addr "$h")" \
        --max-restarts 1000 --hang-timeout "$HANG_TIMEOUT" --log-dir "$JOBDIR/logs/$tag" \
        --event-log "$JOBDIR/events.$tag.jsonl" ${memory[@]+"${memory[@]}"} --no-python \
        "$TRAINER" --ckpt-dir "$CKFS/job$JOB" --steps "$STEPS" --step-ms 10 --result "$JOBDIR/result.txt" \
        ${corrupt[@]+"${corrupt[@]}"}
    AGENT[$h]=$NETNS_LAST_PID
    echo "$(now_ms) $tag ${AGENT[$h]}" >>"$JOBDIR/agents.txt"
}

start_etcd() { # start_etcd I: member eI on host I (data kept across restarts)
    local i=$1 a
    a=$(netns_addr "$i")
    netns_spawn "$i" "$JOBDIR/etcd$i.log" etcd --name "e$i" --data-dir "$JOBDIR/etcd$i" \
        --listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
        --listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
        --initial-cluster "e1=http://$(netns_addr 1):2380,e2=http://$(netns_addr 2):2380,e3=http://$(netns_addr 3):2380" \
        --initial-cluster-state new --log-level error
    ETCD_PID[$i]=$NETNS_LAST_PID
}

etcd_up() {
    local deadline=$(( SECONDS + 30 ))
    until netns_exec 4 curl -s -m 1 -d '{"key":"AA=="}' "http://$(netns_addr 1):2379/v3/kv/range" | grep -q header; do
        [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: etcd did not start" >&2; exit 1; }
        sleep 0.1
    done
}

workers_of() { ps --ppid "$1" -o pid=,comm= 2>/dev/null | awk '$2 != "elastic-reaper" { print $1 }'; }

# The process table: every worker on every host with its generation.
sample_procs() {
    local h pid gen t
    t=$(now_ms)
    for h in 1 2 3 4 5; do
        for pid in $(ip netns pids "$(netns_name "$h")" 2>/dev/null); do
            [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = demo_trainer ] || continue
            gen=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | sed -n 's/^ELASTIC_GENERATION=//p' || true)
            echo "$t $JOB $h $pid ${gen:-?}" >>"$PROCS"
        done
        if alive "${AGENT[$h]:-0}"; then
            echo "$t $JOB ${AGENT[$h]} $(ls "/proc/${AGENT[$h]}/fd" 2>/dev/null | wc -l)" >>"$RUN/fds.tsv"
        fi
    done
    # The pass's end: a process read late in it carries the pass's start time
    # (analyze.py allows that much more for two generations seen together).
    echo "$t $(now_ms)" >>"$RUN/passes.tsv"
}

alive() { kill -0 "$1" 2>/dev/null; }
job_done() { # every agent of the job has exited
    local h
    for h in 1 2 3 4 5; do alive "${AGENT[$h]:-0}" && return 1; done
    return 0
}

# ---- faults ----------------------------------------------------------------
declare -a UNDO_AT=() UNDO_CMD=()
ACTIVE=0 NODE_OUT=0
fault() { # fault TYPE HOST DURATION_MS DETAIL: records it
    local t
    t=$(now_ms)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$(( t + $3 ))" "$JOB" "$1" "$2" "$4" >>"$FAULTS"
    log "fault $1 on h$2 for $3 ms ($4)"
}
undo_later() { # undo_later MS CMD: run CMD after MS
    UNDO_AT+=($(( $(now_ms) + $1 )))
    UNDO_CMD+=("$2")
}
run_undos() { # run_undos [all]: the undos that are due (all of them with "all")
    local i t
    t=$(now_ms)
    for i in "${!UNDO_AT[@]}"; do
        if [ "${1:-}" = all ] || [ "${UNDO_AT[$i]}" -le "$t" ]; then
            eval "${UNDO_CMD[$i]}"
            unset "UNDO_AT[$i]" "UNDO_CMD[$i]"
        fi
    done
}
pick() { echo $(( RANDOM % $1 )); }

# host_with_worker: a host (from the seed's pick) whose agent runs a worker; "" if none.
host_with_worker() {
    local first i h
    first=$(( $(pick 5) + 1 ))
    for i in 0 1 2 3 4; do
        h=$(( (first + i - 1) % 5 + 1 ))
        [ "$BACKEND" = c10d ] && [ "$h" = 1 ] && continue
        [ -n "$(workers_of "${AGENT[$h]:-0}")" ] && { echo "$h"; return; }
    done
}

# A host for a fault that takes it out: not the c10d store host; on etcd
# not a second etcd member's host while one is out (a 3-member etcd keeps
# quorum through one loss: two at once is no fault HA promises to survive).
node_out_host() {
    if [ "$BACKEND" = c10d ]; then echo $(( $(pick 4) + 2 ))
    elif [ "$ETCD_OUT" -gt 0 ]; then echo $(( $(pick 2) + 4 ))
    else echo $(( $(pick 5) + 1 )); fi
}
ETCD_OUT=0
etcd_host() { [ "$BACKEND" = etcd ] && [ "$1" -le 3 ]; }

freeze_host() {
    local pids
    pids=$(ip netns pids "$(netns_name "$1")" | tr '\n' ' ')
    # shellcheck disable=SC2086
    kill -STOP $pids 2>/dev/null || true
    undo_later "$2" "kill -CONT $pids 2>/dev/null || true; NODE_OUT=0; ACTIVE=\$((ACTIVE - 1)); log 'thawed h$1'"
}

store_kill() {
    run_undos all # the operator's restart starts from a quiet cluster
    fault store_kill 1 0 "agent ${AGENT[1]}"
    kill -9 "${AGENT[1]}" 2>/dev/null || true
    local h deadline=$(( SECONDS + 60 ))
    for h in 2 3 4 5; do
        while alive "${AGENT[$h]}"; do
            [ "$SECONDS" -lt "$deadline" ] || { log "h$h still runs 60 s after the store's host died"; echo "$(now_ms) h$h.${INCARN[$h]} still_running_after_store_kill" >>"$JOBDIR/notes.txt"; kill -9 "${AGENT[$h]}"; }
            sleep 0.1
        done
    done
    local rc
    for h in 2 3 4 5; do
        rc=0; wait "${AGENT[$h]}" 2>/dev/null || rc=$?
        echo "h$h.${INCARN[$h]} $rc store_kill" >>"$JOBDIR/exits.txt"
    done
    echo "$(now_ms) operator_restart" >>"$JOBDIR/notes.txt"
    log "every agent is down: the operator restarts the job from its checkpoint"
    for h in 1 2 3 4; do start_agent "$h"; done
    sleep 0.5 # h1's store listens first; the others retry anyway
    start_agent 5
    STORE_KILLS=$(( STORE_KILLS + 1 ))
}

inject() {
    local types="worker_kill worker_hang agent_kill freeze partition loss ckpt_full"
    [ "$BACKEND" = etcd ] && types="$types etcd_kill etcd_kill"
    [ "$BACKEND" = c10d ] && [ "$STORE_KILLS" = 0 ] && types="$types store_kill"
    # shellcheck disable=SC2206
    local list=($types) type h d
    type=${list[$(pick ${#list[@]})]}
    case $type in
    agent_kill | freeze | partition | store_kill) [ "$NODE_OUT" = 0 ] || type=worker_kill ;;
    esac
    case $type in
    worker_kill | worker_hang)
        h=$(host_with_worker || true) # none while every node restarts
        [ -n "$h" ] || return 0
        local w
        w=$(workers_of "${AGENT[$h]}" | head -1 || true)
        [ -n "$w" ] || return 0
        if [ "$type" = worker_kill ]; then
            fault worker_kill "$h" 0 "pid $w"; kill -9 "$w" 2>/dev/null || true
        else
            fault worker_hang "$h" $(( HANG_TIMEOUT * 1000 )) "pid $w"; kill -STOP "$w" 2>/dev/null || true
            undo_later 10000 "kill -CONT $w 2>/dev/null || true"
        fi ;;
    agent_kill)
        h=$(node_out_host); d=$(( 1000 + $(pick 2000) ))
        fault agent_kill "$h" "$d" "agent ${AGENT[$h]}"
        kill -9 "${AGENT[$h]}" 2>/dev/null || true
        NODE_OUT=1; ACTIVE=$(( ACTIVE + 1 ))
        undo_later "$d" "start_agent $h; NODE_OUT=0; ACTIVE=\$((ACTIVE - 1)); log 'supervisor restarted h$h'" ;;
    freeze)
        h=$(node_out_host); d=$(( 2000 + $(pick 3000) ))
        fault freeze "$h" "$d" ""
        NODE_OUT=1; ACTIVE=$(( ACTIVE + 1 ))
        if etcd_host "$h"; then ETCD_OUT=$(( ETCD_OUT + 1 )); undo_later "$d" "ETCD_OUT=\$((ETCD_OUT - 1))"; fi
        freeze_host "$h" "$d" ;;
    partition)
        h=$(node_out_host); d=$(( 2000 + $(pick 3000) ))
        fault partition "$h" "$d" ""
        netns_partition "$h"
        NODE_OUT=1; ACTIVE=$(( ACTIVE + 1 ))
        if etcd_host "$h"; then ETCD_OUT=$(( ETCD_OUT + 1 )); undo_later "$d" "ETCD_OUT=\$((ETCD_OUT - 1))"; fi
        undo_later "$d" "netns_unpartition $h; NODE_OUT=0; ACTIVE=\$((ACTIVE - 1))" ;;
    loss)
        h=$(( $(pick 5) + 1 )); d=$(( 4000 + $(pick 6000) ))
        fault loss "$h" "$d" "5%"
        netns_loss "$h" 0.05
        ACTIVE=$(( ACTIVE + 1 ))
        undo_later "$d" "netns_loss $h 0; ACTIVE=\$((ACTIVE - 1))" ;;
    ckpt_full)
        d=$(( 2000 + $(pick 2000) ))
        fault ckpt_full 0 "$d" "tmpfs $CKFS"
        dd if=/dev/zero of="$CKFS/filler" bs=64k 2>/dev/null || true
        ACTIVE=$(( ACTIVE + 1 ))
        undo_later "$d" "rm -f '$CKFS/filler'; ACTIVE=\$((ACTIVE - 1))" ;;
    etcd_kill)
        h=$(( $(pick 3) + 1 ))
        alive "${ETCD_PID[$h]:-0}" || return 0
        [ "$ETCD_OUT" = 0 ] || return 0
        ETCD_OUT=1
        fault etcd_kill "$h" 3000 "member e$h"
        kill -9 "${ETCD_PID[$h]}" 2>/dev/null || true
        ACTIVE=$(( ACTIVE + 1 ))
        undo_later 3000 "start_etcd $h; ETCD_OUT=0; ACTIVE=\$((ACTIVE - 1))" ;;
    store_kill) store_kill ;;
    esac
}

# ---- one job ---------------------------------------------------------------
run_job() {
    JOB=$(( JOB + 1 )) BACKEND=$1
    JOBDIR=$RUN/job$JOB
    mkdir -p "$JOBDIR" "$CKFS/job$JOB"
    echo "$BACKEND" >"$JOBDIR/backend"
    STORE_KILLS=0 NODE_OUT=0 ACTIVE=0 ETCD_OUT=0
    UNDO_AT=() UNDO_CMD=() INCARN=() AGENT=()
    CORRUPT=""
    if [ "$(pick 2)" = 0 ]; then # silent data corruption in this job's first generation
        CORRUPT="$(pick 4):$(( (5 + $(pick 20)) * 10 ))"
        fault corrupt 0 0 "rank ${CORRUPT%%:*} after step ${CORRUPT#*:}"
    fi
    if [ "$BACKEND" = etcd ]; then
        ETCD_EPS="$(netns_addr 1):2379,$(netns_addr 2):2379,$(netns_addr 3):2379"
        local i
        for i in 1 2 3; do start_etcd "$i"; done
        etcd_up
    fi
    local h
    for h in 1 2 3 4; do start_agent "$h"; done
    local deadline=$(( SECONDS + 60 ))
    until [ "$(cat "$JOBDIR"/events.h[1-4].1.jsonl 2>/dev/null | grep -c '"event":"worker_started"')" -ge 4 ]; do
        [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: job $JOB never started" >&2; exit 1; }
        sleep 0.1
    done
    start_agent 5
    log "job $JOB ($BACKEND): h1..h4 running, h5 the spare"
    local next=$(( $(now_ms) + 2000 + $(pick 3000) )) last_sample=0 t
    deadline=$(( SECONDS + 600 ))
    while ! job_done; do
        [ "$SECONDS" -lt "$deadline" ] || { log "job $JOB: still running after 600 s"; echo "$(now_ms) job_timeout" >>"$JOBDIR/notes.txt"; break; }
        t=$(now_ms)
        # Rank 0 wrote the result: the job is ending; every fault is lifted so
        # each node can learn the outcome (a node cut off then cannot: c10d's
        # host stops serving once the job is closed).
        if [ -f "$JOBDIR/result.txt" ]; then run_undos all; else run_undos; fi
        if [ "$t" -ge "$next" ]; then
            # no new fault once rank 0 wrote the result: the job is ending
            # (a process gone between look and act is no reason to stop the run)
            [ -f "$JOBDIR/result.txt" ] || [ "$ACTIVE" -ge 2 ] || inject || log "fault not injected"
            next=$(( $(now_ms) + 1500 + $(pick 4000) ))
        fi
        if [ $(( t - last_sample )) -ge 250 ]; then sample_procs; last_sample=$t; fi
        collect_exits
        sleep 0.05
    done
    run_undos all
    local rc
    for h in 1 2 3 4 5; do # the last incarnation's exit code (a job timeout kills it)
        if alive "${AGENT[$h]}"; then kill -9 "${AGENT[$h]}" 2>/dev/null || true; fi
        rc=${AGENT_RC[$JOB.h$h.${INCARN[$h]}]:-}
        [ -n "$rc" ] || { rc=0; wait "${AGENT[$h]}" 2>/dev/null || rc=$?; }
        echo "h$h.${INCARN[$h]} $rc" >>"$JOBDIR/exits.txt"
    done
    if [ "$BACKEND" = etcd ]; then for h in 1 2 3; do kill -9 "${ETCD_PID[$h]:-0}" 2>/dev/null || true; done; fi
    sleep 0.2
    ps -eo pid=,comm= | awk '$2 == "demo_trainer" || $2 == "elasticrun" || $2 == "elastic-reaper" { print $1 }' |
        while read -r p; do
            if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -q "chaos-$SEED-$JOB\|$CKFS"; then echo "$p"; fi
        done >"$JOBDIR/orphans.txt" || true
    # What the job leaves in its checkpoint directory: temporary files, and
    # its size (a fenced generation's shards once filled the shared fs).
    echo "$(find "$CKFS/job$JOB" -name '.tmp*' 2>/dev/null | wc -l) $(du -sk "$CKFS/job$JOB" 2>/dev/null | cut -f1)" >"$JOBDIR/ckpt_left.txt"
    rm -rf "${CKFS:?}/job$JOB" # the small shared fs holds one job's checkpoints, not the run's
    log "job $JOB done: $(cat "$JOBDIR/result.txt" 2>/dev/null || echo 'no result')"
}

start_s=$SECONDS
# shellcheck disable=SC2206
backs=($BACKENDS)
n=0
while [ $(( SECONDS - start_s )) -lt $(( MINUTES * 60 )) ] || [ "$n" -lt "${#backs[@]}" ]; do
    run_job "${backs[$(( n % ${#backs[@]} ))]}"
    n=$(( n + 1 ))
    [ "${CHAOS_ONE_JOB:-0}" = 1 ] && break
done
netns_teardown
trap - EXIT INT TERM
cleanup_fs
rmdir "$CKFS" 2>/dev/null || true
after_shm=$(ls /dev/shm 2>/dev/null | sort)
comm -13 <(echo "$before_shm") <(echo "$after_shm") >"$RUN/leaked_shm.txt" || true
ip netns list 2>/dev/null | grep -F "$NETNS_PREFIX" >"$RUN/leaked_netns.txt" || true
rc=0
ELASTIC_BIN_DIR=$(dirname "$ELASTICRUN") python3 "$here/analyze.py" "$RUN" "$SEED" "$HANG_TIMEOUT" || rc=$?
if [ "$rc" = 0 ] && [ "${CHAOS_KEEP:-0}" != 1 ]; then rm -rf "$RUN"; else echo "chaos: run directory kept: $RUN"; fi
exit "$rc"

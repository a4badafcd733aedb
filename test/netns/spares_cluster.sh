# Helpers for the warm-spare scenarios across hosts (warm_spares.sh,
# warm_spares_torch.sh): two agents with --in-process-recovery --warm-spares 1
# and the memory tier; which host runs which rank is read from the events (the
# rendezvous chooses). Source after netns.sh and cluster.sh.

declare -A SPARES_PID SPARES_HOST # rank -> its generation-1 pid, its host

# spares_event_pid I REGEX...: the pid of host I's first event matching every REGEX ("" when none).
spares_event_pid() {
    local host=$1 lines pattern
    shift
    lines=$(cat "$(cluster_events "$host")" 2>/dev/null)
    for pattern in "$@"; do lines=$(grep -E -- "$pattern" <<<"$lines" || true); done
    sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$lines" | head -1
}

# spares_ranks WORLD: fills SPARES_PID and SPARES_HOST from generation 1's worker_started events.
spares_ranks() {
    local rank i pid
    for ((rank = 0; rank < $1; rank++)); do
        for i in 1 2; do
            pid=$(spares_event_pid "$i" '"event":"worker_started"' '"generation":1,' "\"rank\":$rank,")
            if [ -n "$pid" ]; then SPARES_PID[$rank]=$pid; SPARES_HOST[$rank]=$i; fi
        done
        [ -n "${SPARES_PID[$rank]:-}" ] || cluster_fail "no pid for rank $rank"
    done
}

# spares_victim WORLD: the highest rank on h2.
spares_victim() {
    local rank
    for ((rank = $1 - 1; rank >= 0; rank--)); do
        [ "${SPARES_HOST[$rank]}" = 2 ] && { echo "$rank"; return; }
    done
    cluster_fail "h2 runs no rank"
}

# spares_check_recovery WORLD VICTIM PARKED: after the kill, h2's parked spare
# took VICTIM's rank, every other rank was reconfigured in its own process,
# and every rank restored the same step from local memory.
spares_check_recovery() {
    local world=$1 victim=$2 parked=$3 promoted rank i steps
    cluster_wait 2 "\"event\":\"spare_promoted\".*\"rank\":$victim," 60 || cluster_fail "h2's spare did not take rank $victim"
    promoted=$(spares_event_pid 2 '"event":"spare_promoted"')
    [ "$promoted" = "$parked" ] ||
        cluster_fail "rank $victim went to pid $promoted, not the spare parked before the kill ($parked)"
    for ((rank = 0; rank < world; rank++)); do
        [ "$rank" = "$victim" ] && continue
        cluster_wait "${SPARES_HOST[$rank]}" \
            "\"event\":\"worker_reconfigured\".*\"rank\":$rank,.*\"pid\":${SPARES_PID[$rank]}[,}]" 60 ||
            cluster_fail "rank $rank (pid ${SPARES_PID[$rank]}) was not reconfigured in place"
    done
    for i in 1 2; do
        cluster_wait_count "$i" '"event":"checkpoint_restored".*"source":"local"' $(( world / 2 )) 60 ||
            cluster_fail "h$i's ranks did not restore from local memory"
    done
    steps=$(for i in 1 2; do grep -E '"event":"checkpoint_restored"' "$(cluster_events "$i")"; done |
            sed -n 's/.*"step":\([0-9]*\).*/\1/p' | sort -u)
    [ "$(wc -l <<<"$steps")" = 1 ] || cluster_fail "the ranks restored different steps: $steps"
    SPARES_RESTORED_STEP=$steps
}

# spares_job ID JOIN_TIMEOUT_S: the job both hosts run (cluster_start_memory_node's
# settings): 2 ranks and 1 warm spare per host, in-process recovery.
spares_job() {
    CLUSTER_JOB_ID=$1 CLUSTER_JOB_NNODES=2:2 CLUSTER_JOB_NPROC=2
    CLUSTER_JOB_CONF="last_call_timeout=1,join_timeout=$2"
    CLUSTER_JOB_FLAGS=(--in-process-recovery --warm-spares 1)
}

# spares_wait_running LIMIT_S SAVES_LIMIT_S: on both hosts the world of 4 formed, the spare
# parked and the memory saves began.
spares_wait_running() {
    local i
    for i in 1 2; do
        cluster_wait "$i" '"event":"generation_formed".*"world_size":4,' "$1" || cluster_fail "h$i never joined"
        cluster_wait "$i" '"event":"spare_parked"' "$1" || cluster_fail "h$i's spare never parked"
        cluster_wait_count "$i" '"event":"checkpoint_saved".*"tier":"memory"' 2 "$2" || cluster_fail "h$i saved nothing"
    done
}

# spares_kill_and_check_recovery AGENT_LIMIT_S: SIGKILLs h2's highest rank
# once h2's spare parked (which host runs which rank is read from the events),
# checks the recovery (spares_check_recovery), waits for both agents to exit 0
# and that nothing was cold-started. Sets SPARES_PARKED (the spare's pid).
spares_kill_and_check_recovery() {
    local victim i
    spares_ranks 4
    victim=$(spares_victim 4)
    SPARES_PARKED=$(spares_event_pid 2 '"event":"spare_parked"')
    cluster_mark
    netns_log "killing rank $victim (pid ${SPARES_PID[$victim]}) on h2; h2's parked spare is pid $SPARES_PARKED"
    kill -KILL "${SPARES_PID[$victim]}"
    spares_check_recovery 4 "$victim" "$SPARES_PARKED"
    for i in 1 2; do cluster_wait_agent "$i" "$1"; done
    spares_none_cold_started
}

# spares_none_cold_started: no worker process was started after generation 1.
spares_none_cold_started() {
    local i
    for i in 1 2; do
        if grep -E '"event":"worker_started"' "$(cluster_events "$i")" | grep -vq '"generation":1,'; then
            cluster_fail "h$i cold-started a worker after the kill"
        fi
    done
}

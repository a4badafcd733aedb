#!/usr/bin/env bash
# The elastic demo (make demo): 4 workers of a deterministic data-parallel
# trainer under `elasticrun --standalone`; one worker is SIGKILLed midway, the
# group restarts from the last checkpoint and finishes. A second run without
# the failure must end with exactly the same weights. The agents hold a memory
# checkpoint tier (--memory-ckpt): the trainer saves every step to memory
# (--memory-every 1, with a per-rank 1 MiB shard it checks after the restore)
# and every 10 to disk, so the killed worker's group resumes from local
# memory, one step back at most. DEMO_TRAINER names another build of the same
# trainer (make demo TRAINER=rust: examples/rust; it saves to disk only).
set -euo pipefail

bin_dir=${ELASTIC_BIN_DIR:-$(dirname "$0")/../bin}
example_dir=${ELASTIC_EXAMPLE_DIR:-$(dirname "$0")/../build/release/examples}
trainer=${DEMO_TRAINER:-$example_dir/demo_trainer}
steps=${DEMO_STEPS:-300}
kill_at=$((steps / 2))
work=$(mktemp -d "${TMPDIR:-/tmp}/elastic-demo-XXXXXX")
trap 'rm -rf "$work"' EXIT

# A field of the first event line matching a pattern: field EVENTS PATTERN KEY
field() {
    # no such event is an empty field, not an error (a trainer without the memory tier)
    { grep -m1 -- "$2" "$1" || true; } | sed -n "s/.*\"$3\":\"\{0,1\}\([^,\"}]*\).*/\1/p"
}

# Waits (up to 60 s) until a file matching a glob contains a line matching a pattern.
wait_for_line() {
    local glob=$1 pattern=$2
    for _ in $(seq 1 6000); do
        # shellcheck disable=SC2086
        if grep -qs -- "$pattern" $glob; then return 0; fi
        sleep 0.01
    done
    echo "demo: timed out waiting for '$pattern' in $glob" >&2
    return 1
}

memory_flag="--memory-ckpt"
memory_args="--memory-every 1 --state-mib 1"
# A trainer without the memory tier's flags saves to disk only (both the C
# and the Rust trainer have them).
if ! grep -q -a -- "--memory-every" "$trainer"; then memory_flag=""; memory_args=""; fi

run_job() { # run_job NAME KILL(0|1) [ELASTICRUN FLAGS...]
    local dir=$work/$1 kill_one=$2
    shift 2
    mkdir -p "$dir/ckpt"
    # shellcheck disable=SC2086
    "$bin_dir/elasticrun" --standalone --nproc-per-node=4 --max-restarts=3 $memory_flag "$@" \
        --log-dir "$dir/logs" --event-log "$dir/events.jsonl" --no-python \
        "$trainer" --ckpt-dir "$dir/ckpt" --steps "$steps" --result "$dir/result.txt" $memory_args \
        >"$dir/console.txt" 2>&1 &
    local agent=$!
    if [ "$kill_one" = 1 ]; then
        wait_for_line "$dir/logs/*/gen_1/rank_0/stdout.log" "^step $kill_at "
        # Rank 0's line comes after its own save; the step is the job's once
        # every rank saved it and it is committed (on a busy machine a rank
        # may still be saving it).
        wait_for_file "$dir/ckpt/step-$(printf %020d "$kill_at")/COMMIT"
        local victim
        victim=$(grep '"event":"worker_started"' "$dir/events.jsonl" | grep '"generation":1,' | grep '"rank":2,' |
                 sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
        # With the memory tier, a few steps past the disk checkpoint: only memory has them.
        [ -n "$memory_flag" ] && sleep 0.05
        echo "  killing rank 2 (pid $victim) with SIGKILL after step $kill_at${memory_flag:+ and a few more}"
        kill -9 "$victim"
    fi
    if ! wait "$agent"; then
        echo "demo: elasticrun failed:" >&2
        cat "$dir/console.txt" >&2
        exit 1
    fi
}

# Waits (up to 60 s) until a file exists.
wait_for_file() {
    for _ in $(seq 1 6000); do
        if [ -e "$1" ]; then return 0; fi
        sleep 0.01
    done
    echo "demo: timed out waiting for $1" >&2
    return 1
}

seconds_since_start() { # seconds_since_start EVENTS TS_MS
    local start
    start=$(field "$1" '"event":"agent_started"' ts_ms)
    awk -v a="$start" -v b="$2" 'BEGIN { printf "%6.3f s", (b - a) / 1000 }'
}

echo "elastic demo: 4 workers, $steps steps, a checkpoint every 10 steps${memory_flag:+ on disk and every step in memory}"
echo
echo "run 1: a worker is killed midway"
run_job faulty 1
events=$work/faulty/events.jsonl
failure_ts=$(field "$events" '"event":"failure"' ts_ms)
restart_ts=$(field "$events" '"event":"restarted"' ts_ms)
recovery_ms=$(field "$events" '"event":"restarted"' recovery_ms)
end_ts=$(field "$events" '"event":"job_end"' ts_ms)
resumed=$(grep -h -m1 '^resumed at step' "$work"/faulty/logs/*/gen_2/rank_0/stdout.log | awk '{print $4}')
echo "  $(seconds_since_start "$events" "$failure_ts")  failure detected: rank $(field "$events" '"event":"failure"' rank), $(field "$events" '"event":"failure"' reason)"
echo "  $(seconds_since_start "$events" "$restart_ts")  group restarted: generation 2, all 4 workers running ${recovery_ms} ms after the failure"
source=$(field "$events" '"event":"checkpoint_restored"' source)
from_node=$(field "$events" '"event":"checkpoint_restored"' from_node)
restored_ms=$(field "$events" '"event":"checkpoint_restored"' ms)
if [ "$source" = disk ]; then
    echo "  $(seconds_since_start "$events" "$restart_ts")  resumed at step $resumed from disk in ${restored_ms} ms"
elif [ -n "$source" ]; then
    echo "  $(seconds_since_start "$events" "$restart_ts")  resumed at step $resumed from $source memory${from_node:+ (node $from_node)} in ${restored_ms} ms (the last disk checkpoint: step $kill_at)"
else
    echo "  $(seconds_since_start "$events" "$restart_ts")  resumed at step $resumed (the last checkpoint)"
fi
echo "  $(seconds_since_start "$events" "$end_ts")  finished: $(cat "$work/faulty/result.txt")"
echo
echo "run 2: the same job without the failure"
run_job clean 0
echo "  finished: $(cat "$work/clean/result.txt")"
echo
if cmp -s "$work/faulty/result.txt" "$work/clean/result.txt"; then
    echo "same final result with and without the failure: yes"
else
    echo "same final result with and without the failure: NO" >&2
    exit 1
fi
# A trainer with the memory tier (the C one, the Rust one on elastic::run_loop)
# also recovers in place and parks as a warm spare.
if [ -n "$memory_flag" ]; then
    echo
    echo "run 3: the same failure with --in-process-recovery --warm-spares=1"
    # With the memory tier too: a survivor's save that waits for the killed
    # rank's shard ends with the generation (the step is abandoned), and every
    # rank, the promoted spare too, restores the job's agreed step.
    run_job spare 1 --in-process-recovery --warm-spares=1
    events=$work/spare/events.jsonl
    parked=$(field "$events" '"event":"spare_parked"' pid)
    promoted=$(field "$events" '"event":"spare_promoted"' pid)
    phases=$(grep -m1 '"event":"recovery_phases"' "$events" | sed 's/.*"complete":[01],//; s/[{}"]//g; s/,/, /g')
    echo "  the spare parked before the kill (pid $parked) took rank 2: promoted pid $promoted; the other 3 kept their processes"
    # The promoted spare's restore (rank 2 of generation 2): the step and tier.
    grep '"event":"checkpoint_restored"' "$events" | grep '"generation":2,' | grep '"rank":2,' >"$work/spare/restored.jsonl" || true
    spare_step=$(field "$work/spare/restored.jsonl" checkpoint_restored step)
    spare_source=$(field "$work/spare/restored.jsonl" checkpoint_restored source)
    case "$spare_source" in local | peer) spare_source="$spare_source memory" ;; esac
    [ -n "$spare_step" ] && echo "  the promoted spare restored step $spare_step from $spare_source, like the survivors"
    echo "  recovery phases (ms): $phases"
    echo "  finished: $(cat "$work/spare/result.txt")"
    if cmp -s "$work/spare/result.txt" "$work/clean/result.txt" && [ "$parked" = "$promoted" ]; then
        echo "same final result with a warm spare: yes"
    else
        echo "same final result with a warm spare: NO" >&2
        exit 1
    fi
fi

#!/usr/bin/env bash
# Silent data corruption on one of three simulated hosts (issue 36): the demo
# trainer (20 ms steps, a memory save every 10 steps) runs with --corrupt 2:120:
# rank 2 flips one bit of its replicated weights after training step 120. The
# save of step 120 finds the replicas different: every node journals
# replica_divergence naming rank 2, its node and the majority; the step is
# committed nowhere; rank 2's node steps aside (no restart budget spent), the
# waiting spare takes its place; the job restores a step before 120 (never the
# diverged one) and ends with a fault-free run's weights. Prints the time from
# the corrupting step's save to the spare's workers training.
# DIVERGENCE_TIER=disk: the same with the disk checkpoint committed through the
# store (--store-commit, a disk save every 10 steps, no memory tier).
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-sdc}
DIVERGENCE_TIER=${DIVERGENCE_TIER:-memory}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
netns_setup 4
TRAINER=$(cluster_demo_trainer)
ckpt=$CLUSTER_DIR/ckpt
mkdir -p "$ckpt"
CLUSTER_JOB_ID=sdc-job CLUSTER_JOB_NNODES=3:3
CLUSTER_JOB_CONF="last_call_timeout=1,join_timeout=60"
CLUSTER_JOB_FLAGS=(--no-python --straggler-quarantine 2)
steps=(--steps 200 --step-ms 20 --result "$CLUSTER_DIR/result.txt")
if [ "$DIVERGENCE_TIER" = disk ]; then
    trainer_flags=(--ckpt-dir "$ckpt" --ckpt-every 10 --store-commit "${steps[@]}" --corrupt 2:120)
    start_node() { # the memory tier's start without the tier: the disk commit goes through the store
        cluster_start_memory_node "$1" "$TRAINER" "${trainer_flags[@]}"
    }
else
    trainer_flags=(--ckpt-dir "$ckpt" --ckpt-every 100000 --memory-every 10 "${steps[@]}" --corrupt 2:120)
    start_node() { cluster_start_memory_node "$1" "$TRAINER" "${trainer_flags[@]}"; }
fi

# The fault-free result first: the trainer's weights are the same bits at any world size.
"$ELASTICRUN" --standalone --nproc-per-node 1 --no-python "$TRAINER" --ckpt-dir "$CLUSTER_DIR/clean" \
    --steps 200 --step-ms 0 --result "$CLUSTER_DIR/clean.txt" >"$CLUSTER_DIR/clean.log" 2>&1 ||
    cluster_fail "the fault-free run failed"

for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":3,' 60 || cluster_fail "h$i never joined"
done
start_node 4 # the spare: waits, the job is full
# The host running rank 2 in generation 1.
faulty=
for i in 1 2 3; do
    cluster_wait "$i" '"event":"worker_started"' 20 || cluster_fail "h$i's worker did not start"
    grep -qE '"event":"worker_started".*"generation":1,.*"rank":2,' "$(cluster_events "$i")" && faulty=$i
done
[ -n "$faulty" ] || cluster_fail "no host runs rank 2"
# Every node learns it with the evidence: the minority's host from its own
# rank's commit; another host either the same way or, when the minority's
# host ended the generation before its own rank's commit reported (a slow
# machine, TSan), from that generation's end, which carries the evidence.
cluster_wait "$faulty" '"event":"replica_divergence".*"step":120,' 60 ||
    cluster_fail "h$faulty journaled no divergence at step 120"
for i in 1 2 3; do
    cluster_wait "$i" '"event":"replica_divergence".*"step":120,|"event":"generation_ended".*silent data corruption: step 120: .*rank 2 \(' 60 ||
        cluster_fail "h$i learned of no divergence at step 120"
    # (|| true: under pipefail a grep that finds nothing would end the script
    # silently, and a host that learned it from the generation's end has none)
    line=$(grep -E '"event":"replica_divergence"' "$(cluster_events "$i")" | head -1 || true)
    [ -n "$line" ] || continue
    echo "$line" | grep -q '"minority_ranks":"2"' || cluster_fail "h$i: not rank 2: $line"
    echo "$line" | grep -q '"majority":2,' || cluster_fail "h$i: no majority of 2: $line"
    echo "$line" | grep -q "\"tier\":\"$DIVERGENCE_TIER\"" || cluster_fail "h$i: tier: $line"
done
grep -q 'silent data corruption' "$(cluster_log "$faulty")" ||
    cluster_fail "h$faulty's console does not say it"
cluster_wait "$faulty" '"event":"health_stepped_aside".*"replacement":"[^"]' 30 ||
    cluster_fail "h$faulty did not step aside for the spare"
cluster_wait 4 '"event":"generation_formed".*"world_size":3,.*"restart_count":0' 60 ||
    cluster_fail "the spare did not join without spending budget"
cluster_wait 4 '"event":"worker_started"' 30 || cluster_fail "the spare's worker did not start"
# Never the diverged step: every node restores the same step, below 120.
for i in 1 2 3 4; do
    [ "$i" = "$faulty" ] && continue
    cluster_wait "$i" '"event":"checkpoint_restored"' 60 || cluster_fail "h$i restored nothing"
    step=$(grep -E '"event":"checkpoint_restored"' "$(cluster_events "$i")" | sed -n 's/.*"step":\([0-9]*\).*/\1/p' | head -1)
    [ "$step" -lt 120 ] || cluster_fail "h$i restored step $step (the divergence was at 120)"
done
for i in 1 2 3 4; do
    [ "$i" = "$faulty" ] && continue
    cluster_wait_agent "$i" 120
done
cmp -s "$CLUSTER_DIR/clean.txt" "$CLUSTER_DIR/result.txt" ||
    cluster_fail "weights differ from the fault-free run: $(cat "$CLUSTER_DIR/result.txt") vs $(cat "$CLUSTER_DIR/clean.txt")"
found=$(grep -E '"event":"replica_divergence"' "$(cluster_events "$faulty")" | sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | head -1)
training=$(grep -E '"event":"steps_started".*"generation":2,' "$(cluster_events 4)" | sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | head -1) || true
[ -n "$training" ] || training=$(grep -E '"event":"worker_started"' "$(cluster_events 4)" | sed -n 's/^{"ts_ms":\([0-9]*\),.*/\1/p' | head -1)
netns_log "divergence found -> the spare training: $(( training - found )) ms"
echo "divergence ($DIVERGENCE_TIER): rank 2 on h$faulty replaced, the spare training $(( training - found )) ms after the divergence was found: ok"

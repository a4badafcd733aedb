#!/usr/bin/env bash
# The memory tier when too many copies are gone: three nodes train (the
# demo trainer, 100 ms steps, a memory save every step, R = 1, a disk step
# every 30 that the restore plan counts in through --memory-disk-dir). h2's
# and h3's agents are SIGKILLed together: with R = 1 some rank's shard had
# its only copies on those two, so no memory step is complete among the live
# nodes. h1 goes on alone from the newest disk step and says why: the
# restore_planned event and the console name the memory step passed over and
# the rank without a live copy; checkpoint_restored says "disk".
set -euo pipefail
here=$(dirname "$0")
NETNS_TAG=${NETNS_TAG:-memc}
. "$here/netns.sh"
. "$here/cluster.sh"
netns_skip_unless_able
netns_setup 3
TRAINER=$(cluster_demo_trainer)
ckpt=$CLUSTER_DIR/ckpt
mkdir -p "$ckpt"
CLUSTER_JOB_ID=memc-two-lost CLUSTER_JOB_NNODES=1:3
CLUSTER_JOB_CONF="last_call_timeout=2,join_timeout=60"
CLUSTER_JOB_FLAGS=(--memory-disk-dir "$ckpt" --no-python)
start_node() { # start_node I
    cluster_start_memory_node "$1" "$TRAINER" --ckpt-dir "$ckpt" --steps 150 --step-ms 100 \
        --ckpt-every 30 --memory-every 1 --state-mib 1
}

for i in 1 2 3; do start_node "$i"; done
for i in 1 2 3; do
    cluster_wait "$i" '"event":"generation_formed".*"world_size":3,' 60 || cluster_fail "h$i never joined"
done
# Past the disk step at 30: memory steps newer than it (the reports are the
# worker's latest step, about one a second).
cluster_wait 1 '"event":"checkpoint_saved".*"step":(3[3-9]|[4-9][0-9]|1[0-9][0-9]),' 60 ||
    cluster_fail "h1 saved no step past the first disk step"
cluster_mark
kill -KILL "${CLUSTER_AGENT_PIDS[2]}" "${CLUSTER_AGENT_PIDS[3]}"
cluster_wait 1 '"event":"restore_planned".*"planned":1' 90 || cluster_fail "h1 planned no restore"
plan=$(grep -E '"event":"restore_planned".*"planned":1' "$(cluster_events 1)" | tail -1)
# The ranks the two lost nodes had in generation 1 (the assignment follows
# the join order, not the host's number).
lost_ranks=$(grep -hE '"event":"worker_started".*"generation":1,' "$(cluster_events 2)" "$(cluster_events 3)" |
    sed -n 's/.*"rank":\([0-9]*\),.*/\1/p' | sort -u | tr -d '\n')
[ ${#lost_ranks} = 2 ] || cluster_fail "h2's and h3's generation-1 ranks not found in their events: '$lost_ranks'"
echo "$plan" | grep -Eq '"why":"[^"]*step [0-9]+ \(generation [0-9]+, 3 ranks\) passed over: no live copy of rank ['"$lost_ranks"']'"'"'s shard' ||
    cluster_fail "the plan did not say which step and which lost rank ($lost_ranks) had no live copy: $plan"
echo "$plan" | grep -q '"committed":1' || cluster_fail "the fallback is not a committed step: $plan"
step=$(echo "$plan" | sed -n 's/.*"step":\([0-9]*\).*/\1/p')
[ $(( step % 30 )) = 0 ] || cluster_fail "restore step $step is not a disk step"
cluster_wait 1 '"event":"checkpoint_restored".*"source":"disk"' 30 || cluster_fail "h1 did not restore from disk"
grep -E '"event":"checkpoint_restored"' "$(cluster_events 1)" | tail -1 | grep -q "\"step\":$step," ||
    cluster_fail "h1 restored another step than the plan's $step"
grep -Eq "restore plan: .*passed over: no live copy of rank [$lost_ranks]'s shard.*the job restores step $step" "$(cluster_log 1)" ||
    cluster_fail "h1's console did not say why it went back to disk"
grep -q "resumed at step $step from disk" "$(cluster_log 1)" || cluster_fail "h1's console did not say it resumed from disk"
cluster_wait_agent 1 90
netns_log "two nodes lost with R = 1: $(grep -h 'restore plan:' "$(cluster_log 1)" | tail -1)"
echo "memckpt two lost: ok"

#!/usr/bin/env bash
# An evicted straggler is drained: 3 nodes in the step, --nnodes 2:2 (one
# spare), workers reporting their compute time, node2's 3x slower.
# --straggler-evict makes node2 give way to the spare; with --slurm-drain its
# agent drains it: sinfo shows it draining with Reason "elastic: ...", and the
# slurm_drain event names the node and the job. The job trains on.
set -euo pipefail
here=$(dirname "$0")
. "$here/slurm.sh"
. "$here/job.sh"
slurm_skip_unless_able
slurm_up 3
SLURMT_JOB_DIR=${TMPDIR:-/tmp}/drain
mkdir -p "$SLURMT_JOB_DIR"
# node3 starts once node1 and node2 formed the first generation, so it is the spare.
cat >"$SLURMT_JOB_DIR/node.sh" <<NODE
#!/bin/bash
if [ "\$SLURMD_NODENAME" = node3 ]; then
    for _ in \$(seq 600); do grep -q generation_formed "$SLURMT_JOB_DIR/events.node1.jsonl" 2>/dev/null && break; sleep 0.1; done
fi
step_ms=20; [ "\$SLURMD_NODENAME" = node2 ] && step_ms=60
exec "$ELASTICRUN" --nnodes 2:2 --slurm-drain --monitor-interval 0.2 --straggler-window 3 \\
    --straggler-rounds 3 --straggler-evict --straggler-quarantine 600 --max-restarts 3 \\
    --event-log "$SLURMT_JOB_DIR/events.\$SLURMD_NODENAME.jsonl" \\
    --no-python "$SLURMT_HELPERS/probe_worker" compute \$step_ms
NODE
printf '#!/bin/bash\nsrun --no-kill %s\n' "$SLURMT_JOB_DIR/node.sh" >"$SLURMT_JOB_DIR/job.sh"
chmod +x "$SLURMT_JOB_DIR/node.sh" "$SLURMT_JOB_DIR/job.sh"
job=$(slurm_sbatch -N3 --no-kill --ntasks-per-node=2 --time=3 -o "$SLURMT_JOB_DIR/job.out" "$SLURMT_JOB_DIR/job.sh")
slurm_wait_file "$SLURMT_JOB_DIR/events.node2.jsonl" '"event":"straggler_evicted"' 90 || slurm_fail "node2 was not evicted"
slurm_wait_file "$SLURMT_JOB_DIR/events.node2.jsonl" '"event":"slurm_drain"' 30 || slurm_fail "node2's agent did not drain it"
grep '"event":"slurm_drain"' "$SLURMT_JOB_DIR/events.node2.jsonl" | grep -q "\"slurm_node\":\"node2\".*\"slurm_job\":\"$job\"" ||
    grep '"event":"slurm_drain"' "$SLURMT_JOB_DIR/events.node2.jsonl" | grep -q "\"slurm_job\":\"$job\".*\"slurm_node\":\"node2\"" ||
    slurm_fail "the slurm_drain event does not name node2 and job $job"
slurm_wait_node_state node2 'draining|drained|drng|drain' 20 || slurm_fail "node2 is $(slurm_node_state node2), not draining"
reason=$(slurm_node_reason node2)
[[ "$reason" == "elastic: "* ]] || slurm_fail "node2's drain reason is \"$reason\""
slurm_log "node2 $(slurm_node_state node2): $reason"
[ "$(slurm_job_field "$job" JobState)" = RUNNING ] || slurm_fail "the job is not running on after the drain"
slurm_wait_file "$SLURMT_JOB_DIR/events.node3.jsonl" '"event":"worker_started"' 30 || slurm_fail "the spare node3 never ran workers"
slurm_ctl scancel "$job"
slurm_wait_job_state "$job" "CANCELLED|COMPLETED|FAILED" 60 || slurm_fail "job $job did not end after scancel"
echo "slurm drain: ok (job $job, node2 drained: $reason)"

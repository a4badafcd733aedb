#!/usr/bin/env bash
# Cold replacement with the documented recipe (examples/slurm/train.sbatch):
# a 3-node job without a spare loses a node; the survivors give up (too few
# nodes: exit 75, after draining the lost node), the script requeues itself and
# lets it start at once, Slurm allocates healthy nodes, and the trainers
# resume from the newest checkpoint. The job ends COMPLETED with Restarts=1.
set -euo pipefail
here=$(dirname "$0")
. "$here/slurm.sh"
. "$here/job.sh"
slurm_test_start 4 requeue
mkdir -p "$SLURMT_JOB_DIR/ckpt"
export TRAIN_NODES=3 ELASTICRUN
# Shorter than Slurm takes to mark the lost node DOWN (about 10 s here): a job
# shrunk by Slurm first may refuse StartTime=now (docs/SLURM.md).
export ELASTIC_FLAGS="--rdzv-conf join_timeout=4"
export TRAIN="--no-python $SLURMT_HELPERS/slurm_trainer --dir $SLURMT_JOB_DIR/ckpt --report $SLURMT_JOB_DIR/report --step-ms 100 --stop-file $SLURMT_JOB_DIR/stop"
job=$(slurm_sbatch -N3 --ntasks-per-node=2 --time=3 -o "$SLURMT_JOB_DIR/job.out" "$SLURMT_SRC/examples/slurm/train.sbatch")
slurm_wait_report 0 '^commit .* step=10 ' 60 || slurm_fail "job $job did not train to step 10"
victim=node2
t_crash=$(slurm_now_ms)
slurm_crash "$victim"
slurm_wait_report "$t_crash" '^resume .*world=6 ' 90 || slurm_fail "job $job did not come back after losing $victim"
resumed=$(slurm_report_after "$t_crash" '^resume .*world=6 ')
step=$(slurm_field step "$resumed")
# The newest step reported committed before the requeue's run began. Rank 0
# reports a commit after elastic_ckpt_save returns, so the crash (or the stop
# that follows it) can fall between a commit and its line: the resumed step is
# that newest reported step or the one after it, never an older one.
before=$(grep '^commit ' "$SLURMT_JOB_DIR/report" | awk -v t1="$(slurm_field t "$resumed")" \
    '{ for (i = 1; i <= NF; i++) { if ($i ~ /^t=/) t = substr($i, 3); if ($i ~ /^step=/) s = substr($i, 6) } }
     t < t1 && s + 0 > m { m = s + 0 } END { print m + 0 }')
[ "$step" -ge 10 ] && [ "$step" -ge "$before" ] && [ "$step" -le $(( before + 1 )) ] ||
    slurm_fail "resumed at step $step; step $before was the newest reported committed before the crash"
grep -q "slurm: drained $victim (Reason=\"elastic: lost from the job" "$SLURMT_JOB_DIR/job.out" ||
    slurm_fail "the survivors did not drain the lost $victim before the requeue"
[ "$(slurm_job_field "$job" Restarts)" = 1 ] || slurm_fail "job $job: Restarts=$(slurm_job_field "$job" Restarts), want 1"
nodes=$(slurm_job_field "$job" NodeList)
slurm_log "requeued: training again $(( $(slurm_field t "$resumed") - t_crash )) ms after $victim crashed, at step $step, on $nodes"
[ -z "$(slurm_report_after "$t_crash" "^resume node=$victim ")" ] || slurm_fail "the requeued job ran on the lost $victim"
slurm_wait_report "$(slurm_field t "$resumed")" "^commit .* step=$(( step + 5 )) " 30 || slurm_fail "no training after the requeue"
slurm_job_stop
slurm_wait_job_state "$job" "COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL" 60 || slurm_fail "job $job did not end"
[ "$(slurm_job_field "$job" JobState)" = COMPLETED ] || slurm_fail "job $job ended $(slurm_job_field "$job" JobState)"
echo "slurm requeue: ok (job $job back on $nodes at step $step)"

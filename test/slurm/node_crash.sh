#!/usr/bin/env bash
# A node of a running job crashes (every process on it SIGKILLed: slurmd,
# slurmstepd, the agent, its workers). 4 nodes in the allocation, the job
# --nnodes 3:3, so one agent waits as the spare: it takes the lost node's
# place and training resumes from the last checkpoint; Slurm marks the node
# DOWN and, with --no-kill on sbatch and srun, cancels nothing (no NODE_FAIL):
# the job trains on and ends COMPLETED.
set -euo pipefail
here=$(dirname "$0")
. "$here/slurm.sh"
. "$here/job.sh"
slurm_skip_unless_able
slurm_up 4
SLURMT_JOB_DIR=${TMPDIR:-/tmp}/node_crash
slurm_job_write --nnodes 3:3
job=$(slurm_sbatch -N4 --no-kill --ntasks-per-node=2 --time=3 -o "$SLURMT_JOB_DIR/job.out" "$SLURMT_JOB_DIR/job.sh")
slurm_wait_report 0 '^commit .* step=10 ' 60 || slurm_fail "job $job did not train to step 10"
# The victim: a node of the generation other than node1 (its agent hosts the store).
victim=$(grep '^resume ' "$SLURMT_JOB_DIR/report" | grep -v 'node=node1 ' | head -n 1 | sed -n 's/.*node=\([^ ]*\).*/\1/p')
members=$(grep '^resume ' "$SLURMT_JOB_DIR/report" | sed -n 's/.*node=\([^ ]*\).*/\1/p' | sort -u | tr '\n' ' ')
spare=$(for n in node1 node2 node3 node4; do [[ " $members" == *" $n "* ]] || echo "$n"; done)
[ -n "$victim" ] && [ -n "$spare" ] || slurm_fail "cannot tell the victim and the spare (members: $members)"
t_crash=$(slurm_now_ms)
slurm_crash "$victim"
slurm_wait_report "$t_crash" "^resume node=$spare .*world=6 " 30 || slurm_fail "the spare $spare did not take over from $victim"
resumed=$(slurm_report_after "$t_crash" "^resume node=$spare ")
slurm_log "spare $spare training $(( $(slurm_field t "$resumed") - t_crash )) ms after $victim crashed (resumed at step $(slurm_field step "$resumed"))"
slurm_wait_node_state "$victim" 'down.*' 60 || slurm_fail "$victim never went DOWN ($(slurm_node_state "$victim"))"
t_down=$(slurm_now_ms)
state=$(slurm_job_field "$job" JobState)
[ "$state" = RUNNING ] || slurm_fail "job $job is $state once $victim is DOWN (want RUNNING: no NODE_FAIL)"
slurm_wait_report "$t_down" '^commit ' 20 || slurm_fail "no training after $victim went DOWN"
slurm_job_stop
slurm_wait_job_state "$job" "COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL" 60 || slurm_fail "job $job did not end"
state=$(slurm_job_field "$job" JobState)
[ "$state" = COMPLETED ] || slurm_fail "job $job ended $state"
echo "slurm node crash: ok (job $job, $victim lost, $spare took over)"

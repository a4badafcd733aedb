#!/usr/bin/env bash
# scancel is graceful: SIGTERM reaches the workers as a notice through the
# worker API (slurm_trainer --save-on-notice saves a checkpoint when
# elastic_worker_stop_notice says so), every rank saves the same step and
# exits, the agents end (143, "stopped by signal 15"), nothing is left on the
# nodes, and the job is CANCELLED.
set -euo pipefail
here=$(dirname "$0")
. "$here/slurm.sh"
. "$here/job.sh"
slurm_skip_unless_able
slurm_up 3
SLURMT_JOB_DIR=${TMPDIR:-/tmp}/scancel
slurm_job_write
sed -i 's|--stop-file|--save-on-notice 1 --stop-file|' "$SLURMT_JOB_DIR/node.sh"
job=$(slurm_sbatch -N3 --no-kill --ntasks-per-node=2 --time=3 -o "$SLURMT_JOB_DIR/job.out" "$SLURMT_JOB_DIR/job.sh")
slurm_wait_report 0 '^commit .* step=5 ' 60 || slurm_fail "job $job did not train"
t_cancel=$(slurm_now_ms)
slurm_ctl scancel "$job"
slurm_wait_job_state "$job" "CANCELLED" 30 || slurm_fail "job $job is $(slurm_job_field "$job" JobState) after scancel"
deadline=$((SECONDS + 20))
until [ "$(slurm_report_after "$t_cancel" '^notice ' | wc -l)" -ge 1 ] &&
      [ "$(grep -c '^notice ' "$SLURMT_JOB_DIR/report")" -ge 6 ]; do
    [ "$SECONDS" -lt "$deadline" ] || slurm_fail "not every rank got the stop notice ($(grep -c '^notice ' "$SLURMT_JOB_DIR/report") of 6)"
    sleep 0.1
done
saved=$(grep '^notice ' "$SLURMT_JOB_DIR/report" | sed -n 's/.* saved=\([0-9]*\).*/\1/p' | sort -u)
[ "$(echo "$saved" | wc -l)" = 1 ] && [ -n "$saved" ] || slurm_fail "ranks saved different steps on the notice: $saved"
grep -q 'stopped by signal 15' "$SLURMT_JOB_DIR/job.out" || slurm_fail "no agent said it was stopped by SIGTERM"
# Nothing of the job is left on the nodes (the daemons are).
deadline=$((SECONDS + 15))
for n in node1 node2 node3; do
    while ip netns pids "$(slurm_ns "$n")" | xargs -r -n1 -I{} cat /proc/{}/comm 2>/dev/null | grep -qv '^slurmd$'; do
        [ "$SECONDS" -lt "$deadline" ] || slurm_fail "processes of the job outlived it on $n"
        sleep 0.1
    done
done
echo "slurm scancel: ok (job $job, every rank saved step $saved on the notice)"

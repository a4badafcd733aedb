#!/usr/bin/env bash
# A job formed from Slurm's environment alone: `srun elasticrun prog` on 3
# nodes and nothing else: the rendezvous (c10d on the step's first node, run
# id, node count, processes per node, node order) taken from the step.
# sbatch --ntasks-per-node=2: srun starts 2 tasks per node; local task 0 is
# the node's agent with 2 workers. Every worker must see the run id
# slurm-<job>.0 and a world of 6; the job ends COMPLETED.
set -euo pipefail
here=$(dirname "$0")
. "$here/slurm.sh"
slurm_skip_unless_able
slurm_up 4
SLURMT_JOB_DIR=${TMPDIR:-/tmp}/env_job
mkdir -p "$SLURMT_JOB_DIR/env"
helpers=${ELASTIC_HELPER_DIR:-$SLURMT_SRC/build/release/test/helpers}

# The whole job script: srun starts 2 tasks per node (the job's
# --ntasks-per-node); on each node local task 0 is the agent, the other stands aside.
cat >"$SLURMT_JOB_DIR/job.sh" <<JOB
#!/bin/bash
srun --no-kill "$ELASTICRUN" --no-python "$helpers/agent_worker" --report "$SLURMT_JOB_DIR/report" \\
    --env-dir "$SLURMT_JOB_DIR/env" --exit-when-world 6
JOB
chmod +x "$SLURMT_JOB_DIR/job.sh"
job=$(slurm_sbatch -N3 --no-kill --ntasks-per-node=2 --time=2 -o "$SLURMT_JOB_DIR/job.out" "$SLURMT_JOB_DIR/job.sh")
slurm_log "job $job submitted"
slurm_wait_job_state "$job" "COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL" 90 || slurm_fail "job $job did not end"
state=$(slurm_job_field "$job" JobState)
[ "$state" = COMPLETED ] || slurm_fail "job $job ended $state (exit $(slurm_job_field "$job" ExitCode))"
[ "$(grep -c '^start .*world=6 ' "$SLURMT_JOB_DIR/report")" = 6 ] || slurm_fail "not 6 workers in a world of 6"
grep -q "elasticrun: slurm job $job step 0: run id slurm-$job.0, nnodes 3:3, rdzv c10d node1:" "$SLURMT_JOB_DIR/job.out" ||
    slurm_fail "no start line saying what came from Slurm"
[ "$(grep -c "another task of this step runs node" "$SLURMT_JOB_DIR/job.out")" = 3 ] ||
    slurm_fail "the second task of each node did not stand aside"
for rank in 0 1 2 3 4 5; do
    envf="$SLURMT_JOB_DIR/env/restart0_rank$rank.env"
    grep -qx "TORCHELASTIC_RUN_ID=slurm-$job.0" "$envf" || slurm_fail "rank $rank: run id is not slurm-$job.0"
    grep -qx "LOCAL_WORLD_SIZE=2" "$envf" || slurm_fail "rank $rank: not 2 workers on its node"
    # Nodes in Slurm's order (the preferred rank: SLURM_NODEID with 2 tasks per node).
    node=$(sed -n 's/^SLURMD_NODENAME=//p' "$envf")
    grep -qx "GROUP_RANK=$(( ${node#node} - 1 ))" "$envf" || slurm_fail "rank $rank on $node: group rank is not its place in the step"
done
echo "slurm env job: ok (job $job)"

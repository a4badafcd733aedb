# An elasticrun training job on the test cluster (source after slurm.sh):
# sbatch runs `srun --no-kill` over the allocation; on each node local task 0
# is the agent (2 workers of test/helpers/slurm_trainer, checkpointing into
# one shared directory; the other local task stands aside), with what the
# step's environment gives plus EXTRA. Files live in $SLURMT_JOB_DIR:
#   report  the trainers' resume/commit/done lines     events.<node>.jsonl  per agent
#   ckpt/   the checkpoints                            stop               the stop step
#   job.out the batch script's output (appended across requeues)

SLURMT_HELPERS=${ELASTIC_HELPER_DIR:-$SLURMT_SRC/build/release/test/helpers}

# slurm_job_write EXTRA_FLAGS...: writes node.sh and job.sh into $SLURMT_JOB_DIR.
slurm_job_write() {
    mkdir -p "$SLURMT_JOB_DIR/ckpt"
    local extra=""
    [ "$#" = 0 ] || extra=$(printf '%q ' "$@")
    cat >"$SLURMT_JOB_DIR/node.sh" <<NODE
#!/bin/bash
exec "$ELASTICRUN" $extra --max-restarts 5 \\
    --event-log "$SLURMT_JOB_DIR/events.\$SLURMD_NODENAME.jsonl" \\
    --no-python "$SLURMT_HELPERS/slurm_trainer" --dir "$SLURMT_JOB_DIR/ckpt" \\
    --report "$SLURMT_JOB_DIR/report" --step-ms 100 --stop-file "$SLURMT_JOB_DIR/stop"
NODE
    printf '#!/bin/bash\nsrun --no-kill %s\necho "srun exit $?"\n' "$SLURMT_JOB_DIR/node.sh" >"$SLURMT_JOB_DIR/job.sh"
    chmod +x "$SLURMT_JOB_DIR/node.sh" "$SLURMT_JOB_DIR/job.sh"
}

# slurm_report_after T_MS REGEX: the first report line matching REGEX with t >= T_MS.
slurm_report_after() {
    grep -E -- "$2" "$SLURMT_JOB_DIR/report" 2>/dev/null |
        awk -v t0="$1" '{ for (i = 1; i <= NF; i++) if ($i ~ /^t=/) { t = substr($i, 3) } } t >= t0 { print; exit }'
}
slurm_wait_report() { # T_MS REGEX TIMEOUT_S
    local deadline=$((SECONDS + $3))
    until [ -n "$(slurm_report_after "$1" "$2")" ]; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 0.1; done
}
slurm_field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; } # slurm_field NAME LINE
slurm_last_step() { grep '^commit ' "$SLURMT_JOB_DIR/report" 2>/dev/null | tail -n 1 | sed -n 's/.* step=\([0-9]*\).*/\1/p'; }

# slurm_job_stop: every rank stops after committing a step a little ahead.
slurm_job_stop() { echo $(( $(slurm_last_step) + 10 )) >"$SLURMT_JOB_DIR/stop"; }

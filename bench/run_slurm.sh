#!/usr/bin/env bash
# Slurm: node crash -> training again, elasticrun against torchrun, both
# under srun on the same real Slurm cluster (test/slurm/slurm.sh: slurmctld,
# 4 slurmd, munged in network namespaces) in the same run; then a crash that
# leaves too few nodes -> the recipe's requeue -> training again.
#
# The job: PyTorch DDP (gloo, CPU; examples/python/ddp_inprocess.py), 3 nodes
# x 2 ranks, checkpoints every 5 steps, 4 nodes allocated (one spare agent).
# elasticrun takes everything from Slurm's environment (--nnodes 3:3 so the
# fourth node is a spare); torchrun the usual way: `srun torchrun` with the
# rendezvous written by hand (first host of `scontrol show hostnames`, the
# job id, --nnodes 3:3). A node of the generation (not the store's) has every
# process SIGKILLed; the time runs to the last rank's first step after the
# resume. Requeue: examples/slurm/train.sbatch on -N3, one node crashed.
#
# Env: SLURM_BENCH_ROUNDS (1), SLURM_BENCH_LAUNCHERS ("elasticrun elasticrun-inproc torchrun"),
# SLURM_BENCH_KEEP (keep the work directory), TORCH_PYTHON (/usr/bin/python3). Skips (exit 0)
# unless root with slurm-wlm, munge and torch installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
python=${TORCH_PYTHON:-/usr/bin/python3}
rounds=${SLURM_BENCH_ROUNDS:-1}
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "slurm bench: $python cannot import torch; skipped" >&2; exit 0
fi
SLURMT_TAG=slurmb
. "$root/test/slurm/slurm.sh"
(slurm_skip_unless_able) 2>/dev/null || { echo "slurm bench: needs root, slurm-wlm and munge; skipped" >&2; exit 0; }
export ELASTIC_LIB_DIR=${ELASTIC_LIB_DIR:-$root/lib}
work=$(mktemp -d /tmp/elastic-slurm-bench.XXXXXX)
slurm_up 4 2>/dev/null
trap 'slurm_down; [ -n "${SLURM_BENCH_KEEP:-}" ] || rm -rf "$work"' EXIT # after slurm_up, whose own trap this replaces
example=$root/examples/python/ddp_inprocess.py
trainer_args="--steps 100000 --every 5 --step-seconds 0.05 --no-fsync"

# node_script NAME LAUNCHER...: what srun runs on each node (local task 0 only).
node_script() {
    local name=$1; shift
    cat >"$work/$name.sh" <<EOF
#!/bin/bash
[ "\${SLURM_LOCALID:-0}" = 0 ] || exit 0
export PYTHON_EXEC=$python PYTHONPATH=$root/bindings/python GLOO_SOCKET_IFNAME=eth0 ELASTIC_LIB_DIR=$ELASTIC_LIB_DIR
head=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n 1)
exec $* $example --dir $work/ckpt --report $work/report $trainer_args
EOF
    chmod +x "$work/$name.sh"
}
node_script elasticrun "$ELASTICRUN" --nnodes 3:3 --max-restarts 3
node_script elasticrun-inproc "$ELASTICRUN" --nnodes 3:3 --max-restarts 3 --in-process-recovery
node_script torchrun "$python" -m torch.distributed.run --nnodes 3:3 --nproc_per_node 2 \
    --rdzv_backend c10d --rdzv_endpoint '$head:29500' --rdzv_id '$SLURM_JOB_ID' --max_restarts 3 \
    --monitor_interval 0.1 --redirects 2 --tee 2

# The nodes whose namespaces hold a trainer process (the spare has none).
training_nodes() {
    local n p
    for n in node1 node2 node3 node4; do
        for p in $(ip netns pids "$(slurm_ns "$n")" 2>/dev/null); do
            grep -q ddp_inprocess "/proc/$p/cmdline" 2>/dev/null && { echo "$n"; break; }
        done
    done
}

# ranks_trained_after T: how many ranks logged a first step at or after T (seconds).
ranks_trained_after() {
    awk -v t0="$1" '/^trained/ { r = $2; t = $NF; sub(/^t=/, "", t);
        if (t + 0 >= t0 + 0) seen[r] = 1 } END { print length(seen) }' "$work/report" 2>/dev/null || echo 0
}
last_rank_trained_after() {
    awk -v t0="$1" '/^trained/ { r = $2; t = $NF; sub(/^t=/, "", t);
        if (t + 0 >= t0 + 0 && !(r in first)) first[r] = t } END { m = 0; for (r in first) if (first[r] > m) m = first[r]; print m }' \
        "$work/report"
}

# crash_a_training_node LOG WHAT: crashes a training node other than node1 (the
# one sbatch runs on) a few steps and a checkpoint after the start, waits until
# all 6 ranks trained again and prints the seconds that took; the node crashed
# is left in $crashed_node. LOG is shown and WHAT named if it never recovers.
crashed_node=
crash_a_training_node() {
    local log=$1 what=$2 t0 deadline
    sleep 2 # a few steps and a checkpoint past the start
    crashed_node=$(training_nodes | grep -v '^node1$' | head -n 1)
    t0=$(date +%s.%N)
    slurm_crash "$crashed_node" 2>/dev/null
    deadline=$((SECONDS + 240))
    until [ "$(ranks_trained_after "$t0")" -ge 6 ]; do
        [ "$SECONDS" -lt "$deadline" ] || { grep -v 'reducer\|InitGoogle' "$log" | tail -n 40 >&2; echo "FAIL: $what" >&2; exit 1; }
        sleep 0.1
    done
    awk -v a="$(last_rank_trained_after "$t0")" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }'
}

# one_round LAUNCHER: prints seconds from the crash to every rank training again.
one_round() {
    local launcher=$1 job victim deadline
    rm -rf "$work/ckpt" "$work/report"
    printf '#!/bin/bash\nsrun --no-kill %s\n' "$work/$launcher.sh" >"$work/job.sh"
    job=$(slurm_sbatch -N4 --no-kill --ntasks-per-node=2 --time=5 -o "$work/$launcher.out" "$work/job.sh")
    deadline=$((SECONDS + 180))
    until [ "$(ranks_trained_after 0)" -ge 6 ] && grep -q 'resume at step\|trained' "$work/report" 2>/dev/null &&
        [ "$(training_nodes | wc -l)" -ge 3 ] && [ -d "$work/ckpt" ] && [ -n "$(ls "$work/ckpt")" ]; do
        [ "$SECONDS" -lt "$deadline" ] || { grep -v 'reducer\|InitGoogle' "$work/$launcher.out" | tail -n 40 >&2; echo "FAIL: $launcher never trained" >&2; exit 1; }
        sleep 0.2
    done
    crash_a_training_node "$work/$launcher.out" "$launcher did not recover"
    victim=$crashed_node
    slurm_ctl scancel "$job"
    slurm_wait_job_state "$job" "CANCELLED|COMPLETED|FAILED" 60 || true
    # The crashed node back for the next round: slurmd again, then RESUME.
    _slurm_start_slurmd "$victim"
    local end=$((SECONDS + 60))
    until _slurm_all_idle; do
        slurm_ctl scontrol update NodeName="$victim" State=RESUME 2>/dev/null || true
        [ "$SECONDS" -lt "$end" ] || { echo "FAIL: $victim did not come back" >&2; exit 1; }
        sleep 0.5
    done
}

# requeue_round: the recipe (examples/slurm/train.sbatch) on 3 nodes without a
# spare; a node crashes, the survivors give up after join_timeout, the job
# requeues itself; prints "crash->training again, of it requeue->running".
requeue_round() {
    local job deadline
    rm -rf "$work/ckpt" "$work/report"
    job=$(TRAIN_NODES=3 ELASTICRUN="$ELASTICRUN" ELASTIC_FLAGS="--rdzv-conf join_timeout=$join_timeout" \
        PYTHON_EXEC=$python PYTHONPATH=$root/bindings/python GLOO_SOCKET_IFNAME=eth0 ELASTIC_LIB_DIR=$ELASTIC_LIB_DIR \
        TRAIN="$example --dir $work/ckpt --report $work/report $trainer_args" \
        slurm_sbatch -N3 --ntasks-per-node=2 --time=5 -o "$work/requeue.out" "$root/examples/slurm/train.sbatch")
    deadline=$((SECONDS + 180))
    until [ "$(ranks_trained_after 0)" -ge 6 ] && [ -n "$(ls "$work/ckpt" 2>/dev/null)" ]; do
        [ "$SECONDS" -lt "$deadline" ] || { tail -n 40 "$work/requeue.out" >&2; echo "FAIL: the recipe never trained" >&2; exit 1; }
        sleep 0.2
    done
    crash_a_training_node "$work/requeue.out" "no training after the requeue"
    slurm_ctl scancel "$job"
    slurm_wait_job_state "$job" "CANCELLED|COMPLETED|FAILED" 60 || true
}

declare -A results=()
launchers=${SLURM_BENCH_LAUNCHERS:-elasticrun elasticrun-inproc torchrun}
for ((r = 1; r <= rounds; r++)); do
    for launcher in $launchers; do
        results[$launcher]="${results[$launcher]:-} $(one_round "$launcher")"
    done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "Slurm (slurm-wlm 22.05, 4 slurmd in namespaces): DDP gloo 3 nodes x 2 ranks + 1 spare node;"
echo "a training node crashed (all its processes SIGKILLed) -> every rank trained a step again"
echo "$rounds round(s), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-44s %10s %s\n' "launcher (under srun --no-kill)" "median s" "rounds"
for launcher in $launchers; do
    case $launcher in
        elasticrun) label="elasticrun (derived from Slurm, --nnodes 3:3)" ;;
        elasticrun-inproc) label="elasticrun --in-process-recovery" ;;
        torchrun) label="torchrun (hand-written c10d, monitor 0.1 s)" ;;
    esac
    printf '%-44s %10s %s\n' "$label" "$(echo "${results[$launcher]}" | median)" "${results[$launcher]}"
done
if [ -z "${SLURM_BENCH_NO_REQUEUE:-}" ]; then
    join_timeout=${SLURM_BENCH_JOIN_TIMEOUT:-4}
    requeued=$(requeue_round)
    echo
    echo "cold replacement (examples/slurm/train.sbatch, 3 nodes, no spare): crash -> survivors exit 75"
    echo "after join_timeout $join_timeout s -> scontrol requeue + StartTime=now -> every rank trained again"
    printf '%-44s %10s\n' "requeue (whole path)" "$requeued"
    grep -E '^(start|srun ended)' "$work/requeue.out" | sed 's/^/  /'
fi

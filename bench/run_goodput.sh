#!/usr/bin/env bash
# Goodput at scale: measures the recovery components on this machine, writes
# the simulator's profiles with them (every value beside its source; what one
# machine cannot measure is a named assumption or target) and prints the ETTR
# table of `elasticctl simulate` at 1,024, 16,384 and 100,000 GPUs.
#   1. a fault run: elasticrun + the demo trainer, a SIGKILL and a hang
#      (SIGSTOP), read back with `elasticctl goodput` (detection, stopping,
#      restart, restore, save stall, as the accounting measures them)
#   2. rdzv_bench: forming at 16 and 256 nodes, a frozen node's eviction
#   3. ckpt_bench (GOODPUT_CKPT_BYTES, 64 MiB): load and save rates
#   4. with torch: bench/torch_recovery.py, 1 round (elasticrun full restart,
#      in-process recovery, torchrun's restart) and torch's c10d rendezvous at
#      4 and 16 nodes; GOODPUT_TORCH=0 skips them (the shipped figures are used)
# Env: GOODPUT_PROFILE (default build/bench/goodput.profile), GOODPUT_SEEDS (20),
# GOODPUT_DAYS (30).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin_dir=${ELASTIC_BIN_DIR:-$root/bin}
bench_dir=${ELASTIC_BENCH_DIR:-$root/build/release/bench}
example_dir=${ELASTIC_EXAMPLE_DIR:-$root/build/release/examples}
profile=${GOODPUT_PROFILE:-$root/build/bench/goodput.profile}
python=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/run_goodput.XXXXXX")
agent=""
cleanup() { if [ -n "$agent" ]; then kill "$agent" 2>/dev/null || true; fi; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$(dirname "$profile")"

# wait_for GLOB PATTERN: a line matching PATTERN in a file of GLOB, 60 s at most.
wait_for() {
    for _ in $(seq 1 600); do
        # shellcheck disable=SC2086
        if grep -qs -- "$2" $1; then return 0; fi
        sleep 0.1
    done
    echo "run_goodput: timed out waiting for '$2' in $1" >&2
    return 1
}
pid_of() { # pid_of GENERATION RANK
    grep '"event":"worker_started"' "$work/events.jsonl" | grep "\"generation\":$1," | grep "\"rank\":$2," |
        sed -n 's/.*"pid":\([0-9]*\).*/\1/p'
}

# ---- 1. a fault run ------------------------------------------------------
"$bin_dir/elasticrun" --standalone --nproc-per-node=4 --max-restarts=3 --hang-timeout 2 \
    --log-dir "$work/logs" --event-log "$work/events.jsonl" --no-python \
    "$example_dir/demo_trainer" --ckpt-dir "$work/ckpt" --steps 500 --ckpt-every 50 --step-ms 20 \
    --result "$work/result.txt" >"$work/console.txt" 2>&1 &
agent=$!
wait_for "$work/logs/*/gen_1/rank_0/stdout.log" "^step 150 "
sleep 0.4 # about 20 steps past the checkpoint, as in the issue
kill -9 "$(pid_of 1 2)"
wait_for "$work/logs/*/gen_2/rank_0/stdout.log" "^step 300 "
sleep 0.3
kill -STOP "$(pid_of 2 1)" # a hang: no exit, the hang probe (--hang-timeout 2) must catch it
wait "$agent" || { echo "run_goodput: the fault run failed:" >&2; cat "$work/console.txt" >&2; exit 1; }
agent=""
"$bin_dir/elasticctl" goodput "$work/events.jsonl" --json --profile-out "$work/run.profile" \
    >"$work/run.json"

# ---- 2. rendezvous, 3. checkpoint rates ---------------------------------
"$bench_dir/rdzv_bench" --runs 1 16 256 >"$work/rdzv"
"$bench_dir/rdzv_bench" --freeze 16 >"$work/freeze"
mkdir -p "$work/ckptbench"
"$bench_dir/ckpt_bench" "$work/ckptbench" "${GOODPUT_CKPT_BYTES:-67108864}" 1 >"$work/ckpt_rates"

# ---- 4. torch -------------------------------------------------------------
: >"$work/torch_recovery"
: >"$work/torch_rdzv"
if [ "${GOODPUT_TORCH:-1}" != 0 ] && "$python" -c 'import torch.distributed.run' 2>/dev/null; then
    ELASTIC_LIB_DIR=$(cd "$bin_dir/../lib" && pwd) "$python" "$here/torch_recovery.py" \
        "$bin_dir/elasticrun" 1 2 >"$work/torch_recovery" 2>"$work/torch_recovery.err" || true
    "$python" "$here/rdzv_torch.py" 60 4 16 >"$work/torch_rdzv" 2>/dev/null || true
fi

# ---- the profiles -----------------------------------------------------------
"$python" - "$work" "$profile" <<'PY'
import json, re, sys, time
work, out = sys.argv[1], sys.argv[2]
run = json.load(open(work + "/run.json"))
prof = {}
for line in open(work + "/run.profile"):
    f = line.split()
    if len(f) >= 2 and not line.startswith("#") and f[0] not in ("model", "profile"):
        prof[f[0]] = float(f[1])
ck = dict(l.strip().split("=", 1) for l in open(work + "/ckpt_rates") if "=" in l and not l.startswith("#"))
nbytes = float(ck["bytes"])
load_gbps = nbytes / float(ck["random_load_cold_s"]) / 1e9
sync_gbps = nbytes / float(ck["weights_save_s"]) / 1e9
async_gbps = nbytes / float(ck["async_stall_s"]) / 1e9
rd = {int(l.split()[0]): l.split() for l in open(work + "/rdzv") if l.strip()}
per_node_ms = max((float(rd[256][1]) - float(rd[16][1])) / 240.0, 0.0)
base_s = max(float(rd[16][1]) / 1000.0 - per_node_ms * 16 / 1000.0, 0.0)
freeze_s = float(open(work + "/freeze").read().split()[2]) / 1000.0
tr = {}
for l in open(work + "/torch_recovery"):
    m = re.match(r"(.+?)\s{2,}([\d.]+)\s", l)
    if m:
        tr[m.group(1).strip()] = float(m.group(2))
trz = {int(l.split()[0]): float(l.split()[1]) for l in open(work + "/torch_rdzv") if l.strip() and l.split()[1] != "-1"}
full = tr.get("elasticrun (full restart)")
inproc = tr.get("elasticrun --in-process-recovery")
torch_restart = tr.get("torchrun (full restart, monitor 5 s)")
src_run = "measured: elasticrun + demo trainer, SIGKILL and SIGSTOP (bench/run_goodput.sh, elasticctl goodput)"
shipped = "shipped figure (torch not run here: GOODPUT_TORCH=0 or no torch)"
def v(x, default):
    return (x, "measured") if x is not None else (default, shipped)
full, full_src = v(full, 4.6)
inproc, inproc_src = v(inproc, 3.8)
torch_restart, torch_src = v(torch_restart, 7.6)
if 4 in trz and 16 in trz:
    t_per = max((trz[16] - trz[4]) / 12.0, 0.0); t_base = max(trz[4] / 1000.0 - t_per * 4 / 1000.0, 0.0)
    t_src = "measured: torch c10d rendezvous forming at 4 and 16 nodes (bench/rdzv_torch.py)"
else:
    t_per, t_base, t_src = 8.0, 1.1, shipped
stamp = time.strftime("%Y-%m-%d")
L = ["# written by bench/run_goodput.sh on %s; every value beside its source" % stamp, "model",
     "step_s 6 assumption: Llama 3 405B on 16,384 H100s, 16M tokens a step at ~400 TFLOPS/GPU, kept at every scale",
     "state_gb 6480 assumption: 405B parameters x 16 bytes (bf16 weights and gradients, fp32 master, Adam m and v)",
     "gpus_per_node 8 assumption: 8-GPU HGX nodes",
     "rate_per_gpu_hour 1.9733e-05 Llama 3: 419 unexpected interruptions in 54 days on 16,384 GPUs", ""]
def elastic(name, replace, restart, restart_src, interp, init, restore, restore_src, save, save_src, every, every_src):
    return ["profile " + name,
            "detect_software_s %.4f %s" % (prof["detect_software_s"], src_run),
            "detect_gpu_s %.4f %s (a GPU fault ends its worker: as software)" % (prof["detect_software_s"], src_run),
            "detect_host_s %.3f measured: a frozen node evicted, next generation (rdzv_bench --freeze 16; lease 2 s)" % freeze_s,
            "detect_hang_s 60 setting: --hang-timeout 60 (10 steps without a heartbeat)",
            "stop_s %.4f %s" % (prof["stop_s"], src_run),
            "rdzv_base_s %.4f measured: rdzv_bench forming at 16 nodes" % base_s,
            "rdzv_per_node_ms %.3f measured: rdzv_bench, 16 -> 256 nodes" % per_node_ms,
            replace, "restart_s %.3f %s" % (restart, restart_src), interp, init,
            "restore_gbps %.4g %s" % (restore, restore_src), "save_gbps %.4g %s" % (save, save_src),
            "interval_s 0 chosen: the best interval the simulation finds" if not every else "interval_s 0 follows every_steps",
            "every_steps %d %s" % (every, every_src), ""]
no_spare = "replace_s 300 assumption: no spare; the scheduler provides a replacement node in 5 minutes"
interp = "interpreter_s 10 assumption: a real node's Python + torch import beyond this machine's (shared filesystem)"
init = "init_s 60 assumption: CUDA context + NCCL communicators of 16k ranks after a full restart"
full_src2 = "%s: elasticrun full restart of a DDP job, kill -> every rank trained again (bench/torch_recovery.py)" % full_src
disk_load = "measured: checkpoint load from this machine's disk (ckpt_bench, cold), a node's rate / 8 GPUs"
L += elastic("elasticrun-disk", no_spare, full, full_src2, interp, init, load_gbps / 8, disk_load,
             async_gbps / 8, "measured: elastic_ckpt_save_async stall (ckpt_bench), a node's rate / 8 GPUs", 0, "disk only")
mem_restore = "target: the memory tier restores from a peer's host memory over a 200 Gb/s NIC per GPU (not measured end to end yet)"
mem_save = "target: each step's snapshot to pinned host memory overlaps the next step; 10% of a 25 GB/s copy on the path"
L += elastic("elasticrun-memory", no_spare, full, full_src2, interp, init, 25, mem_restore, 250, mem_save, 1,
             "target: the memory tier keeps every step, at most one step redone")
L += elastic("elasticrun-spares", "replace_s 0 target: a warm spare waits in the rendezvous and takes the lost node's place",
             inproc, "%s: in-process recovery, kill -> every rank trained again (bench/torch_recovery.py)" % inproc_src,
             "interpreter_s 0 target: survivors recover in process, the spare started ahead: no interpreter starts",
             "init_s 10 assumption: NCCL communicators rebuilt at 16k ranks, CUDA contexts kept",
             25, mem_restore, 250, mem_save, 1, "target: as elasticrun-memory")
torchrun_recovery = [
      "detect_software_s 0 measured: within restart_s",
      "detect_gpu_s 0 measured: within restart_s",
      "detect_host_s 600 assumption: a dead node is noticed when the survivors' NCCL watchdog times out (10 minutes)",
      "detect_hang_s 600 assumption: a hang is caught only by the 10-minute NCCL timeout",
      "stop_s 0 measured: within restart_s",
      "rdzv_base_s %.3f %s" % (t_base, t_src),
      "rdzv_per_node_ms %.3f %s" % (t_per, t_src),
      no_spare,
      "restart_s %.3f %s: torchrun full restart (monitor 5 s), kill -> every rank trained again (bench/torch_recovery.py)" % (torch_restart, torch_src),
      interp, init,
      "restore_gbps %.4g %s" % (load_gbps / 8, disk_load),
      "save_gbps %.4g measured: a synchronous save to this disk (ckpt_bench; torch.save + fsync is no faster, bench/run_ckpt.sh) / 8 GPUs" % (sync_gbps / 8)]
# torchrun twice: at the 30-minute interval people run, and at its own best
# interval (a fair peer: the checkpoint tuning the elasticrun rows get).
L += ["profile torchrun"] + torchrun_recovery + [
      "interval_s 1800 setting: a 30-minute checkpoint interval",
      "every_steps 0 disk only", ""]
L += ["profile torchrun-best-interval"] + torchrun_recovery + [
      "interval_s 0 chosen: the best interval the simulation finds for torchrun (a fair peer)",
      "every_steps 0 disk only", ""]
open(out, "w").write("\n".join(L))
print("fault run (elasticctl goodput): ETTR %.1f%%, %.3f s lost to failures of %.3f s; restart %.3f s, restore %.4f s, "
      "stall %.4f s a save" % (100 * run["ettr"], run["failures_s"], run["wall_s"], prof["restart_s"],
                                1 / prof["restore_gbps"] if prof["restore_gbps"] else 0,
                                1 / prof["save_gbps"] if prof["save_gbps"] else 0))
PY
echo "profiles: $profile"
echo
"$bin_dir/elasticctl" simulate --profile "$profile" --seeds "${GOODPUT_SEEDS:-20}" --days "${GOODPUT_DAYS:-30}"

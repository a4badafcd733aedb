#!/usr/bin/env bash
# The one prepared run for a machine with one NVIDIA GPU (an H200; one rank per
# communicator there): builds libelastic from a fresh clone of the repository
# this script is in (its committed HEAD), then measures NCCL communicator init,
# abort, re-create and shrink, the watchdog catching a kernel that spins on a
# host-set flag, every health check read through the real NVML (value,
# verdict, the CPU cost of a round), and the C++ trainer under elasticrun
# surviving a killed worker. Prints one table. Every step has a timeout and fails soft (a FAIL
# row, the run goes on); the whole run stays under 8 minutes.
#
#   bash test/gpu/run.sh            (as root it installs missing apt packages)

set -u -o pipefail

START=$(date +%s)
BUDGET_S=${ELASTIC_GPU_BUDGET_S:-450}   # leaves a margin under 8 minutes
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || echo "")
WORK=$(mktemp -d /tmp/elastic-gpu-XXXXXX)
SRC=$WORK/src
ROWS=()
FAILED=0
BACKGROUND=()

cleanup() {
    for pid in "${BACKGROUND[@]}"; do kill -9 -- "-$pid" 2>/dev/null; done # the session setsid made
}
trap cleanup EXIT

row() { # name value note
    ROWS+=("$1|$2|$3")
    case "$2" in FAIL*) FAILED=$((FAILED + 1)) ;; esac
}

seconds_left() { echo $((BUDGET_S - ($(date +%s) - START))); }

# run_step NAME LIMIT_S CMD...: output to $WORK/NAME.log, bounded by the budget left.
run_step() {
    local name=$1 limit=$2 left
    shift 2
    left=$(seconds_left)
    ((limit > left)) && limit=$left
    if ((limit < 5)); then
        echo "out of time budget" >"$WORK/$name.log"
        return 124
    fi
    timeout -k 5 "$limit" "$@" >"$WORK/$name.log" 2>&1
}

# The first child of a process, from /proc (no procps needed).
child_of() { awk -v parent="$1" '$4 == parent { print $1; exit }' /proc/[0-9]*/stat 2>/dev/null; }

last_line() { tail -n 1 "$WORK/$1.log" 2>/dev/null | cut -c1-100; }

# ---- the machine -------------------------------------------------------------------

# Without an NVIDIA GPU there is nothing to measure: say so and stop, successfully
# (ELASTIC_GPU_FORCE=1 runs every step anyway, each failing soft).
if [ "${ELASTIC_GPU_FORCE:-0}" != 1 ] &&
    ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
    echo "test/gpu/run.sh: skipped: no NVIDIA GPU here (nvidia-smi lists none)"
    exit 0
fi

if command -v nvidia-smi >/dev/null 2>&1 &&
    run_step gpu 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; then
    row "GPU" "$(head -n 1 "$WORK/gpu.log" | cut -d, -f1)" "driver $(head -n 1 "$WORK/gpu.log" | cut -d, -f2 | tr -d ' ')"
else
    row "GPU" "FAIL nvidia-smi" "$(last_line gpu)"
fi

# ---- fresh clone, dependencies, build ------------------------------------------------------

if [ -n "$REPO" ] && run_step clone 60 git clone -q --no-hardlinks "$REPO" "$SRC"; then
    row "clone" "$(git -C "$SRC" rev-parse --short HEAD)" "from $REPO"
else
    row "clone" "FAIL" "$(last_line clone)"
    SRC=""
fi

if [ -n "$SRC" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        # make deps installs what is missing when root (apt-get update only if needed).
        if run_step deps 180 make -C "$SRC" deps; then row "apt dependencies" "ok" "make deps as root"
        else row "apt dependencies" "FAIL" "$(last_line deps)"; fi
    fi
    build_started=$(date +%s)
    if run_step build 240 make -C "$SRC" -j"$(nproc)" all; then
        row "build (make all)" "$(($(date +%s) - build_started)) s" "$(nproc) jobs"
    else
        row "build (make all)" "FAIL" "$(last_line build)"
    fi
    if [ -x "$SRC/build/release/examples/nccl_trainer" ]; then row "C++ trainer built" "ok" "examples/cpp/nccl_trainer.cu"
    else row "C++ trainer built" "FAIL" "no build/release/examples/nccl_trainer (nvcc missing?)"; fi
    if [ -f "$SRC/lib/libelastic.so" ] && ! readelf -d "$SRC/lib/libelastic.so" | grep NEEDED | grep -qiE 'nccl|cuda'; then
        row "libelastic.so NEEDED" "ok" "no nccl/cuda entry (dlopen at first use)"
    else
        row "libelastic.so NEEDED" "FAIL" "missing library or an nccl/cuda entry"
    fi
fi

# ---- the communicator's lifecycle and the watchdog -------------------------------------------------

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME=${NVCC%/bin/nvcc}
PROBE=$WORK/nccl_gpu_probe
# The libraries libelastic.a needs, as the Makefile says (an extra makefile prints them).
LIBS=""
# shellcheck disable=SC2016 # $(LIBS) is make's, not the shell's
[ -n "$SRC" ] && LIBS=$(make -s --no-print-directory -C "$SRC" -f Makefile \
    -f <(printf 'print-libs:\n\t@echo $(LIBS)\n') print-libs 2>/dev/null)
[ -n "$LIBS" ] || LIBS="-luv -lzstd -lssl -lcrypto -lxxhash -lpthread -ldl -lm"
# shellcheck disable=SC2086 # $LIBS is a list of -l flags
if [ -n "$SRC" ] && [ -f "$SRC/lib/libelastic.a" ] &&
    run_step probe_build 120 "$NVCC" -std=c++17 -O2 -gencode arch=compute_90,code=sm_90 \
        -gencode arch=compute_80,code=compute_80 -cudart shared -I"$SRC/include" -o "$PROBE" \
        "$SRC/test/gpu/nccl_gpu_probe.cu" "$SRC/lib/libelastic.a" -L"$CUDA_HOME/lib64" \
        -Xlinker -rpath="$CUDA_HOME/lib64" -lnccl $LIBS; then
    run_step probe 120 env ELASTIC_LOG_LEVEL=info "$PROBE" --timeout-ms 2000
    probe_rc=$?
    value() { grep -m1 "^$1=" "$WORK/probe.log" | cut -d= -f2-; }
    report() { # key label note
        local v
        v=$(value "$1")
        if [ -z "$v" ]; then row "$2" "FAIL" "not measured (probe exit $probe_rc: $(last_line probe))"
        else row "$2" "$v" "$3"; fi
    }
    report nccl_version "NCCL version" "feature nccl=$(value feature_nccl)"
    report init_ms "comm init (ms)" "1 rank: unique id via the store + non-blocking init"
    report allreduce "allreduce 4 MiB x20" "sum checked"
    report abort_ms "abort (ms)" "revoke, or ncclCommAbort before 2.28"
    report recreate_ms "re-create (ms)" "elastic_nccl_comm_rebuild with a new unique id"
    report allreduce_after_rebuild "allreduce after rebuild" ""
    report shrink_ms "ncclCommShrink (ms)" "nothing to exclude on one GPU"
    report watchdog_detect_ms "watchdog catches hang (ms)" "deadline $(value watchdog_deadline_ms) ms + 100 ms poll"
    report stream_after_abort "stream after the abort" "spin kernel released by the host"
else
    row "GPU probe" "FAIL" "not built: $(last_line probe_build)"
fi

# ---- the health checks on the real device ----------------------------------------------------------

# Every NVML check of every GPU read once through the real driver (value, verdict, text; the
# UUID in the note), then the CPU cost of a periodic round; and src/health/nvml.h's
# hand-written ABI checked against the toolkit's nvml.h (make header-check).
if [ -n "$SRC" ] && run_step health_build 120 make -C "$SRC" -j"$(nproc)" build/release/bench/health_bench; then
    run_step health 60 env -u ELASTIC_NVML_LIBRARY "$SRC/build/release/bench/health_bench" --print --rounds 200
    health_rc=$?
    if grep -q '^# NVML not available' "$WORK/health.log"; then
        row "health: NVML" "FAIL" "$(grep -m1 '^# NVML' "$WORK/health.log" | cut -c3-100)"
    fi
    # Lines "check gpu value verdict text... [uuid]" between the header and the "# first round" line.
    while read -r check gpu value verdict text; do
        [ "$check" = check ] && continue
        row "health $check gpu $gpu" "$value $verdict" "$(echo "$text" | cut -c1-70)"
    done < <(sed -n '/^check /,/^# first round/p' "$WORK/health.log" | grep -v '^#')
    first=$(sed -n 's/^# first round: //p' "$WORK/health.log")
    [ -n "$first" ] && row "health first round" "${first%%,*}" "${first#*, } (takes the baselines)"
    cost=$(grep -m1 '^rounds ' "$WORK/health.log")
    if [ -n "$cost" ]; then
        row "health round CPU (us)" "$(echo "$cost" | awk '{ print $9 }')" \
            "median of 200; p99 $(echo "$cost" | awk '{ print $11 }') us, wall $(echo "$cost" | awk '{ print $14 }') us, $(echo "$cost" | awk '{ print $4 }') GPUs"
    else
        row "health round CPU (us)" "FAIL" "exit $health_rc: $(last_line health)"
    fi
else
    row "health checks" "FAIL" "health_bench not built: $(last_line health_build)"
fi
CUDA_INC=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../include
if [ -n "$SRC" ] && [ -f "$CUDA_INC/nvml.h" ]; then
    if run_step nvml_layout 30 cc -std=c11 -D_GNU_SOURCE -I"$SRC/include" -I"$SRC/src" -I"$CUDA_INC" \
        -fsyntax-only "$SRC/test/header/nvml_layout.c"; then
        row "nvml.h layout" "ok" "src/health/nvml.h matches $CUDA_INC/nvml.h"
    else
        row "nvml.h layout" "FAIL" "$(grep -m1 'error' "$WORK/nvml_layout.log" | cut -c1-90)"
    fi
else
    row "nvml.h layout" "skipped" "no nvml.h in the CUDA toolkit here"
fi

# ---- the C++ trainer under elasticrun survives a killed worker --------------------------------------

TRAINER=${SRC:+$SRC/build/release/examples/nccl_trainer}
if [ -n "$SRC" ] && [ -x "$TRAINER" ] && [ -x "$SRC/bin/elasticrun" ] && (($(seconds_left) > 40)); then
    log=$WORK/trainer.log
    limit=$(($(seconds_left) - 10))
    ((limit > 240)) && limit=240
    setsid timeout -k 5 "$limit" "$SRC/bin/elasticrun" --nproc-per-node 1 --max-restarts 2 \
        --event-log="$WORK/events.jsonl" --no-python "$TRAINER" --ckpt-dir "$WORK/ckpt" \
        --steps 60000 --ckpt-every 1000 --dim 1048576 >"$log" 2>&1 &
    runner=$!
    BACKGROUND+=("$runner")
    waited=0
    while ! grep -q "saved step" "$log" 2>/dev/null && kill -0 "$runner" 2>/dev/null && ((waited < 600)); do
        sleep 0.1
        waited=$((waited + 1))
    done
    # timeout -> elasticrun -> the trainer: found by parentage, never by name
    agent=$(child_of "$runner")
    worker=${agent:+$(child_of "$agent")}
    if [ -n "$worker" ] && grep -q "saved step" "$log"; then
        killed_at=$(date +%s%N)
        kill -9 "$worker"
        back_ms=""
        for _ in $(seq 1 1200); do
            if [ "$(grep -c "starts at step" "$log")" -ge 2 ]; then
                back_ms=$((($(date +%s%N) - killed_at) / 1000000))
                break
            fi
            kill -0 "$runner" 2>/dev/null || break
            sleep 0.05
        done
        wait "$runner"
        code=$?
        resumed=$(grep "starts at step" "$log" | sed -n 2p | sed 's/.*starts at step \([0-9]*\).*/\1/')
        if [ "$code" = 0 ] && grep -q "result rank=0 .* ok" "$log" && [ -n "$back_ms" ]; then
            row "trainer survives kill -9" "ok" "resumed at step ${resumed:-?}; $(grep -o 'max_error=[^ ]*' "$log" | tail -n 1)"
            row "worker back after kill (ms)" "$back_ms" "process restart + CUDA + NCCL init + checkpoint load"
        else
            row "trainer survives kill -9" "FAIL" "elasticrun exit $code; $(tail -n 1 "$log" | cut -c1-80)"
        fi
    else
        row "trainer survives kill -9" "FAIL" "no checkpoint before the kill: $(tail -n 1 "$log" | cut -c1-80)"
    fi
else
    row "trainer survives kill -9" "FAIL" "not run (no trainer, no elasticrun, or out of time)"
fi

# ---- the memory tier's device-to-host path (elastic.torch, issue 23) ----------------------------------
# save_state of 1 GiB of CUDA tensors into a memory tier: through the
# CUDA-registered staging region (cudaHostRegister via dlopen) vs the plain
# .cpu() copies, and the D2H rate of each. Written without a GPU at hand: the
# first run on one is its test.
if [ -f "$SRC/lib/libelastic.so" ] && command -v python3 >/dev/null && [ "$(seconds_left)" -gt 60 ]; then
    mkdir -p "$WORK/tier/own" "$WORK/tier/peer"
    printf 'elastic-memory-tier 1\nlimit %d\nsteps 2\n' $((8 << 30)) > "$WORK/tier/.elastic-memory-tier"
    cat > "$WORK/d2h.py" <<'PY'
import sys, time, torch
import elastic.torch as et
from elastic import Checkpoint
n = 1 << 30
state = {"w": torch.randn(n // 4, device="cuda")}
torch.cuda.synchronize()
def timed(step):
    with Checkpoint.memory_tier() as mem:
        t = time.perf_counter(); et.save_state(mem, step, state, replicated=False); return time.perf_counter() - t
timed(1)  # registers the staging region once
pinned = min(timed(s) for s in (2, 3, 4))
et._staging.reserve = lambda nbytes: False  # the .cpu() path
plain = min(timed(s) for s in (5, 6, 7))
t = time.perf_counter(); state["w"].cpu(); torch.cuda.synchronize(); cpu_copy = time.perf_counter() - t
print("pinned_s=%.4f plain_s=%.4f cpu_copy_s=%.4f pinned_gbs=%.2f plain_gbs=%.2f"
      % (pinned, plain, cpu_copy, n / pinned / 1e9, n / plain / 1e9))
PY
    if run_step d2h 60 env ELASTIC_LIB_DIR="$SRC/lib" PYTHONPATH="$SRC/bindings/python" \
        ELASTIC_MEMORY_CKPT_DIR="$WORK/tier/own" python3 "$WORK/d2h.py"; then
        line=$(grep -o 'pinned_s=.*' "$WORK/d2h.log" | tail -n 1)
        pinned=$(echo "$line" | sed 's/.*pinned_s=\([^ ]*\).*/\1/'); plain=$(echo "$line" | sed 's/.*plain_s=\([^ ]*\).*/\1/')
        rates=$(echo "$line" | sed 's/.*pinned_gbs=\([^ ]*\) plain_gbs=\([^ ]*\).*/\1 vs \2 GB\/s/')
        row "memory-tier save, 1 GiB CUDA, registered staging (s)" "$pinned" "elastic.torch.save_state; vs .cpu(): ${plain} s (${rates})"
    else
        row "memory-tier save, 1 GiB CUDA" "FAIL" "$(last_line d2h)"
    fi
fi

# ---- the table ----------------------------------------------------------------------------

echo
echo "libelastic NCCL on $(hostname) — $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - START)) s"
printf '%-30s %-22s %s\n' "check" "value" "note"
printf '%-30s %-22s %s\n' "-----" "-----" "----"
for r in "${ROWS[@]}"; do
    IFS='|' read -r name value note <<<"$r"
    printf '%-30s %-22s %s\n' "$name" "$value" "$note"
done
echo
echo "$FAILED failed; logs in $WORK"
[ "$FAILED" = 0 ]

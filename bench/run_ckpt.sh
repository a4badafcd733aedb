#!/usr/bin/env bash
# Checkpoint benchmark: libelastic save/load of 1 GiB of tensors (random
# fp32, trained-looking normal fp32 weights, bf16 weights, low-entropy zeros
# and counters, and a mix) beside
# `dd conv=fsync` of the same bytes, the same save with compression off, and
# torch.save+fsync / torch.load, medians of CKPT_BENCH_RUNS runs, one table.
# Env: CKPT_BENCH_BYTES (default 1 GiB), CKPT_BENCH_RUNS (3), CKPT_BENCH_DIR
# (default /var/tmp: a real disk, not tmpfs), TORCH_PYTHON (/usr/bin/python3).
set -euo pipefail
bench_dir=${ELASTIC_BENCH_DIR:-build/release/bench}
bytes=${CKPT_BENCH_BYTES:-1073741824}
runs=${CKPT_BENCH_RUNS:-3}
python=${TORCH_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${CKPT_BENCH_DIR:-/var/tmp}/elastic-ckpt-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
here=$(cd "$(dirname "$0")" && pwd)

results="$work/results"
"$bench_dir/ckpt_bench" "$work" "$bytes" "$runs" > "$results"
if "$python" -c 'import torch' 2>/dev/null; then
  "$python" "$here/ckpt_torch.py" "$work" "$bytes" "$runs" >> "$results"
else
  echo "torch not importable by $python: torch columns left out" >&2
fi

"$python" - "$results" <<'PY'
import sys
r = {}
for line in open(sys.argv[1]):
    k, _, v = line.strip().partition("=")
    r[k] = float(v)
gib = r["bytes"] / 2**30
def rate(s):
    return f"{r['bytes'] / s / 1e6:8.0f}" if s else "       -"
def ratio(a, b):
    return f"{a / b:6.2f}x" if a and b else "      -"
rows = []
print(f"checkpoint benchmark: {gib:.2f} GiB of float32 in 16 tensors, median of {int(r['runs'])} runs")
print(f"{'what':<34}{'seconds':>9}{'MB/s':>9}  {'vs dd':>7}  {'vs torch':>8}  {'vs raw':>7}  {'cpu s':>6}")
dd = r["dd_s"]
print(f"{'dd conv=fsync':<34}{dd:9.3f}{rate(dd)}")
for kind in ("random", "weights", "bf16", "lowent", "mix"):
    ts = r.get(f"torch_{kind}_save_s")
    if ts:
        print(f"{'torch.save+fsync ' + kind:<34}{ts:9.3f}{rate(ts)}  {ratio(dd, ts)}")
    s = r[f"{kind}_save_s"]
    raw = r[f"{kind}_raw_save_s"]
    stored = r[f"{kind}_stored_bytes"] / r["bytes"]
    print(f"{'elastic save raw ' + kind:<34}{raw:9.3f}{rate(raw)}  {ratio(dd, raw)}  {ratio(ts, raw)}  {'':>7}  {r[kind + '_raw_save_cpu_s']:6.2f}")
    print(f"{'elastic save ' + kind + f' ({stored:.0%} stored)':<34}{s:9.3f}{rate(s)}  {ratio(dd, s)}  {ratio(ts, s)}    {r[kind + '_raw_over_default']:6.2f}x  {r[kind + '_save_cpu_s']:6.2f}")
for temp in ("warm", "cold"):
    for kind in ("random", "mix"):
        tl = r.get(f"torch_{kind}_load_{temp}_s")
        if tl:
            print(f"{'torch.load ' + temp + ' ' + kind:<34}{tl:9.3f}{rate(tl)}")
        l = r[f"{kind}_load_{temp}_s"]
        print(f"{'elastic read ' + temp + ' ' + kind:<34}{l:9.3f}{rate(l)}  {'':>7}  {ratio(tl, l)}")
        l = r[f"{kind}_into_{temp}_s"]
        print(f"{'elastic read_into ' + temp + ' ' + kind:<34}{l:9.3f}{rate(l)}  {'':>7}  {ratio(tl, l)}")
print()
print(f"asynchronous save stall (mix set), median of {int(r['runs'])}; baseline: one thread's memcpy of the same")
print("bytes into a region mmap'd just before and never touched (fresh 4 KiB pages, what a first copy pays)")
print(f"{'what':<34}{'seconds':>9}{'MB/s':>9}  {'x fresh memcpy':>14}  {'page faults':>11}")
m = r["memcpy_fresh_s"]
for key, label in (("memcpy_fresh", "memcpy into fresh memory"),
                   ("memcpy_warm", "  memcpy into warm memory"),
                   ("async_stall_first", "save_async stall, first call"),
                   ("async_stall_reserved_first", "  first call after async_reserve"),
                   ("async_stall", "save_async stall, later calls")):
    t = r[key + "_s"]
    faults = r.get(key + "_faults")
    print(f"{label:<34}{t:9.3f}{rate(t)}  {t / m:13.2f}x  {int(faults) if faults is not None else '-':>11}")
print()
print("vs dd / vs torch / vs raw: the peer's time divided by ours (above 1: we are faster);")
print("raw: the same save with compression off (the default must never be slower); vs raw: the median of")
print("  each run's raw/default ratio (the two saves run back to back, in alternating order);")
print("cpu s: CPU seconds of the save, every thread (steadier than the wall clock on a shared machine)")
print("warm: files in the page cache; cold: evicted first. read: into fresh memory (as torch.load);")
print("read_into: into the model's existing tensors. Loads include open + latest (full verification).")
PY

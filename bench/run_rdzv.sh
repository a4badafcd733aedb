#!/usr/bin/env bash
# Rendezvous benchmark: libelastic (bench/rdzv_bench.c) against torch's
# DynamicRendezvousHandler with the c10d backend (bench/rdzv_torch.py), same
# machine, same run, N simulated nodes as threads with the store on loopback.
#   RDZV_NODES        node counts for libelastic   (default "2 16 128 1024")
#   RDZV_TORCH_NODES  node counts for torch        (default "2 16 128"; 1024 takes minutes)
#   RDZV_RUNS         libelastic runs per N, median (default 3)
#   RDZV_TORCH_CAP    seconds torch may take per phase before it counts as not done (default 120)
#   RDZV_ETCD_NODES   node counts on etcd v3, beside the embedded store (default: RDZV_NODES;
#                     skipped when etcd is not installed)
#   RDZV_ETCD_BIG     from this many nodes on, etcd runs use keep-alive 2000 ms / timeout 10000 ms
#                     instead of the library's defaults (500 / 2000; default: never, since
#                     keep-alives ride gRPC streams, one etcd member here answers 1024 x 2 a second)
#   RDZV_SCALE_NODES  node counts for the scale table: nodes as processes of RDZV_BATCH nodes
#                     each, the store alone in the bench's process, its CPU time per node
#                     (default "1024 4096"; RDZV_BIG=1: "1024 2048 4096 8192 16384")
#   RDZV_SCALE_RUNS   runs per N in the scale table, median (default 1)
#   RDZV_BATCH        nodes per process in the scale table (default 256)
#   RDZV_ETCD_SCALE   a file of etcd rows for the scale table, "N form_ms msgs kill_ms msgs
#                     cpu_ms_per_node", from the etcd benchmark (branch etcd-scale); missing: "-"
# 8192 nodes and more run ~4 threads a node: kernel.pid_max must allow them (run as root,
# this script raises it; else the bench says so and that row shows "-"); the store's
# process needs one descriptor a node. 16,384 nodes take about 4 minutes here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench_dir=${ELASTIC_BENCH_DIR:-$here/../build/release/bench}
nodes=${RDZV_NODES:-"2 16 128 1024"}
torch_nodes=${RDZV_TORCH_NODES:-"2 16 128"}
runs=${RDZV_RUNS:-3}
cap=${RDZV_TORCH_CAP:-120}
python=/usr/bin/python3
etcd_nodes=${RDZV_ETCD_NODES:-$nodes}
if [ "${RDZV_BIG:-0}" = 1 ]; then scale_default="1024 2048 4096 8192 16384"; else scale_default="1024 4096"; fi
scale_nodes=${RDZV_SCALE_NODES:-$scale_default}
scale_runs=${RDZV_SCALE_RUNS:-1}
batch=${RDZV_BATCH:-256}
out=$(mktemp -d)
etcd_pid=""
cleanup() { if [ -n "$etcd_pid" ]; then kill "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null || true; fi; rm -rf "$out"; }
trap cleanup EXIT

# A one-member etcd on free loopback ports, data in the temporary directory.
start_etcd() {
    local ports client peer i
    ports=$("$python" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    read -r client peer <<<"$ports"
    etcd --name bench --data-dir "$out/etcd" --listen-client-urls "http://127.0.0.1:$client" \
        --advertise-client-urls "http://127.0.0.1:$client" --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "bench=http://127.0.0.1:$peer" \
        --log-level error --quota-backend-bytes $((4 << 30)) --max-txn-ops 4096 >"$out/etcd.log" 2>&1 &
    etcd_pid=$!
    for i in $(seq 1 100); do
        if curl -s -m 1 -d '{"key":"AA=="}' "http://127.0.0.1:$client/v3/kv/range" | grep -q header; then
            etcd_endpoint="127.0.0.1:$client"
            return 0
        fi
        sleep 0.1 # etcd has no readiness signal but its own gateway answering
    done
    echo "etcd did not start: $(tail -3 "$out/etcd.log")" >&2
    return 1
}

"$bench_dir/rdzv_bench" --runs "$runs" $nodes > "$out/elastic"
"$bench_dir/rdzv_bench" --freeze 16 > "$out/freeze"
: > "$out/scale"
: > "$out/ops"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for n in $scale_nodes; do
    # ~4 threads a node (the caller, the monitor, the store client's reader and keep-alive).
    need=$((4 * n + 8192))
    if [ "$(cat /proc/sys/kernel/pid_max)" -lt "$need" ] && [ -w /proc/sys/kernel/pid_max ]; then
        echo "$need" > /proc/sys/kernel/pid_max
    fi
    RDZV_BENCH_OPS=1 "$bench_dir/rdzv_bench" --runs "$scale_runs" --procs "$batch" "$n" >> "$out/scale" 2>"$out/scale.err" ||
        { echo "$n -" >> "$out/scale"; grep -v '^#ops' "$out/scale.err" | tail -1 >&2; }
    grep '^#ops' "$out/scale.err" | tail -2 >> "$out/ops" || true
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# etcd rows: the bench's line per N into etcd_runs, what etcd itself counted
# per node per phase (its "#etcd" lines) into etcd_counts.
run_etcd_rows() {
    local n keepalive
    : > "$out/etcd_runs"
    : > "$out/etcd_counts"
    : > "$out/etcd_freeze"
    command -v etcd >/dev/null 2>&1 && start_etcd || return 0
    etcd_load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    for n in $etcd_nodes; do
        keepalive=500:2000
        [ -n "${RDZV_ETCD_BIG:-}" ] && [ "$n" -ge "$RDZV_ETCD_BIG" ] && keepalive=2000:10000
        "$bench_dir/rdzv_bench" --etcd "$etcd_endpoint" --keepalive "$keepalive" --runs "$runs" "$n" \
            > "$out/etcd_one" 2>"$out/etcd.err" || tail -1 "$out/etcd.err" >&2
        grep -v '^#etcd' "$out/etcd_one" >> "$out/etcd_runs" || true
        grep '^#etcd' "$out/etcd_one" >> "$out/etcd_counts" || true
    done
    etcd_load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    "$bench_dir/rdzv_bench" --etcd "$etcd_endpoint" --freeze 16 2>/dev/null | grep -v '^#etcd' > "$out/etcd_freeze" || true
}
etcd_load_before=- etcd_load_after=-
run_etcd_rows
if "$python" -c "import torch.distributed.elastic" 2>/dev/null; then
    "$python" "$here/rdzv_torch.py" "$cap" $torch_nodes > "$out/torch" 2>"$out/torch.err" || true
else
    : > "$out/torch"
fi

awk -v runs="$runs" '
function cell(v, fmt) { return v == "" || v < 0 ? "-" : sprintf(fmt, v) }
function ratio(a, b) { return a == "" || b == "" || a <= 0 || b <= 0 ? "-" : sprintf("%.0fx", b / a) }
FILENAME ~ /elastic$/ { n[$1] = 1; ef[$1] = $2; em[$1] = $3; eb[$1] = $4; ek[$1] = $5; ekm[$1] = $6; ekb[$1] = $7 }
FILENAME ~ /torch$/   { n[$1] = 1; tf[$1] = $2; tk[$1] = $5
                        if ($2 >= 0) { tm[$1] = $3; tb[$1] = $4 } else { tm[$1] = -1; tb[$1] = -1 }
                        if ($5 >= 0) { tkm[$1] = $6; tkb[$1] = $7 } else { tkm[$1] = -1; tkb[$1] = -1 } }
FILENAME ~ /freeze$/  { freeze = $3; freeze_n = $2 }
END {
    printf "rendezvous: N nodes as threads, store on loopback; libelastic median of %d runs, torch 1 run (c10d backend)\n", runs
    printf "per node = backend requests and payload bytes of one node in that phase (e = libelastic, t = torch)\n\n"
    printf "%5s | %9s %9s %6s | %6s %6s | %8s %9s | %11s %11s %6s | %6s %6s | %8s %9s\n", "N", "form e ms", "t ms", "speed",
           "msg e", "msg t", "bytes e", "bytes t", "kill->g+1 e", "t ms", "speed", "msg e", "msg t", "bytes e", "bytes t"
    for (k in n) order[++count] = k + 0
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= count; i++) {
        k = order[i]
        printf "%5d | %9s %9s %6s | %6s %6s | %8s %9s | %11s %11s %6s | %6s %6s | %8s %9s\n", k,
               cell(ef[k], "%.0f"), cell(tf[k], "%.0f"), ratio(ef[k], tf[k]), cell(em[k], "%.1f"), cell(tm[k], "%.1f"),
               cell(eb[k], "%.0f"), cell(tb[k], "%.0f"), cell(ek[k], "%.0f"), cell(tk[k], "%.0f"), ratio(ek[k], tk[k]),
               cell(ekm[k], "%.1f"), cell(tkm[k], "%.1f"), cell(ekb[k], "%.0f"), cell(tkb[k], "%.0f")
    }
    printf "\nkill: libelastic drops a node (its lease ends with its connection); torch stops its heartbeats (5 s x 3 default)\n"
    printf "frozen node (SIGSTOP, connection open, default 500 ms keep-alive / 2000 ms eviction), N=%d: next generation after %.0f ms\n", freeze_n, freeze
    printf "- : not run, or torch did not finish within the cap (RDZV_TORCH_CAP)\n"
    printf "targets: 1024 nodes form < 1000 ms; O(1) messages per node per round; kill -> next generation < 2500 ms\n"
}' "$out/elastic" "$out/torch" "$out/freeze"

# At scale: nodes as processes, the store alone; its CPU time per node per event. Torch's
# c10d rows are this run's (at the sizes it finished); etcd's come from RDZV_ETCD_SCALE.
etcd_scale=${RDZV_ETCD_SCALE:-/dev/null}
[ -r "$etcd_scale" ] || etcd_scale=/dev/null
awk -v runs="$scale_runs" -v batch="$batch" -v before="$load_before" -v after="$load_after" \
    -v torch="$out/torch" -v etcd="$etcd_scale" '
function cell(v, fmt) { return v == "" || v == "-" || v < 0 ? "-" : sprintf(fmt, v) }
FILENAME == torch { if ($2 >= 0) { tn[$1] = 1; tf[$1] = $2; tm[$1] = $3; tk[$1] = $5; tkm[$1] = $6 } ; next }
FILENAME == etcd { en[++ecount] = $1; ef[ecount] = $2; em[ecount] = $3; ek[ecount] = $4; ekm[ecount] = $5; ec[ecount] = $6; next }
{ n[++count] = $1; f[count] = $2; m[count] = $3; k[count] = $5; km[count] = $6; fc[count] = $10; kc[count] = $11 }
END {
    printf "\nrendezvous at scale: nodes as processes of %d nodes (threads) each, the store alone in the bench process;\n", batch
    printf "the victim is a node alone in its process, killed with SIGKILL; median of %d run(s); load average %s before, %s after\n\n", runs, before, after
    printf "%6s | %8s %8s | %10s %10s | %18s %18s\n", "N", "form ms", "msg/node", "kill->g+1", "msg/node", "store CPU ms/node", "store CPU ms/node"
    printf "%6s | %8s %8s | %10s %10s | %18s %18s\n", "", "", "(form)", "ms", "(kill)", "(form)", "(kill->g+1)"
    for (i = 1; i <= count; i++)
        printf "%6d | %8s %8s | %10s %10s | %18s %18s\n", n[i], cell(f[i], "%.0f"), cell(m[i], "%.1f"),
               cell(k[i], "%.0f"), cell(km[i], "%.1f"), cell(fc[i], "%.3f"), cell(kc[i], "%.3f")
    for (t in tn) torder[++tcount] = t + 0
    for (i = 1; i <= tcount; i++) for (j = i + 1; j <= tcount; j++) if (torder[j] < torder[i]) { x = torder[i]; torder[i] = torder[j]; torder[j] = x }
    printf "torch c10d, this run (nodes as threads, DynamicRendezvousHandler), at the sizes it finished:\n"
    if (tcount == 0) printf "%6s | none within the cap\n", "-"
    for (i = 1; i <= tcount; i++) { t = torder[i]
        printf "%6d | %8s %8s | %10s %10s | %18s %18s\n", t, cell(tf[t], "%.0f"), cell(tm[t], "%.1f"),
               cell(tk[t], "%.0f"), cell(tkm[t], "%.1f"), "-", "-" }
    printf "etcd v3 (RDZV_ETCD_SCALE; store CPU: etcd'"'"'s, both phases):\n"
    if (ecount == 0) printf "%6s | not given\n", "-"
    for (i = 1; i <= ecount; i++)
        printf "%6d | %8s %8s | %10s %10s | %18s %18s\n", en[i], cell(ef[i], "%.0f"), cell(em[i], "%.1f"),
               cell(ek[i], "%.0f"), cell(ekm[i], "%.1f"), cell(ec[i], "%.3f"), "-"
    printf "\nstore CPU = the bench process less its driving thread (getrusage), keep-alives during the phase included;\n"
    printf "messages are each node'"'"'s backend requests; the nodes share this machine'"'"'s cores with the store and everyone else\n"
    printf "keep-alives: 500 / 2000 ms asked; from 2,000 nodes on the library stretches them to keep the job at 4000 a second (16k: 4.1 / 16.4 s)\n"
    printf "targets: 4096 kill -> next < 2500 ms; 16384 form < 5000 ms; store CPU per node within 1.5x from 1k to 16k\n"
}' "$out/torch" "$etcd_scale" "$out/scale"
# What the store executed per node, by type, in each phase of the last run of
# each N: requests (keep-alives included), then the operations inside batches.
if [ -s "$out/ops" ]; then
    printf "\nstore requests per node by type (last run of each N; rdzv_bench RDZV_BENCH_OPS):\n"
    sed 's/^#ops /  /; s/ [a-z_]*=0\.00//g' "$out/ops"
fi

# The same phases on etcd v3 beside the embedded store (same machine, same run).
awk -v runs="$runs" '
function cell(v, fmt) { return v == "" || v < 0 ? "-" : sprintf(fmt, v) }
FILENAME ~ /elastic$/    { n[$1] = 1; sf[$1] = $2; sm[$1] = $3; sb[$1] = $4; sk[$1] = $5; skm[$1] = $6; skb[$1] = $7 }
FILENAME ~ /etcd_runs$/  { n[$1] = 1; ef[$1] = $2; em[$1] = $3; eb[$1] = $4; ek[$1] = $5; ekm[$1] = $6; ekb[$1] = $7
                           ew[$1] = $8; ekw[$1] = $9 }
FILENAME ~ /etcd_freeze$/ { freeze = $3 }
FILENAME ~ /freeze$/ && FILENAME !~ /etcd/ { sfreeze = $3 }
END {
    printf "\nrendezvous on etcd v3 (one member, loopback, JSON gateway) beside the embedded store; median of %d runs\n", runs
    printf "msg/bytes: backend requests and key+value bytes per node (s = store, e = etcd); wire: HTTP bytes per node on etcd\n\n"
    printf "%5s | %9s %9s | %5s %5s | %7s %7s %8s | %9s %9s | %5s %5s | %7s %7s %8s\n", "N", "form s ms", "e ms",
           "msg s", "msg e", "bytes s", "bytes e", "wire e", "kill s ms", "e ms", "msg s", "msg e", "bytes s", "bytes e", "wire e"
    for (k in n) order[++count] = k + 0
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= count; i++) {
        k = order[i]
        printf "%5d | %9s %9s | %5s %5s | %7s %7s %8s | %9s %9s | %5s %5s | %7s %7s %8s\n", k,
               cell(sf[k], "%.0f"), cell(ef[k], "%.0f"), cell(sm[k], "%.1f"), cell(em[k], "%.1f"),
               cell(sb[k], "%.0f"), cell(eb[k], "%.0f"), cell(ew[k], "%.0f"), cell(sk[k], "%.0f"), cell(ek[k], "%.0f"),
               cell(skm[k], "%.1f"), cell(ekm[k], "%.1f"), cell(skb[k], "%.0f"), cell(ekb[k], "%.0f"), cell(ekw[k], "%.0f")
    }
    printf "\nkill: one member is dropped, its handle freed (store: its connection closes; etcd: its lease is revoked)\n"
    printf "frozen node (SIGSTOP, 500 ms keep-alive / 2000 ms lease), N=16: store %s ms, etcd %s ms (etcd expires leases on its own clock, whole seconds)\n", cell(sfreeze, "%.0f"), cell(freeze, "%.0f")
    if (big != "") printf "etcd runs from %d nodes on use keep-alive 2000 ms / lease 10000 ms (RDZV_ETCD_BIG); the store keeps 500/2000\n", big
    else printf "etcd and the store run with the library'"'"'s keep-alive defaults (500 ms / lease 2000 ms)\n"
    printf "- : not run (etcd not installed) or failed\n"
}' big="${RDZV_ETCD_BIG:-}" "$out/elastic" "$out/etcd_runs" "$out/etcd_freeze" "$out/freeze"

# What etcd counted (its /metrics, read before and after each phase): per node,
# the last run of each N. Requests and Raft proposals follow the protocol and do
# not swing; keep-alives follow the phase's length; CPU is etcd's own.
print_etcd_counts() {
    [ -s "$out/etcd_counts" ] || return 0
    awk -v before="$etcd_load_before" -v after="$etcd_load_after" '
    function field(name,   i, kv) { for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] } return 0 }
    $3 != "form" && $3 != "kill" { next }
    { key = $2 " " $3; if (!(key in seen)) order[++count] = key; seen[key] = 1
      req[key] = field("range") + field("txn") + field("put") + field("delete") + field("watch") + field("grant") + field("revoke")
      for (i = 4; i <= NF; i++) { split($i, kv, "="); v[key, kv[1]] = kv[2] } }
    END {
        printf "\netcd per node per phase, counted by etcd (/metrics); load average %s before, %s after\n\n", before, after
        printf "%5s %5s | %8s %9s | %5s %5s %5s %6s %5s | %9s %11s\n", "N", "phase", "requests", "proposals",
               "range", "txn", "put", "delete", "watch", "keepalive", "etcd CPU ms"
        for (i = 1; i <= count; i++) {
            k = order[i]; split(k, nk, " ")
            printf "%5d %5s | %8.2f %9.2f | %5.2f %5.2f %5.2f %6.2f %5.2f | %9.2f %11.2f\n", nk[1], nk[2], req[k],
                   v[k, "proposals"], v[k, "range"], v[k, "txn"], v[k, "put"], v[k, "delete"], v[k, "watch"],
                   v[k, "keepalive"], v[k, "cpu_ms"]
        }
        printf "\nrequests = gRPC calls the JSON gateway made (keep-alives apart); proposals = Raft writes;\n"
        printf "the kill comes once etcd is quiet after the formation (rdzv_bench: under N/100 + 1 requests in 250 ms)\n"
        printf "etcd started with --max-txn-ops 4096 (a seal is one Txn); targets: 1024 form < 3000 ms, kill -> next < 3000 ms\n"
    }' "$out/etcd_counts"
}
print_etcd_counts

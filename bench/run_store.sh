#!/usr/bin/env bash
# Store benchmark: starts libelastic's store (`elasticctl store serve`) and
# PyTorch's TCPStore (Debian python3-torch, /usr/bin/python3) on loopback and
# drives both with bench_store, then repeats with our store requiring a token
# (TLS 1.3 with the token's PSK after the handshake) to show what TLS costs.
# Run by `make bench`.
# Environment: STORE_BENCH_SECONDS (per run, default 0.5), STORE_BENCH_RUNS (default 3).
set -euo pipefail
bench_dir=${ELASTIC_BENCH_DIR:-build/release/bench}
bin_dir=${ELASTIC_BIN_DIR:-bin}
python=/usr/bin/python3

if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    echo "run_store.sh: PyTorch is not installed at $python (apt-get install python3-torch); skipping"
    exit 0
fi

tmp=$(mktemp -d)
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

# Waits up to 30 s for the first line of a file.
first_line() {
    for _ in $(seq 300); do
        if [ -s "$1" ]; then head -n1 "$1"; return 0; fi
        sleep 0.1
    done
    echo "run_store.sh: no output in $1" >&2; return 1
}

"$bin_dir/elasticctl" store serve --host 127.0.0.1 --port 0 > "$tmp/ours" &
pids+=($!)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/token"
"$bin_dir/elasticctl" store serve --host 127.0.0.1 --port 0 --token-file "$tmp/token" > "$tmp/ours_tls" &
pids+=($!)
"$python" -c '
import sys, time, torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print(s.port, flush=True)
while True:
    time.sleep(3600)
' > "$tmp/theirs" &
pids+=($!)

ours=$(first_line "$tmp/ours"); ours=${ours#listening on }
ours_tls=$(first_line "$tmp/ours_tls"); ours_tls=${ours_tls#listening on }
theirs="127.0.0.1:$(first_line "$tmp/theirs")"
echo "== ours without a token (plaintext) vs TCPStore"
env -u ELASTIC_STORE_TOKEN -u ELASTIC_STORE_TOKEN_FILE \
    "$bench_dir/bench_store" "$ours" "$theirs" "${STORE_BENCH_SECONDS:-0.5}" "${STORE_BENCH_RUNS:-3}"
echo "== ours with a token (TLS 1.3 PSK) vs TCPStore"
env -u ELASTIC_STORE_TOKEN ELASTIC_STORE_TOKEN_FILE="$tmp/token" \
    "$bench_dir/bench_store" "$ours_tls" "$theirs" "${STORE_BENCH_SECONDS:-0.5}" "${STORE_BENCH_RUNS:-3}"

#!/bin/bash
# A fresh one-member etcd on loopback for one rdzv_bench --etcd run, and the
# CPU etcd spent on it: to compare two builds' request counts ("#etcd" lines,
# etcd's own per node and phase) and times in one session, e.g.
#   flock /work/wt/bench.lock bench/etcd_bench.sh build/release/bench/rdzv_bench 1024 500:2000 1
# (bench/run_rdzv.sh runs the full table, the embedded store beside it).
# usage: etcd_bench.sh BENCH_BIN N KEEPALIVE RUNS
bin=$1; n=$2; ka=$3; runs=$4
d=$(mktemp -d); port=$((24000 + RANDOM % 1000)); peer=$((port+1000))
etcd --name b --data-dir $d/etcd --listen-client-urls http://127.0.0.1:$port --advertise-client-urls http://127.0.0.1:$port --listen-peer-urls http://127.0.0.1:$peer --initial-advertise-peer-urls http://127.0.0.1:$peer --initial-cluster b=http://127.0.0.1:$peer --log-level error --quota-backend-bytes $((4<<30)) --max-txn-ops 4096 >$d/etcd.log 2>&1 &
ep=$!
for i in $(seq 100); do curl -s -m 1 -d '{"key":"AA=="}' http://127.0.0.1:$port/v3/kv/range | grep -q header && break; sleep 0.1; done
c0=$(awk '{print $14+$15}' /proc/$ep/stat)
$bin --etcd 127.0.0.1:$port --keepalive $ka --runs $runs $n
c1=$(awk '{print $14+$15}' /proc/$ep/stat)
echo "etcd cpu total $(( (c1-c0)*10 )) ms"
kill $ep; wait $ep 2>/dev/null; rm -rf $d

#!/usr/bin/env bash
# Self-test of the simulated-hosts library: hosts reach each other, a cut and a
# partition stop traffic and heal, loss is applied, the delay proxy adds latency,
# and teardown leaves no namespace behind.
set -euo pipefail
. "$(dirname "$0")/netns.sh"
netns_skip_unless_able
netns_setup 3

fail() { echo "FAIL: $*" >&2; exit 1; }
reach() { netns_reachable "$1" "$2"; }

reach 1 2 || fail "h1 cannot reach h2"
reach 3 1 || fail "h3 cannot reach h1"
# The private addresses exist only in our namespaces.
ip -o addr | grep -q "$(netns_addr 1)" && fail "h1's address leaked into the root namespace"

netns_cut 2
reach 1 2 && fail "h1 still reaches h2 after the cut"
netns_heal 2
reach 1 2 || fail "h1 does not reach h2 after the heal"

netns_partition 3
reach 1 3 && fail "h1 still reaches h3 across the partition"
reach 3 2 && fail "h3 still reaches h2 across the partition"
reach 1 2 || fail "the partition of h3 cut h1 from h2"
netns_unpartition 3
reach 1 3 || fail "h1 does not reach h3 after the partition ends"

netns_loss 2 1.0
reach 1 2 && fail "h2 answered with 100% loss"
netns_loss 2 0
reach 1 2 || fail "h2 unreachable after the loss was removed"

# Latency: an echo server on h2 behind a 150 ms proxy on h1; one request/answer
# must take at least two delays.
port_file=$(mktemp)
netns_exec 2 python3 -c '
import socket,sys
s=socket.socket(); s.bind(("'"$(netns_addr 2)"'",0)); s.listen(4)
open(sys.argv[1],"w").write(str(s.getsockname()[1])); 
while True:
    c,_=s.accept(); d=c.recv(64); c.sendall(d); c.close()
' "$port_file" &
echo_pid=$!
NETNS_PIDS+=("$echo_pid")
netns_wait_for "$port_file" '^[0-9]+$' 10 || fail "echo server did not start"
echo_port=$(cat "$port_file")
netns_delay_proxy 1 7001 "$(netns_addr 2)" "$echo_port" 150
rtt_ms=$(netns_exec 1 python3 -c '
import socket,time
t=time.monotonic(); c=socket.create_connection(("'"$(netns_addr 1)"'",7001),timeout=5)
c.sendall(b"ping"); d=c.recv(64); assert d==b"ping", d
print(int((time.monotonic()-t)*1000))')
[ "$rtt_ms" -ge 290 ] || fail "round trip through the 150 ms proxy took only $rtt_ms ms"
rm -f "$port_file"

prefix=$NETNS_PREFIX
netns_teardown
ip netns list | grep -q "^$prefix" && fail "namespaces left after teardown"
echo "netns selftest: ok (proxied round trip $rtt_ms ms)"

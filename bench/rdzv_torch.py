"""Torch's DynamicRendezvousHandler (c10d backend) under the same load as
bench/rdzv_bench.c: N nodes as threads, each with its own TCPStore client on
loopback, form a round; then one node stops (its heartbeats end) and the
others call next_rendezvous() again. Backend messages/bytes are counted at a
wrapper around each node's store (get / compare_set, the backend's only
calls). Prints one line per N: "N form_ms msgs bytes kill_ms kill_msgs kill_bytes"
(kill_ms -1: no new round within the cap).

usage: /usr/bin/python3 bench/rdzv_torch.py CAP_SECONDS N...
"""
import sys
import threading
import time
from datetime import timedelta

import torch.distributed as dist
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    DynamicRendezvousHandler,
    RendezvousTimeout,
)


class CountingStore:
    """The backend's view of the store, counting requests and payload bytes."""

    def __init__(self, store):
        self.store = store
        self.messages = 0
        self.bytes = 0

    def get(self, key):
        value = self.store.get(key)
        self.messages += 1
        self.bytes += len(key) + len(value)
        return value

    def compare_set(self, key, expected, desired):
        value = self.store.compare_set(key, expected, desired)
        self.messages += 1
        self.bytes += len(key) + len(expected) + len(desired) + len(value)
        return value


def make_node(port, run_id, n, cap):
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=cap))
    counting = CountingStore(store)
    backend = C10dRendezvousBackend(counting, run_id)
    timeout = RendezvousTimeout(join=timedelta(seconds=cap), last_call=timedelta(seconds=1))
    handler = DynamicRendezvousHandler.from_backend(
        run_id, store, backend, min_nodes=max(1, n - 1), max_nodes=n, timeout=timeout
    )
    return handler, counting


def run_all(handlers, cap):
    done = [None] * len(handlers)

    def body(i):
        try:
            handlers[i].next_rendezvous()
            done[i] = time.monotonic()
        except Exception as exc:  # a node that gave up counts as not formed
            print(f"node {i}: {type(exc).__name__}: {exc}", file=sys.stderr)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(handlers))]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(cap)
    if any(d is None for d in done):
        return start, None
    return start, max(done)


def bench(n, cap, run):
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=cap))
    nodes = [make_node(server.port, f"torch-{n}-{run}", n, cap) for _ in range(n)]
    handlers = [h for h, _ in nodes]
    counters = [c for _, c in nodes]
    base = [(c.messages, c.bytes) for c in counters]
    start, end = run_all(handlers, cap)
    if end is None:
        return None
    form_ms = (end - start) * 1000
    msgs = sum(c.messages - b[0] for c, b in zip(counters, base)) / n
    nbytes = sum(c.bytes - b[1] for c, b in zip(counters, base)) / n
    kill_ms, kill_msgs, kill_bytes = -1.0, 0.0, 0.0
    if n > 1:
        victim = n // 2
        handlers[victim]._stop_heartbeats()  # as if the node were killed
        rest = [h for i, h in enumerate(handlers) if i != victim]
        rest_counters = [c for i, c in enumerate(counters) if i != victim]
        base = [(c.messages, c.bytes) for c in rest_counters]
        start, end = run_all(rest, cap)
        if end is not None:
            kill_ms = (end - start) * 1000
            kill_msgs = sum(c.messages - b[0] for c, b in zip(rest_counters, base)) / (n - 1)
            kill_bytes = sum(c.bytes - b[1] for c, b in zip(rest_counters, base)) / (n - 1)
    return form_ms, msgs, nbytes, kill_ms, kill_msgs, kill_bytes


def main():
    cap = float(sys.argv[1])
    for arg in sys.argv[2:]:
        n = int(arg)
        result = bench(n, cap, 0)
        if result is None:
            print(f"{n} -1 0 0 -1 0 0", flush=True)
            continue
        print("%d %.1f %.1f %.0f %.1f %.1f %.0f" % ((n,) + result), flush=True)


if __name__ == "__main__":
    main()

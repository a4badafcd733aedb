"""A node turning 3x slow, under elasticrun with a waiting spare and under
torchrun (the peer: it has no straggler replacement), in one run. Three
agents on loopback (--nnodes=2:2, 2 workers each; the third waits as the
spare); every worker is test/helpers/probe_worker `compute 20` (20 ms steps
reported with elastic_worker_report_step_time), 3x slower while its node's
slow file exists. The bench creates node B's slow file and measures:
  - the time from the slowdown to the spare's workers running (its
    worker_started events), elasticrun only;
  - the job's steps/s before, during and after: the pace of synchronous
    training is its slowest rank's, so the job's rate over a window is the
    least rate of the ranks running in it (from the workers' "tick" lines).
Prints one table of medians over ROUNDS rounds, interleaved.

usage: /usr/bin/python3 bench/straggler_bench.py ELASTICRUN PROBE_WORKER ROUNDS
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

STEP_MS = 20
BEFORE_S = 5.0     # measured before the slowdown
AFTER_S = 5.0      # measured once the spare runs (torchrun: the same time after the slowdown)
DEADLINE_S = 90.0  # every wait is bounded


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now_ms():
    return int(time.time() * 1000)


def wait_for(what, check, timeout=DEADLINE_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def events(path, name):
    try:
        with open(path) as f:
            return [e for e in (json.loads(l) for l in f if l.strip()) if e.get("event") == name]
    except FileNotFoundError:
        return []


def ticks(path):
    """{rank: [(wall_ms, step)]} from one launcher's stdout."""
    out = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("[") and "]:" in line:  # torchrun's tee prefix, "[default0]:"
                    line = line.split("]:", 1)[1]
                parts = line.split()
                if len(parts) == 4 and parts[0] == "tick":
                    out.setdefault(int(parts[1]), []).append((int(parts[3]), int(parts[2])))
    except FileNotFoundError:
        pass
    return out


def job_rate(outputs, start_ms, end_ms):
    """The least steps/s of any rank with ticks in [start, end] (synchronous training's pace)."""
    rates = []
    for path in outputs:
        for series in ticks(path).values():
            inside = [(t, s) for t, s in series if start_ms <= t <= end_ms]
            if len(inside) >= 2 and inside[-1][1] > inside[0][1]:
                rates.append((inside[-1][1] - inside[0][1]) * 1000.0 / (inside[-1][0] - inside[0][0]))
    if not rates:
        raise RuntimeError("no ticks between %d and %d" % (start_ms, end_ms))
    return min(rates)


def spawn(cmd, out_path, env):
    return subprocess.Popen(cmd, stdout=open(out_path, "w"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def elasticrun_round(elasticrun, worker, work):
    port = free_port()
    procs, outputs, logs = [], {}, {}
    try:
        for node in "ABC":
            if node == "C":  # the spare joins once A and B run
                wait_for("A and B running", lambda: all(len(events(logs[n], "worker_started")) >= 2 for n in "AB"))
            logs[node] = os.path.join(work, "events.%s.jsonl" % node)
            outputs[node] = os.path.join(work, "out.%s" % node)
            env = dict(os.environ, ELASTIC_LOG_LEVEL="warn", PROBE_WORKER_SLOW_FILE=os.path.join(work, "slow." + node))
            conf = "last_call_timeout=1,join_timeout=120,is_host=%d" % (node == "A")
            procs.append(spawn([elasticrun, "--nnodes", "2:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                                "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "bench", "--rdzv-conf", conf,
                                "--local-addr", "127.0.0.1", "--monitor-interval", "0.2", "--straggler-window", "3",
                                "--straggler-rounds", "3", "--straggler-evict", "--straggler-quarantine", "600",
                                "--event-log", logs[node], "--no-python", worker, "compute", str(STEP_MS)],
                               outputs[node], env))
        started = wait_for("the job's first ticks", lambda: ticks(outputs["A"]) and ticks(outputs["B"]) and now_ms())
        time.sleep(BEFORE_S)  # the measured window itself, not a synchronisation
        slow_at = now_ms()
        open(os.path.join(work, "slow.B"), "w").close()
        spare = wait_for("the spare's workers", lambda: len(events(logs["C"], "worker_started")) >= 2 and
                         max(e["ts_ms"] for e in events(logs["C"], "worker_started")))
        evicted = events(logs["B"], "straggler_evicted")
        if len(evicted) != 1:
            raise RuntimeError("B was not evicted exactly once: %s" % evicted)
        time.sleep(1.0 + AFTER_S)
        before = job_rate([outputs["A"], outputs["B"]], started + 1000, slow_at)
        during = job_rate([outputs["A"], outputs["B"]], slow_at + 500, evicted[0]["ts_ms"])
        after = job_rate([outputs["A"], outputs["C"]], spare + 1000, spare + 1000 + int(AFTER_S * 1000))
        restarts = [e["restart_count"] for e in events(logs["A"], "generation_formed")]
        if restarts[-1] != 0:
            raise RuntimeError("the eviction spent restart budget: %s" % restarts)
        return spare - slow_at, evicted[0]["ts_ms"] - slow_at, before, during, after
    finally:
        stop(procs)


def torchrun_round(python, worker, work, after_offset_ms):
    port = free_port()
    procs, outputs = [], {}
    try:
        for node in "AB":
            outputs[node] = os.path.join(work, "torch.%s" % node)
            env = dict(os.environ, PROBE_WORKER_SLOW_FILE=os.path.join(work, "tslow." + node))
            procs.append(spawn([python, "-m", "torch.distributed.run", "--nnodes", "2:2", "--nproc_per_node", "2",
                                "--rdzv_backend", "c10d", "--rdzv_endpoint", "127.0.0.1:%d" % port,
                                "--rdzv_id", "bench", "--rdzv_conf", "is_host=%d" % (node == "A"),
                                "--max_restarts", "3", "--redirects", "1", "--tee", "1", "--no_python", worker, "compute", str(STEP_MS)],
                               outputs[node], env))
        started = wait_for("torchrun's first ticks", lambda: ticks(outputs["A"]) and ticks(outputs["B"]) and now_ms())
        time.sleep(BEFORE_S)
        slow_at = now_ms()
        open(os.path.join(work, "tslow.B"), "w").close()
        time.sleep((after_offset_ms + 1000) / 1000.0 + AFTER_S)
        both = [outputs["A"], outputs["B"]]
        before = job_rate(both, started + 1000, slow_at)
        during = job_rate(both, slow_at + 500, slow_at + after_offset_ms)
        after = job_rate(both, slow_at + after_offset_ms + 1000, slow_at + after_offset_ms + 1000 + int(AFTER_S * 1000))
        return before, during, after
    finally:
        stop(procs)


def main():
    elasticrun, worker, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    python = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")
    have_torch = subprocess.run([python, "-c", "import torch.distributed.run"], capture_output=True).returncode == 0
    er, tr = [], []
    for _ in range(rounds):
        work = tempfile.mkdtemp(prefix="elastic-straggler-bench.")
        try:
            er.append(elasticrun_round(elasticrun, worker, work))
            if have_torch:
                tr.append(torchrun_round(python, worker, work, int(er[-1][0])))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    med = lambda rows, i: statistics.median(r[i] for r in rows)
    load = os.getloadavg()
    print("straggler replacement, %d round(s), medians; a node's workers turn 3x slow (20 -> 60 ms steps);"
          " load %.1f %.1f %.1f, %d CPUs" % (rounds, load[0], load[1], load[2], os.cpu_count()))
    print("%-44s %14s %12s %12s %12s" % ("", "slow->spare", "before", "during", "after"))
    print("%-44s %12.2f s %10.1f/s %10.1f/s %10.1f/s" % (
        "elasticrun --straggler-evict (spare waiting)", med(er, 0) / 1000.0, med(er, 2), med(er, 3), med(er, 4)))
    print("%-44s %14s %12s" % ("  of which: slowdown -> eviction decided", "%.2f s" % (med(er, 1) / 1000.0), ""))
    if have_torch:
        print("%-44s %14s %10.1f/s %10.1f/s %10.1f/s" % ("torchrun (no straggler replacement)", "never",
                                                         med(tr, 0), med(tr, 1), med(tr, 2)))
        print("after/before: elasticrun %.2f, torchrun %.2f" % (med(er, 4) / med(er, 2), med(tr, 2) / med(tr, 0)))
    else:
        print("torchrun: %s cannot import torch.distributed.run; not measured" % python)


if __name__ == "__main__":
    main()

"""Failure -> every rank training again, for one PyTorch DDP job (gloo, CPU,
examples/python/ddp_inprocess.py) whose rank 1 SIGKILLs itself at a fixed
step: in-process recovery under elasticrun (survivors stay), the same with
one warm spare (the dead rank's place goes to a process already imported and
parked), the same with the memory tier (--memory-ckpt, a save every step:
the recovery restores from memory), a full restart under elasticrun, and a
full restart under torchrun, ROUNDS rounds each,
interleaved so load drifts hit every mode alike. The time runs from the kill
(the dying rank's clock) to the last rank's first completed step after
resuming from the checkpoint. Prints one table with medians, the warm-spare
mode's recovery_phases (median per phase, from the agent's event log) and the
resident memory of a parked spare beside a live rank's.

usage: /usr/bin/python3 bench/torch_recovery.py ELASTICRUN ROUNDS NPROC
"""
import os
import re
import shutil
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "examples", "python", "ddp_inprocess.py")
KILL_AT, STEPS = 13, 30
SPARE_MODE = "elasticrun --in-process-recovery --warm-spares=1"
MEMORY_MODE = SPARE_MODE + " --memory-ckpt"  # and the trainer saves every step to memory


def read_events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class RssSampler(threading.Thread):
    """Every 100 ms: the RSS of each parked spare and of each live rank (from
    the event log's pids); keeps the largest seen of each kind."""

    def __init__(self, events):
        super().__init__(daemon=True)
        self.events, self.stop, self.spare, self.rank = events, threading.Event(), 0, 0

    def run(self):
        while not self.stop.wait(0.1):
            evs = read_events(self.events)
            promoted = {e["pid"] for e in evs if e["event"] == "spare_promoted"}
            spares = {e["pid"] for e in evs if e["event"] == "spare_parked"} - promoted
            ranks = {e["pid"] for e in evs if e["event"] == "worker_started"} | promoted
            for pids, kind in ((spares, "spare"), (ranks, "rank")):
                for pid in pids:
                    kib = rss_kib(pid)
                    if kib is not None and kib > getattr(self, kind):
                        setattr(self, kind, kib)


def launchers(elasticrun, nproc):
    common = ["--standalone", "--nproc-per-node=%d" % nproc, "--max-restarts=1"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % nproc,
                "--max_restarts=1", "--redirects", "2", "--tee", "2"]
    # (name, launcher, the trainer's extra arguments)
    return [
        ("elasticrun --in-process-recovery", [elasticrun] + common + ["--in-process-recovery"], []),
        (SPARE_MODE, [elasticrun] + common + ["--in-process-recovery", "--warm-spares=1"], []),
        (MEMORY_MODE, [elasticrun] + common + ["--in-process-recovery", "--warm-spares=1", "--memory-ckpt"],
         ["--memory-every", "1"]),
        ("elasticrun (full restart)", [elasticrun] + common, []),
        ("torchrun (full restart, monitor 5 s)", torchrun, []),
        ("torchrun --monitor_interval 0.1", torchrun + ["--monitor_interval", "0.1"], []),
    ]


def one_round(launcher, trainer_args, work):
    report = os.path.join(work, "report")
    ckpt = os.path.join(work, "ckpt")
    events = os.path.join(work, "events.jsonl")
    shutil.rmtree(ckpt, ignore_errors=True)
    for path in (report, events):
        if os.path.exists(path):
            os.unlink(path)
    if "elasticrun" in os.path.basename(launcher[0]):
        launcher = launcher + ["--event-log", events]
    env = dict(os.environ, PYTHON_EXEC=sys.executable, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    cmd = launcher + [EXAMPLE, "--dir", ckpt, "--steps", str(STEPS), "--every", "5", "--kill-rank", "1",
                      "--kill-at-step", str(KILL_AT), "--step-seconds", "0.02", "--no-fsync", "--report", report] + trainer_args
    sampler = RssSampler(events)
    sampler.start()
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    sampler.stop.set()
    sampler.join()
    if run.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(launcher[:2]), run.returncode, run.stderr[-3000:]))
    lines = open(report).read().splitlines()
    kill = [float(re.search(r"t=([\d.]+)", l).group(1)) for l in lines if l.startswith("kill")]
    after = {}
    pids_before, pids_after = {}, {}
    for line in lines:
        m = re.match(r"trained rank=(\d+) pid=(\d+) restart=\d+ step=\d+ t=([\d.]+)", line)
        if not m:
            continue
        rank, pid, t = int(m.group(1)), int(m.group(2)), float(m.group(3))
        if len(kill) == 1 and t > kill[0]:
            after[rank] = min(after.get(rank, t), t)
            pids_after[rank] = pid
        else:
            pids_before[rank] = pid
    if len(kill) != 1 or not after:
        raise RuntimeError("no kill or no recovery in the report:\n" + "\n".join(lines))
    kept = sum(1 for r, p in pids_before.items() if pids_after.get(r) == p)
    evs = read_events(events)
    phases = [e for e in evs if e["event"] == "recovery_phases"]
    promoted = sum(1 for e in evs if e["event"] == "spare_promoted")
    # where the recovered generation's ranks restored from (elasticrun only)
    sources = sorted({"%s step %d" % (e["source"], e["step"]) for e in evs
                      if e["event"] == "checkpoint_restored" and e["generation"] > 1})
    extra = {"phases": phases[0] if phases else None, "promoted": promoted,
             "rss_spare": sampler.spare, "rss_rank": sampler.rank, "sources": sources}
    return max(after.values()) - kill[0], kept, extra


def main():
    elasticrun, rounds, nproc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    modes = launchers(elasticrun, nproc)
    times = {name: [] for name, _, _ in modes}
    kept = {name: 0 for name, _, _ in modes}
    extras = {name: [] for name, _, _ in modes}
    work = tempfile.mkdtemp(prefix="elastic-torch-recovery.")
    try:
        for _ in range(rounds):
            for name, launcher, trainer_args in modes:
                seconds, survivors, extra = one_round(launcher, trainer_args, work)
                times[name].append(seconds)
                kept[name] = survivors
                extras[name].append(extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print("DDP (gloo, CPU) of %d ranks, rank 1 SIGKILLed at step %d; failure -> every rank trained a step again"
          % (nproc, KILL_AT))
    print("%d rounds, %d cores, load %.1f" % (rounds, os.cpu_count(), load))
    print("%-50s %10s %10s %10s %9s %9s" % ("launcher", "median s", "min s", "max s", "vs in-proc", "pids kept"))
    base = statistics.median(times[modes[0][0]])
    for name, _, _ in modes:
        med = statistics.median(times[name])
        print("%-50s %10.3f %10.3f %10.3f %9.1fx %9d" % (name, med, min(times[name]), max(times[name]), med / base,
                                                          kept[name]))
    torchrun = statistics.median(times[modes[-1][0]])
    for mode in (SPARE_MODE, MEMORY_MODE):
        spare = extras[mode]
        print("%s:" % mode)
        print("  vs torchrun --monitor_interval 0.1: %.1fx faster; spare promoted in %d of %d rounds"
              % (torchrun / statistics.median(times[mode]), sum(1 for e in spare if e["promoted"]), len(spare)))
        keys = []
        for e in spare:
            for key in (e["phases"] or {}):
                if key.endswith("_ms") and key != "ts_ms" and key not in keys:
                    keys.append(key)
        print("  recovery_phases (median ms over rounds): " + ", ".join(
            "%s %d" % (key[:-3], statistics.median([e["phases"][key] for e in spare
                                                    if e["phases"] and key in e["phases"]]))
            for key in keys))
        print("  restored from: " + "; ".join(sorted({", ".join(e["sources"]) or "disk (load_state, not reported)"
                                                  for e in spare})))
        rss_spare = [e["rss_spare"] for e in spare if e["rss_spare"]]
        rss_rank = [e["rss_rank"] for e in spare if e["rss_rank"]]
        if rss_spare and rss_rank:
            print("  RSS: parked spare %.0f MiB, live rank %.0f MiB (largest seen, median over rounds)"
                  % (statistics.median(rss_spare) / 1024, statistics.median(rss_rank) / 1024))


if __name__ == "__main__":
    main()

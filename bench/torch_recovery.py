"""Failure -> every rank training again, for one PyTorch DDP job (gloo, CPU,
examples/python/ddp_inprocess.py) whose rank 1 SIGKILLs itself at a fixed
step: in-process recovery under elasticrun (survivors stay), a full restart
under elasticrun, and a full restart under torchrun, ROUNDS rounds each,
interleaved so load drifts hit every mode alike. The time runs from the kill
(the dying rank's clock) to the last rank's first completed step after
resuming from the checkpoint. Prints one table with medians.

usage: /usr/bin/python3 bench/torch_recovery.py ELASTICRUN ROUNDS NPROC
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLE = os.path.join(ROOT, "examples", "python", "ddp_inprocess.py")
KILL_AT, STEPS = 13, 30


def launchers(elasticrun, nproc):
    common = ["--standalone", "--nproc-per-node=%d" % nproc, "--max-restarts=1"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=%d" % nproc,
                "--max_restarts=1", "--redirects", "2", "--tee", "2"]
    return [
        ("elasticrun --in-process-recovery", [elasticrun] + common + ["--in-process-recovery"]),
        ("elasticrun (full restart)", [elasticrun] + common),
        ("torchrun (full restart, monitor 5 s)", torchrun),
        ("torchrun --monitor_interval 0.1", torchrun + ["--monitor_interval", "0.1"]),
    ]


def one_round(launcher, work):
    report = os.path.join(work, "report")
    ckpt = os.path.join(work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    if os.path.exists(report):
        os.unlink(report)
    env = dict(os.environ, PYTHON_EXEC=sys.executable, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
    cmd = launcher + [EXAMPLE, "--dir", ckpt, "--steps", str(STEPS), "--every", "5", "--kill-rank", "1",
                      "--kill-at-step", str(KILL_AT), "--step-seconds", "0.02", "--no-fsync", "--report", report]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
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
    return max(after.values()) - kill[0], kept


def main():
    elasticrun, rounds, nproc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    modes = launchers(elasticrun, nproc)
    times = {name: [] for name, _ in modes}
    kept = {name: 0 for name, _ in modes}
    work = tempfile.mkdtemp(prefix="elastic-torch-recovery.")
    try:
        for _ in range(rounds):
            for name, launcher in modes:
                seconds, survivors = one_round(launcher, work)
                times[name].append(seconds)
                kept[name] = survivors
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()[0]
    print("DDP (gloo, CPU) of %d ranks, rank 1 SIGKILLed at step %d; failure -> every rank trained a step again"
          % (nproc, KILL_AT))
    print("%d rounds, %d cores, load %.1f" % (rounds, os.cpu_count(), load))
    print("%-38s %10s %10s %10s %9s %9s" % ("launcher", "median s", "min s", "max s", "vs in-proc", "pids kept"))
    base = statistics.median(times[modes[0][0]])
    for name, _ in modes:
        med = statistics.median(times[name])
        print("%-38s %10.3f %10.3f %10.3f %9.1fx %9d" % (name, med, min(times[name]), max(times[name]), med / base,
                                                          kept[name]))


if __name__ == "__main__":
    main()

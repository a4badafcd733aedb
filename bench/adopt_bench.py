#!/usr/bin/env python3
"""The adoption benchmark (bench/run_adopt.sh runs it): PyTorch's DDP tutorial
script on gloo, 3 ranks, rank 1 SIGKILLed mid-epoch (once it trained
KILL_AFTER steps), ROUNDS runs of each launcher set-up; medians.

  torchrun     ddp_plain.py under torchrun --monitor_interval 0.1
  elasticrun   ddp_plain.py under elasticrun (unchanged; interpreters started ahead)
  --no-prestart  the same with every restarted rank started afresh
  job          ddp_elastic.py under elasticrun --memory-ckpt --in-process-recovery --warm-spares=1
  hand-written ddp_inprocess.py with the same flags

Columns: kill -> every rank trained again (the latest first optimizer step
after the kill over the ranks, test/helpers/step_log counting steps from
outside the script), batches redone (steps a rank trained beyond a fault-free
run), survivors' PIDs kept (runs where ranks 0 and 2 kept their process),
result equal to the fault-free run (runs whose final weights equal, bit for
bit, a fault-free run of the same script under the same launcher)."""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLES = os.path.join(ROOT, "examples", "python")
STEP_LOG_DIR = os.path.join(ROOT, "test", "helpers", "step_log")
AGENT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT",
              "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "STEP_LOG")


def env_for(python, step_log):
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS and not k.startswith("ELASTIC_STORE")}
    env["PYTHONPATH"] = STEP_LOG_DIR + os.pathsep + os.path.join(ROOT, "bindings", "python")
    env["PYTHON_EXEC"] = python
    env["GLOO_SOCKET_IFNAME"] = "lo"
    if step_log:
        env["STEP_LOG"] = step_log
    return env


def steps_by_rank(path):
    found = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] != "-":
                    found.setdefault(int(parts[0]), []).append((float(parts[2]), int(parts[1])))
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Setup:
    def __init__(self, name, launcher, script, args, result):
        self.name, self.launcher, self.script, self.args, self.result = name, launcher, script, args, result


def setups(python, elasticrun, epochs, sleep):
    # as --standalone does, on a free port (a concurrent torchrun may hold --standalone's 29400)
    torchrun = [python, "-m", "torch.distributed.run", "--nnodes=1", "--rdzv_backend=c10d",
                "--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=adopt", "--nproc_per_node=3",
                "--redirects", "2", "--tee", "2", "--max_restarts", "3", "--monitor_interval", "0.1"]
    plain = [elasticrun, "--standalone", "--nproc-per-node=3", "--max-restarts=3"]
    fast = plain + ["--memory-ckpt", "--in-process-recovery", "--warm-spares=1"]
    tutorial = lambda d: ["--epochs", str(epochs), "--dir", d, "--out", d + "/result", "--step-sleep", str(sleep)]
    inprocess = lambda d: ["--dir", d, "--steps", str(epochs * 16), "--every", "16", "--memory-every", "1",
                           "--no-fsync", "--out", d + "/result", "--step-seconds", str(sleep)]
    return [
        Setup("torchrun, ddp_plain.py unchanged", torchrun, "ddp_plain.py", tutorial, "result"),
        Setup("elasticrun, ddp_plain.py unchanged", plain, "ddp_plain.py", tutorial, "result"),
        Setup("elasticrun --no-prestart, ddp_plain.py unchanged", plain + ["--no-prestart"], "ddp_plain.py",
              tutorial, "result"),
        Setup("elasticrun + flags, ddp_elastic.py (the Job)", fast, "ddp_elastic.py", tutorial, "result"),
        Setup("elasticrun + flags, ddp_inprocess.py (by hand)", fast, "ddp_inprocess.py", inprocess, "result"),
    ]


def tail(path, lines=25):
    """The end of a run's output (the work directory goes when the benchmark ends)."""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def result_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def same_result(a, b, python):
    """Bit-equal final weights: digests compare as text, torch.save files by tensors."""
    if a.endswith("result") and result_bytes(a)[:2] != b"PK":
        return result_bytes(a) == result_bytes(b)
    code = ("import torch,sys; x,y=torch.load(sys.argv[1]),torch.load(sys.argv[2]); "
            "sys.exit(0 if list(x)==list(y) and all(torch.equal(x[k],y[k]) for k in x) else 1)")
    return subprocess.run([python, "-c", code, a, b]).returncode == 0


def one_run(setup, python, work, kill_after, timeout, kill):
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "steps")
    launcher = [arg.replace("{port}", str(free_port())) for arg in setup.launcher]  # a fresh port a run
    cmd = launcher + [os.path.join(EXAMPLES, setup.script)] + setup.args(work)
    with open(os.path.join(work, "out"), "w") as out:
        proc = subprocess.Popen(cmd, env=env_for(python, log), stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        killed_at = None
        before = {}
        try:
            while kill and killed_at is None and proc.poll() is None and time.monotonic() < deadline:
                steps = steps_by_rank(log)
                if len(steps.get(1, [])) >= kill_after:
                    before = {rank: {pid for _, pid in entries} for rank, entries in steps.items()}
                    killed_at = time.time()
                    os.kill(steps[1][-1][1], 9)
                else:
                    time.sleep(0.02)
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    steps = steps_by_rank(log)
    return proc.returncode, killed_at, before, steps


def measure(setup, python, work, rounds, kill_after, fault_free_steps, timeout):
    reference = os.path.join(work, "reference")
    rc, _, _, ref_steps = one_run(setup, python, reference, kill_after, timeout, kill=False)
    if rc != 0:
        raise SystemExit("%s: the fault-free run failed (rc %d); its output ends:\n%s"
                         % (setup.name, rc, tail(os.path.join(reference, "out"))))
    per_rank = max(len(v) for v in ref_steps.values())
    recoveries, redone, kept, equal = [], [], 0, 0
    for index in range(rounds):
        run_dir = os.path.join(work, "run%d" % index)
        rc, killed_at, before, steps = one_run(setup, python, run_dir, kill_after, timeout, kill=True)
        if rc != 0 or killed_at is None:
            print("%s: run %d failed (rc %s, killed %s); its output ends:\n%s"
                  % (setup.name, index, rc, killed_at, tail(os.path.join(run_dir, "out"))), file=sys.stderr)
            continue
        back = [min([t for t, _ in entries if t > killed_at] or [float("inf")]) - killed_at
                for entries in steps.values()]
        recoveries.append(max(back))
        redone.append(max(len(entries) for entries in steps.values()) - per_rank)
        if all({pid for _, pid in steps[r]} == before.get(r) for r in (0, 2)):
            kept += 1
        if same_result(os.path.join(run_dir, setup.result), os.path.join(reference, setup.result), python):
            equal += 1
    return {"name": setup.name, "runs": len(recoveries), "rounds": rounds,
            "recovery_s": statistics.median(recoveries) if recoveries else None,
            "redone": statistics.median(redone) if redone else None, "kept": kept, "equal": equal}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elasticrun", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--step-sleep", type=float, default=0.05)
    parser.add_argument("--kill-after", type=int, default=40, help="rank 1's steps before its SIGKILL")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--only", help="run only the set-ups whose name contains this")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="run_adopt.") as work:
        for index, setup in enumerate(setups(args.python, args.elasticrun, args.epochs, args.step_sleep)):
            if args.only and args.only not in setup.name:
                continue
            rows.append(measure(setup, args.python, os.path.join(work, str(index)), args.rounds, args.kill_after,
                                args.epochs * 16, args.timeout))
            print("  done: %s" % json.dumps(rows[-1]), file=sys.stderr, flush=True)
    torchrun_s = rows[0]["recovery_s"] if rows and rows[0]["name"].startswith("torchrun") else None
    print("| set-up | kill → every rank trains again | vs torchrun | batches redone | survivors' PIDs kept "
          "| result = fault-free |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        speed = ("%.1f×" % (torchrun_s / row["recovery_s"])
                 if torchrun_s and row["recovery_s"] else "-")
        print("| %s | %s | %s | %s | %d/%d | %d/%d |" % (
            row["name"], "%.3f s" % row["recovery_s"] if row["recovery_s"] is not None else "failed", speed,
            "%g" % row["redone"] if row["redone"] is not None else "-", row["kept"], row["runs"], row["equal"],
            row["runs"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

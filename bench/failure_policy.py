"""A deterministic bug under two launchers, in one run: the demo trainer
(examples/python/trainer.py --fail-at-step 37) raises ValueError at step 37
in every generation; elasticrun and torchrun each run it with
--max-restarts 10. For each: the wall time from the bug's first occurrence
(the first ValueError line on the console) to the launcher's exit, the
generations that hit it (restarts = those - 1), and the exit status.

    python3 bench/failure_policy.py BIN/elasticrun [NPROC] [ROUNDS]
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

MARK = "ValueError: bad batch at step 37"
START = re.compile(r"start at step \d+.*\(restart (\d+)\)")


def run(argv, env, timeout_s=600):
    """Runs argv; returns (first occurrence -> exit seconds, generations
    started, exit status, total seconds). Lines are timed as they arrive."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    first = [None]
    restarts = set()
    tail = []

    def read():
        for line in proc.stdout:
            tail.append(line)
            del tail[:-40]
            if MARK in line and first[0] is None:
                first[0] = time.monotonic()
            # every generation's workers say their restart count as they
            # start (TORCHELASTIC_RESTART_COUNT, set by both launchers), and
            # every generation hits the bug
            found = START.search(line)
            if found:
                restarts.add(int(found.group(1)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    end = time.monotonic()
    reader.join(5)
    if len(restarts) < 2:  # the bug was not hit twice: say what happened instead
        sys.stderr.write("%s: only %d generation(s); its last lines:\n%s" % (argv[0], len(restarts), "".join(tail)))
    return (end - first[0]) if first[0] is not None else float("nan"), len(restarts), rc, \
        end - start


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    elasticrun = sys.argv[1]
    nproc = sys.argv[2] if len(sys.argv) > 2 else "2"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trainer = os.path.join(root, "examples", "python", "trainer.py")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(root, "bindings", "python")
    env.setdefault("ELASTIC_LIB_DIR", os.path.join(root, "lib"))
    python = sys.executable
    rows = []
    for r in range(rounds):
        for name in ("elasticrun", "torchrun"):
            work = tempfile.mkdtemp(prefix="failure_policy_")
            args = [trainer, "--dir", os.path.join(work, "ckpt"), "--steps", "100",
                    "--fail-at-step", "37", "--step-ms", "20"]
            logs = os.path.join(work, "logs")
            if name == "elasticrun":
                argv = [elasticrun, "--standalone", "--nproc-per-node", nproc, "--max-restarts",
                        "10", "--redirects", "2", "--tee", "2", "--log-dir", logs] + args
            else:  # torch 1.x spells its flags with underscores; a free port, not
                # --standalone's fixed 29400 (another torchrun on the host takes it)
                argv = [python, "-m", "torch.distributed.run", "--rdzv_backend", "c10d",
                        "--rdzv_endpoint", "127.0.0.1:%d" % free_port(), "--nnodes", "1",
                        "--nproc_per_node",
                        nproc, "--max_restarts", "10", "--redirects", "2", "--tee", "2",
                        "--log_dir", logs] + args
            span, occurrences, rc, total = run(argv, env)
            rows.append((name, span, occurrences, rc, total))
            shutil.rmtree(work, ignore_errors=True)
    print("a ValueError at step 37 in every generation, --max-restarts 10, %s workers" % nproc)
    print("%-11s %26s %12s %9s %6s %9s" % ("launcher", "first occurrence -> end s", "generations",
                                          "restarts", "exit", "total s"))
    for name, span, occ, rc, total in rows:
        print("%-11s %26.2f %12d %9d %6d %9.2f" % (name, span, occ, max(occ - 1, 0), rc, total))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A tiny trainer on libelastic's Python bindings: it fits y = 3x + 1 by SGD,
heartbeats every step, checkpoints every few steps and resumes from the
latest committed checkpoint. Runs alone or under elasticrun:

    python3 examples/python/trainer.py --steps 20 --dir /tmp/ckpt
    bin/elasticrun --standalone --nproc-per-node=2 examples/python/trainer.py --dir /tmp/ckpt

Under plain torchrun it runs too (ranks from torchrun's environment); the
barrier, which needs elasticrun's store, is skipped with a one-line notice.
(PYTHONPATH=bindings/python and ELASTIC_LIB_DIR=lib when not installed.)

--store-commit: the checkpoint commits through the job's store and every rank
keeps its own copy of the replicated model (as on private disks), so the
library compares the copies at each commit (docs/CHECKPOINT.md, "Divergence
check"). --corrupt RANK:STEP (tests): that rank of the first generation flips
one bit of its model after training STEP, as a faulty core would; the save
finds the replicas different (elastic.errors.EDIVERGED), says so and trains
on, and the agent ends the generation."""

import argparse
import math
import os
import struct
import sys
import time

try:
    import elastic
except ImportError:  # running from a source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
    import elastic


def train_step(weights, step):
    """One SGD step of a 1-D linear model. Every rank computes the same update
    (as data-parallel ranks do after their all-reduce), so the model is
    replicated: any rank of any world size can resume from it."""
    w, b = weights
    x = ((step * 7) % 11) / 10.0
    error = (w * x + b) - (3.0 * x + 1.0)
    return w - 0.1 * error * x, b - 0.1 * error


def flip_bit(value):
    """One bit of a float's mantissa flipped: silent data corruption."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0] ^ (1 << 40)
    flipped = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return flipped if math.isfinite(flipped) else value


def check_batch(step, fail_at):
    """The training code's check of its data. --fail-at-step N plants a bad
    batch at step N: every generation that replays it raises the same error
    at the same step, the way a real data or shape bug does (elasticrun stops
    such a job at its second occurrence; docs/OPERATIONS.md, "Failures")."""
    if step == fail_at:
        raise ValueError("bad batch at step %d: label out of range" % step)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--dir", required=True, help="checkpoint directory (shared by every rank)")
    parser.add_argument("--store-commit", action="store_true",
                        help="commit through the job's store, each rank keeping its own copy")
    parser.add_argument("--corrupt", default="", metavar="RANK:STEP",
                        help="tests: flip a bit of that rank's model after STEP (first generation)")


    parser.add_argument("--fail-at-step", type=int, default=0,
                        help="raise ValueError at this step in every generation (0: never)")
    parser.add_argument("--step-ms", type=int, default=0, help="sleep this long per step")
    args = parser.parse_args()
    corrupt_rank, corrupt_step = (int(v) for v in args.corrupt.split(":")) if args.corrupt else (-1, 0)

    with elastic.Worker() as worker:
        info = worker.info()
        # Shared directory, no store: the last rank to commit a step writes its commit record,
        # so a later run (any world size) resumes from it.
        store = worker.store() if args.store_commit else None
        with elastic.Checkpoint(args.dir, store=store, rank=info.rank, world=info.world_size,
                                generation=info.generation) as ckpt:
            start = ckpt.latest() or 0
            weights = (0.0, 0.0)
            if start:
                weights = struct.unpack("<dd", ckpt.read(start, "model"))
            print("rank %d/%d start at step %d%s (restart %s)"
                  % (info.rank, info.world_size, start, " attached" if info.attached else "",
                     os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), flush=True)
            step = start
            while step < args.steps:
                check_batch(step + 1, args.fail_at_step)
                if args.step_ms:
                    time.sleep(args.step_ms / 1000.0)
                weights = train_step(weights, step)
                step += 1
                if step == corrupt_step and info.rank == corrupt_rank and info.generation == 1:
                    weights = (flip_bit(weights[0]), weights[1])
                    print("rank %d: flipped a bit of the model after step %d" % (info.rank, step), flush=True)
                worker.heartbeat(step)
                if worker.poll():  # the group changed in place: take the new ranks
                    info = worker.info()
                if step % args.every == 0:
                    try:
                        ckpt.save(step, {"model": struct.pack("<dd", *weights)}, replicated=("model",))
                    except elastic.ElasticError as e:
                        if e.code != elastic.errors.EDIVERGED:
                            raise
                        # Not committed; the agent ends the generation and the job
                        # restores the newest step on which the replicas agreed.
                        print("rank %d: step %d: %s" % (info.rank, step, e.detail), flush=True)
                        continue
                    worker.barrier()  # every rank committed: the step is the latest
            # model=: the exact bits (a fault-free run's must match; tests compare it)
            print("rank %d/%d done at step %d (latest checkpoint %s) w=%.3f b=%.3f model=%s,%s"
                  % (info.rank, info.world_size, step, ckpt.latest(), weights[0], weights[1],
                     weights[0].hex(), weights[1].hex()), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A tiny trainer on libelastic's Python bindings: it fits y = 3x + 1 by SGD,
heartbeats every step, checkpoints every few steps and resumes from the
latest committed checkpoint. Runs alone or under elasticrun:

    python3 examples/python/trainer.py --steps 20 --dir /tmp/ckpt
    bin/elasticrun --standalone --nproc-per-node=2 examples/python/trainer.py --dir /tmp/ckpt

Under plain torchrun it runs too (ranks from torchrun's environment); the
barrier, which needs elasticrun's store, is skipped with a one-line notice.
(PYTHONPATH=bindings/python and ELASTIC_LIB_DIR=lib when not installed.)"""

import argparse
import os
import struct
import sys

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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--dir", required=True, help="checkpoint directory (shared by every rank)")
    args = parser.parse_args()

    with elastic.Worker() as worker:
        info = worker.info()
        # Shared directory, no store: the last rank to commit a step writes its commit record,
        # so a later run (any world size) resumes from it.
        with elastic.Checkpoint(args.dir, rank=info.rank, world=info.world_size,
                                generation=info.generation) as ckpt:
            start = ckpt.latest() or 0
            weights = (0.0, 0.0)
            if start:
                weights = struct.unpack("<dd", ckpt.read(start, "model"))
            print("rank %d/%d start at step %d%s" % (info.rank, info.world_size, start,
                                                      " attached" if info.attached else ""), flush=True)
            step = start
            while step < args.steps:
                weights = train_step(weights, step)
                step += 1
                worker.heartbeat(step)
                if worker.poll():  # the group changed in place: take the new ranks
                    info = worker.info()
                if step % args.every == 0:
                    ckpt.save(step, {"model": struct.pack("<dd", *weights)}, replicated=("model",))
                    worker.barrier()  # every rank committed: the step is the latest
            print("rank %d/%d done at step %d (latest checkpoint %s) w=%.3f b=%.3f"
                  % (info.rank, info.world_size, step, ckpt.latest(), weights[0], weights[1]), flush=True)


if __name__ == "__main__":
    main()

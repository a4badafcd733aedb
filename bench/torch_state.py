"""elastic.torch.save_state / load_state against torch.save(+fsync) /
torch.load on the same state: a model's state_dict plus its Adam state
(2 moments per parameter), float32, BYTES in total. Both sides fsync (the
checkpoint store does by default); loads read warm (page cache). Prints a
table of medians over RUNS runs, in one process so both see the same load.

usage: /usr/bin/python3 bench/torch_state.py DIR BYTES RUNS
"""
import os
import shutil
import statistics
import sys
import time

import torch

import elastic
import elastic.torch as et

LAYERS = 8


def make_state(nbytes):
    """A model of LAYERS square Linear layers and Adam state: about nbytes."""
    per_layer = nbytes // 3 // LAYERS // 4  # weights + two moments, float32
    width = max(16, int(per_layer ** 0.5))
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(LAYERS)])
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(2, width)).sum().backward()
    optimizer.step()
    return {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "data": {"step": 1}}


def state_bytes(state):
    total = 0
    stack = [state]
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            total += obj.numel() * obj.element_size()
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
    return total


def torch_save(state, path):
    start = time.monotonic()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    return time.monotonic() - start


def timed(fn, *args):
    start = time.monotonic()
    fn(*args)
    return time.monotonic() - start


def main():
    root, nbytes, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    state = make_state(nbytes)
    size = state_bytes(state)
    results = {k: [] for k in ("torch_save", "torch_load", "elastic_save", "elastic_load")}
    for run in range(runs):
        path = os.path.join(root, "state.pt")
        results["torch_save"].append(torch_save(state, path))
        results["torch_load"].append(timed(torch.load, path))
        os.unlink(path)
        directory = os.path.join(root, "ckpt%d" % run)
        with elastic.Checkpoint(directory, compression=0) as ckpt:
            results["elastic_save"].append(timed(et.save_state, ckpt, 1, state))
        with elastic.Checkpoint(directory, verify=et.VERIFY_MANIFEST) as ckpt:  # as open_checkpoint opens it
            results["elastic_load"].append(timed(et.load_state, ckpt))
        shutil.rmtree(directory)
    med = {k: statistics.median(v) for k, v in results.items()}
    print("state_dict checkpoint: %.0f MiB of float32 (model + Adam), median of %d runs, load %.1f"
          % (size / 2 ** 20, runs, os.getloadavg()[0]))
    print("%-40s %9s %9s %9s" % ("what", "seconds", "MB/s", "vs torch"))
    for label, key, peer in (("torch.save + fsync", "torch_save", None),
                             ("elastic.torch.save_state (fsync, raw)", "elastic_save", "torch_save"),
                             ("torch.load (warm)", "torch_load", None),
                             ("elastic.torch.load_state (warm, verified)", "elastic_load", "torch_load")):
        ratio = "%8.2fx" % (med[peer] / med[key]) if peer else ""
        print("%-40s %9.3f %9.0f %9s" % (label, med[key], size / med[key] / 1e6, ratio))
    print("vs torch: torch's time divided by ours (above 1: we are faster)")


if __name__ == "__main__":
    main()

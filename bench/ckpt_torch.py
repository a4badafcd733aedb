"""The torch.save / torch.load peer of bench/ckpt_bench.c: the same number of
float32 bytes in 16 tensors (random, and the same low-entropy mix), saved
with torch.save + fsync and loaded warm (page cache) and cold (evicted).
Prints medians as key=value lines. Usage: ckpt_torch.py DIR BYTES RUNS"""
import os
import statistics
import sys
import time

import torch

TENSORS = 16


def make(kind, numel):
    if kind == "random":
        return {f"layer.{i}": torch.rand(numel) * 2 - 1 for i in range(TENSORS)}
    if kind == "weights":  # trained-looking: normal, std 0.02
        return {f"layer.{i}": torch.randn(numel) * 0.02 for i in range(TENSORS)}
    out = {}
    for i in range(TENSORS):
        k = i % 4
        if k == 0:
            t = torch.zeros(numel)
        elif k == 1:  # bf16-representable weights
            t = (torch.rand(numel) * 0.04 - 0.02).to(torch.bfloat16).to(torch.float32)
        elif k == 2:
            t = torch.randint(0, 256, (numel,)).to(torch.float32)
        else:
            t = torch.rand(numel) * 2 - 1
        out[f"layer.{i}"] = t
    return out


def save(state, path):
    start = time.monotonic()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    return time.monotonic() - start


def load(path):
    start = time.monotonic()
    torch.load(path)
    return time.monotonic() - start


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def main():
    root, nbytes, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    numel = nbytes // TENSORS // 4
    for kind in ("random", "weights", "mix"):
        state = make(kind, numel)
        path = os.path.join(root, f"torch-{kind}.pt")
        saves, warm, cold = [], [], []
        for _ in range(runs):
            saves.append(save(state, path))
            warm.append(load(path))
            evict(path)
            cold.append(load(path))
            os.unlink(path)
        print(f"torch_{kind}_save_s={statistics.median(saves):.4f}")
        print(f"torch_{kind}_load_warm_s={statistics.median(warm):.4f}")
        print(f"torch_{kind}_load_cold_s={statistics.median(cold):.4f}")
        del state


if __name__ == "__main__":
    main()

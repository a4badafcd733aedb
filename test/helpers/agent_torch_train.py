# A real PyTorch worker for test_agent_torch.c: joins the process group the
# way torchrun users do (init_process_group("gloo", init_method="env://")),
# checks its rank against the environment, all-reduces, reports a line, and
# in the first generation waits to be killed.
import os
import sys
import time

import torch
import torch.distributed as dist

report = sys.argv[1]
dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
total = torch.tensor([float(rank)])
dist.all_reduce(total)
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
with open(report, "a") as out:
    out.write(f"torch rank={rank} world={world} restart={restart} sum={total.item():g} pid={os.getpid()}\n")
if restart == 0:
    time.sleep(600)
dist.barrier()
dist.destroy_process_group()

#!/usr/bin/env python3
"""A PyTorch DDP trainer (gloo, CPU) that recovers in place: under
`elasticrun --in-process-recovery` a rank that dies is the only process
restarted; the survivors keep their processes, rebuild the process group for
the new generation and everyone resumes from the last checkpoint. Training is
deterministic (data drawn from the step and rank), so the final weights equal
those of a run without the failure.

    PYTHON_EXEC=/usr/bin/python3 bin/elasticrun --standalone --nproc-per-node=3 \\
        --max-restarts=3 --in-process-recovery examples/python/ddp_inprocess.py \\
        --dir /tmp/ckpt --steps 40 --kill-rank 1 --kill-at-step 13

With `--warm-spares=1` as well, the agent keeps one more process parked
after its imports and model construction (elastic.worker.park_or_exit below);
it takes the dead rank's place at once instead of a fresh `import torch`.
With elasticrun `--memory-ckpt` and `--memory-every N` the state also goes to
the node's memory tier every N steps, and a recovery restores the job's
agreed step from memory (the promoted spare too).

It also runs under plain torchrun (a failure then restarts every process) or
alone. (PYTHONPATH=bindings/python and ELASTIC_LIB_DIR=lib when not installed.)"""

import argparse
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

try:
    import elastic
except ImportError:  # running from a source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
    import elastic
import elastic.torch


def log(info, text):
    print("rank %d/%d pid %d gen %d: %s" % (info.rank, info.world_size, os.getpid(), info.generation, text),
          flush=True)


def report(args, text):
    """Appends one timestamped line to --report (for bench/torch_recovery.py)."""
    if args.report:
        with open(args.report, "a") as f:
            f.write("%s t=%.6f\n" % (text, time.time()))


def make_training(seed):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
    return net, optimizer, scheduler


def batch(step, rank):
    """This rank's data for a step: the same in every run and after a resume."""
    generator = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(16, 32, generator=generator)
    return x, x.sum(dim=1, keepdim=True).sin()


def resume(args, info, memory):
    """Fresh model, optimizer and scheduler at the job's restore step (or at
    the start), DDP over the current group, every rank at the same step. With
    the memory tier (--memory-every) the step comes from the cheapest copy,
    memory or disk (the agents' plan when there is one); else from disk.
    Returns the disk and memory checkpoints of this generation too."""
    net, optimizer, scheduler = make_training(seed=1234)
    dist.barrier()  # every survivor has finished its last step's commits before anyone looks
    if memory is not None:
        memory.close()
        memory = None
    ckpt = elastic.torch.open_checkpoint(args.dir, fsync=1 if args.no_fsync else 0)
    if args.memory_every > 0:
        memory = elastic.torch.open_memory_checkpoint()
    found = elastic.torch.restore_state(memory, ckpt) if memory is not None else elastic.torch.load_state(ckpt)
    step, source = 0, "nothing"
    if found is not None:
        if memory is not None:
            step, source, state = found
        else:
            (step, state), source = found, "disk"
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if state["data"]["step"] != step:
            raise RuntimeError("checkpoint %d holds data position %d" % (step, state["data"]["step"]))
    agreed = torch.tensor([step])
    dist.broadcast(agreed, src=0)
    if int(agreed) != step:
        raise RuntimeError("rank %d would resume at %d, rank 0 at %d" % (info.rank, step, int(agreed)))
    log(info, "resume at step %d from %s" % (step, source))
    # find_unused_parameters keeps DDP's first bucket layout (it never rebuilds
    # buckets): a re-wrapped model then reduces gradients in the same order as
    # an uninterrupted run, so resuming is bitwise reproducible.
    model = DistributedDataParallel(net, find_unused_parameters=True)
    return net, optimizer, scheduler, model, ckpt, memory, step


def training_state(net, optimizer, scheduler, step):
    return {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "data": {"step": step}}


def train_step(model, optimizer, scheduler, step, rank):
    x, y = batch(step, rank)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()  # the all-reduce: raises when a peer died
    optimizer.step()
    scheduler.step()
    return float(loss)


def wait_for_spare(args, timeout=120.0):
    """--kill-waits-for-spare: a spare still importing torch is not parked yet,
    and the agent would cold-start the rank instead of promoting it."""
    deadline = time.monotonic() + timeout
    marker = os.path.join(args.dir, "spare-parking")
    while args.kill_waits_for_spare and not os.path.exists(marker):
        if time.monotonic() > deadline:
            raise SystemExit("no warm spare parked within %.0f s" % timeout)
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, help="checkpoint directory (shared by every rank)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--kill-rank", type=int, default=-1, help="this rank SIGKILLs itself (first run only)")
    parser.add_argument("--kill-at-step", type=int, default=-1)
    parser.add_argument("--out", help="rank 0 writes the final weights here (torch.save)")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (to pace benchmarks)")
    parser.add_argument("--no-fsync", action="store_true", help="checkpoints survive a crash, not a power loss")
    parser.add_argument("--report", help="append 'kill' and first-step-after-resume lines with times here")
    parser.add_argument("--kill-before-save", action="store_true",
                        help="--kill-rank dies after training --kill-at-step, before saving it: the others' saves wait")
    parser.add_argument("--kill-waits-for-spare", action="store_true",
                        help="with --warm-spares: --kill-rank waits until the spare parks (it writes DIR/spare-parking)")
    parser.add_argument("--memory-every", type=int, default=0,
                        help="also save to the node's memory tier every N steps (elasticrun --memory-ckpt)")
    args = parser.parse_args()

    # Everything a warm spare should have done before it is needed: torch is
    # imported, and the model is built once (torch's kernels and allocator
    # warmed). Not a spare: park returns at once.
    make_training(seed=1234)
    if os.environ.get("ELASTIC_SPARE") and args.kill_waits_for_spare:
        os.makedirs(args.dir, exist_ok=True)
        open(os.path.join(args.dir, "spare-parking"), "w").close()
    if elastic.worker.park_or_exit():
        report(args, "promoted pid=%d" % os.getpid())
    info = elastic.torch.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    worker = elastic.torch.worker()
    log(info, "start (restart %d)" % info.restart_count)
    memory = None
    with elastic.torch.phase("restore"):
        net, optimizer, scheduler, model, ckpt, memory, step = resume(args, info, memory)
    resumed = True
    def die_here(where):
        if (info.rank == args.kill_rank and step == args.kill_at_step and info.restart_count == 0
                and where == ("save" if args.kill_before_save else "step")):
            wait_for_spare(args)
            log(info, "SIGKILL myself at step %d" % step)
            report(args, "kill rank=%d" % info.rank)
            os.kill(os.getpid(), signal.SIGKILL)

    while step < args.steps:
        die_here("step")
        try:
            train_step(model, optimizer, scheduler, step, info.rank)
        except RuntimeError as exc:  # a peer died mid-collective
            log(info, "collective failed at step %d: %s" % (step, str(exc).splitlines()[0][:120]))
            elastic.torch.reconfigured(block=True)
            info = worker.info()
            ckpt.close()
            with elastic.torch.phase("restore"):
                net, optimizer, scheduler, model, ckpt, memory, step = resume(args, info, memory)
            resumed = True
            continue
        if resumed:
            report(args, "trained rank=%d pid=%d restart=%d step=%d" % (info.rank, os.getpid(), info.restart_count,
                                                                                 step))
            resumed = False
        step += 1
        worker.heartbeat(step)
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        abandoned = False
        die_here("save")
        try:
            if memory is not None and step % args.memory_every == 0:
                elastic.torch.save_state(memory, step, training_state(net, optimizer, scheduler, step))
            if step % args.every == 0 or step == args.steps:
                elastic.torch.save_state(ckpt, step, training_state(net, optimizer, scheduler, step))
        except elastic.ElasticError as exc:
            # The generation ended while the memory save waited for a rank
            # that died ("step S abandoned"): recover like after a failed collective.
            if exc.code != elastic.errors.ERECONFIGURE:
                raise
            log(info, exc.detail)
            abandoned = True
        if elastic.torch.reconfigured(block=abandoned):  # the group changed
            info = worker.info()
            ckpt.close()
            with elastic.torch.phase("restore"):
                net, optimizer, scheduler, model, ckpt, memory, step = resume(args, info, memory)
            resumed = True
    if args.out and info.rank == 0:
        torch.save(net.state_dict(), args.out)
    log(info, "done at step %d" % step)
    ckpt.close()
    if memory is not None:
        memory.close()
    elastic.torch.destroy_process_group()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch's DDP tutorial script (multigpu_torchrun.py), on CPU with gloo.
ddp_plain.py is the ordinary torchrun trainer: a DistributedSampler shards
the data, rank 0 saves a snapshot every few epochs, a restarted job resumes
from it; it runs unchanged under elasticrun too (a failure restarts the
group, as under torchrun). ddp_elastic.py is the same script with
elastic.torch.Job owning recovery (docs/ADOPTING.md): `diff ddp_plain.py
ddp_elastic.py` is what a user changes. Both run under torchrun and elasticrun,
ddp_elastic.py also alone (no launcher):

    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node=3 \\
        examples/python/ddp_plain.py --epochs 4 --dir /tmp/snap
    elasticrun --standalone --nproc-per-node=3 --max-restarts=3 --memory-ckpt \\
        --in-process-recovery --warm-spares=1 examples/python/ddp_elastic.py --dir /tmp/ckpt"""

import argparse
import hashlib
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group


class MyTrainDataset(Dataset):
    """Random regression data, the same in every process and every run."""

    def __init__(self, size):
        generator = torch.Generator().manual_seed(0)
        self.data = [(torch.rand(20, generator=generator), torch.rand(1, generator=generator)) for _ in range(size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


def ddp_setup():
    init_process_group(backend="gloo")


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every, snapshot_path, step_sleep):
        self.rank = int(os.environ["RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        self.step_sleep = step_sleep
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()
        time.sleep(self.step_sleep)

    def _run_epoch(self, epoch):
        print(f"[rank {self.rank} pid {os.getpid()}] Epoch {epoch} | Steps: {len(self.train_data)}", flush=True)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {"MODEL_STATE": self.model.module.state_dict(), "OPTIMIZER_STATE": self.optimizer.state_dict(),
                    "EPOCHS_RUN": epoch + 1}
        torch.save(snapshot, self.snapshot_path + ".tmp")
        os.replace(self.snapshot_path + ".tmp", self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.rank == 0 and (epoch + 1) % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    torch.manual_seed(1234)
    train_set = MyTrainDataset(768)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size):
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, sampler=DistributedSampler(dataset))


def write_digest(model, path):
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode() + tensor.detach().numpy().tobytes())
    with open(path, "w") as f:
        f.write(digest.hexdigest() + "\n")


def main(args):
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, args.batch_size)
    trainer = Trainer(model, train_data, optimizer, args.save_every, os.path.join(args.dir, "snapshot.pt"),
                      args.step_sleep)
    trainer.train(args.epochs)
    if trainer.rank == 0 and args.out:
        write_digest(trainer.model.module, args.out)
    print(f"[rank {trainer.rank} pid {os.getpid()}] done", flush=True)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--epochs", type=int, default=4, help="total epochs to train the model")
    parser.add_argument("--save-every", type=int, default=2, help="how often (in epochs) rank 0 saves a snapshot")
    parser.add_argument("--batch-size", type=int, default=16, help="input batch size on each rank")
    parser.add_argument("--dir", required=True, help="where the snapshot goes (shared by every rank)")
    parser.add_argument("--out", help="rank 0 writes the hex digest of the final weights here")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds slept per batch (to pace a run)")
    main(parser.parse_args())

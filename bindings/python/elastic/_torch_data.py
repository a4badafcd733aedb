"""The data position of a DistributedSampler, as part of the training state
(elastic.torch.Job). A sampler handed to the Job is made resumable in place
(its class gains _Resumable): the DataLoader and the trainer keep the same
object, set_epoch() keeps working, and the sampler then yields, for the epoch
being resumed, only what is left of it.

The position is (epoch, origin_world, offset): the epoch's order is the one
DistributedSampler draws for the world size the epoch began with
(origin_world: its permutation of seed + epoch, padded to a multiple of that
world size, or cut when drop_last), and `offset` counts the entries of that
order every rank together has consumed (a step of B samples a rank under a
world of W consumes B * W). Resuming at (epoch, W0, offset) with world size W:

    rest  = order[offset:]                         (what no rank has seen)
    rest += rest[:pad]                             (pad to a multiple of W, as
                                                    DistributedSampler pads)
    rank r sees rest[r::W], in that order, B at a time

With the world size unchanged this is exactly what an uninterrupted
DistributedSampler yields from that batch on (bit-equal training); with
another world size every sample of the epoch not yet consumed is seen once
(plus at most W - 1 padding repeats), and none is seen twice. The next epoch
is DistributedSampler's own for the new world size."""

import math
from typing import Any, Dict, Iterator, List

__all__ = ["epoch_order", "rest_for_rank", "make_resumable", "set_world", "position_after", "batches_from"]


def epoch_order(length: int, epoch: int, world: int, shuffle: bool, seed: int, drop_last: bool) -> List[int]:
    """DistributedSampler's order of an epoch for `world` ranks (before the
    rank's stride): permuted with seed + epoch when shuffling, padded by
    repeating its head (or cut with drop_last) to a multiple of world."""
    import torch

    if shuffle:
        generator = torch.Generator()
        generator.manual_seed(seed + epoch)
        order = torch.randperm(length, generator=generator).tolist()
    else:
        order = list(range(length))
    if drop_last and length % world:
        per_rank = math.ceil((length - world) / world)
    else:
        per_rank = math.ceil(length / world)
    total = per_rank * world
    if not drop_last:
        pad = total - len(order)
        if pad <= len(order):
            order += order[:pad]
        else:
            order += (order * math.ceil(pad / len(order)))[:pad]
    return order[:total]


def rest_for_rank(order: List[int], offset: int, world: int, rank: int) -> List[int]:
    """What `rank` of `world` sees of an epoch whose first `offset` entries
    every rank together consumed (the module's rule)."""
    rest = order[min(offset, len(order)):]
    if rest and len(rest) % world:
        pad = world - len(rest) % world
        rest = rest + (rest * math.ceil(pad / len(rest)))[:pad]
    return rest[rank::world]


class _Resumable:
    """Marks a sampler made resumable (make_resumable). While no position is
    set it is the sampler it was; with one, the epoch of the position yields
    its rest (the module's rule) and an earlier epoch nothing: the trainer's
    epoch loop runs through the epochs already done."""

    __slots__ = ()


def _resumable_class(cls: type) -> type:
    """cls with the resumable __iter__/__len__. Built as a plain subclass of
    cls (a mixin base would change the instance layout, and __class__ could
    not be swapped), the mixin's methods calling cls's own."""

    def __iter__(self: Any) -> Iterator[int]:
        self._elastic_iterations += 1  # a new pass over the epoch: the Job counts its batches from 0
        position = self._elastic_resume
        if position is None or self.epoch > position["epoch"]:
            self._elastic_origin = (self.epoch, self.num_replicas, 0)
            return cls.__iter__(self)
        if self.epoch < position["epoch"]:
            self._elastic_origin = (self.epoch, self.num_replicas, len(self.dataset))
            return iter(())
        order = epoch_order(len(self.dataset), self.epoch, position["world"], self.shuffle, self.seed, self.drop_last)
        self._elastic_origin = (self.epoch, position["world"], position["offset"])
        return iter(rest_for_rank(order, position["offset"], self.num_replicas, self.rank))

    def __len__(self: Any) -> int:
        position = self._elastic_resume
        if position is None or self.epoch > position["epoch"]:
            return cls.__len__(self)
        if self.epoch < position["epoch"]:
            return 0
        rest = max(0, order_length(len(self.dataset), position["world"], self.drop_last) - position["offset"])
        return math.ceil(rest / self.num_replicas)

    return type("Resumable" + cls.__name__, (cls, _Resumable), {"__iter__": __iter__, "__len__": __len__})


def make_resumable(sampler: Any) -> Any:
    """Makes a DistributedSampler (or a subclass) resumable in place; returns it."""
    if isinstance(sampler, _Resumable):
        return sampler
    sampler.__class__ = _resumable_class(type(sampler))
    sampler._elastic_resume = None
    sampler._elastic_iterations = 0
    sampler._elastic_origin = (getattr(sampler, "epoch", 0), sampler.num_replicas, 0)
    return sampler


def set_world(sampler: Any, world: int, rank: int) -> None:
    """The sampler's ranks after a regroup (DistributedSampler reads them once,
    at construction)."""
    sampler.num_replicas, sampler.rank = world, rank
    length = len(sampler.dataset)
    if sampler.drop_last and length % world:
        sampler.num_samples = math.ceil((length - world) / world)
    else:
        sampler.num_samples = math.ceil(length / world)
    sampler.total_size = sampler.num_samples * world


def order_length(length: int, world: int, drop_last: bool) -> int:
    """len(epoch_order(...)) without drawing the permutation."""
    if drop_last and length % world:
        return math.ceil((length - world) / world) * world
    return math.ceil(length / world) * world


def position_after(sampler: Any, batches: int, batch_size: int) -> Dict[str, int]:
    """The data position once this rank trained `batches` batches of the pass
    the sampler is in (every rank trained as many: DDP runs in step). An
    epoch consumed to its end is the next epoch's start."""
    epoch, world, offset = sampler._elastic_origin
    consumed = offset + batches * batch_size * sampler.num_replicas
    if consumed >= order_length(len(sampler.dataset), world, sampler.drop_last):
        return {"epoch": epoch + 1, "world": sampler.num_replicas, "offset": 0}
    return {"epoch": epoch, "world": world, "offset": consumed}


def batches_from(sampler: Any, position: Dict[str, int], batch_size: int, epoch: int) -> Iterator[Any]:
    """(indices, position after them) of this rank's batches from `position`
    to the end of `epoch` (the module's rule for the position's epoch,
    DistributedSampler's for later ones), for a replay after an in-place
    recovery."""
    for current in range(position["epoch"], epoch + 1):
        if current == position["epoch"]:
            order = epoch_order(len(sampler.dataset), current, position["world"], sampler.shuffle, sampler.seed,
                                sampler.drop_last)
            mine = rest_for_rank(order, position["offset"], sampler.num_replicas, sampler.rank)
        else:
            order = epoch_order(len(sampler.dataset), current, sampler.num_replicas, sampler.shuffle, sampler.seed,
                                sampler.drop_last)
            mine = order[sampler.rank::sampler.num_replicas]
        world = position["world"] if current == position["epoch"] else sampler.num_replicas
        offset = position["offset"] if current == position["epoch"] else 0
        end = order_length(len(sampler.dataset), world, sampler.drop_last)
        for start in range(0, len(mine), batch_size):
            offset += batch_size * sampler.num_replicas
            after = ({"epoch": current + 1, "world": sampler.num_replicas, "offset": 0} if offset >= end
                     else {"epoch": current, "world": world, "offset": offset})
            yield mine[start:start + batch_size], after

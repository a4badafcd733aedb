"""elastic.torch.Job: one object that owns recovery for a PyTorch trainer.

The trainer declares its state (model, optimizer, scheduler, the DataLoader
whose position is part of the state, anything else) and how to build the
per-generation pieces (build=DDP), and wraps its step function:

    job = elastic.torch.Job(model, optimizer, data=loader, build=DDP, dir="ckpt")
    model, train_step = job.model, job.step(train_step)

The Job then owns the process group of each generation, the warm spare's
parking (elastic.torch.init_process_group), the restore of the job's agreed
step from the cheapest tier (this node's memory, a peer's copy, disk), a
heartbeat with the step, saves to memory every `memory_every` steps and to
disk every `disk_every` (asynchronous), a save abandoned because a rank died,
a peer's death inside a collective, a reconfiguration (regroup, rebuild,
reload, go on) and the recovery_phases reports. Alone or under plain torchrun
the same code restores from disk at start and a failure ends the process
(the launcher restarts the group).

Thread rules: one Job per process, used from the thread that trains."""

import os
import sys
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist

from . import errors
from . import torch as _et
from ._torch_data import batches_from, make_resumable, position_after, set_world
from .errors import ElasticError
from .worker import notice

__all__ = ["Job"]


class _Recovered(Exception):
    """Raised inside the Job once a failure was recovered from: the step in
    flight is void, the state is the restored step's."""


class _Current:
    """What `build` made for the current generation (e.g. the DDP module),
    standing in for it: calls and attributes go to the current one, so a
    trainer's `self.model(x)` keeps working after a rebuild."""

    __slots__ = ("_job",)

    def __init__(self, job: "Job"):
        object.__setattr__(self, "_job", job)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._job._built(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._job._built, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._job._built, name, value)

    def __repr__(self) -> str:
        return "elastic.torch.Job.model(%r)" % (self._job._built,)


class Job:
    """Owns recovery (see the module's text). Arguments:

    model, optimizer, scheduler: saved and restored with state_dict() /
        load_state_dict() (in place: the trainer's objects stay the same).
    data: a DataLoader over a DistributedSampler (or the sampler itself);
        its position is part of the state: a restarted or recovered rank
        resumes at the batch after the restored step (elastic._torch_data
        states the rule when the world size changed).
    build: called with the model at every generation (after the restore),
        e.g. DistributedDataParallel; job.model stands for its result.
    state: a dict of anything else to keep (picklable values, tensors, or
        objects with state_dict()/load_state_dict()); restored in place.
    dir: the disk tier's directory (shared by every rank); None: none.
    memory_every: save to this node's memory tier (elasticrun --memory-ckpt)
        every N steps; 0: never.
    disk_every: save to `dir` every M steps, asynchronously.
    backend, timeout: for the process group when the Job creates it (the
        trainer's init_process_group, from elastic.torch, may have already).
    """

    def __init__(self, model: Any, optimizer: Any = None, scheduler: Any = None, data: Any = None,
                 build: Optional[Callable[[Any], Any]] = None, state: Optional[Dict[str, Any]] = None,
                 dir: Optional[str] = None, memory_every: int = 1, disk_every: int = 10,
                 backend: str = "gloo", **group_kwargs: Any):
        if memory_every < 0 or disk_every < 0:
            raise ValueError("memory_every and disk_every are step counts (0: never)")
        self._model, self._optimizer, self._scheduler = model, optimizer, scheduler
        self._extra = state if state is not None else {}
        self._build = build
        self._dir = os.fspath(dir) if dir is not None else None
        self._memory_every, self._disk_every = memory_every, disk_every
        self._loader, self._sampler, self._batch_size = _data_parts(data)
        if not dist.is_initialized():
            _et.init_process_group(backend, **group_kwargs)
        self._worker = _et.worker()
        self._session = _et._get_session(None)
        self._memory: Optional[Any] = None
        self._disk: Optional[Any] = None
        self._built: Any = model
        self._steps_before = 0
        self._replay_fn: Callable[..., Any] = lambda *a, **k: None
        self.model = _Current(self)
        self.step_count = 0  # optimizer steps done, the checkpoints' step
        self._iteration = -1  # the sampler's pass the counts below belong to
        self._done_in_pass = 0  # batches trained in that pass
        self._skip_pass = -1  # a replay trained this pass to its end: its batches are done
        self.restored_from = "nothing"
        with _et.phase("restore"):
            self._resume()
        self._session.job = self

    # ---- the trainer's side ------------------------------------------------------

    def step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """fn, made recoverable: called with one batch (as the loop unpacks
        it), it trains it, then the Job heartbeats and saves. When a peer dies
        inside it (or the generation ends), the Job regroups, restores the
        agreed step and trains from the batch after it: the batch in hand
        again when that is the one, earlier ones first when the agreed step
        is older (replayed from the loader's dataset). Returns fn's result
        (None for a batch a replay already trained)."""

        def recoverable(*args: Any, **kwargs: Any) -> Any:
            return self._run(fn, args, kwargs)

        recoverable.__wrapped__ = fn  # type: ignore[attr-defined]
        self._replay_fn = fn
        return recoverable

    def close(self) -> None:
        """Waits for an asynchronous disk save in flight and closes the tiers
        (elastic.torch.destroy_process_group calls it for the live Job)."""
        if self._disk is not None:
            try:
                self._disk.async_wait(-1)
            except ElasticError as exc:
                notice("job-close", "the last disk save failed: %s" % exc)
            self._disk.close()
            self._disk = None
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    # ---- one batch ---------------------------------------------------------------

    def _pass_position(self) -> int:
        """Batches trained in the sampler's current pass (a new pass starts at 0)."""
        if self._sampler is None:
            return 0
        if self._sampler._elastic_iterations != self._iteration:
            self._iteration = self._sampler._elastic_iterations
            self._done_in_pass = 0
        return self._done_in_pass

    def _run(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        done = self._pass_position()
        if self._skip_pass == self._iteration and self._sampler is not None:
            self._done_in_pass += 1
            return None
        self._steps_before = self.step_count
        recovered = False
        while True:
            if recovered:  # the restored step decides what is left of this batch
                plan = self._plan(done)
                if plan == "done":
                    self._done_in_pass = done + 1
                    return None
                if plan == "rest":
                    self._replay_to_epoch_end()
                    self._skip_pass = self._iteration
                    self._done_in_pass = done + 1
                    return None
                if not self._replay(plan):  # the earlier batches of this pass first
                    continue  # another recovery during them: plan again
                recovered = False
            try:
                result = fn(*args, **kwargs)
                self._after_step(self._position_in_pass(done + 1))
                self._done_in_pass = done + 1
                return result
            except _Recovered:
                recovered = True
            except RuntimeError as exc:  # a collective failed: a peer died, or a bug
                self._recover_from(exc)
                recovered = True

    def _position_in_pass(self, batches: int) -> Optional[Dict[str, int]]:
        if self._sampler is None:
            return None
        return position_after(self._sampler, batches, self._batch_size)

    def _after_step(self, position: Optional[Dict[str, int]]) -> None:
        """The step is trained (the data is at `position` now): count it,
        heartbeat, save as due, look for a new generation. Raises _Recovered
        when the generation ended meanwhile."""
        self.step_count += 1
        self._worker.heartbeat(self.step_count)
        abandoned = False
        try:
            if self._memory is not None and self._memory_every and self.step_count % self._memory_every == 0:
                _et.save_state(self._memory, self.step_count, self._state(position))
            if self._disk is not None and self._disk_every and self.step_count % self._disk_every == 0:
                _et.save_state(self._disk, self.step_count, self._state(position), asynchronous=True)
        except ElasticError as exc:
            # The generation ended while the save waited for a rank that died
            # ("step S abandoned"): recover as after a failed collective.
            if exc.code != errors.ERECONFIGURE:
                raise
            abandoned = True
        if abandoned:
            self._regroup(block=True)
            raise _Recovered()
        if _et.reconfigured():
            self._after_regroup()
            raise _Recovered()

    def _recover_from(self, failure: RuntimeError) -> None:
        """A collective raised. With an agent that recovers in place, the
        generation ends (the abort hook fires) within the worker's
        reconfigure timeout: regroup and restore. Alone, under torchrun, or
        when no generation ends (a bug, not a peer), the error is the trainer's."""
        info = self._worker.info()
        if not info.attached:
            raise failure
        # A peer's death ends the generation at once (its agent reaps it); a
        # remote node's loss takes up to the reconfigure timeout. An error
        # that names no transport failure gets a short grace, then is the trainer's.
        text = str(failure).lower()
        transport = any(word in text for word in ("gloo", "nccl", "connection", "socket", "peer", "timed out",
                                                  "closed", "reset", "broken pipe"))
        limit = self._worker.reconfigure_timeout_ms / 1000.0 if transport else 2.0
        if not self._session.aborted.wait(limit) and not self._session.abort_pending():
            raise failure
        self._regroup(block=True)

    def _regroup(self, block: bool) -> None:
        _et.reconfigured(block=block)
        self._after_regroup()

    def _after_regroup(self) -> None:
        with _et.phase("restore"):
            self._resume()

    # ---- what the restored step leaves to do --------------------------------------

    def _plan(self, done: int) -> Any:
        """"done": the batch in hand is in the restored step; an int n: the n
        batches before it in this pass, then it, are to train; "rest": the
        restored position is elsewhere (another epoch, another layout):
        replay from it to the end of this epoch."""
        if self._sampler is None:  # the trainer's own data: the batch in hand again, or not
            return "done" if self._restored_step > self._steps_before else 0
        here = position_after(self._sampler, done, self._batch_size)
        after = position_after(self._sampler, done + 1, self._batch_size)
        want = self._restored_position
        if want == after:
            return "done"
        if want["epoch"] == here["epoch"] and want["world"] == here["world"] and want["offset"] <= here["offset"]:
            stride = self._batch_size * self._sampler.num_replicas
            if (here["offset"] - want["offset"]) % stride == 0 and self._layout == self._layout_before:
                return (here["offset"] - want["offset"]) // stride
        return "rest"

    def _replay(self, earlier: int) -> bool:
        """Trains the `earlier` batches before the one in hand (fetched from
        the dataset); True when they all trained, False after another
        recovery (plan again)."""
        if earlier == 0:
            return True
        position = self._restored_position
        batches = batches_from(self._sampler, position, self._batch_size, position["epoch"])
        for _ in range(earlier):
            indices, after = next(batches)
            try:
                self._call_with(indices)
                self._after_step(after)
            except _Recovered:
                return False
            except RuntimeError as exc:
                self._recover_from(exc)
                return False
        return True

    def _replay_to_epoch_end(self) -> None:
        """Trains from the restored position to the end of the epoch the
        trainer's loop is in (its per-epoch code does not run for the epochs
        passed through)."""
        while True:
            position = self._restored_position
            epoch = max(self._sampler.epoch, position["epoch"])
            recovered = False
            for indices, after in batches_from(self._sampler, position, self._batch_size, epoch):
                try:
                    self._call_with(indices)
                    self._after_step(after)
                except _Recovered:
                    recovered = True
                    break
                except RuntimeError as exc:
                    self._recover_from(exc)
                    recovered = True
                    break
            if not recovered:
                return

    def _call_with(self, indices: List[int]) -> None:
        batch = self._collate([self._loader.dataset[i] for i in indices])
        if isinstance(batch, (list, tuple)):
            self._replay_fn(*batch)
        elif isinstance(batch, dict):
            self._replay_fn(**batch)
        else:
            self._replay_fn(batch)

    # ---- state, tiers, restore ---------------------------------------------------

    def _state(self, position: Optional[Dict[str, int]]) -> Dict[str, Any]:
        state: Dict[str, Any] = {"model": self._model.state_dict(), "step": self.step_count}
        if self._optimizer is not None:
            state["optimizer"] = self._optimizer.state_dict()
        if self._scheduler is not None:
            state["scheduler"] = self._scheduler.state_dict()
        if position is not None:
            state["data"] = position
        extra = {}
        for key, value in self._extra.items():
            extra[key] = value.state_dict() if hasattr(value, "state_dict") else value
        state["extra"] = extra
        return state

    def _load(self, state: Dict[str, Any]) -> None:
        self._model.load_state_dict(state["model"])
        if self._optimizer is not None:
            self._optimizer.load_state_dict(state["optimizer"])
        if self._scheduler is not None:
            self._scheduler.load_state_dict(state["scheduler"])
        for key, value in state.get("extra", {}).items():
            target = self._extra.get(key)
            if hasattr(target, "load_state_dict"):
                target.load_state_dict(value)
            else:
                self._extra[key] = value

    def _resume(self) -> None:
        """Every generation: this generation's tiers, the agreed step's state
        (or the start), checked equal on every rank, and build() anew."""
        info = self._worker.info()
        self._layout_before = getattr(self, "_layout", None)
        self._layout = (info.world_size, info.rank)
        if info.world_size > 1:
            dist.barrier()  # every survivor finished its last step's commits before anyone looks
        self.close()
        if self._dir is not None:
            self._disk = _et.open_checkpoint(self._dir, fsync=0)
        if self._memory_every:
            self._memory = _et.open_memory_checkpoint()
        found = _et.restore_state(self._memory, self._disk)
        step, self.restored_from = 0, "nothing"
        if found is not None:
            step, self.restored_from, state = found
            self._load(state)
        elif self.step_count:
            raise RuntimeError("elastic.torch.Job: no checkpoint to restore after a failure at step %d (memory_every=0 "
                               "and no dir?)" % self.step_count)
        agreed = torch.tensor([step], dtype=torch.int64)
        if info.world_size > 1:
            dist.broadcast(agreed, src=0)
        if int(agreed) != step:
            raise RuntimeError("elastic.torch.Job: rank %d would resume at step %d, rank 0 at %d"
                               % (info.rank, step, int(agreed)))
        self.step_count = step
        self._restored_step = step
        if self._sampler is not None:
            set_world(self._sampler, info.world_size, info.rank)
            position = state["data"] if found is not None else {"epoch": 0, "world": info.world_size, "offset": 0}
            self._restored_position = position
            self._sampler._elastic_resume = dict(position)
        self._built = None  # the previous generation's DDP goes now (no cycles: refcounting frees it, and its
        # reducer's hooks on the parameters with it; a gc.collect() here would cost ~0.2 s of a recovery)
        self._built = _keep_first_buckets(self._build(self._model) if self._build is not None else self._model)
        if found is not None:
            print("elastic: rank %d/%d generation %d resumes after step %d (from %s)"
                  % (info.rank, info.world_size, info.generation, step, self.restored_from),
                  file=sys.stderr, flush=True)

    @property
    def _collate(self) -> Callable[[List[Any]], Any]:
        collate = getattr(self._loader, "collate_fn", None)
        if collate is None:
            from torch.utils.data import default_collate
            return default_collate
        return collate


class _FirstBuckets:
    """A DDP's reducer, as its forward() sees it, that never rebuilds its
    gradient buckets. DDP rebuilds them once, after its first iteration, in
    the order the gradients became ready; a DDP built anew at a regroup or a
    restart would run its first step in the first layout while an
    uninterrupted run is in the rebuilt one, and gloo's ring sums a value in
    another order when its offset in the bucket moves: the weights would
    differ in the last bits. Keeping the first layout in every DDP the Job
    builds, in every run, makes a resumed run bit-equal to an uninterrupted
    one (what find_unused_parameters=True does, without its graph walk)."""

    __slots__ = ("_reducer",)

    def __init__(self, reducer: Any):
        self._reducer = reducer

    def _rebuild_buckets(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reducer, name)


def _keep_first_buckets(built: Any) -> Any:
    """built, with its DDP reducer (if any) kept in its first bucket layout."""
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(built, DistributedDataParallel) and hasattr(getattr(built, "reducer", None), "_rebuild_buckets"):
        built.reducer = _FirstBuckets(built.reducer)
    return built


def _data_parts(data: Any) -> Any:
    """(loader, sampler made resumable, batch size) of what `data` names."""
    if data is None:
        return None, None, 1
    sampler = getattr(data, "sampler", None) if hasattr(data, "dataset") and hasattr(data, "batch_size") else data
    if not all(hasattr(sampler, a) for a in ("set_epoch", "num_replicas", "rank", "dataset")):
        raise TypeError("elastic.torch.Job: data must be a DataLoader over a DistributedSampler, or the sampler")
    loader = data if sampler is not data else None
    batch_size = getattr(data, "batch_size", None) or 1
    return loader, make_resumable(sampler), batch_size

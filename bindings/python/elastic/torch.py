"""PyTorch on libelastic: torch.distributed for the current generation, kept
up to date in place. init_process_group() creates the default process group
from the worker's ranks and a torch.distributed.Store backed by the job's store
(scoped to the generation); reconfigured() is the per-step check that tears the
group down when the generation ended and builds the next one. Under plain
torchrun (no job store) the group comes from torchrun's environment ("env://").

    info = elastic.torch.init_process_group("gloo")
    model = DDP(net); step = resume()
    while step < steps:
        try:
            train_one_step(model)
        except RuntimeError:                       # a peer died mid-collective
            elastic.torch.reconfigured(block=True)
            model = DDP(net); step = resume(); continue
        if elastic.torch.reconfigured():          # one cheap poll
            model = DDP(net); step = resume(); continue
        step += 1
"""

import collections
import ctypes
import datetime
import io
import os
import pickle
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
import torch.distributed as dist

from . import errors
from .ckpt import Checkpoint
from .errors import ElasticError
from .group_sockets import GroupSockets
from .store import Store
from .worker import Worker, WorkerInfo, is_spare, park_or_exit

__all__ = ["ElasticStore", "init_process_group", "reconfigured", "worker", "destroy_process_group",
           "abort_process_group", "phase", "open_checkpoint", "open_memory_checkpoint",
           "save_state", "load_state", "restore_state", "Job"]

_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
VERIFY_MANIFEST = 1  # ELASTIC_CKPT_VERIFY_MANIFEST


class ElasticStore(dist.Store):
    """A torch.distributed.Store over an elastic.Store (a handle it owns and
    closes). Values are bytes; timeouts default to the process group's."""

    def __init__(self, store: Store, timeout: datetime.timedelta = _DEFAULT_TIMEOUT):
        super().__init__()
        self._store = store
        self._timeout_ms = _to_ms(timeout)

    def set(self, key: str, value: Any) -> None:
        self._store.set(key, value)

    def get(self, key: str) -> bytes:
        return self._store.get(key, timeout_ms=self._timeout_ms)

    def add(self, key: str, value: int) -> int:
        return self._store.add(key, value)

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        # torch: an empty expected value means "the key is absent"; an absent
        # key with another expected value answers the expected value.
        expected = _as_bytes(expected_value)
        current = self._store.compare_set(key, expected if expected else None, desired_value)
        return current if current is not None else expected

    def check(self, keys: List[str]) -> bool:
        return all(self._store.try_get(key) is not None for key in keys)

    def wait(self, keys: List[str], timeout: Optional[datetime.timedelta] = None) -> None:
        self._store.wait(list(keys), timeout_ms=self._timeout_ms if timeout is None else _to_ms(timeout))

    def num_keys(self) -> int:
        return self._store.num_keys()

    def delete_key(self, key: str) -> bool:
        return self._store.delete(key)

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self._timeout_ms = _to_ms(timeout)

    def close(self) -> None:
        """Closes the elastic handle; later calls (from a group still holding it) raise ECLOSED."""
        self._store.close()


def _to_ms(timeout: datetime.timedelta) -> int:
    return max(1, min(int(timeout.total_seconds() * 1000), 2 ** 31 - 1))


def _as_bytes(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class _Session:
    """The process's one worker and the torch group built for its generation."""

    def __init__(self, worker_: Worker, owned: bool):
        self.worker = worker_
        self.owned = owned
        self.backend = "gloo"
        self.kwargs: Dict[str, Any] = {}
        self.store: Optional[ElasticStore] = None
        self.generation: Optional[int] = None
        # Set on the library's thread when the agent ends a generation. The hook
        # runs just after the worker marked the change, so poll() may already
        # have consumed that change when the event fires: the generation it
        # names tells a stale event from one about the current group.
        self.aborted = threading.Event()
        self.aborted_generation = -1
        # A recovery in flight: its phases go to the agent until "restore".
        # A promoted warm spare is one from the start.
        self.recovering = os.environ.get("ELASTIC_PROMOTED") == "1"
        # The current gloo group's TCP sockets (group_sockets.py): the abort
        # hook shuts them down so a rank blocked in a collective on a peer that
        # is still alive wakes at once instead of after the group's timeout.
        # group_lock orders the hook against a group being registered.
        self.group_lock = threading.Lock()
        self.sockets = GroupSockets([])
        self.job: Any = None  # the live elastic.torch.Job, closed by destroy_process_group
        worker_.on_abort(self._on_abort)

    def _on_abort(self, generation: int, reason: str) -> None:
        self.aborted_generation = generation
        self.aborted.set()
        with self.group_lock:
            if self.generation is not None and generation >= self.generation:
                self.sockets.shutdown()

    def set_group(self, generation: int, sockets: GroupSockets) -> None:
        """Registers the group just created; an abort of its generation that
        came while it was being created takes effect now."""
        with self.group_lock:
            self.generation = generation
            self.sockets = sockets
            if self.aborted.is_set() and self.aborted_generation >= generation:
                sockets.shutdown()

    def break_group(self) -> None:
        """Shuts the current group's sockets down (peers blocked on this rank
        fail now, even while DDP still holds the group)."""
        with self.group_lock:
            self.sockets.shutdown()

    def abort_pending(self) -> bool:
        """True when the agent ended the generation the current group belongs to."""
        if not self.aborted.is_set():
            return False
        if self.generation is None or self.aborted_generation >= self.generation:
            return True
        self.aborted.clear()  # about a generation this process already left
        if self.aborted_generation >= self.generation:  # a fresh abort landed meanwhile
            self.aborted.set()
            return True
        return False


_session: Optional[_Session] = None
_session_lock = threading.Lock()


def worker() -> Worker:
    """The process's elastic.Worker (created on first use; init_process_group
    uses the same one). Use it for heartbeats; do not close it yourself."""
    return _get_session(None).worker


def _get_session(given: Optional[Worker]) -> _Session:
    global _session
    with _session_lock:
        if _session is None:
            _session = _Session(given if given is not None else Worker(), owned=given is None)
        elif given is not None and given is not _session.worker:
            raise ValueError("elastic.torch already uses another Worker in this process")
        return _session


def init_process_group(backend: str = "gloo", worker: Optional[Worker] = None, **kwargs: Any) -> WorkerInfo:
    """Initializes torch.distributed's default group for the current
    generation: rank and world size from the worker, rendezvous through the
    job's store under the generation's prefix. `kwargs` go to
    torch.distributed.init_process_group (timeout, pg_options, ...) and are
    reused for every later generation. Under plain torchrun it uses torchrun's
    "env://" rendezvous. Returns the worker's info.

    In a process elasticrun started as a warm spare (--warm-spares) it first
    parks (elastic.worker.park_or_exit): it returns once the spare took a
    failed rank's place, and a spare the job no longer needs exits 0 here.
    Accepts torch's keyword spelling (backend="gloo"), so it can stand in for
    torch.distributed.init_process_group in a trainer's import line."""
    for reserved in ("store", "rank", "world_size", "init_method"):
        if reserved in kwargs:
            raise TypeError("init_process_group: %s comes from the generation and cannot be given" % reserved)
    if worker is None and _session is None and is_spare():
        park_or_exit()
    session = _get_session(worker)
    session.backend = backend
    session.kwargs = dict(kwargs)
    return _create_group(session)


def _create_group(session: _Session) -> WorkerInfo:
    started = time.monotonic()
    info = _build_group(session)
    _export_ranks(info)
    if session.recovering:
        _report(session, "regroup", time.monotonic() - started)
    return info


def _build_group(session: _Session) -> WorkerInfo:
    info = session.worker.info()
    timeout = session.kwargs.get("timeout", _DEFAULT_TIMEOUT)
    job_store = session.worker.store()
    if job_store is None:  # plain torchrun: its environment names the rendezvous (no agent, no abort)
        dist.init_process_group(session.backend, init_method="env://", rank=info.rank, world_size=info.world_size,
                                **session.kwargs)
        session.generation = info.generation
        return info
    # An owned clone: the worker's own handle is replaced at every reconfigure.
    session.store = ElasticStore(job_store.clone("torch/"), timeout)

    def create() -> None:
        with _event_driven_init_barrier():
            dist.init_process_group(session.backend, store=session.store, rank=info.rank,
                                    world_size=info.world_size, **session.kwargs)

    if _breakable(session.backend):
        _, sockets = GroupSockets.capture(create)
    else:
        create()
        sockets = GroupSockets([])
    session.set_group(info.generation, sockets)
    return info


def _breakable(backend: Any) -> bool:
    """Only gloo's sockets are shut down on an abort: NCCL has its own abort
    (ncclCommAbort, from the trainer's hook) and treats a socket error on its
    proxy thread as fatal."""
    return isinstance(backend, str) and backend.lower() == "gloo"


class _event_driven_init_barrier:
    """torch < 2.2 ends init_process_group with a barrier that polls the store
    every 10 ms (distributed_c10d._store_based_barrier): after a failure that
    is up to 10 ms per rank per recovery of nothing but sleeping. Over our
    store the same barrier is one add per rank and one blocking wait (the
    last rank to arrive sets the key the others wait on). Only while our
    group is created; a torch without that function is left alone."""

    def __enter__(self) -> None:
        c10d = dist.distributed_c10d
        self._saved = getattr(c10d, "_store_based_barrier", None)
        if self._saved is not None:
            c10d._store_based_barrier = _store_barrier

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            dist.distributed_c10d._store_based_barrier = self._saved


def _store_barrier(rank: int, store: Any, timeout: datetime.timedelta, *rest: Any, **kw: Any) -> None:
    key = "%s:%s" % (dist.distributed_c10d.STORE_BASED_BARRIER_PREFIX, dist.distributed_c10d._group_count)
    world = dist.get_world_size()
    if store.add(key, 1) == world:
        store.set(key + "/all", b"1")
    store.wait([key + "/all"], timeout)


_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "TORCHELASTIC_RESTART_COUNT")


def _export_ranks(info: WorkerInfo) -> None:
    """os.environ tells the current generation: a regroup can move ranks or
    change the world size, and code that reads RANK (the tutorial's
    int(os.environ["RANK"]), a DistributedSampler made later) must see the
    new one, not the rank the process was started with. Under torchrun the
    launcher's values stay; alone (no launcher) they are set to the group of one's."""
    values = (info.rank, info.local_rank, info.world_size, info.local_world_size, info.group_rank, info.restart_count)
    for name, value in zip(_RANK_VARIABLES, values):
        if info.attached:
            os.environ[name] = str(value)
        else:
            os.environ.setdefault(name, str(value))


def destroy_process_group() -> None:
    """Closes the live elastic.torch.Job (its asynchronous disk save is
    waited for), destroys the default group (if any) and releases its store
    handle."""
    session = _session
    if session is not None and session.job is not None:
        session.job.close()
        session.job = None
    if dist.is_initialized():
        dist.destroy_process_group()
    if session is not None and session.store is not None:
        session.store.close()
        session.store = None


def _torch_abort() -> Optional[Callable[[], None]]:
    """torch's own abort of the default group where this torch has one (it
    does not wait for work in flight); None: destroy is all there is."""
    c10d = dist.distributed_c10d
    for name in ("_abort_process_group", "abort_process_group"):
        fn = getattr(c10d, name, None)
        if callable(fn):
            return fn
    return None


def abort_process_group() -> None:
    """Takes the default group down after a failure: torch's abort where the
    version has it (torch >= 2.6), destroy otherwise; the store handle goes
    either way. Peers blocked on this rank fail fast: a gloo group's sockets
    are shut down first, since destroy alone leaves them open while DDP (or
    anything else) still holds the group."""
    session = _session
    if session is not None:
        session.break_group()  # DDP may still hold the group: destroy alone would leave its sockets open
    abort = _torch_abort()
    if dist.is_initialized():
        if abort is not None:
            try:
                abort()
            except Exception:  # an abort that fails leaves destroy to do it
                pass
        if dist.is_initialized():
            dist.destroy_process_group()
    if session is not None and session.store is not None:
        session.store.close()
        session.store = None


class phase:
    """Times a block of the recovery and reports it to the agent's
    recovery_phases event (elastic_worker_report_phase):
        with elastic.torch.phase("restore"): step = resume()
    Reports only while a recovery is in flight in this process (after
    reconfigured() returned True, or in a promoted spare); a no-op otherwise."""

    def __init__(self, name: str):
        self.name = name
        self._start = 0.0

    def __enter__(self) -> "phase":
        self._start = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        session = _session
        if session is not None and session.recovering and exc[0] is None:
            _report(session, self.name, time.monotonic() - self._start)
            if self.name == "restore":
                session.recovering = False


def _report(session: "_Session", name: str, seconds: float) -> None:
    try:
        session.worker.report_phase(name, seconds)
    except ElasticError:
        pass  # the agent went away: nothing to tell


def reconfigured(block: bool = False, timeout: Optional[float] = None) -> bool:
    """False while the group is unchanged (one cheap poll: call it every step).
    When the generation has ended, destroys the old process group, waits for
    the next generation, creates the new default group and returns True: the
    trainer then re-wraps its model (DDP) and reloads its state.

    block=True is for the trainer whose collective just failed (a peer died):
    it always destroys the group and waits, up to `timeout` seconds (default:
    the worker's reconfigure timeout), for the agent to end the generation and
    start the next. Without an agent to recover in place (alone, or under
    plain torchrun) that can never happen, so it raises RuntimeError at once:
    let the process fail and the launcher restart the job."""
    session = _get_session(None)
    if not block:
        if not session.abort_pending():
            if not session.worker.poll():  # one atomic load while nothing changed
                return False
            _switch(session, already_polled=True)  # ended before the abort hook existed
            return True
        _switch(session, already_polled=False)
        return True
    info = session.worker.info()
    if not info.attached:
        raise RuntimeError("reconfigured(block=True): no agent to recover in place (run under "
                           "elasticrun --in-process-recovery); failing so the launcher restarts the job")
    limit = timeout if timeout is not None else session.worker.reconfigure_timeout_ms / 1000.0
    started = time.monotonic()
    abort_process_group()
    aborted = time.monotonic()
    deadline = aborted + limit
    while True:
        session.aborted.clear()
        if session.worker.poll():  # blocks for the next generation once this one ended
            break
        left = deadline - time.monotonic()
        if left <= 0 or not session.aborted.wait(left):
            raise TimeoutError("reconfigured(block=True): the generation did not end within %.0f s" % limit)
    _begin_recovery(session, aborted - started, time.monotonic() - aborted)
    _create_group(session)
    return True


def _begin_recovery(session: _Session, abort_s: float, wait_s: float) -> None:
    session.recovering = True
    _report(session, "abort", abort_s)
    _report(session, "wait", wait_s)


def _switch(session: _Session, already_polled: bool) -> None:
    """Old group down first (its sockets close, so peers blocked on us fail
    fast), then the next generation, then its group."""
    started = time.monotonic()
    abort_process_group()
    aborted = time.monotonic()
    session.aborted.clear()
    if not already_polled and not session.worker.poll():
        raise RuntimeError("the generation ended but poll() saw no change")
    _begin_recovery(session, aborted - started, time.monotonic() - aborted)
    _create_group(session)


# ---- checkpoints of state_dicts ----------------------------------------------------


class _TensorRef:
    """Where a tensor sat in a state: its blob and how to rebuild it."""

    __slots__ = ("blob", "dtype", "shape")

    def __init__(self, blob: str, dtype: str, shape: Tuple[int, ...]):
        self.blob, self.dtype, self.shape = blob, dtype, shape

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_TensorRef, (self.blob, self.dtype, self.shape))


_SAFE_GLOBALS = {("collections", "OrderedDict"): collections.OrderedDict, (__name__, "_TensorRef"): _TensorRef}


class _SkeletonUnpickler(pickle.Unpickler):
    """Reads a state's skeleton: plain containers and scalars, OrderedDict and
    tensor references; nothing that could run code."""

    def find_class(self, module: str, name: str) -> Any:
        found = _SAFE_GLOBALS.get((module, name))
        if found is None:
            raise pickle.UnpicklingError("checkpoint state refers to %s.%s, which is not allowed" % (module, name))
        return found


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class _PinnedStaging:
    """Host memory for the device-to-host copies of a save, registered with
    CUDA (cudaHostRegister through the CUDA runtime, loaded with dlopen the
    way the library loads it) so the copies run at pinned-memory speed, and
    kept between saves: registering costs far more than a copy, once. The
    library copies the blobs from it into the memory tier's shared region.
    Without a CUDA runtime, tensors go through .cpu() as before."""

    _NAMES = ("libcudart.so", "libcudart.so.12", "libcudart.so.11.0")

    def __init__(self) -> None:
        self._cudart: Any = None
        self._buffer: Any = None
        self._size = 0
        self._offset = 0

    def _runtime(self) -> Any:
        if self._cudart is None:
            for name in self._NAMES:
                try:
                    self._cudart = ctypes.CDLL(name)
                    break
                except OSError:
                    continue
            else:
                self._cudart = False
        return self._cudart

    def reserve(self, nbytes: int) -> bool:
        """Room for nbytes of device tensors; False: no pinned path (no CUDA runtime)."""
        cudart = self._runtime()
        if not cudart:
            return False
        if nbytes > self._size:
            if self._buffer is not None:
                cudart.cudaHostUnregister(ctypes.c_void_p(ctypes.addressof(self._buffer)))
            size = max(nbytes, 2 * self._size)
            self._buffer = (ctypes.c_char * size)()
            if cudart.cudaHostRegister(ctypes.c_void_p(ctypes.addressof(self._buffer)), ctypes.c_size_t(size),
                                       ctypes.c_uint(0)) != 0:
                self._buffer, self._size = None, 0
                return False
            self._size = size
        self._offset = 0
        return True

    def copy(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CPU tensor in the registered memory holding `tensor` (copied asynchronously)."""
        nbytes = tensor.numel() * tensor.element_size()
        start = (self._offset + 63) // 64 * 64
        self._offset = start + nbytes
        raw = torch.frombuffer(memoryview(self._buffer)[start:start + nbytes], dtype=torch.uint8) if nbytes else \
            torch.empty(0, dtype=torch.uint8)
        host = raw.view(tensor.dtype).reshape(tensor.shape)
        host.copy_(tensor, non_blocking=True)
        return host


_staging = _PinnedStaging()


def _device_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size() + 64 if obj.is_cuda else 0
    if isinstance(obj, dict):
        return sum(_device_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_device_bytes(v) for v in obj)
    return 0


def _split(obj: Any, tensors: List[torch.Tensor], prefix: str, pinned: bool = False) -> Any:
    """The state with every tensor replaced by a _TensorRef (tensors collected)."""
    if isinstance(obj, torch.Tensor):
        source = obj.detach()
        tensor = _staging.copy(source.contiguous()) if pinned and source.is_cuda else source.cpu().contiguous()
        ref = _TensorRef("%s/t%d" % (prefix, len(tensors)), _dtype_name(tensor.dtype), tuple(tensor.shape))
        tensors.append(tensor)
        return ref
    if isinstance(obj, collections.OrderedDict):
        return collections.OrderedDict((k, _split(v, tensors, prefix, pinned)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: _split(v, tensors, prefix, pinned) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_split(v, tensors, prefix, pinned) for v in obj)
    return obj


def _tensor_view(tensor: torch.Tensor) -> Any:
    """The tensor's memory as a writable buffer, without a copy."""
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return b""
    return (ctypes.c_char * nbytes).from_address(tensor.data_ptr())


def save_state(ckpt: Checkpoint, step: int, state: Mapping[str, Any], replicated: bool = True,
               asynchronous: bool = False) -> None:
    """Commits `state` ({"model": model.state_dict(), "optimizer": ...,
    "scheduler": ..., "data": {"step": ...}}) as `step`. Every tensor is
    written from its own memory (no pickling of tensor data); the rest (a
    small skeleton of containers and scalars) is pickled. replicated=True (DDP:
    every rank holds the same state) lets one rank write it for all.
    asynchronous=True copies the blobs and returns; a library thread writes
    and commits them (Checkpoint.save_async: one in flight, the next waits)."""
    tensors: List[torch.Tensor] = []
    device = _device_bytes(state)
    pinned = device > 0 and _staging.reserve(device)
    skeleton = _split(dict(state), tensors, "tensor", pinned)
    if pinned:
        torch.cuda.synchronize()  # the asynchronous device-to-host copies are in
    meta = pickle.dumps(skeleton, protocol=4)
    _SkeletonUnpickler(io.BytesIO(meta)).load()  # refuse now what load_state would refuse later
    blobs: Dict[str, Any] = {"state": meta}
    for index, tensor in enumerate(tensors):
        blobs["tensor/t%d" % index] = _tensor_view(tensor)
    if asynchronous:
        ckpt.save_async(step, blobs, replicated=tuple(blobs) if replicated else ())
    else:
        ckpt.save(step, blobs, replicated=tuple(blobs) if replicated else ())
    del tensors  # the views pointed into these until save returned


def _join(obj: Any, ckpt: Checkpoint, step: int) -> Any:
    if isinstance(obj, _TensorRef):
        dtype = getattr(torch, obj.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError("checkpoint step %d: unknown dtype %r" % (step, obj.dtype))
        tensor = torch.empty(obj.shape, dtype=dtype)
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes == 0:
            return tensor
        got = ckpt.read_into(step, obj.blob, tensor.data_ptr(), nbytes)
        if got != nbytes:
            raise ValueError("checkpoint step %d: %s has %d bytes, expected %d" % (step, obj.blob, got, nbytes))
        return tensor
    if isinstance(obj, collections.OrderedDict):
        return collections.OrderedDict((k, _join(v, ckpt, step)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {k: _join(v, ckpt, step) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_join(v, ckpt, step) for v in obj)
    return obj


def load_state(ckpt: Checkpoint, step: Optional[int] = None) -> Optional[Tuple[int, Dict[str, Any]]]:
    """(step, state) of `step` (default: the latest committed step), tensors
    read straight into freshly allocated CPU tensors (every byte verified);
    None when there is no checkpoint yet. Pass the parts to load_state_dict().
    Without an explicit step, a step whose data turns out corrupt is skipped
    for the one before it (with a one-line notice)."""
    if step is not None:
        return step, _read_state(ckpt, step)
    newest = ckpt.latest()
    if newest is None:
        return None
    candidates = [newest] + [s for s in reversed(ckpt.steps()) if s < newest]
    for candidate in candidates:
        try:
            return candidate, _read_state(ckpt, candidate)
        except ElasticError as exc:
            if exc.code != errors.ECORRUPT:
                raise
            print("elastic: checkpoint step %d is corrupt (%s); trying the one before" % (candidate, exc.detail),
                  file=sys.stderr, flush=True)
    return None


def _read_state(ckpt: Checkpoint, step: int) -> Dict[str, Any]:
    skeleton = _SkeletonUnpickler(io.BytesIO(ckpt.read(step, "state"))).load()
    return _join(skeleton, ckpt, step)


def restore_state(memory: Optional[Checkpoint], disk: Optional[Checkpoint]) -> Optional[Tuple[int, str, Dict[str, Any]]]:
    """(step, source, state) from the cheapest tier that has the step to
    restore (elastic.ckpt.restore: the job's agreed step, or a newer one
    committed on disk; else the newer of memory and disk); source is "local", "peer" or "disk". The agent is told
    what was read (the checkpoint_restored event). None when neither tier has
    a step."""
    from .ckpt import restore
    chosen = restore(memory, disk)
    if chosen is None:
        return None
    with chosen:
        return chosen.step, chosen.source, _read_state(chosen.checkpoint, chosen.step)


def open_memory_checkpoint(**options: Any) -> Optional[Checkpoint]:
    """This node's memory tier for this process's rank, world size and
    generation (elasticrun --memory-ckpt), or None outside one. The commit
    goes through the job's store: every rank's shard is in before the step counts."""
    session = _get_session(None)
    info = session.worker.info()
    options.setdefault("verify", VERIFY_MANIFEST)
    return Checkpoint.memory_tier(store=session.worker.store(), rank=info.rank, world=info.world_size,
                                  generation=info.generation, **options)


def open_checkpoint(directory: str, **options: Any) -> Checkpoint:
    """A Checkpoint on a shared directory for this process's rank, world size
    and generation (open a new one after reconfigured() returned True).
    `options` are Checkpoint's (fsync, keep_last, compression, ...). verify
    defaults to manifests only: load_state reads verify every byte anyway and
    fall back past a corrupt step, so a full pre-check would read it all twice."""
    info = _get_session(None).worker.info()
    options.setdefault("verify", VERIFY_MANIFEST)
    return Checkpoint(directory, rank=info.rank, world=info.world_size, generation=info.generation, **options)


def __getattr__(name: str) -> Any:
    """elastic.torch.Job, imported on first use: _torch_job.py builds on this
    module, so either can be imported first without a half-made module."""
    if name == "Job":
        from ._torch_job import Job
        return Job
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

"""The in-trainer API (include/elastic/worker.h): attach to the agent that
started this process (or run as a group of one), heartbeat every step, and
learn from poll() when the group changed. Under plain torchrun the ranks come
from the environment and what needs the agent degrades with a one-line notice."""

import ctypes
import os
import sys
import threading
from typing import Callable, NamedTuple, Optional, Set

from ._handle import Handle
from ._lib import TIMEOUT_DEFAULT, WORKER_ABORT_FN, WorkerInfoC, WorkerOpts, WorkerParkOpts, lib, take_bytes
from .errors import CODES, ElasticError, check
from .store import Store


class WorkerInfo(NamedTuple):
    """Who this worker is in the current generation (elastic_worker_info)."""
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    group_rank: int
    restart_count: int
    generation: int
    master_port: int
    attached: bool
    run_id: str
    master_addr: str
    incarnation: int = 0  # the run's (ELASTIC_INCARNATION); 0 without an agent that sets it


_notices_given: Set[str] = set()
_notice_lock = threading.Lock()


def notice(what: str, text: str) -> None:
    """Prints `elastic: <text>` to stderr once per process and topic."""
    with _notice_lock:
        if what in _notices_given:
            return
        _notices_given.add(what)
    print("elastic: " + text, file=sys.stderr, flush=True)


def launched_by_elasticrun() -> bool:
    """True when the agent's variables are in the environment."""
    return "ELASTIC_STORE_ENDPOINT" in os.environ


def is_spare() -> bool:
    """True in a process elasticrun started as a warm spare (not promoted yet)."""
    return "ELASTIC_SPARE" in os.environ


def park(timeout_ms: Optional[int] = None) -> bool:
    """Warm spares (elasticrun --warm-spares): call once after the costly
    start-up (imports, CUDA context, model construction) and before Worker()
    or elastic.torch.init_process_group(). Not a spare: returns False at once.
    A spare: waits until the agent gives it a failed rank, sets that rank's
    variables in os.environ (and the C environment), returns True; then load
    state and join the group like any restarted rank. When the job no longer
    needs the spare it raises ElasticError(ECLOSED): let the process exit 0
    (elastic.worker.park_or_exit does)."""
    opts = WorkerParkOpts()
    check(lib.elastic_worker_park_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "park options")
    if timeout_ms is not None:
        opts.timeout_ms = timeout_ms
    promoted = ctypes.c_int(0)
    env = ctypes.c_void_p()
    check(lib.elastic_worker_park(ctypes.byref(opts), ctypes.byref(promoted), ctypes.byref(env)), "park")
    if not promoted.value:
        return False
    text = take_bytes(env, len(ctypes.string_at(env))).decode() if env.value else ""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            os.environ[key] = value
    os.environ.pop("ELASTIC_SPARE", None)
    os.environ["ELASTIC_PROMOTED"] = "1"  # elastic.torch times this process's first group as a recovery
    return True


def park_or_exit(timeout_ms: Optional[int] = None) -> bool:
    """park(), but a spare the job no longer needs exits 0 here."""
    try:
        return park(timeout_ms)
    except ElasticError as exc:
        if exc.code != CODES["ECLOSED"]:
            raise
        sys.exit(0)


class Worker(Handle):
    """One per process. Use it as a context manager or call close(), which
    detaches (the agent sees a clean goodbye) and frees."""

    _kind = "worker"

    def __init__(self, store_connect_timeout_ms: Optional[int] = None, store_timeout_ms: Optional[int] = None,
                 reconfigure_timeout_ms: Optional[int] = None, stack_dump_signal: Optional[int] = None):
        opts = WorkerOpts()
        check(lib.elastic_worker_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "worker options")
        for name, value in (("store_connect_timeout_ms", store_connect_timeout_ms),
                            ("store_timeout_ms", store_timeout_ms),
                            ("reconfigure_timeout_ms", reconfigure_timeout_ms),
                            ("stack_dump_signal", stack_dump_signal)):
            if value is not None:
                setattr(opts, name, value)
        self.reconfigure_timeout_ms = opts.reconfigure_timeout_ms
        self._abort_callback = None  # the ctypes thunk must live as long as the library may call it
        handle = ctypes.c_void_p()
        check(lib.elastic_worker_init(ctypes.byref(opts), ctypes.byref(handle)), "worker init")
        self._adopt(handle)

    def info(self) -> WorkerInfo:
        """Who this worker is in the current generation (a WorkerInfo)."""
        raw = WorkerInfoC()
        raw.struct_size = ctypes.sizeof(raw)
        check(lib.elastic_worker_get_info(self._h(), ctypes.byref(raw)), "worker info")
        return WorkerInfo(raw.rank, raw.local_rank, raw.world_size, raw.local_world_size, raw.group_rank,
                          raw.restart_count, raw.generation, raw.master_port, bool(raw.attached),
                          raw.run_id.decode(), raw.master_addr.decode(), raw.incarnation)

    def store(self) -> Optional[Store]:
        """The job's store scoped to the current generation, or None (plain
        torchrun). Owned by the worker: valid until the next reconfigure or
        close, so fetch it again after poll() returned True (or clone() it)."""
        handle = ctypes.c_void_p()
        rc = lib.elastic_worker_get_store(self._h(), ctypes.byref(handle))
        if rc == CODES["ENOTFOUND"]:
            return None
        check(rc, "worker store")
        return Store(handle, owned=False)

    def heartbeat(self, step: int) -> None:
        """Progress report; cheap enough for every step. `step` should grow."""
        check(lib.elastic_worker_heartbeat(self._h(), step), "heartbeat")

    def report_phase(self, phase: str, seconds: float) -> None:
        """How long one recovery phase took here ("regroup", "restore", ...),
        for the agent's recovery_phases event; a no-op when not attached."""
        check(lib.elastic_worker_report_phase(self._h(), phase.encode(), max(0, int(seconds * 1e9))),
              "report_phase")

    def report_step_time(self, compute_ns: int) -> None:
        """The compute part of the last step (without time blocked in collectives)."""
        check(lib.elastic_worker_report_step_time(self._h(), compute_ns), "report_step_time")

    def on_abort(self, fn: Optional[Callable[[int, str], None]]) -> None:
        """Runs fn(generation, reason) on the library's thread as soon as the
        agent ends the generation (before poll() sees it); None unregisters.
        It must be quick and must not call this worker: set a flag, wake a
        thread. Exceptions it raises are printed and dropped."""
        if fn is None:
            check(lib.elastic_worker_on_abort(self._h(), WORKER_ABORT_FN(), None), "on_abort")
            self._abort_callback = None
            return

        def thunk(_user: int, generation: int, reason: bytes) -> None:
            try:
                fn(generation, (reason or b"").decode(errors="replace"))
            except Exception as exc:  # an exception must not unwind into C
                print("elastic: abort hook raised %r" % exc, file=sys.stderr, flush=True)

        callback = WORKER_ABORT_FN(thunk)
        check(lib.elastic_worker_on_abort(self._h(), callback, None), "on_abort")
        self._abort_callback = callback

    def poll(self) -> bool:
        """Call once per step: False while the group is unchanged, True when it
        was reconfigured in place (re-read info(), reload state). When the
        generation ended it waits (up to reconfigure_timeout_ms) for the next.
        Raises ElasticError with ECLOSED when the agent told the worker to stop."""
        rc = lib.elastic_worker_poll(self._h())
        if rc == CODES["ERECONFIGURE"]:
            return True
        check(rc, "poll")
        return False

    def stop_notice(self) -> Optional[int]:
        """None while the job runs. Once it is stopping (its agent got SIGTERM:
        scancel, preemption, the end of a time limit), the milliseconds left
        before this worker is killed (-1: not known): save, then exit. Cheap
        enough for every step."""
        left = ctypes.c_int(-1)
        if lib.elastic_worker_stop_notice(self._h(), ctypes.byref(left)) == 0:
            return None
        return left.value

    def notice_on_sigterm(self) -> None:
        """Makes a SIGTERM to this process a stop notice instead of its end
        (Slurm signals every process of a job step, workers included). Raises
        ElasticError (EBUSY) when SIGTERM already has a handler."""
        check(lib.elastic_worker_notice_on_sigterm(self._h()), "notice_on_sigterm")

    def barrier(self, timeout_ms: int = TIMEOUT_DEFAULT) -> None:
        """Waits until every worker of the generation entered the barrier
        (timeout_ms < 0: no limit; default: the worker's store_timeout_ms).
        Under plain torchrun there is no job store: the barrier goes through
        torch.distributed when a default group exists, else it is skipped with
        a one-line notice."""
        rc = lib.elastic_worker_barrier(self._h(), timeout_ms)
        if rc == CODES["EUNSUPPORTED"] and not launched_by_elasticrun():
            dist = sys.modules.get("torch.distributed")
            if dist is not None and dist.is_available() and dist.is_initialized():
                dist.barrier()
                return
            notice("barrier", "barrier skipped: not started by elasticrun (plain torchrun has no job store)")
            return
        check(rc, "barrier")

    def close(self) -> None:
        """Detaches and frees; the abort hook (if any) is released after the library stopped calling it."""
        super().close()
        self._abort_callback = None

    def _free(self, handle: ctypes.c_void_p) -> None:
        lib.elastic_worker_close(handle)

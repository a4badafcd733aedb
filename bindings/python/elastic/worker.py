"""The in-trainer API (include/elastic/worker.h): attach to the agent that
started this process (or run as a group of one), heartbeat every step, and
learn from poll() when the group changed."""

import ctypes
from collections import namedtuple

from ._lib import TIMEOUT_DEFAULT, WorkerInfoC, WorkerOpts, lib
from ._handle import Handle
from .errors import CODES, check
from .store import Store

WorkerInfo = namedtuple("WorkerInfo", "rank local_rank world_size local_world_size group_rank restart_count "
                                      "generation master_port attached run_id master_addr")


class Worker(Handle):
    """One per process. Use it as a context manager or call close(), which
    detaches (the agent sees a clean goodbye) and frees."""

    _kind = "worker"

    def __init__(self, store_connect_timeout_ms=None, store_timeout_ms=None, reconfigure_timeout_ms=None,
                 stack_dump_signal=None):
        opts = WorkerOpts()
        check(lib.elastic_worker_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "worker options")
        for name, value in (("store_connect_timeout_ms", store_connect_timeout_ms),
                            ("store_timeout_ms", store_timeout_ms),
                            ("reconfigure_timeout_ms", reconfigure_timeout_ms),
                            ("stack_dump_signal", stack_dump_signal)):
            if value is not None:
                setattr(opts, name, value)
        handle = ctypes.c_void_p()
        check(lib.elastic_worker_init(ctypes.byref(opts), ctypes.byref(handle)), "worker init")
        self._adopt(handle)

    def info(self):
        """Who this worker is in the current generation (a WorkerInfo)."""
        raw = WorkerInfoC()
        raw.struct_size = ctypes.sizeof(raw)
        check(lib.elastic_worker_get_info(self._h(), ctypes.byref(raw)), "worker info")
        return WorkerInfo(raw.rank, raw.local_rank, raw.world_size, raw.local_world_size, raw.group_rank,
                          raw.restart_count, raw.generation, raw.master_port, bool(raw.attached),
                          raw.run_id.decode(), raw.master_addr.decode())

    def store(self):
        """The job's store scoped to the current generation, or None (plain
        torchrun). Owned by the worker: valid until the next reconfigure or
        close, so fetch it again after poll() returned True."""
        handle = ctypes.c_void_p()
        rc = lib.elastic_worker_get_store(self._h(), ctypes.byref(handle))
        if rc == CODES["ENOTFOUND"]:
            return None
        check(rc, "worker store")
        return Store(handle, owned=False)

    def heartbeat(self, step):
        """Progress report; cheap enough for every step. `step` should grow."""
        check(lib.elastic_worker_heartbeat(self._h(), step), "heartbeat")

    def report_step_time(self, compute_ns):
        check(lib.elastic_worker_report_step_time(self._h(), compute_ns), "report_step_time")

    def poll(self):
        """Call once per step: False while the group is unchanged, True when it
        was reconfigured in place (re-read info(), reload state). Raises
        ElasticError with ECLOSED when the agent told the worker to stop."""
        rc = lib.elastic_worker_poll(self._h())
        if rc == CODES["ERECONFIGURE"]:
            return True
        check(rc, "poll")
        return False

    def barrier(self, timeout_ms=TIMEOUT_DEFAULT):
        """Waits until every worker of the generation entered the barrier
        (timeout_ms < 0: no limit; default: the worker's store_timeout_ms)."""
        check(lib.elastic_worker_barrier(self._h(), timeout_ms), "barrier")

    def _free(self, handle):
        lib.elastic_worker_close(handle)

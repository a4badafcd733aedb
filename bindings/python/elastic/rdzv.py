"""Rendezvous (include/elastic/rdzv.h): nodes of a job agree, again after
every failure or membership change, on the members and ranks of the next
generation. Runs over the job's store; next() and watch() block."""

import ctypes
from typing import NamedTuple, Optional

from ._handle import Handle
from ._lib import RdzvCause, RdzvOpts, RdzvResult, lib
from .errors import CODES, check
from .store import Store

# elastic_rdzv_cause_kind
FAILURE = 1        # a worker or probe failed: consumes the restart budget
NODE_LOST = 2      # a member's heartbeat lapsed or its connection closed
NODES_WAITING = 3  # a node is waiting to join and there is room
NODE_LEFT = 4      # a member left on purpose (scale-down)
JOB_ENDED = 5      # the job is done or was stopped


class Generation(NamedTuple):
    """The membership of one generation as this node sees it (elastic_rdzv_result)."""
    generation: int
    group_rank: int
    group_world_size: int
    rank_base: int
    local_world_size: int
    world_size: int
    restart_count: int
    max_restarts: int
    master_addr: str
    master_port: int
    incarnation: int = 0  # the run's, the same on every node; larger for a job started again on a fresh store


class Cause(NamedTuple):
    """Why a generation ended (elastic_rdzv_cause); kind is FAILURE, NODE_LOST, ..."""
    kind: int
    generation: int
    node_id: str
    rank: int
    exit_code: int
    signal: int
    reason: str
    time_ms: int


def _cause(raw: RdzvCause) -> Cause:
    return Cause(raw.kind, raw.generation, raw.node_id.decode(errors="replace"), raw.rank, raw.exit_code,
                 raw.signal, raw.reason.decode(errors="replace"), raw.time_ms)


class Rendezvous(Handle):
    """One node's membership in a job. Connects by `endpoint` or uses an open
    `store` (which must outlive it); starts this node's heartbeat on the
    library's thread but does not join until next(). Options are the fields of
    elastic_rdzv_opts (min_nodes, max_nodes, join_timeout_ms,
    last_call_timeout_ms, keepalive_interval_ms, keepalive_timeout_ms,
    max_restarts, node_addr, local_world_size, node_id)."""

    _kind = "rendezvous"

    def __init__(self, run_id: str, endpoint: Optional[str] = None, store: Optional[Store] = None,
                 token: Optional[str] = None, **options: object):
        if (endpoint is None) == (store is None):
            raise TypeError("give exactly one of endpoint and store")
        opts = RdzvOpts()
        check(lib.elastic_rdzv_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "rendezvous options")
        strings = {name for name, kind in RdzvOpts._fields_ if kind is ctypes.c_char_p}
        known = {name for name, _ in RdzvOpts._fields_} - {"struct_size", "run_id", "endpoint", "store", "token"}
        self._keep = []  # encoded strings the options point at
        for name, value in options.items():
            if name not in known:
                raise TypeError("unknown rendezvous option %r" % name)
            if name in strings:
                value = self._encoded(str(value))
            setattr(opts, name, value)
        opts.run_id = self._encoded(run_id)
        if endpoint is not None:
            opts.endpoint = self._encoded(endpoint)
        if token is not None:
            opts.token = self._encoded(token)
        if store is not None:
            opts.store = store._h()
            self._store = store  # the C handle keeps using it
        handle = ctypes.c_void_p()
        check(lib.elastic_rdzv_open(ctypes.byref(opts), ctypes.byref(handle)), "rendezvous " + run_id)
        self._adopt(handle)

    def _encoded(self, text: str) -> bytes:
        self._keep.append(text.encode())
        return self._keep[-1]

    def next(self) -> Generation:
        """Blocks until the next generation forms with this node in it.
        ElasticError ENOTENOUGH (too few nodes in time), EBUDGET (restart
        budget spent) or ECLOSED (the job was ended) end the job."""
        raw = RdzvResult()
        raw.struct_size = ctypes.sizeof(raw)
        check(lib.elastic_rdzv_next(self._h(), ctypes.byref(raw)), "rendezvous next")
        return Generation(raw.generation, raw.group_rank, raw.group_world_size, raw.rank_base, raw.local_world_size,
                          raw.world_size, raw.restart_count, raw.max_restarts, raw.master_addr.decode(),
                          raw.master_port, raw.incarnation)

    def end_generation(self, kind: int = FAILURE, rank: int = -1, exit_code: int = -1, signal: int = 0,
                       reason: str = "") -> None:
        """Ends the current generation for every member with this cause (a
        FAILURE consumes one restart). The first cause of a generation wins."""
        raw = RdzvCause()
        raw.struct_size = ctypes.sizeof(raw)
        raw.kind, raw.rank, raw.exit_code, raw.signal = kind, rank, exit_code, signal
        raw.reason = reason.encode()[:255]
        check(lib.elastic_rdzv_end_generation(self._h(), ctypes.byref(raw)), "end generation")

    def watch(self, timeout_ms: int = -1) -> Optional[Cause]:
        """Blocks until the current generation must end and returns why;
        None when nothing happened in timeout_ms (< 0: no limit)."""
        raw = RdzvCause()
        raw.struct_size = ctypes.sizeof(raw)
        rc = lib.elastic_rdzv_watch(self._h(), timeout_ms, ctypes.byref(raw))
        if rc == CODES["ETIMEDOUT"]:
            return None
        check(rc, "rendezvous watch")
        return _cause(raw)

    def first_failure(self) -> Optional[Cause]:
        """The first failure the job recorded, or None."""
        raw = RdzvCause()
        raw.struct_size = ctypes.sizeof(raw)
        rc = lib.elastic_rdzv_first_failure(self._h(), ctypes.byref(raw))
        if rc == CODES["ENOTFOUND"]:
            return None
        check(rc, "first failure")
        return _cause(raw)

    def finish(self) -> None:
        """This node's workers all succeeded: it may go without ending the generation."""
        check(lib.elastic_rdzv_finish(self._h()), "finish")

    def leave(self) -> None:
        """Leaves on purpose; the others re-form without consuming budget."""
        check(lib.elastic_rdzv_leave(self._h()), "leave")

    def end_job(self) -> None:
        """Ends the job for every node: their next call fails with ECLOSED."""
        check(lib.elastic_rdzv_end_job(self._h()), "end the job")

    def _free(self, handle: ctypes.c_void_p) -> None:
        lib.elastic_rdzv_free(handle)

"""The atomic checkpoint store (include/elastic/ckpt.h): save a dict of named
byte blobs for a step, find the latest committed step, read blobs back."""

import ctypes
import os
from typing import Collection, Dict, List, Mapping, Optional, Union

from ._buffers import as_buffer, encode_key
from ._lib import CkptBlob, CkptOpts, c_uint64_p, lib, take_bytes, take_strings
from ._handle import Handle
from .errors import CODES, ElasticError, check
from .store import Store

BytesLike = Union[bytes, bytearray, memoryview, str]

NONE = 0        # ELASTIC_CKPT_NONE: blobs stored as they are
ZSTD = 1        # ELASTIC_CKPT_ZSTD
REPLICATED = 1  # ELASTIC_CKPT_REPLICATED: identical on every rank
ANY_RANK = -1   # ELASTIC_CKPT_ANY_RANK
SOURCES = {1: "local", 2: "peer", 3: "disk"}  # ELASTIC_CKPT_SOURCE_*


class Checkpoint(Handle):
    """A checkpoint directory. Options are the fields of elastic_ckpt_opts
    (compression, zstd_level, threads, chunk_bytes, fsync, verify, keep_last,
    keep_every, rank, world, generation, shared_storage, commit_timeout_ms,
    max_blob_bytes); `store` takes a Store for the global commit record."""

    _kind = "checkpoint handle"

    def __init__(self, directory: Optional[Union[str, os.PathLike]], store: Optional[Store] = None,
                 **options: int):
        memory = directory is None
        opts = CkptOpts()
        check(lib.elastic_ckpt_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "checkpoint options")
        known = {name for name, _ in CkptOpts._fields_} - {"struct_size", "store"}
        for name, value in options.items():
            if name not in known:
                raise TypeError("unknown checkpoint option %r" % name)
            setattr(opts, name, value)
        if store is not None:
            opts.store = store._h()
            self._store = store  # the C handle keeps using it
        handle = ctypes.c_void_p()
        if memory:
            check(lib.elastic_ckpt_open_memory(ctypes.byref(opts), ctypes.byref(handle)), "open the memory tier")
        else:
            check(lib.elastic_ckpt_open(str(directory).encode(), ctypes.byref(opts), ctypes.byref(handle)),
                  "open " + str(directory))
        self._adopt(handle)
        self.memory = memory

    @classmethod
    def memory_tier(cls, store: Optional[Store] = None, **options: int) -> Optional["Checkpoint"]:
        """This node's memory tier (the agent's shared memory, elasticrun
        --memory-ckpt), or None outside one. Saves go to memory at memcpy
        speed and survive the worker; the same options as a directory's
        (compression defaults to NONE here: memory is not worth compressing)."""
        options.setdefault("compression", NONE)
        try:
            return cls(None, store=store, **options)
        except ElasticError as exc:
            if exc.code == CODES["ENOTFOUND"]:
                return None
            raise

    def save(self, step: int, blobs: Mapping[str, BytesLike], replicated: Collection[str] = ()) -> None:
        """Commits {name: bytes-like} as this rank's shard of `step`; names in
        `replicated` are flagged as identical on every rank."""
        array, count, keep = self._blob_array(blobs, replicated)
        check(lib.elastic_ckpt_save(self._h(), step, array, count), "save step %d" % step)
        del keep  # the buffers the array points into, alive until the call returned

    def save_async(self, step: int, blobs: Mapping[str, BytesLike], replicated: Collection[str] = (),
                   timeout_ms: int = -1) -> None:
        """Copies the blobs and returns; a library thread writes and commits
        them (elastic_ckpt_save_async). One save is in flight at a time: a
        second waits up to timeout_ms (< 0: no limit) for the first, else
        ElasticError(EBUSY). async_wait() tells how the last one ended."""
        array, count, keep = self._blob_array(blobs, replicated)
        check(lib.elastic_ckpt_save_async(self._h(), step, array, count, timeout_ms), "save step %d" % step)
        del keep  # copied by the library before the call returned

    def async_wait(self, timeout_ms: int = -1) -> Optional[int]:
        """Waits up to timeout_ms (0: just look, < 0: no limit) for the save in
        flight; the step of the last finished asynchronous save (None when
        there was none), or ElasticError with its failure; ETIMEDOUT while
        one is still running."""
        step = ctypes.c_uint64(0)
        rc = lib.elastic_ckpt_async_wait(self._h(), timeout_ms, ctypes.byref(step))
        check(rc, "asynchronous save of step %d" % step.value)
        return step.value if step.value else None

    @staticmethod
    def _blob_array(blobs: Mapping[str, BytesLike], replicated: Collection[str]) -> "tuple":
        items = list(blobs.items())
        array = (CkptBlob * max(len(items), 1))()
        keep = []
        for i, (name, value) in enumerate(items):
            ptr, length, holder = as_buffer(value)
            encoded = encode_key(name)
            keep.append((encoded, holder))
            array[i].name = encoded
            array[i].data = ptr
            array[i].len = length
            array[i].flags = REPLICATED if name in replicated else 0
        return array, len(items), keep

    def latest(self) -> Optional[int]:
        """The newest committed, verifying step, or None when there is none."""
        step = ctypes.c_uint64()
        rc = lib.elastic_ckpt_latest(self._h(), ctypes.byref(step))
        if rc == CODES["ENOTFOUND"]:
            return None
        check(rc, "latest")
        return step.value

    def read(self, step: int, name: str) -> bytes:
        """One blob of a committed step as bytes (every byte verified)."""
        data, length = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.elastic_ckpt_read(self._h(), step, encode_key(name), ctypes.byref(data), ctypes.byref(length)),
              "read %s of step %d" % (name, step))
        return take_bytes(data, length.value)

    def blob_len(self, step: int, name: str) -> int:
        """The size of a blob as read() would return it."""
        length = ctypes.c_size_t()
        check(lib.elastic_ckpt_blob_len(self._h(), step, encode_key(name), ctypes.byref(length)),
              "size of %s of step %d" % (name, step))
        return length.value

    def read_into(self, step: int, name: str, address: int, capacity: int) -> int:
        """Reads a blob straight into caller-owned memory at `address` (at
        least `capacity` bytes, e.g. a tensor's data_ptr()); returns its length.
        ELIMIT when it does not fit. Every byte is verified, as by read()."""
        length = ctypes.c_size_t()
        check(lib.elastic_ckpt_read_into(self._h(), step, encode_key(name), ctypes.c_void_p(address), capacity,
                                         ctypes.byref(length)), "read %s of step %d" % (name, step))
        return length.value

    def read_all(self, step: int, rank: int = ANY_RANK) -> Dict[str, bytes]:
        """{name: bytes} of every blob read() can find for `step`."""
        return {name: self.read(step, name) for name in self.blobs(step, rank)}

    def steps(self) -> List[int]:
        """Committed, verifying steps, oldest first."""
        array, count = c_uint64_p(), ctypes.c_size_t()
        check(lib.elastic_ckpt_list_steps(self._h(), ctypes.byref(array), ctypes.byref(count)), "list steps")
        try:
            return [array[i] for i in range(count.value)]
        finally:
            lib.elastic_free(ctypes.cast(array, ctypes.c_void_p))

    def blobs(self, step: int, rank: int = ANY_RANK) -> List[str]:
        """Blob names of a step in `rank`'s shard (ANY_RANK: every name read() finds)."""
        array, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
        check(lib.elastic_ckpt_list_blobs(self._h(), step, rank, ctypes.byref(array), ctypes.byref(count)),
              "list blobs of step %d" % step)
        if not array:
            return []
        return take_strings(array, count.value)

    def _free(self, handle: ctypes.c_void_p) -> None:
        lib.elastic_ckpt_close(handle)


class Restore:
    """Where this worker restores from (restore()): `step`, `source` ("local",
    "peer" or "disk") and `checkpoint` (the handle to read it from). Use it as
    a context manager around the reads: on exit the agent is told what was
    read and how long it took (the checkpoint_restored event)."""

    def __init__(self, step: int, source: str, checkpoint: Checkpoint):
        self.step, self.source, self.checkpoint = step, source, checkpoint

    def __enter__(self) -> "Restore":
        return self

    def __exit__(self, *exc: object) -> None:
        lib.elastic_ckpt_restore_end(self.checkpoint._h())


def restore(memory: Optional[Checkpoint], disk: Optional[Checkpoint]) -> Optional[Restore]:
    """The step this worker restores, and from which tier: the job's agreed
    step when the agents planned one (or a newer step committed on a
    shared-directory disk of that step's generation or later: the agents may
    not know that directory), else the newer of the memory tier's
    latest and the disk's (memory on a tie). None when neither has a step."""
    if memory is None and disk is None:  # no tier (no --memory-ckpt, no directory): nothing to restore
        return None
    step, source = ctypes.c_uint64(), ctypes.c_int()
    chosen = ctypes.c_void_p()
    rc = lib.elastic_ckpt_restore_begin(memory._h() if memory else None, disk._h() if disk else None,
                                        ctypes.byref(step), ctypes.byref(chosen), ctypes.byref(source))
    if rc == CODES["ENOTFOUND"]:
        return None
    check(rc, "restore")
    which = memory if memory is not None and chosen.value == memory._h().value else disk
    assert which is not None
    return Restore(step.value, SOURCES.get(source.value, "disk"), which)

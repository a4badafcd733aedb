"""Finds and loads libelastic, and declares the C signature of every function
the package calls, so ctypes converts arguments and results exactly (no
implicit int truncation of pointers or 64-bit values). The ctypes mirrors of
the public option and result structs live here too (STRUCTS names them)."""

import ctypes
import ctypes.util
import os
from typing import Dict, List, Optional, Tuple, Type

_SONAME = "libelastic.so.1"

c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_char_ppp = ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))
c_uint64_p = ctypes.POINTER(ctypes.c_uint64)
c_int64_p = ctypes.POINTER(ctypes.c_int64)

# Timeouts (elastic.h): > 0 waits that long, 0 does not wait, < 0 has no limit,
# TIMEOUT_DEFAULT takes the handle's default.
TIMEOUT_NO_LIMIT = -1
TIMEOUT_DEFAULT = -2147483648

# The mirrors below follow the C structs field for field (checked against the
# C offsets by tests/test_layout.py). Like C callers, the package passes its
# own sizeof as struct_size, so a newer library keeps working with it.


class StoreServerOpts(ctypes.Structure):
    """elastic_store_server_opts (include/elastic/store.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("host", ctypes.c_char_p), ("port", ctypes.c_int),
                ("token", ctypes.c_char_p), ("max_key_bytes", ctypes.c_size_t),
                ("max_value_bytes", ctypes.c_size_t), ("max_connections", ctypes.c_size_t),
                ("max_connection_buffer", ctypes.c_size_t), ("max_total_bytes", ctypes.c_size_t),
                ("handshake_timeout_ms", ctypes.c_int), ("idle_timeout_ms", ctypes.c_int),
                ("max_pending_waits", ctypes.c_size_t), ("max_buffered_bytes", ctypes.c_size_t),
                ("frame_timeout_ms", ctypes.c_int)]


class StoreOpts(ctypes.Structure):
    """elastic_store_opts (include/elastic/store.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("prefix", ctypes.c_char_p), ("token", ctypes.c_char_p),
                ("connect_timeout_ms", ctypes.c_int), ("timeout_ms", ctypes.c_int)]


class RdzvOpts(ctypes.Structure):
    """elastic_rdzv_opts (include/elastic/rdzv.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("run_id", ctypes.c_char_p), ("endpoint", ctypes.c_char_p),
                ("store", ctypes.c_void_p), ("token", ctypes.c_char_p), ("min_nodes", ctypes.c_int),
                ("max_nodes", ctypes.c_int), ("join_timeout_ms", ctypes.c_int),
                ("last_call_timeout_ms", ctypes.c_int), ("keepalive_interval_ms", ctypes.c_int),
                ("keepalive_timeout_ms", ctypes.c_int), ("max_restarts", ctypes.c_int),
                ("node_addr", ctypes.c_char_p), ("local_world_size", ctypes.c_int), ("node_id", ctypes.c_char_p),
                ("backend", ctypes.c_int), ("etcd_endpoints", ctypes.c_char_p), ("etcd_prefix", ctypes.c_char_p),
                ("etcd_ca_file", ctypes.c_char_p), ("etcd_cert_file", ctypes.c_char_p),
                ("etcd_key_file", ctypes.c_char_p), ("etcd_user", ctypes.c_char_p),
                ("etcd_password", ctypes.c_char_p), ("etcd_timeout_ms", ctypes.c_int),
                ("preferred_rank", ctypes.c_int), ("max_infra_restarts", ctypes.c_int)]


class RdzvResult(ctypes.Structure):
    """elastic_rdzv_result (include/elastic/rdzv.h); set struct_size before next()."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("generation", ctypes.c_uint64), ("group_rank", ctypes.c_int),
                ("group_world_size", ctypes.c_int), ("rank_base", ctypes.c_int), ("local_world_size", ctypes.c_int),
                ("world_size", ctypes.c_int), ("restart_count", ctypes.c_int), ("max_restarts", ctypes.c_int),
                ("master_addr", ctypes.c_char * 256), ("master_port", ctypes.c_int),
                ("incarnation", ctypes.c_uint64)]


class RdzvCause(ctypes.Structure):
    """elastic_rdzv_cause (include/elastic/rdzv.h); set struct_size before every call."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("kind", ctypes.c_int), ("generation", ctypes.c_uint64),
                ("node_id", ctypes.c_char * 128), ("rank", ctypes.c_int), ("exit_code", ctypes.c_int),
                ("signal", ctypes.c_int), ("reason", ctypes.c_char * 256), ("time_ms", ctypes.c_uint64)]


class WorkerOpts(ctypes.Structure):
    """elastic_worker_opts (include/elastic/worker.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("store_connect_timeout_ms", ctypes.c_int),
                ("store_timeout_ms", ctypes.c_int), ("reconfigure_timeout_ms", ctypes.c_int),
                ("stack_dump_signal", ctypes.c_int)]


class WorkerInfoC(ctypes.Structure):
    """elastic_worker_info (include/elastic/worker.h); set struct_size before get_info."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("rank", ctypes.c_int), ("local_rank", ctypes.c_int),
                ("world_size", ctypes.c_int),
                ("local_world_size", ctypes.c_int), ("group_rank", ctypes.c_int), ("restart_count", ctypes.c_int),
                ("generation", ctypes.c_uint64), ("master_port", ctypes.c_int), ("attached", ctypes.c_int),
                ("run_id", ctypes.c_char * 128), ("master_addr", ctypes.c_char * 256),
                ("incarnation", ctypes.c_uint64)]


class CkptOpts(ctypes.Structure):
    """elastic_ckpt_opts (include/elastic/ckpt.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("compression", ctypes.c_int), ("zstd_level", ctypes.c_int),
                ("threads", ctypes.c_int), ("chunk_bytes", ctypes.c_size_t), ("fsync", ctypes.c_int),
                ("verify", ctypes.c_int), ("keep_last", ctypes.c_uint), ("keep_every", ctypes.c_uint64),
                ("rank", ctypes.c_uint32), ("world", ctypes.c_uint32), ("generation", ctypes.c_uint64),
                ("store", ctypes.c_void_p), ("shared_storage", ctypes.c_int), ("commit_timeout_ms", ctypes.c_int),
                ("max_blob_bytes", ctypes.c_uint64), ("file_mode", ctypes.c_uint),
                ("incarnation", ctypes.c_uint64)]


class WorkerParkOpts(ctypes.Structure):
    """elastic_worker_park_opts (include/elastic/worker.h)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("timeout_ms", ctypes.c_int)]


class CkptBlob(ctypes.Structure):
    """elastic_ckpt_blob (include/elastic/ckpt.h)."""
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("len", ctypes.c_size_t),
                ("flags", ctypes.c_uint)]


# C struct name -> its ctypes mirror (the layout test compares them with the compiler's view).
STRUCTS: Dict[str, Type[ctypes.Structure]] = {
    "elastic_store_server_opts": StoreServerOpts, "elastic_store_opts": StoreOpts, "elastic_rdzv_opts": RdzvOpts,
    "elastic_rdzv_result": RdzvResult, "elastic_rdzv_cause": RdzvCause, "elastic_worker_opts": WorkerOpts,
    "elastic_worker_info": WorkerInfoC, "elastic_worker_park_opts": WorkerParkOpts, "elastic_ckpt_opts": CkptOpts, "elastic_ckpt_blob": CkptBlob,
}

# Callbacks the library runs on its own threads (ctypes takes the GIL for them).
WORKER_ABORT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p)

_I, _V, _P, _S = ctypes.c_int, None, ctypes.c_void_p, ctypes.c_char_p
_SZ, _U64, _I64 = ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int64

# name: (restype, argtypes). Handles travel as c_void_p.
_SIGNATURES: Dict[str, Tuple[object, List[object]]] = {
    "elastic_version": (ctypes.c_uint, []),
    "elastic_version_string": (_S, []),
    "elastic_has_feature": (_I, [_S]),
    "elastic_strerror": (_S, [_I]),
    "elastic_err_name": (_S, [_I]),
    "elastic_last_error": (_S, []),
    "elastic_free": (_V, [_P]),
    "elastic_set_log_level": (_V, [_I]),
    # store server
    "elastic_store_server_opts_init": (_I, [ctypes.POINTER(StoreServerOpts), _SZ]),
    "elastic_store_server_start": (_I, [ctypes.POINTER(StoreServerOpts), c_void_pp]),
    "elastic_store_server_get_port": (_I, [_P, ctypes.POINTER(ctypes.c_int)]),
    "elastic_store_server_close": (_V, [_P]),
    # store client
    "elastic_store_opts_init": (_I, [ctypes.POINTER(StoreOpts), _SZ]),
    "elastic_store_connect": (_I, [_S, ctypes.POINTER(StoreOpts), c_void_pp]),
    "elastic_store_clone": (_I, [_P, _S, c_void_pp]),
    "elastic_store_close": (_V, [_P]),
    "elastic_store_set": (_I, [_P, _S, _P, _SZ]),
    "elastic_store_get": (_I, [_P, _S, _I, c_void_pp, c_size_p]),
    "elastic_store_try_get": (_I, [_P, _S, c_void_pp, c_size_p]),
    "elastic_store_add": (_I, [_P, _S, _I64, c_int64_p]),
    "elastic_store_compare_set": (_I, [_P, _S, _P, _SZ, _P, _SZ, c_void_pp, c_size_p]),
    "elastic_store_wait": (_I, [_P, ctypes.POINTER(_S), _SZ, _I]),
    "elastic_store_delete": (_I, [_P, _S]),
    "elastic_store_num_keys": (_I, [_P, c_int64_p]),
    "elastic_store_keys": (_I, [_P, _S, _SZ, c_char_ppp, c_size_p]),
    # rendezvous
    "elastic_rdzv_opts_init": (_I, [ctypes.POINTER(RdzvOpts), _SZ]),
    "elastic_rdzv_open": (_I, [ctypes.POINTER(RdzvOpts), c_void_pp]),
    "elastic_rdzv_next": (_I, [_P, ctypes.POINTER(RdzvResult)]),
    "elastic_rdzv_end_generation": (_I, [_P, ctypes.POINTER(RdzvCause)]),
    "elastic_rdzv_watch": (_I, [_P, _I, ctypes.POINTER(RdzvCause)]),
    "elastic_rdzv_first_failure": (_I, [_P, ctypes.POINTER(RdzvCause)]),
    "elastic_rdzv_finish": (_I, [_P]),
    "elastic_rdzv_leave": (_I, [_P]),
    "elastic_rdzv_end_job": (_I, [_P]),
    "elastic_rdzv_free": (_V, [_P]),
    # worker
    "elastic_worker_opts_init": (_I, [ctypes.POINTER(WorkerOpts), _SZ]),
    "elastic_worker_init": (_I, [ctypes.POINTER(WorkerOpts), c_void_pp]),
    "elastic_worker_get_info": (_I, [_P, ctypes.POINTER(WorkerInfoC)]),
    "elastic_worker_get_store": (_I, [_P, c_void_pp]),
    "elastic_worker_heartbeat": (_I, [_P, _U64]),
    "elastic_worker_report_step_time": (_I, [_P, _U64]),
    "elastic_worker_on_abort": (_I, [_P, WORKER_ABORT_FN, _P]),
    "elastic_worker_poll": (_I, [_P]),
    "elastic_worker_stop_notice": (_I, [_P, ctypes.POINTER(ctypes.c_int)]),
    "elastic_worker_notice_on_sigterm": (_I, [_P]),
    "elastic_worker_barrier": (_I, [_P, _I]),
    "elastic_worker_close": (_V, [_P]),
    "elastic_worker_park_opts_init": (_I, [ctypes.POINTER(WorkerParkOpts), _SZ]),
    "elastic_worker_park": (_I, [ctypes.POINTER(WorkerParkOpts), ctypes.POINTER(ctypes.c_int), c_void_pp]),
    "elastic_worker_report_phase": (_I, [_P, _S, _U64]),
    # checkpoint store
    "elastic_ckpt_opts_init": (_I, [ctypes.POINTER(CkptOpts), _SZ]),
    "elastic_ckpt_open": (_I, [_S, ctypes.POINTER(CkptOpts), c_void_pp]),
    "elastic_ckpt_close": (_V, [_P]),
    "elastic_ckpt_save": (_I, [_P, _U64, ctypes.POINTER(CkptBlob), _SZ]),
    "elastic_ckpt_save_async": (_I, [_P, _U64, ctypes.POINTER(CkptBlob), _SZ, _I]),
    "elastic_ckpt_async_wait": (_I, [_P, _I, c_uint64_p]),
    "elastic_ckpt_latest": (_I, [_P, c_uint64_p]),
    "elastic_ckpt_read": (_I, [_P, _U64, _S, c_void_pp, c_size_p]),
    "elastic_ckpt_read_into": (_I, [_P, _U64, _S, _P, _SZ, c_size_p]),
    "elastic_ckpt_blob_len": (_I, [_P, _U64, _S, c_size_p]),
    "elastic_ckpt_list_steps": (_I, [_P, ctypes.POINTER(c_uint64_p), c_size_p]),
    "elastic_ckpt_list_blobs": (_I, [_P, _U64, _I, c_char_ppp, c_size_p]),
    "elastic_ckpt_open_memory": (_I, [ctypes.POINTER(CkptOpts), c_void_pp]),
    "elastic_ckpt_restore_begin": (_I, [_P, _P, c_uint64_p, c_void_pp, ctypes.POINTER(_I)]),
    "elastic_ckpt_restore_end": (_V, [_P]),
}


def _installed_library() -> Optional[str]:
    """The library `make install` recorded next to the package, if any."""
    try:
        from . import _installed  # written by `make install`; absent in a source tree or a pip install
    except ImportError:
        return None
    return getattr(_installed, "LIBRARY", None)


def _candidates() -> List[str]:
    """Where to look, most explicit first: ELASTIC_LIBRARY (a file),
    ELASTIC_LIB_DIR (a directory), the library recorded at install time, the
    copy a wheel carries (elastic/_native/), then the system loader's search."""
    path = os.environ.get("ELASTIC_LIBRARY")
    if path:
        return [path]
    found = []
    lib_dir = os.environ.get("ELASTIC_LIB_DIR")
    if lib_dir:
        found.append(os.path.join(lib_dir, _SONAME))
    installed = _installed_library()
    if installed:
        found.append(installed)
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", _SONAME)
    if os.path.exists(bundled):  # the wheel's own copy (make wheel)
        found.append(bundled)
    found.append(ctypes.util.find_library("elastic") or _SONAME)
    return found


def _load() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as exc:
            errors.append("%s: %s" % (path, exc))
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise OSError("libelastic not found (set ELASTIC_LIBRARY or ELASTIC_LIB_DIR): " + "; ".join(errors))


lib = _load()


def take_bytes(ptr: ctypes.c_void_p, length: int) -> bytes:
    """Copies a library-owned buffer into bytes and frees it."""
    try:
        return ctypes.string_at(ptr, length) if length else b""
    finally:
        lib.elastic_free(ptr)


def take_strings(array: "ctypes._Pointer", count: int) -> List[str]:
    """Copies a one-allocation array of C strings into a list and frees it."""
    try:
        return [array[i].decode() for i in range(count)]
    finally:
        lib.elastic_free(ctypes.cast(array, ctypes.c_void_p))

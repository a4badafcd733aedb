"""Finds and loads libelastic, and declares the C signature of every function
the package calls, so ctypes converts arguments and results exactly (no
implicit int truncation of pointers or 64-bit values)."""

import ctypes
import ctypes.util
import os

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


class StoreOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("prefix", ctypes.c_char_p), ("token", ctypes.c_char_p),
                ("connect_timeout_ms", ctypes.c_int), ("timeout_ms", ctypes.c_int)]


class WorkerOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("store_connect_timeout_ms", ctypes.c_int),
                ("store_timeout_ms", ctypes.c_int), ("reconfigure_timeout_ms", ctypes.c_int),
                ("stack_dump_signal", ctypes.c_int)]


class WorkerInfoC(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("rank", ctypes.c_int), ("local_rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("local_world_size", ctypes.c_int), ("group_rank", ctypes.c_int), ("restart_count", ctypes.c_int),
                ("generation", ctypes.c_uint64), ("master_port", ctypes.c_int), ("attached", ctypes.c_int),
                ("run_id", ctypes.c_char * 128), ("master_addr", ctypes.c_char * 256)]


class CkptOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("compression", ctypes.c_int), ("zstd_level", ctypes.c_int),
                ("threads", ctypes.c_int), ("chunk_bytes", ctypes.c_size_t), ("fsync", ctypes.c_int),
                ("verify", ctypes.c_int), ("keep_last", ctypes.c_uint), ("keep_every", ctypes.c_uint64),
                ("rank", ctypes.c_uint32), ("world", ctypes.c_uint32), ("generation", ctypes.c_uint64),
                ("store", ctypes.c_void_p), ("shared_storage", ctypes.c_int), ("commit_timeout_ms", ctypes.c_int),
                ("max_blob_bytes", ctypes.c_uint64)]


class CkptBlob(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("len", ctypes.c_size_t),
                ("flags", ctypes.c_uint)]


_I, _V, _P, _S = ctypes.c_int, None, ctypes.c_void_p, ctypes.c_char_p
_SZ, _U64, _I64 = ctypes.c_size_t, ctypes.c_uint64, ctypes.c_int64

# name: (restype, argtypes). Handles travel as c_void_p.
_SIGNATURES = {
    "elastic_version": (ctypes.c_uint, []),
    "elastic_version_string": (_S, []),
    "elastic_has_feature": (_I, [_S]),
    "elastic_strerror": (_S, [_I]),
    "elastic_err_name": (_S, [_I]),
    "elastic_last_error": (_S, []),
    "elastic_free": (_V, [_P]),
    "elastic_set_log_level": (_V, [_I]),
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
    # worker
    "elastic_worker_opts_init": (_I, [ctypes.POINTER(WorkerOpts), _SZ]),
    "elastic_worker_init": (_I, [ctypes.POINTER(WorkerOpts), c_void_pp]),
    "elastic_worker_get_info": (_I, [_P, ctypes.POINTER(WorkerInfoC)]),
    "elastic_worker_get_store": (_I, [_P, c_void_pp]),
    "elastic_worker_heartbeat": (_I, [_P, _U64]),
    "elastic_worker_report_step_time": (_I, [_P, _U64]),
    "elastic_worker_poll": (_I, [_P]),
    "elastic_worker_barrier": (_I, [_P, _I]),
    "elastic_worker_close": (_V, [_P]),
    # checkpoint store
    "elastic_ckpt_opts_init": (_I, [ctypes.POINTER(CkptOpts), _SZ]),
    "elastic_ckpt_open": (_I, [_S, ctypes.POINTER(CkptOpts), c_void_pp]),
    "elastic_ckpt_close": (_V, [_P]),
    "elastic_ckpt_save": (_I, [_P, _U64, ctypes.POINTER(CkptBlob), _SZ]),
    "elastic_ckpt_latest": (_I, [_P, c_uint64_p]),
    "elastic_ckpt_read": (_I, [_P, _U64, _S, c_void_pp, c_size_p]),
    "elastic_ckpt_list_steps": (_I, [_P, ctypes.POINTER(c_uint64_p), c_size_p]),
    "elastic_ckpt_list_blobs": (_I, [_P, _U64, _I, c_char_ppp, c_size_p]),
}


def _candidates():
    """Where to look, most explicit first: ELASTIC_LIBRARY (a file),
    ELASTIC_LIB_DIR (a directory), then the system loader."""
    path = os.environ.get("ELASTIC_LIBRARY")
    if path:
        return [path]
    found = []
    lib_dir = os.environ.get("ELASTIC_LIB_DIR")
    if lib_dir:
        found.append(os.path.join(lib_dir, _SONAME))
    found.append(ctypes.util.find_library("elastic") or _SONAME)
    return found


def _load():
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


def take_bytes(ptr, length):
    """Copies a library-owned buffer into bytes and frees it."""
    try:
        return ctypes.string_at(ptr, length) if length else b""
    finally:
        lib.elastic_free(ptr)


def take_strings(array, count):
    """Copies a one-allocation array of C strings into a list and frees it."""
    try:
        return [array[i].decode() for i in range(count)]
    finally:
        lib.elastic_free(ctypes.cast(array, ctypes.c_void_p))

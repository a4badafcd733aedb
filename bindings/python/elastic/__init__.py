"""libelastic from Python: a thin ctypes wrapper over the C ABI (elastic.h).

The library is found through ELASTIC_LIBRARY (a file), ELASTIC_LIB_DIR (a
directory holding libelastic.so.1) or the system loader. Every failed call
raises ElasticError carrying the ELASTIC_E* code, its name and the detail."""

from ._lib import TIMEOUT_DEFAULT, TIMEOUT_NO_LIMIT, lib as _lib
from . import errors
from .ckpt import ANY_RANK, REPLICATED, Checkpoint
from .errors import ElasticError
from .store import Store
from .worker import Worker, WorkerInfo

__all__ = ["ANY_RANK", "REPLICATED", "TIMEOUT_DEFAULT", "TIMEOUT_NO_LIMIT", "Checkpoint", "ElasticError", "Store",
           "Worker", "WorkerInfo", "errors",
           "version", "version_string", "has_feature"]


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = _lib.elastic_version()
    return (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF


def version_string():
    return _lib.elastic_version_string().decode()


def has_feature(name):
    """True when the optional feature ("store", "zstd", "nccl", ...) is available."""
    return bool(_lib.elastic_has_feature(name.encode()))

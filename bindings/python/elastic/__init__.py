"""libelastic from Python: a thin ctypes wrapper over the C ABI (elastic.h).

The library is found through ELASTIC_LIBRARY (a file), ELASTIC_LIB_DIR (a
directory holding libelastic.so.1), the path `make install` recorded, or the
system loader. Every failed call raises ElasticError carrying the ELASTIC_E*
code, its name and the detail. `elastic.torch` (imported on its own, it needs
PyTorch) runs torch.distributed jobs that recover in place."""

from typing import Tuple

from ._lib import TIMEOUT_DEFAULT, TIMEOUT_NO_LIMIT, lib as _lib
from . import errors
from .ckpt import ANY_RANK, REPLICATED, Checkpoint
from .errors import ElasticError
from .rdzv import Cause, Generation, Rendezvous
from .store import Store, StoreServer
from .worker import Worker, WorkerInfo

__all__ = ["ANY_RANK", "REPLICATED", "TIMEOUT_DEFAULT", "TIMEOUT_NO_LIMIT", "Cause", "Checkpoint", "ElasticError",
           "Generation", "Rendezvous", "Store", "StoreServer", "Worker", "WorkerInfo", "errors", "version",
           "version_string", "has_feature", "library_path"]


def version() -> Tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    v = _lib.elastic_version()
    return (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF


def version_string() -> str:
    """The loaded library's version as "major.minor.patch"."""
    return _lib.elastic_version_string().decode()


def has_feature(name: str) -> bool:
    """True when the optional feature ("store", "zstd", "agent", "nccl", ...) is available."""
    return bool(_lib.elastic_has_feature(name.encode()))


def library_path() -> str:
    """The file the package loaded libelastic from (as the loader reports it)."""
    return _lib._name

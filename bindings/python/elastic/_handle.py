"""The life cycle every wrapper class shares: one C handle, freed once by
close(), by leaving a `with` block or by garbage collection; calls on a closed
object raise ElasticError(ECLOSED) instead of passing NULL to the library."""

import ctypes

from .errors import CODES, ElasticError


class Handle:
    _kind = "handle"

    def _adopt(self, handle):
        self._handle = ctypes.c_void_p(handle.value if isinstance(handle, ctypes.c_void_p) else handle)

    def _h(self):
        if not getattr(self, "_handle", None):
            raise ElasticError(CODES["ECLOSED"], "the %s is closed" % self._kind)
        return self._handle

    def _free(self, handle):
        raise NotImplementedError

    def close(self):
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = ctypes.c_void_p()
            self._free(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

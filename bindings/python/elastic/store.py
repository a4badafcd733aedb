"""The job's key-value store client (include/elastic/store.h): values are
bytes, keys str; every call raises ElasticError on failure."""

import ctypes

from ._buffers import as_buffer, encode_key
from ._lib import TIMEOUT_DEFAULT, StoreOpts, lib, take_bytes, take_strings
from ._handle import Handle
from .errors import CODES, check


class Store(Handle):
    """A connection to a store server. Thread-safe like the C handle; use it
    as a context manager or call close()."""

    _kind = "store handle"

    def __init__(self, handle, owned=True):
        self._owned = owned
        self._adopt(handle)

    @classmethod
    def connect(cls, endpoint, prefix=None, token=None, connect_timeout_ms=None, timeout_ms=None):
        """Connects to "host:port". Unset options keep the library's defaults."""
        opts = StoreOpts()
        check(lib.elastic_store_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "store options")
        keep = []
        if prefix is not None:
            keep.append(encode_key(prefix))
            opts.prefix = keep[-1]
        if token is not None:
            keep.append(token.encode() if isinstance(token, str) else bytes(token))
            opts.token = keep[-1]
        if connect_timeout_ms is not None:
            opts.connect_timeout_ms = connect_timeout_ms
        if timeout_ms is not None:
            opts.timeout_ms = timeout_ms
        handle = ctypes.c_void_p()
        check(lib.elastic_store_connect(endpoint.encode(), ctypes.byref(opts), ctypes.byref(handle)),
              "connect " + endpoint)
        return cls(handle)

    def clone(self, prefix):
        """A separate handle whose keys live under this one's prefix + prefix."""
        handle = ctypes.c_void_p()
        check(lib.elastic_store_clone(self._h(), encode_key(prefix), ctypes.byref(handle)), "clone")
        return Store(handle)

    def _free(self, handle):
        """close() fails pending calls with ECLOSED and frees the handle; a
        store owned by a Worker is only forgotten (the worker frees it)."""
        if self._owned:
            lib.elastic_store_close(handle)

    def set(self, key, value):
        ptr, length, _keep = as_buffer(value)
        check(lib.elastic_store_set(self._h(), encode_key(key), ptr, length), "set " + str(key))

    def get(self, key, timeout_ms=TIMEOUT_DEFAULT):
        """Waits up to timeout_ms (default: the handle's timeout_ms; < 0: no limit; 0: no wait) for the key;
        ETIMEDOUT if it never comes."""
        value, length = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.elastic_store_get(self._h(), encode_key(key), timeout_ms, ctypes.byref(value), ctypes.byref(length)),
              "get " + str(key))
        return take_bytes(value, length.value)

    def try_get(self, key, default=None):
        """The value, or `default` when the key is absent."""
        value, length = ctypes.c_void_p(), ctypes.c_size_t()
        rc = lib.elastic_store_try_get(self._h(), encode_key(key), ctypes.byref(value), ctypes.byref(length))
        if rc == CODES["ENOTFOUND"]:
            return default
        check(rc, "try_get " + str(key))
        return take_bytes(value, length.value)

    def add(self, key, delta=1):
        """Atomically adds delta to the decimal integer at key (absent: 0); returns the new value."""
        result = ctypes.c_int64()
        check(lib.elastic_store_add(self._h(), encode_key(key), delta, ctypes.byref(result)), "add " + str(key))
        return result.value

    def compare_set(self, key, expected, desired):
        """Sets key to desired if it holds expected (None: absent). Returns the
        value now stored (None when absent): success is "result == desired"."""
        if expected is None:
            eptr, elen, _ekeep = ctypes.c_void_p(None), 0, None
        else:
            eptr, elen, _ekeep = as_buffer(expected)
        dptr, dlen, _dkeep = as_buffer(desired)
        current, clen = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.elastic_store_compare_set(self._h(), encode_key(key), eptr, elen, dptr, dlen,
                                            ctypes.byref(current), ctypes.byref(clen)), "compare_set " + str(key))
        if not current:
            return None
        return take_bytes(current, clen.value)

    def wait(self, keys, timeout_ms=TIMEOUT_DEFAULT):
        """Waits until every key exists."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        encoded = [encode_key(k) for k in keys]
        array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        check(lib.elastic_store_wait(self._h(), array, len(encoded), timeout_ms), "wait")

    def delete(self, key):
        """Deletes the key; returns False when it was absent."""
        rc = lib.elastic_store_delete(self._h(), encode_key(key))
        if rc == CODES["ENOTFOUND"]:
            return False
        check(rc, "delete " + str(key))
        return True

    def num_keys(self):
        count = ctypes.c_int64()
        check(lib.elastic_store_num_keys(self._h(), ctypes.byref(count)), "num_keys")
        return count.value

    def keys(self, prefix="", max_keys=1 << 20):
        """Keys under this handle's prefix + prefix, relative to the handle's prefix."""
        array, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
        check(lib.elastic_store_keys(self._h(), encode_key(prefix), max_keys, ctypes.byref(array),
                                     ctypes.byref(count)), "keys")
        if not array:
            return []
        return take_strings(array, count.value)

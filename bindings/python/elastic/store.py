"""The job's key-value store (include/elastic/store.h): the client (values
are bytes, keys str) and the server; every call raises ElasticError on failure."""

import ctypes
from typing import Iterable, List, Optional, Union

from ._buffers import as_buffer, encode_key
from ._lib import TIMEOUT_DEFAULT, StoreOpts, StoreServerOpts, lib, take_bytes, take_strings
from ._handle import Handle
from .errors import CODES, check


Bytes = Union[bytes, bytearray, memoryview, str]


class StoreServer(Handle):
    """A store server on the library's own thread, listening once the
    constructor returns. Options are the fields of elastic_store_server_opts
    (max_key_bytes, max_value_bytes, max_connections, max_connection_buffer,
    max_total_bytes, handshake_timeout_ms, idle_timeout_ms, max_pending_waits).
    close() (or leaving a `with` block) stops it; its clients' pending
    calls then fail with ECONNECT."""

    _kind = "store server"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, token: Optional[str] = None, **options: int):
        opts = StoreServerOpts()
        check(lib.elastic_store_server_opts_init(ctypes.byref(opts), ctypes.sizeof(opts)), "store server options")
        known = {name for name, _ in StoreServerOpts._fields_} - {"struct_size", "host", "port", "token"}
        for name, value in options.items():
            if name not in known:
                raise TypeError("unknown store server option %r" % name)
            setattr(opts, name, value)
        self._host = host
        keep = [host.encode()]
        opts.host = keep[0]
        opts.port = port
        if token is not None:
            keep.append(token.encode())
            opts.token = keep[1]
        handle = ctypes.c_void_p()
        check(lib.elastic_store_server_start(ctypes.byref(opts), ctypes.byref(handle)),
              "store server on %s:%d" % (host, port))
        self._adopt(handle)

    @property
    def port(self) -> int:
        """The TCP port it listens on (the chosen one when port was 0)."""
        port = ctypes.c_int()
        check(lib.elastic_store_server_get_port(self._h(), ctypes.byref(port)), "store server port")
        return port.value

    @property
    def endpoint(self) -> str:
        """"host:port" for Store.connect ("[v6]:port" for an IPv6 host)."""
        host = "[%s]" % self._host if ":" in self._host else self._host
        return "%s:%d" % (host, self.port)

    def _free(self, handle: ctypes.c_void_p) -> None:
        lib.elastic_store_server_close(handle)


class Store(Handle):
    """A connection to a store server. Thread-safe like the C handle; use it
    as a context manager or call close()."""

    _kind = "store handle"

    def __init__(self, handle: ctypes.c_void_p, owned: bool = True):
        self._owned = owned
        self._adopt(handle)

    @classmethod
    def connect(cls, endpoint: str, prefix: Optional[str] = None, token: Optional[str] = None,
                connect_timeout_ms: Optional[int] = None, timeout_ms: Optional[int] = None) -> "Store":
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

    def clone(self, prefix: str) -> "Store":
        """A separate handle whose keys live under this one's prefix + prefix."""
        handle = ctypes.c_void_p()
        check(lib.elastic_store_clone(self._h(), encode_key(prefix), ctypes.byref(handle)), "clone")
        return Store(handle)

    def _free(self, handle: ctypes.c_void_p) -> None:
        """close() fails pending calls with ECLOSED and frees the handle; a
        store owned by a Worker is only forgotten (the worker frees it)."""
        if self._owned:
            lib.elastic_store_close(handle)

    def set(self, key: str, value: Bytes) -> None:
        """Sets key to value (bytes-like, or str as UTF-8)."""
        ptr, length, _keep = as_buffer(value)
        check(lib.elastic_store_set(self._h(), encode_key(key), ptr, length), "set " + str(key))

    def get(self, key: str, timeout_ms: int = TIMEOUT_DEFAULT) -> bytes:
        """Waits up to timeout_ms (default: the handle's timeout_ms; < 0: no limit; 0: no wait) for the key;
        ETIMEDOUT if it never comes."""
        value, length = ctypes.c_void_p(), ctypes.c_size_t()
        check(lib.elastic_store_get(self._h(), encode_key(key), timeout_ms, ctypes.byref(value), ctypes.byref(length)),
              "get " + str(key))
        return take_bytes(value, length.value)

    def try_get(self, key: str, default: Optional[bytes] = None) -> Optional[bytes]:
        """The value, or `default` when the key is absent."""
        value, length = ctypes.c_void_p(), ctypes.c_size_t()
        rc = lib.elastic_store_try_get(self._h(), encode_key(key), ctypes.byref(value), ctypes.byref(length))
        if rc == CODES["ENOTFOUND"]:
            return default
        check(rc, "try_get " + str(key))
        return take_bytes(value, length.value)

    def add(self, key: str, delta: int = 1) -> int:
        """Atomically adds delta to the decimal integer at key (absent: 0); returns the new value."""
        result = ctypes.c_int64()
        check(lib.elastic_store_add(self._h(), encode_key(key), delta, ctypes.byref(result)), "add " + str(key))
        return result.value

    def compare_set(self, key: str, expected: Optional[Bytes], desired: Bytes) -> Optional[bytes]:
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

    def wait(self, keys: Union[str, Iterable[str]], timeout_ms: int = TIMEOUT_DEFAULT) -> None:
        """Waits until every key exists."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        encoded = [encode_key(k) for k in keys]
        array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        check(lib.elastic_store_wait(self._h(), array, len(encoded), timeout_ms), "wait")

    def delete(self, key: str) -> bool:
        """Deletes the key; returns False when it was absent."""
        rc = lib.elastic_store_delete(self._h(), encode_key(key))
        if rc == CODES["ENOTFOUND"]:
            return False
        check(rc, "delete " + str(key))
        return True

    def num_keys(self) -> int:
        """Number of keys under this handle's prefix."""
        count = ctypes.c_int64()
        check(lib.elastic_store_num_keys(self._h(), ctypes.byref(count)), "num_keys")
        return count.value

    def keys(self, prefix: str = "", max_keys: int = 1 << 20) -> List[str]:
        """Keys under this handle's prefix + prefix, relative to the handle's prefix."""
        array, count = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_size_t()
        check(lib.elastic_store_keys(self._h(), encode_key(prefix), max_keys, ctypes.byref(array),
                                     ctypes.byref(count)), "keys")
        if not array:
            return []
        return take_strings(array, count.value)

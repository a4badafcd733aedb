"""Turns Python byte-like values into (pointer, length) pairs for the C calls
without copying when the object allows it (bytes, writable buffers)."""

import ctypes


def as_buffer(value):
    """Returns (c_void_p, length, keepalive); keep `keepalive` referenced until
    the call returns. Accepts bytes, bytearray, memoryview (any contiguous
    buffer) and str (UTF-8)."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p), len(value), value
    view = memoryview(value)
    if not view.contiguous:
        data = view.tobytes()
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data), data
    view = view.cast("B")
    if view.nbytes == 0:
        return ctypes.c_void_p(None), 0, None
    if view.readonly:
        data = view.tobytes()
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data), data
    array = (ctypes.c_char * view.nbytes).from_buffer(view)
    return ctypes.cast(array, ctypes.c_void_p), view.nbytes, (array, view)


def encode_key(key):
    """Keys are NUL-terminated C strings: str (UTF-8) or bytes, no NUL inside."""
    data = key.encode() if isinstance(key, str) else bytes(key)
    if b"\0" in data:
        raise ValueError("a key may not contain a NUL byte")
    return data

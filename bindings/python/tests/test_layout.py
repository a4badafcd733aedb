"""The ctypes mirrors of the C structs (elastic/_lib.py) against the C layout
itself, as test/abi/layout prints it (offsetof and sizeof from elastic.h): a
field added, moved or resized on one side only fails here, not in a trainer."""

import ctypes
import os
import subprocess

import pytest

from elastic._lib import STRUCTS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MIRRORS = STRUCTS  # every struct the package mirrors, by its C name


def c_layout():
    """{struct: {"sizeof": n, field: (offset, size)}} from the layout program."""
    program = os.path.join(os.environ.get("ELASTIC_ABI_DIR", os.path.join(ROOT, "build", "release", "test", "abi")),
                           "layout")
    if not os.access(program, os.X_OK):
        pytest.fail("%s is not built (make test builds it)" % program)
    layout = {}
    for line in subprocess.run([program], check=True, capture_output=True, text=True, timeout=60).stdout.splitlines():
        struct, field, offset, size = line.split()
        entry = layout.setdefault(struct, {})
        if field == "sizeof":
            entry["sizeof"] = int(size)
        else:
            entry[field] = (int(offset), int(size))
    return layout


@pytest.mark.parametrize("struct", sorted(MIRRORS))
def test_ctypes_mirror_matches_c_layout(struct):
    layout = c_layout()
    assert struct in layout, "test/abi/layout.c does not print %s" % struct
    c_fields = {name: where for name, where in layout[struct].items() if name != "sizeof"}
    mirror = MIRRORS[struct]
    py_fields = {name: (getattr(mirror, name).offset, getattr(mirror, name).size) for name, _ in mirror._fields_}
    assert py_fields == c_fields
    assert ctypes.sizeof(mirror) == layout[struct]["sizeof"]


def test_structs_with_a_size_start_with_it():
    for struct, mirror in MIRRORS.items():
        if struct != "elastic_ckpt_blob":  # passed in arrays: frozen, no struct_size (docs/ABI.md)
            assert mirror._fields_[0] == ("struct_size", ctypes.c_size_t), struct

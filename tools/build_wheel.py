#!/usr/bin/env python3
"""Builds the self-contained wheel of libelastic (make wheel) with the
standard library alone (zipfile, hashlib): no PyPI, no setuptools.

Inside: the `elastic` package; the shared library as elastic/_native/<SONAME>,
which elastic._lib finds next to itself (no make install, no ELASTIC_LIB_DIR);
elasticrun and elasticctl as the wheel's scripts (pip puts them in the
environment's bin/). The programs link libelastic statically; what they and the
library still need from Debian at run time is named in the metadata
(Requires-External), the version comes from include/elastic/common.h, the
license is Apache-2.0.

    tools/build_wheel.py --lib lib/libelastic.so.1.0.0 --bin bin --out dist"""

import argparse
import base64
import hashlib
import os
import re
import stat
import sys
import zipfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NAME = "libelastic"
PROGRAMS = ("elasticrun", "elasticctl")
# The Debian 12 packages of the libraries the shared library and the programs
# load (deps/debian.txt names their -dev packages; libcurl is loaded only by
# the etcd backend, on first use).
RUNTIME_DEBIAN = ("libzstd1", "libssl3", "libxxhash0", "libuv1", "libjson-c5", "libcurl4 (for --rdzv-backend=etcd-v3)")
# One fixed time for every entry: the same inputs make the same wheel.
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def header_version(path):
    text = open(path).read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(r"^#define ELASTIC_VERSION_%s (\d+)$" % part, text, re.M)
        if match is None:
            raise SystemExit("build_wheel: no ELASTIC_VERSION_%s in %s" % (part, path))
        parts.append(match.group(1))
    return ".".join(parts)


def soname(lib_path):
    """libelastic.so.<major> from libelastic.so.<major>.<minor>.<patch>."""
    match = re.match(r"^(libelastic\.so\.\d+)(\.\d+)*$", os.path.basename(lib_path))
    if match is None:
        raise SystemExit("build_wheel: %s is not a libelastic.so.N... file" % lib_path)
    return match.group(1)


def metadata(version):
    readme = open(os.path.join(ROOT, "bindings", "python", "README.md")).read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + version,
        "Summary: Keep distributed training running through failures: elasticrun, elasticctl and the Python bindings",
        "License: Apache-2.0",
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: Python :: 3",
        "Requires-Python: >=3.8",
    ]
    lines += ["Requires-External: " + package for package in RUNTIME_DEBIAN]
    lines += ["Provides-Extra: torch", 'Requires-Dist: torch>=1.13; extra == "torch"',
              "Description-Content-Type: text/markdown", "", readme]
    return "\n".join(lines).encode()


def wheel_file(tag):
    return ("Wheel-Version: 1.0\nGenerator: libelastic tools/build_wheel.py\nRoot-Is-Purelib: false\n"
            "Tag: %s\n" % tag).encode()


def platform_tag():
    machine = os.uname().machine
    return "linux_" + re.sub(r"[^A-Za-z0-9]", "_", machine)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build(lib_path, bin_dir, out_dir, version=None):
    version = version or header_version(os.path.join(ROOT, "include", "elastic", "common.h"))
    tag = "py3-none-" + platform_tag()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    data_dir = "%s-%s.data" % (NAME, version)
    entries = []  # (name in the wheel, bytes, executable)
    package = os.path.join(ROOT, "bindings", "python", "elastic")
    for name in sorted(os.listdir(package)):
        if name.endswith(".py") or name == "py.typed":
            if name == "_installed.py":  # make install's record of its prefix: not in a wheel
                continue
            entries.append(("elastic/" + name, open(os.path.join(package, name), "rb").read(), False))
    entries.append(("elastic/_native/" + soname(lib_path), open(lib_path, "rb").read(), True))
    for program in PROGRAMS:
        path = os.path.join(bin_dir, program)
        if not os.access(path, os.X_OK):
            raise SystemExit("build_wheel: %s is missing (run make first)" % path)
        entries.append(("%s/scripts/%s" % (data_dir, program), open(path, "rb").read(), True))
    entries.append((dist_info + "/METADATA", metadata(version), False))
    entries.append((dist_info + "/WHEEL", wheel_file(tag), False))
    entries.append((dist_info + "/LICENSE", open(os.path.join(ROOT, "LICENSE"), "rb").read(), False))
    entries.append((dist_info + "/top_level.txt", b"elastic\n", False))
    record = [record_line(name, data) for name, data, _ in entries] + [dist_info + "/RECORD,,"]
    entries.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode(), False))

    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "%s-%s-%s.whl" % (NAME, version, tag))
    partial = target + ".part"
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data, executable in entries:
            info = zipfile.ZipInfo(name, FIXED_TIME)
            mode = 0o755 if executable else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    os.replace(partial, target)
    return target


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True, help="the shared library (lib/libelastic.so.X.Y.Z)")
    parser.add_argument("--bin", required=True, help="the directory holding elasticrun and elasticctl")
    parser.add_argument("--out", required=True, help="where the wheel goes (dist)")
    args = parser.parse_args(argv)
    print(build(os.path.realpath(args.lib), args.bin, args.out))


if __name__ == "__main__":
    main(sys.argv[1:])

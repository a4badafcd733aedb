"""The wheel (make wheel, tools/build_wheel.py) as a user gets it: built from
this build's library and programs, installed with `pip install --no-index`
into a fresh venv, and elasticrun from that venv runs a Python trainer on two
ranks with nothing else on the paths (no PYTHONPATH, no ELASTIC_LIB_DIR, no
LD_LIBRARY_PATH, no make install). Its metadata names the license, the
header's version and the Debian libraries it needs at run time."""

import glob
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from elastic._lib import _SONAME as SONAME

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import build_wheel  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"  # its venv module and bundled pip work offline


def header_version():
    return build_wheel.header_version(os.path.join(ROOT, "include", "elastic", "common.h"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    lib_dir = os.environ["ELASTIC_LIB_DIR"]
    library = os.path.realpath(os.path.join(lib_dir, SONAME))
    bin_dir = os.environ.get("ELASTIC_BIN_DIR", os.path.join(ROOT, "bin"))
    return build_wheel.build(library, bin_dir, str(tmp_path_factory.mktemp("dist")))


def test_the_wheel_carries_the_library_the_programs_and_true_metadata(wheel):
    version = header_version()
    assert os.path.basename(wheel) == "libelastic-%s-py3-none-linux_%s.whl" % (version, os.uname().machine)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read("libelastic-%s.dist-info/METADATA" % version).decode()
        record = z.read("libelastic-%s.dist-info/RECORD" % version).decode()
        assert z.getinfo("libelastic-%s.data/scripts/elasticrun" % version).external_attr >> 16 & 0o111
    assert {"elastic/_native/" + SONAME, "elastic/torch.py", "libelastic-%s.data/scripts/elasticrun" % version,
            "libelastic-%s.data/scripts/elasticctl" % version} <= names
    assert "\nVersion: %s\n" % version in meta and "\nLicense: Apache-2.0\n" in meta
    for package in ("libzstd1", "libssl3", "libuv1", "libjson-c5", "libxxhash0"):
        assert "\nRequires-External: " + package in meta, package
    assert len(record.splitlines()) == len(names)  # every file hashed, RECORD itself listed
    pyproject = open(os.path.join(ROOT, "bindings", "python", "pyproject.toml")).read()
    assert re.search(r'^version = "%s"' % re.escape(version), pyproject, re.M)
    assert 'license = {text = "Apache-2.0"}' in pyproject
    for doc in ("bindings/python/README.md", "bindings/python/pyproject.toml"):
        assert "libelastic.so.0" not in open(os.path.join(ROOT, doc)).read(), doc


def test_pip_install_no_index_in_a_fresh_venv_then_elasticrun_runs_a_trainer(wheel, tmp_path):
    if shutil.which("true") is None or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(SYSTEM_PYTHON + " is not installed")
    venv = tmp_path / "venv"
    made = subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
        pytest.skip("python3-venv is not installed: " + made.stdout + made.stderr)
    assert made.returncode == 0, made.stdout + made.stderr
    bare = {"PATH": "%s:/usr/bin:/bin" % (venv / "bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--quiet", wheel],
                         env=bare, capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert os.access(venv / "bin" / "elasticrun", os.X_OK) and os.access(venv / "bin" / "elasticctl", os.X_OK)
    probe = subprocess.run(["python3", "-c", "import elastic; print(elastic.library_path()); "
                            "print(elastic.version_string())"], env=bare, cwd=str(tmp_path),
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    where, version = probe.stdout.split()
    assert where.startswith(str(venv)) and where.endswith("/elastic/_native/" + SONAME), where
    assert version == header_version()
    # the trainer copied away from the source tree, so its fallback import path is not there
    trainer = tmp_path / "trainer.py"
    shutil.copy(os.path.join(ROOT, "examples", "python", "trainer.py"), trainer)
    run = subprocess.run(["elasticrun", "--standalone", "--nproc-per-node=2", str(trainer), "--steps", "6",
                          "--dir", str(tmp_path / "ckpt")], env=bare, cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "job succeeded" in run.stderr, run.stderr
    for rank in (0, 1):
        assert re.search(r"rank %d/2 done at step 6" % rank, run.stdout), run.stdout
    assert glob.glob(str(tmp_path / "ckpt" / "step-*")), os.listdir(tmp_path / "ckpt")

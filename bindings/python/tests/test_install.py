"""The package as users get it: `pip install bindings/python` offline into a
prefix, and `make install` into a prefix, each imported from there; after
make install no environment variable is needed to find the library, and
ELASTIC_LIB_DIR still overrides the recorded path."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from elastic._lib import _SONAME as SONAME  # the file the package loads: libelastic.so.<major>

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIB_VARS = ("ELASTIC_LIB_DIR", "ELASTIC_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")
PROBE = "import elastic, sys; print(elastic.__file__); print(elastic.library_path()); print(elastic.version_string())"


def bare_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LIB_VARS}
    env.update(extra)
    return env


def probe(env, cwd):
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_pip_installs_the_package_offline_and_it_imports_from_the_prefix(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("%s has no pip (install python3-pip)" % sys.executable)
    source = tmp_path / "src"  # a copy: pip builds in the tree it is given
    shutil.copytree(os.path.join(ROOT, "bindings", "python"), source,
                    ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    prefix = tmp_path / "prefix"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                          "--disable-pip-version-check", "--prefix", str(prefix), str(source)],
                         env=bare_env(PIP_NO_CACHE_DIR="1"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    # Debian's pip puts a --prefix install under local/lib/python3.X/dist-packages
    inits = glob.glob(str(prefix / "**" / "*-packages" / "elastic" / "__init__.py"), recursive=True)
    assert len(inits) == 1, os.listdir(prefix)
    site = os.path.dirname(os.path.dirname(inits[0]))
    assert os.path.exists(os.path.join(site, "elastic", "torch.py"))
    assert os.path.exists(os.path.join(site, "elastic", "py.typed"))
    lib_dir = os.environ.get("ELASTIC_LIB_DIR", os.path.join(ROOT, "lib"))
    where, library, version = probe(bare_env(PYTHONPATH=site, ELASTIC_LIB_DIR=lib_dir), cwd=str(tmp_path))
    assert where == inits[0]
    assert library == os.path.join(lib_dir, SONAME)
    assert version.count(".") == 2


def test_make_install_finds_its_library_without_any_variable(tmp_path):
    if shutil.which("make") is None or not os.path.exists(os.path.join(ROOT, "lib", SONAME)):
        pytest.skip("needs make and the release build of this tree")
    prefix = tmp_path / "usr"
    out = subprocess.run(["make", "-s", "-C", ROOT, "install", "PREFIX=%s" % prefix],
                         env=bare_env(MAKEFLAGS=""), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    site = prefix / "lib" / "python3" / "dist-packages"
    assert (site / "elastic" / "_installed.py").exists()
    where, library, _ = probe(bare_env(PYTHONPATH=str(site)), cwd=str(tmp_path))
    assert where == str(site / "elastic" / "__init__.py")
    assert library == str(prefix / "lib" / SONAME)
    # the variable still wins over the recorded path
    _, library, _ = probe(bare_env(PYTHONPATH=str(site), ELASTIC_LIB_DIR=os.path.join(ROOT, "lib")),
                          cwd=str(tmp_path))
    assert library == os.path.join(ROOT, "lib", SONAME)
    # and the store works from the installed copy
    code = "import elastic\nwith elastic.StoreServer() as s, elastic.Store.connect(s.endpoint) as c:\n" \
           "    c.set('k', b'v'); print(c.get('k'))"
    run = subprocess.run([sys.executable, "-c", code], env=bare_env(PYTHONPATH=str(site)), cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "b'v'", run.stderr

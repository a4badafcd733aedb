"""Fixtures for the binding tests: the package and library of this source tree
(ELASTIC_LIB_DIR / ELASTIC_BIN_DIR as make test sets them, else the release
build), a real store server started with `elasticctl store serve --port 0`."""

import os
import re
import select
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
os.environ.setdefault("ELASTIC_LIB_DIR", os.path.join(ROOT, "lib"))
BIN_DIR = os.environ.get("ELASTIC_BIN_DIR", os.path.join(ROOT, "bin"))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))


@pytest.fixture
def bin_dir():
    return BIN_DIR


def _serve(extra_args):
    server = subprocess.Popen([os.path.join(BIN_DIR, "elasticctl"), "store", "serve", "--port", "0"] + extra_args,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 60)  # the server prints once it listens
        line = server.stdout.readline() if ready else ""
        match = re.search(r"listening on (\S+:\d+)", line)
        if match is None:
            server.kill()
            pytest.fail("elasticctl store serve printed %r; stderr: %s" % (line, server.stderr.read()))
        yield match.group(1)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
        server.stderr.close()


@pytest.fixture
def store_endpoint():
    """host:port of a fresh store server, stopped after the test."""
    yield from _serve([])


@pytest.fixture
def token_file(tmp_path):
    """A private file holding a long store token (as an agent hands it to workers)."""
    path = tmp_path / "store_token"
    path.write_text("t" * 3000 + "\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def token_store_endpoint(token_file):
    """host:port of a store server that requires the token in token_file."""
    yield from _serve(["--token-file", token_file])

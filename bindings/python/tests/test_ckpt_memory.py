"""The memory tier through the bindings: Checkpoint.memory_tier() saves into
the node's shared memory (a tier the agent made: here the test makes one as
the agent would), restore() picks the newer tier (memory on a tie) and
reports what it read."""

import os

import pytest

from elastic import Checkpoint
from elastic.ckpt import restore


def make_tier(root, limit=64 << 20, steps=2):
    # The marker's documented format (docs/CHECKPOINT.md, "Memory tier").
    os.makedirs(root / "own")
    os.makedirs(root / "peer")
    (root / ".elastic-memory-tier").write_text("elastic-memory-tier 1\nlimit %d\nsteps %d\n" % (limit, steps))
    return root / "own"


@pytest.fixture
def tier(tmp_path, monkeypatch):
    own = make_tier(tmp_path / "tier")
    monkeypatch.setenv("ELASTIC_MEMORY_CKPT_DIR", str(own))
    monkeypatch.delenv("ELASTIC_RESTORE_STEP", raising=False)
    monkeypatch.delenv("ELASTIC_RESTORE_SOURCE", raising=False)
    return own


def test_memory_tier_saves_and_reads_like_a_directory(tier):
    with Checkpoint.memory_tier() as mem:
        assert mem.memory
        mem.save(3, {"weights": b"w" * 100000})
        assert mem.latest() == 3
        assert mem.read(3, "weights") == b"w" * 100000
    # Another process (the crashed worker's replacement) finds it.
    with Checkpoint.memory_tier() as again:
        assert again.latest() == 3


def test_restore_takes_the_newer_tier_memory_on_a_tie(tier, tmp_path):
    with Checkpoint.memory_tier() as mem, Checkpoint(tmp_path / "disk", fsync=1) as disk:
        assert restore(mem, disk) is None
        disk.save(5, {"x": b"disk"})
        mem.save(5, {"x": b"mem"})
        with restore(mem, disk) as r:
            assert (r.step, r.source) == (5, "local")
            assert r.checkpoint.read(r.step, "x") == b"mem"
        disk.save(7, {"x": b"newer"})
        with restore(mem, disk) as r:
            assert (r.step, r.source) == (7, "disk")
            assert r.checkpoint is disk


def test_the_memory_limit_refuses_a_save_with_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ELASTIC_MEMORY_CKPT_DIR", str(make_tier(tmp_path / "small", limit=1 << 20)))
    from elastic import ElasticError, errors
    with Checkpoint.memory_tier() as mem:
        with pytest.raises(ElasticError) as info:
            mem.save(1, {"big": b"x" * (2 << 20)})
        assert info.value.code == errors.ENOSPC
        assert "--memory-ckpt-limit" in str(info.value)


def test_no_memory_tier_outside_an_agent_that_has_one(monkeypatch):
    monkeypatch.delenv("ELASTIC_MEMORY_CKPT_DIR", raising=False)
    assert Checkpoint.memory_tier() is None


def test_torch_state_restores_from_the_memory_tier(tier, tmp_path):
    torch = pytest.importorskip("torch")
    import elastic.torch as et
    state = {"model": {"w": torch.arange(1000, dtype=torch.float32)}, "data": {"step": 4}}
    with Checkpoint.memory_tier() as mem, Checkpoint(tmp_path / "disk", fsync=1) as disk:
        assert et.restore_state(mem, disk) is None
        et.save_state(mem, 4, state, replicated=False)
        step, source, got = et.restore_state(mem, disk)
        assert (step, source) == (4, "local")
        assert torch.equal(got["model"]["w"], state["model"]["w"])
        assert got["data"] == {"step": 4}

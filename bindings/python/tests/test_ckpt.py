"""The checkpoint store through the bindings: a dict of blobs saved at a step
reads back byte for byte, latest() follows commits, errors carry codes."""

import pytest

from elastic import Checkpoint, ElasticError, Store, errors


def test_save_then_read_back_every_blob(tmp_path):
    weights = bytes(range(256)) * 4096
    with Checkpoint(tmp_path / "ckpt", fsync=1) as ckpt:
        assert ckpt.latest() is None
        assert ckpt.steps() == []
        ckpt.save(10, {"weights": weights, "optim": bytearray(b"adam" * 10), "meta": memoryview(b"{}"), "none": b""})
        assert ckpt.latest() == 10
        assert sorted(ckpt.blobs(10)) == ["meta", "none", "optim", "weights"]
        assert ckpt.read(10, "weights") == weights
        assert ckpt.read_all(10) == {"weights": weights, "optim": b"adam" * 10, "meta": b"{}", "none": b""}


def test_latest_follows_commits_and_survives_reopen(tmp_path):
    with Checkpoint(tmp_path, fsync=1, compression=0) as ckpt:
        for step in (1, 5, 3):
            ckpt.save(step, {"step": str(step)})
        assert ckpt.latest() == 5
        assert ckpt.steps() == [1, 3, 5]
    with Checkpoint(tmp_path) as reopened:
        assert reopened.latest() == 5
        assert reopened.read(3, "step") == b"3"


def test_keep_last_retains_only_the_newest_steps(tmp_path):
    with Checkpoint(tmp_path, fsync=1, keep_last=2) as ckpt:
        for step in range(1, 6):
            ckpt.save(step, {"x": b"%d" % step})
        assert ckpt.steps() == [4, 5]


def test_missing_blob_and_step_raise_enotfound(tmp_path):
    with Checkpoint(tmp_path, fsync=1) as ckpt:
        ckpt.save(2, {"a": b"1"})
        with pytest.raises(ElasticError) as info:
            ckpt.read(2, "b")
        assert info.value.code == errors.ENOTFOUND
        assert '"b"' in info.value.detail
        with pytest.raises(ElasticError) as info:
            ckpt.read(7, "a")
        assert info.value.code == errors.ENOTFOUND


def test_duplicate_blob_name_is_rejected_and_nothing_is_committed(tmp_path):
    class Twice(dict):
        def items(self):
            return [("a", b"1"), ("a", b"2")]

    with Checkpoint(tmp_path, fsync=1) as ckpt:
        with pytest.raises(ElasticError) as info:
            ckpt.save(1, Twice())
        assert info.value.code == errors.EEXIST or info.value.code == errors.EINVAL
        assert ckpt.latest() is None


def test_unknown_option_is_a_type_error(tmp_path):
    with pytest.raises(TypeError):
        Checkpoint(tmp_path, no_such_option=1)


def test_a_file_in_the_way_fails_to_open(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    with pytest.raises(ElasticError) as info:
        Checkpoint(blocker)
    assert info.value.code < 0 and info.value.name.startswith("ELASTIC_E")


def test_commit_record_through_a_store(tmp_path, store_endpoint):
    with Store.connect(store_endpoint, prefix="job1/") as store:
        with Checkpoint(tmp_path, store=store, fsync=1) as ckpt:
            ckpt.save(4, {"a": b"through the store"})
            assert ckpt.latest() == 4
        assert store.keys() != []
        with Checkpoint(tmp_path, store=store) as reopened:
            assert reopened.read(reopened.latest(), "a") == b"through the store"

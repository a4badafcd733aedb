"""The store client against a real server: values round-trip as bytes, the
atomic operations answer like the C API, failures raise ElasticError."""

import threading

import pytest

import elastic
from elastic import ElasticError, Store, errors


def test_set_get_try_get_round_trip_bytes(store_endpoint):
    with Store.connect(store_endpoint) as store:
        store.set("plain", b"\x00\x01binary\xff")
        store.set("text", "héllo")
        store.set("view", memoryview(bytearray(b"from a buffer")))
        store.set("empty", b"")
        assert store.get("plain") == b"\x00\x01binary\xff"
        assert store.get("text") == "héllo".encode()
        assert store.try_get("view") == b"from a buffer"
        assert store.get("empty", timeout_ms=1000) == b""
        assert store.try_get("absent") is None
        assert store.try_get("absent", b"fallback") == b"fallback"


def test_add_counts_and_rejects_non_integers(store_endpoint):
    with Store.connect(store_endpoint) as store:
        assert store.add("n") == 1
        assert store.add("n", 41) == 42
        assert store.add("n", -50) == -8
        store.set("word", b"abc")
        with pytest.raises(ElasticError) as info:
            store.add("word", 1)
        assert info.value.code == errors.EINVAL
        assert info.value.name == "ELASTIC_EINVAL"


def test_compare_set_only_swaps_the_expected_value(store_endpoint):
    with Store.connect(store_endpoint) as store:
        assert store.compare_set("leader", None, b"rank0") == b"rank0"
        assert store.compare_set("leader", None, b"rank1") == b"rank0"
        assert store.compare_set("leader", b"wrong", b"rank2") == b"rank0"
        assert store.compare_set("leader", b"rank0", b"rank3") == b"rank3"
        assert store.compare_set("nobody", b"x", b"y") is None


def test_get_times_out_with_the_code_and_detail(store_endpoint):
    with Store.connect(store_endpoint) as store:
        with pytest.raises(ElasticError) as info:
            store.get("never", timeout_ms=100)
        assert info.value.code == errors.ETIMEDOUT
        assert "get never" in str(info.value)


def test_wait_returns_once_another_client_sets_every_key(store_endpoint):
    with Store.connect(store_endpoint) as waiter, Store.connect(store_endpoint) as setter:
        done = []
        thread = threading.Thread(target=lambda: done.append(waiter.wait(["a", "b"], timeout_ms=60000)))
        thread.start()
        setter.set("a", b"1")
        setter.set("b", b"2")
        thread.join(90)
        assert done == [None]
        with pytest.raises(ElasticError) as info:
            waiter.wait("c", timeout_ms=100)
        assert info.value.code == errors.ETIMEDOUT


def test_delete_keys_and_prefixes(store_endpoint):
    with Store.connect(store_endpoint, prefix="job/") as store:
        store.set("x/1", b"a")
        store.set("x/2", b"b")
        store.set("y", b"c")
        assert sorted(store.keys()) == ["x/1", "x/2", "y"]
        assert sorted(store.keys("x/")) == ["x/1", "x/2"]
        assert store.num_keys() == 3
        assert store.delete("y") is True
        assert store.delete("y") is False
        with store.clone("x/") as scoped:
            assert scoped.get("1") == b"a"
    with Store.connect(store_endpoint) as unscoped:
        assert sorted(unscoped.keys()) == ["job/x/1", "job/x/2"]


def test_a_closed_handle_raises_eclosed(store_endpoint):
    store = Store.connect(store_endpoint)
    store.close()
    store.close()
    with pytest.raises(ElasticError) as info:
        store.get("k")
    assert info.value.code == errors.ECLOSED


def test_connect_to_a_dead_port_fails_with_econnect(store_endpoint):
    host = store_endpoint.rsplit(":", 1)[0]
    with pytest.raises(ElasticError) as info:
        Store.connect("%s:1" % host, connect_timeout_ms=200)
    assert info.value.code in (errors.ECONNECT, errors.ETIMEDOUT)
    assert info.value.detail != ""


def test_token_comes_from_the_file_named_in_the_environment(token_store_endpoint, token_file, monkeypatch):
    monkeypatch.delenv("ELASTIC_STORE_TOKEN", raising=False)
    monkeypatch.delenv("ELASTIC_STORE_TOKEN_FILE", raising=False)
    with pytest.raises(ElasticError) as info:
        Store.connect(token_store_endpoint, connect_timeout_ms=2000)
    assert info.value.code == errors.EAUTH
    monkeypatch.setenv("ELASTIC_STORE_TOKEN_FILE", token_file)  # what a worker of elasticrun gets
    with Store.connect(token_store_endpoint) as store:
        store.set("k", b"v")
        assert store.get("k") == b"v"


def test_version_matches_the_library():
    major, minor, patch = elastic.version()
    assert elastic.version_string() == "%d.%d.%d" % (major, minor, patch)
    assert elastic.has_feature("store") is True
    assert elastic.has_feature("no-such-feature") is False

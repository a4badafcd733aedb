"""The store server and rendezvous from Python: a server started in-process
serves clients and fails them once stopped; two nodes rendezvous into one
generation, and a failure one reports ends it for the other."""

import threading

import pytest

from elastic import ElasticError, Rendezvous, Store, StoreServer, errors
from elastic import rdzv


def test_server_serves_until_stopped():
    with StoreServer(max_value_bytes=1024) as server:
        assert server.port > 0
        assert server.endpoint == "127.0.0.1:%d" % server.port
        with Store.connect(server.endpoint, connect_timeout_ms=5000) as store:
            store.set("k", b"v")
            assert store.get("k") == b"v"
            with pytest.raises(ElasticError) as info:
                store.set("big", b"x" * 2048)
            assert info.value.code == errors.ELIMIT
            server.close()
            with pytest.raises(ElasticError) as info:
                store.get("k", timeout_ms=2000)
            assert info.value.code in (errors.ECONNECT, errors.ETIMEDOUT, errors.ECLOSED)
    with pytest.raises(TypeError):
        StoreServer(no_such_option=1)


def test_server_with_token_refuses_a_client_without_it():
    with StoreServer(token="s3cret") as server:
        with Store.connect(server.endpoint, token="s3cret") as good:
            good.set("a", b"1")
        with pytest.raises(ElasticError) as info:
            Store.connect(server.endpoint, token="wrong", connect_timeout_ms=2000)
        assert info.value.code == errors.EAUTH


def test_two_nodes_rendezvous_and_a_failure_ends_the_generation():
    with StoreServer() as server:
        nodes = [Rendezvous("pyjob", endpoint=server.endpoint, min_nodes=2, max_nodes=2, local_world_size=2,
                            max_restarts=1, last_call_timeout_ms=0, join_timeout_ms=60000,
                            node_id="node%d" % i) for i in range(2)]
        results = [None, None]

        def join(i):
            results[i] = nodes[i].next()

        threads = [threading.Thread(target=join, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert all(r is not None for r in results), results
        assert sorted(r.group_rank for r in results) == [0, 1]
        assert {r.world_size for r in results} == {4}
        assert sorted(r.rank_base for r in results) == [0, 2]
        assert results[0].generation == results[1].generation
        assert nodes[1].watch(timeout_ms=100) is None
        nodes[0].end_generation(rank=1, exit_code=3, reason="worker exited")
        cause = nodes[1].watch(timeout_ms=60000)
        assert cause is not None and cause.kind == rdzv.FAILURE
        assert (cause.rank, cause.exit_code, cause.reason, cause.node_id) == (1, 3, "worker exited", "node0")
        first = nodes[1].first_failure()
        assert first is not None and first.generation == results[0].generation
        for node in nodes:
            node.close()


def test_rendezvous_needs_exactly_one_of_endpoint_and_store():
    with pytest.raises(TypeError):
        Rendezvous("x")
    with pytest.raises(TypeError):
        Rendezvous("x", endpoint="127.0.0.1:1", min_nodes=1, bogus=2)

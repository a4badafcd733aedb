/*
 * Prints the C layout of the public structs the bindings mirror, one line per
 * field ("type field offset size") and one per struct ("type sizeof - size"),
 * for bindings/python/tests/test_layout.py (and later the Rust binding's test)
 * to compare their mirrors against.
 */
#include <elastic.h>

#include <stddef.h>
#include <stdio.h>

#define FIELD(type, field) \
    printf("%s %s %zu %zu\n", #type, #field, offsetof(type, field), sizeof(((type *)0)->field))
#define SIZE(type) printf("%s sizeof - %zu\n", #type, sizeof(type))

static void store_server_opts(void)
{
    SIZE(elastic_store_server_opts);
    FIELD(elastic_store_server_opts, struct_size);
    FIELD(elastic_store_server_opts, host);
    FIELD(elastic_store_server_opts, port);
    FIELD(elastic_store_server_opts, token);
    FIELD(elastic_store_server_opts, max_key_bytes);
    FIELD(elastic_store_server_opts, max_value_bytes);
    FIELD(elastic_store_server_opts, max_connections);
    FIELD(elastic_store_server_opts, max_connection_buffer);
    FIELD(elastic_store_server_opts, max_total_bytes);
    FIELD(elastic_store_server_opts, handshake_timeout_ms);
    FIELD(elastic_store_server_opts, idle_timeout_ms);
    FIELD(elastic_store_server_opts, max_pending_waits);
    FIELD(elastic_store_server_opts, max_buffered_bytes);
    FIELD(elastic_store_server_opts, frame_timeout_ms);
}

static void rdzv_structs(void)
{
    SIZE(elastic_rdzv_opts);
    FIELD(elastic_rdzv_opts, struct_size);
    FIELD(elastic_rdzv_opts, run_id);
    FIELD(elastic_rdzv_opts, endpoint);
    FIELD(elastic_rdzv_opts, store);
    FIELD(elastic_rdzv_opts, token);
    FIELD(elastic_rdzv_opts, min_nodes);
    FIELD(elastic_rdzv_opts, max_nodes);
    FIELD(elastic_rdzv_opts, join_timeout_ms);
    FIELD(elastic_rdzv_opts, last_call_timeout_ms);
    FIELD(elastic_rdzv_opts, keepalive_interval_ms);
    FIELD(elastic_rdzv_opts, keepalive_timeout_ms);
    FIELD(elastic_rdzv_opts, max_restarts);
    FIELD(elastic_rdzv_opts, node_addr);
    FIELD(elastic_rdzv_opts, local_world_size);
    FIELD(elastic_rdzv_opts, node_id);
    FIELD(elastic_rdzv_opts, backend);
    FIELD(elastic_rdzv_opts, etcd_endpoints);
    FIELD(elastic_rdzv_opts, etcd_prefix);
    FIELD(elastic_rdzv_opts, etcd_ca_file);
    FIELD(elastic_rdzv_opts, etcd_cert_file);
    FIELD(elastic_rdzv_opts, etcd_key_file);
    FIELD(elastic_rdzv_opts, etcd_user);
    FIELD(elastic_rdzv_opts, etcd_password);
    FIELD(elastic_rdzv_opts, etcd_timeout_ms);
    FIELD(elastic_rdzv_opts, preferred_rank);
    FIELD(elastic_rdzv_opts, max_infra_restarts);
    SIZE(elastic_rdzv_result);
    FIELD(elastic_rdzv_result, struct_size);
    FIELD(elastic_rdzv_result, generation);
    FIELD(elastic_rdzv_result, group_rank);
    FIELD(elastic_rdzv_result, group_world_size);
    FIELD(elastic_rdzv_result, rank_base);
    FIELD(elastic_rdzv_result, local_world_size);
    FIELD(elastic_rdzv_result, world_size);
    FIELD(elastic_rdzv_result, restart_count);
    FIELD(elastic_rdzv_result, max_restarts);
    FIELD(elastic_rdzv_result, master_addr);
    FIELD(elastic_rdzv_result, master_port);
    FIELD(elastic_rdzv_result, incarnation);
    SIZE(elastic_rdzv_cause);
    FIELD(elastic_rdzv_cause, struct_size);
    FIELD(elastic_rdzv_cause, kind);
    FIELD(elastic_rdzv_cause, generation);
    FIELD(elastic_rdzv_cause, node_id);
    FIELD(elastic_rdzv_cause, rank);
    FIELD(elastic_rdzv_cause, exit_code);
    FIELD(elastic_rdzv_cause, signal);
    FIELD(elastic_rdzv_cause, reason);
    FIELD(elastic_rdzv_cause, time_ms);
}

static void store_opts(void)
{
    SIZE(elastic_store_opts);
    FIELD(elastic_store_opts, struct_size);
    FIELD(elastic_store_opts, prefix);
    FIELD(elastic_store_opts, token);
    FIELD(elastic_store_opts, connect_timeout_ms);
    FIELD(elastic_store_opts, timeout_ms);
}

static void worker_structs(void)
{
    SIZE(elastic_worker_opts);
    FIELD(elastic_worker_opts, struct_size);
    FIELD(elastic_worker_opts, store_connect_timeout_ms);
    FIELD(elastic_worker_opts, store_timeout_ms);
    FIELD(elastic_worker_opts, reconfigure_timeout_ms);
    FIELD(elastic_worker_opts, stack_dump_signal);
    SIZE(elastic_worker_info);
    FIELD(elastic_worker_info, struct_size);
    FIELD(elastic_worker_info, rank);
    FIELD(elastic_worker_info, local_rank);
    FIELD(elastic_worker_info, world_size);
    FIELD(elastic_worker_info, local_world_size);
    FIELD(elastic_worker_info, group_rank);
    FIELD(elastic_worker_info, restart_count);
    FIELD(elastic_worker_info, generation);
    FIELD(elastic_worker_info, master_port);
    FIELD(elastic_worker_info, attached);
    FIELD(elastic_worker_info, run_id);
    FIELD(elastic_worker_info, master_addr);
    FIELD(elastic_worker_info, incarnation);
    SIZE(elastic_worker_park_opts);
    FIELD(elastic_worker_park_opts, struct_size);
    FIELD(elastic_worker_park_opts, timeout_ms);
}

static void ckpt_structs(void)
{
    SIZE(elastic_ckpt_opts);
    FIELD(elastic_ckpt_opts, struct_size);
    FIELD(elastic_ckpt_opts, compression);
    FIELD(elastic_ckpt_opts, zstd_level);
    FIELD(elastic_ckpt_opts, threads);
    FIELD(elastic_ckpt_opts, chunk_bytes);
    FIELD(elastic_ckpt_opts, fsync);
    FIELD(elastic_ckpt_opts, verify);
    FIELD(elastic_ckpt_opts, keep_last);
    FIELD(elastic_ckpt_opts, keep_every);
    FIELD(elastic_ckpt_opts, rank);
    FIELD(elastic_ckpt_opts, world);
    FIELD(elastic_ckpt_opts, generation);
    FIELD(elastic_ckpt_opts, store);
    FIELD(elastic_ckpt_opts, shared_storage);
    FIELD(elastic_ckpt_opts, commit_timeout_ms);
    FIELD(elastic_ckpt_opts, max_blob_bytes);
    FIELD(elastic_ckpt_opts, file_mode);
    FIELD(elastic_ckpt_opts, incarnation);
    SIZE(elastic_ckpt_blob);
    FIELD(elastic_ckpt_blob, name);
    FIELD(elastic_ckpt_blob, data);
    FIELD(elastic_ckpt_blob, len);
    FIELD(elastic_ckpt_blob, flags);
}

int main(void)
{
    store_server_opts();
    store_opts();
    rdzv_structs();
    worker_structs();
    ckpt_structs();
    return 0;
}

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
    SIZE(elastic_ckpt_blob);
    FIELD(elastic_ckpt_blob, name);
    FIELD(elastic_ckpt_blob, data);
    FIELD(elastic_ckpt_blob, len);
    FIELD(elastic_ckpt_blob, flags);
}

int main(void)
{
    store_opts();
    worker_structs();
    ckpt_structs();
    return 0;
}

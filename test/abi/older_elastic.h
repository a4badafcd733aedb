/*
 * An older caller's view of the public ABI: today's structs with their last
 * fields cut off (as if compiled against a header from before those fields
 * were appended) and the prototypes old_caller.c uses. Never include it
 * together with <elastic.h>; the names are the same on purpose.
 */
#ifndef ELASTIC_OLDER_H
#define ELASTIC_OLDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct elastic_store_server elastic_store_server;
typedef struct elastic_store elastic_store;
typedef struct elastic_rdzv elastic_rdzv;
typedef struct elastic_worker elastic_worker;
typedef struct elastic_ckpt elastic_ckpt;
typedef struct elastic_agent elastic_agent;

#define ELASTIC_EINVAL          (-1)
#define ELASTIC_ENOTFOUND       (-4)
#define ELASTIC_ECLOSED         (-5)
#define ELASTIC_RDZV_FAILURE    1
#define ELASTIC_RDZV_JOB_ENDED  5
#define ELASTIC_TIMEOUT_DEFAULT (-2147483647 - 1)

typedef struct elastic_ckpt_blob {
    const char *name;
    const void *data;
    size_t len;
    unsigned flags;
} elastic_ckpt_blob;

typedef struct elastic_store_server_opts {
    size_t struct_size;
    const char *host;
    int port;
    const char *token;
    size_t max_key_bytes;
    size_t max_value_bytes;
    size_t max_connections;
    size_t max_connection_buffer;
    size_t max_total_bytes;
    int handshake_timeout_ms;
    int idle_timeout_ms;
} elastic_store_server_opts;

typedef struct elastic_store_opts {
    size_t struct_size;
    const char *prefix;
    const char *token;
} elastic_store_opts;

typedef struct elastic_rdzv_opts {
    size_t struct_size;
    const char *run_id;
    const char *endpoint;
    elastic_store *store;
    const char *token;
    int min_nodes;
    int max_nodes;
    int join_timeout_ms;
    int last_call_timeout_ms;
    int keepalive_interval_ms;
    int keepalive_timeout_ms;
    int max_restarts;
    const char *node_addr;
    int local_world_size;
} elastic_rdzv_opts;

typedef struct elastic_rdzv_result {
    size_t struct_size;
    uint64_t generation;
    int group_rank;
    int group_world_size;
    int rank_base;
    int local_world_size;
    int world_size;
    int restart_count;
    int max_restarts;
} elastic_rdzv_result;

typedef struct elastic_rdzv_cause {
    size_t struct_size;
    int kind;
    uint64_t generation;
    char node_id[128];
    int rank;
    int exit_code;
    int signal;
    char reason[256];
} elastic_rdzv_cause;

typedef struct elastic_worker_opts {
    size_t struct_size;
    int store_connect_timeout_ms;
    int store_timeout_ms;
} elastic_worker_opts;

typedef struct elastic_worker_info {
    size_t struct_size;
    int rank;
    int local_rank;
    int world_size;
    int local_world_size;
    int group_rank;
    int restart_count;
    uint64_t generation;
    int master_port;
    int attached;
    char run_id[128];
} elastic_worker_info;

typedef struct elastic_ckpt_opts {
    size_t struct_size;
    int compression;
    int zstd_level;
    int threads;
    size_t chunk_bytes;
    int fsync;
    int verify;
    unsigned keep_last;
    uint64_t keep_every;
    uint32_t rank;
    uint32_t world;
    uint64_t generation;
    elastic_store *store;
    int shared_storage;
    int commit_timeout_ms;
} elastic_ckpt_opts;

typedef struct elastic_agent_opts {
    size_t struct_size;
    int min_nodes;
    int max_nodes;
    int nproc_per_node;
    const char *rdzv_backend;
    const char *rdzv_endpoint;
    const char *run_id;
    const char *rdzv_conf;
    int standalone;
    int max_restarts;
    int monitor_interval_ms;
    const char *role;
    const char *local_addr;
    int node_rank;
    const char *master_addr;
    int master_port;
    const char *log_dir;
    const char *redirects;
    const char *tee;
    int no_python;
    int module;
    int run_path;
    const char *python;
    int argc;
    const char *const *argv;
    int grace_period_ms;
    int hang_timeout_ms;
    const char *event_log;
    const char *error_file;
    int help;
    int version;
    int startup_timeout_ms;
    int metrics_port;
    const char *metrics_host;
    int straggler_window;
    int straggler_rounds;
    int straggler_evict;
    const char *user_probe;
} elastic_agent_opts;

typedef struct elastic_agent_result {
    size_t struct_size;
    int exit_code;
    uint64_t generations;
    int restarts;
} elastic_agent_result;

const char *elastic_last_error(void);
const char *elastic_err_name(int err);
void elastic_free(void *ptr);

int elastic_store_server_opts_init(elastic_store_server_opts *opts, size_t struct_size);
int elastic_store_server_start(const elastic_store_server_opts *opts,
                               elastic_store_server **server);
int elastic_store_server_get_port(const elastic_store_server *server, int *port);
void elastic_store_server_close(elastic_store_server *server);
int elastic_store_opts_init(elastic_store_opts *opts, size_t struct_size);
int elastic_store_connect(const char *endpoint, const elastic_store_opts *opts,
                          elastic_store **store);
void elastic_store_close(elastic_store *store);
int elastic_store_set(elastic_store *s, const char *key, const void *value, size_t len);
int elastic_store_get(elastic_store *s, const char *key, int timeout_ms, void **value, size_t *len);

int elastic_rdzv_opts_init(elastic_rdzv_opts *opts, size_t struct_size);
int elastic_rdzv_open(const elastic_rdzv_opts *opts, elastic_rdzv **rdzv);
int elastic_rdzv_next(elastic_rdzv *rdzv, elastic_rdzv_result *result);
int elastic_rdzv_end_generation(elastic_rdzv *rdzv, const elastic_rdzv_cause *cause);
int elastic_rdzv_watch(elastic_rdzv *rdzv, int timeout_ms, elastic_rdzv_cause *cause);
int elastic_rdzv_first_failure(elastic_rdzv *rdzv, elastic_rdzv_cause *cause);
int elastic_rdzv_end_job(elastic_rdzv *rdzv);
void elastic_rdzv_free(elastic_rdzv *rdzv);

int elastic_worker_opts_init(elastic_worker_opts *opts, size_t struct_size);
int elastic_worker_init(const elastic_worker_opts *opts, elastic_worker **worker);
int elastic_worker_get_info(elastic_worker *w, elastic_worker_info *info);
void elastic_worker_close(elastic_worker *w);

int elastic_ckpt_opts_init(elastic_ckpt_opts *opts, size_t struct_size);
int elastic_ckpt_open(const char *dir, const elastic_ckpt_opts *opts, elastic_ckpt **ckpt);
int elastic_ckpt_save(elastic_ckpt *ckpt, uint64_t step, const elastic_ckpt_blob *blobs, size_t n);
int elastic_ckpt_latest(elastic_ckpt *ckpt, uint64_t *step);
void elastic_ckpt_close(elastic_ckpt *ckpt);

int elastic_agent_opts_init(elastic_agent_opts *opts, size_t struct_size);
int elastic_agent_parse_args(int argc, const char *const *argv, const char *const *envp,
                             elastic_agent_opts *opts);
int elastic_agent_create(const elastic_agent_opts *opts, elastic_agent **agent);
int elastic_agent_run(elastic_agent *agent, elastic_agent_result *result);
void elastic_agent_free(elastic_agent *agent);

#endif /* ELASTIC_OLDER_H */

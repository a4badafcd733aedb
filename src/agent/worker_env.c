/*
 * What a worker is started with: torchrun's environment (the variables of
 * torch 1.13's LocalElasticAgent and start_processes) plus ours, and its
 * command line (python3 -u script, python3 -u -m module, or the program).
 */
#include "agent/worker_env.h"

#include "agent/python.h"
#include "agent/workers.h"
#include "channel/channel.h"
#include "common/text.h"

#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

typedef struct strv {
    char **items;
    size_t len, cap;
    int rc;
} strv;

static void strv_push(strv *v, char *item)
{
    if (v->rc != 0 || item == NULL) {
        free(item);
        v->rc = ELASTIC_ENOMEM;
        return;
    }
    if (v->len + 2 > v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        char **grown = realloc(v->items, cap * sizeof *grown);
        if (grown == NULL) {
            free(item);
            v->rc = ELASTIC_ENOMEM;
            return;
        }
        v->items = grown;
        v->cap = cap;
    }
    v->items[v->len++] = item;
    v->items[v->len] = NULL;
}

static void strv_pushf(strv *v, const char *fmt, ...) ELASTIC__PRINTF(2, 3);
static void strv_pushf(strv *v, const char *fmt, ...)
{
    char *item = NULL;
    va_list args;
    va_start(args, fmt);
    if (vasprintf(&item, fmt, args) < 0) item = NULL;
    va_end(args);
    strv_push(v, item);
}

static int strv_done(strv *v, char ***out)
{
    if (v->rc != 0) {
        agent__strv_free(v->items);
        return elastic__fail(ELASTIC_ENOMEM, "out of memory building a worker's environment");
    }
    *out = v->items;
    return 0;
}

void agent__strv_free(char **items)
{
    for (size_t i = 0; items != NULL && items[i] != NULL; i++) free(items[i]);
    free(items);
}

/* The variables we set replace inherited ones of the same name; the agent's own
 * secrets among them are dropped and never set. */
static const char *const owned_names[] = {
    "LOCAL_RANK",
    "RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "ROLE_NAME",
    "LOCAL_WORLD_SIZE",
    "WORLD_SIZE",
    "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE",
    "NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "OMP_NUM_THREADS",
    "ELASTIC_STORE_ENDPOINT",
    "ELASTIC_STORE_PREFIX",
    "ELASTIC_GENERATION",
    CHANNEL__ENV_INCARNATION,
    "ELASTIC_RUN_ID",
    "ELASTIC_STORE_TOKEN",
    "ELASTIC_STORE_TOKEN_FILE",
    "ELASTIC_ETCD_PASSWORD", /* the agent's own secret: never a worker's */
    "ELASTIC_HEARTBEAT_SHM",
    "ELASTIC_HEARTBEAT_SLOT",
    "ELASTIC_AGENT_SOCKET",
    "ELASTIC_SPARE",
    CHANNEL__ENV_MEMORY_CKPT_DIR,
    CHANNEL__ENV_RESTORE_STEP,
    CHANNEL__ENV_RESTORE_SOURCE,
    CHANNEL__ENV_RESTORE_NODE,
    CHANNEL__ENV_ON_DIVERGENCE,
};

static bool is_owned(const char *entry)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(owned_names); i++) {
        size_t len = strlen(owned_names[i]);
        if (strncmp(entry, owned_names[i], len) == 0 && entry[len] == '=') return true;
    }
    return false;
}

static void push_inherited_or(strv *v, const char *name, const char *fallback)
{
    const char *value = getenv(name);
    if (value != NULL)
        strv_pushf(v, "%s=%s", name, value);
    else if (fallback != NULL)
        strv_pushf(v, "%s=%s", name, fallback);
}

static int finish_env(strv *v, const agent_worker_env *spec, char ***envp);

int agent__env_build(const agent_worker_env *spec, char ***envp)
{
    strv v = { 0 };
    const elastic_rdzv_result *g = spec->generation;
    for (char **entry = environ; entry != NULL && *entry != NULL; entry++)
        if (!is_owned(*entry)) strv_push(&v, elastic__strdup(*entry));
    if (spec->spare) { /* a rank's variables come when it is promoted (elastic_worker_park) */
        strv_pushf(&v, "ELASTIC_SPARE=%d", spec->spare_slot);
        if (spec->agent_socket != NULL)
            strv_pushf(&v, "ELASTIC_AGENT_SOCKET=%s", spec->agent_socket);
        if (spec->run_id != NULL) strv_pushf(&v, "TORCHELASTIC_RUN_ID=%s", spec->run_id);
        return finish_env(&v, spec, envp);
    }
    /* The per-generation variables come from the one formatter that also
     * writes the in-process RECONFIGURE payload, so the two cannot drift. */
    channel__worker_env shared = { .rank = g->rank_base + spec->local_rank,
                                   .local_rank = spec->local_rank,
                                   .world_size = g->world_size,
                                   .local_world_size = g->local_world_size,
                                   .group_rank = g->group_rank,
                                   .restart_count = g->restart_count,
                                   .generation = g->generation,
                                   .incarnation = g->incarnation,
                                   .run_id = spec->run_id,
                                   .master_addr = g->master_addr,
                                   .master_port = g->master_port,
                                   .store_endpoint = spec->store_endpoint,
                                   .store_prefix = spec->store_prefix,
                                   .heartbeat_shm = spec->heartbeat_shm,
                                   .heartbeat_slot = spec->local_rank,
                                   .agent_socket = spec->agent_socket,
                                   .restore_step = spec->restore_step,
                                   .restore_source = spec->restore_source,
                                   .restore_node = spec->restore_node };
    elastic__text lines;
    elastic__text_init(&lines, 64 * 1024);
    int rc = channel__worker_env_format(&shared, &lines);
    for (char *line = lines.data, *end;
         rc == 0 && line != NULL && (end = strchr(line, '\n')) != NULL; line = end + 1)
        strv_push(&v, strndup(line, (size_t)(end - line)));
    elastic__text_free(&lines);
    if (rc != 0) {
        agent__strv_free(v.items);
        return rc;
    }
    strv_pushf(&v, "GROUP_WORLD_SIZE=%d", g->group_world_size);
    return finish_env(&v, spec, envp);
}

/* What only a freshly started process needs (a worker or a spare). */
static int finish_env(strv *v, const agent_worker_env *spec, char ***envp)
{
    const elastic_rdzv_result *g = spec->generation;
    const elastic_agent_opts *o = spec->opts;
    strv_pushf(v, "ROLE_NAME=%s", o->role);
    strv_pushf(v, "TORCHELASTIC_MAX_RESTARTS=%d", g->max_restarts);
    strv_pushf(v, "TORCHELASTIC_USE_AGENT_STORE=False"); /* our store does not speak TCPStore */
    strv_pushf(v, "TORCHELASTIC_ERROR_FILE=%s", spec->error_file);
    push_inherited_or(v, "NCCL_ASYNC_ERROR_HANDLING", "1");
    push_inherited_or(v, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    push_inherited_or(v, "OMP_NUM_THREADS", o->nproc_per_node > 1 ? "1" : NULL);
    /* The token itself is never in the environment (children inherit it and
     * /proc/PID/environ shows it): workers read it from this file. */
    if (spec->store_token_file != NULL)
        strv_pushf(v, "ELASTIC_STORE_TOKEN_FILE=%s", spec->store_token_file);
    /* The memory tier (the job's restore plan for a rank came with the rank's
     * variables; a spare's comes with its promotion). */
    if (spec->memory_dir != NULL)
        strv_pushf(v, CHANNEL__ENV_MEMORY_CKPT_DIR "=%s", spec->memory_dir);
    /* What the checkpoint store does when replicas differ (--on-divergence). */
    strv_pushf(v, CHANNEL__ENV_ON_DIVERGENCE "=%s",
               o->on_divergence != NULL ? o->on_divergence : "stop");
    return strv_done(v, envp);
}

void agent__worker_store_prefix(const agent_group *group, char *out, size_t size)
{
    snprintf(out, size, "job/%s/gen/%llu/", group->job.run_id,
             (unsigned long long)group->current.generation);
}

/* torchrun's macro: "${local_rank}" in an argument becomes the local rank. */
static char *substitute_local_rank(const char *arg, int local_rank)
{
    static const char macro[] = "${local_rank}";
    const char *at = strstr(arg, macro);
    if (at == NULL) return elastic__strdup(arg);
    char *out = NULL;
    char *rest = substitute_local_rank(at + strlen(macro), local_rank);
    if (rest == NULL || asprintf(&out, "%.*s%d%s", (int)(at - arg), arg, local_rank, rest) < 0)
        out = NULL;
    free(rest);
    return out;
}

int agent__command_build(const elastic_agent_opts *o, int local_rank, char ***argv)
{
    strv v = { 0 };
    if (o->argc < 1) return elastic__fail(ELASTIC_EINVAL, "no program to run");
    if (!o->no_python) {
        strv_push(&v, elastic__strdup(agent__python_interpreter(o)));
        strv_push(&v, elastic__strdup("-u"));
        if (o->module) strv_push(&v, elastic__strdup("-m"));
    }
    for (int i = 0; i < o->argc; i++) strv_push(&v, substitute_local_rank(o->argv[i], local_rank));
    return strv_done(&v, argv);
}

/*
 * A worker's environment and command line (worker_env.c).
 */
#ifndef ELASTIC_AGENT_WORKER_ENV_H
#define ELASTIC_AGENT_WORKER_ENV_H

#include "agent/agent.h"

typedef struct agent_worker_env {
    const elastic_agent_opts *opts;
    const elastic_rdzv_result *generation;
    const char *run_id;
    const char *store_endpoint;
    const char *store_prefix;
    const char *store_token_file; /* the token's file in the agent's run directory; NULL: none */
    const char *error_file;
    int local_rank;
    const char *heartbeat_shm; /* the probe monitor's heartbeat file; NULL: none */
    const char *agent_socket;  /* its control socket; NULL: none */
    bool spare;                /* a warm spare: no rank yet, ELASTIC_SPARE=spare_slot instead */
    int spare_slot;
    const char *memory_dir;     /* the node's memory tier (ROOT/own); NULL: none */
    uint64_t restore_step;      /* the job's restore plan for this rank: */
    const char *restore_source; /* "local", "peer", "disk"; NULL: no plan */
    const char *restore_node;
} agent_worker_env;

/* A NULL-terminated environment: the agent's own minus what torchrun sets,
 * plus torchrun's variables and ours. Free with agent__strv_free(). */
int agent__env_build(const agent_worker_env *spec, char ***envp);

/* The worker's argv (python3 -u script args / the program itself) with
 * ${local_rank} substituted. Free with agent__strv_free(). */
int agent__command_build(const elastic_agent_opts *opts, int local_rank, char ***argv);
void agent__strv_free(char **strv);

#endif /* ELASTIC_AGENT_WORKER_ENV_H */

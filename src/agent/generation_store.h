/*
 * The job's store per generation with --rdzv-backend etcd-v3 (generation_store.c).
 */
#ifndef ELASTIC_AGENT_GENERATION_STORE_H
#define ELASTIC_AGENT_GENERATION_STORE_H

#include "agent/agent.h"
#include <pthread.h>

typedef struct agent_jobstore {
    /* Set by the agent. */
    const char *bind_host;      /* where a hosted store listens */
    const char *advertise_host; /* how the other nodes reach it */
    const char
        *fixed_token;    /* the job's configured token (every node has it); NULL: random per host */
    size_t max_connections; /* a hosted store's limit (agent__store_connections) */
    int read_timeout_ms; /* store calls (0: the client's default) */
    int lookup_timeout_ms; /* how long to wait for the host's endpoint */
    const char *token_dir; /* the agent's private run directory (workers' token file) */
    char *token_file;      /* its path buffer */
    size_t token_file_size;
    /* Own state (the calls thread's; the watcher's fields below are shared with it). */
    elastic_store *fresh_store;   /* attached, not yet taken by the NEXT call; NULL: none */
    char endpoint_now[300];       /* the generation's store endpoint */
    const char *token_file_now;   /* token_file once written; NULL: no token file */
    elastic_store_server *server; /* while this node hosts (it was group rank 0) */
    char host_token[40];          /* the random token of the store we host (no fixed token) */
    char written_token[128];      /* the random token in the workers' file now ("" none) */
    uint64_t published;           /* the last generation we published a store for */
    int logged_port;
    /* Watches the generation's store connection: its host dying is a lost
     * node (no budget), reported before the workers' own errors can end the
     * generation as their FAILURE. */
    pthread_t watcher;
    bool watching;
    int watcher_stop; /* atomic */
    elastic_rdzv *watch_rdzv;
    elastic_store *watch_store;
    uint64_t watch_generation;
    uint64_t lost_generation; /* atomic: the generation whose store host was lost; 0: none */
    char watch_key[300];
} agent_jobstore;

/* The job store as the group uses it: agent.c sets it before the group
 * starts, agent__store_link_apply replaces it when a generation brings its own. */
typedef struct agent_store_link {
    elastic_store *client;    /* job store (NULL when none): failure details are shared there */
    agent_jobstore *jobstore; /* etcd: the store per generation; NULL otherwise */
    const char *endpoint;
    const char *token_file; /* NULL: no token */
    char endpoint_buf[300]; /* etcd: the generation's, set when its NEXT is back */
    char token_buf[512];
} agent_store_link;

/* After next(): host and publish (group rank 0) or look up and connect. */
/* The connection limit of a job's store, following the job's size (agent.c). */
size_t agent__store_connections(int max_nodes, int nproc_per_node);

int agent__jobstore_attach(agent_jobstore *js, elastic_rdzv *r, const elastic_rdzv_result *result);
/* After next() on the calls thread: the attached store, endpoint and token
 * file into the NEXT call (js NULL or nothing new: unchanged). */
struct agent_next_call;
void agent__jobstore_take(agent_jobstore *js, struct agent_next_call *call);
/* On the loop, a NEXT call back: its store (if new) replaces the link's, the
 * last one is closed; the call no longer owns it. */
void agent__store_link_apply(agent_store_link *link, struct agent_next_call *call);
bool agent__jobstore_hosting(const agent_jobstore *js);
/* Whether generation's store host was lost: the watcher saw it, or one
 * request on our connection to that store fails to reach it (loop thread). */
bool agent__jobstore_lost(agent_jobstore *js, uint64_t generation);
void agent__jobstore_close(agent_jobstore *js);

#endif /* ELASTIC_AGENT_GENERATION_STORE_H */

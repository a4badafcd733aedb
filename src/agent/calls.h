/*
 * Membership and store calls off the loop (calls.c).
 */
#ifndef ELASTIC_AGENT_CALLS_H
#define ELASTIC_AGENT_CALLS_H

#include "agent/agent.h"
#include "agent/failure.h"
#include "probe/probe.h"

#include <pthread.h>

typedef struct agent_membership agent_membership;
typedef struct agent_jobstore agent_jobstore;

typedef enum agent_call_kind {
    AGENT_CALL_NEXT,          /* the next rendezvous */
    AGENT_CALL_END,           /* end the generation with `cause` */
    AGENT_CALL_FINISH,        /* every local worker succeeded */
    AGENT_CALL_LEAVE,         /* shutting down */
    AGENT_CALL_SHARE_FAILURE, /* put a failure's detail in the job store (key, value) */
    AGENT_CALL_SUMMARY,       /* write the root-cause summary (reads the store) */
    AGENT_CALL_NODE_STATS,    /* publish this node's straggler statistic, read all */
    AGENT_CALL_EVICT,         /* this node is the job's straggler: step aside if it may */
    AGENT_CALL_SLURM_DRAIN    /* scontrol drains this node (key: node, value: why) */
} agent_call_kind;

/* One call: `run` on the calls thread touches only this struct (and what
 * the calls thread owns: the membership, the store per generation); its
 * inputs are copied in when it is posted, its results copied out, and the
 * loop applies them when it is back (AGENT_GROUP_CALL_DONE). */
typedef struct agent_call {
    struct agent_call *next;
    agent_call_kind kind;
    agent_membership *membership; /* copied at post: the group's */
    elastic_store *store;     /* copied at post: the job store (NULL: none); NEXT: the new one */
    elastic_rdzv_cause cause; /* END */
    char key[512];            /* SHARE_FAILURE */
    char value[AGENT_TAIL_BYTES + 1];
    int summary_rc;             /* SUMMARY: the error that ends the job */
    int rc;                     /* the result */
    char error[256];            /* its detail (SUMMARY: the input detail) */
    elastic_rdzv_result result; /* NEXT */
    uint64_t generation; /* NODE_STATS: key is ours, value our record, prefix the generation's */
    char prefix[256];
    unsigned node_count; /* NODE_STATS: the generation's nodes, and what was read (by group rank) */
    probe__node_stat *node_stats;
    bool *node_present;
    bool evicted;          /* EVICT (reason in `value`): this node's end won */
    int waiting;           /* EVICT: spares waiting in the open round */
    char replacement[128]; /* EVICT: the likely replacement's node id; "": unknown */
    double score;          /* EVICT: the verdict it acts on */
    bool health;           /* EVICT: a fatal health check's step-aside (health.c), not a straggler's */
    uint64_t step_ms;
    /* NEXT on etcd: the generation's store, endpoint and token file replace the group's */
    agent_jobstore *jobstore;
    bool store_changed;
    char endpoint[300];
    bool token_file_changed; /* the workers' token file is this generation's: */
    char token_file[512];    /* its path; "": none */
    /* SUMMARY: the group's inputs (opts and ids are immutable), and the text back */
    const elastic_agent_opts *opts;
    const char *run_id, *node_id;
    /* NEXT with a memory tier: the job's one restore step (replica/sync.c),
     * run right after the rendezvous, before the workers start. */
    struct replica_service *memory;
    elastic_store *memory_store; /* the job store (NULL: no sync: each worker decides alone) */
    const char *node_addr;
    bool memory_synced;
    int memory_rc;
    struct replica_sync_out *memory_out;
    uint64_t fenced_wall_ms;
    char fenced_reason[256];
    char store_endpoint[300];
    agent_failure local_failure;
    char summary[4096];
} agent_call;

typedef struct agent_calls {
    bool started, busy, stopping;
    pthread_t thread;
    pthread_cond_t wake; /* with the group's lock */
    agent_call *queue;   /* posted, not yet run */
    agent_call *done;    /* run, waiting for the loop */
} agent_calls;

struct agent_group;
agent_call *agent__call_new(agent_call_kind kind);
void agent__call_free(agent_call *call);
/* Copies the group's membership and store into the call and runs it on the
 * calls thread (inline for in-memory membership); it comes back to the loop
 * as an AGENT_GROUP_CALL_DONE event. NULL: no memory (logged). */
void agent__call_post(struct agent_group *group, agent_call *call);
/* On the loop (the wake async): the calls run since, in order, for the queue. */
agent_call *agent__calls_take_done(struct agent_group *group);
/* false when a call is still blocked: the group must stay allocated. */
bool agent__calls_stop(struct agent_group *group);

#endif /* ELASTIC_AGENT_CALLS_H */

/*
 * Membership and store calls off the loop (calls.c).
 */
#ifndef ELASTIC_AGENT_CALLS_H
#define ELASTIC_AGENT_CALLS_H

#include "agent/agent.h"
#include "agent/failure.h"
#include "agent/machine.h"
#include "probe/probe.h"

#include <pthread.h>

typedef struct agent_membership agent_membership;
typedef struct agent_jobstore agent_jobstore;

/* A call off the loop, libuv's uv_queue_work(work_cb, after_work_cb) with
 * the request being the caller's own struct: each kind is a struct that
 * begins with this header, filled by its owner's constructor with copies of
 * everything `run` needs. `run` on the calls thread touches only that struct
 * (and what the calls thread owns: the membership, the store per
 * generation); `done` on the loop applies the result and turns it into the
 * machine's input (AGENT_GROUP_CALL_DONE). The header is link, kind and
 * status; the kinds' own fields are their files' business. */
typedef struct agent_call agent_call;
struct agent_group;

typedef struct agent_call_type {
    void (*run)(agent_call *call); /* the calls thread; sets rc (agent__call_status) */
    /* The loop: `in` comes as CALL_DONE with the kind and rc; done applies
     * the result and completes (or changes) the input. */
    void (*done)(struct agent_group *group, agent_call *call, agent_input *in);
    void (*release)(agent_call *call); /* what the call owns besides itself; NULL: nothing */
} agent_call_type;

struct agent_call {
    struct agent_call *next; /* the calls thread's queues */
    agent_call_kind kind;    /* for the machine's CALL_DONE input */
    const agent_call_type *type;
    int rc;          /* the result */
    char error[256]; /* its detail */
};

/* A new call of `size` bytes (its kind's struct, the header first), zeroed.
 * NULL: no memory (agent__call_post logs it). */
void *agent__call_alloc(size_t size, agent_call_kind kind, const agent_call_type *type);
/* The end of a run: rc, and the library's last error as its detail. */
void agent__call_status(agent_call *call, int rc);
/* The warning for a call that failed, naming what it did. */
void agent__call_warn(const agent_call *call, const char *what);

/* The next rendezvous (calls.c): with etcd, the generation's store; with a
 * memory tier, the job's one restore step (replica/sync.c) run right after
 * the rendezvous, before the workers start. */
typedef struct agent_next_call {
    agent_call base;
    agent_membership *membership;
    elastic_rdzv_result result;
    agent_jobstore *jobstore; /* etcd: the store per generation; NULL otherwise */
    /* On etcd: the generation's store, endpoint and token file (generation_store.c) */
    elastic_store *store;
    bool store_changed;
    char endpoint[300];
    bool token_file_changed; /* the workers' token file is this generation's: */
    char token_file[512];    /* its path; "": none */
    /* With a memory tier (memory.c): its inputs, copied at construction, and what came back */
    struct replica_service *memory;
    elastic_store *memory_store; /* the job store (NULL: no sync: each worker decides alone) */
    const elastic_agent_opts *opts;
    const char *node_id, *node_addr;
    bool memory_synced;
    int memory_rc;
    struct replica_sync_out *memory_out;
    /* ELASTIC_ECLOSED: why the job was closed, when it could be read */
    bool closed_known;
    bool closed_budget; /* the restart budget ran out */
    elastic_rdzv_cause closed;
} agent_next_call;

/* The NEXT call for the group's next rendezvous. */
agent_next_call *agent__next_call_new(struct agent_group *group);
/* `call` as the NEXT call it is; NULL when it is another kind (or NULL). */
agent_next_call *agent__next_call_of(agent_call *call);

/* The rendezvous calls with no result beyond rc (calls.c): END (`cause`),
 * FINISH, LEAVE and CLOSE_JOB (`cause`: why the job is closed). */
typedef struct agent_membership_call {
    agent_call base;
    agent_membership *membership;
    elastic_rdzv_cause cause;
} agent_membership_call;

agent_membership_call *agent__membership_call_new(struct agent_group *group, agent_call_kind kind);

/* The EVICT call: this node steps aside from the generation if a spare
 * waits, as the job's straggler (node_straggler.c) or for a fatal health
 * check (health.c); each passes its own type, run by agent__node_evict_run. */
typedef struct agent_evict_call {
    agent_call base;
    agent_membership *membership;
    uint64_t generation;
    char reason[AGENT_TAIL_BYTES + 1];
    double score; /* a straggler's: the verdict it acts on */
    uint64_t step_ms;
    bool evicted;          /* this node's end won */
    int waiting;           /* spares waiting in the open round */
    char replacement[128]; /* the likely replacement's node id; "": unknown */
} agent_evict_call;

agent_evict_call *agent__evict_call_new(struct agent_group *group, const agent_call_type *type);
/* The calls thread: the step-aside, for both owners' types. */
void agent__node_evict_run(agent_call *call);

typedef struct agent_calls {
    bool started, busy, stopping;
    pthread_t thread;
    pthread_cond_t wake; /* with the group's lock */
    agent_call *queue;   /* posted, not yet run */
    agent_call *done;    /* run, waiting for the loop */
} agent_calls;

void agent__call_free(agent_call *call);
/* Runs the call on the calls thread (inline for in-memory membership); it
 * comes back to the loop as an AGENT_GROUP_CALL_DONE event. NULL: no memory
 * (logged). */
void agent__call_post(struct agent_group *group, agent_call *call);
/* On the loop (the wake async): the calls run since, in order, for the queue. */
agent_call *agent__calls_take_done(struct agent_group *group);
/* false when a call is still blocked: the group must stay allocated. */
bool agent__calls_stop(struct agent_group *group);

#endif /* ELASTIC_AGENT_CALLS_H */

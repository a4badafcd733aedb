/*
 * The worker handle's insides, shared by the files of src/worker/: attach and
 * info (worker.c), heartbeats (heartbeat.c), the control thread and poll
 * (control_client.c), the barrier (barrier.c), the stack-dump handler
 * (stackdump.c), parking a warm spare (park.c) and the restore plan a
 * reconfigure or promotion carries (restore_plan.c).
 */
#ifndef ELASTIC_WORKER_INTERNAL_H
#define ELASTIC_WORKER_INTERNAL_H

#include "common/common.h"
#include "channel/channel.h"
#include "worker/env.h"

#include <pthread.h>

/* Library modules that must act with the worker (the nccl module: abort its
 * communicators, rebuild them) hang one of these on it. */
typedef struct worker__hook {
    void (*on_abort)(void *user, uint64_t generation,
                     const char *reason); /* the control thread, before the
                                                                            trainer's abort hook */
    void (*on_reconfigure)(void *user,
                           const elastic_worker_info *info); /* the trainer's thread inside poll,
                                                                            before its reconfigure callback */
    void *user;
    struct worker__hook *next;
} worker__hook;

struct elastic_worker {
    elastic_worker_opts opts;
    worker__env env; /* the current generation's view; changed only in poll */

    /* heartbeats: the trainer thread's own copies, mirrored into *slot */
    channel__hb_slot *slot; /* the shared slot, or &local_slot when there is none */
    channel__hb_slot local_slot;
    channel__hb_region *hb_region;
    uint64_t hb_step, hb_step_ns, hb_beats, hb_interval_sum_ns, hb_interval_steps;
    uint64_t hb_compute_sum_ns, hb_compute_count;
    int stack_signal; /* the backtrace handler this handle installed, 0: none */

    /* store */
    elastic_store_server *private_server; /* alone: an in-process store */
    elastic_store *root_store;            /* unscoped connection */
    elastic_store *store;                 /* scoped to the generation's prefix */
    uint64_t barrier_seq;

    /* control channel */
    int control_fd; /* -1 when there is no agent socket */
    pthread_t control_thread;
    bool control_thread_started;
    pthread_mutex_t write_lock; /* frames come from two threads */

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t changed_cond;
    int changed; /* atomic: the generation ended; poll must act */
    bool closing, stopped, channel_closed;
    bool reconfigure_pending;
    char pending_payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    size_t pending_length;
    elastic_worker_abort_fn abort_fn;
    void *abort_user;
    elastic_worker_reconfigure_fn reconfigure_fn;
    void *reconfigure_user;

    /* stop notices (notice.c) */
    int notice;                  /* atomic: the agent sent CHANNEL__MSG_NOTICE */
    uint64_t notice_deadline_ms; /* under lock: when the grace ends (0: not known) */
    char notice_reason[128];     /* under lock */
    bool sigterm_notice;         /* elastic_worker_notice_on_sigterm() was called */

    pthread_mutex_t hooks_lock; /* held while hooks run, so removing one waits for it */
    worker__hook *hooks;
};

/* notice.c: a CHANNEL__MSG_NOTICE frame (the control thread). */
void worker__notice_received(elastic_worker *w, const char *payload, size_t length);

/* control_client.c */
/* A connection to the agent's unix socket at `path` (the control channel, a
 * warm spare's parking), common/conn.h's elastic__dial_unix within
 * WORKER__CONNECT_AGENT_MS; `who` starts the error text. */
#define WORKER__CONNECT_AGENT_MS 30000
int worker__connect_agent(const char *path, const char *who, int *fd_out);
int worker__control_connect(elastic_worker *w);
void worker__control_shutdown(elastic_worker *w);
int worker__control_send(elastic_worker *w, int type, const char *payload);

/* Hooks (control_client.c). Removing waits for a running hook to return. */
void worker__hook_add(elastic_worker *w, worker__hook *hook);
void worker__hook_remove(elastic_worker *w, worker__hook *hook);
/* A fault a library thread found in this worker (CHANNEL__MSG_FAULT, payload
 * "KEY=value" lines): tells the agent, and when attached makes the next poll
 * wait for the generation the agent will form. */
int worker__report_fault(elastic_worker *w, const char *payload);
/* Waits up to timeout_ms for the current generation to end (an abort, a
 * reconfigure, a fault report, the agent stopping or going away): true when
 * it did, so elastic_worker_poll() acts. The loop (loop.c) uses it after a
 * failed step, which a peer's death usually explains a moment later. */
bool worker__await_change(elastic_worker *w, int timeout_ms);

/* restore_plan.c: the job's restore plan for this rank in a RECONFIGURE or
 * PROMOTE payload becomes the process' ELASTIC_RESTORE_* variables (what
 * elastic_ckpt_restore_begin reads), or they are removed when it has none:
 * a plan from an older generation must not outlive it. Validated first. */
int worker__restore_plan_apply(const char *(*lookup)(void *ctx, const char *name), void *ctx);

/* heartbeat.c: points the heartbeat at a slot (shared or local). */
void worker__heartbeat_bind(elastic_worker *w, channel__hb_slot *slot);

/* store scoping (worker.c): a handle on the generation's key space. */
int worker__scope_store(elastic_worker *w, const char *prefix);

/* stackdump.c: installs the backtrace handler when the signal is still at its
 * default; returns the signal installed or 0. The handler bumps *counter
 * after writing, so the agent knows when the backtrace is out. */
int worker__stackdump_install(int signal_number, uint64_t *counter);
void worker__stackdump_uninstall(uint64_t *counter);

#endif /* ELASTIC_WORKER_INTERNAL_H */

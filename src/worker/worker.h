/*
 * The worker handle's insides, shared by the files of src/worker/: attach and
 * info (worker.c), heartbeats (heartbeat.c), the control thread and poll
 * (control.c), the barrier (barrier.c) and the stack-dump handler (stackdump.c).
 */
#ifndef ELASTIC_WORKER_INTERNAL_H
#define ELASTIC_WORKER_INTERNAL_H

#include "common/common.h"
#include "probe/channel.h"
#include "worker/env.h"

#include <pthread.h>

struct elastic_worker {
    elastic_worker_opts opts;
    worker__env env;                 /* the current generation's view; changed only in poll */

    /* heartbeats: the trainer thread's own copies, mirrored into *slot */
    probe__hb_slot *slot;            /* the shared slot, or &local_slot when there is none */
    probe__hb_slot local_slot;
    probe__hb_region *hb_region;
    uint64_t hb_step, hb_step_ns, hb_beats, hb_interval_sum_ns, hb_interval_steps;
    uint64_t hb_compute_sum_ns, hb_compute_count;
    int stack_signal;                /* the backtrace handler this handle installed, 0: none */

    /* store */
    elastic_store_server *private_server; /* alone: an in-process store */
    elastic_store *root_store;       /* unscoped connection */
    elastic_store *store;            /* scoped to the generation's prefix */
    uint64_t barrier_seq;

    /* control channel */
    int control_fd;                  /* -1 when there is no agent socket */
    pthread_t control_thread;
    bool control_thread_started;
    pthread_mutex_t write_lock;      /* frames come from two threads */

    pthread_mutex_t lock;            /* guards everything below */
    pthread_cond_t changed_cond;
    int changed;                     /* atomic: the generation ended; poll must act */
    bool closing, stopped, channel_closed;
    bool reconfigure_pending;
    char pending_payload[PROBE__MSG_MAX_PAYLOAD + 1];
    size_t pending_length;
    elastic_worker_abort_fn abort_fn;
    void *abort_user;
    elastic_worker_reconfigure_fn reconfigure_fn;
    void *reconfigure_user;
};

/* control.c */
int worker__control_connect(elastic_worker *w);
void worker__control_shutdown(elastic_worker *w);
int worker__control_send(elastic_worker *w, int type, const char *payload);

/* heartbeat.c: points the heartbeat at a slot (shared or local). */
void worker__heartbeat_bind(elastic_worker *w, probe__hb_slot *slot);

/* store scoping (worker.c): a handle on the generation's key space. */
int worker__scope_store(elastic_worker *w, const char *prefix);

/* stackdump.c: installs the backtrace handler when the signal is still at its
 * default; returns the signal installed or 0. The handler bumps *counter
 * after writing, so the agent knows when the backtrace is out. */
int worker__stackdump_install(int signal_number, uint64_t *counter);
void worker__stackdump_uninstall(uint64_t *counter);

#endif /* ELASTIC_WORKER_INTERNAL_H */

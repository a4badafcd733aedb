/*
 * The worker's end of the agent's control socket: a library thread reads
 * abort / reconfigure / stop messages (running the abort hook at once), and
 * elastic_worker_poll() turns them into a reconfiguration on the trainer's
 * thread. The fast path of poll is one atomic load.
 */
#include "common/clock.h"
#include "common/conn.h"
#include "store/store.h"
#include "worker/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int worker__control_send(elastic_worker *w, int type, const char *payload)
{
    if (w->control_fd < 0) return 0;
    pthread_mutex_lock(&w->write_lock);
    int rc = channel__msg_write(w->control_fd, type, payload, strlen(payload));
    pthread_mutex_unlock(&w->write_lock);
    return rc;
}

void worker__hook_add(elastic_worker *w, worker__hook *hook)
{
    pthread_mutex_lock(&w->hooks_lock);
    hook->next = w->hooks;
    w->hooks = hook;
    pthread_mutex_unlock(&w->hooks_lock);
}

void worker__hook_remove(elastic_worker *w, worker__hook *hook)
{
    pthread_mutex_lock(&w->hooks_lock);
    for (worker__hook **at = &w->hooks; *at != NULL; at = &(*at)->next) {
        if (*at != hook) continue;
        *at = hook->next;
        break;
    }
    pthread_mutex_unlock(&w->hooks_lock);
}

int worker__report_fault(elastic_worker *w, const char *payload)
{
    if (w->control_fd < 0) return 0;
    int rc = worker__control_send(w, CHANNEL__MSG_FAULT, payload);
    pthread_mutex_lock(&w->lock);
    /* The agent ends the generation on this report: poll waits for the next. */
    if (rc == 0 && !w->closing) __atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->changed_cond);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

bool worker__await_change(elastic_worker *w, int timeout_ms)
{
    uint64_t deadline = elastic__deadline_ms(timeout_ms);
    pthread_mutex_lock(&w->lock);
    while (__atomic_load_n(&w->changed, __ATOMIC_ACQUIRE) == 0 && !w->stopped &&
           !w->channel_closed && elastic__ms_left(deadline) > 0) {
        struct timespec at = elastic__timespec_at(deadline);
        pthread_cond_timedwait(&w->changed_cond, &w->lock, &at);
    }
    bool changed = __atomic_load_n(&w->changed, __ATOMIC_ACQUIRE) != 0 || w->stopped ||
                   w->channel_closed;
    pthread_mutex_unlock(&w->lock);
    return changed;
}

static void send_generation(elastic_worker *w, int type, uint64_t generation)
{
    char payload[64];
    snprintf(payload, sizeof payload, "GENERATION=%llu\nTIME_NS=%llu\n",
             (unsigned long long)generation, (unsigned long long)elastic__now_ns());
    int rc = worker__control_send(w, type, payload);
    if (rc != 0)
        ELASTIC_LOG_W("worker", "control message %d not sent: %s", type, elastic_last_error());
}

static void handle_abort(elastic_worker *w, char *payload, size_t length)
{
    channel__kv kv;
    const char *reason = "the generation ended";
    if (channel__kv_parse(payload, length, &kv) == 0 && channel__kv_get(&kv, "REASON") != NULL)
        reason = channel__kv_get(&kv, "REASON");
    pthread_mutex_lock(&w->lock);
    uint64_t generation = w->env.info.generation;
    __atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->changed_cond); /* worker__await_change */
    elastic_worker_abort_fn fn = w->abort_fn;
    void *user = w->abort_user;
    pthread_mutex_unlock(&w->lock);
    ELASTIC_LOG_I("worker", "generation %llu aborted: %s", (unsigned long long)generation, reason);
    /* Library waits on this generation's peers (a checkpoint commit) end now:
     * a peer that died would hold them for their whole timeout. */
    if (w->root_store != NULL) store__generation_ended(w->root_store, generation);
    pthread_mutex_lock(&w->hooks_lock);
    for (worker__hook *hook = w->hooks; hook != NULL; hook = hook->next)
        if (hook->on_abort != NULL) hook->on_abort(hook->user, generation, reason);
    pthread_mutex_unlock(&w->hooks_lock);
    if (fn != NULL) fn(user, generation, reason);
    send_generation(w, CHANNEL__MSG_ABORT_ACK, generation);
}

static void handle_reconfigure(elastic_worker *w, const char *payload, size_t length)
{
    pthread_mutex_lock(&w->lock);
    memcpy(w->pending_payload, payload, length + 1);
    w->pending_length = length;
    w->reconfigure_pending = true;
    __atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->changed_cond);
    pthread_mutex_unlock(&w->lock);
}

static void mark_ended(elastic_worker *w, bool stopped)
{
    pthread_mutex_lock(&w->lock);
    if (stopped)
        w->stopped = true;
    else
        w->channel_closed = true;
    if (!w->closing) __atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->changed_cond);
    pthread_mutex_unlock(&w->lock);
}

/* Reads until the socket closes; close() shuts it down to end the loop. */
static void *control_main(void *arg)
{
    elastic_worker *w = arg;
    static _Thread_local char payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    for (;;) {
        channel__msg_header header;
        int rc = channel__msg_read(w->control_fd, -1, &header, payload);
        if (rc != 0) {
            if (rc != ELASTIC_ECLOSED)
                ELASTIC_LOG_W("worker", "control channel: %s", elastic_last_error());
            mark_ended(w, false);
            return NULL;
        }
        if (header.type == CHANNEL__MSG_ABORT)
            handle_abort(w, payload, header.length);
        else if (header.type == CHANNEL__MSG_RECONFIGURE)
            handle_reconfigure(w, payload, header.length);
        else if (header.type == CHANNEL__MSG_STOP)
            mark_ended(w, true);
        else if (header.type == CHANNEL__MSG_NOTICE)
            worker__notice_received(w, payload, header.length);
        else
            ELASTIC_LOG_W("worker", "control channel: unexpected message type %u ignored",
                          header.type);
    }
}

int worker__connect_agent(const char *path, const char *who, int *fd_out)
{
    return elastic__dial_unix(path, elastic__deadline_ms(WORKER__CONNECT_AGENT_MS), who, fd_out);
}

/* The thread must not take the stack-dump signal: the trainer's thread should. */
static int start_thread(elastic_worker *w)
{
    sigset_t block, saved;
    sigfillset(&block);
    pthread_sigmask(SIG_BLOCK, &block, &saved);
    int err = pthread_create(&w->control_thread, NULL, control_main, w);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (err != 0) return elastic__fail(ELASTIC_ESYS, "control thread: %s", strerror(err));
    w->control_thread_started = true;
    return 0;
}

int worker__control_connect(elastic_worker *w)
{
    int rc = worker__connect_agent(w->env.agent_socket, "worker", &w->control_fd);
    if (rc != 0) return rc;
    char hello[128];
    snprintf(hello, sizeof hello, "SLOT=%d\nPID=%ld\nGENERATION=%llu\nTIME_NS=%llu\n",
             w->env.heartbeat_slot, (long)getpid(), (unsigned long long)w->env.info.generation,
             (unsigned long long)elastic__now_ns());
    rc = worker__control_send(w, CHANNEL__MSG_HELLO, hello);
    return rc != 0 ? rc : start_thread(w);
}

void worker__control_shutdown(elastic_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->closing = true;
    pthread_mutex_unlock(&w->lock);
    if (w->control_fd >= 0) shutdown(w->control_fd, SHUT_RDWR);
    if (w->control_thread_started) pthread_join(w->control_thread, NULL);
    w->control_thread_started = false;
    if (w->control_fd >= 0) close(w->control_fd);
    w->control_fd = -1;
}

/* Waits for the reconfigure message; copies it out under the lock. */
static int wait_for_generation(elastic_worker *w, char *payload, size_t *length)
{
    uint64_t deadline = elastic__deadline_ms(w->opts.reconfigure_timeout_ms);
    pthread_mutex_lock(&w->lock);
    while (!w->reconfigure_pending && !w->stopped && !w->channel_closed &&
           elastic__ms_left(deadline) > 0) {
        struct timespec at = elastic__timespec_at(deadline);
        pthread_cond_timedwait(&w->changed_cond, &w->lock, &at);
    }
    int rc = 0;
    if (w->reconfigure_pending) {
        memcpy(payload, w->pending_payload, w->pending_length + 1);
        *length = w->pending_length;
        w->reconfigure_pending = false;
        __atomic_store_n(&w->changed, 0, __ATOMIC_RELEASE);
    } else if (w->stopped || w->channel_closed) {
        rc = elastic__fail(ELASTIC_ECLOSED, "the agent %s",
                           w->stopped ? "stopped this worker" : "went away");
    } else {
        rc = elastic__fail(ELASTIC_ETIMEDOUT, "no new generation within %d ms",
                           w->opts.reconfigure_timeout_ms);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static const char *kv_lookup(void *ctx, const char *name)
{
    return channel__kv_get(ctx, name);
}

/* Validates the new generation's environment and switches to it. */
static int apply_generation(elastic_worker *w, char *payload, size_t length)
{
    channel__kv kv;
    int rc = channel__kv_parse(payload, length, &kv);
    worker__env next;
    if (rc == 0) rc = worker__env_parse(kv_lookup, &kv, &next);
    if (rc == 0 && (next.mode != WORKER__AGENT || next.info.generation <= w->env.info.generation))
        rc = elastic__fail(ELASTIC_EPROTO, "reconfigure message: not a newer generation");
    if (rc == 0 && strcmp(next.heartbeat_shm, w->env.heartbeat_shm) != 0)
        rc = elastic__fail(ELASTIC_EPROTO, "reconfigure message: the heartbeat file changed");
    if (rc == 0) rc = worker__scope_store(w, next.store_prefix);
    if (rc == 0) rc = worker__restore_plan_apply(kv_lookup, &kv);
    if (rc != 0) return rc;
    next.info.attached = w->env.info.attached;
    snprintf(next.agent_socket, sizeof next.agent_socket, "%s", w->env.agent_socket);
    pthread_mutex_lock(&w->lock);
    w->env = next;
    pthread_mutex_unlock(&w->lock);
    if (w->hb_region != NULL && next.heartbeat_slot >= 0)
        worker__heartbeat_bind(w, channel__hb_slot_at(w->hb_region, (unsigned)next.heartbeat_slot));
    w->barrier_seq = 0;
    return 0;
}

ELASTIC_EXTERN int elastic_worker_poll(elastic_worker *w)
{
    if (w == NULL) return ELASTIC_EINVAL;
    if (__atomic_load_n(&w->changed, __ATOMIC_ACQUIRE) == 0) return 0;
    elastic__clear_error();
    static _Thread_local char payload[CHANNEL__MSG_MAX_PAYLOAD + 1];
    size_t length = 0;
    int rc = wait_for_generation(w, payload, &length);
    if (rc == 0) rc = apply_generation(w, payload, length);
    if (rc != 0) return rc;
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_worker_get_info(w, &info);
    /* Without hooks_lock: a rebuild may take long and an abort of the new
     * generation must still reach the hooks. Only this (the trainer's) thread
     * adds or removes hooks, so the list cannot change under us. */
    for (worker__hook *hook = w->hooks; hook != NULL; hook = hook->next)
        if (hook->on_reconfigure != NULL) hook->on_reconfigure(hook->user, &info);
    pthread_mutex_lock(&w->lock);
    elastic_worker_reconfigure_fn fn = w->reconfigure_fn;
    void *user = w->reconfigure_user;
    pthread_mutex_unlock(&w->lock);
    if (fn != NULL) fn(user, &info);
    send_generation(w, CHANNEL__MSG_READY, info.generation);
    return ELASTIC_ERECONFIGURE;
}

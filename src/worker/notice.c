/*
 * Stop notices: the job is being stopped (its agent got SIGTERM: scancel,
 * preemption, the end of a time limit) and the worker may save before it is
 * killed. Two ways in: the agent's CHANNEL__MSG_NOTICE (with the grace it
 * gives), and, when the trainer asked for it, a SIGTERM to the worker itself
 * (Slurm signals every process of a step, not only the agent). Asking is one
 * atomic load, so a trainer can check at every step.
 */
#include "worker/worker.h"

#include "common/clock.h"
#include "common/parse_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>

/* SIGTERM seen by the handler (process-wide: signals are). */
static volatile sig_atomic_t sigterm_seen;

static void on_sigterm(int signum)
{
    (void)signum;
    sigterm_seen = 1;
}

void worker__notice_received(elastic_worker *w, const char *payload, size_t length)
{
    channel__kv kv;
    int64_t grace = -1;
    const char *reason = "the job is stopping";
    if (channel__kv_parse((char *)payload, length, &kv) == 0) {
        const char *text = channel__kv_get(&kv, "GRACE_MS");
        if (text != NULL && elastic__parse_i64(NULL, text, 0, INT32_MAX, &grace) != 0) grace = -1;
        if (channel__kv_get(&kv, "REASON") != NULL) reason = channel__kv_get(&kv, "REASON");
    }
    pthread_mutex_lock(&w->lock);
    w->notice_deadline_ms = grace >= 0 ? elastic__now_ms() + (uint64_t)grace : 0;
    snprintf(w->notice_reason, sizeof w->notice_reason, "%s", reason);
    pthread_mutex_unlock(&w->lock);
    __atomic_store_n(&w->notice, 1, __ATOMIC_RELEASE);
    ELASTIC_LOG_I("worker", "stop notice: %s (grace %lld ms)", reason, (long long)grace);
}

ELASTIC_EXTERN int elastic_worker_stop_notice(elastic_worker *w, int *grace_left_ms)
{
    if (w == NULL) return 0;
    bool noticed = __atomic_load_n(&w->notice, __ATOMIC_ACQUIRE) != 0;
    if (!noticed && !(w->sigterm_notice && sigterm_seen)) return 0;
    if (grace_left_ms != NULL) {
        pthread_mutex_lock(&w->lock);
        uint64_t deadline = w->notice_deadline_ms, now = elastic__now_ms();
        pthread_mutex_unlock(&w->lock);
        *grace_left_ms = deadline == 0 ? -1 : deadline > now ? (int)(deadline - now) : 0;
    }
    return 1;
}

ELASTIC_EXTERN int elastic_worker_notice_on_sigterm(elastic_worker *w)
{
    elastic__clear_error();
    if (w == NULL) return elastic__fail(ELASTIC_EINVAL, "elastic_worker_notice_on_sigterm: NULL");
    struct sigaction old;
    if (sigaction(SIGTERM, NULL, &old) != 0)
        return elastic__fail(ELASTIC_ESYS, "sigaction(SIGTERM): %s", strerror(errno));
    if (old.sa_handler == on_sigterm) {
        w->sigterm_notice = true;
        return 0;
    }
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
        return elastic__fail(ELASTIC_EBUSY,
                             "SIGTERM already has a handler: the trainer's own stays in charge");
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigterm;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &action, NULL) != 0)
        return elastic__fail(ELASTIC_ESYS, "sigaction(SIGTERM): %s", strerror(errno));
    w->sigterm_notice = true;
    return 0;
}

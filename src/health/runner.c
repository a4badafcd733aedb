/*
 * Rounds on a thread of their own: the first at once, then every interval,
 * and at once when asked (before a rejoin) or when an Xid arrives. Each report
 * goes to the owner's deliver callback on this thread; the owner posts what it
 * needs to its own loop. A round may block (the site command, up to its
 * timeout), which is why it is not run on the owner's loop.
 */
#include "common/clock.h"
#include "health/health.h"

#include <pthread.h>
#include <stdlib.h>

struct health__runner {
    health__monitor *monitor;
    health__report *report;
    int interval_ms;
    health__deliver_fn deliver;
    void *arg;
    pthread_t thread;

    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t wake;
    bool requested, stopping, exited;
    uint64_t started; /* rounds started so far */
};

static void on_xid(void *arg)
{
    health__runner_now(arg);
}

static void *runner_main(void *arg)
{
    health__runner *runner = arg;
    for (;;) {
        pthread_mutex_lock(&runner->lock);
        runner->started++;
        pthread_mutex_unlock(&runner->lock);
        health__round(runner->monitor, runner->report);
        pthread_mutex_lock(&runner->lock);
        bool stopped_meanwhile = runner->stopping; /* its site command was cut short: no verdict */
        pthread_mutex_unlock(&runner->lock);
        if (!stopped_meanwhile) runner->deliver(runner->report, runner->arg);
        pthread_mutex_lock(&runner->lock);
        uint64_t deadline = runner->interval_ms > 0
                                ? elastic__now_ms() + (uint64_t)runner->interval_ms
                                : UINT64_MAX;
        while (!runner->requested && !runner->stopping && elastic__ms_left(deadline) > 0) {
            struct timespec at = elastic__timespec_at(deadline);
            pthread_cond_timedwait(&runner->wake, &runner->lock, &at);
        }
        bool stopping = runner->stopping;
        runner->requested = false;
        if (stopping) {
            runner->exited = true;
            pthread_cond_broadcast(&runner->wake);
        }
        pthread_mutex_unlock(&runner->lock);
        if (stopping) return NULL;
    }
}

int health__runner_start(const health__config *config, int interval_ms, health__deliver_fn deliver,
                         void *arg, health__runner **out)
{
    health__runner *runner = calloc(1, sizeof *runner);
    health__report *report = malloc(sizeof *report);
    if (runner == NULL || report == NULL) {
        free(runner);
        free(report);
        return elastic__fail(ELASTIC_ENOMEM, "health: out of memory");
    }
    runner->report = report;
    runner->interval_ms = interval_ms;
    runner->deliver = deliver;
    runner->arg = arg;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&runner->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&runner->lock, NULL);
    health__config own = *config;
    own.on_xid = on_xid;
    own.on_xid_arg = runner;
    int rc = health__open(&own, &runner->monitor);
    if (rc == 0 && pthread_create(&runner->thread, NULL, runner_main, runner) != 0) {
        health__close(runner->monitor);
        rc = elastic__fail(ELASTIC_EIO, "health: cannot start the check thread");
    }
    if (rc != 0) {
        pthread_cond_destroy(&runner->wake);
        pthread_mutex_destroy(&runner->lock);
        free(report);
        free(runner);
        return rc;
    }
    *out = runner;
    return 0;
}

uint64_t health__runner_now(health__runner *runner)
{
    pthread_mutex_lock(&runner->lock);
    uint64_t fresh = runner->started + 1;
    if (runner->started > 0) runner->requested = true; /* else the first round is about to start */
    pthread_cond_broadcast(&runner->wake);
    pthread_mutex_unlock(&runner->lock);
    return fresh;
}

#define STOP_WAIT_MS 5000

void health__runner_stop(health__runner *runner)
{
    if (runner == NULL) return;
    health__cancel(runner->monitor); /* a site command in the round ends now */
    pthread_mutex_lock(&runner->lock);
    runner->stopping = true;
    pthread_cond_broadcast(&runner->wake);
    uint64_t deadline = elastic__now_ms() + STOP_WAIT_MS;
    while (!runner->exited && elastic__ms_left(deadline) > 0) {
        struct timespec at = elastic__timespec_at(deadline);
        pthread_cond_timedwait(&runner->wake, &runner->lock, &at);
    }
    bool exited = runner->exited;
    pthread_mutex_unlock(&runner->lock);
    if (!exited) {
        /* An NVML call the driver never returns from (a hung GPU): the thread
         * keeps the runner's memory; the process is on its way out. */
        ELASTIC_LOG_W("health", "the health check thread did not stop within %d ms: left running",
                      STOP_WAIT_MS);
        pthread_detach(runner->thread);
        return;
    }
    pthread_join(runner->thread, NULL); /* it has returned or is returning */
    health__close(runner->monitor);     /* stops the Xid watcher: no on_xid after this */
    pthread_cond_destroy(&runner->wake);
    pthread_mutex_destroy(&runner->lock);
    free(runner->report);
    free(runner);
}

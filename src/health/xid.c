/*
 * Xids: the driver's error reports, delivered through an NVML event set. A
 * watcher thread waits on the set (xid_poll_ms at a time, so stopping is
 * bounded) and keeps what arrives in a ring the next round drains; the owner's
 * on_xid callback lets it run that round at once.
 */
#include "common/clock.h"
#include "health/health.h"
#include "health/nvml.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The Xids that mean the GPU (or its memory, NVLink or firmware) is broken,
 * from NVIDIA's Xid catalog; docs/HEALTH.md has the same table. */
static const struct {
    unsigned xid;
    health__verdict verdict;
    const char *meaning;
} critical[] = {
    { 48, HEALTH__FATAL, "double-bit ECC error in GPU memory" },
    { 63, HEALTH__WARNING,
      "a row remap (or page retirement) was recorded; a GPU reset applies it" },
    { 64, HEALTH__FATAL, "a row remap (or page retirement) failed: the memory error stays" },
    { 74, HEALTH__FATAL, "NVLink error: a link to a peer GPU or switch failed" },
    { 79, HEALTH__FATAL, "the GPU has fallen off the bus" },
    { 94, HEALTH__FATAL,
      "contained ECC error: the process using the memory was ended, reset the GPU" },
    { 95, HEALTH__FATAL, "uncontained ECC error: every process on the GPU is affected, reset it" },
    { 119, HEALTH__FATAL, "GSP firmware timed out (RPC timeout)" },
    { 120, HEALTH__FATAL, "GSP firmware error" },
    { 154, HEALTH__WARNING,
      "the GPU's recovery action changed (the recovery_action check reads it)" },
};

const char *health__xid_meaning(unsigned xid, health__verdict *verdict)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(critical); i++)
        if (critical[i].xid == xid) {
            if (verdict != NULL) *verdict = critical[i].verdict;
            return critical[i].meaning;
        }
    /* Others (13, 31, 43, ...) are most often the application's own faults. */
    if (verdict != NULL) *verdict = HEALTH__WARNING;
    return "not a hardware Xid (often the application's fault; see NVIDIA's Xid catalog)";
}

#define RING 64

struct health__xid_watch {
    const nvml__api *api;
    nvml__event_set set;
    nvml__device devices[HEALTH__MAX_GPUS];
    int count;
    unsigned poll_ms;
    void (*on_xid)(void *);
    void *on_xid_arg;
    pthread_t thread;

    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t wake;
    bool stopping;
    health__xid ring[RING];
    int head, used, lost;
};

static int index_of(const health__xid_watch *watch, nvml__device device)
{
    for (int i = 0; i < watch->count; i++)
        if (watch->devices[i] == device) return i;
    return -1;
}

static void *watch_main(void *arg)
{
    health__xid_watch *watch = arg;
    for (;;) {
        pthread_mutex_lock(&watch->lock);
        bool stopping = watch->stopping;
        pthread_mutex_unlock(&watch->lock);
        if (stopping) return NULL;
        nvml__event_data data;
        memset(&data, 0, sizeof data);
        int rc = watch->api->event_set_wait(watch->set, &data, watch->poll_ms);
        if (rc == NVML__ERROR_TIMEOUT) continue;
        if (rc != NVML__SUCCESS) {
            /* A lost GPU makes the wait fail at once: pause for a poll so the
             * thread does not spin (the rounds report the GPU itself). */
            pthread_mutex_lock(&watch->lock);
            if (!watch->stopping) {
                struct timespec at = elastic__timespec_at(elastic__now_ms() + watch->poll_ms);
                pthread_cond_timedwait(&watch->wake, &watch->lock, &at);
            }
            pthread_mutex_unlock(&watch->lock);
            continue;
        }
        if ((data.event_type & NVML__EVENT_TYPE_XID_CRITICAL_ERROR) == 0) continue;
        health__xid xid = { .gpu = index_of(watch, data.device),
                            .xid = (unsigned)data.event_data,
                            .wall_ms = elastic__wall_ms() };
        pthread_mutex_lock(&watch->lock);
        if (watch->used == RING) {
            watch->head = (watch->head + 1) % RING; /* the oldest goes */
            watch->used--;
            watch->lost++;
        }
        watch->ring[(watch->head + watch->used) % RING] = xid;
        watch->used++;
        pthread_mutex_unlock(&watch->lock);
        if (watch->on_xid != NULL) watch->on_xid(watch->on_xid_arg);
    }
}

health__xid_watch *health__xid_watch_start(const nvml__api *api, void *const *devices, int count,
                                           const health__config *config)
{
    if (api->event_set_create == NULL || api->device_register_events == NULL ||
        api->event_set_wait == NULL || api->event_set_free == NULL) {
        ELASTIC_LOG_W("health", "this NVML has no event sets: Xids are not watched");
        return NULL;
    }
    health__xid_watch *watch = calloc(1, sizeof *watch);
    if (watch == NULL) return NULL;
    watch->api = api;
    watch->count = count < HEALTH__MAX_GPUS ? count : HEALTH__MAX_GPUS;
    watch->poll_ms = config->xid_poll_ms > 0 ? (unsigned)config->xid_poll_ms : 500u;
    watch->on_xid = config->on_xid;
    watch->on_xid_arg = config->on_xid_arg;
    int rc = api->event_set_create(&watch->set);
    if (rc != NVML__SUCCESS) {
        ELASTIC_LOG_W("health", "nvmlEventSetCreate: %s: Xids are not watched",
                      nvml__error(api, rc));
        free(watch);
        return NULL;
    }
    int registered = 0;
    for (int i = 0; i < watch->count; i++) {
        watch->devices[i] = (nvml__device)devices[i];
        if (devices[i] == NULL) continue;
        rc = api->device_register_events(watch->devices[i], NVML__EVENT_TYPE_XID_CRITICAL_ERROR,
                                         watch->set);
        if (rc == NVML__SUCCESS)
            registered++;
        else
            ELASTIC_LOG_W("health", "GPU %d: Xid events not available: %s", i,
                          nvml__error(api, rc));
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&watch->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&watch->lock, NULL);
    if (registered == 0 || pthread_create(&watch->thread, NULL, watch_main, watch) != 0) {
        if (registered > 0) ELASTIC_LOG_W("health", "cannot start the Xid watcher thread");
        api->event_set_free(watch->set);
        pthread_cond_destroy(&watch->wake);
        pthread_mutex_destroy(&watch->lock);
        free(watch);
        return NULL;
    }
    return watch;
}

int health__xid_drain(health__xid_watch *watch, health__xid *out, int max, int *lost)
{
    int n = 0;
    pthread_mutex_lock(&watch->lock);
    while (watch->used > 0 && n < max) {
        out[n++] = watch->ring[watch->head];
        watch->head = (watch->head + 1) % RING;
        watch->used--;
    }
    *lost = watch->lost;
    watch->lost = 0;
    pthread_mutex_unlock(&watch->lock);
    return n;
}

void health__xid_watch_stop(health__xid_watch *watch)
{
    if (watch == NULL) return;
    pthread_mutex_lock(&watch->lock);
    watch->stopping = true;
    pthread_cond_broadcast(&watch->wake);
    pthread_mutex_unlock(&watch->lock);
    pthread_join(watch->thread, NULL); /* within one poll: the wait is bounded */
    watch->api->event_set_free(watch->set);
    pthread_cond_destroy(&watch->wake);
    pthread_mutex_destroy(&watch->lock);
    free(watch);
}

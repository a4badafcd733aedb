/*
 * The watchdog: one library thread per communicator that polls NCCL's async
 * error and the CUDA events elastic_nccl_watch() recorded after collectives.
 * A failed communicator or a collective past its deadline is reported to the
 * agent (nccl_error / nccl_timeout) and aborted, so the trainer thread
 * blocked on it returns instead of waiting NCCL's ten minutes.
 */
#include "common/clock.h"
#include "nccl/nccl.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>

/* ---- the ring of watched collectives (callers hold c->lock) ------------------- */

void nccl__watch_clear(elastic_nccl_comm *c)
{
    while (c->count > 0) {
        nccl__watch_slot *slot = &c->slots[c->head];
        c->spare_events[c->spare_count++] = slot->event;
        c->head = (c->head + 1) % NCCL__WATCH_SLOTS;
        c->count--;
    }
}

static int take_event(elastic_nccl_comm *c, void **event)
{
    if (c->spare_count > 0) {
        *event = c->spare_events[--c->spare_count];
        return 0;
    }
    int err = c->api->cuda_event_create_with_flags(event, CUDA__EVENT_DISABLE_TIMING);
    return err == CUDA__SUCCESS ? 0
                                : elastic__fail(ELASTIC_EIO, "nccl: cudaEventCreateWithFlags: %s",
                                                c->api->cuda_get_error_string(err));
}

ELASTIC_EXTERN int elastic_nccl_watch(elastic_nccl_comm *comm, void *stream)
{
    if (comm == NULL) return elastic__fail(ELASTIC_EINVAL, "nccl: comm is NULL");
    pthread_mutex_lock(&comm->lock);
    int rc = 0;
    if (comm->state != NCCL__STATE_READY) {
        rc =
            elastic__fail(ELASTIC_ERECONFIGURE, "nccl: communicator \"%s\" was aborted", comm->tag);
    } else if (comm->count == NCCL__WATCH_SLOTS) {
        /* Full: the newest slot now covers this collective too; its deadline
         * still counts from its first one, which is the stricter choice. */
        nccl__watch_slot *newest = &comm->slots[(comm->head + comm->count - 1) % NCCL__WATCH_SLOTS];
        int err = comm->api->cuda_event_record(newest->event, stream);
        if (err != CUDA__SUCCESS)
            rc = elastic__fail(ELASTIC_EIO, "nccl: cudaEventRecord: %s",
                               comm->api->cuda_get_error_string(err));
        else
            newest->collective = ++comm->collectives;
    } else {
        void *event = NULL;
        rc = take_event(comm, &event);
        int err = rc == 0 ? comm->api->cuda_event_record(event, stream) : CUDA__SUCCESS;
        if (err != CUDA__SUCCESS) {
            comm->spare_events[comm->spare_count++] = event;
            rc = elastic__fail(ELASTIC_EIO, "nccl: cudaEventRecord: %s",
                               comm->api->cuda_get_error_string(err));
        } else if (rc == 0) {
            nccl__watch_slot *slot = &comm->slots[(comm->head + comm->count) % NCCL__WATCH_SLOTS];
            *slot = (nccl__watch_slot){ .event = event,
                                        .collective = ++comm->collectives,
                                        .since_ns = elastic__now_ns() };
            comm->count++;
        }
    }
    pthread_mutex_unlock(&comm->lock);
    return rc;
}

/* ---- faults -------------------------------------------------------------------- */

typedef struct nccl__fault {
    const char *probe;   /* "nccl_timeout" or "nccl_error" */
    uint64_t generation; /* copied under the lock: a rebuild may change them */
    int rank;
    uint64_t collective;
    uint64_t waited_ms;
    char reason[320];
} nccl__fault;

/* Newlines would end the control message's line: NCCL's messages may hold some. */
static void one_line(char *text)
{
    for (; *text != '\0'; text++)
        if (*text == '\n' || *text == '\r') *text = ' ';
}

/* Tells the agent, then aborts: the report is one local write, the abort may
 * take NCCL a while. Called without the lock, so the agent's answer to the
 * report (its own abort, then the next generation) may overtake this abort. */
static void raise_fault(elastic_nccl_comm *c, nccl__fault *fault)
{
    one_line(fault->reason);
    ELASTIC_LOG_E("nccl", "%s", fault->reason);
    char payload[1024];
    snprintf(payload, sizeof payload,
             "PROBE=%s\nREASON=%s\nGENERATION=%" PRIu64 "\nRANK=%d\nCOMM=%s\nCOLLECTIVE=%" PRIu64
             "\nWAITED_MS=%" PRIu64 "\nTIME_NS=%" PRIu64 "\n",
             fault->probe, fault->reason, fault->generation, fault->rank, c->tag, fault->collective,
             fault->waited_ms, elastic__now_ns());
    if (worker__report_fault(c->worker, payload) != 0)
        ELASTIC_LOG_W("nccl", "the fault was not reported to the agent: %s", elastic_last_error());
    nccl__abort_faulted(c, fault->probe);
}

/* Checks NCCL's async error (under the lock). true: a fault was found. */
static bool check_async_error(elastic_nccl_comm *c, nccl__fault *fault)
{
    int async = NCCL__SUCCESS;
    int result = c->api->comm_get_async_error(c->nccl, &async);
    int error = result != NCCL__SUCCESS ? result : async;
    if (error == NCCL__SUCCESS || error == NCCL__IN_PROGRESS) return false;
    const char *text = c->api->get_error_string(error);
    const char *last = c->api->get_last_error != NULL ? c->api->get_last_error(c->nccl) : NULL;
    fault->probe = "nccl_error";
    fault->collective = c->collectives;
    fault->waited_ms = 0;
    snprintf(fault->reason, sizeof fault->reason,
             "nccl_error: rank %d, communicator \"%s\", after collective %" PRIu64
             ": %s (%d)%s%.160s",
             c->rank, c->tag, c->collectives, text != NULL ? text : "NCCL error", error,
             last != NULL && *last != '\0' ? ": " : "", last != NULL ? last : "");
    return true;
}

/* Retires completed collectives; a pending one past its deadline is a fault. */
static bool check_collectives(elastic_nccl_comm *c, uint64_t now_ns, nccl__fault *fault)
{
    while (c->count > 0) {
        nccl__watch_slot *slot = &c->slots[c->head];
        int err = c->api->cuda_event_query(slot->event);
        if (err == CUDA__SUCCESS) {
            c->spare_events[c->spare_count++] = slot->event;
            c->head = (c->head + 1) % NCCL__WATCH_SLOTS;
            c->count--;
            continue;
        }
        uint64_t waited_ms = (now_ns - slot->since_ns) / 1000000u;
        fault->collective = slot->collective;
        fault->waited_ms = waited_ms;
        if (err !=
            CUDA__ERROR_NOT_READY) { /* a sticky CUDA error: the device is lost for this process */
            fault->probe = "nccl_error";
            snprintf(fault->reason, sizeof fault->reason,
                     "nccl_error: rank %d, communicator \"%s\", collective %" PRIu64
                     ": CUDA error %d (%s)",
                     c->rank, c->tag, slot->collective, err, c->api->cuda_get_error_string(err));
            return true;
        }
        int timeout_ms = c->opts.collective_timeout_ms;
        if (timeout_ms <= 0 || waited_ms <= (uint64_t)timeout_ms) return false;
        fault->probe = "nccl_timeout";
        snprintf(fault->reason, sizeof fault->reason,
                 "nccl_timeout: rank %d, communicator \"%s\", collective %" PRIu64
                 " not done after %" PRIu64 " ms (deadline %d ms)",
                 c->rank, c->tag, slot->collective, waited_ms, timeout_ms);
        return true;
    }
    return false;
}

static void *watchdog_main(void *arg)
{
    elastic_nccl_comm *c = arg;
    int err = c->api->cuda_set_device(c->device); /* events belong to the device's context */
    if (err != CUDA__SUCCESS)
        ELASTIC_LOG_W("nccl", "watchdog: cudaSetDevice(%d) failed (%d)", c->device, err);
    pthread_mutex_lock(&c->lock);
    while (!c->stopping) {
        struct timespec at =
            elastic__timespec_at(elastic__now_ms() + (uint64_t)c->opts.watchdog_interval_ms);
        pthread_cond_timedwait(&c->wake, &c->lock, &at);
        if (c->stopping || c->state != NCCL__STATE_READY || c->faulted) continue;
        nccl__fault fault;
        bool found =
            check_async_error(c, &fault) || check_collectives(c, elastic__now_ns(), &fault);
        if (!found) continue;
        c->faulted = true; /* once per build: the abort that follows is the answer */
        fault.generation = c->generation;
        fault.rank = c->rank;
        pthread_mutex_unlock(&c->lock);
        raise_fault(c, &fault);
        pthread_mutex_lock(&c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

int nccl__watchdog_start(elastic_nccl_comm *c)
{
    sigset_t block, saved;
    sigfillset(&block);
    pthread_sigmask(SIG_BLOCK, &block, &saved); /* signals are the trainer thread's business */
    int err = pthread_create(&c->watchdog, NULL, watchdog_main, c);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (err != 0) return elastic__fail(ELASTIC_ESYS, "nccl: watchdog thread: %s", strerror(err));
    c->watchdog_started = true;
    return 0;
}

void nccl__watchdog_stop(elastic_nccl_comm *c)
{
    if (!c->watchdog_started) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = true;
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->watchdog, NULL);
    c->watchdog_started = false;
    pthread_mutex_lock(&c->lock);
    nccl__watch_clear(c);
    for (unsigned i = 0; i < c->spare_count; i++) c->api->cuda_event_destroy(c->spare_events[i]);
    c->spare_count = 0;
    pthread_mutex_unlock(&c->lock);
}

/*
 * The heartbeat hot path: a coarse vDSO clock read and a handful of atomic
 * stores to this worker's own slot in the shared file (one cache line, one
 * writer), so calling it every step costs nanoseconds and no system call.
 */
#include "common/clock.h"
#include "worker/worker.h"

#include <time.h>
#include <unistd.h>

/* CLOCK_MONOTONIC_COARSE: the same timebase as CLOCK_MONOTONIC at tick
 * resolution (1-4 ms) for a quarter of the cost under a paravirtual clock.
 * Enough for both uses: a hang is seconds, and step times are sums of
 * intervals that telescope, so the error over a whole window is one tick. */
static inline uint64_t coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void worker__heartbeat_bind(elastic_worker *w, channel__hb_slot *slot)
{
    w->slot = slot;
    /* Re-publish what this process reported so far (the agent zeroes a slot
     * before giving it to a worker; a survivor keeps its history). */
    __atomic_store_n(&slot->step, w->hb_step, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->interval_sum_ns, w->hb_interval_sum_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->interval_steps, w->hb_interval_steps, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->compute_sum_ns, w->hb_compute_sum_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->compute_count, w->hb_compute_count, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->beats, w->hb_beats, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&slot->stack_signal, w->stack_signal, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->last_beat_ns, w->hb_beats > 0 ? coarse_now_ns() : 0, __ATOMIC_RELEASE);
}

ELASTIC_EXTERN int elastic_worker_heartbeat(elastic_worker *w, uint64_t step)
{
    if (w == NULL) return ELASTIC_EINVAL;
    uint64_t now = coarse_now_ns();
    channel__hb_slot *slot = w->slot;
    if (w->hb_beats == 0) {
        w->hb_step_ns = now;
    } else if (step > w->hb_step) {
        /* Time since the step last advanced, spread over the steps it covers. */
        w->hb_interval_sum_ns += now - w->hb_step_ns;
        w->hb_interval_steps += step - w->hb_step;
        w->hb_step_ns = now;
        __atomic_store_n(&slot->interval_sum_ns, w->hb_interval_sum_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->interval_steps, w->hb_interval_steps, __ATOMIC_RELAXED);
    }
    w->hb_step = step;
    w->hb_beats++;
    __atomic_store_n(&slot->step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->beats, w->hb_beats, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->last_beat_ns, now, __ATOMIC_RELEASE);
    return 0;
}

ELASTIC_EXTERN int elastic_worker_report_step_time(elastic_worker *w, uint64_t compute_ns)
{
    if (w == NULL || compute_ns > UINT64_C(86400000000000))
        return ELASTIC_EINVAL; /* a day bounds a step */
    w->hb_compute_sum_ns += compute_ns;
    w->hb_compute_count++;
    __atomic_store_n(&w->slot->compute_sum_ns, w->hb_compute_sum_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&w->slot->compute_count, w->hb_compute_count, __ATOMIC_RELEASE);
    return 0;
}

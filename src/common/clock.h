/*
 * Monotonic time and deadlines. Every wait in the library is bounded by a
 * deadline computed from these, never by the wall clock.
 */
#ifndef ELASTIC_CLOCK_H
#define ELASTIC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t elastic__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t elastic__now_ms(void)
{
    return elastic__now_ns() / 1000000u;
}

/* Wall-clock milliseconds since the epoch, for timestamps shown to people. */
static inline uint64_t elastic__wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A deadline timeout_ms from now; negative timeouts mean "no deadline". */
static inline uint64_t elastic__deadline_ms(int timeout_ms)
{
    return timeout_ms < 0 ? UINT64_MAX : elastic__now_ms() + (uint64_t)timeout_ms;
}

/* Milliseconds left until a deadline (0 once passed; INT32_MAX-capped). */
static inline int elastic__ms_left(uint64_t deadline_ms)
{
    uint64_t now = elastic__now_ms();
    if (deadline_ms == UINT64_MAX) return INT32_MAX;
    if (deadline_ms <= now) return 0;
    uint64_t left = deadline_ms - now;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

/* A CLOCK_MONOTONIC timespec for pthread_cond_timedwait: condvars in this
 * library are created with pthread_condattr_setclock(CLOCK_MONOTONIC). An
 * endless deadline becomes an hour away; callers re-check and wait again. */
static inline struct timespec elastic__timespec_at(uint64_t deadline_ms)
{
    struct timespec ts;
    if (deadline_ms == UINT64_MAX) deadline_ms = elastic__now_ms() + 3600u * 1000u;
    ts.tv_sec = (time_t)(deadline_ms / 1000u);
    ts.tv_nsec = (long)(deadline_ms % 1000u) * 1000000L;
    return ts;
}

#endif /* ELASTIC_CLOCK_H */

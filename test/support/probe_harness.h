/*
 * A stand-in agent for the probe integration tests: a libuv loop running the
 * monitor, a store server, and helper workers spawned into the monitor's
 * slots with the environment an agent gives them.
 */
#ifndef TEST_PROBE_HARNESS_H
#define TEST_PROBE_HARNESS_H

#include "test.h"
#include "probe/probe.h"

#define HARNESS_MAX_WORKERS 4

typedef struct harness {
    uv_loop_t loop;
    uv_timer_t tick;
    probe__monitor_opts opts;
    probe__monitor *monitor;
    elastic_store_server *server;
    char endpoint[64];
    uint64_t generation;
    int world_size;
    uv_process_t procs[HARNESS_MAX_WORKERS];
    bool running[HARNESS_MAX_WORKERS];
    bool handle_open[HARNESS_MAX_WORKERS];
    int pids[HARNESS_MAX_WORKERS];
    int64_t exit_status[HARNESS_MAX_WORKERS];
    int log_fds[HARNESS_MAX_WORKERS];
    probe__failure failures[8];
    int failure_count;
    probe__failure stragglers[4];
    int straggler_count;
    int hellos[HARNESS_MAX_WORKERS], abort_acks[HARNESS_MAX_WORKERS], readies[HARNESS_MAX_WORKERS];
    uint64_t ready_generation[HARNESS_MAX_WORKERS];
    const char *program; /* what harness_spawn starts; NULL: the probe_worker helper */
} harness;

/* Fills h->opts with test defaults (the caller then adjusts and starts). */
void harness_init(harness *h, unsigned workers);
void harness_start(harness *h);
/* Spawns the helper `probe_worker args...` in local_rank's slot with global rank. */
void harness_spawn(harness *h, int local_rank, int rank, const char *const *args);
void harness_kill(harness *h, int local_rank);
/* Runs the loop until pred(h) holds; fails the test after timeout_ms. */
void harness_run_until(harness *h, bool (*pred)(harness *), int timeout_ms, const char *what);
void harness_new_generation(harness *h, int world_size);
/* The worker's log so far (static buffer). */
const char *harness_log(harness *h, int local_rank);
void harness_stop(harness *h);

#endif

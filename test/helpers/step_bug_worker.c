/*
 * A trainer with a bug in its data: every generation it steps from 1, reports
 * each step in its heartbeat, and at --fail-at-step it finds a bad batch,
 * writes torchrun's error file (TORCHELASTIC_ERROR_FILE) naming the error
 * and where, and exits 1, as a C or C++ trainer with its own error handling
 * would. The failure tests (issue 37) run it in every generation: the same
 * error at the same step is a deterministic bug.
 *
 *   step_bug_worker [--fail-at-step N] [--step-ms MS] [--steps TOTAL] [--rank-only R]
 *                   [--lockstep 1] [--late-rank R --late-ms MS]
 *
 * --rank-only R: only that rank fails (the others train on until stopped).
 * --lockstep 1: the ranks fail at once, as ranks in lockstep through a
 * collective do: a barrier at the failing step, then rank 0 names a wall
 * clock instant 300 ms ahead in the job's store and every rank checks its
 * batch at that instant (a barrier's release alone is some ms apart).
 * --late-rank R --late-ms MS: rank R finds the same bad batch MS ms after
 * reaching the step, and ignores SIGTERM (a trainer finishing its step
 * first): its failure comes after its agent heard the other node's end of
 * the generation, and is its own all the same.
 */
#include "elastic.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* torchrun's error file: {"message": {"message": ..., "extraInfo": {...}}},
 * its call stack naming the line that found the bad batch. */
static void write_error_file(uint64_t step, int line)
{
    const char *path = getenv("TORCHELASTIC_ERROR_FILE");
    if (path == NULL || *path == '\0') return;
    FILE *f = fopen(path, "w");
    if (f == NULL) return;
    fprintf(f,
            "{\"message\": {\"message\": \"BadBatchError: batch %" PRIu64
            " has a NaN label\", \"extraInfo\": {\"py_callstack\": \"Traceback (most recent call "
            "last):\\n  File \\\"step_bug_worker.c\\\", line %d, in check_batch\\nBadBatchError: "
            "batch %" PRIu64 " has a NaN label\\n\", \"timestamp\": \"%lld\"}}}\n",
            step, line, step, (long long)time(NULL));
    fclose(f);
}

/* The training code's check: a bad batch at fail_at (on rank_only, or every rank). */
static int check_batch(uint64_t step, long fail_at, long rank_only, int rank)
{
    if ((long)step != fail_at || (rank_only >= 0 && rank_only != rank)) return 0;
    fprintf(stderr, "rank %d: BadBatchError: batch %" PRIu64 " has a NaN label\n", rank, step);
    write_error_file(step, __LINE__);
    return 1;
}

/* --lockstep: the barrier, then the instant rank 0 named (0, or -1 said). */
static int lockstep_at(elastic_worker *w, int rank, uint64_t step)
{
    elastic_store *store = NULL;
    char key[96], text[32];
    const char *generation = getenv("ELASTIC_GENERATION");
    snprintf(key, sizeof key, "step_bug/%s/%" PRIu64 "/at", generation ? generation : "0", step);
    void *value = NULL;
    size_t len = 0;
    int rc = elastic_worker_barrier(w, 30000);
    if (rc == 0) rc = elastic_worker_get_store(w, &store);
    if (rc == 0 && rank == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        long long at_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 + 300;
        snprintf(text, sizeof text, "%lld", at_ms);
        rc = elastic_store_set(store, key, text, strlen(text));
    }
    if (rc == 0) rc = elastic_store_get(store, key, 30000, &value, &len);
    if (rc != 0) {
        fprintf(stderr, "lockstep at step %" PRIu64 ": %s\n", step, elastic_last_error());
        return -1;
    }
    long long at_ms = atoll(value);
    elastic_free(value);
    struct timespec at = { (time_t)(at_ms / 1000), (long)(at_ms % 1000) * 1000000L };
    int slept;
    while ((slept = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL)) == EINTR) {
    }
    return slept == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    long fail_at = 37, step_ms = 20, steps = 1000000, rank_only = -1, lockstep = 0;
    long late_rank = -1, late_ms = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--fail-at-step") == 0)
            fail_at = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--step-ms") == 0)
            step_ms = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--rank-only") == 0)
            rank_only = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--lockstep") == 0)
            lockstep = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--late-rank") == 0)
            late_rank = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--late-ms") == 0)
            late_ms = atol(argv[i + 1]);
    }
    elastic_worker *w = NULL;
    elastic_worker_info info = { .struct_size = sizeof info };
    if (elastic_worker_init(NULL, &w) != 0 || elastic_worker_get_info(w, &info) != 0) {
        fprintf(stderr, "worker init: %s\n", elastic_last_error());
        return 3;
    }
    bool late = late_rank == info.rank && late_ms > 0;
    if (late) signal(SIGTERM, SIG_IGN); /* the agent's stop: this rank fails first */
    struct timespec pause_ts = { step_ms / 1000, (step_ms % 1000) * 1000000L };
    struct timespec late_ts = { late_ms / 1000, (late_ms % 1000) * 1000000L };
    for (uint64_t step = 1; step <= (uint64_t)steps; step++) {
        nanosleep(&pause_ts, NULL);
        elastic_worker_heartbeat(w, step);
        if (lockstep != 0 && (long)step == fail_at && lockstep_at(w, info.rank, step) != 0)
            return 3;
        if (late && (long)step == fail_at) nanosleep(&late_ts, NULL);
        if (check_batch(step, fail_at, rank_only, info.rank) != 0) return 1;
    }
    elastic_worker_close(w);
    return 0;
}

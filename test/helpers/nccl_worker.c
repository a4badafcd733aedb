/*
 * A data-parallel toy trainer for the nccl tests, run against the test double
 * (ELASTIC_NCCL_LIBRARY): every step all-reduces a vector holding rank + 1,
 * marks it for the watchdog, waits for the stream and checks the sum. It
 * recovers in place (the library rebuilds the communicator inside poll) and
 * exits 0 after --steps uninterrupted steps in one generation.
 *
 *   nccl_worker [--steps N] [--timeout-ms T] [--exit-rank R --exit-at K]
 */
#include "elastic.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*sync_fn)(void *);

static allreduce_fn all_reduce;
static sync_fn stream_sync;

static void die(const char *what, int rc)
{
    printf("fatal %s: %s (%s)\n", what, elastic_err_name(rc), elastic_last_error());
    fflush(stdout);
    exit(2);
}

static void bind_double(void)
{
    const char *path = getenv("ELASTIC_NCCL_LIBRARY");
    void *lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (lib == NULL) die("dlopen ELASTIC_NCCL_LIBRARY", ELASTIC_EUNSUPPORTED);
    *(void **)&all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&stream_sync = dlsym(lib, "cudaStreamSynchronize");
    if (all_reduce == NULL || stream_sync == NULL) die("dlsym", ELASTIC_EUNSUPPORTED);
}

static void report_generation(elastic_worker *w, elastic_nccl_comm *comm, const char *what)
{
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_nccl_info nccl = { .struct_size = sizeof nccl };
    elastic_worker_get_info(w, &info);
    elastic_nccl_comm_get_info(comm, &nccl);
    printf("%s rank=%d world=%d generation=%llu nccl_rank=%d nccl_ranks=%d method=%s build_ms=%d\n",
           what, info.rank, info.world_size, (unsigned long long)info.generation, nccl.rank,
           nccl.nranks, nccl.last_method == ELASTIC_NCCL_SHRUNK ? "shrunk" : "created",
           nccl.last_build_ms);
    fflush(stdout);
}

/* Said once per generation: the abort came between two collectives
 * (elastic_nccl_comm_get gives NULL for a communicator aborted or revoked,
 * so no collective starts on it). */
static int aborted_between_collectives;

/* One step; 1 when it completed on a healthy communicator with the right sum. */
static int step(elastic_nccl_comm *comm, int world, int rank)
{
    float values[64];
    for (int i = 0; i < 64; i++) values[i] = (float)(rank + 1);
    void *nccl = elastic_nccl_comm_get(comm);
    if (nccl == NULL) {
        if (!aborted_between_collectives++) printf("aborted before its collective rank=%d\n", rank);
        return 0;
    }
    if (all_reduce(values, values, 64, 7, 0, nccl, NULL) != 0) return 0;
    if (elastic_nccl_watch(comm, NULL) != 0) return 0;
    stream_sync(NULL); /* blocks until the collective ends, or the communicator is aborted */
    if (elastic_nccl_comm_check(comm) != 0) {
        printf("collective returned after abort rank=%d\n", rank);
        fflush(stdout);
        return 0;
    }
    float expected = (float)(world * (world + 1) / 2);
    if (values[0] != expected) {
        printf("bad sum %g, expected %g\n", values[0], expected);
        fflush(stdout);
        exit(3);
    }
    return 1;
}

int main(int argc, char **argv)
{
    int steps = 50, timeout_ms = 30000, exit_rank = -1, exit_at = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--timeout-ms") == 0)
            timeout_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--exit-rank") == 0)
            exit_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--exit-at") == 0)
            exit_at = atoi(argv[i + 1]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    bind_double();
    elastic_worker *w = NULL;
    int rc = elastic_worker_init(NULL, &w);
    if (rc != 0) die("elastic_worker_init", rc);
    elastic_nccl_opts opts;
    elastic_nccl_opts_init(&opts, sizeof opts);
    opts.tag = "dp";
    opts.collective_timeout_ms = timeout_ms;
    opts.init_timeout_ms = 30000;
    elastic_nccl_comm *comm = NULL;
    rc = elastic_nccl_comm_init(w, &opts, &comm);
    if (rc != 0) die("elastic_nccl_comm_init", rc);
    report_generation(w, comm, "training");
    int done = 0;
    uint64_t total = 0;
    while (done < steps) {
        rc = elastic_worker_poll(w);
        if (rc == ELASTIC_ERECONFIGURE) {
            if (elastic_nccl_comm_check(comm) != 0) die("rebuild", elastic_nccl_comm_rebuild(comm));
            report_generation(w, comm, "reconfigured");
            aborted_between_collectives = 0;
            done = 0;
            continue;
        }
        if (rc != 0) die("elastic_worker_poll", rc);
        elastic_worker_info info = { .struct_size = sizeof info };
        elastic_worker_get_info(w, &info);
        if (info.rank == exit_rank && (int)total + 1 == exit_at && info.restart_count == 0) {
            printf("crashing rank=%d at step %d\n", info.rank, exit_at);
            fflush(stdout);
            _exit(1);
        }
        if (step(comm, info.world_size, info.rank)) {
            done++;
            total++;
            elastic_worker_heartbeat(w, total);
        }
    }
    report_generation(w, comm, "done");
    elastic_nccl_comm_close(comm);
    elastic_worker_close(w);
    return 0;
}

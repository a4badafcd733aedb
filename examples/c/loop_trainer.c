/*
 * The demo trainer's model (linear regression on synthetic data, the
 * gradient averaged through the job's store in sample order, so bitwise
 * reproducible at any world size) on elastic_loop_run: this file is only the
 * training logic. The loop parks a warm spare, restores the job's agreed step
 * from the cheapest tier, heartbeats, saves to memory every --memory-every
 * steps (elasticrun --memory-ckpt) and to disk every --ckpt-every, and after
 * a peer's death (elasticrun --in-process-recovery) reloads and goes on in the
 * same process. Same data and result line as examples/c/demo_trainer.c.
 *
 *   loop_trainer --ckpt-dir DIR [--steps 300] [--ckpt-every 10] [--memory-every 1]
 *                [--step-ms 10] [--result FILE]
 *                [--abort-hook 1]  (a wait for peers ends when the worker's abort hook
 *                                   fired, as an NCCL collective the library aborted,
 *                                   instead of polling the worker)
 */
#include <elastic.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIM           8
#define GLOBAL_BATCH  64
#define LEARNING_RATE 0.05
#define WAIT_SLICE_MS 50 /* a wait for peers looks at the worker this often */

typedef struct state {
    uint64_t step; /* steps done */
    double weights[DIM];
} state;

typedef struct trainer {
    state s;
    double loss;
    int rank, world, step_ms, abort_hook;
    int aborted; /* atomic: the abort hook fired (--abort-hook) */
    elastic_store *store; /* this generation's key space */
    elastic_ckpt_blob blob;
} trainer;

static uint64_t mix(uint64_t x) /* splitmix64: the data is a pure function of (step, sample) */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void sample(uint64_t step, int index, double x[DIM], double *y)
{
    static const double truth[DIM] = { 0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25 };
    *y = 0.1;
    for (int d = 0; d < DIM; d++) {
        uint64_t seed = step * 1000003u + (uint64_t)index * 131u + (uint64_t)d;
        x[d] = (double)(mix(seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        *y += truth[d] * x[d];
    }
}

/* Sample i's gradient row (the last slot: its squared error). */
static void gradient_row(const state *s, int i, double row[DIM + 1])
{
    double x[DIM], y, prediction = 0;
    sample(s->step, i, x, &y);
    for (int d = 0; d < DIM; d++) prediction += s->weights[d] * x[d];
    double error = prediction - y;
    for (int d = 0; d < DIM; d++) row[d] = 2.0 * error * x[d];
    row[DIM] = error * error;
}

/* A peer's rows, waiting in slices so that a generation's end stops the wait
 * (elastic_worker_poll says ELASTIC_ERECONFIGURE, or the abort hook fired:
 * the loop takes it from there). */
static int get_rows(trainer *t, elastic_worker *w, const char *key, void **v, size_t *n)
{
    for (int waited = 0; waited < 60000; waited += WAIT_SLICE_MS) {
        int rc = elastic_store_get(t->store, key, WAIT_SLICE_MS, v, n);
        if (rc != ELASTIC_ETIMEDOUT) return rc;
        if (t->abort_hook && __atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE)) return ELASTIC_ERECONFIGURE;
        if (!t->abort_hook && (rc = elastic_worker_poll(w)) != 0) return rc;
    }
    return ELASTIC_ETIMEDOUT;
}

/* The library's thread, as the generation ends: what ncclCommAbort is to an NCCL trainer. */
static void on_abort(void *user, uint64_t generation, const char *reason)
{
    __atomic_store_n(&((trainer *)user)->aborted, 1, __ATOMIC_RELEASE);
}

/* One step: this rank's rows (samples i % world == rank) to the store, every
 * rank's back, summed in sample order, and the update. */
static int train_step(void *user, elastic_worker *w, uint64_t step)
{
    trainer *t = user;
    static double all[GLOBAL_BATCH][DIM + 1], mine[GLOBAL_BATCH][DIM + 1];
    int n = 0;
    if (t->step_ms > 0) /* the compute a real step does before its all-reduce */
        nanosleep(&(struct timespec){ 0, (long)t->step_ms * 1000000L }, NULL);
    for (int i = t->rank; i < GLOBAL_BATCH; i += t->world) gradient_row(&t->s, i, mine[n++]);
    char key[64];
    snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, t->rank);
    int rc = elastic_store_set(t->store, key, mine, sizeof mine[0] * (size_t)n);
    for (int peer = 0; rc == 0 && peer < t->world && peer < GLOBAL_BATCH; peer++) {
        void *value = NULL;
        size_t len = 0, rows = (size_t)((GLOBAL_BATCH - 1 - peer) / t->world + 1);
        snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, peer);
        rc = get_rows(t, w, key, &value, &len);
        if (rc == 0 && len != sizeof all[0] * rows) rc = ELASTIC_EPROTO;
        for (size_t row = 0; rc == 0 && row < rows; row++)
            memcpy(all[peer + (int)row * t->world], (double *)value + row * (DIM + 1), sizeof all[0]);
        elastic_free(value);
    }
    if (rc != 0) return rc;
    double total[DIM + 1] = { 0 };
    for (int i = 0; i < GLOBAL_BATCH; i++)
        for (int d = 0; d <= DIM; d++) total[d] += all[i][d];
    for (int d = 0; d < DIM; d++) t->s.weights[d] -= LEARNING_RATE * total[d] / GLOBAL_BATCH;
    t->loss = total[DIM] / GLOBAL_BATCH;
    t->s.step = step + 1;
    return 0;
}

/* The generation's pieces: its rank, world size and store. */
static int build(void *user, elastic_worker *w, const elastic_worker_info *info)
{
    trainer *t = user;
    t->rank = info->rank;
    t->world = info->world_size;
    int rc = elastic_worker_get_store(w, &t->store);
    __atomic_store_n(&t->aborted, 0, __ATOMIC_RELEASE);
    if (rc == 0 && t->abort_hook) rc = elastic_worker_on_abort(w, on_abort, t);
    printf("rank %d pid=%d generation %" PRIu64 " trains from step %" PRIu64 "\n", t->rank,
           (int)getpid(), info->generation, t->s.step);
    fflush(stdout);
    return rc;
}

/* The state is the same on every rank: one replicated blob. */
static int save(void *user, uint64_t step, int tier, const elastic_ckpt_blob **blobs, size_t *n)
{
    trainer *t = user;
    t->blob = (elastic_ckpt_blob){ "state", &t->s, sizeof t->s, ELASTIC_CKPT_REPLICATED };
    *blobs = &t->blob;
    *n = 1;
    if (tier == ELASTIC_CKPT_SOURCE_DISK && t->rank == 0)
        printf("step %" PRIu64 " loss %.6f (checkpoint)\n", step, t->loss), fflush(stdout);
    return 0;
}

static int load(void *user, elastic_ckpt *from, uint64_t step)
{
    trainer *t = user;
    size_t len = 0;
    memset(&t->s, 0, sizeof t->s);
    if (from == NULL) return 0; /* a fresh start */
    int rc = elastic_ckpt_read_into(from, step, "state", &t->s, sizeof t->s, &len);
    return rc == 0 && (len != sizeof t->s || t->s.step != step) ? ELASTIC_ECORRUPT : rc;
}

static void write_result(const char *path, const trainer *t)
{
    uint64_t digest = 0, bits;
    for (int d = 0; d < DIM; d++) memcpy(&bits, &t->s.weights[d], 8), digest = mix(digest ^ bits);
    char line[256];
    snprintf(line, sizeof line, "steps=%" PRIu64 " loss=%.12g weights=%016" PRIx64 "\n", t->s.step,
             t->loss, digest);
    fputs(line, stdout);
    FILE *file = path != NULL ? fopen(path, "w") : NULL;
    if (file != NULL) fputs(line, file), fclose(file);
}

int main(int argc, char **argv)
{
    trainer t = { .step_ms = 10 };
    const char *result_path = NULL;
    elastic_loop_opts opts;
    elastic_loop_opts_init(&opts, sizeof opts);
    opts.steps = 300;
    opts.disk_every = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--ckpt-dir") == 0) opts.dir = value;
        else if (strcmp(flag, "--result") == 0) result_path = value;
        else if (strcmp(flag, "--steps") == 0) opts.steps = strtoull(value, NULL, 10);
        else if (strcmp(flag, "--ckpt-every") == 0) opts.disk_every = strtoull(value, NULL, 10);
        else if (strcmp(flag, "--memory-every") == 0) opts.memory_every = strtoull(value, NULL, 10);
        else if (strcmp(flag, "--step-ms") == 0) t.step_ms = atoi(value);
        else if (strcmp(flag, "--abort-hook") == 0) t.abort_hook = atoi(value);
    }
    opts.user = &t;
    opts.build = build;
    opts.step = train_step;
    opts.save = save;
    opts.load = load;
    elastic_loop_result result = { .struct_size = sizeof result };
    if (elastic_loop_run(&opts, &result) != 0) {
        fprintf(stderr, "loop_trainer: %s\n", elastic_last_error());
        return 1;
    }
    if (result.released) return 0; /* a warm spare the job did not need */
    printf("rank %d done: steps=%" PRIu64 " recoveries=%d redone=%" PRIu64 "\n", result.rank,
           result.steps, result.recoveries, result.redone);
    if (result.rank == 0) write_result(result_path, &t);
    return 0;
}

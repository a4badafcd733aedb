/*
 * A small deterministic data-parallel trainer for the elastic demo: linear
 * regression on synthetic data. Each rank computes the gradient of its share
 * of every step's global batch; the ranks average them through the job's
 * store, which the worker API hands out scoped to the generation (summed in
 * rank order, so the result is bitwise reproducible). The ranks save the state
 * every few steps with the atomic checkpoint store (elastic_ckpt_*), and with
 * --memory-every N also to the node's memory tier (elasticrun --memory-ckpt);
 * after a restart every rank resumes from the cheapest copy of the job's
 * restore step. --state-mib S adds a per-rank shard of S MiB whose content is
 * a function of (step, rank), checked after every restore: a wrong or mixed
 * copy fails the run.
 *
 *   demo_trainer --ckpt-dir DIR [--steps 300] [--ckpt-every 10] [--memory-every 0]
 *                [--state-mib 0] [--step-ms 10] [--result FILE]
 */
#include <elastic.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIM               8
#define GLOBAL_BATCH      64
#define LEARNING_RATE     0.05
#define REDUCE_TIMEOUT_MS 60000

typedef struct trainer_args {
    const char *ckpt_dir;
    const char *result;
    int steps, ckpt_every, memory_every, state_mib, step_ms;
} trainer_args;

typedef struct state {
    uint64_t step; /* steps done */
    double weights[DIM];
} state;

/* splitmix64: the data of step s, sample i is a pure function of (s, i). */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double uniform(uint64_t seed)
{
    return (double)(mix(seed) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void sample(uint64_t step, int index, double x[DIM], double *y)
{
    static const double truth[DIM] = { 0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25 };
    *y = 0.1;
    for (int d = 0; d < DIM; d++) {
        x[d] = uniform(step * 1000003u + (uint64_t)index * 131u + (uint64_t)d);
        *y += truth[d] * x[d];
    }
}

/* This rank's share of the step's batch: samples index % world == rank. The
 * last slot carries the summed squared error for the loss. */
static void partial_gradient(const state *s, int rank, int world, double out[DIM + 1])
{
    memset(out, 0, sizeof(double) * (DIM + 1));
    for (int i = rank; i < GLOBAL_BATCH; i += world) {
        double x[DIM], y, prediction = 0;
        sample(s->step, i, x, &y);
        for (int d = 0; d < DIM; d++) prediction += s->weights[d] * x[d];
        double error = prediction - y;
        for (int d = 0; d < DIM; d++) out[d] += 2.0 * error * x[d];
        out[DIM] += error * error;
    }
}

static int all_reduce(elastic_store *store, uint64_t step, int rank, int world,
                      double grad[DIM + 1])
{
    char key[64];
    snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, rank);
    int rc = elastic_store_set(store, key, grad, sizeof(double) * (DIM + 1));
    if (rc != 0) return rc;
    double total[DIM + 1] = { 0 };
    for (int peer = 0; peer < world; peer++) { /* in rank order: the same sums on every rank */
        void *value = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, peer);
        rc = elastic_store_get(store, key, REDUCE_TIMEOUT_MS, &value, &len);
        if (rc != 0) return rc;
        if (len != sizeof total) {
            elastic_free(value);
            return ELASTIC_EPROTO;
        }
        const double *theirs = value;
        for (int d = 0; d <= DIM; d++) total[d] += theirs[d];
        elastic_free(value);
    }
    for (int d = 0; d <= DIM; d++) grad[d] = total[d] / GLOBAL_BATCH;
    return 0;
}

/* ---- checkpoint: the library's atomic checkpoint store ---------------------
 * Every rank takes part in each save (the step is committed once all ranks
 * did); the state is the same on every rank, so it is one replicated blob. */
static void fill_opts(elastic_ckpt_opts *opts, const elastic_worker_info *info)
{
    elastic_ckpt_opts_init(opts, sizeof *opts);
    opts->compression = ELASTIC_CKPT_NONE;
    opts->threads = 1;
    opts->rank = (uint32_t)info->rank;
    opts->world = (uint32_t)info->world_size;
    opts->generation = info->generation;
}

static int open_checkpoints(const char *dir, const elastic_worker_info *info, elastic_ckpt **ckpt)
{
    elastic_ckpt_opts opts;
    fill_opts(&opts, info);
    opts.keep_last = 3;
    return elastic_ckpt_open(dir, &opts, ckpt);
}

/* The node's memory tier: each node holds its own ranks' shards, so the
 * step's commit goes through the job's store (every rank's shard is in). */
static int open_memory(const elastic_worker_info *info, elastic_store *store, elastic_ckpt **ckpt)
{
    elastic_ckpt_opts opts;
    fill_opts(&opts, info);
    opts.store = store;
    return elastic_ckpt_open_memory(&opts, ckpt);
}

/* The per-rank shard: its bytes are a function of (step, rank), so every
 * restore can be checked without a record of what was saved. */
static void fill_rank_state(uint8_t *buf, size_t len, uint64_t step, int rank)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = mix(step * 0x100000001b3ull + (uint64_t)rank * 0x9e3779b1u + i / 8);
        memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
    }
}

static int save_state(elastic_ckpt *ckpt, const state *s, uint8_t *rank_state, size_t rank_len,
                      int rank)
{
    elastic_ckpt_blob blobs[2] = {
        { .name = "state", .data = s, .len = sizeof *s, .flags = ELASTIC_CKPT_REPLICATED },
        { .name = "rank-state", .data = rank_state, .len = rank_len, .flags = 0 },
    };
    if (rank_len > 0) fill_rank_state(rank_state, rank_len, s->step, rank);
    return elastic_ckpt_save(ckpt, s->step, blobs, rank_len > 0 ? 2 : 1);
}

/* From the job's restore step, in whichever tier is cheapest; the per-rank
 * shard must be exactly what (step, rank) gives. */
static int load_state(elastic_ckpt *memory, elastic_ckpt *disk, state *s, uint8_t *rank_state,
                      size_t rank_len, int rank, const char **where)
{
    uint64_t step;
    size_t len = 0;
    elastic_ckpt *from = NULL;
    int source = 0;
    memset(s, 0, sizeof *s);
    *where = "nowhere";
    int rc = elastic_ckpt_restore_begin(memory, disk, &step, &from, &source);
    if (rc == ELASTIC_ENOTFOUND) return 0; /* a fresh start */
    if (rc == 0) rc = elastic_ckpt_read_into(from, step, "state", s, sizeof *s, &len);
    if (rc == 0 && (len != sizeof *s || s->step != step)) rc = ELASTIC_ECORRUPT;
    if (rc == 0 && rank_len > 0) {
        uint8_t *want = malloc(rank_len);
        void *got = NULL;
        size_t got_len = 0;
        rc = want ? elastic_ckpt_read_shard(from, step, rank, "rank-state", &got, &got_len)
                  : ELASTIC_ENOMEM;
        if (rc == 0) fill_rank_state(want, rank_len, step, rank);
        if (rc == 0 && (got_len != rank_len || memcmp(got, want, rank_len) != 0)) {
            fprintf(stderr,
                    "demo_trainer: rank %d: the restored per-rank state of step %" PRIu64
                    " is not this rank's\n",
                    rank, step);
            rc = ELASTIC_ECORRUPT;
        }
        if (rc == 0) memcpy(rank_state, got, rank_len);
        elastic_free(got);
        free(want);
    }
    elastic_ckpt_restore_end(from);
    *where = source == ELASTIC_CKPT_SOURCE_LOCAL  ? "local memory"
             : source == ELASTIC_CKPT_SOURCE_PEER ? "peer memory"
                                                  : "disk";
    return rc;
}

/* ---- main ------------------------------------------------------------------ */

static void parse_args(int argc, char **argv, trainer_args *args)
{
    *args = (trainer_args){ .steps = 300, .ckpt_every = 10, .step_ms = 10 };
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ckpt-dir") == 0)
            args->ckpt_dir = argv[i + 1];
        else if (strcmp(argv[i], "--result") == 0)
            args->result = argv[i + 1];
        else if (strcmp(argv[i], "--steps") == 0)
            args->steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ckpt-every") == 0)
            args->ckpt_every = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--step-ms") == 0)
            args->step_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--memory-every") == 0)
            args->memory_every = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--state-mib") == 0)
            args->state_mib = atoi(argv[i + 1]);
    }
}

static uint64_t weights_digest(const state *s)
{
    uint64_t digest = 0;
    for (int d = 0; d < DIM; d++) {
        uint64_t bits;
        memcpy(&bits, &s->weights[d], sizeof bits);
        digest = mix(digest ^ bits);
    }
    return digest;
}

static void write_result(const char *path, const state *s, double loss)
{
    uint64_t digest = weights_digest(s);
    char line[256];
    snprintf(line, sizeof line, "steps=%" PRIu64 " loss=%.12g weights=%016" PRIx64 "\n", s->step,
             loss, digest);
    fputs(line, stdout);
    FILE *file = path != NULL ? fopen(path, "w") : NULL;
    if (file != NULL) fputs(line, file), fclose(file);
}

int main(int argc, char **argv)
{
    trainer_args args;
    parse_args(argc, argv, &args);
    if (args.ckpt_dir == NULL) {
        fprintf(stderr, "demo_trainer: run me under elasticrun with --ckpt-dir DIR\n");
        return 2;
    }
    /* Rank, world size, generation and the generation's store: all from the
     * agent, validated by the library (no environment parsing here). */
    elastic_worker *worker;
    elastic_worker_info info = { .struct_size = sizeof info };
    elastic_store *store = NULL;
    if (elastic_worker_init(NULL, &worker) != 0 || elastic_worker_get_info(worker, &info) != 0 ||
        elastic_worker_get_store(worker, &store) != 0) {
        fprintf(stderr, "demo_trainer: %s\n", elastic_last_error());
        return 1;
    }
    int rank = info.rank, world = info.world_size;
    state s;
    elastic_ckpt *ckpt = NULL, *memory = NULL;
    size_t rank_len = args.state_mib > 0 ? (size_t)args.state_mib << 20 : 0;
    uint8_t *rank_state = rank_len > 0 ? calloc(1, rank_len) : NULL;
    if (rank_len > 0 && rank_state == NULL) return 1;
    const char *where = "nowhere";
    int rc = open_checkpoints(args.ckpt_dir, &info, &ckpt);
    if (rc == 0 && args.memory_every > 0 && (rc = open_memory(&info, store, &memory)) != 0)
        fprintf(stderr, "demo_trainer: --memory-every needs elasticrun --memory-ckpt\n");
    if (rc == 0) rc = load_state(memory, ckpt, &s, rank_state, rank_len, rank, &where);
    if (rc != 0) {
        fprintf(stderr, "demo_trainer: checkpoints in %s: %s\n", args.ckpt_dir,
                elastic_last_error());
        return 1;
    }
    if (rank == 0 && s.step > 0)
        printf("resumed at step %" PRIu64 " from %s\n", s.step, where);
    else if (rank == 0)
        printf("started at step 0\n");
    fflush(stdout);
    double loss = 0;
    while (s.step < (uint64_t)args.steps) {
        double grad[DIM + 1];
        partial_gradient(&s, rank, world, grad);
        rc = all_reduce(store, s.step, rank, world, grad);
        if (rc == 0) rc = elastic_worker_heartbeat(worker, s.step);
        if (rc != 0) {
            fprintf(stderr, "demo_trainer: rank %d step %" PRIu64 ": %s\n", rank, s.step,
                    elastic_strerror(rc));
            return 1;
        }
        for (int d = 0; d < DIM; d++) s.weights[d] -= LEARNING_RATE * grad[d];
        loss = grad[DIM];
        s.step++;
        if (memory != NULL && s.step % (uint64_t)args.memory_every == 0 &&
            (rc = save_state(memory, &s, rank_state, rank_len, rank)) != 0) {
            fprintf(stderr, "demo_trainer: rank %d memory checkpoint %" PRIu64 ": %s\n", rank,
                    s.step, elastic_last_error());
            return 1;
        }
        if (s.step % (uint64_t)args.ckpt_every == 0) {
            rc = save_state(ckpt, &s, rank_state, rank_len, rank);
            if (rc != 0) {
                fprintf(stderr, "demo_trainer: rank %d checkpoint %" PRIu64 ": %s\n", rank, s.step,
                        elastic_last_error());
                return 1;
            }
            /* The weights' digest: a soak checks that no step is committed with two contents. */
            if (rank == 0)
                printf("step %" PRIu64 " loss %.6f (checkpoint) weights=%016" PRIx64 "\n", s.step,
                       loss, weights_digest(&s));
            fflush(stdout);
        }
        if (args.step_ms > 0)
            nanosleep(&(struct timespec){ 0, (long)args.step_ms * 1000000L }, NULL);
    }
    if (rank == 0) write_result(args.result, &s, loss);
    elastic_ckpt_close(memory);
    elastic_ckpt_close(ckpt);
    free(rank_state);
    elastic_worker_close(worker); /* owns the store */
    return 0;
}

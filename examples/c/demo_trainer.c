/*
 * A small deterministic data-parallel trainer for the elastic demo: linear
 * regression on synthetic data. Each rank computes the gradient of its share
 * of every step's global batch; the ranks average them through the job's
 * store, which the worker API hands out scoped to the generation (summed in
 * sample order, so the result is bitwise reproducible at any world size). The ranks save the state
 * every few steps with the atomic checkpoint store (elastic_ckpt_*), and with
 * --memory-every N also to the node's memory tier (elasticrun --memory-ckpt);
 * after a restart every rank resumes from the cheapest copy of the job's
 * restore step. --state-mib S adds a per-rank shard of S MiB whose content is
 * a function of (step, rank), checked after every restore: a wrong or mixed
 * copy fails the run.
 *
 * Under `elasticrun --in-process-recovery` the survivors of a failure stay:
 * the all-reduce polls the worker while it waits, and on a new generation
 * every rank reloads the newest checkpoint (memory or disk) and goes on. With
 * `--warm-spares` the start-up runs first and the process parks
 * (elastic_worker_park) until it is given a failed rank (--no-park: a trainer
 * that does not know about spares, for the tests).
 *
 *   demo_trainer --ckpt-dir DIR [--steps 300] [--ckpt-every 10] [--memory-every 0]
 *                [--state-mib 0] [--step-ms 10] [--result FILE] [--no-park]
 *                [--park-delay-ms MS]
 *                [--die-at-save RANK:STEP]  (tests: that rank of generation 1 is
 *                                            SIGKILLed before its save of STEP)
 *                [--corrupt RANK:STEP]      (tests: that rank of generation 1 flips one
 *                                            bit of its replicated weights after
 *                                            training STEP: silent data corruption)
 *                [--store-commit]           (the disk checkpoint commits through the
 *                                            job's store, each rank keeping its own copy
 *                                            of the replicated state, as on private
 *                                            disks; not with --memory-every, whose
 *                                            commits use the same store keys)
 *
 * A save that finds the ranks' replicated state different (ELASTIC_EDIVERGED:
 * the library compared the replicas, docs/CHECKPOINT.md "Divergence check")
 * is not committed; the trainer says so and trains on, and the agent ends the
 * generation (the faulty node steps aside; the job restores the newest step
 * on which every replica agreed).
 */
#include <elastic.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DIM               8
#define GLOBAL_BATCH      64
#define LEARNING_RATE     0.05
#define REDUCE_TIMEOUT_MS 60000
#define REDUCE_POLL_MS    50 /* a wait for peers looks at the worker this often */

typedef struct trainer_args {
    const char *ckpt_dir;
    const char *result;
    int steps, ckpt_every, memory_every, state_mib, step_ms;
    int no_park, store_commit;
    int park_delay_ms; /* --park-delay-ms: a spare's start-up takes this long (tests) */
    int die_rank, die_step;         /* --die-at-save R:S (tests); die_step 0: never */
    int corrupt_rank, corrupt_step; /* --corrupt R:S (tests); corrupt_step 0: never */
} trainer_args;

typedef struct state {
    uint64_t step; /* steps done */
    double weights[DIM];
    double loss; /* the last step's: a job restored at its final step still reports it */
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

/* This rank's share of the step's batch: samples index % world == rank, one
 * row of DIM + 1 values per sample (the last slot is the squared error, for
 * the loss). Rows, not their sum: the reduction adds them in sample order,
 * so the step's gradient is the same bits whatever the world size (a job
 * that grows or shrinks ends with a fault-free run's weights). */
static int rows_of(int rank, int world)
{
    return rank < GLOBAL_BATCH ? (GLOBAL_BATCH - 1 - rank) / world + 1 : 0;
}

static void partial_gradient(const state *s, int rank, int world, double out[][DIM + 1])
{
    for (int i = rank, row = 0; i < GLOBAL_BATCH; i += world, row++) {
        double x[DIM], y, prediction = 0;
        sample(s->step, i, x, &y);
        for (int d = 0; d < DIM; d++) prediction += s->weights[d] * x[d];
        double error = prediction - y;
        for (int d = 0; d < DIM; d++) out[row][d] = 2.0 * error * x[d];
        out[row][DIM] = error * error;
    }
}

/* A peer's value, waiting in short slices so that an ended generation
 * (in-process recovery: ELASTIC_ERECONFIGURE from poll) stops the wait. */
static int get_polling(elastic_worker *worker, elastic_store *store, const char *key, void **value,
                       size_t *len)
{
    for (int waited = 0; waited < REDUCE_TIMEOUT_MS; waited += REDUCE_POLL_MS) {
        int rc = elastic_store_get(store, key, REDUCE_POLL_MS, value, len);
        if (rc != ELASTIC_ETIMEDOUT) return rc;
        if ((rc = elastic_worker_poll(worker)) != 0) return rc;
    }
    return ELASTIC_ETIMEDOUT;
}

static int all_reduce(elastic_worker *worker, elastic_store *store, uint64_t step, int rank,
                      int world, const double rows[][DIM + 1], double grad[DIM + 1])
{
    char key[64];
    snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, rank);
    size_t row_bytes = sizeof(double) * (DIM + 1);
    int rc = elastic_store_set(store, key, rows, row_bytes * (size_t)rows_of(rank, world));
    if (rc != 0) return rc;
    static double all[GLOBAL_BATCH][DIM + 1]; /* every sample's row, by sample index */
    for (int peer = 0; peer < world && peer < GLOBAL_BATCH; peer++) {
        void *value = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "step/%" PRIu64 "/grad/%d", step, peer);
        rc = get_polling(worker, store, key, &value, &len);
        if (rc != 0) return rc;
        if (len != row_bytes * (size_t)rows_of(peer, world)) {
            elastic_free(value);
            return ELASTIC_EPROTO;
        }
        const double(*theirs)[DIM + 1] = value;
        for (int i = peer, row = 0; i < GLOBAL_BATCH; i += world, row++)
            memcpy(all[i], theirs[row], row_bytes);
        elastic_free(value);
    }
    double total[DIM + 1] = { 0 };
    for (int i = 0; i < GLOBAL_BATCH; i++) /* in sample order: the same sums on every rank */
        for (int d = 0; d <= DIM; d++) total[d] += all[i][d];
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

static int open_checkpoints(const char *dir, const elastic_worker_info *info, elastic_store *store,
                            elastic_ckpt **ckpt)
{
    elastic_ckpt_opts opts;
    fill_opts(&opts, info);
    opts.keep_last = 3;
    opts.store = store; /* NULL: a shared directory, the last rank writes COMMIT */
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
    /* A rank the job grew by has no shard in the step: it resumes at the
     * same step with the replicated state and starts its own part fresh
     * (here: the content every rank's part has at that step). */
    uint32_t step_world = 0;
    if (rc == 0) rc = elastic_ckpt_step_info(from, step, &step_world, NULL);
    if (rc == 0 && rank_len > 0 && (uint32_t)rank >= step_world)
        fill_rank_state(rank_state, rank_len, step, rank);
    else if (rc == 0 && rank_len > 0) {
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

/* The disk store, the memory tier with --memory-every, and the state from the
 * cheapest of them (a fresh start when neither has a step). */
static int open_and_load(const trainer_args *args, const elastic_worker_info *info,
                         elastic_store *store, elastic_ckpt **ckpt, elastic_ckpt **memory, state *s,
                         uint8_t *rank_state, size_t rank_len, const char **where)
{
    int rc = open_checkpoints(args->ckpt_dir, info, args->store_commit ? store : NULL, ckpt);
    if (rc == 0 && args->memory_every > 0 && (rc = open_memory(info, store, memory)) != 0)
        fprintf(stderr, "demo_trainer: --memory-every needs elasticrun --memory-ckpt\n");
    if (rc == 0) rc = load_state(*memory, *ckpt, s, rank_state, rank_len, info->rank, where);
    return rc;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After ELASTIC_ERECONFIGURE from the worker: the same process in the new
 * generation (maybe another rank) reopens both tiers and loads the job's
 * restore step; the plan for this generation came with it (the worker
 * library put it in the environment), like a cold-started rank's. */
static int reconfigure(const trainer_args *args, elastic_worker *worker, elastic_worker_info *info,
                       elastic_store **store, elastic_ckpt **ckpt, elastic_ckpt **memory, state *s,
                       uint8_t *rank_state, size_t rank_len)
{
    uint64_t from = now_ns();
    elastic_ckpt_close(*memory);
    elastic_ckpt_close(*ckpt);
    *memory = *ckpt = NULL;
    const char *where = "nowhere";
    int rc = elastic_worker_get_info(worker, info);
    if (rc == 0) rc = elastic_worker_get_store(worker, store);
    if (rc == 0)
        rc = open_and_load(args, info, *store, ckpt, memory, s, rank_state, rank_len, &where);
    if (rc != 0) return rc;
    elastic_worker_report_phase(worker, "restore", now_ns() - from);
    printf("rank %d pid %d generation %" PRIu64 " reconfigured at step %" PRIu64 " from %s\n",
           info->rank, (int)getpid(), info->generation, s->step, where);
    fflush(stdout);
    return 0;
}

static void parse_args(int argc, char **argv, trainer_args *args)
{
    *args = (trainer_args){ .steps = 300, .ckpt_every = 10, .step_ms = 10 };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-park") == 0) { /* a switch */
            args->no_park = 1;
            continue;
        }
        if (strcmp(argv[i], "--store-commit") == 0) {
            args->store_commit = 1;
            continue;
        }
        if (i + 1 >= argc) break;
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--ckpt-dir") == 0)
            args->ckpt_dir = value;
        else if (strcmp(argv[i - 1], "--result") == 0)
            args->result = value;
        else if (strcmp(argv[i - 1], "--steps") == 0)
            args->steps = atoi(value);
        else if (strcmp(argv[i - 1], "--ckpt-every") == 0)
            args->ckpt_every = atoi(value);
        else if (strcmp(argv[i - 1], "--park-delay-ms") == 0)
            args->park_delay_ms = atoi(argv[i]);
        else if (strcmp(argv[i - 1], "--step-ms") == 0)
            args->step_ms = atoi(value);
        else if (strcmp(argv[i - 1], "--memory-every") == 0)
            args->memory_every = atoi(value);
        else if (strcmp(argv[i - 1], "--state-mib") == 0)
            args->state_mib = atoi(value);
        else if (strcmp(argv[i - 1], "--die-at-save") == 0 &&
                 sscanf(value, "%d:%d", &args->die_rank, &args->die_step) != 2)
            args->die_step = 0;
        else if (strcmp(argv[i - 1], "--corrupt") == 0 &&
                 sscanf(value, "%d:%d", &args->corrupt_rank, &args->corrupt_step) != 2)
            args->corrupt_step = 0;
    }
}

/* A save the library refused because the replicas differ: not committed
 * (nor any later step of this generation); said once, and training goes on
 * until the agent ends the generation. */
static int said_diverged(int rank, uint64_t step, int *said)
{
    if (!*said)
        fprintf(stderr, "demo_trainer: rank %d checkpoint %" PRIu64 ": %s\n", rank, step,
                elastic_last_error());
    *said = 1;
    return 0;
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

static void write_result(const char *path, const state *s)
{
    uint64_t digest = weights_digest(s);
    char line[256];
    snprintf(line, sizeof line, "steps=%" PRIu64 " loss=%.12g weights=%016" PRIx64 "\n", s->step,
             s->loss, digest);
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
    /* Everything above is the start-up a warm spare does ahead of need (here
     * nothing costly; a real trainer builds its model here). Not a spare:
     * park returns at once. */
    int promoted = 0;
    /* A slow start-up (imports, model build) that only a spare pays before
     * it parks: the ranks themselves start at once. Bounded: at most 60 s. */
    if (getenv("ELASTIC_SPARE") != NULL && args.park_delay_ms > 0)
        usleep((useconds_t)(args.park_delay_ms < 60000 ? args.park_delay_ms : 60000) * 1000u);
    int parked = args.no_park ? 0 : elastic_worker_park(NULL, &promoted, NULL);
    if (parked == ELASTIC_ECLOSED) return 0; /* the job no longer needs this spare */
    if (parked != 0) {
        fprintf(stderr, "demo_trainer: park: %s\n", elastic_last_error());
        return 1;
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
    printf("rank %d pid %d generation %" PRIu64 " %s\n", info.rank, (int)getpid(), info.generation,
           promoted ? "promoted" : "started");
    state s;
    elastic_ckpt *ckpt = NULL, *memory = NULL;
    uint64_t restore_from = promoted ? now_ns() : 0;
    size_t rank_len = args.state_mib > 0 ? (size_t)args.state_mib << 20 : 0;
    uint8_t *rank_state = rank_len > 0 ? calloc(1, rank_len) : NULL;
    if (rank_len > 0 && rank_state == NULL) return 1;
    const char *where = "nowhere";
    int rc = open_and_load(&args, &info, store, &ckpt, &memory, &s, rank_state, rank_len, &where);
    if (rc != 0) {
        fprintf(stderr, "demo_trainer: checkpoints in %s: %s\n", args.ckpt_dir,
                elastic_last_error());
        return 1;
    }
    if (restore_from != 0) elastic_worker_report_phase(worker, "restore", now_ns() - restore_from);
    if (info.rank == 0 && s.step > 0)
        printf("resumed at step %" PRIu64 " from %s\n", s.step, where);
    else if (info.rank == 0)
        printf("started at step 0\n");
    fflush(stdout);
    int memory_full_said = 0, diverged_said = 0;
    while (s.step < (uint64_t)args.steps) {
        int rank = info.rank, world = info.world_size;
        double rows[GLOBAL_BATCH][DIM + 1], grad[DIM + 1];
        partial_gradient(&s, rank, world, rows);
        rc = all_reduce(worker, store, s.step, rank, world, (const double(*)[DIM + 1]) rows, grad);
        if (rc == 0) rc = elastic_worker_heartbeat(worker, s.step);
        if (rc == ELASTIC_ERECONFIGURE) { /* a new generation: same process, new rank */
            rc =
                reconfigure(&args, worker, &info, &store, &ckpt, &memory, &s, rank_state, rank_len);
            if (rc == 0) continue;
        }
        if (rc != 0) {
            fprintf(stderr, "demo_trainer: rank %d step %" PRIu64 ": %s\n", rank, s.step,
                    elastic_strerror(rc));
            return 1;
        }
        for (int d = 0; d < DIM; d++) s.weights[d] -= LEARNING_RATE * grad[d];
        s.loss = grad[DIM];
        s.step++;
        /* A rank that dies after its share of the step and before its save:
         * the others' saves of that step wait for its shard (tests). */
        if (args.die_step > 0 && (uint64_t)args.die_step == s.step && rank == args.die_rank &&
            info.generation == 1 && !promoted)
            raise(SIGKILL);
        /* Silent data corruption (tests): one bit of this rank's replica of
         * the weights flips, as a faulty core or memory would; nothing
         * crashes, and the next all-reduce carries it to every rank. */
        if (args.corrupt_step > 0 && (uint64_t)args.corrupt_step == s.step &&
            rank == args.corrupt_rank && info.generation == 1 && !promoted) {
            uint64_t bits;
            memcpy(&bits, &s.weights[3], sizeof bits);
            bits ^= UINT64_C(1) << 40;
            memcpy(&s.weights[3], &bits, sizeof bits);
            printf("rank %d: flipped a bit of the weights after step %" PRIu64 "\n", rank, s.step);
            fflush(stdout);
        }
        if (memory != NULL && s.step % (uint64_t)args.memory_every == 0)
            rc = save_state(memory, &s, rank_state, rank_len, rank);
        if (rc == ELASTIC_ERECONFIGURE) {
            /* The generation ended while the save waited for a rank that died:
             * the step is not committed; wait for the next generation (poll)
             * and restore like after a failed all-reduce. */
            printf("rank %d: %s\n", rank, elastic_last_error());
            fflush(stdout);
            rc = elastic_worker_poll(worker);
            if (rc == ELASTIC_ERECONFIGURE)
                rc = reconfigure(&args, worker, &info, &store, &ckpt, &memory, &s, rank_state,
                                 rank_len);
            if (rc == 0) continue;
        }
        if (rc == ELASTIC_EDIVERGED) {
            rc = said_diverged(rank, s.step, &diverged_said);
        }
        if (rc == ELASTIC_ENOSPC) {
            /* The tier is full (--memory-ckpt-limit): that step is not in
             * memory, nothing else is lost; training goes on and the next
             * memory save tries again. Said once. */
            if (!memory_full_said)
                fprintf(stderr,
                        "demo_trainer: rank %d memory checkpoint %" PRIu64
                        ": %s (training goes on; memory saves are retried)\n",
                        rank, s.step, elastic_last_error());
            memory_full_said = 1;
            rc = 0;
        }
        if (rc != 0) {
            fprintf(stderr, "demo_trainer: rank %d memory checkpoint %" PRIu64 ": %s\n", rank,
                    s.step, elastic_last_error());
            return 1;
        }
        if (s.step % (uint64_t)args.ckpt_every == 0) {
            rc = save_state(ckpt, &s, rank_state, rank_len, rank);
            if (rc == ELASTIC_EDIVERGED) {
                rc = said_diverged(rank, s.step, &diverged_said);
                continue;
            }
            if (rc == ELASTIC_ERECONFIGURE) { /* --store-commit: as for the memory tier */
                rc = elastic_worker_poll(worker);
                if (rc == ELASTIC_ERECONFIGURE)
                    rc = reconfigure(&args, worker, &info, &store, &ckpt, &memory, &s, rank_state,
                                     rank_len);
                if (rc == 0) continue;
            }
            if (rc != 0) {
                fprintf(stderr, "demo_trainer: rank %d checkpoint %" PRIu64 ": %s\n", rank, s.step,
                        elastic_last_error());
                return 1;
            }
            /* The weights' digest: a soak checks that no step is committed with two contents. */
            if (rank == 0)
                printf("step %" PRIu64 " loss %.6f (checkpoint) weights=%016" PRIx64 "\n", s.step,
                       s.loss, weights_digest(&s));
            fflush(stdout);
        }
        if (args.step_ms > 0)
            nanosleep(&(struct timespec){ 0, (long)args.step_ms * 1000000L }, NULL);
    }
    int rank = info.rank;
    if (rank == 0) write_result(args.result, &s);
    elastic_ckpt_close(memory);
    elastic_ckpt_close(ckpt);
    free(rank_state);
    elastic_worker_close(worker); /* owns the store */
    return 0;
}

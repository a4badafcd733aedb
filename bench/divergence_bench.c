/*
 * The divergence check's cost (issue 36): memory saves of BYTES of
 * replicated state per rank, RANKS ranks (threads) committing through one
 * store, with the check on (ELASTIC_ON_DIVERGENCE=stop, the default) and off,
 * alternating save by save so both see the same machine. Prints key=value
 * lines: each mode's median save time per rank, the difference and its share
 * of the save, and the check's own parts timed alone (the per-rank record
 * built from the manifest's chunk checksums; the judgement over RANKS records).
 *
 *   divergence_bench ROOT BYTES RUNS RANKS
 */
#include "ckpt/ckpt.h"
#include "ckpt/divergence.h"
#include "ckpt/memtier.h"
#include "channel/channel.h"
#include "common/clock.h"

#include <elastic.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 8

typedef struct rank_ctx {
    const char *endpoint;
    char dir[4200];
    uint32_t rank, world;
    const uint8_t *data;
    size_t len;
    uint64_t step;
    double seconds;
    int rc;
} rank_ctx;

static elastic_ckpt *handles[MAX_RANKS];
static elastic_store *stores[MAX_RANKS];

static void *save_one(void *arg)
{
    rank_ctx *r = arg;
    elastic_ckpt_blob blob = {
        .name = "weights", .data = r->data, .len = r->len, .flags = ELASTIC_CKPT_REPLICATED
    };
    uint64_t start = elastic__now_ns();
    r->rc = elastic_ckpt_save(handles[r->rank], r->step, &blob, 1);
    r->seconds = (double)(elastic__now_ns() - start) / 1e9;
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The check's own CPU, without the save around it: the record of one rank's
 * shard (from its manifest) and the judgement over `world` records. */
static void time_parts(size_t bytes, uint32_t world, size_t chunk)
{
    size_t chunks = (bytes + chunk - 1) / chunk;
    ckpt_manifest m = { .chunk_size = (uint32_t)chunk, .blob_count = 1 };
    ckpt_blob blob = {
        .name = "weights", .flags = ELASTIC_CKPT_REPLICATED, .raw_len = bytes, .chunk_count = chunks
    };
    m.blobs = &blob;
    uint64_t *hashes = calloc(chunks, sizeof *hashes);
    for (size_t i = 0; i < chunks; i++) hashes[i] = i * 0x9e3779b97f4a7c15ull;
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt c = { .opts = o };
    ckpt_replica_record records[MAX_RANKS];
    uint64_t start = elastic__now_ns();
    const int reps = 200;
    for (int k = 0; k < reps; k++) {
        ckpt__replicas_of_shard(&c, &m, hashes, &records[0]);
        if (k + 1 < reps) ckpt__replicas_free(&records[0]);
    }
    double record_us = (double)(elastic__now_ns() - start) / 1e3 / reps;
    for (uint32_t r = 1; r < world; r++) records[r] = records[0];
    ckpt_divergence d;
    start = elastic__now_ns();
    for (int k = 0; k < reps; k++) {
        ckpt__divergence_judge(records, world, &d);
        ckpt__divergence_free(&d);
    }
    double judge_us = (double)(elastic__now_ns() - start) / 1e3 / reps;
    printf("chunks=%zu record_us=%.2f judge_us=%.2f\n", chunks, record_us, judge_us);
    ckpt__replicas_free(&records[0]);
    free(hashes);
}

/* What the check adds to the commit's store traffic, alone: each rank's
 * shard digest set with its record in one request (instead of the digest
 * alone), and the committing rank's read of every rank's record in the same
 * request as their digests. Microseconds per commit, the median of `reps`. */
static void time_store(elastic_store *s, uint32_t world)
{
    enum { reps = 2001 };
    static double with[reps], without[reps];
    uint8_t digest[16] = { 1 }, record[8 + 4 * 5 + 4 + 8 + 4 + 24] = { 2 };
    char keys[2 * MAX_RANKS][64];
    const char *ptrs[2 * MAX_RANKS];
    for (uint32_t r = 0; r < 2 * world; r++) {
        snprintf(keys[r], sizeof keys[r], "bench/%s/%u", r < world ? "shard" : "replicas",
                 r % world);
        ptrs[r] = keys[r];
        elastic_store_set(s, keys[r], r < world ? (const void *)digest : record,
                          r < world ? sizeof digest : sizeof record);
    }
    void *values[2 * MAX_RANKS];
    size_t lens[2 * MAX_RANKS];
    for (int k = 0; k < reps; k++) {
        uint64_t t0 = elastic__now_ns();
        elastic_store_set(s, keys[0], digest, sizeof digest);
        elastic_store_multi_get(s, ptrs, world, 1000, values, lens);
        uint64_t t1 = elastic__now_ns();
        for (uint32_t r = 0; r < world; r++) elastic_free(values[r]);
        const char *pair[2] = { keys[0], keys[world] };
        const void *pair_values[2] = { digest, record };
        size_t pair_lens[2] = { sizeof digest, sizeof record };
        uint64_t t2 = elastic__now_ns();
        elastic_store_multi_set(s, pair, pair_values, pair_lens, 2);
        elastic_store_multi_get(s, ptrs, 2 * world, 1000, values, lens);
        uint64_t t3 = elastic__now_ns();
        for (uint32_t r = 0; r < 2 * world; r++) elastic_free(values[r]);
        without[k] = (double)(t1 - t0) / 1e3;
        with[k] = (double)(t3 - t2) / 1e3;
    }
    double a = median(without, reps), b = median(with, reps);
    printf("store_without_us=%.1f store_with_us=%.1f store_added_us=%.1f\n", a, b, b - a);
}

/* One run's shared state: the arguments, the store's endpoint every rank
 * commits through, the replicated bytes and the ranks. */
typedef struct bench {
    const char *root;
    size_t bytes;
    int runs;
    uint32_t world;
    char endpoint[64];
    uint8_t *data;
    rank_ctx ctx[MAX_RANKS];
} bench;

/* Each rank's store connection and checkpoint handle, uncompressed so the
 * save's time is the copy and the commit, not zstd. */
static int open_ranks(bench *b)
{
    for (uint32_t r = 0; r < b->world; r++) {
        rank_ctx *ctx = &b->ctx[r];
        *ctx = (rank_ctx){
            .endpoint = b->endpoint, .rank = r, .world = b->world, .data = b->data, .len = b->bytes
        };
        snprintf(ctx->dir, sizeof ctx->dir, "%s/" CKPT_MEM_OWN_DIR, b->root);
        if (elastic_store_connect(b->endpoint, NULL, &stores[r]) != 0) return 1;
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.compression = ELASTIC_CKPT_NONE;
        o.rank = r;
        o.world = b->world;
        o.generation = 1;
        o.store = stores[r];
        if (elastic_ckpt_open(ctx->dir, &o, &handles[r]) != 0) {
            fprintf(stderr, "open: %s\n", elastic_last_error());
            return 1;
        }
    }
    return 0;
}

/* Every rank saves `step` at once (a thread each), as a job's ranks do. */
static int save_all(bench *b, uint64_t step)
{
    pthread_t threads[MAX_RANKS];
    for (uint32_t r = 0; r < b->world; r++) {
        b->ctx[r].step = step;
        pthread_create(&threads[r], NULL, save_one, &b->ctx[r]);
    }
    for (uint32_t r = 0; r < b->world; r++) pthread_join(threads[r], NULL);
    for (uint32_t r = 0; r < b->world; r++)
        if (b->ctx[r].rc != 0) {
            fprintf(stderr, "save: %s\n", elastic_last_error());
            return 1;
        }
    return 0;
}

/* The check on, then off, save by save, so a loaded machine weighs on both
 * alike; run -1 saves in both modes once, untimed, to warm the tier. The
 * medians of every rank's save, in ms. */
static int time_saves(bench *b, double *on_ms, double *off_ms)
{
    double *on = calloc((size_t)b->runs * b->world, sizeof *on),
           *off = calloc((size_t)b->runs * b->world, sizeof *off);
    size_t n_on = 0, n_off = 0;
    uint64_t step = 0;
    int rc = 0;
    for (int run = -1; rc == 0 && run < b->runs; run++) {
        for (int mode = 0; rc == 0 && mode < 2; mode++) {
            setenv(CHANNEL__ENV_ON_DIVERGENCE, mode == 0 ? "stop" : "off", 1);
            rc = save_all(b, ++step);
            for (uint32_t r = 0; rc == 0 && run >= 0 && r < b->world; r++) {
                if (mode == 0)
                    on[n_on++] = b->ctx[r].seconds;
                else
                    off[n_off++] = b->ctx[r].seconds;
            }
        }
    }
    if (rc == 0) {
        *on_ms = median(on, n_on) * 1e3;
        *off_ms = median(off, n_off) * 1e3;
    }
    free(on);
    free(off);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: divergence_bench ROOT BYTES RUNS RANKS\n");
        return 2;
    }
    bench b = { .root = argv[1],
                .bytes = strtoull(argv[2], NULL, 10),
                .runs = atoi(argv[3]),
                .world = (uint32_t)atoi(argv[4]) };
    if (b.world < 2 || b.world > MAX_RANKS || b.runs < 1 || b.bytes == 0) return 2;
    if (ckpt__mem_tier_create(b.root, (uint64_t)b.bytes * b.world * 4 + (64u << 20), 2) != 0) {
        fprintf(stderr, "tier: %s\n", elastic_last_error());
        return 1;
    }
    elastic_store_server *server;
    if (elastic_store_server_start(NULL, &server) != 0) return 1;
    int port = 0;
    if (elastic_store_server_get_port(server, &port) != 0) return 1;
    snprintf(b.endpoint, sizeof b.endpoint, "127.0.0.1:%d", port);
    b.data = malloc(b.bytes);
    for (size_t i = 0; i < b.bytes; i++) b.data[i] = (uint8_t)(i * 2654435761u >> 11);
    double on_ms, off_ms;
    if (open_ranks(&b) != 0 || time_saves(&b, &on_ms, &off_ms) != 0) return 1;
    printf("bytes=%zu ranks=%u runs=%d save_off_ms=%.3f save_on_ms=%.3f added_ms=%.3f "
           "added_pct=%.2f\n",
           b.bytes, b.world, b.runs, off_ms, on_ms, on_ms - off_ms,
           (on_ms - off_ms) / off_ms * 100);
    time_parts(b.bytes, b.world, handles[0]->opts.chunk_bytes);
    time_store(stores[0], b.world);
    for (uint32_t r = 0; r < b.world; r++) {
        elastic_ckpt_close(handles[r]);
        elastic_store_close(stores[r]);
    }
    elastic_store_server_close(server);
    free(b.data);
    return 0;
}

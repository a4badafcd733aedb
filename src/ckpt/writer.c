/*
 * Writing one rank's shard: blobs are cut into chunks that the worker pool
 * compresses (or stores raw when they do not shrink) and checksums while the
 * caller's thread appends finished chunks to a temporary file in order. The
 * commit writes the manifest and trailer, fsyncs, renames the shard into place
 * and hands over to the global commit (commit.c).
 */
#include "ckpt/ckpt.h"
#include "channel/channel.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define WINDOW_MAX      16         /* chunks in flight per transaction */
#define SMALL_WRITE_BUF (1u << 20) /* small stored chunks are coalesced into writes of this size */
#define WRITEBACK_STEP  (64ull << 20) /* start kernel writeback every this many bytes */
#define ADAPT_CHUNKS    16            /* compression is re-judged every this many chunks */
#define RAW_STREAK      4 /* raw verdicts in a row after which chunks are sampled sparsely */
#define SAMPLE_EVERY    8 /* then every this many chunks */

typedef struct chunk_slot {
    ckpt_task task; /* first: the pool hands back &task */
    int compression, level;
    bool quick;         /* a raw streak: only a quick probe decides (pool.c) */
    bool sampled;       /* result: the chunk was judged by a full sample */
    uint64_t min_bps;   /* compress only faster than this (pool.c) */
    const uint8_t *src; /* the caller's memory (borrowed) or in_buf */
    size_t raw_len;
    bool borrowed;
    uint8_t *in_buf, *out_buf; /* chunk_size / compress bound, allocated on first use */
    const uint8_t *stored;     /* results */
    size_t stored_len;
    uint32_t codec;
    uint64_t hash;
    bool want_raw_hash; /* a replicated blob's chunk, compared across ranks (divergence.h) */
    uint64_t raw_hash;  /* XXH3-64 of its raw bytes: the stored hash when stored raw */
} chunk_slot;

struct elastic_ckpt_txn {
    elastic_ckpt *c;
    ckpt_worker_ctx *ctx; /* for chunks run on this thread (no pool) */
    uint64_t step;
    char step_dir[PATH_MAX], tmp_path[PATH_MAX + 256], final_path[PATH_MAX + 256];
    int fd;
    bool created_dir;
    bool renamed; /* the shard is at final_path (it may have replaced a file of that name) */
    uint64_t offset, writeback_done; /* bytes in the file; bytes handed to writeback */
    uint64_t reserved_end;           /* memory tier: the file is reserved up to here */
    bool recycled;                /* memory tier: written over a spare (cut to length at the end) */
    uint64_t waited_cpu_ns;       /* writer blocked on compression, this window */
    uint64_t waited_io_ns;        /* writer blocked on write/writeback, this window */
    uint64_t io_ns;               /* write, writeback and fsync, the whole transaction */
    unsigned judged, raw_left;    /* chunks since the last judgement; chunks to store raw */
    unsigned raw_streak, skipped; /* samples in a row that said "raw"; samples skipped since */
    bool blob_start;              /* the next chunk is a blob's first: always sampled */
    int error;                    /* sticky: the first failure */
    char why[512];                /* and its detail */
    ckpt_manifest m;
    uint64_t *raw_hashes; /* per chunk of m, beside m.chunks (chunk_cap entries) */
    bool compare;         /* replicated blobs' digests are published at commit */
    bool replicated_now;  /* the open blob is replicated */
    chunk_slot slots[WINDOW_MAX];
    size_t window, head, count; /* ring of submitted-but-unwritten slots */
    uint8_t *small_buf;
    size_t small_len;
    elastic_ckpt_writer *writer;
};

struct elastic_ckpt_writer {
    elastic_ckpt_txn *txn;
    size_t blob;     /* index in txn->m.blobs */
    size_t fill_len; /* bytes copied into the next slot's in_buf */
    bool skip;       /* a replicated blob another rank writes */
};

/* ---- one transaction at a time ----------------------------------------------- */

bool ckpt__txn_try_claim(elastic_ckpt *c)
{
    pthread_mutex_lock(&c->lock);
    bool claimed = !c->txn_open;
    c->txn_open = true;
    pthread_mutex_unlock(&c->lock);
    return claimed;
}

void ckpt__txn_release(elastic_ckpt *c)
{
    pthread_mutex_lock(&c->lock);
    c->txn_open = false;
    pthread_mutex_unlock(&c->lock);
}

/* ---- failure and cleanup -------------------------------------------------------- */

static void drop_files(elastic_ckpt_txn *t)
{
    if (t->fd >= 0) close(t->fd);
    t->fd = -1;
    unlink(t->tmp_path);
    if (t->created_dir) rmdir(t->step_dir); /* only if empty: other ranks may share it */
}

/* Records the first failure and removes the temporary file at once, so no
 * temp file outlives an error even if the caller never aborts. */
static int txn_fail(elastic_ckpt_txn *t, int rc)
{
    if (t->error == 0) {
        t->error = rc;
        snprintf(t->why, sizeof t->why, "%s", elastic_last_error());
        drop_files(t);
        ELASTIC_LOG_W("ckpt", "step %llu: %s (%s)", (unsigned long long)t->step,
                      elastic_strerror(rc), elastic_last_error());
    }
    return t->error;
}

/* The first failure again, with its detail, for calls after it. */
static int txn_error(const elastic_ckpt_txn *t)
{
    return elastic__fail(t->error, "%s", t->why);
}

/* Waits until no worker uses the transaction's buffers. */
static void wait_workers(elastic_ckpt_txn *t)
{
    for (; t->count > 0; t->count--, t->head = (t->head + 1) % t->window)
        ckpt__pool_wait(t->c->pool, &t->slots[t->head].task);
}

static void txn_free(elastic_ckpt_txn *t)
{
    wait_workers(t);
    /* Hand the buffers back to the handle for the next transaction. */
    for (size_t i = 0; i < WINDOW_MAX; i++) {
        t->c->spare.in[i] = t->slots[i].in_buf;
        t->c->spare.out[i] = t->slots[i].out_buf;
    }
    t->c->spare.small = t->small_buf;
    for (size_t i = 0; i < t->m.blob_count; i++) free((char *)t->m.blobs[i].name);
    free(t->m.blobs);
    free(t->m.chunks);
    free(t->raw_hashes);
    free(t->writer);
    ckpt__txn_release(t->c);
    free(t);
}

/* ---- appending to the file ------------------------------------------------------ */

static int flush_small(elastic_ckpt_txn *t)
{
    int rc = ckpt__write_all(t->fd, t->small_buf, t->small_len, t->tmp_path);
    t->small_len = 0;
    return rc;
}

/* Kicks off writeback of what was written so far so the final fsync has
 * little left to do (the disk works while we compress). */
static void start_writeback(elastic_ckpt_txn *t)
{
    if (t->c->opts.fsync != ELASTIC_CKPT_FSYNC_FULL ||
        t->offset - t->writeback_done < WRITEBACK_STEP)
        return;
    sync_file_range(t->fd, (off_t)t->writeback_done, (off_t)(t->offset - t->writeback_done),
                    SYNC_FILE_RANGE_WRITE);
    t->writeback_done = t->offset;
}

/* Memory tier: room for the next bytes is reserved before they are written,
 * in steps that double up to 64 MiB (few reservations for a large shard, a
 * tight fit for a small one). */
#define RESERVE_MAX   (64ull << 20)
#define RESERVE_ROUND (64ull << 10)

static int reserve(elastic_ckpt_txn *t, size_t len)
{
    uint64_t need = t->offset + len - t->reserved_end;
    uint64_t grow = t->reserved_end < RESERVE_MAX ? t->reserved_end : RESERVE_MAX;
    if (grow < need) grow = need;
    grow = (grow + RESERVE_ROUND - 1) / RESERVE_ROUND * RESERVE_ROUND;
    char what[96];
    snprintf(what, sizeof what, "step %llu, rank %u", (unsigned long long)t->step,
             (unsigned)t->c->opts.rank);
    int rc = ckpt__mem_reserve(&t->c->mem, t->fd, t->reserved_end, grow, what);
    /* A tight limit still fits a shard that fits exactly. */
    if (rc == ELASTIC_ENOSPC && grow > need)
        rc = ckpt__mem_reserve(&t->c->mem, t->fd, t->reserved_end, grow = need, what);
    if (rc != 0) return txn_fail(t, rc);
    t->reserved_end += grow;
    return 0;
}

static int append(elastic_ckpt_txn *t, const void *data, size_t len)
{
    int rc = 0;
    if (t->c->mem.root != NULL && t->offset + len > t->reserved_end && (rc = reserve(t, len)) != 0)
        return rc;
    if (len >= SMALL_WRITE_BUF / 2) {
        if (t->small_len > 0) rc = flush_small(t);
        if (rc == 0) rc = ckpt__write_all(t->fd, data, len, t->tmp_path);
    } else {
        if (t->small_len + len > SMALL_WRITE_BUF) rc = flush_small(t);
        if (rc == 0) {
            memcpy(t->small_buf + t->small_len, data, len);
            t->small_len += len;
        }
    }
    if (rc != 0) return txn_fail(t, rc);
    t->offset += len;
    start_writeback(t);
    return 0;
}

static int push_chunk(elastic_ckpt_txn *t, const chunk_slot *s)
{
    if (t->m.chunk_count == t->m.chunk_cap) {
        size_t cap = t->m.chunk_cap ? t->m.chunk_cap * 2 : 64;
        ckpt_chunk *grown = realloc(t->m.chunks, cap * sizeof *grown);
        if (grown == NULL) return txn_fail(t, elastic__fail(ELASTIC_ENOMEM, "chunk table"));
        t->m.chunks = grown;
        uint64_t *hashes = t->compare ? realloc(t->raw_hashes, cap * sizeof *hashes) : NULL;
        if (t->compare && hashes == NULL)
            return txn_fail(t, elastic__fail(ELASTIC_ENOMEM, "chunk table"));
        t->raw_hashes = hashes;
        t->m.chunk_cap = cap;
    }
    if (t->compare) t->raw_hashes[t->m.chunk_count] = s->raw_hash;
    t->m.chunks[t->m.chunk_count++] = (ckpt_chunk){ .offset = t->offset,
                                                    .raw_len = (uint32_t)s->raw_len,
                                                    .stored_len = (uint32_t)s->stored_len,
                                                    .codec = s->codec,
                                                    .hash = s->hash };
    return 0;
}

/* ---- the chunk pipeline ------------------------------------------------------------ */

static void run_chunk(ckpt_task *task, ckpt_worker_ctx *ctx)
{
    chunk_slot *s = (chunk_slot *)task;
    size_t packed = 0;
    if (s->compression == ELASTIC_CKPT_ZSTD &&
        ckpt__ctx_compress(ctx, s->level, s->src, s->raw_len, s->out_buf,
                           ckpt__compress_bound(s->raw_len), s->min_bps, s->quick, &packed) == 0) {
        s->stored = s->out_buf;
        s->stored_len = packed;
        s->codec = CKPT_CODEC_ZSTD;
    } else {
        s->stored = s->src;
        s->stored_len = s->raw_len;
        s->codec = CKPT_CODEC_RAW;
    }
    /* A quick probe's "raw" says nothing about entropy-coded gains: it does
     * not extend the streak; its "compressed" ends it like a sample's. */
    s->sampled = s->compression == ELASTIC_CKPT_ZSTD && (!s->quick || s->codec == CKPT_CODEC_ZSTD);
    s->hash = ckpt__hash(s->stored, s->stored_len);
    /* A replicated chunk stored compressed: its raw bytes' checksum too, so
     * digests compare whatever each rank's compression decided (about 1/20
     * of the compression's own cost). */
    s->raw_hash = s->codec == CKPT_CODEC_RAW ? s->hash
                  : s->want_raw_hash         ? ckpt__hash(s->src, s->raw_len)
                                             : 0;
}

/* Waits for the oldest submitted chunk and appends it to the file. */
/* Adaptive compression: past the first writeback step, if the writer waited
 * longer for the compressing workers than in write() (page cache, and the
 * kernel's dirty throttling once the disk falls behind) over the last
 * ADAPT_CHUNKS chunks, compression is the bottleneck: the next ADAPT_CHUNKS
 * chunks are stored raw, then it is tried again. */
static void judge_compression(elastic_ckpt_txn *t)
{
    if (++t->judged < ADAPT_CHUNKS) return;
    if (t->offset > WRITEBACK_STEP && t->waited_cpu_ns > t->waited_io_ns)
        t->raw_left = ADAPT_CHUNKS;
    t->judged = 0;
    t->waited_cpu_ns = t->waited_io_ns = 0;
}

static int write_oldest(elastic_ckpt_txn *t)
{
    chunk_slot *s = &t->slots[t->head];
    uint64_t start = elastic__now_ns();
    ckpt__pool_wait(t->c->pool, &s->task);
    uint64_t computed = elastic__now_ns();
    t->head = (t->head + 1) % t->window;
    t->count--;
    if (t->error) return t->error;
    int rc = push_chunk(t, s);
    if (rc == 0) rc = append(t, s->stored, s->stored_len);
    if (s->sampled) { /* the verdict on this chunk steers how often the next ones are sampled */
        if (s->codec == CKPT_CODEC_RAW)
            t->raw_streak++;
        else
            t->raw_streak = t->skipped = 0;
    }
    uint64_t io = elastic__now_ns() - computed;
    t->waited_cpu_ns += computed - start;
    t->waited_io_ns += io;
    t->io_ns += io;
    judge_compression(t);
    return rc;
}

/* Writes every submitted chunk; afterwards no slot borrows caller memory. */
static int write_all_submitted(elastic_ckpt_txn *t)
{
    int rc = 0;
    while (t->count > 0) {
        int one = write_oldest(t);
        if (rc == 0) rc = one;
    }
    return rc;
}

/* The slot the next chunk goes into, writing the oldest when all are busy. */
static chunk_slot *free_slot(elastic_ckpt_txn *t)
{
    while (t->count == t->window) write_oldest(t);
    return &t->slots[(t->head + t->count) % t->window];
}

static int prepare_slot(elastic_ckpt_txn *t, chunk_slot *s, bool need_in_buf)
{
    size_t chunk = t->m.chunk_size;
    if (need_in_buf && s->in_buf == NULL && (s->in_buf = malloc(chunk)) == NULL)
        return txn_fail(t, elastic__fail(ELASTIC_ENOMEM, "chunk buffer"));
    if (t->c->opts.compression == ELASTIC_CKPT_ZSTD && s->out_buf == NULL &&
        (s->out_buf = malloc(ckpt__compress_bound(chunk))) == NULL)
        return txn_fail(t, elastic__fail(ELASTIC_ENOMEM, "chunk buffer"));
    return 0;
}

/* Until a save has measured the disk, assume a fast one (2 GB/s): compressing
 * is then judged worth it only when it is clearly faster than writing. */
#define ASSUMED_DISK_BPS 2000000000ull
#define DISK_RATE_MARGIN 1.25

/* Each compressing thread must beat its share of the disk's rate, with a
 * margin for the pipeline's hand-offs. */
static uint64_t compress_floor_bps(elastic_ckpt *c)
{
    uint64_t disk = __atomic_load_n(&c->disk_bps, __ATOMIC_RELAXED);
    if (disk == 0) disk = ASSUMED_DISK_BPS;
    return (uint64_t)((double)disk * DISK_RATE_MARGIN / ckpt__pool_threads(c->pool));
}

/* After a commit: the rate the disk took this save's bytes at (write,
 * writeback and fsync time; what the page cache absorbed while we computed
 * counts as free, so it errs towards a faster disk, i.e. towards raw). */
static void note_disk_rate(elastic_ckpt_txn *t)
{
    if (t->c->opts.fsync != ELASTIC_CKPT_FSYNC_FULL || t->offset < (8u << 20) || t->io_ns == 0)
        return;
    double rate = (double)t->offset * 1e9 / (double)t->io_ns;
    uint64_t old = __atomic_load_n(&t->c->disk_bps, __ATOMIC_RELAXED);
    uint64_t next = old == 0 ? (uint64_t)rate : (uint64_t)(0.5 * (double)old + 0.5 * rate);
    __atomic_store_n(&t->c->disk_bps, next, __ATOMIC_RELAXED);
}

static void submit(elastic_ckpt_txn *t, chunk_slot *s, const uint8_t *src, size_t len,
                   bool borrowed)
{
    s->task.run = run_chunk;
    s->compression = t->c->opts.compression;
    if (t->raw_left > 0) {
        t->raw_left--;
        s->compression = ELASTIC_CKPT_NONE;
    }
    /* Chunks that keep coming out raw (float weights) get a full sample only
     * every 8th chunk after 4 such verdicts, and a blob's first chunk; the
     * others a quick probe that still catches zeros and repeats (zeros after
     * weights), whose compression ends the streak. */
    s->quick = s->compression == ELASTIC_CKPT_ZSTD && t->raw_streak >= RAW_STREAK &&
               !t->blob_start && ++t->skipped % SAMPLE_EVERY != 0;
    t->blob_start = false;
    s->level = t->c->opts.zstd_level;
    s->min_bps = compress_floor_bps(t->c);
    s->src = src;
    s->raw_len = len;
    s->borrowed = borrowed;
    s->want_raw_hash = t->replicated_now;
    t->count++;
    ckpt__pool_submit(t->c->pool, t->ctx, &s->task);
}

/* Writes whole chunks straight from the caller's memory and copies a tail
 * into the next slot; returns once no slot borrows `data` any more. */
static int writer_feed(elastic_ckpt_writer *w, const uint8_t *data, size_t len)
{
    elastic_ckpt_txn *t = w->txn;
    size_t chunk = t->m.chunk_size;
    bool borrowed_any = false;
    while (len > 0 && t->error == 0) {
        chunk_slot *s = free_slot(t);
        if (t->error) break;
        if (w->fill_len == 0 && len >= chunk) {
            if (prepare_slot(t, s, false) != 0) break;
            submit(t, s, data, chunk, true);
            borrowed_any = true;
            data += chunk;
            len -= chunk;
            continue;
        }
        if (prepare_slot(t, s, true) != 0) break;
        size_t n = chunk - w->fill_len < len ? chunk - w->fill_len : len;
        memcpy(s->in_buf + w->fill_len, data, n);
        w->fill_len += n;
        data += n;
        len -= n;
        if (w->fill_len == chunk) {
            submit(t, s, s->in_buf, chunk, false);
            w->fill_len = 0;
        }
    }
    if (borrowed_any) write_all_submitted(t);
    return t->error;
}

/* ---- public: begin, put, writer, commit, abort ------------------------------------------ */

static int open_step_dir(elastic_ckpt_txn *t)
{
    ckpt__step_dir(t->c->dir, t->step, t->step_dir, sizeof t->step_dir);
    if (mkdir(t->step_dir, ckpt__dir_mode(&t->c->opts)) == 0) {
        t->created_dir = true;
        if (t->c->opts.fsync == ELASTIC_CKPT_FSYNC_FULL) return ckpt__fsync_dir(t->c->dir);
        return 0;
    }
    if (errno != EEXIST) return ckpt__fail_errno(errno, "create", t->step_dir);
    char commit_path[PATH_MAX + 16];
    snprintf(commit_path, sizeof commit_path, "%s/" CKPT_COMMIT_NAME, t->step_dir);
    if (access(commit_path, F_OK) == 0)
        return elastic__fail(ELASTIC_EEXIST, "step %llu is already committed",
                             (unsigned long long)t->step);
    return 0;
}

static int open_temp_shard(elastic_ckpt_txn *t)
{
    const elastic_ckpt_opts *o = &t->c->opts;
    char shard[96];
    ckpt__shard_name(o->rank, o->generation, shard, sizeof shard);
    snprintf(t->final_path, sizeof t->final_path, "%s/%s", t->step_dir, shard);
    snprintf(t->tmp_path, sizeof t->tmp_path, "%s/" CKPT_TMP_PREFIX "%s.%ld.%u", t->step_dir, shard,
             (long)getpid(), t->c->tmp_counter++);
    t->fd = -1;
    if (t->c->mem.root != NULL && ckpt__mem_take_spare(t->c->dir, o->rank, t->tmp_path)) {
        t->fd = open(t->tmp_path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        t->recycled = t->fd >= 0;
        if (t->fd < 0) unlink(t->tmp_path);
    }
    if (t->fd < 0)
        t->fd = open(t->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     t->c->opts.file_mode);
    if (t->fd < 0) return ckpt__fail_errno(errno, "create", t->tmp_path);
    ckpt_header h = { .step = t->step,
                      .generation = o->generation,
                      .rank = o->rank,
                      .world = o->world,
                      .chunk_size = t->m.chunk_size,
                      .incarnation = o->incarnation };
    ckpt__header_encode(&h, t->small_buf);
    t->small_len = CKPT_HEADER_BYTES;
    t->offset = CKPT_HEADER_BYTES;
    return 0;
}

/* The previous transaction's buffers (chunk size never changes per handle). */
static void take_spare_buffers(elastic_ckpt *c, elastic_ckpt_txn *t)
{
    _Static_assert(WINDOW_MAX <= ELASTIC__ARRAY_LEN(c->spare.in), "spare buffer table too small");
    for (size_t i = 0; i < WINDOW_MAX; i++) {
        t->slots[i].in_buf = c->spare.in[i];
        t->slots[i].out_buf = c->spare.out[i];
        c->spare.in[i] = c->spare.out[i] = NULL;
    }
    t->small_buf = c->spare.small;
    c->spare.small = NULL;
}

int ckpt__txn_begin(elastic_ckpt *c, uint64_t step, ckpt_worker_ctx *ctx, elastic_ckpt_txn **out)
{
    elastic_ckpt_txn *t = calloc(1, sizeof *t);
    if (t != NULL) take_spare_buffers(c, t);
    if (t == NULL || (t->small_buf == NULL && (t->small_buf = malloc(SMALL_WRITE_BUF)) == NULL)) {
        free(t);
        ckpt__txn_release(c);
        return elastic__fail(ELASTIC_ENOMEM, "checkpoint transaction");
    }
    t->c = c;
    t->ctx = ctx;
    t->step = step;
    t->fd = -1;
    t->m = (ckpt_manifest){ .step = step,
                            .generation = c->opts.generation,
                            .rank = c->opts.rank,
                            .world = c->opts.world,
                            .chunk_size = (uint32_t)c->opts.chunk_bytes };
    t->compare = ckpt__replicas_wanted(c);
    int threads = c->opts.threads > 1 ? c->opts.threads : 1;
    t->window = c->pool ? (size_t)(2 * threads + 2 < WINDOW_MAX ? 2 * threads + 2 : WINDOW_MAX) : 1;
    /* Another rank's failed save removes the step directory it created once
     * it is empty (drop_files), which it can be between our mkdir and our
     * create: then make it again (bounded: each try is another rank's
     * failure in that instant). */
    int rc = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        rc = open_step_dir(t);
        if (rc == 0) rc = open_temp_shard(t);
        if (rc != ELASTIC_ENOTFOUND) break;
    }
    if (rc != 0) {
        drop_files(t);
        t->fd = -1;
        txn_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_begin(elastic_ckpt *c, uint64_t step, elastic_ckpt_txn **txn)
{
    elastic__clear_error();
    if (c == NULL || txn == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt begin: NULL argument");
    if (step == UINT64_MAX)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: step UINT64_MAX can never be superseded");
    if (!ckpt__txn_try_claim(c))
        return elastic__fail(ELASTIC_EBUSY, "a checkpoint transaction or save is in progress");
    return ckpt__txn_begin(c, step, c->ctx, txn);
}

static int check_name(const ckpt_manifest *m, const char *name)
{
    size_t len = name ? strnlen(name, CKPT_MAX_NAME + 1) : 0;
    if (len == 0 || len > CKPT_MAX_NAME)
        return elastic__fail(ELASTIC_EINVAL, "blob name must be 1..%u bytes", CKPT_MAX_NAME);
    if (m->blob_count >= CKPT_MAX_BLOBS)
        return elastic__fail(ELASTIC_ELIMIT, "more than %u blobs", CKPT_MAX_BLOBS);
    for (size_t i = 0; i < m->blob_count; i++)
        if (strcmp(m->blobs[i].name, name) == 0)
            return elastic__fail(ELASTIC_EEXIST, "blob \"%s\" already put", name);
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_writer_open(elastic_ckpt_txn *t, const char *name, unsigned flags,
                                            elastic_ckpt_writer **writer)
{
    elastic__clear_error();
    if (t == NULL || writer == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt writer: NULL argument");
    if (t->error) return txn_error(t);
    if (t->writer) return elastic__fail(ELASTIC_ESTATE, "another blob writer is open");
    if (flags & ~ELASTIC_CKPT_REPLICATED)
        return elastic__fail(ELASTIC_EINVAL, "unknown blob flags 0x%x", flags);
    int rc = check_name(&t->m, name);
    if (rc) return rc;
    elastic_ckpt_writer *w = calloc(1, sizeof *w);
    if (w == NULL) return elastic__fail(ELASTIC_ENOMEM, "blob writer");
    w->txn = t;
    const elastic_ckpt_opts *o = &t->c->opts;
    w->skip = (flags & ELASTIC_CKPT_REPLICATED) && o->shared_storage && o->rank != 0;
    if (!w->skip) {
        if (t->m.blob_count == t->m.blob_cap) {
            size_t cap = t->m.blob_cap ? t->m.blob_cap * 2 : 16;
            ckpt_blob *grown = realloc(t->m.blobs, cap * sizeof *grown);
            if (grown == NULL) {
                free(w);
                return elastic__fail(ELASTIC_ENOMEM, "blob table");
            }
            t->m.blobs = grown;
            t->m.blob_cap = cap;
        }
        char *copy = elastic__strdup(name);
        if (copy == NULL) {
            free(w);
            return elastic__fail(ELASTIC_ENOMEM, "blob name");
        }
        w->blob = t->m.blob_count++;
        t->blob_start = true; /* a new blob's first chunk is judged afresh (zeros after weights) */
        t->replicated_now = t->compare && (flags & ELASTIC_CKPT_REPLICATED);
        t->m.blobs[w->blob] =
            (ckpt_blob){ .name = copy, .flags = flags, .first_chunk = t->m.chunk_count };
    }
    t->writer = w;
    *writer = w;
    return 0;
}

ELASTIC_EXTERN int elastic_ckpt_writer_write(elastic_ckpt_writer *w, const void *data, size_t len)
{
    elastic__clear_error();
    if (w == NULL || (data == NULL && len > 0))
        return elastic__fail(ELASTIC_EINVAL, "ckpt write: NULL argument");
    if (w->txn->error) return txn_error(w->txn);
    if (w->skip || len == 0) return 0;
    w->txn->m.blobs[w->blob].raw_len += len;
    return writer_feed(w, data, len) ? txn_error(w->txn) : 0;
}

ELASTIC_EXTERN int elastic_ckpt_writer_close(elastic_ckpt_writer *w)
{
    elastic__clear_error();
    if (w == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt writer close: NULL");
    elastic_ckpt_txn *t = w->txn;
    if (!w->skip && t->error == 0) {
        if (w->fill_len > 0) {
            chunk_slot *s = free_slot(t);
            if (t->error == 0) submit(t, s, s->in_buf, w->fill_len, false);
        }
        write_all_submitted(t);
        ckpt_blob *b = &t->m.blobs[w->blob];
        b->chunk_count = t->m.chunk_count - b->first_chunk;
    }
    t->writer = NULL;
    free(w);
    return t->error ? txn_error(t) : 0;
}

ELASTIC_EXTERN int elastic_ckpt_put_flags(elastic_ckpt_txn *t, const char *name, const void *data,
                                          size_t len, unsigned flags)
{
    elastic_ckpt_writer *w;
    int rc = elastic_ckpt_writer_open(t, name, flags, &w);
    if (rc) return rc;
    rc = elastic_ckpt_writer_write(w, data, len);
    int close_rc = elastic_ckpt_writer_close(w);
    return rc ? rc : close_rc;
}

ELASTIC_EXTERN int elastic_ckpt_put(elastic_ckpt_txn *t, const char *name, const void *data,
                                    size_t len)
{
    return elastic_ckpt_put_flags(t, name, data, len, 0);
}

/* Manifest, trailer, fsync, close, rename: the rank-local commit. */
static int finish_shard(elastic_ckpt_txn *t, ckpt_shard_digest *digest)
{
    bytes__buf manifest = { 0 };
    int rc = ckpt__manifest_encode(&t->m, &manifest);
    ckpt_trailer tr = { .manifest_offset = t->offset,
                        .manifest_len = manifest.len,
                        .manifest_hash = rc ? 0 : ckpt__hash(manifest.data, manifest.len),
                        .step = t->step };
    uint8_t trailer[CKPT_TRAILER_BYTES];
    ckpt__trailer_encode(&tr, trailer);
    if (rc == 0) rc = append(t, manifest.data, manifest.len);
    free(manifest.data);
    if (rc == 0) rc = append(t, trailer, sizeof trailer);
    if (rc == 0 && t->small_len > 0 && (rc = flush_small(t)) != 0) txn_fail(t, rc);
    if (rc == 0 && t->recycled && ftruncate(t->fd, (off_t)t->offset) != 0)
        rc = txn_fail(t, ckpt__fail_errno(errno, "truncate", t->tmp_path));
    if (rc == 0 && t->c->mem.root != NULL)
        ckpt__mem_release_tail(t->fd, t->offset, t->reserved_end);
    uint64_t fsync_start = elastic__now_ns();
    if (rc == 0 && t->c->opts.fsync == ELASTIC_CKPT_FSYNC_FULL &&
        (rc = ckpt__fsync_fd(t->fd, t->tmp_path)) != 0)
        txn_fail(t, rc);
    t->io_ns += elastic__now_ns() - fsync_start;
    if (rc == 0 && close(t->fd) != 0)
        rc = txn_fail(t, ckpt__fail_errno(errno, "close", t->tmp_path));
    t->fd = -1;
    /* A fenced generation must not rename its shard over a newer one's of
     * the same name (a job started again counts generations from 1, so its
     * generation's shards are named as the old job's were): checked again
     * here, where a frozen worker of the old job that thaws gets to. Not in
     * a memory tier: its directory is this agent's alone (the old job's
     * agent had its own), and its saves run every step. */
    if (rc == 0 && t->c->mem.root == NULL && (rc = ckpt__fence_check(t->c, t->step)) != 0) {
        txn_fail(t, rc);
        if (rc == ELASTIC_ESTATE) ckpt__drop_generation_shards(t->c, t->step_dir);
    }
    if (rc == 0 && rename(t->tmp_path, t->final_path) != 0)
        rc = txn_fail(t, ckpt__fail_errno(errno, "rename", t->tmp_path));
    t->renamed = rc == 0;
    if (rc == 0 && t->c->opts.fsync == ELASTIC_CKPT_FSYNC_FULL &&
        (rc = ckpt__fsync_dir(t->step_dir)) != 0)
        txn_fail(t, rc);
    digest->file_size = t->offset;
    digest->manifest_hash = tr.manifest_hash;
    return rc ? t->error : 0;
}

ELASTIC_EXTERN int elastic_ckpt_commit(elastic_ckpt_txn *t)
{
    elastic__clear_error();
    if (t == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt commit: NULL");
    int rc = t->writer ? elastic__fail(ELASTIC_ESTATE, "a blob writer is still open") : t->error;
    if (rc != 0) {
        if (t->error) rc = txn_error(t);
        ckpt__store_abandon(t->c, t->step, rc, elastic_last_error());
        drop_files(t);
        txn_free(t);
        return rc;
    }
    /* A generation whose replicas diverged commits nothing after it. */
    if ((rc = ckpt__replicas_refuse(t->c, t->step)) != 0) {
        ckpt__store_abandon(t->c, t->step, rc, elastic_last_error());
        drop_files(t);
        txn_free(t);
        return rc;
    }
    ckpt_replica_record replicas = { 0 };
    if (t->compare && (rc = ckpt__replicas_of_shard(t->c, &t->m, t->raw_hashes, &replicas)) != 0)
        ELASTIC_LOG_W("ckpt", "step %llu: replicas not compared: %s", (unsigned long long)t->step,
                      elastic_last_error());
    ckpt_shard_digest digest;
    rc = finish_shard(t, &digest);
    if (rc != 0) {
        ckpt__store_abandon(t->c, t->step, rc, elastic_last_error());
        if (t->renamed) unlink(t->final_path); /* renamed, then its directory fsync failed */
        drop_files(t);
    } else if ((rc = ckpt__global_commit(t->c, t->step, &digest, t->compare ? &replicas : NULL)) !=
               0) {
        if (rc == ELASTIC_ERECONFIGURE) /* in-process recovery: expected, the trainer recovers */
            ELASTIC_LOG_I("ckpt", "%s", elastic_last_error());
        else if (rc == ELASTIC_EDIVERGED) /* the agent has the evidence; said once there */
            ELASTIC_LOG_W("ckpt", "%s", elastic_last_error());
        else
            ELASTIC_LOG_W("ckpt", "step %llu: global commit failed: %s",
                          (unsigned long long)t->step, elastic_last_error());
        /* With one rank nothing of a failed commit stays (the record may be
         * renamed into place with its directory fsync failed). With several
         * the shard stays: another rank may still commit the step with it.
         * A fenced one's step directory may hold a newer generation's commit
         * of the same step: only its own shard went (the fenced commit
         * dropped it). */
        if (t->c->opts.world == 1 && rc != ELASTIC_ESTATE)
            ckpt__remove_step_dir(t->step_dir);
        else
            drop_files(t);
    } else {
        note_disk_rate(t);
        ckpt__report_saved(t->step, t->c->mem.root ? CHANNEL__TIER_MEMORY : CHANNEL__TIER_DISK);
    }
    ckpt__replicas_free(&replicas);
    txn_free(t);
    return rc;
}

ELASTIC_EXTERN void elastic_ckpt_abort(elastic_ckpt_txn *t)
{
    if (t == NULL) return;
    ckpt__store_abandon(t->c, t->step, t->error ? t->error : ELASTIC_ECANCELED,
                        t->error ? t->why : NULL);
    drop_files(t);
    txn_free(t);
}

ELASTIC_EXTERN int elastic_ckpt_save(elastic_ckpt *c, uint64_t step, const elastic_ckpt_blob *blobs,
                                     size_t n)
{
    if (blobs == NULL && n > 0) return elastic__fail(ELASTIC_EINVAL, "ckpt save: NULL blobs");
    uint64_t started_ns = elastic__now_ns();
    elastic_ckpt_txn *t = NULL;
    int rc = elastic_ckpt_begin(c, step, &t);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = elastic_ckpt_put_flags(t, blobs[i].name, blobs[i].data, blobs[i].len, blobs[i].flags);
    if (rc != 0)
        elastic_ckpt_abort(t);
    else
        rc = elastic_ckpt_commit(t);
    ckpt__report_stall(elastic__now_ns() -
                       started_ns); /* the whole save was on the caller's path */
    return rc;
}

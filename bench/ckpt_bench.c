/*
 * Checkpoint throughput against the disk's limit: saves and loads BYTES of
 * tensors (random fp32, normal fp32 weights, bf16 weights, low-entropy
 * zeros/counters, and a mix) with libelastic, with a
 * `dd conv=fsync` of the same size run between our runs so both see the
 * same disk weather, and measures the stall of an asynchronous save against
 * a memcpy of the same bytes into memory the program never touched (what a
 * first save pays too) and into warm memory, with page faults. Loads go into fresh
 * memory (elastic_ckpt_read) and into existing tensors (read_into): in VMs
 * that back guest memory lazily a fresh page costs far more than a copy, so
 * both are shown. Prints medians as key=value lines for
 * bench/run_ckpt.sh, which adds torch.save/torch.load and prints the table.
 * Each set is also saved with compression off ("raw"): the default must
 * never be slower than that.
 * Usage: ckpt_bench DIR [BYTES] [RUNS] [all|save|async|SET]  (SET: the saves of one set)
 */
#include <elastic.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define TENSORS 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Uniform in [-1, 1): random mantissa and sign, like freshly initialised weights. */
static float random_float(void)
{
    uint32_t bits = (uint32_t)next_random();
    union {
        uint32_t u;
        float f;
    } v = { .u = 0x3F800000u | (bits >> 9) };
    return (bits & 1) ? v.f - 1.0f : 1.0f - v.f;
}

/* Trained-looking fp32 weights: normal, standard deviation 0.02 (zstd stores
 * about 90% of them: sign, a few exponent values, a random mantissa). */
static float normal_weight(void)
{
    double u1 = ((double)(next_random() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(next_random() >> 11) / 9007199254740992.0;
    return (float)(0.02 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* bf16 weights as a bf16 model stores them: the upper halves of normal
 * fp32 weights, two per float slot (zstd stores about 80%). */
static void fill_bf16(float *t, size_t n)
{
    uint16_t *h = (uint16_t *)t;
    for (size_t i = 0; i < 2 * n; i++) {
        union {
            float f;
            uint32_t u;
        } v = { .f = normal_weight() };
        h[i] = (uint16_t)(v.u >> 16);
    }
}

/* A low-entropy mix typical of training state: zeros (fresh optimizer
 * moments, masked rows), bf16-representable weights (low 16 bits zero),
 * small integers (step counters, token ids held as float), and random.
 * Kinds 3 random, 4 normal weights, 5 bf16 weights, 6 ones (a norm
 * layer's scale), 7 a repeated pattern (position ids 0..1023 over and over). */
static void fill_tensor(float *t, size_t n, int kind)
{
    if (kind == 5) {
        fill_bf16(t, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: t[i] = 0.0f; break;
        case 1: {
            union {
                float f;
                uint32_t u;
            } v = { .f = random_float() * 0.02f };
            v.u &= 0xFFFF0000u;
            t[i] = v.f;
            break;
        }
        case 2: t[i] = (float)(next_random() % 256); break;
        case 4: t[i] = normal_weight(); break;
        case 6: t[i] = 1.0f; break;
        case 7: t[i] = (float)(i % 1024); break;
        default: t[i] = random_float(); break;
        }
    }
}

typedef struct dataset {
    const char *name;
    float *tensors[TENSORS];
    size_t tensor_bytes;
} dataset;

/* mix: 1 the low-entropy mix (kinds 0-3 in turn), 2 low-entropy only (zeros,
 * ones, a repeated pattern in turn), 0 one kind for every tensor. */
static void make_dataset(dataset *d, const char *name, size_t bytes, int mix, int kind)
{
    d->name = name;
    d->tensor_bytes = bytes / TENSORS;
    for (int i = 0; i < TENSORS; i++) {
        d->tensors[i] = malloc(d->tensor_bytes);
        if (d->tensors[i] == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        fill_tensor(d->tensors[i], d->tensor_bytes / 4,
                    mix == 1   ? i % 4
                    : mix == 2 ? (int[]){ 0, 6, 7 }[i % 3]
                               : kind);
    }
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s (%s)\n", what, elastic_err_name(rc), elastic_last_error());
    exit(1);
}

static void remove_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) exit(1);
}

static double run_dd(const char *dir, size_t bytes)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd,
             "dd if=/dev/zero of='%s/dd.bin' bs=8M count=%zu conv=fsync status=none", dir,
             bytes >> 23);
    double start = now_s();
    if (system(cmd) != 0) exit(1);
    double took = now_s() - start;
    snprintf(cmd, sizeof cmd, "%s/dd.bin", dir);
    unlink(cmd);
    return took;
}

/* CPU seconds of this process (every thread): on a shared machine the wall
 * clock is noisy, the work done is not. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double last_save_cpu;

static double save(elastic_ckpt *c, const dataset *d, uint64_t step)
{
    double start = now_s(), cpu_start = cpu_s();
    elastic_ckpt_txn *txn;
    int rc = elastic_ckpt_begin(c, step, &txn);
    if (rc) die("begin", rc);
    for (int i = 0; i < TENSORS; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer.%d", i);
        if ((rc = elastic_ckpt_put(txn, name, d->tensors[i], d->tensor_bytes)) != 0) die("put", rc);
    }
    if ((rc = elastic_ckpt_commit(txn)) != 0) die("commit", rc);
    last_save_cpu = cpu_s() - cpu_start;
    return now_s() - start;
}

/* Drops the step's pages from the page cache (they are clean after fsync). */
static void evict(const char *dir, uint64_t step)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/step-%020" PRIu64 "/shard-00000-g0.elck", dir, step);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
}

/* latest + read of every tensor, as a restarting trainer does: into fresh
 * memory (elastic_ckpt_read), or into the model's existing tensors
 * (elastic_ckpt_read_into; `into` non-NULL). */
static double load(const char *dir, const dataset *d, float **into, int check)
{
    double start = now_s();
    elastic_ckpt *c;
    int rc = elastic_ckpt_open(dir, NULL, &c);
    if (rc) die("open", rc);
    uint64_t latest;
    if ((rc = elastic_ckpt_latest(c, &latest)) != 0) die("latest", rc);
    void *data[TENSORS];
    for (int i = 0; i < TENSORS; i++) {
        char name[32];
        size_t len;
        snprintf(name, sizeof name, "layer.%d", i);
        if (into)
            rc = elastic_ckpt_read_into(c, latest, name, into[i], d->tensor_bytes, &len);
        else
            rc = elastic_ckpt_read(c, latest, name, &data[i], &len);
        if (rc) die("read", rc);
        if (into) data[i] = into[i];
    }
    double took = now_s() - start;
    for (int i = 0; i < TENSORS; i++) {
        if (check && memcmp(data[i], d->tensors[i], d->tensor_bytes) != 0) {
            fprintf(stderr, "loaded data differs\n");
            exit(1);
        }
        if (!into) elastic_free(data[i]);
    }
    elastic_ckpt_close(c);
    return took;
}

static size_t stored_bytes(const char *dir, uint64_t step)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/step-%020" PRIu64 "/shard-00000-g0.elck", dir, step);
    FILE *f = fopen(path, "rb");
    if (f == NULL) return 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return (size_t)size;
}

/* loads: also time the four kinds of load (only for the sets in the load table). */
static void bench_dataset(const char *root, const dataset *d, size_t bytes, int runs, bool loads,
                          double *dd_times, int *dd_n)
{
    double saves[16], raw_saves[16], cpu[16], raw_cpu[16], warm[16], cold[16], into_warm[16],
        into_cold[16];
    size_t stored = 0;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, d->name);
    float *into[TENSORS] = { 0 }; /* the model's tensors, already in memory */
    for (int i = 0; loads && i < TENSORS; i++) {
        into[i] = malloc(d->tensor_bytes);
        memset(into[i], 1, d->tensor_bytes); /* 1, not 0: malloc+memset 0 may become calloc */
    }
    for (int r = 0; r < runs; r++) {
        dd_times[(*dd_n)++] = run_dd(root, bytes);
        remove_dir(dir);
        /* The default and the raw save take turns going first (the disk
         * is slower right after dd); the default's files are the ones loaded. */
        elastic_ckpt_opts raw;
        elastic_ckpt_opts_init(&raw, sizeof raw);
        raw.compression = ELASTIC_CKPT_NONE;
        elastic_ckpt *c;
        int rc;
        for (int turn = 0; turn < 2; turn++) {
            bool raw_turn = (turn + r) % 2 == 0;
            remove_dir(dir);
            if ((rc = elastic_ckpt_open(dir, raw_turn ? &raw : NULL, &c)) != 0) die("open", rc);
            double took = save(c, d, 1);
            elastic_ckpt_close(c);
            if (raw_turn)
                raw_saves[r] = took, raw_cpu[r] = last_save_cpu;
            else
                saves[r] = took, cpu[r] = last_save_cpu, stored = stored_bytes(dir, 1);
        }
        if (!loads) continue;
        if (r % 2 == 0) { /* the raw save went last: write the default's files for the loads */
            remove_dir(dir);
            if ((rc = elastic_ckpt_open(dir, NULL, &c)) != 0) die("open", rc);
            save(c, d, 1);
            elastic_ckpt_close(c);
        }
        warm[r] = load(dir, d, NULL, r == 0);
        into_warm[r] = load(dir, d, into, r == 0);
        evict(dir, 1);
        cold[r] = load(dir, d, NULL, 0);
        evict(dir, 1);
        into_cold[r] = load(dir, d, into, 0);
    }
    for (int i = 0; i < TENSORS; i++) free(into[i]);
    remove_dir(dir);
    /* raw / default of each run's back-to-back pair: the disk's drift
     * between runs cancels out. */
    double pair[16];
    for (int r = 0; r < runs; r++) pair[r] = raw_saves[r] / saves[r];
    printf("%s_raw_over_default=%.4f\n", d->name, median(pair, runs));
    printf("%s_save_s=%.4f\n%s_stored_bytes=%zu\n", d->name, median(saves, runs), d->name, stored);
    printf("%s_raw_save_s=%.4f\n", d->name, median(raw_saves, runs));
    printf("%s_save_cpu_s=%.4f\n%s_raw_save_cpu_s=%.4f\n", d->name, median(cpu, runs), d->name,
           median(raw_cpu, runs));
    if (!loads) return;
    printf("%s_load_warm_s=%.4f\n%s_load_cold_s=%.4f\n", d->name, median(warm, runs), d->name,
           median(cold, runs));
    printf("%s_into_warm_s=%.4f\n%s_into_cold_s=%.4f\n", d->name, median(into_warm, runs), d->name,
           median(into_cold, runs));
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* One memcpy of the dataset, one thread, into `target`. */
static double copy_into(char *target, const dataset *d)
{
    double start = now_s();
    for (int i = 0; i < TENSORS; i++)
        memcpy(target + (size_t)i * d->tensor_bytes, d->tensors[i], d->tensor_bytes);
    return now_s() - start;
}

static void open_async(const char *dir, elastic_ckpt **c)
{
    remove_dir(dir);
    int rc = elastic_ckpt_open(dir, NULL, c);
    if (rc) die("open", rc);
}

/* The stall of a save_async call (the copy into the staging buffer) and the
 * page faults it took. */
static double timed_save_async(elastic_ckpt *c, uint64_t step, const elastic_ckpt_blob *blobs,
                               long *faults)
{
    long f0 = minor_faults();
    double start = now_s();
    int rc = elastic_ckpt_save_async(c, step, blobs, TENSORS, -1);
    if (rc) die("save_async", rc);
    double stall = now_s() - start;
    *faults = minor_faults() - f0;
    if ((rc = elastic_ckpt_async_wait(c, -1, NULL)) != 0) die("async_wait", rc);
    return stall;
}

/* The stall of save_async against one memcpy of the same bytes by one
 * thread. Baseline: a region mmap'd just before and never touched (4 KiB
 * pages, the kernel's THP default), what a program's first copy of its
 * state pays and what the first save_async of a handle (default options, no
 * async_reserve) faces too; also shown: a memcpy into memory already
 * written. Each first-save run opens a new handle; the fresh memcpy and the
 * first save take turns. Medians; page faults (getrusage minflt) beside. */
static void bench_async(const char *root, const dataset *d, int runs)
{
    size_t bytes = d->tensor_bytes * TENSORS;
    double fresh[16], warm[16], first[16], later[16], reserved[16];
    double fresh_f[16], first_f[16], later_f[16], reserved_f[16];
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/async", root);
    elastic_ckpt_blob blobs[TENSORS];
    char names[TENSORS][32];
    for (int i = 0; i < TENSORS; i++) {
        snprintf(names[i], sizeof names[i], "layer.%d", i);
        blobs[i] = (elastic_ckpt_blob){ names[i], d->tensors[i], d->tensor_bytes, 0 };
    }
    char *target = malloc(bytes);
    memset(target, 1, bytes);
    for (int r = 0; r < runs; r++) {
        warm[r] = copy_into(target, d);
        char *region =
            mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED) die("mmap", ELASTIC_ENOMEM);
        long f0 = minor_faults();
        fresh[r] = copy_into(region, d);
        fresh_f[r] = (double)(minor_faults() - f0);
        munmap(region, bytes);
        elastic_ckpt *c;
        long faults;
        open_async(dir, &c);
        first[r] = timed_save_async(c, 1, blobs, &faults);
        first_f[r] = (double)faults;
        later[r] = timed_save_async(c, 2, blobs, &faults); /* the same handle: its buffer is kept */
        later_f[r] = (double)faults;
        elastic_ckpt_close(c);
        /* A trainer that reserves the staging buffer at start-up (off the
         * training step) pays only the copy, even the first time. */
        open_async(dir, &c);
        int rc = elastic_ckpt_async_reserve(c, bytes);
        if (rc) die("async_reserve", rc);
        reserved[r] = timed_save_async(c, 1, blobs, &faults);
        reserved_f[r] = (double)faults;
        elastic_ckpt_close(c);
    }
    if (target[bytes - 1] == 42) printf("# %d\n", target[0]); /* keeps the copies */
    free(target);
    remove_dir(dir);
    printf("memcpy_warm_s=%.4f\nmemcpy_fresh_s=%.4f\nmemcpy_fresh_faults=%.0f\n",
           median(warm, runs), median(fresh, runs), median(fresh_f, runs));
    printf("async_stall_first_s=%.4f\nasync_stall_first_faults=%.0f\n", median(first, runs),
           median(first_f, runs));
    printf("async_stall_s=%.4f\nasync_stall_faults=%.0f\n", median(later, runs),
           median(later_f, runs));
    printf("async_stall_reserved_first_s=%.4f\nasync_stall_reserved_first_faults=%.0f\n",
           median(reserved, runs), median(reserved_f, runs));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [BYTES] [RUNS]\n", argv[0]);
        return 2;
    }
    const char *root = argv[1];
    size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (1ull << 30);
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    const char *part = argc > 4 ? argv[4] : "all";
    bool saves = strcmp(part, "async") != 0, async = strcmp(part, "save") != 0;
    if (bytes < (64u << 20) || bytes % (8u << 20) != 0 || runs < 1 || runs > 15) {
        fprintf(stderr, "BYTES must be a multiple of 8 MiB (>= 64 MiB), RUNS 1..15\n");
        return 2;
    }
    elastic_set_log_level(ELASTIC_LOG_ERROR);
    /* name, mix, kind, loads timed */
    static const struct {
        const char *name;
        int mix, kind;
        bool loads;
    } kinds[] = {
        { "random", 0, 3, true },  { "weights", 0, 4, false }, { "bf16", 0, 5, false },
        { "lowent", 2, 0, false }, { "mix", 1, 0, true },
    };
    enum { KINDS = sizeof kinds / sizeof kinds[0] };
    dataset sets[KINDS];
    for (int k = 0; k < KINDS; k++)
        make_dataset(&sets[k], kinds[k].name, bytes, kinds[k].mix, kinds[k].kind);
    double dd_times[KINDS * 16];
    int dd_n = 0;
    printf("bytes=%zu\nruns=%d\n", bytes, runs);
    bool one_set =
        strcmp(part, "all") != 0 && strcmp(part, "save") != 0 && strcmp(part, "async") != 0;
    if (one_set) async = false;
    for (int k = 0; saves && k < KINDS; k++)
        if (!one_set || strcmp(part, kinds[k].name) == 0)
            bench_dataset(root, &sets[k], bytes, runs, kinds[k].loads && !one_set, dd_times, &dd_n);
    if (saves) printf("dd_s=%.4f\n", median(dd_times, dd_n));
    if (async) bench_async(root, &sets[KINDS - 1], runs);
    for (int k = 0; k < KINDS; k++)
        for (int i = 0; i < TENSORS; i++) free(sets[k].tensors[i]);
    return 0;
}

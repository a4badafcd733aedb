/*
 * The memory tier's benchmark tool (bench/run_memckpt.sh drives it, one
 * subcommand per measurement, on simulated hosts). Prints key=value lines.
 *
 *   save ROOT BYTES RUNS            save stall into the memory tier (sync and
 *                                   async) vs a memcpy into warm memory
 *   serve ROOT PORT TOKEN           a replica receiver until killed
 *   push ROOT HOST PORT TOKEN BYTES RUNS [BLAST_PORT]   a step of BYTES pushed
 *                                   to the peer (RUNS + 2 steps; the median of
 *                                   the last RUNS); with BLAST_PORT, a plain
 *                                   TCP blast after each push (alternating)
 *   push-again ROOT HOST PORT TOKEN the newest step at ROOT pushed once more
 *   blast-recv PORT / blast-send HOST PORT BYTES RUNS   plain TCP, same link
 *   disk-save DIR BYTES             the same state into the disk tier (fsync)
 *   restore-peer ROOT HOST PORT TOKEN STEP BYTES   rank 0 of STEP from the
 *                                   peer: staged, verified, read into memory
 *   restore-disk DIR BYTES          the newest step from disk: cold (the page
 *                                   cache dropped), then warm
 *   tls BYTES                       TLS 1.3 record layer alone (one core)
 *   train ROOT BYTES STEPS STEP_MS EVERY   steps/s with an asynchronous
 *                                   memory save every EVERY steps (0: none);
 *                                   prints "done S" after each step
 *   train-compare ROOT BYTES STEPS STEP_MS ROUNDS [HOST PORT TOKEN]   the
 *                                   same fixed work per step with a memory
 *                                   save after every step and without,
 *                                   alternating, ROUNDS times; with a peer,
 *                                   every saved step is also replicated to it
 *                                   (the node's replica service)
 */
#include "ckpt/ckpt.h"
#include "ckpt/memtier.h"
#include "common/clock.h"
#include "replica/replica.h"
#include "replica/wire.h"
#include "store/tls.h"

#include <elastic.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static double now_s(void)
{
    return (double)elastic__now_ns() / 1e9;
}

/* CPU time this process used (user + system, every thread). */
static double cpu_self_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) / 1e6;
}

/* CPU time another process's live threads used, in ns (schedstat's first
 * field: on-CPU time, precise where /proc/PID/stat counts 10 ms ticks).
 * The receiving end of a push or a blast: its thread lives as long as the
 * connection. 0 when pid is 0 or gone. */
static double cpu_of_s(long pid)
{
    if (pid <= 0) return 0;
    char dir[64], path[400];
    snprintf(dir, sizeof dir, "/proc/%ld/task", pid);
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long ns = 0;
        if (f != NULL && fscanf(f, "%llu", &ns) == 1) total += (double)ns / 1e9;
        if (f != NULL) fclose(f);
    }
    closedir(d);
    return total;
}

/* The peer's pid for cpu_of_s (same machine, another namespace): $MEMCKPT_PEER_PID. */
static long peer_pid(void)
{
    const char *v = getenv("MEMCKPT_PEER_PID");
    return v ? strtol(v, NULL, 10) : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "memckpt_bench: %s: %s (%s)\n", what, elastic_err_name(rc),
            elastic_last_error());
    exit(1);
}

static uint8_t *state_of(size_t bytes, uint64_t seed)
{
    uint8_t *p = malloc(bytes);
    if (p == NULL) die("state", ELASTIC_ENOMEM);
    uint64_t x = seed | 1;
    for (size_t i = 0; i + 8 <= bytes; i += 8) { /* incompressible, like float weights */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    return p;
}

static elastic_ckpt *open_mem(const char *root, int threads)
{
    char own[4200];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, root);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.compression = ELASTIC_CKPT_NONE;
    if (threads > 0) o.threads = threads;
    elastic_ckpt *c;
    int rc = elastic_ckpt_open(own, &o, &c);
    if (rc) die("open memory tier", rc);
    return c;
}

static int cmd_save(const char *root, size_t bytes, int runs)
{
    int rc = ckpt__mem_tier_create(root, 4 * (uint64_t)bytes + (64u << 20), 2);
    if (rc) die("tier", rc);
    uint8_t *state = state_of(bytes, 1), *warm = malloc(bytes);
    memset(warm, 1, bytes);
    double copy[32], sync_s[32], async_s[32];
    elastic_ckpt *c = open_mem(root, 0);
    elastic_ckpt_async_reserve(c, bytes);
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = bytes };
    for (int i = 0; i < runs; i++) {
        double t = now_s();
        memcpy(warm, state, bytes);
        copy[i] = now_s() - t;
        t = now_s();
        if ((rc = elastic_ckpt_save(c, (uint64_t)(2 * i + 1), &blob, 1)) != 0) die("save", rc);
        sync_s[i] = now_s() - t;
        t = now_s();
        rc = elastic_ckpt_save_async(c, (uint64_t)(2 * i + 2), &blob, 1, -1);
        async_s[i] = now_s() - t;
        if (rc == 0) rc = elastic_ckpt_async_wait(c, -1, NULL);
        if (rc) die("save_async", rc);
    }
    printf("bytes=%zu\nruns=%d\nmemcpy_s=%.6f\nsave_sync_s=%.6f\nsave_async_s=%.6f\n", bytes, runs,
           median(copy, runs), median(sync_s, runs), median(async_s, runs));
    elastic_ckpt_close(c);
    return 0;
}

static int cmd_serve(const char *root, int port, const char *token)
{
    int rc = ckpt__mem_tier_create(root, 1ull << 40, 2);
    if (rc) die("tier", rc);
    replica_server_opts o = { .tier_root = root, .token = token, .port = port };
    replica_server *s;
    if ((rc = replica__server_start(&o, &s)) != 0) die("serve", rc);
    printf("ready %d\n", replica__server_port(s));
    fflush(stdout);
    for (;;) pause(); /* until killed (the bench's teardown) */
    return 0;
}

static replica_conn *dial(const char *host, int port, const char *token)
{
    replica_conn *c;
    uint64_t deadline = elastic__deadline_ms(30000);
    int rc = replica__tcp_connect(host, port, deadline, &c);
    if (rc == 0) rc = replica__auth_client(c, token, deadline);
    if (rc) die("connect", rc);
    return c;
}

/* One blast: `bytes` of plain TCP to addr, until the receiver has them
 * all (half-close, then its close). *t, *cpu, *peer_cpu: wall time, this
 * process's CPU, the receiver's (peer pid, 0: none). */
static void blast_once(const struct sockaddr_in *a, const uint8_t *state, size_t bytes, long peer,
                       double *t_out, double *cpu_out, double *peer_out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0)
        die("blast connect", ELASTIC_ECONNECT);
    double t = now_s(), cpu = cpu_self_s(), peer_cpu = cpu_of_s(peer);
    for (size_t done = 0; done < bytes;) {
        ssize_t n = send(fd, state + done, bytes - done, MSG_NOSIGNAL);
        if (n <= 0) die("blast send", ELASTIC_ECONNECT);
        done += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    uint8_t byte;
    while (recv(fd, &byte, 1, 0) > 0) {
    }
    *t_out = now_s() - t;
    *cpu_out = cpu_self_s() - cpu;
    *peer_out = cpu_of_s(peer) - peer_cpu;
    close(fd);
}

static struct sockaddr_in blast_addr(const char *host, int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) die("blast address", ELASTIC_EINVAL);
    return a;
}

static void print_blast(size_t bytes, double *t_s, double *cpu_s, double *peer_s, int runs)
{
    printf("blast_bytes=%zu\nblast_s=%.6f\nblast_cpu_s=%.6f\nblast_peer_cpu_s=%.6f\n", bytes,
           median(t_s, runs), median(cpu_s, runs), median(peer_s, runs));
}

/* blast_port > 0: a plain TCP blast of the same bytes to host:blast_port
 * after each push (its receiver's pid in $MEMCKPT_BLAST_PID), so that the
 * two alternate and drift in the machine's load hits both alike. */
static int cmd_push(const char *root, const char *host, int port, const char *token, size_t bytes,
                    int runs, int blast_port)
{
    int rc = ckpt__mem_tier_create(root, 4 * (uint64_t)bytes + (64u << 20), 2);
    if (rc) die("tier", rc);
    uint8_t *state = state_of(bytes, 2);
    elastic_ckpt *c = open_mem(root, 0);
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = bytes };
    replica_conn *conn = dial(host, port, token);
    char own[4200];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, root);
    double t_s[40], cpu_s[40], peer_s[40], bt_s[40], bcpu_s[40], bpeer_s[40];
    uint64_t sent = 0;
    long peer = peer_pid();
    const char *bp = getenv("MEMCKPT_BLAST_PID");
    long blast_peer = bp ? strtol(bp, NULL, 10) : 0;
    struct sockaddr_in blast_to = { 0 };
    if (blast_port > 0) blast_to = blast_addr(host, blast_port);
    /* Two pushes first: from the third on the peer writes over the pages of
     * the copy it pruned (the steady state, which the median reports). */
    for (int i = 0; i < runs + 2; i++) {
        if ((rc = elastic_ckpt_save(c, (uint64_t)i + 1, &blob, 1)) != 0) die("save", rc);
        double t = now_s(), cpu = cpu_self_s(), peer_cpu = cpu_of_s(peer);
        rc = replica__push_step(conn, "bench-node", own, (uint64_t)i + 1, &sent,
                                elastic__deadline_ms(60000));
        t_s[i] = now_s() - t;
        cpu_s[i] = cpu_self_s() - cpu;
        peer_s[i] = cpu_of_s(peer) - peer_cpu;
        if (rc) die("push", rc);
        if (blast_port > 0)
            blast_once(&blast_to, state, bytes, blast_peer, &bt_s[i], &bcpu_s[i], &bpeer_s[i]);
    }
    if (blast_port > 0) print_blast(bytes, bt_s + 2, bcpu_s + 2, bpeer_s + 2, runs);
    printf("push_bytes=%" PRIu64 "\npush_s=%.6f\npush_cpu_s=%.6f\npush_peer_cpu_s=%.6f\n", sent,
           median(t_s + 2, runs), median(cpu_s + 2, runs), median(peer_s + 2, runs));
    replica__close(conn);
    elastic_ckpt_close(c);
    return 0;
}

/* One more push of the newest step `push` left at ROOT, nothing else: what
 * strace -c counts of it is the push alone (run_memckpt.sh, the profile). */
static int cmd_push_again(const char *root, const char *host, int port, const char *token)
{
    char own[4200];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, root);
    uint64_t *steps = NULL, sent = 0;
    size_t n = 0;
    int rc = ckpt__scan_steps(own, &steps, &n);
    if (rc || n == 0) die("no step to push again", rc ? rc : ELASTIC_ENOTFOUND);
    replica_conn *conn = dial(host, port, token);
    double t = now_s();
    rc = replica__push_step(conn, "bench-node", own, steps[n - 1], &sent,
                            elastic__deadline_ms(60000));
    if (rc) die("push", rc);
    printf("push_again_bytes=%" PRIu64 "\npush_again_s=%.6f\n", sent, now_s() - t);
    replica__close(conn);
    free(steps);
    return 0;
}

static int cmd_blast_recv(int port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0)
        die("blast listen", ELASTIC_ESYS);
    printf("ready %d\n", port);
    fflush(stdout);
    size_t cap = 4u << 20;
    uint8_t *buf = malloc(cap);
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) break;
        while (recv(fd, buf, cap, 0) > 0) {
        }
        close(fd);
    }
    return 0;
}

static int cmd_blast_send(const char *host, int port, size_t bytes, int runs)
{
    uint8_t *state = state_of(bytes, 3);
    struct sockaddr_in a = blast_addr(host, port);
    double t_s[32], cpu_s[32], peer_s[32];
    for (int i = 0; i < runs; i++)
        blast_once(&a, state, bytes, peer_pid(), &t_s[i], &cpu_s[i], &peer_s[i]);
    print_blast(bytes, t_s, cpu_s, peer_s, runs);
    return 0;
}

static int cmd_disk_save(const char *dir, size_t bytes)
{
    uint8_t *state = state_of(bytes, 2);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *c;
    int rc = elastic_ckpt_open(dir, &o, &c);
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = bytes };
    double t = now_s();
    if (rc == 0) rc = elastic_ckpt_save(c, 1, &blob, 1);
    if (rc) die("disk save", rc);
    printf("disk_save_s=%.6f\n", now_s() - t);
    elastic_ckpt_close(c);
    return 0;
}

/* What a trainer does after the stage: read its state into its memory.
 * *cpu_s (NULL: not wanted): the CPU time it took, every thread. */
static double read_state(elastic_ckpt *c, uint64_t step, uint8_t *into, size_t cap, double *cpu_s)
{
    size_t len;
    double t = now_s(), cpu = cpu_self_s();
    int rc = elastic_ckpt_read_into(c, step, "state", into, cap, &len);
    if (rc) die("read", rc);
    if (cpu_s) *cpu_s = cpu_self_s() - cpu;
    return now_s() - t;
}

typedef struct peer_ctx {
    const char *host, *token;
    int port;
} peer_ctx;

static int dial_peer(void *p, uint32_t node, replica_conn **out)
{
    peer_ctx *ctx = p;
    (void)node;
    uint64_t deadline = elastic__deadline_ms(30000);
    int rc = replica__tcp_connect(ctx->host, ctx->port, deadline, out);
    if (rc == 0 && (rc = replica__auth_client(*out, ctx->token, deadline)) != 0)
        replica__close(*out);
    return rc;
}

/* The spare's restore of one rank's state from the peer that holds the
 * copy: stage (fetch + verify every byte), then read it into memory. */
static int cmd_restore_peer(const char *root, const char *host, int port, const char *token,
                            uint64_t step, size_t bytes)
{
    int rc = ckpt__mem_tier_create(root, 4 * (uint64_t)bytes + (64u << 20), 2);
    if (rc) die("tier", rc);
    uint8_t *into = malloc(bytes);
    memset(into, 0, bytes);
    ckpt_copy copy = { .step = step, .world = 1, .node = 1, .tier = CKPT_TIER_MEMORY };
    ckpt_plan_input in = { .copies = &copy, .n_copies = 1 };
    ckpt_plan plan;
    if ((rc = ckpt__plan_restore(&in, &plan)) != 0 || !plan.found)
        die("plan", rc ? rc : ELASTIC_ENOTFOUND);
    peer_ctx ctx = { host, token, port };
    replica_dialer dialer = { dial_peer, &ctx };
    replica_restored got;
    double t = now_s(), cpu = cpu_self_s();
    if ((rc = replica__stage_shard(root, &plan, 0, 2, &dialer, elastic__deadline_ms(60000),
                                   &got)) != 0)
        die("stage", rc);
    double staged = now_s() - t, staged_cpu = cpu_self_s() - cpu, read_cpu = 0;
    elastic_ckpt *m = open_mem(root, 0);
    double read = read_state(m, plan.step, into, bytes, &read_cpu);
    printf("peer_restore_s=%.6f\npeer_stage_s=%.6f\npeer_read_s=%.6f\npeer_stage_cpu_s=%.6f\n"
           "peer_read_cpu_s=%.6f\n",
           now_s() - t, staged, read, staged_cpu, read_cpu);
    elastic_ckpt_close(m);
    ckpt__plan_free(&plan);
    return 0;
}

/* The newest step of the disk tier read into memory (verify: the read checks
 * every chunk it copies). */
static double disk_read(const char *dir, uint8_t *into, size_t bytes, double *cpu_s)
{
    double t = now_s(), cpu = cpu_self_s();
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.verify = ELASTIC_CKPT_VERIFY_MANIFEST; /* read verifies every byte anyway */
    elastic_ckpt *c;
    uint64_t step = 0;
    int rc = elastic_ckpt_open(dir, &o, &c);
    if (rc == 0) rc = elastic_ckpt_latest(c, &step);
    if (rc) die("disk restore", rc);
    read_state(c, step, into, bytes, NULL);
    elastic_ckpt_close(c);
    *cpu_s = cpu_self_s() - cpu;
    return now_s() - t;
}

/* Cold, as a spare reading shared storage finds it: the whole page cache
 * dropped (root), else the shard's own pages (clean after fsync); then warm:
 * the same read again, from the page cache. */
static int cmd_restore_disk(const char *dir, size_t bytes)
{
    uint8_t *into = malloc(bytes);
    memset(into, 0, bytes);
    char path[4300];
    snprintf(path, sizeof path, "%s/step-00000000000000000001/shard-00000-g0.elck", dir);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    sync();
    int drop = open("/proc/sys/vm/drop_caches", O_WRONLY);
    bool dropped = drop >= 0 && write(drop, "3\n", 2) == 2;
    if (drop >= 0) close(drop);
    double cold_cpu = 0, warm_cpu = 0, cold = disk_read(dir, into, bytes, &cold_cpu);
    /* Into memory prepared as for the cold read and the peer's (fresh, then
     * written once): the page cache is the only difference. */
    uint8_t *again = malloc(bytes);
    memset(again, 0, bytes);
    double warm = disk_read(dir, again, bytes, &warm_cpu);
    free(again);
    printf("disk_restore_s=%.6f\ndisk_warm_s=%.6f\ndisk_dropped_caches=%d\ndisk_cold_cpu_s=%.6f\n"
           "disk_warm_cpu_s=%.6f\n",
           cold, warm, dropped ? 1 : 0, cold_cpu, warm_cpu);
    return 0;
}

static int cmd_tls(size_t bytes)
{
    const char *token = "bench-token";
    store__tls *cl, *sv;
    if (store__tls_new(false, token, &cl) || store__tls_new(true, token, &sv))
        die("tls", ELASTIC_ESYS);
    uint8_t *buf = malloc(1u << 20);
    const char *why;
    for (int round = 0; round < 20; round++) { /* handshake over memory */
        int a = store__tls_handshake(cl, &why);
        size_t n = store__tls_take_output(cl, buf, 1u << 20);
        store__tls_feed(sv, buf, n);
        int b = store__tls_handshake(sv, &why);
        n = store__tls_take_output(sv, buf, 1u << 20);
        store__tls_feed(cl, buf, n);
        if (a == 1 && b == 1) break;
    }
    uint8_t *state = state_of(1u << 20, 4), *plain = malloc(1u << 20), *wire = malloc(2u << 20);
    double enc = 0, dec = 0;
    for (size_t done = 0; done < bytes; done += 1u << 20) {
        double t = now_s();
        store__tls_write(cl, state, 1u << 20);
        size_t n = store__tls_take_output(cl, wire, 2u << 20);
        enc += now_s() - t;
        t = now_s();
        store__tls_feed(sv, wire, n);
        size_t got = 0, total = 0;
        while (total < (1u << 20) &&
               store__tls_read(sv, plain + total, (1u << 20) - total, &got, &why) == 0 && got > 0)
            total += got;
        dec += now_s() - t;
    }
    printf("tls_bytes=%zu\ntls_encrypt_s=%.6f\ntls_decrypt_s=%.6f\n", bytes, enc, dec);
    return 0;
}

static int cmd_train(const char *root, size_t bytes, int steps, int step_ms, int every)
{
    int rc = ckpt__mem_tier_create(root, 4 * (uint64_t)bytes + (64u << 20), 2);
    if (rc) die("tier", rc);
    uint8_t *state = state_of(bytes, 5);
    elastic_ckpt *c = open_mem(root, 2);
    if (every > 0) elastic_ckpt_async_reserve(c, bytes);
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = bytes };
    double t = now_s();
    for (int s = 1; s <= steps; s++) {
        /* A step: step_ms of work that touches the state, as training would. */
        double until = now_s() + step_ms / 1000.0;
        size_t at = 0;
        while (now_s() < until) {
            for (int k = 0; k < 4096 && at + 8 <= bytes; k++, at += 64) state[at]++;
            if (at + 8 > bytes) at = 0;
        }
        if (every > 0 && s % every == 0 &&
            (rc = elastic_ckpt_save_async(c, (uint64_t)s, &blob, 1, -1)) != 0)
            die("save", rc);
        printf("done %d\n", s);
        fflush(stdout);
    }
    if (every > 0) elastic_ckpt_async_wait(c, -1, NULL);
    printf("train_s=%.6f\nsteps=%d\n", now_s() - t, steps);
    elastic_ckpt_close(c);
    return 0;
}

/* One step's work: `iters` passes of 4096 touches of the state (memory
 * traffic, as training's would be), fixed, so that time lost to the saves
 * (their stalls, the background copies' share of the cores and of memory
 * bandwidth) shows as a longer run. */
static void work(uint8_t *state, size_t bytes, size_t *at, long iters)
{
    for (long i = 0; i < iters; i++) {
        for (int k = 0; k < 4096 && *at + 8 <= bytes; k++, *at += 64) state[*at]++;
        if (*at + 8 > bytes) *at = 0;
    }
}

/* The node's replica service, as an agent runs it: each committed step of
 * the tier at `root` pushed to the one peer (host:port) in the background. */
static replica_service *replicate_to(const char *root, uint64_t limit, const char *host, int port,
                                     const char *token)
{
    replica_service_opts so = { .root = root,
                                .limit = limit,
                                .steps = 2,
                                .token = token,
                                .replicas = 1,
                                .io_timeout_ms = 60000 };
    replica_service *svc;
    int rc = replica__service_start(&so, &svc);
    if (rc) die("replica service", rc);
    replica_peer nodes[2] = { { .name = "bench-trainer" }, { .name = "bench-peer", .port = port } };
    snprintf(nodes[1].host, sizeof nodes[1].host, "%s", host);
    if ((rc = replica__service_set_peers(svc, nodes, 2, 0)) != 0) die("replica peers", rc);
    return svc;
}

/* Throughput with an asynchronous memory save after every step vs none, the
 * same fixed work per step (calibrated to STEP_MS at the start), in rounds
 * that alternate the two so that drift in the machine's load hits both.
 * With a peer (host NULL: none), every saved step is also replicated to it
 * in the background, and a saving round ends once its last step is there. */
static int cmd_train_compare(const char *root, size_t bytes, int steps, int step_ms, int rounds,
                             const char *host, int port, const char *token)
{
    uint64_t limit = 4 * (uint64_t)bytes + (64u << 20);
    replica_service *svc = host ? replicate_to(root, limit, host, port, token) : NULL;
    int rc = svc ? 0 : ckpt__mem_tier_create(root, limit, 2);
    if (rc) die("tier", rc);
    uint8_t *state = state_of(bytes, 5);
    elastic_ckpt *c = open_mem(root, 0);
    elastic_ckpt_async_reserve(c, bytes);
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = bytes };
    size_t at = 0;
    long iters = 0;
    double t = now_s();
    while (now_s() - t < 0.2) {
        work(state, bytes, &at, 64);
        iters += 64;
    }
    iters = (long)((double)iters * step_ms / 1000.0 / (now_s() - t));
    if (iters < 1) iters = 1;
    double with = 0, without = 0, stall = 0, wait = 0, replica_wait = 0;
    /* CPU time: this process (trainer, save and replica threads) and the
     * peer's receiver, per kind of round: what does not swing with the load */
    double cpu[2] = { 0, 0 }, peer_cpu[2] = { 0, 0 };
    long peer = peer_pid();
    uint64_t step = 0;
    for (int r = 0; r < rounds; r++) {
        for (int saving = 0; saving < 2; saving++) {
            double start = now_s(), cpu_start = cpu_self_s(), peer_start = cpu_of_s(peer);
            for (int s = 0; s < steps; s++) {
                work(state, bytes, &at, iters);
                if (!saving) continue;
                double st = now_s();
                if ((rc = elastic_ckpt_save_async(c, ++step, &blob, 1, -1)) != 0) die("save", rc);
                stall += now_s() - st;
                if (svc) replica__service_kick(svc); /* the previous step is committed */
            }
            if (saving) { /* the last save's background part is the run's too */
                double wt = now_s();
                if ((rc = elastic_ckpt_async_wait(c, -1, NULL)) != 0) die("save", rc);
                wait += now_s() - wt;
                wt = now_s();
                if (svc) replica__service_kick(svc);
                if (svc && (rc = replica__service_wait_replicated(
                                svc, step, elastic__deadline_ms(60000))) != 0)
                    die("replication", rc);
                replica_wait += now_s() - wt;
            }
            *(saving ? &with : &without) += now_s() - start;
            cpu[saving] += cpu_self_s() - cpu_start;
            peer_cpu[saving] += cpu_of_s(peer) - peer_start;
        }
    }
    printf("tput0_s=%.6f\ntput1_s=%.6f\ntput_stall_s=%.6f\ntput_wait_s=%.6f\ntput_steps=%d\n"
           "tput0_cpu_s=%.6f\ntput1_cpu_s=%.6f\ntput_peer_cpu_s=%.6f\n",
           without, with, stall, wait, steps * rounds, cpu[0], cpu[1], peer_cpu[1] - peer_cpu[0]);
    elastic_ckpt_close(c);
    if (svc) {
        replica_service_stats st;
        replica__service_stats(svc, &st);
        printf("tput_replicated=1\ntput_replica_wait_s=%.6f\ntput_push_failures=%" PRIu64 "\n",
               replica_wait, st.push_failures);
        replica__service_stop(svc);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: memckpt_bench save|serve|push|blast-recv|blast-send|disk-save|"
                        "restore-peer|restore-disk|tls|train ...\n");
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "save") == 0 && argc == 5)
        return cmd_save(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
    if (strcmp(cmd, "serve") == 0 && argc == 5) return cmd_serve(argv[2], atoi(argv[3]), argv[4]);
    if (strcmp(cmd, "push") == 0 && (argc == 8 || argc == 9))
        return cmd_push(argv[2], argv[3], atoi(argv[4]), argv[5], strtoull(argv[6], NULL, 10),
                        atoi(argv[7]), argc == 9 ? atoi(argv[8]) : 0);
    if (strcmp(cmd, "push-again") == 0 && argc == 6)
        return cmd_push_again(argv[2], argv[3], atoi(argv[4]), argv[5]);
    if (strcmp(cmd, "blast-recv") == 0 && argc == 3) return cmd_blast_recv(atoi(argv[2]));
    if (strcmp(cmd, "blast-send") == 0 && argc == 6)
        return cmd_blast_send(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]));
    if (strcmp(cmd, "disk-save") == 0 && argc == 4)
        return cmd_disk_save(argv[2], strtoull(argv[3], NULL, 10));
    if (strcmp(cmd, "restore-peer") == 0 && argc == 8)
        return cmd_restore_peer(argv[2], argv[3], atoi(argv[4]), argv[5],
                                strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10));
    if (strcmp(cmd, "restore-disk") == 0 && argc == 4)
        return cmd_restore_disk(argv[2], strtoull(argv[3], NULL, 10));
    if (strcmp(cmd, "tls") == 0 && argc == 3) return cmd_tls(strtoull(argv[2], NULL, 10));
    if (strcmp(cmd, "train") == 0 && argc == 7)
        return cmd_train(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]), atoi(argv[5]),
                         atoi(argv[6]));
    if (strcmp(cmd, "train-compare") == 0 && (argc == 7 || argc == 10))
        return cmd_train_compare(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]), atoi(argv[5]),
                                 atoi(argv[6]), argc == 10 ? argv[7] : NULL,
                                 argc == 10 ? atoi(argv[8]) : 0, argc == 10 ? argv[9] : NULL);
    fprintf(stderr, "memckpt_bench: bad arguments for %s\n", cmd);
    return 2;
}

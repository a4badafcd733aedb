/*
 * Store benchmark: ops/s and p50/p99 latency of set, get, add and wait with
 * 1..64 concurrent clients, against libelastic's store (through the library)
 * and PyTorch 1.13's TCPStore (its wire protocol spoken directly, so neither
 * side pays for Python), plus wake-up latency (set -> waiter returns).
 * usage: bench_store OURS_HOST:PORT TCPSTORE_HOST:PORT [seconds-per-run] [runs]
 */
#include "elastic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 64
#define MAX_SAMPLES 400000
#define WAKE_ROUNDS 300

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, detail);
    exit(1);
}

/* ---- TCPStore 1.13 wire protocol ------------------------------------------
 * Host-endian raw values: a query is a u8 type; strings and byte vectors are
 * a u64 length then the bytes. SET has no reply; GET is preceded by WAIT (as
 * the 1.13 client does); WAIT answers one byte (STOP_WAITING = 0); ADD
 * answers an int64. */

enum { TS_SET = 0, TS_GET = 2, TS_ADD = 3, TS_WAIT = 5 };

static int tcp_connect(const char *endpoint)
{
    char host[256];
    const char *colon = strrchr(endpoint, ':');
    if (colon == NULL || (size_t)(colon - endpoint) >= sizeof host) die("endpoint", endpoint);
    memcpy(host, endpoint, (size_t)(colon - endpoint));
    host[colon - endpoint] = '\0';
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) die("resolve", endpoint);
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) die("connect", endpoint);
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void ts_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0) die("tcpstore send", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

static void ts_recv(int fd, void *data, size_t len)
{
    char *p = data;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n <= 0) die("tcpstore recv", n == 0 ? "closed" : strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* type, then (key), then an optional trailing payload, in one send. */
static void ts_query(int fd, uint8_t type, const char *key, const void *tail, size_t tail_len)
{
    uint8_t buf[512];
    size_t at = 0;
    buf[at++] = type;
    if (type == TS_WAIT) {
        uint64_t count = 1;
        memcpy(buf + at, &count, 8);
        at += 8;
    }
    uint64_t klen = strlen(key);
    memcpy(buf + at, &klen, 8);
    at += 8;
    memcpy(buf + at, key, klen);
    at += klen;
    if (tail_len) memcpy(buf + at, tail, tail_len);
    ts_send(fd, buf, at + tail_len);
}

static void ts_set(int fd, const char *key, const char *value)
{
    uint8_t tail[128];
    uint64_t vlen = strlen(value);
    memcpy(tail, &vlen, 8);
    memcpy(tail + 8, value, vlen);
    ts_query(fd, TS_SET, key, tail, 8 + vlen);
}

static void ts_wait(int fd, const char *key)
{
    ts_query(fd, TS_WAIT, key, NULL, 0);
    uint8_t answer;
    ts_recv(fd, &answer, 1);
    if (answer != 0) die("tcpstore wait", "unexpected answer");
}

static size_t ts_get(int fd, const char *key, char *out, size_t size)
{
    ts_wait(fd, key);
    ts_query(fd, TS_GET, key, NULL, 0);
    uint64_t len;
    ts_recv(fd, &len, 8);
    if (len >= size) die("tcpstore get", "value too large");
    ts_recv(fd, out, len);
    out[len] = '\0';
    return len;
}

static int64_t ts_add(int fd, const char *key, int64_t delta)
{
    ts_query(fd, TS_ADD, key, &delta, 8);
    int64_t result;
    ts_recv(fd, &result, 8);
    return result;
}

/* ---- the two backends behind one interface ------------------------------ */

typedef enum { OP_SET, OP_GET, OP_ADD, OP_WAIT, OP_COUNT_ } op_kind;
static const char *const op_names[] = { "set", "get", "add", "wait" };

typedef struct client {
    bool ours;
    elastic_store *store;
    int fd;
    int unacked; /* TCPStore sets since the last sync */
    char key[64];
} client;

static void client_open(client *c, bool ours, const char *endpoint, int index)
{
    c->ours = ours;
    snprintf(c->key, sizeof c->key, "bench/%d", index);
    if (ours) {
        int rc = elastic_store_connect(endpoint, NULL, &c->store);
        if (rc != 0) die("connect", elastic_last_error());
    } else {
        c->fd = tcp_connect(endpoint);
    }
}

static void client_close(client *c)
{
    if (c->ours)
        elastic_store_close(c->store);
    else
        close(c->fd);
}

static void check(int rc, const char *what)
{
    if (rc != 0) die(what, elastic_last_error());
}

static void client_op(client *c, op_kind op)
{
    static const char value[] = "0123456789abcdef0123456789abcdef";
    if (c->ours) {
        void *got = NULL;
        size_t len;
        int64_t result;
        const char *keys[1] = { c->key };
        switch (op) {
        case OP_SET: check(elastic_store_set(c->store, c->key, value, 32), "set"); break;
        case OP_GET: check(elastic_store_get(c->store, c->key, 10000, &got, &len), "get"); break;
        case OP_ADD: check(elastic_store_add(c->store, "bench/counter", 1, &result), "add"); break;
        case OP_WAIT: check(elastic_store_wait(c->store, keys, 1, 10000), "wait"); break;
        default: break;
        }
        elastic_free(got);
        return;
    }
    char out[64];
    switch (op) {
    case OP_SET:
        ts_set(c->fd, c->key, value);
        /* SET is not acknowledged: sync now and then so the backlog in the
         * socket buffers stays small and the rate is what the server did. */
        if (++c->unacked == 64) {
            ts_wait(c->fd, c->key);
            c->unacked = 0;
        }
        break;
    case OP_GET: ts_get(c->fd, c->key, out, sizeof out); break;
    case OP_ADD: ts_add(c->fd, "bench/counter", 1); break;
    case OP_WAIT: ts_wait(c->fd, c->key); break;
    default: break;
    }
}

/* ---- throughput runs ----------------------------------------------------- */

typedef struct worker {
    pthread_t thread;
    client c;
    op_kind op;
    uint64_t end_ns;
    const volatile bool *go;
    uint32_t *samples; /* latency in ns, at most capacity */
    size_t count, capacity;
    uint64_t ops;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    while (!*w->go) sched_yield();
    for (;;) {
        uint64_t start = now_ns();
        if (start >= w->end_ns) break;
        client_op(&w->c, w->op);
        uint64_t took = now_ns() - start;
        if (w->count < w->capacity)
            w->samples[w->count++] = took > UINT32_MAX ? UINT32_MAX : (uint32_t)took;
        w->ops++;
    }
    return NULL;
}

typedef struct result {
    double ops_per_s;
    double p50_us, p99_us;
} result;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static result run_once(bool ours, const char *endpoint, op_kind op, int clients, double seconds)
{
    static worker workers[MAX_CLIENTS];
    static uint32_t all[MAX_SAMPLES * 4];
    volatile bool go = false;
    for (int i = 0; i < clients; i++) {
        worker *w = &workers[i];
        memset(w, 0, sizeof *w);
        client_open(&w->c, ours, endpoint, i);
        if (op == OP_GET || op == OP_WAIT) {
            w->op = OP_SET;
            client_op(&w->c, OP_SET); /* the key each client reads */
            if (!ours) {              /* SET has no reply in 1.13: make sure it landed */
                char out[64];
                ts_get(w->c.fd, w->c.key, out, sizeof out);
            }
        }
        w->op = op;
        w->go = &go;
        w->capacity = (size_t)MAX_SAMPLES * 4 / (size_t)clients;
        w->samples = all + (size_t)i * w->capacity;
    }
    uint64_t start = now_ns();
    for (int i = 0; i < clients; i++) {
        workers[i].end_ns = start + (uint64_t)(seconds * 1e9);
        pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    }
    go = true;
    uint64_t total_ops = 0;
    size_t total_samples = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(workers[i].thread, NULL);
        total_ops += workers[i].ops;
        memmove(all + total_samples, workers[i].samples, workers[i].count * sizeof(uint32_t));
        total_samples += workers[i].count;
    }
    double elapsed = (double)(now_ns() - start) / 1e9;
    if (getenv("STORE_BENCH_ONLY") != NULL) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
                     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        static double last_cpu;
        fprintf(stderr, "%s: client cpu %.1f us/op (%.0f ops)\n", ours ? "ours" : "tcpstore",
                (cpu - last_cpu) / (double)total_ops, (double)total_ops);
        last_cpu = cpu;
    }
    if (!ours && op == OP_SET) /* unacknowledged sets: count them once the server has them all */
        for (int i = 0; i < clients; i++) ts_wait(workers[i].c.fd, workers[i].c.key);
    if (!ours && op == OP_SET) elapsed = (double)(now_ns() - start) / 1e9;
    for (int i = 0; i < clients; i++) client_close(&workers[i].c);
    qsort(all, total_samples, sizeof all[0], cmp_u32);
    result r = { (double)total_ops / elapsed, 0, 0 };
    if (total_samples > 0) {
        r.p50_us = all[total_samples / 2] / 1000.0;
        r.p99_us = all[(size_t)((double)total_samples * 0.99)] / 1000.0;
    }
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Medians over runs of each figure. */
static result run_median(bool ours, const char *endpoint, op_kind op, int clients, double seconds,
                         int runs)
{
    double ops[16], p50[16], p99[16];
    for (int i = 0; i < runs; i++) {
        result r = run_once(ours, endpoint, op, clients, seconds);
        ops[i] = r.ops_per_s;
        p50[i] = r.p50_us;
        p99[i] = r.p99_us;
    }
    qsort(ops, (size_t)runs, sizeof(double), cmp_double);
    qsort(p50, (size_t)runs, sizeof(double), cmp_double);
    qsort(p99, (size_t)runs, sizeof(double), cmp_double);
    result m = { ops[runs / 2], p50[runs / 2], p99[runs / 2] };
    return m;
}

/* ---- wake-up latency ----------------------------------------------------- */

typedef struct wake_state {
    bool ours;
    int nonce; /* keeps keys fresh when one server serves several runs */
    const char *endpoint;
    volatile int round;       /* the waiter announces the round it waits in */
    volatile uint64_t set_at; /* when the setter sent the set */
    uint32_t latency[WAKE_ROUNDS];
} wake_state;

static void *waiter_main(void *arg)
{
    wake_state *st = arg;
    client c;
    client_open(&c, st->ours, st->endpoint, 9999);
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        snprintf(c.key, sizeof c.key, "wake/%d/%d/%d", st->nonce, st->ours, round);
        __atomic_store_n(&st->round, round, __ATOMIC_SEQ_CST);
        client_op(&c, OP_WAIT);
        uint64_t woke = now_ns();
        st->latency[round] = (uint32_t)(woke - __atomic_load_n(&st->set_at, __ATOMIC_SEQ_CST));
        __atomic_store_n(&st->round, -1, __ATOMIC_SEQ_CST);
    }
    client_close(&c);
    return NULL;
}

static double wake_p50_us(bool ours, const char *endpoint)
{
    static wake_state st;
    memset(&st, 0, sizeof st);
    static int runs_so_far;
    st.ours = ours;
    st.nonce = (int)getpid() * 100 + runs_so_far++;
    st.endpoint = endpoint;
    st.round = -1;
    client setter;
    client_open(&setter, ours, endpoint, 9998);
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, &st);
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        while (__atomic_load_n(&st.round, __ATOMIC_SEQ_CST) != round) sched_yield();
        usleep(2000); /* let the wait reach the server and park */
        snprintf(setter.key, sizeof setter.key, "wake/%d/%d/%d", st.nonce, ours, round);
        __atomic_store_n(&st.set_at, now_ns(), __ATOMIC_SEQ_CST);
        client_op(&setter, OP_SET);
        while (__atomic_load_n(&st.round, __ATOMIC_SEQ_CST) == round) sched_yield();
    }
    pthread_join(t, NULL);
    client_close(&setter);
    qsort(st.latency, WAKE_ROUNDS, sizeof st.latency[0], cmp_u32);
    return st.latency[WAKE_ROUNDS / 2] / 1000.0;
}

/* ---- protocol self-check -------------------------------------------------- */

/* A few round trips whose answers prove we speak TCPStore's protocol. */
static void tcpstore_self_check(const char *endpoint)
{
    int fd = tcp_connect(endpoint);
    char out[64];
    ts_set(fd, "selfcheck/k", "hello");
    if (ts_get(fd, "selfcheck/k", out, sizeof out) != 5 || strcmp(out, "hello") != 0)
        die("tcpstore self-check", "get did not return the value set");
    int64_t a = ts_add(fd, "selfcheck/n", 5), b = ts_add(fd, "selfcheck/n", -2);
    if (b != a - 2) die("tcpstore self-check", "add results are wrong");
    close(fd);
}

/* STORE_BENCH_ONLY="add:16" runs one cell (for profiling). */
static bool selected(const char *op, int clients)
{
    const char *only = getenv("STORE_BENCH_ONLY");
    if (only == NULL || only[0] == '\0') return true;
    char cell[32];
    snprintf(cell, sizeof cell, "%s:%d", op, clients);
    return strcmp(only, cell) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr,
                "usage: bench_store OURS_HOST:PORT TCPSTORE_HOST:PORT [seconds-per-run] [runs]\n");
        return 2;
    }
    const char *ours = argv[1], *theirs = argv[2];
    double seconds = argc > 3 ? atof(argv[3]) : 0.5;
    int runs = argc > 4 ? atoi(argv[4]) : 3;
    if (seconds <= 0 || seconds > 60 || runs < 1 || runs > 15)
        die("arguments", "seconds 0..60, runs 1..15");
    tcpstore_self_check(theirs);
    static const int client_counts[] = { 1, 4, 16, 64 };
    printf("store benchmark: medians of %d runs of %.1f s; latency in microseconds\n", runs,
           seconds);
    printf("%-5s %7s | %12s %8s %8s | %12s %8s %8s | %7s\n", "op", "clients", "ours ops/s", "p50",
           "p99", "tcpstore/s", "p50", "p99", "ratio");
    for (int op = 0; op < OP_COUNT_; op++) {
        for (size_t i = 0; i < sizeof client_counts / sizeof client_counts[0]; i++) {
            int n = client_counts[i];
            if (!selected(op_names[op], n)) continue;
            result a = run_median(true, ours, (op_kind)op, n, seconds, runs);
            result b = run_median(false, theirs, (op_kind)op, n, seconds, runs);
            printf("%-5s %7d | %12.0f %8.1f %8.1f | %12.0f %8.1f %8.1f | %6.2fx\n", op_names[op], n,
                   a.ops_per_s, a.p50_us, a.p99_us, b.ops_per_s, b.p50_us, b.p99_us,
                   a.ops_per_s / b.ops_per_s);
            fflush(stdout);
        }
    }
    if (!selected("wake", 1)) return 0;
    double wake_ours[16], wake_theirs[16];
    for (int i = 0; i < runs; i++) {
        wake_ours[i] = wake_p50_us(true, ours);
        wake_theirs[i] = wake_p50_us(false, theirs);
    }
    qsort(wake_ours, (size_t)runs, sizeof(double), cmp_double);
    qsort(wake_theirs, (size_t)runs, sizeof(double), cmp_double);
    printf("wake-up p50 (set -> waiter returns, median of %d runs of %d): ours %.1f us, tcpstore "
           "%.1f us\n",
           runs, WAKE_ROUNDS, wake_ours[runs / 2], wake_theirs[runs / 2]);
    printf("notes: TCPStore 1.13 does not acknowledge SET: its set latency is the send alone, and "
           "every 64\n"
           "       sets (and at the end) a WAIT syncs so the rate counts only what its server did. "
           "Its GET is\n"
           "       WAIT + GET, as its client does. Ours acknowledges every call.\n");
    return 0;
}

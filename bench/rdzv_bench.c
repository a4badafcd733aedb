/*
 * Rendezvous benchmark: N simulated nodes (threads, one store connection
 * each, store on loopback) form a generation; then one node is dropped and
 * the survivors form the next. Reports the median time of several runs and
 * the backend messages/bytes per node, counted at each node's client. With
 * --freeze, one node is a child process frozen with SIGSTOP (its connection
 * stays open, only its keep-alives stop), at the default 500/2000 ms lease.
 *
 *   rdzv_bench [--etcd H:P,...] [--runs R] N...  one line per N:
 *                                     "N form_ms msgs bytes kill_ms kill_msgs kill_bytes form_wire kill_wire"
 *   rdzv_bench [--etcd H:P,...] --freeze N        one line: "freeze N ms"
 *   rdzv_bench [--runs R] --procs B N...          the same phases, the nodes in child processes
 *                                     of B nodes (threads) each at nice 10, the store alone
 *                                     in this process (it has a host of its own in a real
 *                                     job); the victim is a node alone in its process, killed
 *                                     with SIGKILL; the line gets two more fields: the store
 *                                     server's CPU ms per node in each phase (form, kill)
 * Thread mode holds the server and every node in one process (about 4 fds
 * per node), which stops at this machine's fd limit near 8k nodes; process
 * mode needs 1 fd per node here (the raised soft limit up to the hard one)
 * and about 4 threads per node system-wide (kernel.pid_max bounds them).
 * --keepalive I:T (after --etcd) sets the lease keep-alive interval and
 * timeout in ms (default 500:2000).
 * With --etcd the nodes rendezvous on etcd v3 instead of the embedded store
 * (wire = HTTP bytes per node, keep-alives included; 0 on the store), and each
 * run of the thread mode also prints what etcd itself counted per node in each
 * phase, read from its /metrics (etcd_counts.h):
 *   "#etcd N form|kill proposals=.. range=.. txn=.. put=.. delete=.. watch=..
 *    grant=.. revoke=.. keepalive=.. cpu_ms=.."
 * RDZV_BENCH_OPS=1 (process mode): what the store executed per node in each
 * phase, by op, on stderr: "#ops N form|kill get=.. batch=.. | in batches:
 * add=.. get=.." (requests, keep-alives included, then the operations inside
 * batches), to count round trips by type.
 */
#include "rdzv/rdzv.h"
#include "store/server.h"

#include "etcd_counts.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct node {
    elastic_rdzv *rdzv;
    pthread_t thread;
    bool rejoin; /* second phase: watch for the end, then next() */
    int rc;
    uint64_t done_ms;
    elastic_rdzv_result result;
} node;

static pthread_barrier_t start_line;
static uint64_t bench_epoch_ms;
static const char *etcd_endpoints; /* --etcd: rendezvous on etcd instead of the store */
static int keepalive_interval_ms = 500,
           keepalive_timeout_ms = 2000; /* --keepalive I:T (defaults: the library's) */

/* RDZV_BENCH_TRACE=1: library log lines with milliseconds since the start. */
static void trace_log(void *user, int level, const char *module, const char *message)
{
    fprintf(stderr, "%6llu %s: %s\n", (unsigned long long)(elastic__now_ms() - bench_epoch_ms),
            module, message);
}

static void *node_main(void *arg)
{
    node *n = arg;
    if (n->rejoin) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        n->rc = elastic_rdzv_watch(n->rdzv, 120000, &cause);
        if (n->rc != 0) return NULL;
    } else {
        pthread_barrier_wait(&start_line);
    }
    n->result.struct_size = sizeof n->result;
    n->rc = elastic_rdzv_next(n->rdzv, &n->result);
    if (n->rc != 0)
        fprintf(stderr, "next: %s (%s)\n", elastic_err_name(n->rc), elastic_last_error());
    n->done_ms = elastic__now_ms();
    return NULL;
}

static void start_thread(node *n)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    if (pthread_create(&n->thread, &attr, node_main, n) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
    pthread_attr_destroy(&attr);
}

static void node_opts(elastic_rdzv_opts *o, const char *endpoint, const char *run_id, int n)
{
    elastic_rdzv_opts_init(o, sizeof *o);
    o->endpoint = endpoint;
    o->run_id = run_id;
    if (etcd_endpoints != NULL) {
        o->endpoint = NULL;
        o->backend = ELASTIC_RDZV_BACKEND_ETCD;
        o->etcd_endpoints = etcd_endpoints;
        o->etcd_timeout_ms = 30000; /* a loaded etcd answers late, not never */
    }
    o->min_nodes = n > 1 ? n - 1 : 1;
    o->max_nodes = n;
    o->node_addr = "127.0.0.1";
    o->join_timeout_ms = 120000;
    o->keepalive_interval_ms = keepalive_interval_ms;
    o->keepalive_timeout_ms = keepalive_timeout_ms;
}

static rdzv__traffic total_traffic(node *nodes, int n, int skip)
{
    rdzv__traffic t = { 0, 0, 0, 0 };
    for (int i = 0; i < n; i++) {
        if (i == skip || nodes[i].rdzv == NULL) continue;
        rdzv__traffic *x = &nodes[i].rdzv->backend->traffic;
        t.messages += __atomic_load_n(&x->messages, __ATOMIC_RELAXED);
        t.bytes_sent += __atomic_load_n(&x->bytes_sent, __ATOMIC_RELAXED);
        t.bytes_received += __atomic_load_n(&x->bytes_received, __ATOMIC_RELAXED);
        t.wire_bytes += __atomic_load_n(&x->wire_bytes, __ATOMIC_RELAXED);
    }
    return t;
}

typedef struct run_result {
    double form_ms, msgs, bytes, kill_ms, kill_msgs, kill_bytes, form_wire, kill_wire;
} run_result;

/* The per-node averages of what the nodes sent and received between two
 * readings (n: how many nodes counted). */
static void traffic_per_node(const rdzv__traffic *from, const rdzv__traffic *to, int n,
                             double *msgs, double *bytes, double *wire)
{
    *msgs = (double)(to->messages - from->messages) / n;
    *bytes =
        (double)(to->bytes_sent + to->bytes_received - from->bytes_sent - from->bytes_received) / n;
    *wire = (double)(to->wire_bytes - from->wire_bytes) / n;
}

/* Phase 1: every node joins at once; the formation's time is until the
 * last one's next() returned. Nonzero when a node failed. */
static int form_phase(node *nodes, int n, run_result *out)
{
    rdzv__traffic before = total_traffic(nodes, n, -1);
    /* --etcd: what etcd counted in each phase (#etcd lines) */
    etcd_counts etcd0, etcd1;
    bool counted = etcd_endpoints != NULL && etcd_counts_read(etcd_endpoints, &etcd0) == 0;
    pthread_barrier_init(&start_line, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) start_thread(&nodes[i]);
    pthread_barrier_wait(&start_line);
    uint64_t start = elastic__now_ms(), last = start;
    if (getenv("RDZV_BENCH_TRACE") != NULL)
        fprintf(stderr, "%6llu start\n", (unsigned long long)(start - bench_epoch_ms));
    int failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(nodes[i].thread, NULL);
        failed |= nodes[i].rc != 0;
        if (nodes[i].done_ms > last) last = nodes[i].done_ms;
    }
    pthread_barrier_destroy(&start_line);
    rdzv__traffic formed = total_traffic(nodes, n, -1);
    if (counted && etcd_counts_read(etcd_endpoints, &etcd1) == 0)
        etcd_counts_print(n, "form", &etcd0, &etcd1, n);
    out->form_ms = (double)(last - start);
    traffic_per_node(&before, &formed, n, &out->msgs, &out->bytes, &out->form_wire);
    return failed;
}

/* Phase 2: drop the middle-ranked node; the others watch, then re-join
 * without it. Nonzero when a node failed or the group is not n - 1. */
static int lose_one_phase(node *nodes, int n, run_result *out)
{
    int victim = 0;
    while (nodes[victim].result.group_rank != n / 2) victim++;
    for (int i = 0; i < n; i++) {
        nodes[i].rejoin = true;
        if (i != victim) start_thread(&nodes[i]);
    }
    /* On etcd the kill waits for the formation's tail to pass (quiet: under
     * 1 request per 100 nodes in 250 ms, at most 30 s), so the phase is
     * the lost node's cost, not the end of the formation's. */
    int quiet_ms =
        etcd_endpoints != NULL ? etcd_counts_wait_quiet(etcd_endpoints, n / 100.0 + 1, 30000) : 0;
    if (etcd_endpoints != NULL) printf("#etcd %d quiet_after_ms=%d\n", n, quiet_ms);
    rdzv__traffic pre = total_traffic(nodes, n, victim);
    etcd_counts etcd2, etcd3;
    bool counted = etcd_endpoints != NULL && etcd_counts_read(etcd_endpoints, &etcd2) == 0;
    uint64_t killed = elastic__now_ms(), last = killed;
    elastic_rdzv_free(nodes[victim].rdzv);
    nodes[victim].rdzv = NULL;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        if (i == victim) continue;
        pthread_join(nodes[i].thread, NULL);
        failed |= nodes[i].rc != 0 || nodes[i].result.group_world_size != n - 1;
        if (nodes[i].done_ms > last) last = nodes[i].done_ms;
    }
    rdzv__traffic post = total_traffic(nodes, n, victim);
    if (counted && etcd_counts_read(etcd_endpoints, &etcd3) == 0)
        etcd_counts_print(n, "kill", &etcd2, &etcd3, n - 1);
    out->kill_ms = (double)(last - killed);
    traffic_per_node(&pre, &post, n - 1, &out->kill_msgs, &out->kill_bytes, &out->kill_wire);
    return failed;
}

static int one_run(int n, int run, run_result *out)
{
    elastic_store_server_opts so;
    elastic_store_server_opts_init(&so, sizeof so);
    so.max_connections = (size_t)n + 64;
    elastic_store_server *server = NULL;
    char endpoint[64] = "", run_id[64];
    if (etcd_endpoints == NULL) {
        int port = 0;
        if (elastic_store_server_start(&so, &server) != 0 ||
            elastic_store_server_get_port(server, &port) != 0)
            return -1;
        snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    }
    snprintf(run_id, sizeof run_id, "bench-%d-%d-%d", n, run,
             (int)getpid()); /* fresh keys on a shared etcd */
    node *nodes = calloc((size_t)n, sizeof *nodes);
    elastic_rdzv_opts o;
    for (int i = 0; i < n; i++) {
        node_opts(&o, endpoint, run_id, n);
        if (elastic_rdzv_open(&o, &nodes[i].rdzv) != 0) {
            fprintf(stderr, "open: %s\n", elastic_last_error());
            return -1;
        }
    }
    int failed = form_phase(nodes, n, out);
    out->kill_ms = out->kill_msgs = out->kill_bytes = out->kill_wire = 0;
    if (!failed && n > 1) failed |= lose_one_phase(nodes, n, out);
    for (int i = 0; i < n; i++) elastic_rdzv_free(nodes[i].rdzv);
    free(nodes);
    elastic_store_server_close(server);
    return failed ? -1 : 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int bench_n(int n, int runs)
{
    double form[16], msgs[16], bytes[16], kill[16], kill_msgs[16], kill_bytes[16], form_wire[16],
        kill_wire[16];
    for (int r = 0; r < runs; r++) {
        run_result res;
        if (one_run(n, r, &res) != 0) {
            fprintf(stderr, "run %d with %d nodes failed\n", r, n);
            return 1;
        }
        form[r] = res.form_ms;
        msgs[r] = res.msgs;
        bytes[r] = res.bytes;
        kill[r] = res.kill_ms;
        kill_msgs[r] = res.kill_msgs;
        kill_bytes[r] = res.kill_bytes;
        form_wire[r] = res.form_wire;
        kill_wire[r] = res.kill_wire;
    }
    printf("%d %.1f %.1f %.0f %.1f %.1f %.0f %.0f %.0f\n", n, median(form, runs),
           median(msgs, runs), median(bytes, runs), median(kill, runs), median(kill_msgs, runs),
           median(kill_bytes, runs), median(form_wire, runs), median(kill_wire, runs));
    fflush(stdout);
    return 0;
}

/* --node endpoint run_id n: one node as a process (frozen by the parent). */
static int child_node(const char *endpoint, const char *run_id, int n)
{
    elastic_rdzv_opts o;
    node_opts(&o, endpoint, run_id, n);
    elastic_rdzv *rdzv = NULL;
    elastic_rdzv_result result = { .struct_size = sizeof result };
    if (elastic_rdzv_open(&o, &rdzv) != 0 || elastic_rdzv_next(rdzv, &result) != 0) return 1;
    printf("formed\n");
    fflush(stdout);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    (void)elastic_rdzv_watch(rdzv, 120000, &cause);
    elastic_rdzv_free(rdzv);
    return 0;
}

static int bench_freeze(int n)
{
    elastic_store_server *server = NULL;
    char endpoint[64] = "-", count[16];
    if (etcd_endpoints == NULL) {
        int port = 0;
        if (elastic_store_server_start(NULL, &server) != 0 ||
            elastic_store_server_get_port(server, &port) != 0)
            return 1;
        snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    }
    snprintf(count, sizeof count, "%d", n);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        if (etcd_endpoints != NULL)
            execl("/proc/self/exe", "rdzv_bench", "--etcd", etcd_endpoints, "--node", endpoint,
                  "freeze", count, (char *)NULL);
        else
            execl("/proc/self/exe", "rdzv_bench", "--node", endpoint, "freeze", count,
                  (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    node *nodes = calloc((size_t)n, sizeof *nodes);
    elastic_rdzv_opts o;
    for (int i = 0; i < n - 1; i++) {
        node_opts(&o, endpoint, "freeze", n);
        if (elastic_rdzv_open(&o, &nodes[i].rdzv) != 0) return 1;
    }
    pthread_barrier_init(&start_line, NULL, (unsigned)n);
    for (int i = 0; i < n - 1; i++) start_thread(&nodes[i]);
    pthread_barrier_wait(&start_line);
    int failed = 0;
    for (int i = 0; i < n - 1; i++) {
        pthread_join(nodes[i].thread, NULL);
        failed |= nodes[i].rc != 0;
    }
    char line[32] = "";
    if (read(fds[0], line, sizeof line - 1) <= 0 || failed) return 1;
    for (int i = 0; i < n - 1; i++) {
        nodes[i].rejoin = true;
        start_thread(&nodes[i]);
    }
    uint64_t frozen = elastic__now_ms(), last = frozen;
    kill(pid, SIGSTOP);
    for (int i = 0; i < n - 1; i++) {
        pthread_join(nodes[i].thread, NULL);
        failed |= nodes[i].rc != 0;
        if (nodes[i].done_ms > last) last = nodes[i].done_ms;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    printf("freeze %d %.1f\n", n, (double)(last - frozen));
    for (int i = 0; i < n - 1; i++) elastic_rdzv_free(nodes[i].rdzv);
    free(nodes);
    elastic_store_server_close(server);
    return failed;
}

/* ---- process mode: nodes in batches, the store alone in this process ---- */

static void *free_main(void *arg)
{
    node *n = arg;
    elastic_rdzv_free(n->rdzv);
    n->rdzv = NULL;
    return NULL;
}

/* Frees the batch's nodes at once: one by one, each stop waits on its
 * monitor and the batch's teardown took minutes at 16k nodes. */
static void free_all(node *nodes, int count)
{
    bool *started = calloc((size_t)count, sizeof *started);
    if (started == NULL) {
        for (int i = 0; i < count; i++) free_main(&nodes[i]);
        return;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < count; i++) {
        started[i] = pthread_create(&nodes[i].thread, &attr, free_main, &nodes[i]) == 0;
        if (!started[i]) free_main(&nodes[i]);
    }
    pthread_attr_destroy(&attr);
    for (int i = 0; i < count; i++)
        if (started[i]) pthread_join(nodes[i].thread, NULL);
    free(started);
}

/* A batch child: `count` nodes of an N-node job, driven by one-line commands
 * on stdin ("form", "watch", "kill", "quit"), answering on stdout. */
static int batch_child(const char *endpoint, const char *run_id, int n, int count)
{
    /* The nodes yield to the store: on a real job the store has a host of
     * its own, here thousands of node threads would starve its one loop. */
    if (nice(10) == -1 && errno != 0) fprintf(stderr, "nice: %s\n", strerror(errno));
    node *nodes = calloc((size_t)count, sizeof *nodes);
    if (nodes == NULL) return 1;
    elastic_rdzv_opts o;
    for (int i = 0; i < count; i++) {
        node_opts(&o, endpoint, run_id, n);
        if (elastic_rdzv_open(&o, &nodes[i].rdzv) != 0) {
            fprintf(stderr, "batch open: %s\n", elastic_last_error());
            printf("failed\n");
            fflush(stdout);
            return 1;
        }
    }
    pthread_barrier_init(&start_line, NULL, (unsigned)count + 1);
    for (int i = 0; i < count; i++) start_thread(&nodes[i]);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    rdzv__traffic pre = { 0, 0, 0, 0 };
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (strncmp(line, "form", 4) == 0) {
            rdzv__traffic before = total_traffic(nodes, count, -1);
            pthread_barrier_wait(&start_line);
            uint64_t last = 0;
            int failed = 0;
            for (int i = 0; i < count; i++) {
                pthread_join(nodes[i].thread, NULL);
                failed |= nodes[i].rc != 0;
                if (nodes[i].done_ms > last) last = nodes[i].done_ms;
            }
            rdzv__traffic t = total_traffic(nodes, count, -1);
            printf("formed %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n", last,
                   t.messages - before.messages,
                   t.bytes_sent + t.bytes_received - before.bytes_sent - before.bytes_received,
                   t.wire_bytes - before.wire_bytes, failed);
        } else if (strncmp(line, "watch", 5) == 0) {
            for (int i = 0; i < count; i++) {
                nodes[i].rejoin = true;
                start_thread(&nodes[i]);
            }
            pre = total_traffic(nodes, count, -1);
            printf("watching\n");
        } else if (strncmp(line, "rejoined?", 9) == 0) {
            uint64_t last = 0;
            int failed = 0;
            for (int i = 0; i < count; i++) {
                pthread_join(nodes[i].thread, NULL);
                failed |= nodes[i].rc != 0 || nodes[i].result.group_world_size != n - 1;
                if (nodes[i].done_ms > last) last = nodes[i].done_ms;
            }
            rdzv__traffic t = total_traffic(nodes, count, -1);
            printf("rejoined %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %d\n", last,
                   t.messages - pre.messages,
                   t.bytes_sent + t.bytes_received - pre.bytes_sent - pre.bytes_received,
                   t.wire_bytes - pre.wire_bytes, failed);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
        fflush(stdout);
    }
    uint64_t quit_ms = elastic__now_ms();
    free_all(nodes, count);
    if (getenv("RDZV_BENCH_TRACE") != NULL)
        fprintf(stderr, "%6llu batch freed its %d nodes in %llu ms\n",
                (unsigned long long)(elastic__now_ms() - bench_epoch_ms), count,
                (unsigned long long)(elastic__now_ms() - quit_ms));
    free(nodes);
    return 0;
}

typedef struct batch {
    pid_t pid;
    FILE *to, *from;
} batch;

static int spawn_batch(batch *b, const char *endpoint, const char *run_id, int n, int count)
{
    int down[2], up[2];
    if (pipe(down) != 0) return -1;
    if (pipe(up) != 0) {
        close(down[0]);
        close(down[1]);
        return -1;
    }
    char total[16], mine[16];
    snprintf(total, sizeof total, "%d", n);
    snprintf(mine, sizeof mine, "%d", count);
    b->pid = fork();
    if (b->pid < 0) return -1;
    if (b->pid == 0) {
        dup2(down[0], STDIN_FILENO);
        dup2(up[1], STDOUT_FILENO);
        /* Only the three standard descriptors go on (the store's sockets stay here). */
        closefrom(3);
        char ka[32];
        snprintf(ka, sizeof ka, "%d:%d", keepalive_interval_ms, keepalive_timeout_ms);
        const char *args[12] = { "rdzv_bench" };
        int at = 1;
        if (etcd_endpoints != NULL) {
            args[at++] = "--etcd";
            args[at++] = etcd_endpoints;
        }
        const char *rest[] = { "--keepalive", ka, "--batch", endpoint, run_id, total, mine };
        for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) args[at++] = rest[i];
        execv("/proc/self/exe", (char *const *)args);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    b->to = fdopen(down[1], "w");
    b->from = fdopen(up[0], "r");
    return b->to != NULL && b->from != NULL ? 0 : -1;
}

static void tell(batch *batches, int count, const char *command)
{
    for (int i = 0; i < count; i++) {
        fprintf(batches[i].to, "%s\n", command);
        fflush(batches[i].to);
    }
}

/* The store server's CPU time so far, ms: the process's minus this
 * (driving) thread's, which only writes and reads the pipes. */
static double server_cpu_ms(void)
{
    struct rusage all, mine;
    getrusage(RUSAGE_SELF, &all);
    getrusage(RUSAGE_THREAD, &mine);
    double us = (double)(all.ru_utime.tv_sec - mine.ru_utime.tv_sec + all.ru_stime.tv_sec -
                         mine.ru_stime.tv_sec) *
                    1e6 +
                (double)(all.ru_utime.tv_usec - mine.ru_utime.tv_usec + all.ru_stime.tv_usec -
                         mine.ru_stime.tv_usec);
    return us / 1000.0;
}

/* RDZV_BENCH_PROBE=1: a thread of the store's process times one round trip
 * every 50 ms and prints those of 100 ms or more: how late the store answers
 * anyone (the nodes' keep-alive checks included) at this size. */
static volatile int probe_stop;
static void *probe_main(void *arg)
{
    elastic_store *s = NULL;
    if (elastic_store_connect(arg, NULL, &s) != 0) return NULL;
    while (!probe_stop) {
        uint64_t t0 = elastic__now_ms();
        void *v = NULL;
        size_t len = 0;
        (void)elastic_store_try_get(s, "probe", &v, &len);
        elastic_free(v);
        uint64_t t1 = elastic__now_ms();
        if (t1 - t0 >= 100)
            fprintf(stderr, "%6llu probe %llu ms\n", (unsigned long long)(t1 - bench_epoch_ms),
                    (unsigned long long)(t1 - t0));
        usleep(50000);
    }
    elastic_store_close(s);
    return NULL;
}

/* RDZV_BENCH_OPS: the requests the store executed between two counts, per
 * node, by op. */
static void print_ops(int n, const char *phase, const uint64_t *before, const uint64_t *after,
                      int nodes)
{
    if (getenv("RDZV_BENCH_OPS") == NULL || nodes <= 0) return;
    fprintf(stderr, "#ops %d %s", n, phase);
    for (int half = 0; half < 2; half++) {
        if (half == 1) fprintf(stderr, " | in batches:");
        for (int op = 0; op < STORE__OP_END_; op++) {
            int at = half * STORE__OP_END_ + op;
            if (after[at] > before[at])
                fprintf(stderr, " %s=%.2f", op == 0 ? "unknown" : store__op_name(op),
                        (double)(after[at] - before[at]) / nodes);
        }
    }
    fprintf(stderr, "\n");
}

/* Reads one answer line from every batch into lines[i]; -1 when one fails. */
static int hear(batch *batches, int count, char (*lines)[160], const char *expected)
{
    int rc = 0;
    for (int i = 0; i < count; i++) {
        if (fgets(lines[i], sizeof lines[i], batches[i].from) == NULL ||
            strncmp(lines[i], expected, strlen(expected)) != 0) {
            fprintf(stderr, "batch %d: expected \"%s\", got \"%s\"\n", i, expected,
                    feof(batches[i].from) ? "(end)" : lines[i]);
            rc = -1;
        }
    }
    return rc;
}

/* One run in process mode: the store here, the nodes in batch processes. */
typedef struct proc_run {
    int n;
    elastic_store_server *server;
    batch *batches;
    char (*lines)[160]; /* each batch's last answer */
    int count, spawned;
    int victim_batch, others; /* the victim's batch (-1: none), the batches before it */
    int failed;
} proc_run;

/* Sums the batches' answers "<word> done msgs bytes wire bad" (the first
 * `count`): the latest done into *last, the rest into the sums. Nonzero when
 * one is malformed or says a node failed. */
static int sum_answers(char (*lines)[160], int count, const char *word, uint64_t *last,
                       uint64_t *msgs, uint64_t *bytes, uint64_t *wire)
{
    char format[96];
    snprintf(format, sizeof format, "%s %%" SCNu64 " %%" SCNu64 " %%" SCNu64 " %%" SCNu64 " %%d",
             word);
    *msgs = *bytes = *wire = 0;
    for (int i = 0; i < count; i++) {
        uint64_t done, m, b, w;
        int bad;
        if (sscanf(lines[i], format, &done, &m, &b, &w, &bad) != 5 || bad) return 1;
        if (done > *last) *last = done;
        *msgs += m;
        *bytes += b;
        *wire += w;
    }
    return 0;
}

/* Starts the batch processes and waits until each says it is ready. The last
 * batch is one node alone: the victim, killed with SIGKILL (its connection
 * drops as a crashed host's would, nothing says goodbye). */
static void spawn_batches(proc_run *pr, const char *endpoint, const char *run_id, int per_batch)
{
    int n = pr->n, survivors = n > 1 ? n - 1 : n;
    pr->count = (survivors + per_batch - 1) / per_batch + (n > 1);
    pr->victim_batch = n > 1 ? pr->count - 1 : -1;
    pr->others = n > 1 ? pr->count - 1 : pr->count;
    pr->batches = calloc((size_t)pr->count, sizeof *pr->batches);
    pr->lines = calloc((size_t)pr->count, sizeof *pr->lines);
    for (; pr->spawned < pr->count; pr->spawned++) {
        int i = pr->spawned;
        int mine = i == pr->victim_batch ? 1
                   : i < pr->others - 1  ? per_batch
                                         : survivors - per_batch * (pr->others - 1);
        if (spawn_batch(&pr->batches[i], endpoint, run_id, n, mine) != 0) {
            fprintf(stderr, "fork: %s\n", strerror(errno));
            pr->failed = 1;
            break;
        }
    }
    if (!pr->failed) pr->failed = hear(pr->batches, pr->count, pr->lines, "ready") != 0;
}

/* Phase 1: every batch forms at once; the store's CPU per node beside. */
static void procs_form(proc_run *pr, run_result *out, double *form_cpu)
{
    uint64_t start = elastic__now_ms(), last = start;
    uint64_t ops0[2 * STORE__OP_END_], ops1[2 * STORE__OP_END_]; /* requests, then batched ops */
    store__server_op_counts(pr->server, ops0, ops0 + STORE__OP_END_);
    double cpu0 = server_cpu_ms();
    if (!pr->failed) {
        tell(pr->batches, pr->count, "form");
        pr->failed = hear(pr->batches, pr->count, pr->lines, "formed") != 0;
    }
    double cpu1 = server_cpu_ms();
    store__server_op_counts(pr->server, ops1, ops1 + STORE__OP_END_);
    print_ops(pr->n, "form", ops0, ops1, pr->n);
    uint64_t msgs = 0, bytes = 0, wire = 0;
    if (!pr->failed)
        pr->failed = sum_answers(pr->lines, pr->count, "formed", &last, &msgs, &bytes, &wire);
    out->form_ms = (double)(last - start);
    out->msgs = (double)msgs / pr->n;
    out->bytes = (double)bytes / pr->n;
    out->form_wire = (double)wire / pr->n;
    *form_cpu = (cpu1 - cpu0) / pr->n;
}

/* Phase 2: the others watch, the victim's process is killed, they re-join. */
static void procs_lose_one(proc_run *pr, run_result *out, double *kill_cpu)
{
    int n = pr->n;
    tell(pr->batches, pr->others, "watch");
    pr->failed = hear(pr->batches, pr->others, pr->lines, "watching") != 0;
    double cpu2 = server_cpu_ms();
    uint64_t ops0[2 * STORE__OP_END_], ops1[2 * STORE__OP_END_];
    store__server_op_counts(pr->server, ops0, ops0 + STORE__OP_END_);
    uint64_t killed = elastic__now_ms(), last = killed;
    if (getenv("RDZV_BENCH_TRACE") != NULL)
        fprintf(stderr, "%6llu kill\n", (unsigned long long)(killed - bench_epoch_ms));
    if (!pr->failed) {
        kill(pr->batches[pr->victim_batch].pid, SIGKILL);
        tell(pr->batches, pr->others, "rejoined?");
        pr->failed = hear(pr->batches, pr->others, pr->lines, "rejoined") != 0;
    }
    double cpu3 = server_cpu_ms();
    store__server_op_counts(pr->server, ops1, ops1 + STORE__OP_END_);
    print_ops(n, "kill", ops0, ops1, n - 1);
    uint64_t msgs = 0, bytes = 0, wire = 0;
    if (!pr->failed)
        pr->failed = sum_answers(pr->lines, pr->others, "rejoined", &last, &msgs, &bytes, &wire);
    out->kill_ms = (double)(last - killed);
    out->kill_msgs = (double)msgs / (n - 1);
    out->kill_bytes = (double)bytes / (n - 1);
    out->kill_wire = (double)wire / (n - 1);
    *kill_cpu = (cpu3 - cpu2) / (n - 1);
}

/* Tells every batch to quit and reaps it. */
static void end_batches(proc_run *pr)
{
    for (int i = 0; i < pr->spawned; i++) {
        if (pr->batches[i].to != NULL) {
            fprintf(pr->batches[i].to, "quit\n");
            fclose(pr->batches[i].to);
        }
        if (pr->batches[i].from != NULL) fclose(pr->batches[i].from);
    }
    for (int i = 0; i < pr->spawned; i++) {
        int status = 0;
        waitpid(pr->batches[i].pid, &status, 0);
    }
    if (getenv("RDZV_BENCH_TRACE") != NULL)
        fprintf(stderr, "%6llu batches gone\n",
                (unsigned long long)(elastic__now_ms() - bench_epoch_ms));
    free(pr->batches);
    free(pr->lines);
}

static int one_run_procs(int n, int per_batch, int run, run_result *out, double *form_cpu,
                         double *kill_cpu)
{
    elastic_store_server_opts so;
    elastic_store_server_opts_init(&so, sizeof so);
    so.max_connections = (size_t)n + 64;
    proc_run pr = { .n = n };
    char endpoint[64], run_id[64];
    int port = 0;
    if (elastic_store_server_start(&so, &pr.server) != 0 ||
        elastic_store_server_get_port(pr.server, &port) != 0) {
        fprintf(stderr, "store: %s\n", elastic_last_error());
        return -1;
    }
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    snprintf(run_id, sizeof run_id, "bench-%d-%d-%d", n, run, (int)getpid());
    pthread_t probe;
    bool probing = getenv("RDZV_BENCH_PROBE") != NULL &&
                   pthread_create(&probe, NULL, probe_main, endpoint) == 0;
    spawn_batches(&pr, endpoint, run_id, per_batch);
    procs_form(&pr, out, form_cpu);
    out->kill_ms = out->kill_msgs = out->kill_bytes = out->kill_wire = 0;
    *kill_cpu = 0;
    if (!pr.failed && pr.victim_batch >= 0) procs_lose_one(&pr, out, kill_cpu);
    end_batches(&pr);
    if (probing) {
        probe_stop = 1;
        pthread_join(probe, NULL);
    }
    elastic_store_server_close(pr.server);
    return pr.failed ? -1 : 0;
}

/* Descriptors and threads process mode needs, checked before it starts so a
 * short limit is named instead of failing somewhere inside. */
static int check_limits(int n)
{
    struct rlimit fds;
    getrlimit(RLIMIT_NOFILE, &fds);
    fds.rlim_cur = fds.rlim_max;
    setrlimit(RLIMIT_NOFILE, &fds);
    if ((rlim_t)n + 256 > fds.rlim_cur) {
        fprintf(stderr,
                "%d nodes need %d descriptors in the store's process; the hard limit "
                "(ulimit -Hn) is %llu\n",
                n, n + 256, (unsigned long long)fds.rlim_cur);
        return -1;
    }
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    long pid_max = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &pid_max) != 1) pid_max = 0;
        fclose(f);
    }
    if (pid_max > 0 && (long)n * 4 + 2048 > pid_max) {
        fprintf(stderr,
                "%d nodes run about %d threads (4 a node: the caller, the monitor, the store "
                "client's reader and keep-alive) and kernel.pid_max is %ld: raise it "
                "(sysctl -w kernel.pid_max=%d)\n",
                n, n * 4, pid_max, n * 4 + 8192);
        return -1;
    }
    return 0;
}

static int bench_n_procs(int n, int runs, int per_batch)
{
    double form[16], msgs[16], bytes[16], kill[16], kill_msgs[16], kill_bytes[16], form_wire[16],
        kill_wire[16], form_cpu[16], kill_cpu[16];
    if (check_limits(n) != 0) return 1;
    signal(SIGPIPE, SIG_IGN); /* a batch that died is reported, not fatal here */
    for (int r = 0; r < runs; r++) {
        run_result res;
        if (one_run_procs(n, per_batch, r, &res, &form_cpu[r], &kill_cpu[r]) != 0) {
            fprintf(stderr, "run %d with %d nodes (processes of %d) failed\n", r, n, per_batch);
            return 1;
        }
        form[r] = res.form_ms;
        msgs[r] = res.msgs;
        bytes[r] = res.bytes;
        kill[r] = res.kill_ms;
        kill_msgs[r] = res.kill_msgs;
        kill_bytes[r] = res.kill_bytes;
        form_wire[r] = res.form_wire;
        kill_wire[r] = res.kill_wire;
    }
    printf("%d %.1f %.1f %.0f %.1f %.1f %.0f %.0f %.0f %.3f %.3f\n", n, median(form, runs),
           median(msgs, runs), median(bytes, runs), median(kill, runs), median(kill_msgs, runs),
           median(kill_bytes, runs), median(form_wire, runs), median(kill_wire, runs),
           median(form_cpu, runs), median(kill_cpu, runs));
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    /* Batch children share the parent's epoch, so trace lines line up. */
    const char *epoch = getenv("RDZV_BENCH_EPOCH");
    bench_epoch_ms = epoch != NULL ? strtoull(epoch, NULL, 10) : elastic__now_ms();
    if (epoch == NULL) {
        char text[24];
        snprintf(text, sizeof text, "%" PRIu64, bench_epoch_ms);
        setenv("RDZV_BENCH_EPOCH", text, 1);
    }
    if (getenv("RDZV_BENCH_TRACE") != NULL) {
        elastic_set_log_callback(trace_log, NULL);
        elastic_set_log_level(getenv("RDZV_BENCH_DEBUG") ? ELASTIC_LOG_DEBUG : ELASTIC_LOG_INFO);
    }
    if (argc > 2 && strcmp(argv[1], "--etcd") == 0) {
        etcd_endpoints = argv[2];
        argv += 2;
        argc -= 2;
    }
    if (argc > 2 && strcmp(argv[1], "--keepalive") == 0) {
        if (sscanf(argv[2], "%d:%d", &keepalive_interval_ms, &keepalive_timeout_ms) != 2 ||
            keepalive_interval_ms < 100 || keepalive_timeout_ms < keepalive_interval_ms) {
            fprintf(stderr, "--keepalive INTERVAL_MS:TIMEOUT_MS (>= 100, timeout >= interval)\n");
            return 2;
        }
        argv += 2;
        argc -= 2;
    }
    if (argc == 6 && strcmp(argv[1], "--batch") == 0)
        return batch_child(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    if (argc == 5 && strcmp(argv[1], "--node") == 0)
        return child_node(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "--freeze") == 0) return bench_freeze(atoi(argv[2]));
    int runs = 3, first = 1;
    if (argc > 2 && strcmp(argv[1], "--runs") == 0) {
        runs = atoi(argv[2]);
        first = 3;
    }
    if (runs < 1 || runs > 16) runs = 3;
    int per_batch = 0;
    if (argc > first + 1 && strcmp(argv[first], "--procs") == 0) {
        per_batch = atoi(argv[first + 1]);
        first += 2;
        if (per_batch < 1 || per_batch > 4096) {
            fprintf(stderr, "--procs B: 1..4096 nodes per process\n");
            return 2;
        }
    }
    for (int i = first; i < argc; i++) {
        int n = atoi(argv[i]);
        if (n < 1 || n > 1 << 20) {
            fprintf(stderr, "node count \"%s\": 1 .. 1048576\n", argv[i]);
            return 2;
        }
        if ((per_batch > 0 ? bench_n_procs(n, runs, per_batch) : bench_n(n, runs)) != 0) return 1;
    }
    return 0;
}

/*
 * What etcd itself counted during a benchmark phase, read from its /metrics
 * page (included by rdzv_bench.c): Raft proposals (every write is one),
 * gRPC calls by method (the JSON gateway turns each HTTP request into one),
 * and etcd's own CPU time. Counted by the server, so the figures per node do
 * not swing with the machine's load the way wall times do; keep-alives are
 * apart because their number follows the phase's length, not the protocol.
 */
#ifndef ELASTIC_BENCH_ETCD_COUNTS_H
#define ELASTIC_BENCH_ETCD_COUNTS_H

#include "common/clock.h"
#include "common/http.h"
#include "common/prom.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum {
    ETCD_PROPOSALS, /* Raft proposals applied: the writes (Put, Txn, DeleteRange, leases) */
    ETCD_RANGE,
    ETCD_TXN,
    ETCD_PUT,
    ETCD_DELETE,
    ETCD_WATCH, /* watch streams opened */
    ETCD_GRANT,
    ETCD_REVOKE,
    ETCD_KEEPALIVE, /* keep-alive messages etcd received, on the gateway's streams or ours */
    ETCD_CPU_MS,
    ETCD_KEEPALIVE_STREAMS, /* LeaseKeepAlive streams opened: one per gateway keep-alive */
    ETCD_COUNTS
};

static const char *const etcd_count_names[ETCD_COUNTS] = { "proposals", "range", "txn",   "put",
                                                           "delete",    "watch", "grant", "revoke",
                                                           "keepalive", "cpu_ms", "keepalive_streams" };

typedef struct etcd_counts {
    double v[ETCD_COUNTS];
} etcd_counts;

static inline int etcd_count_of_method(const char *method)
{
    static const struct {
        const char *name;
        int index;
    } methods[] = { { "Range", ETCD_RANGE },
                    { "Txn", ETCD_TXN },
                    { "Put", ETCD_PUT },
                    { "DeleteRange", ETCD_DELETE },
                    { "Watch", ETCD_WATCH },
                    { "LeaseGrant", ETCD_GRANT },
                    { "LeaseRevoke", ETCD_REVOKE },
                    { "LeaseKeepAlive", ETCD_KEEPALIVE } };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(method, methods[i].name) == 0) return methods[i].index;
    return -1;
}

/* Reads the counters of the first endpoint of a "host:port,..." list.
 * Watch streams are counted when they start (grpc_server_started_total), the
 * unary calls when handled. -1 when etcd does not answer. */
static inline int etcd_counts_read(const char *endpoints, etcd_counts *out)
{
    char first[300];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(endpoints, ","), endpoints);
    memset(out, 0, sizeof *out);
    elastic__text page;
    elastic__text_init(&page, 16u << 20);
    int status = 0;
    if (elastic__http_get(first, "/metrics", 5000, &page, &status) != 0 || status != 200 ||
        page.data == NULL) {
        elastic__text_free(&page);
        return -1;
    }
    for (char *line = page.data, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        elastic__prom_sample s;
        if (elastic__prom_parse_line(line, &s) != 1) continue;
        char method[64];
        if (strcmp(s.name, "etcd_server_proposals_applied_total") == 0)
            out->v[ETCD_PROPOSALS] = s.value;
        else if (strcmp(s.name, "process_cpu_seconds_total") == 0)
            out->v[ETCD_CPU_MS] = s.value * 1000;
        else if ((strcmp(s.name, "grpc_server_handled_total") == 0 ||
                  strcmp(s.name, "grpc_server_started_total") == 0 ||
                  strcmp(s.name, "grpc_server_msg_received_total") == 0) &&
                 elastic__prom_label(s.labels, "grpc_method", method, sizeof method)) {
            int i = etcd_count_of_method(method);
            bool started = strcmp(s.name, "grpc_server_started_total") == 0;
            bool received = strcmp(s.name, "grpc_server_msg_received_total") == 0;
            if (i == ETCD_KEEPALIVE) { /* messages, and apart the streams they came on */
                if (received) out->v[ETCD_KEEPALIVE] += s.value;
                if (started) out->v[ETCD_KEEPALIVE_STREAMS] += s.value;
            } else if (i >= 0 && !received && (i == ETCD_WATCH) == started) {
                out->v[i] += s.value; /* watch streams when opened; unary calls when answered */
            }
        }
    }
    elastic__text_free(&page);
    return 0;
}

/* Requests other than keep-alives (what a phase's protocol sends). */
static inline double etcd_counts_requests(const etcd_counts *c)
{
    return c->v[ETCD_RANGE] + c->v[ETCD_TXN] + c->v[ETCD_PUT] + c->v[ETCD_DELETE] +
           c->v[ETCD_WATCH] + c->v[ETCD_GRANT] + c->v[ETCD_REVOKE];
}

/* Waits (up to timeout_ms) until etcd serves fewer than `calm` requests in
 * 250 ms: the formation's tail (every monitor's first look at its
 * neighbour) is over, as it is long before a node dies in a real job.
 * Keep-alives do not count. Returns the ms waited. */
static inline int etcd_counts_wait_quiet(const char *endpoints, double calm, int timeout_ms)
{
    uint64_t start = elastic__now_ms();
    etcd_counts before, after;
    if (etcd_counts_read(endpoints, &before) != 0) return 0;
    while (elastic__now_ms() - start < (uint64_t)timeout_ms) {
        struct timespec pause = { 0, 250 * 1000000L };
        nanosleep(&pause, NULL);
        if (etcd_counts_read(endpoints, &after) != 0) break;
        if (etcd_counts_requests(&after) - etcd_counts_requests(&before) < calm) break;
        before = after;
    }
    return (int)(elastic__now_ms() - start);
}

/* "#etcd <N> <phase> name=value/node ...": what etcd counted between two reads. */
static inline void etcd_counts_print(int n, const char *phase, const etcd_counts *before,
                              const etcd_counts *after, int nodes)
{
    printf("#etcd %d %s", n, phase);
    for (int i = 0; i < ETCD_COUNTS; i++)
        printf(" %s=%.2f", etcd_count_names[i], (after->v[i] - before->v[i]) / nodes);
    printf("\n");
}

#endif /* ELASTIC_BENCH_ETCD_COUNTS_H */

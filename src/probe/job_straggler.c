/*
 * Job-wide straggler scores: each node's published statistic (the median of
 * its ranks' window step times) scored against the job's median with the
 * same rule as the ranks of one node (probe__straggler_judge). Pure: the
 * agent moves the records through the store.
 */
#include "probe/probe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A node id goes into a metrics label: no quotes, backslashes or spaces. */
#define NODE_ID_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:@"
#define NODE_STAT_MAX_STEP_NS (3600ull * 1000000000ull) /* an hour per step: beyond it, garbage */

int probe__node_stat_format(const probe__node_stat *st, char *buf, size_t size)
{
    int n = snprintf(buf, size, "v1 %" PRIu64 " %" PRIu64 " %s", st->steps, st->step_ns, st->node_id);
    return n > 0 && (size_t)n < size ? 0 : elastic__fail(ELASTIC_EINVAL, "node statistic does not fit");
}

int probe__node_stat_parse(const char *buf, size_t len, probe__node_stat *out)
{
    char text[PROBE__NODE_STAT_BYTES];
    if (len == 0 || len >= sizeof text) return elastic__fail(ELASTIC_EPROTO, "node statistic of %zu bytes", len);
    memcpy(text, buf, len);
    text[len] = '\0';
    unsigned long long steps, step_ns;
    char node[sizeof out->node_id];
    int used = 0;
    if (sscanf(text, "v1 %20llu %20llu %127s%n", &steps, &step_ns, node, &used) != 3 || (size_t)used != len ||
        step_ns > NODE_STAT_MAX_STEP_NS || strspn(node, NODE_ID_CHARS) != strlen(node))
        return elastic__fail(ELASTIC_EPROTO, "malformed node statistic");
    out->steps = steps;
    out->step_ns = step_ns;
    snprintf(out->node_id, sizeof out->node_id, "%s", node);
    return 0;
}

struct probe__job_straggler {
    unsigned nodes;
    unsigned *below;                 /* consecutive rounds under the threshold, per node */
    uint64_t *last_steps;            /* steps seen last round: a node that did not advance is not scored */
    double *times;
};

int probe__job_straggler_create(unsigned nodes, probe__job_straggler **out)
{
    if (nodes == 0 || nodes > PROBE__JOB_MAX_NODES)
        return elastic__fail(ELASTIC_EINVAL, "job straggler: %u nodes", nodes);
    probe__job_straggler *j = calloc(1, sizeof *j);
    if (j != NULL) {
        j->below = calloc(nodes, sizeof *j->below);
        j->last_steps = calloc(nodes, sizeof *j->last_steps);
        j->times = calloc(nodes, sizeof *j->times);
    }
    if (j == NULL || j->below == NULL || j->last_steps == NULL || j->times == NULL) {
        probe__job_straggler_free(j);
        return elastic__fail(ELASTIC_ENOMEM, "job straggler");
    }
    j->nodes = nodes;
    *out = j;
    return 0;
}

void probe__job_straggler_free(probe__job_straggler *j)
{
    if (j == NULL) return;
    free(j->below);
    free(j->last_steps);
    free(j->times);
    free(j);
}

int probe__job_straggler_evaluate(probe__job_straggler *j, const probe__node_stat *stats, const bool *present,
                                  uint64_t warmup_steps, double threshold, unsigned rounds, double *scores)
{
    for (unsigned i = 0; i < j->nodes; i++) {
        bool fresh = present[i] && stats[i].steps > j->last_steps[i];
        /* Counters that went back: the node restarted its workers; start over. */
        if (present[i] && stats[i].steps < j->last_steps[i]) j->below[i] = 0;
        j->times[i] = fresh && stats[i].steps >= warmup_steps ? (double)stats[i].step_ns : 0;
        j->last_steps[i] = present[i] ? stats[i].steps : 0;
    }
    return probe__straggler_judge(j->times, j->nodes, threshold, rounds, j->below, scores);
}

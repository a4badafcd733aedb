/*
 * Job-wide straggler scores: each node's published statistic (the median of
 * its ranks' window step times) scored against the job's median with the
 * same rule as the ranks of one node (probe__straggler_judge). Pure: the
 * agent moves the records through the store.
 */
#include "probe/probe.h"

#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A node id goes into a metrics label: no quotes, backslashes or spaces. */
#define NODE_ID_CHARS         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:@"
#define NODE_STAT_MAX_STEP_NS (3600ull * 1000000000ull) /* an hour per step: beyond it, garbage */

int probe__node_stat_format(const probe__node_stat *st, char *buf, size_t size)
{
    int n =
        snprintf(buf, size, "v1 %" PRIu64 " %" PRIu64 " %s", st->steps, st->step_ns, st->node_id);
    return n > 0 && (size_t)n < size ? 0
                                     : elastic__fail(ELASTIC_EINVAL, "node statistic does not fit");
}

int probe__node_stat_parse(const char *buf, size_t len, probe__node_stat *out)
{
    char text[PROBE__NODE_STAT_BYTES];
    if (len == 0 || len >= sizeof text)
        return elastic__fail(ELASTIC_EPROTO, "node statistic of %zu bytes", len);
    memcpy(text, buf, len);
    text[len] = '\0';
    /* "v1 <steps> <step_ns> <node id>", single spaces. */
    if (strncmp(text, "v1 ", 3) != 0)
        return elastic__fail(ELASTIC_EPROTO, "malformed node statistic");
    uint64_t steps, step_ns;
    const char *p = text + 3, *sp1 = strchr(p, ' '),
               *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    const char *node = sp2 != NULL ? sp2 + 1 : "";
    size_t node_len = strlen(node);
    if (sp2 == NULL ||
        elastic__parse_u64_n(NULL, p, (size_t)(sp1 - p), 0, UINT64_MAX, &steps) != 0 ||
        elastic__parse_u64_n(NULL, sp1 + 1, (size_t)(sp2 - sp1 - 1), 0, NODE_STAT_MAX_STEP_NS,
                             &step_ns) != 0 ||
        node_len == 0 || node_len >= sizeof out->node_id || strspn(node, NODE_ID_CHARS) != node_len)
        return elastic__fail(ELASTIC_EPROTO, "malformed node statistic");
    out->steps = steps;
    out->step_ns = step_ns;
    memcpy(out->node_id, node, node_len + 1);
    return 0;
}

struct probe__job_straggler {
    unsigned nodes;
    unsigned *below;      /* consecutive rounds under the threshold, per node */
    uint64_t *last_steps; /* steps seen last round: a node that did not advance is not scored */
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

int probe__job_straggler_evaluate(probe__job_straggler *j, const probe__node_stat *stats,
                                  const bool *present, uint64_t warmup_steps, double threshold,
                                  unsigned rounds, double *scores)
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

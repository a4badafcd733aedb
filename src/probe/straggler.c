/*
 * Straggler scoring (as NVRx does it): each rank's mean step time over a
 * sliding window of samples, against the median of the group; score = median
 * / rank's time, so 1 is typical and 0.5 means twice as slow. A persistent
 * straggler is a rank whose score stays below a threshold for several rounds.
 */
#include "probe/probe.h"

#include <stdlib.h>

typedef struct sample {
    uint64_t sum_ns, steps; /* cumulative, as read from the slot */
} sample;

struct probe__straggler {
    unsigned ranks, window;
    sample *ring;     /* ranks * (window + 1): cumulative values, oldest first per rank */
    unsigned *filled; /* samples held per rank */
    unsigned *below;  /* consecutive rounds below the threshold */
};

int probe__straggler_create(unsigned ranks, unsigned window, probe__straggler **out)
{
    if (ranks == 0 || ranks > CHANNEL__HB_MAX_SLOTS || window == 0 || window > 1024)
        return elastic__fail(ELASTIC_EINVAL, "straggler: %u ranks, window %u", ranks, window);
    probe__straggler *s = calloc(1, sizeof *s);
    if (s != NULL) {
        s->ring = calloc((size_t)ranks * (window + 1), sizeof *s->ring);
        s->filled = calloc(ranks, sizeof *s->filled);
        s->below = calloc(ranks, sizeof *s->below);
    }
    if (s == NULL || s->ring == NULL || s->filled == NULL || s->below == NULL) {
        probe__straggler_free(s);
        return elastic__fail(ELASTIC_ENOMEM, "straggler window");
    }
    s->ranks = ranks;
    s->window = window;
    *out = s;
    return 0;
}

void probe__straggler_free(probe__straggler *s)
{
    if (s == NULL) return;
    free(s->ring);
    free(s->filled);
    free(s->below);
    free(s);
}

void probe__straggler_reset(probe__straggler *s)
{
    memset(s->filled, 0, s->ranks * sizeof *s->filled);
    memset(s->below, 0, s->ranks * sizeof *s->below);
}

static sample *rank_ring(const probe__straggler *s, unsigned rank)
{
    return s->ring + (size_t)rank * (s->window + 1);
}

void probe__straggler_sample(probe__straggler *s, unsigned rank, uint64_t sum_ns, uint64_t steps)
{
    if (rank >= s->ranks) return;
    sample *ring = rank_ring(s, rank);
    unsigned n = s->filled[rank];
    /* Counters that went backwards mean a new process in the slot: start over. */
    if (n > 0 && (steps < ring[n - 1].steps || sum_ns < ring[n - 1].sum_ns)) n = 0;
    if (n > 0 && steps == ring[n - 1].steps) return; /* no step finished: nothing to learn */
    if (n == s->window + 1) {
        memmove(ring, ring + 1, s->window * sizeof *ring);
        n--;
    }
    ring[n] = (sample){ sum_ns, steps };
    s->filled[rank] = n + 1;
}

double probe__straggler_step_ns(const probe__straggler *s, unsigned rank)
{
    if (rank >= s->ranks || s->filled[rank] < 2) return 0;
    const sample *ring = rank_ring(s, rank);
    const sample *first = &ring[0], *last = &ring[s->filled[rank] - 1];
    return (double)(last->sum_ns - first->sum_ns) / (double)(last->steps - first->steps);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The one scoring rule, shared by the ranks of a node and the nodes of a job. */
int probe__straggler_judge(const double *times, unsigned n, double threshold, unsigned rounds,
                           unsigned *below, double *scores)
{
    double *sorted = malloc((n > 0 ? n : 1) * sizeof *sorted);
    unsigned with_data = 0;
    for (unsigned i = 0; i < n; i++) {
        scores[i] = -1;
        if (times[i] > 0 && sorted != NULL) sorted[with_data++] = times[i];
    }
    if (with_data >= 2) {
        qsort(sorted, with_data, sizeof *sorted, compare_double);
        double median = with_data % 2 ? sorted[with_data / 2]
                                      : (sorted[with_data / 2 - 1] + sorted[with_data / 2]) / 2;
        for (unsigned i = 0; i < n; i++)
            if (times[i] > 0) scores[i] = median / times[i];
    }
    free(sorted);
    int worst = -1;
    if (below == NULL) return -1;
    for (unsigned i = 0; i < n; i++) {
        if (scores[i] >= 0 && scores[i] < threshold)
            below[i]++;
        else
            below[i] = 0;
        if (rounds > 0 && below[i] >= rounds && (worst < 0 || scores[i] < scores[worst]))
            worst = (int)i;
    }
    return worst;
}

static int rank_times(const probe__straggler *s, double **times)
{
    *times = malloc(s->ranks * sizeof **times);
    if (*times == NULL) return -1;
    for (unsigned r = 0; r < s->ranks; r++) (*times)[r] = probe__straggler_step_ns(s, r);
    return 0;
}

void probe__straggler_scores(const probe__straggler *s, double *scores)
{
    double *times;
    for (unsigned r = 0; r < s->ranks; r++) scores[r] = -1;
    if (rank_times(s, &times) != 0) return;
    probe__straggler_judge(times, s->ranks, 1, 0, NULL, scores);
    free(times);
}

int probe__straggler_evaluate(probe__straggler *s, double threshold, unsigned rounds,
                              double *scores)
{
    double *times;
    for (unsigned r = 0; r < s->ranks; r++) scores[r] = -1;
    if (rank_times(s, &times) != 0) return -1;
    int worst = probe__straggler_judge(times, s->ranks, threshold, rounds, s->below, scores);
    free(times);
    return worst;
}

double probe__straggler_node_step_ns(const probe__straggler *s)
{
    double *times;
    if (rank_times(s, &times) != 0) return 0;
    unsigned n = 0;
    for (unsigned r = 0; r < s->ranks; r++)
        if (times[r] > 0) times[n++] = times[r];
    double median = 0;
    if (n > 0) {
        qsort(times, n, sizeof *times, compare_double);
        median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
    }
    free(times);
    return median;
}

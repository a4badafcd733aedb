/*
 * Where a node's copies go (replica.h, replica__place): a pure function of
 * the node list, so every agent computes the same placement.
 */
#include "replica/replica.h"

#include <stdlib.h>

static const char *domain_of(const replica_node *n)
{
    return n->domain != NULL && n->domain[0] != '\0' ? n->domain : NULL;
}

/* Two nodes share a failure domain only when both name the same one. */
static bool same_domain(const replica_node *a, const replica_node *b)
{
    const char *da = domain_of(a), *db = domain_of(b);
    return da != NULL && db != NULL && strcmp(da, db) == 0;
}

static const replica_node *sort_base;

static int by_name(const void *a, const void *b)
{
    return strcmp(sort_base[*(const size_t *)a].name, sort_base[*(const size_t *)b].name);
}

size_t replica__place(const replica_node *nodes, size_t n, size_t self, size_t r, size_t *out)
{
    if (n < 2 || self >= n || r == 0) return 0;
    size_t *ring = malloc(n * sizeof *ring);
    if (ring == NULL) return 0;
    for (size_t i = 0; i < n; i++) ring[i] = i;
    /* qsort's comparator has no context argument: the base is a static,
     * so placement is not reentrant across threads (callers: one agent thread). */
    sort_base = nodes;
    qsort(ring, n, sizeof *ring, by_name);
    size_t at = 0;
    while (ring[at] != self) at++;
    size_t picked = 0;
    /* Pass 0: outside self's domain and outside every domain picked so far;
     * pass 1: outside self's domain; pass 2: any other node. */
    for (int pass = 0; pass < 3 && picked < r; pass++) {
        for (size_t k = 1; k < n && picked < r; k++) {
            size_t cand = ring[(at + k) % n];
            bool taken = false, shares = false;
            for (size_t j = 0; j < picked; j++) {
                taken = taken || out[j] == cand;
                shares = shares || same_domain(&nodes[out[j]], &nodes[cand]);
            }
            if (taken) continue;
            if (pass < 2 && same_domain(&nodes[self], &nodes[cand])) continue;
            if (pass == 0 && shares) continue;
            out[picked++] = cand;
        }
    }
    free(ring);
    return picked;
}

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

/* Indices in name order (insertion sort: node lists are short, and it
 * needs no shared state, unlike qsort's context-free comparator). */
static void sort_by_name(const replica_node *nodes, size_t *ring, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        size_t v = ring[i], j = i;
        for (; j > 0 && strcmp(nodes[ring[j - 1]].name, nodes[v].name) > 0; j--)
            ring[j] = ring[j - 1];
        ring[j] = v;
    }
}

size_t replica__place(const replica_node *nodes, size_t n, size_t self, size_t r, size_t *out)
{
    if (n < 2 || self >= n || r == 0) return 0;
    size_t *ring = malloc(n * sizeof *ring);
    if (ring == NULL) return 0;
    for (size_t i = 0; i < n; i++) ring[i] = i;
    sort_by_name(nodes, ring, n);
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

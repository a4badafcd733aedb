/*
 * The store's second index: every entry in key byte order, so that a prefix
 * scan (a watch arming, a key listing, a count) costs O(log n + matches)
 * instead of a walk over the whole table. A treap: a binary search tree by
 * key that is also a heap by a random priority drawn per entry from a
 * per-table random seed, so its depth stays logarithmic whatever keys a
 * client chooses (no key order can build a list), without rebalancing code.
 */
#include "store/kv.h"

#include <stdlib.h>
#include <string.h>

/* Byte order; a key sorts after every proper prefix of it. */
static int compare_keys(const char *a, size_t a_len, const char *b, size_t b_len)
{
    size_t n = a_len < b_len ? a_len : b_len;
    int c = n > 0 ? memcmp(a, b, n) : 0;
    if (c != 0) return c;
    return (a_len > b_len) - (a_len < b_len);
}

/* splitmix64: cheap, well mixed; the seed comes from getrandom. */
static uint64_t next_priority(store__kv *kv)
{
    uint64_t z = (kv->order_seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static store__entry *rotate_right(store__entry *top)
{
    store__entry *left = top->order_left;
    top->order_left = left->order_right;
    left->order_right = top;
    return left;
}

static store__entry *rotate_left(store__entry *top)
{
    store__entry *right = top->order_right;
    top->order_right = right->order_left;
    right->order_left = top;
    return right;
}

/* Inserts e under *at (keys are unique: the hash table said it is new). */
static store__entry *insert_at(store__entry *at, store__entry *e)
{
    if (at == NULL) return e;
    if (compare_keys(e->key, e->key_len, at->key, at->key_len) < 0) {
        at->order_left = insert_at(at->order_left, e);
        if (at->order_left->order_priority > at->order_priority) at = rotate_right(at);
    } else {
        at->order_right = insert_at(at->order_right, e);
        if (at->order_right->order_priority > at->order_priority) at = rotate_left(at);
    }
    return at;
}

void store__kv_order_insert(store__kv *kv, store__entry *e)
{
    e->order_left = e->order_right = NULL;
    e->order_priority = next_priority(kv);
    kv->order_root = insert_at(kv->order_root, e);
}

/* Joins two treaps whose keys are all below (left) and above (right). */
static store__entry *join(store__entry *left, store__entry *right)
{
    if (left == NULL) return right;
    if (right == NULL) return left;
    if (left->order_priority > right->order_priority) {
        left->order_right = join(left->order_right, right);
        return left;
    }
    right->order_left = join(left, right->order_left);
    return right;
}

void store__kv_order_remove(store__kv *kv, store__entry *e)
{
    store__entry **at = &kv->order_root;
    while (*at != NULL && *at != e)
        at = compare_keys(e->key, e->key_len, (*at)->key, (*at)->key_len) < 0 ? &(*at)->order_left
                                                                              : &(*at)->order_right;
    if (*at == NULL) return; /* not indexed: nothing to undo */
    *at = join(e->order_left, e->order_right);
    e->order_left = e->order_right = NULL;
}

static bool has_prefix(const store__entry *e, const void *prefix, size_t prefix_len)
{
    return e->key_len >= prefix_len && (prefix_len == 0 || memcmp(e->key, prefix, prefix_len) == 0);
}

/* In-order walk of the subtree, skipping the parts that sort wholly before
 * or after the keys that start with prefix (those form one run in byte
 * order). False: the visitor asked to stop. */
static bool visit_range(const store__entry *at, const char *prefix, size_t prefix_len,
                        store__visit_fn fn, void *user)
{
    while (at != NULL) {
        if (has_prefix(at, prefix, prefix_len)) {
            if (!visit_range(at->order_left, prefix, prefix_len, fn, user) || !fn(user, at))
                return false;
            at = at->order_right;
        } else if (compare_keys(at->key, at->key_len, prefix, prefix_len) < 0) {
            at = at->order_right; /* before the run */
        } else {
            at = at->order_left; /* after the run */
        }
    }
    return true;
}

void store__kv_visit_prefix(const store__kv *kv, const void *prefix, size_t prefix_len,
                            store__visit_fn fn, void *user)
{
    (void)visit_range(kv->order_root, prefix, prefix_len, fn, user);
}

static bool count_one(void *user, const store__entry *e)
{
    (void)e;
    (*(size_t *)user)++;
    return true;
}

size_t store__kv_count_prefix(const store__kv *kv, const void *prefix, size_t prefix_len)
{
    if (prefix_len == 0) return kv->count;
    size_t n = 0;
    store__kv_visit_prefix(kv, prefix, prefix_len, count_one, &n);
    return n;
}

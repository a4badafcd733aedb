/*
 * A look at the open round from outside the rendezvous handle, for the
 * agent's "waiting for nodes" line: how many joined, and which members of the
 * last generation are not back (or, while the newest generation still runs,
 * that it does: its members are busy, not missing). Read-only and non-waiting, over the job
 * store, so it can run on another thread while the handle's own call blocks;
 * the key layout stays this module's business (keys.c).
 */
#include "rdzv/rdzv.h"

#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define LOOK_MAX_SLOTS 64 /* join records read per look */

/* "rdzv/<run_id>/" + a key of keys.c. */
static void full_key(char *out, size_t cap, const char *run_id, const char *key)
{
    snprintf(out, cap, "rdzv/%s/%s", run_id, key);
}

static bool get_text(elastic_store *store, const char *key, char *out, size_t size, size_t *len_out)
{
    void *value = NULL;
    size_t len = 0;
    if (elastic_store_try_get(store, key, &value, &len) != 0) return false;
    bool fits = len < size;
    if (fits) {
        memcpy(out, value, len);
        out[len] = '\0';
        if (len_out != NULL) *len_out = len;
    }
    elastic_free(value);
    return fits;
}

/* The number a value starts with ("<round> <sealed> ..." or a counter), or -1. */
static int64_t leading_int(const char *text)
{
    int64_t v;
    if (elastic__parse_i64_n(NULL, text, strcspn(text, " "), 0, 999999999, &v) != 0) return -1;
    return v;
}

/* The decoded info of generation `round`; false when absent or undecodable. */
static bool read_info(elastic_store *store, const char *run_id, uint64_t round, rdzv__info *info,
                      rdzv__record **members)
{
    char rel[96], key[400];
    void *value = NULL;
    size_t len = 0;
    *members = NULL;
    rdzv__key_round(rel, sizeof rel, round, "info");
    full_key(key, sizeof key, run_id, rel);
    if (elastic_store_try_get(store, key, &value, &len) != 0) return false;
    int rc = rdzv__info_decode(value, len, info, members);
    elastic_free(value);
    if (rc != 0) *members = NULL;
    return rc == 0;
}

/* True when key exists (whatever its size). */
static bool exists(elastic_store *store, const char *key)
{
    void *value = NULL;
    size_t len = 0;
    if (elastic_store_try_get(store, key, &value, &len) != 0) return false;
    elastic_free(value);
    return true;
}

/* The live join records of `round` (at most LOOK_MAX_SLOTS); *n set. */
static rdzv__record *joined_records(elastic_store *store, const char *run_id, uint64_t round,
                                    int joined, int *n)
{
    int slots = joined < LOOK_MAX_SLOTS ? joined : LOOK_MAX_SLOTS;
    rdzv__record *records = calloc((size_t)slots + 1, sizeof *records);
    *n = 0;
    for (int slot = 1; records != NULL && slot <= slots; slot++) {
        char rel[96], key[400], rec[RDZV__MAX_RECORD];
        size_t rec_len = 0;
        rdzv__key_slot(rel, sizeof rel, round, slot, "rec");
        full_key(key, sizeof key, run_id, rel);
        if (get_text(store, key, rec, sizeof rec, &rec_len) &&
            rdzv__record_decode(rec, rec_len, &records[*n]) == 0)
            (*n)++;
    }
    return records;
}

int rdzv__look_open_round(elastic_store *store, const char *run_id, const char *self,
                          uint64_t last_generation, rdzv__look *out)
{
    char rel[96], key[400], text[256];
    memset(out, 0, sizeof *out);
    out->joined = -1;
    uint64_t round = 1;
    full_key(key, sizeof key, run_id, "round");
    if (get_text(store, key, text, sizeof text, NULL) && leading_int(text) > 0)
        round = (uint64_t)leading_int(text);
    rdzv__key_round(rel, sizeof rel, round, "count");
    full_key(key, sizeof key, run_id, rel);
    out->joined = get_text(store, key, text, sizeof text, NULL) ? (int)leading_int(text) : 0;
    if (out->joined < 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: round %" PRIu64 "'s count", round);
    /* The newest generation, when it still runs, is the job: its members
     * are busy, not missing, and we wait as a spare. When it ended, its
     * members are the ones to come back (whatever generation we last saw). */
    uint64_t compare = last_generation;
    rdzv__info info;
    rdzv__record *members = NULL;
    if (round > 1 && read_info(store, run_id, round - 1, &info, &members) && info.formed) {
        rdzv__key_round(rel, sizeof rel, round - 1, "end");
        full_key(key, sizeof key, run_id, rel);
        if (!exists(store, key)) { /* no end record: it runs */
            out->running_generation = round - 1;
            out->running_nodes = info.group_world_size;
            free(members);
            return 0;
        }
        compare = round - 1;
    }
    if (compare != round - 1 || members == NULL) {
        free(members);
        members = NULL;
        if (compare == 0 || !read_info(store, run_id, compare, &info, &members))
            return 0; /* no picture of the last members: the count alone */
    }
    /* Who of that generation is not back: its members minus the live join records. */
    int njoined = 0;
    rdzv__record *joined = joined_records(store, run_id, round, out->joined, &njoined);
    for (int i = 0; i < info.group_world_size; i++) {
        bool back = strcmp(members[i].node_id, self) == 0;
        for (int j = 0; j < njoined && !back; j++)
            back = strcmp(members[i].node_id, joined[j].node_id) == 0;
        if (back) continue;
        size_t used = strlen(out->missing), need = strlen(members[i].node_id) + (used ? 2 : 0);
        if (used + need < sizeof out->missing)
            snprintf(out->missing + used, sizeof out->missing - used, "%s%s", used ? ", " : "",
                     members[i].node_id);
        out->missing_count++;
    }
    free(joined);
    free(members);
    return 0;
}

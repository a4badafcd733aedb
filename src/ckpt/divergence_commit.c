/*
 * The divergence check's part in the store commit (divergence.h): each rank
 * publishes its replicated blobs' digests beside its shard's digest; the rank
 * that completes the count judges them before it writes the record; on a
 * divergence it writes the evidence to the store and, by default, abandons
 * the step (ELASTIC_EDIVERGED), so the step is never committed anywhere. Every
 * rank then reads the evidence, tells its agent (CHANNEL__MSG_EVENT,
 * replica_divergence) and refuses any later step of its generation in every
 * handle of the process: what was trained after the fault came from a
 * poisoned all-reduce even where the replicas agree again.
 *
 * Keys, beside commit_store.c's:
 *   ckpt/<step>/g<generation>/replicas/<rank>   a rank's record (divergence.c)
 *   ckpt/<step>/g<generation>/diverged          the evidence ("KEY=value" lines)
 */
#include "ckpt/divergence.h"
#include "ckpt/ckpt.h"

#include "channel/channel.h"
#include "common/parse_int.h"
#include "store/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define EVIDENCE_MAX CHANNEL__MSG_MAX_PAYLOAD

ckpt_divergence_mode ckpt__divergence_mode(void)
{
    const char *mode = getenv(CHANNEL__ENV_ON_DIVERGENCE);
    if (mode == NULL || *mode == '\0' || strcmp(mode, "stop") == 0) return CKPT_DIVERGENCE_STOP;
    if (strcmp(mode, "warn") == 0) return CKPT_DIVERGENCE_WARN;
    if (strcmp(mode, "off") == 0) return CKPT_DIVERGENCE_OFF;
    static int said;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) == 0)
        ELASTIC_LOG_W("ckpt", "%s=\"%.32s\": not stop, warn or off; stopping on a divergence",
                      CHANNEL__ENV_ON_DIVERGENCE, mode);
    return CKPT_DIVERGENCE_STOP;
}

static uint32_t env_rank(const char *name)
{
    uint64_t v;
    const char *text = getenv(name);
    return text != NULL && elastic__parse_u64(NULL, text, 0, UINT32_MAX - 1, &v) == 0
               ? (uint32_t)v
               : CKPT_UNKNOWN_RANK;
}

/* Whether this handle's commits compare replicas: store mode with several
 * ranks, each keeping its own copy (with shared storage only rank 0 writes
 * them), and the check not turned off. */
bool ckpt__replicas_wanted(const elastic_ckpt *c)
{
    return c->opts.store != NULL && c->opts.world > 1 && !c->opts.shared_storage &&
           ckpt__divergence_mode() != CKPT_DIVERGENCE_OFF;
}

int ckpt__replicas_of_shard(const elastic_ckpt *c, const ckpt_manifest *m,
                            const uint64_t *raw_hashes, ckpt_replica_record *out)
{
    memset(out, 0, sizeof *out);
    out->rank = c->opts.rank;
    out->group_rank = env_rank("GROUP_RANK");
    out->local_rank = env_rank("LOCAL_RANK");
    out->chunk_size = m->chunk_size;
    if (gethostname(out->host, sizeof out->host - 1) != 0) out->host[0] = '\0';
    out->host[sizeof out->host - 1] = '\0';
    size_t count = 0;
    for (size_t i = 0; i < m->blob_count; i++)
        count += (m->blobs[i].flags & ELASTIC_CKPT_REPLICATED) != 0;
    if (count > CKPT_REPLICAS_MAX_BLOBS || raw_hashes == NULL) return 0; /* not compared */
    out->blobs = calloc(count ? count : 1, sizeof *out->blobs);
    if (out->blobs == NULL) return elastic__fail(ELASTIC_ENOMEM, "replica digests");
    for (size_t i = 0; i < m->blob_count; i++) {
        const ckpt_blob *b = &m->blobs[i];
        if (!(b->flags & ELASTIC_CKPT_REPLICATED)) continue;
        /* The blob's digest: its length, then its chunks' raw-byte checksums
         * (the ones the format computed anyway; 8 bytes per chunk here). */
        uint64_t h = ckpt__hash(&b->raw_len, sizeof b->raw_len);
        for (size_t k = 0; k < b->chunk_count; k++) {
            uint64_t pair[2] = { h, raw_hashes[b->first_chunk + k] };
            h = ckpt__hash(pair, sizeof pair);
        }
        out->blobs[out->count++] =
            (ckpt_replica_blob){ .name_hash = ckpt__hash(b->name, strlen(b->name)),
                                 .raw_len = b->raw_len,
                                 .digest = h,
                                 .name = b->name };
    }
    out->compared = true;
    return 0;
}

static void step_key(char *out, size_t cap, uint64_t step, uint64_t generation, const char *what)
{
    snprintf(out, cap, "ckpt/%" PRIu64 "/g%" PRIu64 "/%s", step, generation, what);
}

void ckpt__replicas_key(uint64_t step, uint64_t generation, uint32_t rank, char *out, size_t cap)
{
    char what[40];
    snprintf(what, sizeof what, "replicas/%" PRIu32, rank);
    step_key(out, cap, step, generation, what);
}

/* ---- a generation that diverged: none of its later steps commits ------------------ */

static pthread_mutex_t poison_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool set;
    uint64_t incarnation, generation, step;
} poison;

static void poison_generation(const elastic_ckpt *c, uint64_t step)
{
    pthread_mutex_lock(&poison_lock);
    if (!poison.set || poison.incarnation != c->opts.incarnation ||
        poison.generation != c->opts.generation || step < poison.step)
        poison.step = step;
    poison.set = true;
    poison.incarnation = c->opts.incarnation;
    poison.generation = c->opts.generation;
    pthread_mutex_unlock(&poison_lock);
}

int ckpt__replicas_refuse(const elastic_ckpt *c, uint64_t step)
{
    pthread_mutex_lock(&poison_lock);
    bool refused = poison.set && poison.incarnation == c->opts.incarnation &&
                   poison.generation == c->opts.generation && step >= poison.step;
    uint64_t at = poison.step;
    pthread_mutex_unlock(&poison_lock);
    if (!refused) return 0;
    return elastic__fail(ELASTIC_EDIVERGED,
                         "step %" PRIu64 " not committed: the replicas of generation %" PRIu64
                         " diverged at step %" PRIu64
                         " (what it trained since came through a faulty replica)",
                         step, c->opts.generation, at);
}

/* ---- the committing rank's judgement ------------------------------------------------ */

static const char *tier_of(const elastic_ckpt *c)
{
    return c->mem.root != NULL ? "memory" : "disk";
}

static void send_to_agent(const char *evidence)
{
    int rc = channel__sink_send(CHANNEL__MSG_EVENT, evidence);
    if (rc != 0 && rc != ELASTIC_ENOTFOUND)
        ELASTIC_LOG_W("ckpt", "telling the agent of a divergence: %s", elastic_last_error());
}

/* The DETAIL line of an evidence text, into out. */
static void detail_of(const char *evidence, size_t len, char *out, size_t cap)
{
    snprintf(out, cap, "replicated blobs differ between ranks");
    const char *at = memmem(evidence, len, "\nDETAIL=", 8);
    if (at == NULL) return;
    at += 8;
    const char *end = memchr(at, '\n', len - (size_t)(at - evidence));
    size_t n = end != NULL ? (size_t)(end - at) : len - (size_t)(at - evidence);
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
}

int ckpt__replicas_judge(elastic_ckpt *c, uint64_t step, void *const *values, const size_t *lens,
                         const ckpt_replica_record *own, char *why, size_t why_cap)
{
    const elastic_ckpt_opts *o = &c->opts;
    ckpt_divergence_mode mode = ckpt__divergence_mode();
    if (mode == CKPT_DIVERGENCE_OFF) return 0;
    ckpt_replica_record *records = calloc(o->world, sizeof *records);
    if (records == NULL) return elastic__fail(ELASTIC_ENOMEM, "divergence check");
    for (uint32_t i = 0; i < o->world; i++) {
        /* A record that does not decode is not compared (said once per step). */
        if (ckpt__replicas_decode(values[i], lens[i], &records[i]) != 0 || records[i].rank != i) {
            ELASTIC_LOG_W("ckpt", "step %" PRIu64 ": rank %" PRIu32 "'s replica digests: %s", step,
                          i, records[i].rank != i ? "another rank's" : elastic_last_error());
            ckpt__replicas_free(&records[i]);
            records[i].compared = false;
        }
    }
    ckpt_divergence d;
    int rc = ckpt__divergence_judge(records, o->world, &d);
    if (rc == 0 && d.diverged) {
        const char *name = NULL;
        if (!d.list_differs && own != NULL && own->compared && d.first_blob < own->count)
            name = own->blobs[d.first_blob].name;
        elastic__text evidence;
        elastic__text_init(&evidence, EVIDENCE_MAX);
        ckpt__divergence_evidence(records, o->world, &d, step, o->generation, tier_of(c), mode,
                                  mode == CKPT_DIVERGENCE_WARN, name, &evidence);
        char key[96];
        step_key(key, sizeof key, step, o->generation, "diverged");
        if (evidence.data != NULL &&
            elastic_store_set(o->store, key, evidence.data, evidence.len) != 0)
            ELASTIC_LOG_W("ckpt", "step %" PRIu64 ": the divergence's evidence: %s", step,
                          elastic_last_error());
        detail_of(evidence.data ? evidence.data : "", evidence.len, why, why_cap);
        if (mode == CKPT_DIVERGENCE_WARN) {
            /* Only this rank knows: its agent counts it; the step commits.
             * Logged once per generation (such replicas differ at every save). */
            static uint64_t warned_generation = UINT64_MAX;
            if (__atomic_exchange_n(&warned_generation, o->generation, __ATOMIC_RELAXED) !=
                o->generation)
                ELASTIC_LOG_W("ckpt", "%s (--on-divergence=warn: committed)", why);
            if (evidence.data != NULL) send_to_agent(evidence.data);
        } else {
            rc = ELASTIC_EDIVERGED;
        }
        elastic__text_free(&evidence);
    }
    ckpt__divergence_free(&d);
    for (uint32_t i = 0; i < o->world; i++) ckpt__replicas_free(&records[i]);
    free(records);
    return rc;
}

/* ---- every rank: the step was abandoned for a divergence ------------------------------- */

int ckpt__replicas_diverged(elastic_ckpt *c, uint64_t step, const char *reason)
{
    const elastic_ckpt_opts *o = &c->opts;
    poison_generation(c, step);
    char key[96], detail[400];
    step_key(key, sizeof key, step, o->generation, "diverged");
    void *evidence = NULL;
    size_t len = 0;
    snprintf(detail, sizeof detail, "%s", reason);
    if (elastic_store_try_get(o->store, key, &evidence, &len) == 0 && len <= EVIDENCE_MAX) {
        char *text = malloc(len + 1);
        if (text != NULL) {
            memcpy(text, evidence, len);
            text[len] = '\0';
            if (strlen(text) == len) send_to_agent(text); /* no NUL inside: sendable as is */
            detail_of(text, len, detail, sizeof detail);
            free(text);
        }
    }
    elastic_free(evidence);
    return elastic__fail(ELASTIC_EDIVERGED, "%s; step %" PRIu64 " is not committed", detail, step);
}

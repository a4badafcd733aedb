/*
 * Silent data corruption caught at commit (issue 36; docs/CHECKPOINT.md,
 * "Divergence check"). Blobs saved with ELASTIC_CKPT_REPLICATED are by
 * contract the same bytes on every rank. In store mode (the memory tier and
 * store-mode disk) every rank writes its own copy, and the shard writer
 * already checksums every chunk (XXH3-64), so each rank's digest of each
 * replicated blob costs one more hash over its chunk checksums (and, for a
 * chunk stored compressed, one XXH3 pass over its raw bytes). The digests
 * travel with the store commit (commit_store.c); the rank that completes the
 * count compares them before it writes the step's record.
 *
 * divergence.c is pure (the record's codec, the judgement, the evidence's
 * text); divergence_commit.c does the store, the process-wide refusal of a
 * diverged generation's later steps and the report to the agent.
 */
#ifndef ELASTIC_CKPT_DIVERGENCE_H
#define ELASTIC_CKPT_DIVERGENCE_H

#include "common/bytes.h"
#include "common/text.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CKPT_REPLICAS_MAGIC     "ELRPDG01"
#define CKPT_REPLICAS_MAX_BLOBS (1u << 16) /* more replicated blobs: the rank is not compared */
#define CKPT_REPLICAS_MAX_HOST  64u
#define CKPT_UNKNOWN_RANK       UINT32_MAX

/* One replicated blob of one rank's shard. */
typedef struct ckpt_replica_blob {
    uint64_t name_hash; /* XXH3-64 of the name */
    uint64_t raw_len;
    uint64_t digest; /* XXH3-64 over raw_len and its chunks' raw-byte checksums */
    const char
        *name; /* this rank's own record only (points into its manifest); NULL in decoded ones */
} ckpt_replica_blob;

/* What one rank publishes for a step (the store key ckpt/<step>/g<gen>/replicas/<rank>). */
typedef struct ckpt_replica_record {
    bool
        compared; /* false: this rank takes no part (an adopted shard, the check off, too many blobs) */
    uint32_t rank, group_rank,
        local_rank;      /* node (group rank) and local rank: the evidence's "where" */
    uint32_t chunk_size; /* digests compare only between equal chunk sizes */
    char host[CKPT_REPLICAS_MAX_HOST + 1];
    size_t count;
    ckpt_replica_blob *blobs;
} ckpt_replica_record;

/* The response the job chose (ELASTIC_ON_DIVERGENCE, set by elasticrun --on-divergence). */
typedef enum ckpt_divergence_mode {
    CKPT_DIVERGENCE_STOP =
        0, /* default: the step is abandoned, the generation's later steps refused */
    CKPT_DIVERGENCE_WARN = 1, /* the step commits; the divergence is only reported */
    CKPT_DIVERGENCE_OFF = 2,  /* no digests published, nothing compared */
} ckpt_divergence_mode;

/* What the committing rank found. */
typedef struct ckpt_divergence {
    bool diverged;
    bool list_differs;        /* the ranks do not hold the same replicated blobs (names, order) */
    size_t blobs_diverged;    /* blobs whose digests disagree */
    size_t first_blob;        /* index of the first in the reference record (list_differs: none) */
    uint32_t compared;        /* ranks compared */
    bool majority;            /* every diverged blob has a value held by more than half of them */
    uint32_t majority_count;  /* ranks agreeing with the majority on every diverged blob */
    uint64_t majority_digest; /* the first diverged blob's majority value (or list hash) */
    uint32_t *minority;       /* record indices that differ from the majority (no majority: all) */
    size_t minority_count;
    uint64_t *minority_digest; /* each one's value of the first diverged blob (or list hash) */
} ckpt_divergence;

/* Encodes / decodes a record (bounded: CKPT_REPLICAS_MAX_BLOBS, the host's length). */
void ckpt__replicas_encode(const ckpt_replica_record *r, bytes__buf *out);
int ckpt__replicas_decode(const void *data, size_t len, ckpt_replica_record *r);
void ckpt__replicas_free(ckpt_replica_record *r);

/* Compares the records of one step (pure: the same answer from the same
 * records). Records with compared == false take no part; nor does anything
 * when the chunk sizes differ (a warning is logged: digests would differ
 * with no fault). ckpt__divergence_free the result. */
int ckpt__divergence_judge(const ckpt_replica_record *records, size_t n, ckpt_divergence *out);
void ckpt__divergence_free(ckpt_divergence *d);

/* The evidence as "KEY=value" lines (the agent's replica_divergence event,
 * CHANNEL__MSG_EVENT): NAME, GENERATION, STEP, TIER, MODE, COMMITTED, BLOB,
 * BLOBS, COMPARED, MAJORITY (count, 0: none), MAJORITY_RANKS, MAJORITY_DIGEST,
 * MINORITY_RANKS, MINORITY_NODES (group ranks), MINORITY_LOCAL_RANKS,
 * MINORITY_HOSTS, MINORITY_DIGESTS, DETAIL (one line a person reads). Lists
 * name at most CKPT_EVIDENCE_LIST ranks, then "+N". `blob_name` may be NULL. */
#define CKPT_EVIDENCE_LIST 16u
void ckpt__divergence_evidence(const ckpt_replica_record *records, size_t n,
                               const ckpt_divergence *d, uint64_t step, uint64_t generation,
                               const char *tier, ckpt_divergence_mode mode, bool committed,
                               const char *blob_name, elastic__text *out);

#endif /* ELASTIC_CKPT_DIVERGENCE_H */

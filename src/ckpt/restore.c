/*
 * A worker's restore (ckpt.h, "restoring"): which tier and step it reads,
 * and the report the agent turns into the checkpoint_restored event and the
 * console's "resumed at step S from ..." line.
 */
#include "ckpt/ckpt.h"

#include "channel/channel.h"
#include "common/clock.h"
#include "common/parse_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

_Static_assert(CHANNEL__RESTORE_LOCAL == ELASTIC_CKPT_SOURCE_LOCAL &&
                   CHANNEL__RESTORE_PEER == ELASTIC_CKPT_SOURCE_PEER &&
                   CHANNEL__RESTORE_DISK == ELASTIC_CKPT_SOURCE_DISK,
               "the heartbeat slot carries the public source codes");

int ckpt__open_memory(const elastic_ckpt_opts *opts, elastic_ckpt **out)
{
    *out = NULL;
    const char *dir = getenv(CHANNEL__ENV_MEMORY_CKPT_DIR);
    if (dir == NULL || *dir == '\0')
        return elastic__fail(ELASTIC_ENOTFOUND,
                             "no memory checkpoint tier (" CHANNEL__ENV_MEMORY_CKPT_DIR
                             " is not set: run under elasticrun --memory-ckpt)");
    elastic_ckpt *c;
    int rc = elastic_ckpt_open(dir, opts, &c);
    if (rc) return rc;
    if (c->mem.root == NULL) {
        elastic_ckpt_close(c);
        return elastic__fail(ELASTIC_EINVAL, "%s is not in a memory tier", dir);
    }
    *out = c;
    return 0;
}

static int latest_or_none(elastic_ckpt *c, bool *found, uint64_t *step)
{
    *found = false;
    if (c == NULL) return 0;
    int rc = elastic_ckpt_latest(c, step);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc == 0) *found = true;
    return rc;
}

/* The agent's plan, when it made one. */
static int planned(elastic_ckpt *memory, elastic_ckpt *disk, ckpt_restore *r, bool *have)
{
    const char *step_text = getenv(CHANNEL__ENV_RESTORE_STEP);
    const char *source = getenv(CHANNEL__ENV_RESTORE_SOURCE);
    const char *node = getenv(CHANNEL__ENV_RESTORE_NODE);
    *have = false;
    if (step_text == NULL || source == NULL) return 0;
    if (elastic__parse_u64(CHANNEL__ENV_RESTORE_STEP, step_text, 0, UINT64_MAX - 1, &r->step) != 0)
        return ELASTIC_EINVAL;
    if (strcmp(source, "local") == 0)
        r->source = CHANNEL__RESTORE_LOCAL;
    else if (strcmp(source, "peer") == 0)
        r->source = CHANNEL__RESTORE_PEER;
    else if (strcmp(source, "disk") == 0)
        r->source = CHANNEL__RESTORE_DISK;
    else
        return elastic__fail(ELASTIC_EINVAL,
                             CHANNEL__ENV_RESTORE_SOURCE " \"%s\": local, peer or disk", source);
    r->from = r->source == CHANNEL__RESTORE_DISK ? disk : memory;
    if (r->from == NULL)
        return elastic__fail(ELASTIC_EINVAL,
                             "the job restores step %" PRIu64 " from %s: no such handle", r->step,
                             source);
    snprintf(r->node, sizeof r->node, "%s", node ? node : "");
    *have = true;
    return 0;
}

/* The agents plan from what they hold, the --memory-disk-dir they write,
 * and the disk tiers their workers announced (announce.c): a disk handle
 * opened after the plan was made (the first generation of an agent, whose
 * workers had not yet announced it) they do not see, so under replication
 * lag the plan can name a step older than the newest step committed on
 * `disk`. Restoring that older step would redo the work and then fail to
 * save the committed step again (EEXIST). The newer disk step wins when
 * every rank reads the same directory: shared storage, with its commit
 * record in the directory or in the job's store (store mode), so every
 * rank takes the same step; and when its generation is not older than the
 * planned step's (an older generation's newer step was abandoned when the
 * planned step's history restored to before it: it must not win).
 * Node-local store-mode storage is left to the plan: one rank's newer
 * shard says nothing of the others' (a replaced node has none), and a rank
 * that went its own way would resume at another step than the job. */
static int newer_on_disk(elastic_ckpt *disk, ckpt_restore *r)
{
    if (disk == NULL || r->from == disk) return 0;
    uint64_t disk_step = 0;
    int rc = elastic_ckpt_latest(disk, &disk_step);
    if (rc == ELASTIC_ENOTFOUND) return 0;
    if (rc) return rc;
    if (disk_step <= r->step) return 0;
    if (disk->opts.store != NULL && !disk->opts.shared_storage) {
        ELASTIC_LOG_W("ckpt",
                      "step %" PRIu64 " is committed on this rank's node-local disk but the "
                      "job's plan names step %" PRIu64
                      ": the plan counted this disk tier and some rank cannot read its shard "
                      "of it, or the agent did not know the tier yet; restoring step %" PRIu64,
                      disk_step, r->step, r->step);
        return 0;
    }
    uint32_t world;
    uint64_t planned_generation, disk_generation;
    /* The planned step unreadable: its reads say why, as without a disk. */
    if (elastic_ckpt_step_info(r->from, r->step, &world, &planned_generation) != 0) return 0;
    if ((rc = elastic_ckpt_step_info(disk, disk_step, &world, &disk_generation)) != 0) return rc;
    if (disk_generation < planned_generation) return 0;
    ELASTIC_LOG_I("ckpt",
                  "the job's plan names step %" PRIu64 " but step %" PRIu64
                  " is committed on disk: restoring step %" PRIu64 " from disk",
                  r->step, disk_step, disk_step);
    r->step = disk_step;
    r->source = CHANNEL__RESTORE_DISK;
    r->from = disk;
    r->node[0] = '\0';
    return 0;
}

int ckpt__restore_begin(elastic_ckpt *memory, elastic_ckpt *disk, ckpt_restore *r)
{
    memset(r, 0, sizeof *r);
    r->start_ns = elastic__now_ns();
    bool have = false;
    int rc = planned(memory, disk, r, &have);
    if (rc) return rc;
    if (have && (rc = newer_on_disk(disk, r)) != 0) return rc;
    if (!have) {
        bool in_memory, on_disk;
        uint64_t mem_step = 0, disk_step = 0;
        if ((rc = latest_or_none(memory, &in_memory, &mem_step)) != 0) return rc;
        if ((rc = latest_or_none(disk, &on_disk, &disk_step)) != 0) return rc;
        if (!in_memory && !on_disk)
            return elastic__fail(ELASTIC_ENOTFOUND, "no checkpoint in memory or on disk");
        /* Without a plan the memory step must hold this rank's own shard:
         * after a reassignment of ranks the node's tier may hold another's. */
        if (in_memory) {
            char **names = NULL;
            size_t n = 0;
            in_memory = elastic_ckpt_list_blobs(memory, mem_step, (int)memory->opts.rank, &names,
                                                &n) == 0 &&
                        n > 0;
            elastic_free(names);
        }
        bool use_memory = in_memory && (!on_disk || mem_step >= disk_step);
        r->step = use_memory ? mem_step : disk_step;
        r->source = use_memory ? CHANNEL__RESTORE_LOCAL : CHANNEL__RESTORE_DISK;
        r->from = use_memory ? memory : disk;
    }
    r->start_bytes = __atomic_load_n(&r->from->read_bytes, __ATOMIC_RELAXED);
    return 0;
}

void ckpt__restore_end(const ckpt_restore *r)
{
    if (r->from == NULL) return;
    uint64_t bytes = __atomic_load_n(&r->from->read_bytes, __ATOMIC_RELAXED) - r->start_bytes;
    uint64_t us = (elastic__now_ns() - r->start_ns) / 1000u;
    ckpt__report_restored(r->source, r->step, bytes, us);
}

/* ---- public ----------------------------------------------------------------- */

ELASTIC_EXTERN int elastic_ckpt_open_memory(const elastic_ckpt_opts *opts, elastic_ckpt **ckpt)
{
    elastic__clear_error();
    if (ckpt == NULL) return elastic__fail(ELASTIC_EINVAL, "ckpt open memory: NULL argument");
    return ckpt__open_memory(opts, ckpt);
}

ELASTIC_EXTERN int elastic_ckpt_restore_begin(elastic_ckpt *memory, elastic_ckpt *disk,
                                              uint64_t *step, elastic_ckpt **from, int *source)
{
    elastic__clear_error();
    if (step == NULL || from == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt restore: NULL step or from");
    /* Either tier may be absent (a trainer run without --memory-ckpt, or
     * under torchrun, has no memory tier): with neither there is no step. */
    if (memory == NULL && disk == NULL)
        return elastic__fail(ELASTIC_ENOTFOUND, "ckpt restore: neither a memory tier nor a disk checkpoint");
    ckpt_restore r;
    int rc = ckpt__restore_begin(memory, disk, &r);
    if (rc) return rc;
    r.from->restore = (struct ckpt_restore_state){ .open = true,
                                                   .step = r.step,
                                                   .start_ns = r.start_ns,
                                                   .start_bytes = r.start_bytes,
                                                   .source = r.source };
    *step = r.step;
    *from = r.from;
    if (source) *source = (int)r.source; /* CHANNEL__RESTORE_* = ELASTIC_CKPT_SOURCE_* */
    return 0;
}

ELASTIC_EXTERN void elastic_ckpt_restore_end(elastic_ckpt *from)
{
    if (from == NULL || !from->restore.open) return;
    ckpt_restore r = { .step = from->restore.step,
                       .source = from->restore.source,
                       .from = from,
                       .start_ns = from->restore.start_ns,
                       .start_bytes = from->restore.start_bytes };
    from->restore.open = false;
    ckpt__restore_end(&r);
}

/*
 * The loop's checkpoint side (include/elastic/loop.h): each generation's
 * tiers (this node's memory tier, committed through the job's store, and the
 * shared disk directory), the restore of the job's agreed step through
 * elastic_ckpt_restore_begin (the restore plan the agents made, which the
 * worker put in the environment), and the saves due after a step. Public
 * checkpoint calls only: the loop is a trainer of the library's own API.
 */
#include "common/clock.h"
#include "worker/loop.h"

static void tier_opts(const worker__loop *l, elastic_ckpt_opts *opts)
{
    elastic_ckpt_opts_init(opts, sizeof *opts);
    opts->rank = (uint32_t)l->info.rank;
    opts->world = (uint32_t)l->info.world_size;
    opts->generation = l->info.generation;
}

/* This generation's tiers. No memory tier (not elasticrun --memory-ckpt,
 * plain torchrun, alone) is no error: the disk is then the only one. */
static int open_tiers(worker__loop *l, elastic_store *store)
{
    elastic_ckpt_opts opts;
    int rc = 0;
    if (l->o.dir != NULL) {
        tier_opts(l, &opts);
        opts.keep_last = l->o.keep_last;
        opts.compression = l->o.compression;
        opts.fsync = l->o.fsync;
        rc = elastic_ckpt_open(l->o.dir, &opts, &l->disk);
        if (rc != 0) return rc;
    }
    if (l->o.memory_every == 0 || store == NULL) return 0;
    tier_opts(l, &opts);
    opts.compression = ELASTIC_CKPT_NONE; /* memcpy speed */
    opts.store = store;                   /* each node holds only its own ranks' shards */
    rc = elastic_ckpt_open_memory(&opts, &l->memory);
    if (rc == ELASTIC_ENOTFOUND) {
        if (!l->said_no_memory)
            ELASTIC_LOG_I("loop", "no memory tier (elasticrun --memory-ckpt): disk only");
        l->said_no_memory = true;
        return 0;
    }
    return rc;
}

int worker__loop_close_tiers(worker__loop *l)
{
    int rc = 0;
    if (l->disk != NULL && l->o.disk_async) {
        uint64_t step = 0;
        rc = elastic_ckpt_async_wait(l->disk, -1, &step);
        if (rc != 0)
            rc = elastic__fail(rc, "the disk save of step %llu failed: %s",
                               (unsigned long long)step, elastic_last_error());
    }
    elastic_ckpt_close(l->disk);
    elastic_ckpt_close(l->memory);
    l->disk = l->memory = NULL;
    return rc;
}

/* The job's agreed step from the cheapest tier, or the start. */
static int restore(worker__loop *l)
{
    uint64_t step = 0;
    elastic_ckpt *from = NULL;
    int source = 0;
    int rc = elastic_ckpt_restore_begin(l->memory, l->disk, &step, &from, &source);
    if (rc == ELASTIC_ENOTFOUND || (l->memory == NULL && l->disk == NULL)) {
        elastic__clear_error();
        rc = l->o.load(l->o.user, NULL, 0);
        step = 0;
        source = 0;
    } else if (rc == 0) {
        elastic__clear_error();
        rc = l->o.load(l->o.user, from, step);
        elastic_ckpt_restore_end(from);
    }
    if (rc != 0) {
        if (elastic_last_error()[0] == '\0')
            elastic__fail(rc, "the load callback returned %s for step %llu", elastic_err_name(rc),
                          (unsigned long long)step);
        return rc;
    }
    l->step = step;
    l->result.restored_source = source;
    return 0;
}

int worker__loop_resume(worker__loop *l, bool recovering)
{
    uint64_t started = elastic__now_ns();
    l->info = (elastic_worker_info){ .struct_size = sizeof l->info };
    int rc = elastic_worker_get_info(l->w, &l->info);
    if (rc != 0) return rc;
    int last_save = worker__loop_close_tiers(l); /* keeps a disk save in flight */
    if (last_save != 0) ELASTIC_LOG_W("loop", "%s (the run goes on)", elastic_last_error());
    elastic_store *store = NULL;
    rc = elastic_worker_get_store(l->w, &store);
    if (rc != 0 && rc != ELASTIC_ENOTFOUND) return rc;
    /* Every survivor has finished its last step's commits before anyone
     * looks for the newest step. */
    if (store != NULL && l->info.world_size > 1 &&
        (rc = elastic_worker_barrier(l->w, ELASTIC_TIMEOUT_DEFAULT)) != 0)
        return rc;
    if ((rc = open_tiers(l, store)) != 0 || (rc = restore(l)) != 0) return rc;
    elastic__clear_error();
    rc = l->o.build(l->o.user, l->w, &l->info);
    if (rc != 0) {
        if (elastic_last_error()[0] == '\0')
            elastic__fail(rc, "the build callback returned %s in generation %llu",
                          elastic_err_name(rc), (unsigned long long)l->info.generation);
        return rc;
    }
    if (!recovering) return 0;
    elastic_worker_report_phase(l->w, "restore", elastic__now_ns() - started);
    l->result.recoveries++;
    if (l->high > l->step) l->result.redone += l->high - l->step;
    ELASTIC_LOG_I("loop", "rank %d/%d generation %llu resumes after step %llu", l->info.rank,
                  l->info.world_size, (unsigned long long)l->info.generation,
                  (unsigned long long)l->step);
    return 0;
}

/* A save's outcome that does not end the run: a full memory tier (that step
 * is not in memory; the next save tries again) and replicas that differ (the
 * library refused the step; the agent ends the generation). Said once each. */
static int tolerated(worker__loop *l, int rc, const char *tier)
{
    bool *said = rc == ELASTIC_ENOSPC ? &l->said_full : &l->said_diverged;
    if (rc != ELASTIC_ENOSPC && rc != ELASTIC_EDIVERGED) return rc;
    if (!*said)
        ELASTIC_LOG_W("loop", "%s save of step %llu: %s (training goes on)", tier,
                      (unsigned long long)l->step, elastic_last_error());
    *said = true;
    return 0;
}

static int collect(worker__loop *l, int tier, const elastic_ckpt_blob **blobs, size_t *n)
{
    *blobs = NULL;
    *n = 0;
    elastic__clear_error();
    int rc = l->o.save(l->o.user, l->step, tier, blobs, n);
    if (rc == 0 && (*blobs == NULL) != (*n == 0))
        rc = elastic__fail(ELASTIC_EINVAL, "the save callback gave %zu blobs at %p", *n,
                           (const void *)*blobs);
    if (rc != 0 && elastic_last_error()[0] == '\0')
        elastic__fail(rc, "the save callback returned %s at step %llu", elastic_err_name(rc),
                      (unsigned long long)l->step);
    return rc;
}

static int save_disk(worker__loop *l)
{
    const elastic_ckpt_blob *blobs;
    size_t n;
    if (l->o.disk_async) { /* the previous save's outcome first */
        uint64_t step = 0;
        int rc = tolerated(l, elastic_ckpt_async_wait(l->disk, -1, &step), "disk");
        if (rc != 0)
            return elastic__fail(rc, "the disk save of step %llu failed: %s",
                                 (unsigned long long)step, elastic_last_error());
    }
    int rc = collect(l, ELASTIC_CKPT_SOURCE_DISK, &blobs, &n);
    if (rc != 0) return rc;
    rc = l->o.disk_async ? elastic_ckpt_save_async(l->disk, l->step, blobs, n, -1)
                         : elastic_ckpt_save(l->disk, l->step, blobs, n);
    return tolerated(l, rc, "disk");
}

int worker__loop_save_due(worker__loop *l)
{
    const elastic_ckpt_blob *blobs;
    size_t n;
    int rc = 0;
    if (l->memory != NULL && l->o.memory_every != 0 && l->step % l->o.memory_every == 0) {
        rc = collect(l, ELASTIC_CKPT_SOURCE_LOCAL, &blobs, &n);
        if (rc == 0) rc = tolerated(l, elastic_ckpt_save(l->memory, l->step, blobs, n), "memory");
    }
    if (rc == 0 && l->disk != NULL && l->o.disk_every != 0 && l->step % l->o.disk_every == 0)
        rc = save_disk(l);
    return rc;
}

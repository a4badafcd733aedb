/*
 * The disk thread of the node's service (service_state.h): every Nth
 * committed own memory step is written to the disk tier from the memory
 * copy, by the disk tier's atomic path (ckpt__adopt_shard), so training
 * never waits for it.
 */
#include "replica/service_state.h"

#include "common/dir.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Every shard of the step in ROOT/own, written to the disk tier. */
static int write_to_disk(replica_service *s, uint64_t step)
{
    char own[PATH_MAX], step_dir[PATH_MAX], path[PATH_MAX + 300];
    snprintf(own, sizeof own, "%s/" CKPT_MEM_OWN_DIR, s->root);
    ckpt__step_dir(own, step, step_dir, sizeof step_dir);
    ckpt_commit_record r;
    int rc = ckpt__read_commit_record(step_dir, &r);
    if (rc) return rc;
    DIR *d = elastic__opendir(step_dir);
    if (d == NULL) rc = ckpt__fail_errno(errno, "open", step_dir);
    struct dirent *e;
    while (rc == 0 && d != NULL && (e = readdir(d)) != NULL) {
        uint32_t rank;
        uint64_t gen;
        if (!ckpt__parse_shard_name(e->d_name, &rank, &gen) || gen != r.generation ||
            rank >= r.world)
            continue;
        snprintf(path, sizeof path, "%s/%s", step_dir, e->d_name);
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.rank = rank;
        o.world = r.world;
        o.generation = r.generation;
        o.threads = 1;
        elastic_ckpt *disk;
        rc = elastic_ckpt_open(s->disk_dir, &o, &disk);
        if (rc == 0) {
            rc = ckpt__adopt_shard(disk, step, path);
            elastic_ckpt_close(disk);
        }
    }
    if (d) closedir(d);
    ckpt__commit_free(&r);
    return rc;
}

void *replica__disk_main(void *arg)
{
    replica_service *s = arg;
    unsigned seen = 0;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        uint64_t written = s->stats.disk_step;
        pthread_mutex_unlock(&s->lock);
        uint64_t newest = replica__newest_committed(s, NULL);
        bool due = newest > written && newest % s->opts.disk_every == 0;
        int rc = due ? write_to_disk(s, newest) : 0;
        if (due && rc != 0)
            ELASTIC_LOG_W("replica", "step %" PRIu64 " to disk: %s", newest, elastic_last_error());
        pthread_mutex_lock(&s->lock);
        if (due && rc == 0) s->stats.disk_step = newest;
        if (due && rc != 0) s->stats.disk_failures++;
        if (!due || rc != 0) replica__wait_for_work(s, &seen);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

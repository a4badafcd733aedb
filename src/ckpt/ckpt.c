/*
 * The checkpoint handle: options and their bounds, opening a directory
 * (with cleanup of what crashed writers left) and closing.
 */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void opts_defaults(elastic_ckpt_opts *opts)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    memset(opts, 0, sizeof *opts); /* padding too: opts_init copies bytes */
    opts->struct_size = sizeof *opts;
    opts->compression = ELASTIC_CKPT_ZSTD;
    opts->zstd_level = 1;
    opts->threads = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
    opts->chunk_bytes = 4u << 20;
    opts->fsync = ELASTIC_CKPT_FSYNC_FULL;
    opts->verify = ELASTIC_CKPT_VERIFY_FULL;
    opts->world = 1;
    opts->shared_storage = -1;
    opts->commit_timeout_ms = 600000;
    opts->file_mode = 0600;
    opts->max_blob_bytes = 1ull << 40;
}

ELASTIC_EXTERN int elastic_ckpt_opts_init(elastic_ckpt_opts *opts, size_t struct_size)
{
    elastic_ckpt_opts defaults;
    opts_defaults(&defaults);
    return ELASTIC__STRUCT_INIT(opts, struct_size, &defaults, "elastic_ckpt_opts");
}

static int check_opts(elastic_ckpt_opts *o)
{
    if (o->compression != ELASTIC_CKPT_NONE && o->compression != ELASTIC_CKPT_ZSTD)
        return elastic__fail(ELASTIC_EINVAL,
                             "ckpt: compression must be ELASTIC_CKPT_NONE or _ZSTD");
    if (o->zstd_level < -100 || o->zstd_level > 22)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: zstd_level out of range");
    if (o->threads < 0 || o->threads > 256)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: threads out of range");
    if (o->chunk_bytes < CKPT_MIN_CHUNK || o->chunk_bytes > CKPT_MAX_CHUNK)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: chunk_bytes must be %u..%u", CKPT_MIN_CHUNK,
                             CKPT_MAX_CHUNK);
    if (o->fsync != ELASTIC_CKPT_FSYNC_FULL && o->fsync != ELASTIC_CKPT_FSYNC_NONE)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: unknown fsync policy");
    if (o->verify != ELASTIC_CKPT_VERIFY_FULL && o->verify != ELASTIC_CKPT_VERIFY_MANIFEST)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: unknown verify level");
    if ((o->file_mode & ~0666u) != 0 || (o->file_mode & 0600u) != 0600u)
        return elastic__fail(ELASTIC_EINVAL,
                             "ckpt: file_mode must include 0600 and stay within 0666");
    if (o->world == 0 || o->world > CKPT_MAX_WORLD || o->rank >= o->world)
        return elastic__fail(ELASTIC_EINVAL, "ckpt: rank %u / world %u out of range", o->rank,
                             o->world);
    if (o->shared_storage < 0) o->shared_storage = o->store == NULL;
    if (o->world > 1 && o->store == NULL && !o->shared_storage)
        return elastic__fail(ELASTIC_EINVAL,
                             "ckpt: several ranks without a store need shared storage");
    return 0;
}

static void free_handle(elastic_ckpt *c)
{
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(c->spare.in); i++) {
        free(c->spare.in[i]);
        free(c->spare.out[i]);
    }
    free(c->spare.small);
    ckpt__pool_stop(c->pool);
    ckpt__ctx_free(c->ctx);
    ckpt__view_free(c->view);
    ckpt__mem_tier_close(&c->mem);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->read_lock);
    free(c->dir);
    free(c);
}

ELASTIC_EXTERN int elastic_ckpt_open(const char *dir, const elastic_ckpt_opts *opts,
                                     elastic_ckpt **out)
{
    elastic__clear_error();
    if (dir == NULL || *dir == '\0' || out == NULL)
        return elastic__fail(ELASTIC_EINVAL, "ckpt open: NULL argument");
    if (strlen(dir) > 3900)
        return elastic__fail(ELASTIC_EINVAL, "ckpt open: directory path too long");
    elastic_ckpt_opts o;
    opts_defaults(&o);
    int rc = ELASTIC__STRUCT_READ(&o, opts, "elastic_ckpt_opts");
    if (rc == 0) rc = check_opts(&o);
    if (rc) return rc;
    struct stat st;
    /* Every rank opens the shared directory at once: another's mkdir may win. */
    bool created = false;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT) return ckpt__fail_errno(errno, "stat", dir);
        created = mkdir(dir, ckpt__dir_mode(&o)) == 0;
        if ((!created && errno != EEXIST) || stat(dir, &st) != 0)
            return ckpt__fail_errno(errno, "create", dir);
    }
    if (!S_ISDIR(st.st_mode)) return elastic__fail(ELASTIC_EINVAL, "%s is not a directory", dir);
    /* A new directory's entry is in its parent: without this fsync a power
     * cut can take the directory, and every step committed in it, away. */
    if (created && o.fsync == ELASTIC_CKPT_FSYNC_FULL && (rc = ckpt__fsync_parent(dir)) != 0)
        return rc;
    elastic_ckpt *c = calloc(1, sizeof *c);
    if (c == NULL) return elastic__fail(ELASTIC_ENOMEM, "ckpt handle");
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->read_lock, NULL);
    c->opts = o;
    c->mem.lock_fd = -1;
    c->dir = elastic__strdup(dir);
    c->ctx = ckpt__ctx_new();
    rc = c->dir && c->ctx ? 0 : elastic__fail(ELASTIC_ENOMEM, "ckpt handle");
    if (rc == 0) rc = ckpt__mem_attach(c);
    if (rc == 0 && c->opts.threads > 1) rc = ckpt__pool_start(c->opts.threads, &c->pool);
    if (rc == 0) rc = ckpt__fence_register(c);
    if (rc) {
        free_handle(c);
        return rc;
    }
    ckpt__cleanup_on_open(c);
    ckpt__announce_disk(c);
    *out = c;
    return 0;
}

ELASTIC_EXTERN void elastic_ckpt_close(elastic_ckpt *c)
{
    if (c == NULL) return;
    ckpt__async_stop(c);
    free_handle(c);
}

/*
 * Opening a committed step for reading: its commit record, every shard's
 * header, trailer and manifest are read with bounded sizes and checked
 * against each other; at the full verify level every chunk's checksum too.
 * Any mismatch makes the step invalid with a reason in elastic_last_error().
 */
#include "common/dir.h"
#include "ckpt/ckpt.h"
#include "ckpt/view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_STEP_DIRS     (1u << 20)

void ckpt__view_free(ckpt_step_view *v)
{
    if (v == NULL) return;
    for (uint32_t i = 0; v->shards && i < v->record.world; i++) {
        if (v->shards[i].fd >= 0) close(v->shards[i].fd);
        ckpt__manifest_free(&v->shards[i].m);
    }
    free(v->shards);
    ckpt__commit_free(&v->record);
    free(v);
}

static int load_commit_record(elastic_ckpt *c, ckpt_step_view *v)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, v->step_dir);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT && c->opts.store != NULL &&
        ckpt__store_recover_commit(c, v->step) != 0)
        return ELASTIC_ENOTFOUND;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return elastic__fail(ELASTIC_ENOTFOUND, "step %" PRIu64 " is not committed", v->step);
        return ckpt__fail_errno(errno, "stat", path);
    }
    v->commit_ino = st.st_ino;
    v->commit_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
    /* The read may fail: another rank's retention may remove the step. */
    int rc = ckpt__read_commit_record(v->step_dir, &v->record);
    if (rc == 0 && v->record.step != v->step) {
        ckpt__commit_free(&v->record);
        return elastic__fail(ELASTIC_ECORRUPT, "%s: records step %" PRIu64, path, v->record.step);
    }
    return rc;
}

/* Header, trailer and manifest of one shard, each checked against the
 * commit record and against each other. */
static int load_shard(ckpt_step_view *v, uint32_t rank, ckpt_shard_view *s, const char *path)
{
    const ckpt_shard_digest *want = &v->record.shards[rank];
    struct stat st;
    if (fstat(s->fd, &st) != 0) return ckpt__fail_errno(errno, "stat", path);
    if ((uint64_t)st.st_size != want->file_size)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: %lld bytes, the commit record says %" PRIu64,
                             path, (long long)st.st_size, want->file_size);
    if (want->file_size < CKPT_HEADER_BYTES + CKPT_TRAILER_BYTES)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: too short", path);
    uint8_t header[CKPT_HEADER_BYTES], trailer[CKPT_TRAILER_BYTES];
    ckpt_header h;
    ckpt_trailer t;
    int rc = ckpt__pread_all(s->fd, header, sizeof header, 0, path);
    if (rc == 0) rc = ckpt__header_decode(header, sizeof header, &h);
    if (rc == 0)
        rc =
            ckpt__pread_all(s->fd, trailer, sizeof trailer, want->file_size - sizeof trailer, path);
    if (rc == 0) rc = ckpt__trailer_decode(trailer, sizeof trailer, &t);
    if (rc) return ckpt__fail_in(rc, path);
    if (h.step != v->step || h.generation != v->record.generation || h.rank != rank ||
        h.world != v->record.world || t.step != v->step)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: header does not match the commit record", path);
    if (t.manifest_hash != want->manifest_hash)
        return elastic__fail(ELASTIC_ECORRUPT,
                             "%s: manifest checksum differs from the commit record", path);
    if (t.manifest_offset < CKPT_HEADER_BYTES || t.manifest_offset > want->file_size ||
        want->file_size - t.manifest_offset != t.manifest_len + CKPT_TRAILER_BYTES)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: manifest position out of range", path);
    uint8_t *raw = malloc(t.manifest_len);
    if (raw == NULL)
        return elastic__fail(ELASTIC_ENOMEM, "manifest of %" PRIu64 " bytes", t.manifest_len);
    rc = ckpt__pread_all(s->fd, raw, t.manifest_len, t.manifest_offset, path);
    if (rc == 0 && ckpt__hash(raw, t.manifest_len) != t.manifest_hash)
        rc = elastic__fail(ELASTIC_ECORRUPT, "manifest checksum mismatch");
    if (rc == 0)
        rc =
            ckpt__manifest_decode(raw, t.manifest_len, CKPT_HEADER_BYTES, t.manifest_offset, &s->m);
    free(raw);
    if (rc) return ckpt__fail_in(rc, path);
    if (s->m.step != h.step || s->m.generation != h.generation || s->m.rank != h.rank ||
        s->m.world != h.world || s->m.chunk_size != h.chunk_size)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: manifest does not match the header", path);
    return 0;
}

static int load_shards(elastic_ckpt *c, ckpt_step_view *v)
{
    v->shards = calloc(v->record.world, sizeof *v->shards);
    if (v->shards == NULL) return elastic__fail(ELASTIC_ENOMEM, "step view");
    for (uint32_t r = 0; r < v->record.world; r++) v->shards[r].fd = -1;
    uint32_t present = 0;
    for (uint32_t r = 0; r < v->record.world; r++) {
        ckpt_shard_view *s = &v->shards[r];
        char name[96];
        ckpt__shard_name(r, v->record.generation, name, sizeof name);
        snprintf(s->path, sizeof s->path, "%s/%s", v->step_dir, name);
        s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
        if (s->fd < 0 && errno == ENOENT && !c->opts.shared_storage)
            continue; /* on another rank's disk */
        if (s->fd < 0)
            return errno == ENOENT ? elastic__fail(ELASTIC_ECORRUPT, "%s is missing", s->path)
                                   : ckpt__fail_errno(errno, "open", s->path);
        int rc = load_shard(v, r, s, s->path);
        if (rc) return rc;
        present++;
    }
    if (present == 0)
        return elastic__fail(ELASTIC_ENOTFOUND, "no shard of step %" PRIu64 " is here", v->step);
    return 0;
}

int ckpt__view_open(elastic_ckpt *c, uint64_t step, int verify, ckpt_step_view **out)
{
    ckpt_step_view *v = calloc(1, sizeof *v);
    if (v == NULL) return elastic__fail(ELASTIC_ENOMEM, "step view");
    v->step = step;
    ckpt__step_dir(c->dir, step, v->step_dir, sizeof v->step_dir);
    int rc = load_commit_record(c, v);
    if (rc == 0) rc = load_shards(c, v);
    if (rc == 0 && verify == ELASTIC_CKPT_VERIFY_FULL) rc = ckpt__view_verify_data(c, v);
    if (rc) {
        ckpt__view_free(v);
        return rc;
    }
    v->verified_full = verify == ELASTIC_CKPT_VERIFY_FULL;
    *out = v;
    return 0;
}

/* The cached view when it is of this step, verified enough, and its commit
 * record is still the same file. */
static bool cached_view_fits(elastic_ckpt *c, uint64_t step, int verify)
{
    ckpt_step_view *v = c->view;
    if (v == NULL || v->step != step || (verify == ELASTIC_CKPT_VERIFY_FULL && !v->verified_full))
        return false;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" CKPT_COMMIT_NAME, v->step_dir);
    struct stat st;
    return stat(path, &st) == 0 && st.st_ino == v->commit_ino &&
           (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec ==
               v->commit_mtime_ns;
}

int ckpt__view_get(elastic_ckpt *c, uint64_t step, int verify, ckpt_step_view **out)
{
    if (!cached_view_fits(c, step, verify)) {
        ckpt_step_view *v;
        int rc = ckpt__view_open(c, step, verify, &v);
        if (rc) return rc;
        ckpt__view_free(c->view);
        c->view = v;
    }
    *out = c->view;
    return 0;
}

static int compare_steps(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ckpt__scan_steps(const char *dir, uint64_t **steps, size_t *n)
{
    DIR *d = elastic__opendir(dir);
    if (d == NULL) return ckpt__fail_errno(errno, "open directory", dir);
    uint64_t *list = NULL;
    size_t count = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t step;
        if (!ckpt__parse_step_dir(e->d_name, &step)) continue;
        if (count == MAX_STEP_DIRS) {
            rc = elastic__fail(ELASTIC_ELIMIT, "%s: more than %u step directories", dir,
                               MAX_STEP_DIRS);
            break;
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *grown = realloc(list, cap * sizeof *grown);
            if (grown == NULL) {
                rc = elastic__fail(ELASTIC_ENOMEM, "step list");
                break;
            }
            list = grown;
        }
        list[count++] = step;
    }
    closedir(d);
    if (rc) {
        free(list);
        return rc;
    }
    if (count > 1) qsort(list, count, sizeof *list, compare_steps);
    *steps = list;
    *n = count;
    return 0;
}

int ckpt__valid_steps(elastic_ckpt *c, int verify, size_t max, uint64_t **steps, size_t *n)
{
    uint64_t *all;
    size_t count;
    int rc = ckpt__scan_steps(c->dir, &all, &count);
    if (rc) return rc;
    uint64_t *valid = malloc((count ? count : 1) * sizeof *valid);
    if (valid == NULL) {
        free(all);
        return elastic__fail(ELASTIC_ENOMEM, "step list");
    }
    size_t found = 0;
    for (size_t i = count; i-- > 0 && found < max;) {
        ckpt_step_view *v;
        rc = ckpt__view_open(c, all[i], verify, &v);
        if (rc == 0) {
            ckpt__view_free(v);
            valid[found++] = all[i];
        } else if (rc == ELASTIC_ENOTFOUND) {
            ELASTIC_LOG_I("ckpt", "skipping step %" PRIu64 ": %s", all[i], elastic_last_error());
        } else {
            ELASTIC_LOG_W("ckpt", "skipping step %" PRIu64 ": %s (%s)", all[i],
                          elastic_strerror(rc), elastic_last_error());
        }
    }
    free(all);
    *steps = valid;
    *n = found;
    return 0;
}

/* Storage faults: ENOSPC (a real small tmpfs, and injected), EIO, a
 * read-only file system and permission denied all give a clear error, keep
 * the previous checkpoint loadable and leave no temporary files. */
#include "ckpt/ckpt.h"
#include "support/ckpt_content.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

static elastic_ckpt *open_dir_mode(const char *dir, unsigned file_mode)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = 64 << 10;
    o.threads = 2;
    o.file_mode = file_mode;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

static elastic_ckpt *open_dir(const char *dir)
{
    return open_dir_mode(dir, 0600);
}

/* Every file under dir (one level of step directories) that is not part of a
 * committed step: temp files and uncommitted step directories. */
static int debris(const char *dir)
{
    int found = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0)) continue;
        if (strncmp(e->d_name, "step-", 5) != 0) continue;
        char sub[4096], commit[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        snprintf(commit, sizeof commit, "%s/COMMIT", sub);
        if (access(commit, F_OK) != 0) found++;
        DIR *s = opendir(sub);
        struct dirent *f;
        while (s && (f = readdir(s)) != NULL) found += strncmp(f->d_name, ".tmp-", 5) == 0;
        if (s) closedir(s);
    }
    closedir(d);
    return found;
}

static void expect_step_one_intact(const char *dir)
{
    elastic_ckpt *c = open_dir(dir);
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1);
    char why[256];
    if (ckpt_test_check(c, 1, 0, why, sizeof why) != 0) FAIL("%s", why);
    elastic_ckpt_close(c);
}

static int save_big(elastic_ckpt *c, uint64_t step, size_t len)
{
    uint8_t *buf = malloc(len);
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(ckpt_test_mix(i) >> 5); /* incompressible */
    elastic_ckpt_blob blob = { "big", buf, len, 0 };
    int rc = elastic_ckpt_save(c, step, &blob, 1);
    free(buf);
    return rc;
}

TEST(ckpt_injected_write_and_fsync_failures_keep_the_previous_checkpoint)
{
    const char *dir = test_tmpdir();
    elastic_ckpt *c = open_dir(dir);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    struct {
        ckpt_fault_op op;
        int err;
        int expect;
    } faults[] = { { CKPT_FAULT_WRITE, ENOSPC, ELASTIC_ENOSPC },
                   { CKPT_FAULT_WRITE, EIO, ELASTIC_EIO },
                   { CKPT_FAULT_FSYNC, EIO, ELASTIC_EIO },
                   { CKPT_FAULT_WRITE, EDQUOT, ELASTIC_ENOSPC } };
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        /* Fail the 1st, 2nd, ... write or fsync of the commit: every stage. */
        for (int countdown = 1; countdown <= 8; countdown++) {
            ckpt__inject_fault(faults[f].op, countdown, faults[f].err);
            int rc = save_big(c, 2, 3u << 20);
            ckpt__inject_fault(faults[f].op, 0, 0);
            if (rc == 0) { /* fewer operations than the countdown: it committed */
                ASSERT(countdown > 1);
                break;
            }
            if (rc != faults[f].expect)
                FAIL("fault %zu countdown %d: %s (%s)", f, countdown, elastic_err_name(rc),
                     elastic_last_error());
            ASSERT(strlen(elastic_last_error()) > 0);
            ASSERT_EQ(debris(dir), 0);
            uint64_t latest;
            ASSERT_OK(elastic_ckpt_latest(c, &latest));
            ASSERT_EQ(latest, 1);
        }
        /* Remove the step if the last countdown let it through. */
        elastic_ckpt_close(c);
        char step2[4096];
        ckpt__step_dir(dir, 2, step2, sizeof step2);
        ASSERT_OK(ckpt__remove_step_dir(step2));
        expect_step_one_intact(dir);
        c = open_dir(dir);
    }
    elastic_ckpt_close(c);
}

/* A private mount namespace, so the tmpfs vanishes with the test process. */
static void mount_small_tmpfs(const char *path, const char *size)
{
    if (getuid() != 0) SKIP("needs root to mount a tmpfs");
    if (unshare(CLONE_NEWNS) != 0) SKIP("cannot create a mount namespace");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) SKIP("cannot make mounts private");
    ASSERT_OK(mkdir(path, 0755));
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s", size);
    if (mount("tmpfs", path, "tmpfs", 0, opts) != 0) SKIP("cannot mount a tmpfs");
}

TEST(ckpt_full_disk_gives_enospc_and_keeps_the_previous_checkpoint)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/small", test_tmpdir());
    mount_small_tmpfs(dir, "2m");
    elastic_ckpt *c = open_dir(dir);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    ASSERT_ERR(save_big(c, 2, 4u << 20), ELASTIC_ENOSPC);
    ASSERT(strstr(elastic_last_error(), "No space") != NULL);
    ASSERT_EQ(debris(dir), 0);
    elastic_ckpt_close(c);
    expect_step_one_intact(dir);
    c = open_dir(dir);
    ASSERT_OK(ckpt_test_save(c, 2, 0)); /* a checkpoint that fits still works */
    elastic_ckpt_close(c);
}

TEST(ckpt_read_only_file_system_gives_erofs_and_stays_readable)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ro", test_tmpdir());
    mount_small_tmpfs(dir, "16m");
    elastic_ckpt *c = open_dir(dir);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    elastic_ckpt_close(c);
    ASSERT_OK(mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL));
    c = open_dir(dir);
    ASSERT_ERR(ckpt_test_save(c, 2, 0), ELASTIC_EROFS);
    elastic_ckpt_close(c);
    expect_step_one_intact(dir);
}

TEST(ckpt_permission_denied_gives_eperm_and_stays_readable)
{
    if (getuid() != 0) SKIP("needs root to switch to an unprivileged user");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/locked", test_tmpdir());
    elastic_ckpt *c = open_dir_mode(dir, 0644); /* others may read it (not the private default) */
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    elastic_ckpt_close(c);
    char step1[4200];
    ckpt__step_dir(dir, 1, step1, sizeof step1);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", test_tmpdir());
    *strrchr(parent, '/') = '\0';
    ASSERT_OK(chmod(parent, 0711)); /* the runner's root; it removes it as root afterwards */
    ASSERT_OK(chmod(test_tmpdir(), 0711));
    ASSERT_OK(chmod(dir, 0555));
    ASSERT_OK(chmod(step1, 0555));
    if (setgid(65534) != 0 || setuid(65534) != 0) SKIP("cannot switch to nobody");
    c = open_dir(dir);
    ASSERT_ERR(ckpt_test_save(c, 2, 0), ELASTIC_EPERM);
    ASSERT(strstr(elastic_last_error(), "ermission") != NULL);
    elastic_ckpt_close(c);
    expect_step_one_intact(dir);
}

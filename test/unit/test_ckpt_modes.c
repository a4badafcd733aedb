/* Checkpoint files are private by default (0600 files, 0700 directories),
 * group-readable when asked (file_mode 0640), and a step that could never
 * be superseded (UINT64_MAX) is refused. */
#include "test.h"

#include <dirent.h>
#include <sys/stat.h>

static unsigned mode_of(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) FAIL("%s does not exist", path);
    return (unsigned)(st.st_mode & 0777);
}

/* Every entry of dir and of its step directories has the expected mode. */
static int check_tree(const char *dir, unsigned file_mode, unsigned dir_mode)
{
    int files = 0;
    DIR *d = opendir(dir);
    ASSERT(d != NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        ASSERT_EQ(lstat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            ASSERT_EQ(st.st_mode & 0777, dir_mode);
            files += check_tree(path, file_mode, dir_mode);
        } else {
            if ((st.st_mode & 0777) != file_mode)
                FAIL("%s has mode %03o", path, (unsigned)(st.st_mode & 0777));
            files++;
        }
    }
    closedir(d);
    return files;
}

static void save_one(const char *dir, unsigned file_mode)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.threads = 1;
    if (file_mode != 0) o.file_mode = file_mode;
    elastic_ckpt *c = NULL;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    elastic_ckpt_blob blob = { .name = "model", .data = "weights", .len = 7 };
    ASSERT_OK(elastic_ckpt_save(c, 5, &blob, 1));
    elastic_ckpt_close(c);
}

TEST(ckpt_files_are_private_by_default_and_group_readable_on_request)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/private", test_tmpdir());
    save_one(dir, 0);
    ASSERT_EQ(mode_of(dir), 0700);
    ASSERT(check_tree(dir, 0600, 0700) >= 2); /* at least a shard and a commit record */
    snprintf(dir, sizeof dir, "%s/shared", test_tmpdir());
    mode_t old = umask(022);
    save_one(dir, 0640);
    umask(old);
    ASSERT_EQ(mode_of(dir), 0750);
    ASSERT(check_tree(dir, 0640, 0750) >= 2);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.file_mode = 0644 | 01000; /* sticky: outside 0666 */
    elastic_ckpt *c = NULL;
    ASSERT_ERR(elastic_ckpt_open(dir, &o, &c), ELASTIC_EINVAL);
    o.file_mode = 0400; /* the writer could not rewrite its own files */
    ASSERT_ERR(elastic_ckpt_open(dir, &o, &c), ELASTIC_EINVAL);
}

TEST(ckpt_step_uint64_max_is_refused)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/ck", test_tmpdir());
    elastic_ckpt *c = NULL;
    ASSERT_OK(elastic_ckpt_open(dir, NULL, &c));
    elastic_ckpt_txn *t = NULL;
    ASSERT_ERR(elastic_ckpt_begin(c, UINT64_MAX, &t), ELASTIC_EINVAL);
    elastic_ckpt_blob blob = { .name = "b", .data = "x", .len = 1 };
    ASSERT_ERR(elastic_ckpt_save(c, UINT64_MAX, &blob, 1), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_ckpt_save_async(c, UINT64_MAX, &blob, 1, 1000), ELASTIC_EINVAL);
    ASSERT_OK(elastic_ckpt_save(c, UINT64_MAX - 1, &blob,
                                1)); /* the largest step that may be superseded... */
    uint64_t latest = 0;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, UINT64_MAX - 1);
    elastic_ckpt_close(c);
}

/*
 * elastic_loop_run without a launcher: its options are checked before
 * anything starts (a missing callback, a bad struct_size, no steps: one
 * ELASTIC_EINVAL naming the field), the growth rule of its structs, and a
 * trainer alone (a group of one) that trains, saves to its disk tier, starts
 * again from the last disk step, and whose failed step is its own error
 * (no agent recovers it in place).
 */
#include "test.h"

#include <elastic.h>
#include <stddef.h>

typedef struct toy {
    uint64_t value; /* the state: the sum of the steps trained */
    int builds, loads, fresh_loads, fail_at;
    elastic_ckpt_blob blob;
} toy;

static int toy_build(void *user, elastic_worker *w, const elastic_worker_info *info)
{
    ((toy *)user)->builds++;
    return info->world_size == 1 ? 0 : ELASTIC_EPROTO;
}

static int toy_step(void *user, elastic_worker *w, uint64_t step)
{
    toy *t = user;
    if (t->fail_at > 0 && step == (uint64_t)t->fail_at) return ELASTIC_ERECONFIGURE;
    t->value += step + 1;
    return 0;
}

static int toy_save(void *user, uint64_t step, int tier, const elastic_ckpt_blob **b, size_t *n)
{
    toy *t = user;
    t->blob = (elastic_ckpt_blob){ "value", &t->value, sizeof t->value, 0 };
    *b = &t->blob;
    *n = 1;
    return 0;
}

static int toy_load(void *user, elastic_ckpt *from, uint64_t step)
{
    toy *t = user;
    t->loads++;
    t->value = 0;
    if (from == NULL) return t->fresh_loads++, 0;
    size_t len = 0;
    return elastic_ckpt_read_into(from, step, "value", &t->value, sizeof t->value, &len);
}

static void toy_opts(elastic_loop_opts *opts, toy *t)
{
    ASSERT_OK(elastic_loop_opts_init(opts, sizeof *opts));
    opts->user = t;
    opts->build = toy_build;
    opts->step = toy_step;
    opts->save = toy_save;
    opts->load = toy_load;
    opts->steps = 10;
}

TEST(worker_loop_opts_defaults_and_growth)
{
    elastic_loop_opts opts;
    ASSERT_OK(elastic_loop_opts_init(&opts, sizeof opts));
    ASSERT_EQ(opts.struct_size, sizeof opts);
    ASSERT_EQ(opts.memory_every, 1);
    ASSERT_EQ(opts.disk_every, 100);
    ASSERT_EQ(opts.disk_async, 1);
    ASSERT_EQ(opts.park, 1);
    ASSERT(opts.build == NULL && opts.dir == NULL && opts.worker == NULL);
    /* An older caller's struct: nothing written past its size. */
    unsigned char buffer[sizeof opts + 16];
    memset(buffer, 0xAB, sizeof buffer);
    size_t older = offsetof(elastic_loop_opts, steps);
    ASSERT_OK(elastic_loop_opts_init((elastic_loop_opts *)(void *)buffer, older));
    for (size_t i = older; i < sizeof buffer; i++) ASSERT_EQ(buffer[i], 0xAB);
    ASSERT_ERR(elastic_loop_opts_init(&opts, sizeof(size_t) - 1), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "elastic_loop_opts.struct_size") != NULL);
    ASSERT_ERR(elastic_loop_opts_init(NULL, sizeof opts), ELASTIC_EINVAL);
}

TEST(worker_loop_refuses_bad_options_naming_the_field)
{
    toy t = { 0 };
    elastic_loop_opts opts;
    const char *names[] = { "build", "step", "save", "load" };
    for (int i = 0; i < 4; i++) {
        toy_opts(&opts, &t);
        if (i == 0) opts.build = NULL;
        if (i == 1) opts.step = NULL;
        if (i == 2) opts.save = NULL;
        if (i == 3) opts.load = NULL;
        ASSERT_ERR(elastic_loop_run(&opts, NULL), ELASTIC_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "elastic_loop_opts.%s is NULL", names[i]);
        if (strstr(elastic_last_error(), want) == NULL) FAIL("\"%s\" lacks \"%s\"", elastic_last_error(), want);
    }
    toy_opts(&opts, &t);
    opts.steps = 0;
    ASSERT_ERR(elastic_loop_run(&opts, NULL), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "elastic_loop_opts.steps") != NULL);
    toy_opts(&opts, &t);
    opts.struct_size = (size_t)1 << 40; /* an uninitialised struct */
    ASSERT_ERR(elastic_loop_run(&opts, NULL), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "elastic_loop_opts.struct_size") != NULL);
    toy_opts(&opts, &t);
    opts.failure_grace_ms = 0;
    ASSERT_ERR(elastic_loop_run(&opts, NULL), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "failure_grace_ms") != NULL);
    toy_opts(&opts, &t);
    opts.dir = "";
    ASSERT_ERR(elastic_loop_run(&opts, NULL), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_loop_run(NULL, NULL), ELASTIC_EINVAL);
    elastic_loop_result bad = { .struct_size = 1 };
    toy_opts(&opts, &t);
    ASSERT_ERR(elastic_loop_run(&opts, &bad), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "elastic_loop_result.struct_size") != NULL);
    /* Nothing started: no callback ran. */
    ASSERT_EQ(t.builds + t.loads, 0);
}

TEST(worker_loop_alone_trains_saves_and_starts_again_from_disk)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ckpt", test_tmpdir());
    toy t = { 0 };
    elastic_loop_opts opts;
    toy_opts(&opts, &t);
    opts.dir = dir;
    opts.disk_every = 4;
    opts.fsync = ELASTIC_CKPT_FSYNC_NONE;
    elastic_loop_result result = { .struct_size = sizeof result };
    ASSERT_OK(elastic_loop_run(&opts, &result));
    ASSERT_EQ(result.struct_size, sizeof result);
    ASSERT_EQ(result.steps, 10);
    ASSERT_EQ(result.world_size, 1);
    ASSERT_EQ(result.recoveries, 0);
    ASSERT_EQ(t.value, 55); /* 1 + ... + 10 */
    ASSERT_EQ(t.fresh_loads, 1);
    ASSERT_EQ(t.builds, 1);
    /* Started again for 12 steps: from disk step 8 (saves at 4 and 8), where the value was 36. */
    toy again = { 0 };
    toy_opts(&opts, &again);
    opts.dir = dir;
    opts.disk_every = 4;
    opts.steps = 12;
    ASSERT_OK(elastic_loop_run(&opts, &result));
    ASSERT_EQ(again.fresh_loads, 0);
    ASSERT_EQ(result.restored_source, ELASTIC_CKPT_SOURCE_DISK);
    ASSERT_EQ(again.value, 36 + 9 + 10 + 11 + 12);
}

TEST(worker_loop_alone_a_failed_step_is_the_trainers_error)
{
    toy t = { .fail_at = 3 };
    elastic_loop_opts opts;
    toy_opts(&opts, &t);
    elastic_loop_result result = { .struct_size = sizeof result };
    ASSERT_ERR(elastic_loop_run(&opts, &result), ELASTIC_EUNSUPPORTED);
    ASSERT(strstr(elastic_last_error(), "step 3 failed") != NULL);
    ASSERT(strstr(elastic_last_error(), "--in-process-recovery") != NULL);
    ASSERT_EQ(result.steps, 3);
}

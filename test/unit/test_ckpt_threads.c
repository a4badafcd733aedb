/* One checkpoint handle read from several threads at once: the header
 * promises calls on a handle are serialised inside, so readers of different
 * steps (which replace the handle's cached step view) never see each other's
 * freed memory (ASan would say so) and always read the right bytes. */
#include "test.h"

#include <pthread.h>

#define READER_THREADS 4
#define STEPS          3
#define ROUNDS         200

typedef struct reader {
    elastic_ckpt *ckpt;
    int index;
    int failures;
} reader;

static void *read_steps(void *arg)
{
    reader *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t step = (uint64_t)((i + r->index) % STEPS) + 1;
        uint64_t value = 0;
        size_t len = 0;
        uint32_t world = 0;
        if (elastic_ckpt_read_into(r->ckpt, step, "value", &value, sizeof value, &len) != 0 ||
            len != sizeof value || value != step * 1000 ||
            elastic_ckpt_step_info(r->ckpt, step, &world, NULL) != 0 || world != 1)
            r->failures++;
    }
    return NULL;
}

TEST(ckpt_one_handle_read_from_several_threads)
{
    elastic_ckpt_opts opts;
    elastic_ckpt_opts_init(&opts, sizeof opts);
    opts.threads = 2; /* reads also use the handle's pool */
    elastic_ckpt *ckpt;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &opts, &ckpt));
    for (uint64_t step = 1; step <= STEPS; step++) {
        uint64_t value = step * 1000;
        elastic_ckpt_blob blob = {
            .name = "value", .data = &value, .len = sizeof value, .flags = ELASTIC_CKPT_REPLICATED
        };
        ASSERT_OK(elastic_ckpt_save(ckpt, step, &blob, 1));
    }
    pthread_t threads[READER_THREADS];
    reader readers[READER_THREADS];
    for (int i = 0; i < READER_THREADS; i++) {
        readers[i] = (reader){ .ckpt = ckpt, .index = i };
        ASSERT_EQ(pthread_create(&threads[i], NULL, read_steps, &readers[i]), 0);
    }
    for (int i = 0; i < READER_THREADS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < READER_THREADS; i++) ASSERT_EQ(readers[i].failures, 0);
    elastic_ckpt_close(ckpt);
}

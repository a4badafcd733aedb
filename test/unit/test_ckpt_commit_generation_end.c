/*
 * A store-mode commit ends with its generation: in-process recovery keeps a
 * survivor whose save waits for a rank that died, and the worker announces
 * the generation's end on the store connection (store__generation_ended, as
 * its control thread does on the agent's ABORT). The wait then ends at once
 * with ELASTIC_ERECONFIGURE ("step S abandoned"), the step is not committed,
 * and a newer generation's commits on the same connection are untouched.
 * The commit timeout is the default one (600 s): only the end can stop it.
 */
#include "common/clock.h"
#include "store/client.h"
#include "store/store.h"
#include "support/ckpt_content.h"
#include "support/store_fixture.h"
#include "test.h"

#include <pthread.h>
#include <time.h>

#define PROMPT_MS 5000 /* far below the 600 s commit timeout */

typedef struct save_job {
    elastic_ckpt *ckpt;
    uint64_t step;
    int rc;
    char error[256];
} save_job;

static void *save_main(void *arg)
{
    save_job *job = arg;
    job->rc = ckpt_test_save(job->ckpt, job->step, 0);
    snprintf(job->error, sizeof job->error, "%s", elastic_last_error());
    return NULL;
}

/* Joins within PROMPT_MS (scaled), or fails the test. */
static void join_promptly(pthread_t thread)
{
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += test_scaled_ms(PROMPT_MS) / 1000;
    ASSERT_EQ(pthread_timedjoin_np(thread, NULL, &at), 0);
}

/* Until `n` calls wait on the connection (the client's own list), within PROMPT_MS. */
static void wait_calls_in_flight(elastic_store *s, int n)
{
    store__session *session = s->session;
    for (uint64_t deadline = elastic__deadline_ms(test_scaled_ms(PROMPT_MS));;) {
        int count = 0;
        pthread_mutex_lock(&session->lock);
        for (store__call *call = session->calls; call != NULL; call = call->next) count++;
        pthread_mutex_unlock(&session->lock);
        if (count >= n) return;
        ASSERT(elastic__ms_left(deadline) > 0);
        nanosleep(&(struct timespec){ 0, 1000000 }, NULL); /* re-check the list each ms */
    }
}

static elastic_ckpt *open_rank0(const char *name, elastic_store *store, uint32_t world,
                                uint64_t generation)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), name);
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.rank = 0;
    o.world = world;
    o.generation = generation;
    o.store = store;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(dir, &o, &c));
    return c;
}

TEST_TIMEOUT(ckpt_store_commit_waiting_for_a_dead_rank_ends_with_its_generation, 60)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f);

    /* Rank 0 of two saves step 7 of generation 5; rank 1 is dead and never will. */
    save_job job = { .ckpt = open_rank0("gen5", store, 2, 5), .step = 7 };
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, NULL, save_main, &job), 0);
    /* Rank 0 counted itself in: its commit waits for the record now (or is
     * about to: an end announced first fails the wait as it starts). */
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(store, "ckpt/7/g5/done", test_scaled_ms(PROMPT_MS), &value, &len));
    elastic_free(value);
    wait_calls_in_flight(store, 1); /* the commit's wait for the record */
    uint64_t ended_at = elastic__now_ms();
    store__generation_ended(store, 5);
    join_promptly(thread);
    ASSERT_LT(elastic__now_ms() - ended_at, (uint64_t)test_scaled_ms(PROMPT_MS));
    ASSERT_EQ(job.rc, ELASTIC_ERECONFIGURE);
    if (strstr(job.error, "step 7 abandoned: generation 5 ended") == NULL)
        FAIL("error text: %s", job.error);
    uint64_t latest;
    ASSERT_ERR(elastic_ckpt_latest(job.ckpt, &latest), ELASTIC_ENOTFOUND); /* not committed */

    /* A save of the ended generation that starts afterwards fails at once too. */
    ASSERT_ERR(ckpt_test_save(job.ckpt, 8, 0), ELASTIC_ERECONFIGURE);
    elastic_ckpt_close(job.ckpt);

    /* The next generation commits on the same connection as before. */
    elastic_ckpt *next = open_rank0("gen6", store, 1, 6);
    ASSERT_OK(ckpt_test_save(next, 7, 0));
    ASSERT_OK(elastic_ckpt_latest(next, &latest));
    ASSERT_EQ(latest, 7);
    elastic_ckpt_close(next);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

TEST_TIMEOUT(ckpt_store_commit_every_rank_made_stands_after_the_end, 60)
{
    /* Every rank counted in before the end (here the only one): the record
     * is in the store, so the step is committed although the wait for it
     * was cut short. */
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f);
    elastic_ckpt *c = open_rank0("alone", store, 1, 3);
    store__generation_ended(store, 3);
    ASSERT_OK(ckpt_test_save(c, 1, 0));
    uint64_t latest;
    ASSERT_OK(elastic_ckpt_latest(c, &latest));
    ASSERT_EQ(latest, 1);
    elastic_ckpt_close(c);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

TEST_TIMEOUT(ckpt_async_store_commit_waiting_for_a_dead_rank_ends_with_its_generation, 60)
{
    /* The same wait on the background thread of an asynchronous save: its
     * outcome (async_wait) is the abandoned step, promptly. */
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f);
    elastic_ckpt *c = open_rank0("async", store, 2, 9);
    static const char state[] = "weights";
    elastic_ckpt_blob blob = { .name = "state", .data = state, .len = sizeof state };
    ASSERT_OK(elastic_ckpt_save_async(c, 4, &blob, 1, 0));
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(store, "ckpt/4/g9/done", test_scaled_ms(PROMPT_MS), &value, &len));
    elastic_free(value);
    wait_calls_in_flight(store, 1);
    store__generation_ended(store, 9);
    uint64_t step = 0;
    ASSERT_ERR(elastic_ckpt_async_wait(c, test_scaled_ms(PROMPT_MS), &step), ELASTIC_ERECONFIGURE);
    ASSERT_EQ(step, 4);
    ASSERT(strstr(elastic_last_error(), "step 4 abandoned") != NULL);
    uint64_t latest;
    ASSERT_ERR(elastic_ckpt_latest(c, &latest), ELASTIC_ENOTFOUND);
    elastic_ckpt_close(c);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

typedef struct get_job {
    elastic_store *store;
    const char *key;
    int rc;
} get_job;

static void *get_main(void *arg)
{
    get_job *job = arg;
    void *value = NULL;
    size_t len = 0;
    job->rc = elastic_store_get(job->store, job->key, 60000, &value, &len);
    elastic_free(value);
    return NULL;
}

TEST_TIMEOUT(store_generation_end_cancels_only_that_generations_waits, 60)
{
    store_fixture f;
    fixture_start(&f);
    elastic_store *store = fixture_connect(&f), *gen3, *gen4, *plain;
    ASSERT_OK(store__clone_for_generation(store, 3, &gen3));
    ASSERT_OK(store__clone_for_generation(store, 4, &gen4));
    ASSERT_OK(elastic_store_clone(store, "", &plain));
    ASSERT_ERR(store__clone_for_generation(store, 0, &plain), ELASTIC_EINVAL);

    get_job waits[3] = { { gen3, "never-3", 0 }, { gen4, "later-4", 0 }, { plain, "later", 0 } };
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(pthread_create(&threads[i], NULL, get_main, &waits[i]), 0);
    wait_calls_in_flight(store, 3);   /* all three wait: the end cancels one in flight */
    store__generation_ended(gen4, 3); /* any handle of the connection announces it */
    join_promptly(threads[0]);
    ASSERT_EQ(waits[0].rc, ELASTIC_ECANCELED);
    /* generation 4 and the plain handle still wait: their keys arrive and they return them */
    ASSERT_OK(elastic_store_set(store, "later-4", "x", 1));
    ASSERT_OK(elastic_store_set(store, "later", "y", 1));
    join_promptly(threads[1]);
    join_promptly(threads[2]);
    ASSERT_EQ(waits[1].rc, 0);
    ASSERT_EQ(waits[2].rc, 0);
    /* An ended generation's handle fails every later call at once. */
    ASSERT_ERR(elastic_store_set(gen3, "k", "v", 1), ELASTIC_ECANCELED);
    ASSERT(strstr(elastic_last_error(), "generation 3 ended") != NULL);
    ASSERT_OK(elastic_store_set(gen4, "k", "v", 1));
    elastic_store_close(gen3);
    elastic_store_close(gen4);
    elastic_store_close(plain);
    elastic_store_close(store);
    elastic_store_server_close(f.server);
}

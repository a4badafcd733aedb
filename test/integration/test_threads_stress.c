/*
 * The library's threaded seams hammered together, for ThreadSanitizer (make
 * tsan) as much as for the plain and ASan builds: one store handle shared by
 * many threads while leases expire and the server restarts; rendezvous
 * monitors across many generation changes; the worker's abort hook firing
 * while the trainer polls; asynchronous checkpoint saves racing close.
 */
#include "support/probe_harness.h"
#include "support/rdzv_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>

static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Polls an atomic counter with a deadline (the threads report progress
 * there; nothing else to block on). False when it did not reach `at_least`. */
static bool wait_counter(atomic_long *counter, long at_least, int timeout_ms)
{
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    while (atomic_load(counter) < at_least) {
        if (rdzv_test_now_ms() >= deadline) return false;
        pause_ms(2);
    }
    return true;
}

/* ---- one store handle, many threads, expiring leases, a restarting server --- */

#define STORE_THREADS 6

typedef struct store_stress {
    elastic_store *store;
    atomic_int stop;
    atomic_long ok;        /* calls that succeeded */
    atomic_long tolerated; /* failed as a restart may make them fail */
    atomic_int unexpected; /* any other outcome: its code */
    atomic_int unexpected_op;
} store_stress;

typedef struct store_worker {
    store_stress *s;
    int id;
    pthread_t thread;
} store_worker;

/* While the server restarts a call may fail to connect, find its lease gone
 * or time out; nothing else is acceptable. */
static void account(store_stress *s, int op, int rc)
{
    if (rc == 0) {
        atomic_fetch_add(&s->ok, 1);
    } else if (rc == ELASTIC_ECONNECT || rc == ELASTIC_ENOTFOUND || rc == ELASTIC_ETIMEDOUT) {
        atomic_fetch_add(&s->tolerated, 1);
    } else {
        atomic_store(&s->unexpected_op, op);
        atomic_store(&s->unexpected, rc);
    }
}

static void *store_worker_main(void *arg)
{
    store_worker *w = arg;
    store_stress *s = w->s;
    char key[64], value[64];
    for (int i = 0; !atomic_load(&s->stop); i++) {
        snprintf(key, sizeof key, "t%d/k%d", w->id, i % 8);
        int len = snprintf(value, sizeof value, "v%d", i);
        void *got = NULL;
        size_t got_len = 0;
        int64_t sum;
        uint64_t lease = 0, revision;
        switch (i % 6) {
        case 0: account(s, 0, elastic_store_set(s->store, key, value, (size_t)len)); break;
        case 1:
            account(s, 1, elastic_store_get(s->store, key, test_scaled_ms(200), &got, &got_len));
            elastic_free(got);
            break;
        case 2: account(s, 2, elastic_store_add(s->store, "counter", 1, &sum)); break;
        case 3: /* a lease nobody keeps alive: the server ends it after 150 ms */
            account(s, 3, elastic_store_lease_grant(s->store, 150, 0, &lease));
            if (lease != 0)
                account(s, 3, elastic_store_set_leased(s->store, key, value, (size_t)len, lease));
            break;
        case 4: /* kept alive by the client's ticker thread, then revoked */
            account(s, 4, elastic_store_lease_grant(s->store, 500, 50, &lease));
            if (lease != 0) {
                account(s, 4, elastic_store_set_leased(s->store, key, value, (size_t)len, lease));
                account(s, 4, elastic_store_lease_revoke(s->store, lease));
            }
            break;
        default: { /* a watch that the other threads' sets end early */
            char prefix[16];
            snprintf(prefix, sizeof prefix, "t%d/", (w->id + 1) % STORE_THREADS);
            int rc = elastic_store_watch(s->store, prefix, 0, test_scaled_ms(100), &revision);
            account(s, 5, rc);
        }
        }
    }
    return NULL;
}

static elastic_store_server *start_server_on(int port)
{
    elastic_store_server_opts o;
    elastic_store_server_opts_init(&o, sizeof o);
    o.port = port;
    elastic_store_server *server = NULL;
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(10000);
    int rc; /* the old listener's port may need a moment to be free again */
    while ((rc = elastic_store_server_start(&o, &server)) != 0 && rdzv_test_now_ms() < deadline)
        pause_ms(20);
    if (rc != 0)
        FAIL("restarting the server on port %d: %s (%s)", port, elastic_err_name(rc),
             elastic_last_error());
    return server;
}

TEST_TIMEOUT(store_stress_handle_shared_while_leases_expire_and_the_server_restarts, 120)
{
    elastic_store_server *server;
    ASSERT_OK(elastic_store_server_start(NULL, &server));
    int port = 0;
    ASSERT_OK(elastic_store_server_get_port(server, &port));
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", port);
    store_stress s = { 0 };
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.timeout_ms = test_scaled_ms(5000);
    o.connect_timeout_ms =
        test_scaled_ms(200); /* a call during the restart fails fast and is retried */
    ASSERT_OK(elastic_store_connect(endpoint, &o, &s.store));
    store_worker workers[STORE_THREADS];
    for (int i = 0; i < STORE_THREADS; i++) {
        workers[i] = (store_worker){ .s = &s, .id = i };
        ASSERT_EQ(pthread_create(&workers[i].thread, NULL, store_worker_main, &workers[i]), 0);
    }
    for (int restart = 0; restart < 3; restart++) {
        /* Every phase must make progress: the handle recovers after each restart. */
        long before = atomic_load(&s.ok);
        if (!wait_counter(&s.ok, before + 200, 30000))
            FAIL("phase %d: only %ld calls succeeded", restart, atomic_load(&s.ok) - before);
        elastic_store_server_close(server);
        server = start_server_on(port);
    }
    long before = atomic_load(&s.ok);
    if (!wait_counter(&s.ok, before + 200, 30000)) FAIL("no progress after the last restart");
    atomic_store(&s.stop, 1);
    for (int i = 0; i < STORE_THREADS; i++) pthread_join(workers[i].thread, NULL);
    if (atomic_load(&s.unexpected) != 0)
        FAIL("operation %d failed with %s", atomic_load(&s.unexpected_op),
             elastic_err_name(atomic_load(&s.unexpected)));
    ASSERT_OK(elastic_store_set(s.store, "last", "word", 4));
    void *value = NULL;
    size_t len = 0;
    ASSERT_OK(elastic_store_get(s.store, "last", 0, &value, &len));
    ASSERT_EQ(len, 4);
    ASSERT_MEM_EQ(value, "word", 4);
    elastic_free(value);
    elastic_store_close(s.store);
    elastic_store_server_close(server);
}

/* ---- rendezvous monitors across many generation changes --------------------- */

#define RDZV_NODES       3
#define RDZV_GENERATIONS 6

typedef struct change_count {
    atomic_long calls;
    atomic_int last_kind;
} change_count;

static void count_change(void *user, const elastic_rdzv_cause *cause)
{
    change_count *count = user;
    atomic_store(&count->last_kind, cause->kind);
    atomic_fetch_add(&count->calls, 1);
}

typedef struct ender {
    rdzv_node *node;
    int rank;
    pthread_t thread;
    int rc;
} ender;

static void *end_generation_main(void *arg)
{
    ender *e = arg;
    elastic_rdzv_cause cause;
    memset(&cause, 0, sizeof cause);
    cause.struct_size = sizeof cause;
    cause.kind = ELASTIC_RDZV_FAILURE;
    cause.rank = e->rank;
    cause.exit_code = 1;
    snprintf(cause.reason, sizeof cause.reason, "stress rank %d", e->rank);
    e->rc = elastic_rdzv_end_generation(e->node->rdzv, &cause);
    return NULL;
}

TEST_TIMEOUT(rdzv_stress_monitors_follow_generation_changes_ended_from_two_nodes_at_once, 180)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[RDZV_NODES];
    change_count counts[RDZV_NODES];
    rdzv_test_opts(&o, &env, "stress", RDZV_NODES, RDZV_NODES);
    o.max_restarts = RDZV_GENERATIONS;
    rdzv_nodes_open(nodes, RDZV_NODES, &o);
    for (int i = 0; i < RDZV_NODES; i++) {
        atomic_init(&counts[i].calls, 0);
        atomic_init(&counts[i].last_kind, -1);
        ASSERT_OK(elastic_rdzv_on_change(nodes[i].rdzv, count_change, &counts[i]));
    }
    for (long g = 1; g <= RDZV_GENERATIONS; g++) {
        rdzv_nodes_form(nodes, RDZV_NODES, 30000);
        rdzv_expect_group(nodes, RDZV_NODES);
        ASSERT_EQ(nodes[0].result.restart_count, g - 1);
        /* Two nodes end the same generation at the same moment; the third
         * only hears of it through its monitor. */
        ender enders[2] = { { .node = &nodes[0], .rank = 0 }, { .node = &nodes[1], .rank = 1 } };
        for (int i = 0; i < 2; i++)
            ASSERT_EQ(pthread_create(&enders[i].thread, NULL, end_generation_main, &enders[i]), 0);
        for (int i = 0; i < 2; i++) {
            pthread_join(enders[i].thread, NULL);
            ASSERT_OK(enders[i].rc);
        }
        if (!wait_counter(&counts[2].calls, g, 20000))
            FAIL("generation %ld: node 2 heard of no end", g);
        ASSERT_EQ(atomic_load(&counts[2].last_kind), ELASTIC_RDZV_FAILURE);
    }
    /* Both ends of a generation consumed one restart, not two. */
    rdzv_nodes_form(nodes, RDZV_NODES, 30000);
    ASSERT_EQ(nodes[2].result.restart_count, RDZV_GENERATIONS);
    for (int i = 0; i < RDZV_NODES; i++) ASSERT(atomic_load(&counts[i].calls) <= RDZV_GENERATIONS);
    ASSERT_EQ(atomic_load(&counts[2].calls), RDZV_GENERATIONS);
    rdzv_nodes_close(nodes, RDZV_NODES);
    rdzv_env_stop(&env);
}

/* ---- the worker's abort hook while its trainer polls ------------------------ */

#define ABORT_CYCLES 12

typedef struct trainer {
    pthread_t thread;
    atomic_int ready;                /* callbacks registered */
    atomic_long aborts;              /* abort hook calls (library thread) */
    atomic_long reconfigures;        /* reconfigure callback calls (trainer thread) */
    atomic_long reconfigure_returns; /* poll() returned ELASTIC_ERECONFIGURE */
    atomic_ullong abort_generation;
    uint64_t seen_generation; /* trainer thread only */
    int rc;
} trainer;

static void on_stress_abort(void *user, uint64_t generation, const char *reason)
{
    trainer *t = user;
    (void)reason;
    atomic_store(&t->abort_generation, generation);
    atomic_fetch_add(&t->aborts, 1);
}

static void on_stress_reconfigure(void *user, const elastic_worker_info *info)
{
    trainer *t = user;
    t->seen_generation = info->generation;
    atomic_fetch_add(&t->reconfigures, 1);
}

/* Polls as fast as it can, so aborts land while poll() reads the state. */
static void *trainer_main(void *arg)
{
    trainer *t = arg;
    elastic_worker *w = NULL;
    t->rc = elastic_worker_init(NULL, &w);
    if (t->rc != 0) {
        atomic_store(&t->ready, -1);
        return NULL;
    }
    elastic_worker_on_abort(w, on_stress_abort, t);
    elastic_worker_on_reconfigure(w, on_stress_reconfigure, t);
    atomic_store(&t->ready, 1);
    for (uint64_t step = 1;; step++) {
        elastic_worker_heartbeat(w, step);
        int rc = elastic_worker_poll(w);
        if (rc == ELASTIC_ERECONFIGURE) {
            atomic_fetch_add(&t->reconfigure_returns, 1);
        } else if (rc == ELASTIC_ECLOSED) {
            t->rc = 0;
            break;
        } else if (rc != 0) {
            t->rc = rc;
            break;
        }
        if (step % 64 == 0) sched_yield();
    }
    elastic_worker_close(w);
    return NULL;
}

static trainer *stress_trainer;
static long stress_expected;

static bool trainer_connected(harness *h)
{
    return h->hellos[0] == 1 && atomic_load(&stress_trainer->ready) != 0;
}
static bool abort_acked(harness *h)
{
    return h->abort_acks[0] == stress_expected;
}
static bool trainer_ready(harness *h)
{
    return h->readies[0] == stress_expected;
}

static void worker_env(harness *h, channel__worker_env *env, char *prefix, size_t size)
{
    snprintf(prefix, size, "gen/%llu/", (unsigned long long)h->generation);
    *env = (channel__worker_env){ .rank = 0,
                                  .local_rank = 0,
                                  .world_size = 1,
                                  .local_world_size = 1,
                                  .generation = h->generation,
                                  .restart_count = (int)h->generation - 1,
                                  .run_id = "probe-test",
                                  .store_endpoint = h->endpoint,
                                  .store_prefix = prefix,
                                  .heartbeat_shm = probe__monitor_heartbeat_path(h->monitor),
                                  .heartbeat_slot = 0,
                                  .agent_socket = probe__monitor_socket_path(h->monitor) };
}

TEST_TIMEOUT(worker_stress_abort_hook_fires_while_the_trainer_polls, 120)
{
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = 0; /* the trainer is this process: never a stack dump of it */
    h.opts.startup_timeout_ms = 600000;
    harness_start(&h);
    /* The worker runs in this process, on its own thread, with the environment an agent gives. */
    channel__worker_env env;
    char prefix[64];
    worker_env(&h, &env, prefix, sizeof prefix);
    elastic__text text;
    elastic__text_init(&text, 8192);
    ASSERT_OK(channel__worker_env_format(&env, &text));
    for (char *line = text.data; line != NULL && *line != '\0';) {
        char *eol = strchr(line, '\n'), *eq = strchr(line, '=');
        ASSERT(eol != NULL && eq != NULL && eq < eol);
        *eol = *eq = '\0';
        setenv(line, eq + 1, 1);
        line = eol + 1;
    }
    elastic__text_free(&text);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/trainer.log", test_tmpdir());
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT(log_fd >= 0);
    probe__monitor_worker_starting(h.monitor, 0);
    trainer t = { 0 };
    stress_trainer = &t;
    ASSERT_EQ(pthread_create(&t.thread, NULL, trainer_main, &t), 0);
    probe__monitor_worker_started(h.monitor, 0, 0, (int)getpid(), log_fd);
    harness_run_until(&h, trainer_connected, 20000, "the trainer to connect");
    ASSERT_EQ(atomic_load(&t.ready), 1);
    for (long cycle = 1; cycle <= ABORT_CYCLES; cycle++) {
        stress_expected = cycle;
        ASSERT_OK(probe__monitor_abort_worker(h.monitor, 0, "stress"));
        harness_run_until(&h, abort_acked, 20000, "the abort acknowledgement");
        ASSERT_EQ(atomic_load(&t.aborts), cycle);
        ASSERT_EQ(atomic_load(&t.abort_generation), h.generation);
        harness_new_generation(&h, 1);
        worker_env(&h, &env, prefix, sizeof prefix);
        ASSERT_OK(probe__monitor_reconfigure_worker(h.monitor, 0, &env));
        harness_run_until(&h, trainer_ready, 20000, "the trainer back in its loop");
        ASSERT_EQ(h.ready_generation[0], h.generation);
    }
    ASSERT_OK(probe__monitor_stop_worker(h.monitor, 0));
    pthread_join(t.thread, NULL);
    ASSERT_OK(t.rc);
    ASSERT_EQ(atomic_load(&t.reconfigures), ABORT_CYCLES);
    ASSERT_EQ(atomic_load(&t.reconfigure_returns), ABORT_CYCLES);
    ASSERT_EQ(t.seen_generation, h.generation);
    probe__monitor_worker_exited(h.monitor, 0);
    harness_stop(&h);
    close(log_fd);
}

/* ---- asynchronous checkpoint saves racing close ------------------------------ */

#define CKPT_ROUNDS 16

TEST_TIMEOUT(ckpt_stress_async_save_racing_close_leaves_only_whole_steps, 120)
{
    const size_t len = 3u << 20;
    uint8_t *data = malloc(len);
    ASSERT(data != NULL);
    for (uint64_t step = 1; step <= CKPT_ROUNDS; step++) {
        memset(data, (int)step, len);
        elastic_ckpt_opts o;
        elastic_ckpt_opts_init(&o, sizeof o);
        o.threads = 2;
        o.chunk_bytes = 1 << 20;
        o.fsync = ELASTIC_CKPT_FSYNC_NONE;
        elastic_ckpt *c;
        ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
        elastic_ckpt_blob blob = { "weights", data, len, 0 };
        ASSERT_OK(elastic_ckpt_save_async(c, step, &blob, 1, test_scaled_ms(10000)));
        /* Close at a different point of the save each round: at once, or after a while. */
        for (volatile uint64_t spin = 0; spin < step * 200000; spin++) continue;
        elastic_ckpt_close(c);
    }
    /* Whatever was committed reads back whole; a canceled step is not there at all. */
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    uint64_t *steps = NULL;
    size_t n = 0;
    ASSERT_OK(elastic_ckpt_list_steps(c, &steps, &n));
    for (size_t i = 0; i < n; i++) {
        void *read = NULL;
        size_t got = 0;
        ASSERT_OK(elastic_ckpt_read(c, steps[i], "weights", &read, &got));
        ASSERT_EQ(got, len);
        memset(data, (int)steps[i], len);
        ASSERT_MEM_EQ(read, data, len);
        elastic_free(read);
    }
    uint64_t latest = 0;
    if (n > 0) {
        ASSERT_OK(elastic_ckpt_latest(c, &latest));
        ASSERT_EQ(latest, steps[n - 1]);
    } else {
        ASSERT_ERR(elastic_ckpt_latest(c, &latest), ELASTIC_ENOTFOUND);
    }
    elastic_free(steps);
    elastic_ckpt_close(c);
    free(data);
}

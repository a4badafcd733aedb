/* Xids through the double's event set: the watcher thread's callback, each
 * Xid's verdict and meaning, delivered once; the runner's rounds on a thread. */
#include "support/health_fixture.h"
#include "common/clock.h"

#include <pthread.h>

typedef struct signal_box {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int count;
    health__verdict worst;
    int xid_findings;
    char text[256];
} signal_box;

static signal_box box = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, "" };

static void on_xid(void *arg)
{
    signal_box *b = arg;
    pthread_mutex_lock(&b->lock);
    b->count++;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

/* Waits (with a deadline) until box.count reaches n. */
static void wait_count(int n, int timeout_ms)
{
    uint64_t deadline = elastic__now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    pthread_mutex_lock(&box.lock);
    while (box.count < n) {
        if (elastic__ms_left(deadline) == 0) {
            int got = box.count;
            pthread_mutex_unlock(&box.lock);
            FAIL("%d calls after %d ms, expected %d", got, timeout_ms, n);
        }
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_nsec += 20 * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&box.cond, &box.lock, &at);
    }
    pthread_mutex_unlock(&box.lock);
}

static health__monitor *xid_monitor(void)
{
    health__config config;
    health__config_defaults(&config);
    config.network = false;
    config.xid_poll_ms = 50;
    config.on_xid = on_xid;
    config.on_xid_arg = &box;
    health__monitor *m = NULL;
    ASSERT_OK(health__open(&config, &m));
    return m;
}

TEST(health_xid_79_wakes_the_owner_and_is_fatal_naming_the_gpu)
{
    health_use_double();
    health_state("gpus 8\n");
    health__monitor *m = xid_monitor();
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(health_count(r, "xid"), 0);
    health_state("gpus 8\nxid 5 79\n");
    wait_count(1, 5000);
    health__round(m, r);
    const health__finding *f = health_expect(r, "xid", 5, HEALTH__FATAL);
    ASSERT_EQ(f->value, 79);
    ASSERT(strstr(f->text, "Xid 79: the GPU has fallen off the bus") != NULL);
    ASSERT(strstr(f->uuid, "000000000005") != NULL);
    ASSERT_STR_EQ(f->pci_bus_id, "00000000:15:00.0");
    ASSERT_EQ(r->gpus[5].last_xid, 79);
    ASSERT_EQ(r->worst, HEALTH__FATAL);
    health__round(m, r); /* an Xid is reported once */
    ASSERT_EQ(health_count(r, "xid"), 0);
    health__close(m);
    free(r);
}

TEST(health_every_critical_xid_has_its_documented_verdict)
{
    static const struct {
        unsigned xid;
        health__verdict verdict;
        const char *words;
    } table[] = { { 48, HEALTH__FATAL, "double-bit ECC" },
                  { 63, HEALTH__WARNING, "row remap" },
                  { 64, HEALTH__FATAL, "failed" },
                  { 74, HEALTH__FATAL, "NVLink" },
                  { 79, HEALTH__FATAL, "fallen off the bus" },
                  { 94, HEALTH__FATAL, "contained ECC" },
                  { 95, HEALTH__FATAL, "uncontained ECC" },
                  { 119, HEALTH__FATAL, "GSP" },
                  { 120, HEALTH__FATAL, "GSP" },
                  { 13, HEALTH__WARNING, "application" } };
    health_use_double();
    char state[4096] = "gpus 2\n";
    for (size_t i = 0; i < ELASTIC__ARRAY_LEN(table); i++)
        snprintf(state + strlen(state), sizeof state - strlen(state), "xid %zu %u\n", i % 2,
                 table[i].xid);
    health__monitor *m = xid_monitor();
    health_state(state);
    wait_count((int)ELASTIC__ARRAY_LEN(table), 5000);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(health_count(r, "xid"), (int)ELASTIC__ARRAY_LEN(table));
    int k = 0;
    for (int i = 0; i < r->count; i++) {
        const health__finding *f = &r->findings[i];
        if (strcmp(f->check, "xid") != 0) continue;
        ASSERT_EQ(f->value, table[k].xid); /* in the order they came */
        ASSERT_EQ(f->gpu, k % 2);
        if (f->verdict != table[k].verdict || strstr(f->text, table[k].words) == NULL)
            FAIL("Xid %u: %s \"%s\"", table[k].xid, health__verdict_name(f->verdict), f->text);
        k++;
    }
    health__close(m);
    free(r);
}

static void deliver(const health__report *report, void *arg)
{
    signal_box *b = arg;
    pthread_mutex_lock(&b->lock);
    b->count++;
    b->worst = report->worst;
    b->xid_findings += health_count(report, "xid");
    const health__finding *f = health_find(report, "xid", 1);
    if (f != NULL) snprintf(b->text, sizeof b->text, "%s", f->text);
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

TEST(health_runner_runs_at_once_then_on_request_and_on_an_xid)
{
    health_use_double();
    health_state("gpus 2\n");
    health__config config;
    health__config_defaults(&config);
    config.network = false;
    config.xid_poll_ms = 50;
    health__runner *runner = NULL;
    /* A period far longer than the test: every round here is one it asked for. */
    ASSERT_OK(health__runner_start(&config, 3600 * 1000, deliver, &box, &runner));
    wait_count(1, 5000);
    ASSERT_EQ(box.worst, HEALTH__OK);
    health__runner_now(runner);
    wait_count(2, 5000);
    health_state("gpus 2\nxid 1 95\n");
    wait_count(3, 5000);
    pthread_mutex_lock(&box.lock);
    ASSERT_EQ(box.worst, HEALTH__FATAL);
    ASSERT_EQ(box.xid_findings, 1);
    ASSERT(strstr(box.text, "uncontained ECC") != NULL);
    pthread_mutex_unlock(&box.lock);
    health__runner_stop(runner);
}

TEST(health_runner_repeats_rounds_every_interval)
{
    health_use_double();
    health_state("gpus 1\n");
    health__config config;
    health__config_defaults(&config);
    config.network = false;
    health__runner *runner = NULL;
    uint64_t started = elastic__now_ms();
    ASSERT_OK(health__runner_start(&config, 100, deliver, &box, &runner));
    wait_count(4, 5000); /* the first at once, then three periods */
    ASSERT(elastic__now_ms() - started >= 300);
    health__runner_stop(runner);
}

static uint64_t last_round;

static void deliver_round(const health__report *report, void *arg)
{
    signal_box *b = arg;
    pthread_mutex_lock(&b->lock);
    b->count++;
    last_round = report->round;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

TEST(health_runner_now_names_the_first_fresh_round)
{
    health__config config;
    health__config_defaults(&config);
    config.gpu = config.network = false;
    health__runner *runner = NULL;
    ASSERT_OK(health__runner_start(&config, 3600 * 1000, deliver_round, &box, &runner));
    wait_count(1, 5000);
    uint64_t fresh = health__runner_now(runner);
    ASSERT_EQ(fresh, 2); /* round 1 is done: the next one is fresh */
    wait_count(2, 5000);
    pthread_mutex_lock(&box.lock);
    ASSERT_EQ(last_round, 2);
    pthread_mutex_unlock(&box.lock);
    health__runner_stop(runner);
}

TEST(health_runner_stop_ends_a_hanging_site_command_at_once)
{
    char marker[4096], cmd[8192];
    snprintf(marker, sizeof marker, "%s/started", test_tmpdir());
    snprintf(cmd, sizeof cmd, "touch %s; sleep 600", marker);
    health__config config;
    health__config_defaults(&config);
    config.gpu = config.network = false;
    config.site_cmd = cmd;
    config.site_timeout_ms = 600 * 1000;
    health__runner *runner = NULL;
    ASSERT_OK(health__runner_start(&config, 0, deliver_round, &box, &runner));
    uint64_t deadline = elastic__now_ms() + (uint64_t)test_scaled_ms(5000);
    while (access(marker, F_OK) != 0) { /* the command is under way */
        ASSERT(elastic__ms_left(deadline) > 0);
        usleep(10000);
    }
    uint64_t started = elastic__now_ms();
    health__runner_stop(runner);
    ASSERT(elastic__now_ms() - started < (uint64_t)test_scaled_ms(2000));
    ASSERT_EQ(box.count, 0); /* the stopped round is not delivered as a verdict */
}

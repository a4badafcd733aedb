/* The monitor's other probes with real worker processes: a slow rank scores
 * lowest and becomes a persistent straggler, a failing user probe is
 * reported, the metrics page is scraped over HTTP and parsed, and the control
 * socket carries an in-process reconfiguration to live workers. */
#include "support/probe_harness.h"
#include "common/clock.h"
#include "common/prom.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>

static bool straggler_found(harness *h)
{
    return h->straggler_count >= 1;
}
static bool one_failure(harness *h)
{
    return h->failure_count >= 1;
}

TEST_TIMEOUT(probe_straggler_slow_worker_reported_persistent, 90)
{
    harness h;
    harness_init(&h, 3);
    h.opts.interval_ms = 200;
    h.opts.straggler_window = 5;
    h.opts.straggler_rounds = 3;
    harness_start(&h);
    const char *fast[] = { "steady", "20", NULL }, *slow[] = { "steady", "70", NULL };
    harness_spawn(&h, 0, 0, fast);
    harness_spawn(&h, 1, 1, slow);
    harness_spawn(&h, 2, 2, fast);
    harness_run_until(&h, straggler_found, 60000, "a persistent straggler");
    ASSERT_EQ(h.stragglers[0].local_rank, 1);
    ASSERT_EQ(h.stragglers[0].rank, 1);
    double scores[3];
    probe__monitor_scores(h.monitor, scores);
    ASSERT(scores[1] >= 0 && scores[1] < scores[0] && scores[1] < scores[2]);
    ASSERT(scores[1] < 0.7);
    ASSERT_EQ(h.failure_count, 0); /* a straggler is the policy's call, not a failure */
    harness_stop(&h);
}

TEST_TIMEOUT(probe_user_probe_failure_is_reported, 30)
{
    harness h;
    harness_init(&h, 1);
    h.opts.user_probe_command = "exit 3";
    h.opts.user_probe_interval_ms = 100;
    harness_start(&h);
    harness_run_until(&h, one_failure, 20000, "the user probe's verdict");
    ASSERT_STR_EQ(h.failures[0].probe, "user");
    ASSERT_EQ(h.failures[0].local_rank, -1);
    ASSERT(strstr(h.failures[0].reason, "exited with 3") != NULL);
    harness_stop(&h);
}

/* ---- metrics over HTTP -------------------------------------------------------- */

typedef struct scrape {
    int port;
    const char *request;
    char response[1 << 16];
    int done;
} scrape;

static void *scrape_main(void *arg)
{
    scrape *s = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t got = 0;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        write(fd, s->request, strlen(s->request)) == (ssize_t)strlen(s->request)) {
        ssize_t n;
        while ((n = read(fd, s->response + got, sizeof s->response - 1 - got)) > 0)
            got += (size_t)n;
    }
    s->response[got] = '\0';
    close(fd);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static scrape *current_scrape;
static bool scrape_done(harness *h)
{
    (void)h;
    return __atomic_load_n(&current_scrape->done, __ATOMIC_ACQUIRE) != 0;
}

/* Sends one request while the loop serves it; returns the whole response. */
static const char *http(harness *h, const char *request)
{
    static scrape s;
    memset(&s, 0, sizeof s);
    s.port = probe__monitor_metrics_port(h->monitor);
    s.request = request;
    current_scrape = &s;
    pthread_t thread;
    ASSERT_EQ(pthread_create(&thread, NULL, scrape_main, &s), 0);
    harness_run_until(h, scrape_done, 10000, "the HTTP response");
    pthread_join(thread, NULL);
    return s.response;
}

/* The value of the sample `name` whose labels contain `labels` (or NAN). */
static double metric(const char *page, const char *name, const char *rank)
{
    const char *body = strstr(page, "\r\n\r\n");
    char line[1024];
    for (const char *p = body != NULL ? body + 4 : page; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        elastic__prom_sample sample;
        if (elastic__prom_parse_line(line, &sample) < 0) FAIL("malformed metrics line: %s", line);
        char value[32];
        if (strcmp(sample.name, name) != 0) continue;
        if (rank == NULL || (elastic__prom_label(sample.labels, "rank", value, sizeof value) &&
                             strcmp(value, rank) == 0))
            return sample.value;
    }
    return -12345;
}

static bool both_beating(harness *h)
{
    const char *page = http(h, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    /* steps/s appears once two probe ticks have seen beats (no "0" before any data) */
    return metric(page, "elastic_worker_step", "0") > 5 &&
           metric(page, "elastic_worker_step", "1") > 5 &&
           metric(page, "elastic_worker_steps_per_second", "0") >= 0;
}

TEST_TIMEOUT(probe_metrics_scraped_and_parsed, 60)
{
    harness h;
    harness_init(&h, 2);
    h.opts.metrics_port = 0;
    h.opts.interval_ms = 100;
    h.opts.hang_timeout_ms = 20000;
    harness_start(&h);
    const char *args[] = { "steady", "10", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_spawn(&h, 1, 1, args);
    harness_run_until(&h, both_beating, 30000, "steps on the metrics page");
    const char *page = http(&h, "GET /metrics HTTP/1.1\r\n\r\n");
    ASSERT(strncmp(page, "HTTP/1.1 200 OK\r\n", 17) == 0);
    ASSERT(strstr(page, "Content-Type: text/plain; version=0.0.4") != NULL);
    ASSERT_EQ(metric(page, "elastic_generation", NULL), 1);
    ASSERT_EQ(metric(page, "elastic_workers_alive", NULL), 2);
    ASSERT_EQ(metric(page, "elastic_healthy", NULL), 1);
    ASSERT_EQ(metric(page, "elastic_world_size", NULL), 2);
    double age = metric(page, "elastic_worker_heartbeat_age_seconds", "1");
    ASSERT(age >= 0 && age < test_scaled_ms(5000) / 1000.0);
    ASSERT(metric(page, "elastic_worker_steps_per_second", "0") >= 0);
    ASSERT_EQ(metric(page, "elastic_recovery_seconds_count", NULL), 0);
    probe__monitor_record_recovery(h.monitor, 0.25, true);
    page = http(&h, "GET /metrics HTTP/1.1\r\n\r\n");
    ASSERT(metric(page, "elastic_recovery_last_seconds", NULL) == 0.25);
    page = http(&h, "GET /healthz HTTP/1.1\r\n\r\n");
    ASSERT(strncmp(page, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(page, "\r\n\r\nok\n") != NULL);
    page = http(&h, "GET /nope HTTP/1.1\r\n\r\n");
    ASSERT(strncmp(page, "HTTP/1.1 404", 12) == 0);
    page = http(&h, "DELETE /metrics HTTP/1.1\r\n\r\n");
    ASSERT(strncmp(page, "HTTP/1.1 405", 12) == 0);
    page = http(&h, "HEAD /metrics HTTP/1.1\r\n\r\n");
    ASSERT(strncmp(page, "HTTP/1.1 200", 12) == 0 && strstr(page, "\r\n\r\n")[4] == '\0');
    harness_stop(&h);
}

/* ---- in-process reconfiguration over the control socket ---------------------- */

static bool both_training(harness *h)
{
    return h->hellos[0] == 1 && h->hellos[1] == 1 &&
           strstr(harness_log(h, 0), "training") != NULL &&
           strstr(harness_log(h, 1), "training") != NULL;
}
static bool both_acked(harness *h)
{
    return h->abort_acks[0] == 1 && h->abort_acks[1] == 1;
}
static bool both_ready(harness *h)
{
    return h->readies[0] == 1 && h->readies[1] == 1;
}
static bool barriers_passed(harness *h)
{
    return strstr(harness_log(h, 0), "barrier rc=0") != NULL &&
           strstr(harness_log(h, 1), "barrier rc=0") != NULL;
}
static bool both_exited(harness *h)
{
    return !h->running[0] && !h->running[1];
}

static void reconfigure(harness *h, int local_rank, int rank)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gen/%llu/", (unsigned long long)h->generation);
    channel__worker_env env = { .rank = rank,
                                .local_rank = local_rank,
                                .world_size = 2,
                                .local_world_size = 2,
                                .generation = h->generation,
                                .restart_count = 1,
                                .run_id = "probe-test",
                                .store_endpoint = h->endpoint,
                                .store_prefix = prefix,
                                .heartbeat_shm = probe__monitor_heartbeat_path(h->monitor),
                                .heartbeat_slot = local_rank,
                                .agent_socket = probe__monitor_socket_path(h->monitor) };
    ASSERT_OK(probe__monitor_reconfigure_worker(h->monitor, local_rank, &env));
}

TEST_TIMEOUT(probe_in_process_reconfigure_keeps_workers, 60)
{
    harness h;
    harness_init(&h, 2);
    h.opts.hang_timeout_ms = 20000;
    harness_start(&h);
    const char *args[] = { "inproc", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_spawn(&h, 1, 1, args);
    harness_run_until(&h, both_training, 20000,
                      "both workers to connect and register their callbacks");
    int pid0 = h.pids[0], pid1 = h.pids[1];
    ASSERT_OK(probe__monitor_abort_worker(h.monitor, 0, "rank 7 on node-3 exited with 1"));
    ASSERT_OK(probe__monitor_abort_worker(h.monitor, 1, "rank 7 on node-3 exited with 1"));
    harness_run_until(&h, both_acked, 20000, "abort acknowledgements");
    ASSERT(strstr(harness_log(&h, 0), "abort generation=1 reason=rank 7 on node-3 exited with 1") !=
           NULL);
    harness_new_generation(&h, 2);
    reconfigure(&h, 0, 1); /* ranks swap */
    reconfigure(&h, 1, 0);
    harness_run_until(&h, both_ready, 20000, "both workers back in their loop");
    ASSERT_EQ(h.ready_generation[0], 2);
    char expected[128];
    snprintf(expected, sizeof expected, "reconfigured rank=1 world=2 generation=2 pid=%d", pid0);
    ASSERT(strstr(harness_log(&h, 0), expected) != NULL);
    snprintf(expected, sizeof expected, "reconfigured rank=0 world=2 generation=2 pid=%d", pid1);
    ASSERT(strstr(harness_log(&h, 1), expected) != NULL);
    harness_run_until(&h, barriers_passed, 20000, "the new generation's barrier");
    ASSERT(h.running[0] && h.running[1] && h.pids[0] == pid0 && h.pids[1] == pid1);
    ASSERT_OK(probe__monitor_stop_worker(h.monitor, 0));
    ASSERT_OK(probe__monitor_stop_worker(h.monitor, 1));
    harness_run_until(&h, both_exited, 20000, "the workers to stop");
    ASSERT_EQ(h.exit_status[0], 0);
    ASSERT_EQ(h.exit_status[1], 0);
    ASSERT_EQ(h.failure_count, 0);
    harness_stop(&h);
}

/* A worker that lives on into the next generation (in-process recovery, as
 * the agent does it: the generation begins, then its new workers start) is
 * measured from where it stood then: its first step in the new generation is
 * the step it had reached, not the step it first beat in the first one. Its
 * whole history there made goodput redo 150 steps of a 3 s job recovered in
 * 60 ms (steps_started's `step` was 1). */
static int64_t progress_floor;
static bool stepped_past_floor(harness *h)
{
    probe__progress p;
    probe__monitor_progress(h->monitor, &p);
    return p.stepping == 1 && p.last_step > progress_floor + 5;
}

TEST_TIMEOUT(probe_progress_of_a_kept_worker_starts_at_the_new_generation, 30)
{
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = 20000;
    harness_start(&h);
    const char *args[] = { "steady", "10", NULL };
    progress_floor = 20;
    harness_spawn(&h, 0, 0, args); /* after generation 1 began, as the agent starts them */
    harness_run_until(&h, stepped_past_floor, 20000, "25 steps in generation 1");
    probe__progress before;
    probe__monitor_progress(h.monitor, &before);
    ASSERT_EQ(before.first_step, 1);
    harness_new_generation(&h, 1); /* the worker is kept */
    uint64_t gen2_ms = elastic__wall_ms();
    progress_floor = before.last_step;
    harness_run_until(&h, stepped_past_floor, 20000, "5 more steps in generation 2");
    probe__progress after;
    probe__monitor_progress(h.monitor, &after);
    ASSERT(after.first_step >= before.last_step);
    ASSERT(after.first_step_ms + 20 >= gen2_ms); /* a coarse clock tick of slack */
    harness_stop(&h);
}

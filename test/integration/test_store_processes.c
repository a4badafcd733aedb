/* The store across real processes: `elasticctl store serve`, lease holders
 * that are stopped or killed, and a server killed under pending calls. */
#include "support/store_fixture.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

typedef struct child {
    pid_t pid;
    int out; /* the read end of its stdout */
} child;

static child spawn(const char *const argv[])
{
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    child c = { fork(), pipefd[0] };
    ASSERT(c.pid >= 0);
    if (c.pid == 0) {
        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pipefd[1]);
    return c;
}

/* Reads the child's first line of output within timeout_ms. */
static void read_line(const child *c, char *line, size_t size, int timeout_ms)
{
    size_t len = 0;
    uint64_t deadline = fixture_now_ms() + (uint64_t)timeout_ms;
    while (len + 1 < size) {
        int left = (int)(deadline - fixture_now_ms());
        struct pollfd pfd = { .fd = c->out, .events = POLLIN };
        if (left <= 0 || poll(&pfd, 1, left) <= 0)
            FAIL("no line from child %d in time", (int)c->pid);
        ssize_t n = read(c->out, line + len, 1);
        if (n <= 0) FAIL("child %d closed its output", (int)c->pid);
        if (line[len] == '\n') break;
        len++;
    }
    line[len] = '\0';
}

static int reap(const child *c, int timeout_ms)
{
    int status = 0;
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid) {
            close(c->out);
            return status;
        }
        usleep(10 * 1000);
    }
    FAIL("child %d did not exit in %d ms", (int)c->pid, timeout_ms);
}

/* Starts `elasticctl store serve` on a free port; fills endpoint. */
static child start_serve(char *endpoint, size_t size)
{
    const char *argv[] = { test_bin_path("elasticctl"), "store", "serve", "--port", "0", NULL };
    child c = spawn(argv);
    char line[128];
    read_line(&c, line, sizeof line, test_scaled_ms(10000));
    ASSERT(strncmp(line, "listening on ", 13) == 0);
    snprintf(endpoint, size, "%s", line + 13);
    return c;
}

static child start_holder(const char *endpoint, const char *key, const char *ttl,
                          const char *interval)
{
    const char *argv[] = {
        test_helper_path("store_lease_holder"), endpoint, key, ttl, interval, NULL
    };
    child c = spawn(argv);
    char line[64];
    read_line(&c, line, sizeof line, test_scaled_ms(10000));
    ASSERT_STR_EQ(line, "ready");
    return c;
}

TEST_TIMEOUT(store_lease_ends_on_keepalive_silence_and_on_kill, 60)
{
    char endpoint[128];
    child server = start_serve(endpoint, sizeof endpoint);
    elastic_store *observer = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &observer));

    /* A stopped process sends no keep-alives: its lease lapses after the TTL. */
    child stopped = start_holder(endpoint, "node/stopped", "600", "100");
    expect_value(observer, "node/stopped", "held");
    ASSERT_EQ(kill(stopped.pid, SIGSTOP), 0);
    uint64_t took = wait_until_gone(observer, "node/stopped", test_scaled_ms(10000));
    ASSERT(took >= 300); /* not before the TTL (minus the last keep-alive's age) */
    kill(stopped.pid, SIGKILL);
    reap(&stopped, 5000);

    /* A killed process: the kernel closes its socket; the lease ends at once,
     * long before its one-minute TTL. */
    child killed = start_holder(endpoint, "node/killed", "60000", "1000");
    expect_value(observer, "node/killed", "held");
    ASSERT_EQ(kill(killed.pid, SIGKILL), 0);
    took = wait_until_gone(observer, "node/killed", test_scaled_ms(10000));
    ASSERT_LT(took, (uint64_t)test_scaled_ms(3000));
    reap(&killed, 5000);

    elastic_store_close(observer);
    kill(server.pid, SIGTERM);
    int status = reap(&server, 10000);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

typedef struct parked {
    elastic_store *store;
    int rc;
} parked;

static void *park_get(void *arg)
{
    parked *p = arg;
    void *value = NULL;
    size_t len;
    p->rc = elastic_store_get(p->store, "never", 60000, &value, &len);
    elastic_free(value);
    return NULL;
}

TEST_TIMEOUT(store_killed_server_fails_pending_calls_promptly, 60)
{
    char endpoint[128];
    child server = start_serve(endpoint, sizeof endpoint);
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, NULL, &s));
    parked p = { s, 1 };
    pthread_t t;
    ASSERT_EQ(pthread_create(&t, NULL, park_get, &p), 0);
    usleep(100 * 1000);
    uint64_t start = fixture_now_ms();
    kill(server.pid, SIGKILL);
    pthread_join(t, NULL);
    ASSERT_LT(fixture_now_ms() - start, (uint64_t)test_scaled_ms(5000));
    ASSERT_ERR(p.rc, ELASTIC_ECONNECT);
    reap(&server, 5000);
    elastic_store_close(s);
}

static int run_ctl(const char *const argv[], char *out, size_t size)
{
    child c = spawn(argv);
    size_t len = 0;
    for (;;) {
        struct pollfd pfd = { .fd = c.out, .events = POLLIN };
        if (poll(&pfd, 1, test_scaled_ms(10000)) <= 0) FAIL("elasticctl hangs");
        ssize_t n = read(c.out, out + len, size - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    out[len] = '\0';
    int status = reap(&c, 10000);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_TIMEOUT(ctl_store_commands_work_and_bad_flags_exit_2, 60)
{
    char endpoint[128], out[256];
    child server = start_serve(endpoint, sizeof endpoint);
    const char *ctl = test_bin_path("elasticctl");
    const char *set[] = { ctl, "store", "set", "greeting", "hello", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(set, out, sizeof out), 0);
    const char *get[] = { ctl, "store", "get", "greeting", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(get, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "hello\n");
    const char *add[] = { ctl, "store", "add", "n", "41", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(add, out, sizeof out), 0);
    const char *add2[] = { ctl, "store", "add", "n", "1", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(add2, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "42\n");
    const char *keys[] = { ctl, "store", "keys", "gree", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(keys, out, sizeof out), 0);
    ASSERT_STR_EQ(out, "greeting\n");
    const char *del[] = { ctl, "store", "del", "greeting", "--endpoint", endpoint, NULL };
    ASSERT_EQ(run_ctl(del, out, sizeof out), 0);
    ASSERT_EQ(run_ctl(get, out, sizeof out), 1); /* gone */
    const char *bad[] = { ctl, "store", "get", "k", "--endpoint", endpoint, "--bogus", "1", NULL };
    ASSERT_EQ(run_ctl(bad, out, sizeof out), 2);
    const char *no_endpoint[] = { ctl, "store", "get", "k", NULL };
    ASSERT_EQ(run_ctl(no_endpoint, out, sizeof out), 2);
    const char *bad_port[] = { ctl, "store", "serve", "--port", "99999", NULL };
    ASSERT_EQ(run_ctl(bad_port, out, sizeof out), 2);
    kill(server.pid, SIGINT);
    int status = reap(&server, 10000);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_TIMEOUT(ctl_store_serve_requires_the_token_file_token, 60)
{
    char path[512];
    snprintf(path, sizeof path, "%s/token", test_tmpdir());
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs("file-token\n", f);
    fclose(f);
    const char *argv[] = {
        test_bin_path("elasticctl"), "store", "serve", "--port", "0", "--token-file", path, NULL
    };
    child server = spawn(argv);
    char line[128];
    read_line(&server, line, sizeof line, test_scaled_ms(10000));
    const char *endpoint = line + 13;
    elastic_store_opts o;
    elastic_store_opts_init(&o, sizeof o);
    o.token = "file-token";
    elastic_store *s = NULL;
    ASSERT_OK(elastic_store_connect(endpoint, &o, &s));
    elastic_store_close(s);
    o.token = NULL;
    unsetenv("ELASTIC_STORE_TOKEN");
    ASSERT_ERR(elastic_store_connect(endpoint, &o, &s), ELASTIC_EAUTH);
    char out[256];
    const char *ctl_set[] = { test_bin_path("elasticctl"),
                              "store",
                              "set",
                              "k",
                              "v",
                              "--endpoint",
                              endpoint,
                              "--token-file",
                              path,
                              NULL };
    ASSERT_EQ(run_ctl(ctl_set, out, sizeof out), 0);
    kill(server.pid, SIGTERM);
    reap(&server, 10000);
}

/*
 * Helpers for the agent's integration tests (see agent_harness.h).
 */
#include "support/agent_harness.h"

#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

const char *agent_harness_path(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", test_tmpdir(), name);
    return out;
}

const char *agent_harness_elasticrun(void)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s", test_bin_path("elasticrun"));
    return path;
}

const char *agent_harness_worker(void)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s", test_helper_path("agent_worker"));
    return path;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

pid_t agent_harness_spawn(const char *program, const char *const *argv,
                          const char *const *extra_env, const char *name)
{
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/%s.out", test_tmpdir(), name);
    snprintf(err_path, sizeof err_path, "%s/%s.err", test_tmpdir(), name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    setpgid(0, 0); /* signals to the test's group do not reach it by accident */
    for (size_t i = 0; extra_env != NULL && extra_env[i] != NULL; i++) putenv((char *)extra_env[i]);
    execv(program, (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", program, strerror(errno));
    _exit(127);
}

bool agent_harness_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) return false;
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    int ready;
    do ready = poll(&pfd, 1, test_scaled_ms(timeout_ms));
    while (ready < 0 && errno == EINTR);
    /* Closed as it was opened, by raw system call: ThreadSanitizer saw
     * neither, so its descriptor table keeps whatever it believes about this
     * number (libuv closes its sockets by raw syscall too, so TSan may still
     * think a store thread's socket lives here; close() would "race" it). */
    syscall(SYS_close, pidfd);
    return ready > 0 && waitpid(pid, status, 0) == pid;
}

int agent_harness_exit_code(pid_t pid, int timeout_ms)
{
    int status = 0;
    if (!agent_harness_wait_exit(pid, timeout_ms, &status)) {
        kill(pid, SIGKILL);
        FAIL("elasticrun did not exit within %d ms", timeout_ms);
    }
    if (WIFSIGNALED(status)) FAIL("elasticrun was killed by signal %d", WTERMSIG(status));
    return WEXITSTATUS(status);
}

void agent_harness_kill_rank1_after_checkpoint(const char *events, const char *name,
                                               const char *step)
{
    const char *started[] = { "\"event\":\"worker_started\"", "\"generation\":1,",
                              "\"rank\":1,", NULL };
    char line[1024];
    ASSERT_EQ(agent_harness_wait_lines(events, started, 1, 30000), 1);
    ASSERT(agent_harness_nth_line(events, started, 0, line, sizeof line));
    const char *pid_at = strstr(line, "\"pid\":");
    ASSERT(pid_at != NULL);
    char console[600]; /* rank 0 prints "step N loss ... (checkpoint)" */
    snprintf(console, sizeof console, "%s/%s.out", test_tmpdir(), name);
    const char *saved[] = { step, "(checkpoint)", NULL };
    ASSERT_EQ(agent_harness_wait_lines(console, saved, 1, 60000), 1);
    ASSERT_EQ(kill((pid_t)atoi(pid_at + 6), SIGKILL), 0);
}

char *agent_harness_read_file(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) return NULL;
    size_t cap = 4096, len = 0;
    char *data = malloc(cap);
    size_t got;
    while (data != NULL && (got = fread(data + len, 1, cap - len - 1, file)) > 0) {
        len += got;
        if (cap - len - 1 == 0) data = realloc(data, cap *= 2);
    }
    fclose(file);
    if (data != NULL) data[len] = '\0';
    return data;
}

static bool line_matches(const char *line, const char *const *needles)
{
    for (size_t i = 0; needles != NULL && needles[i] != NULL; i++)
        if (strstr(line, needles[i]) == NULL) return false;
    return true;
}

bool agent_harness_nth_line(const char *path, const char *const *needles, int n, char *out,
                            size_t size)
{
    char *data = agent_harness_read_file(path);
    if (data == NULL) return false;
    int seen = 0;
    bool found = false;
    for (char *save = NULL, *line = strtok_r(data, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save))
        if (line_matches(line, needles) && seen++ == n) {
            snprintf(out, size, "%s", line);
            found = true;
            break;
        }
    free(data);
    return found;
}

static int count_lines(const char *path, const char *const *needles)
{
    char *data = agent_harness_read_file(path);
    if (data == NULL) return 0;
    int count = 0;
    for (char *save = NULL, *line = strtok_r(data, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save))
        count += line_matches(line, needles);
    free(data);
    return count;
}

/* The report file changes when a worker starts; a short poll with a
 * deadline is the simplest portable wait for that. */
int agent_harness_wait_lines(const char *path, const char *const *needles, int count,
                             int timeout_ms)
{
    long long deadline = now_ms() + test_scaled_ms(timeout_ms);
    int found = count_lines(path, needles);
    while (found < count && now_ms() < deadline) {
        sleep_ms(5);
        found = count_lines(path, needles);
    }
    return found;
}

long agent_harness_line_field(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = strstr(line, pattern);
    if (at == NULL && strncmp(line, pattern + 1, strlen(pattern + 1)) == 0) at = line - 1;
    return at != NULL ? strtol(at + strlen(pattern), NULL, 10) : -1;
}

long long agent_harness_json_int(const char *line, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = strstr(line, pattern);
    return at != NULL ? strtoll(at + strlen(pattern), NULL, 10) : -1;
}

bool agent_harness_process_alive(pid_t pid)
{
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return false;
    size_t len = fread(stat, 1, sizeof stat - 1, file);
    fclose(file);
    stat[len] = '\0';
    const char *close = strrchr(stat, ')');
    return close != NULL && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

bool agent_harness_wait_gone(pid_t pid, int timeout_ms)
{
    long long deadline = now_ms() + test_scaled_ms(timeout_ms);
    while (agent_harness_process_alive(pid)) {
        if (now_ms() >= deadline) return false;
        sleep_ms(5);
    }
    return true;
}

/*
 * The test runner: forks each registered test into its own process group,
 * bounds it with a timeout, prints TAP and ends with "N passed, N failed, N
 * skipped". A test's output is kept in a file and shown only when it fails.
 *
 *   run_tests [--list] [SUBSTRING | =NAME | --exact NAME]...
 *
 * SUBSTRING selects the tests whose name contains it (`store` selects every
 * store_... test, since names start with their module), =NAME and --exact NAME
 * the one test of that name; no selector selects every test. --list prints the
 * selected names, one per line, and runs nothing.
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define SKIP_EXIT_CODE 77

static test_case *registered_tests;
static char current_tmpdir[PATH_MAX];

void test__register(test_case *tc)
{
    /* Constructors run file by file; keep registration order within a file. */
    test_case **tail = &registered_tests;
    while (*tail != NULL) tail = &(*tail)->next;
    *tail = tc;
}

void test__fail(const char *file, int line, const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    fflush(NULL);
    _exit(1);
}

void test__skip(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    fflush(NULL);
    _exit(SKIP_EXIT_CODE);
}

const char *test_tmpdir(void)
{
    return current_tmpdir;
}

static const char *path_in(const char *env_name, const char *name)
{
    static _Thread_local char path[PATH_MAX];
    const char *dir = getenv(env_name);
    if (dir == NULL)
        test__fail(__FILE__, __LINE__, "%s is not set (run the tests with make test)", env_name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

const char *test_bin_path(const char *name)
{
    return path_in("ELASTIC_BIN_DIR", name);
}
const char *test_helper_path(const char *name)
{
    return path_in("ELASTIC_HELPER_DIR", name);
}
const char *test_example_path(const char *name)
{
    return path_in("ELASTIC_EXAMPLE_DIR", name);
}

const char *test_source_dir(void)
{
    const char *dir = getenv("ELASTIC_SOURCE_DIR");
    return dir != NULL ? dir : ".";
}

static int timeout_scale(void)
{
    const char *value = getenv("ELASTIC_TEST_TIMEOUT_SCALE");
    int scale = value != NULL ? atoi(value) : 1;
    return scale >= 1 && scale <= 100 ? scale : 1;
}

int test_scaled_ms(int ms)
{
    return ms * timeout_scale();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* What the command line asked for: substrings and exact names (pointers into argv). */
typedef struct selection {
    const char **substrings, **exact;
    int n_substrings, n_exact;
    bool list;
} selection;

static bool name_selected(const char *name, const selection *sel)
{
    if (sel->n_substrings == 0 && sel->n_exact == 0) return true;
    for (int i = 0; i < sel->n_substrings; i++)
        if (strstr(name, sel->substrings[i]) != NULL) return true;
    for (int i = 0; i < sel->n_exact; i++)
        if (strcmp(name, sel->exact[i]) == 0) return true;
    return false;
}

static bool test_exists(const char *name)
{
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (strcmp(tc->name, name) == 0) return true;
    return false;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: run_tests [--list] [SUBSTRING | =NAME | --exact NAME]...\n"
                "  SUBSTRING      the tests whose name contains it (e.g. store, rdzv_etcd)\n"
                "  =NAME          the test named exactly NAME (also --exact NAME)\n"
                "  --list         print the selected tests' names, one per line; run nothing\n"
                "No selector selects every test.\n");
}

/* 0, or 2 after saying what is wrong (an unknown option, a missing or unknown
 * exact name): a typo must not pass as "0 tests, 0 failed". */
static int parse_args(int argc, char **argv, selection *sel)
{
    sel->substrings = calloc((size_t)argc, sizeof *sel->substrings);
    sel->exact = calloc((size_t)argc, sizeof *sel->exact);
    if (sel->substrings == NULL || sel->exact == NULL) {
        perror("run_tests");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *exact = NULL;
        if (strcmp(arg, "--list") == 0) {
            sel->list = true;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "--exact") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "run_tests: --exact needs a test name\n");
                return 2;
            }
            exact = argv[++i];
        } else if (strncmp(arg, "--exact=", 8) == 0) {
            exact = arg + 8;
        } else if (arg[0] == '=') {
            exact = arg + 1;
        } else if (arg[0] == '-') {
            fprintf(stderr, "run_tests: unknown option %s\n", arg);
            usage(stderr);
            return 2;
        }
        if (exact == NULL) {
            sel->substrings[sel->n_substrings++] = arg;
        } else if (!test_exists(exact)) {
            fprintf(stderr, "run_tests: no test is named \"%s\" (--list prints them)\n", exact);
            return 2;
        } else {
            sel->exact[sel->n_exact++] = exact;
        }
    }
    return 0;
}

/* Waits for the child up to timeout_ms; true if it exited (status filled). */
static bool wait_child(pid_t pid, int timeout_ms, int *status)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
        int ready;
        do ready = poll(&pfd, 1, timeout_ms);
        while (ready < 0 && errno == EINTR);
        syscall(SYS_close,
                pidfd); /* as opened: by raw syscall, unseen by TSan (see agent_harness.c) */
        if (ready == 0) return false;
        return waitpid(pid, status, 0) == pid;
    }
    /* Kernels without pidfd: a coarse wait loop is good enough for a runner. */
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (waitpid(pid, status, WNOHANG) == pid) return true;
        struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
        nanosleep(&ten_ms, NULL);
    }
    return false;
}

static void show_output(const char *log_path, const char *prefix)
{
    FILE *log = fopen(log_path, "r");
    if (log == NULL) return;
    char line[2048];
    while (fgets(line, sizeof line, log) != NULL) printf("%s%s", prefix, line);
    fclose(log);
}

static void skip_reason(const char *log_path, char *reason, size_t size)
{
    snprintf(reason, size, "skipped");
    FILE *log = fopen(log_path, "r");
    if (log == NULL) return;
    char line[1024];
    while (fgets(line, sizeof line, log) != NULL)
        if (strncmp(line, "SKIP: ", 6) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(reason, size, "%s", line + 6);
        }
    fclose(log);
}

enum outcome { PASSED, FAILED, SKIPPED };

static enum outcome run_one(test_case *tc, int number, const char *root)
{
    snprintf(current_tmpdir, sizeof current_tmpdir, "%s/%s", root, tc->name);
    mkdir(current_tmpdir, 0700);
    char log_path[PATH_MAX + 16];
    snprintf(log_path, sizeof log_path, "%s.log", current_tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        close(log_fd);
        tc->fn();
        fflush(NULL);
        exit(0);
    }
    setpgid(pid, pid);
    int status = 0;
    int timeout_ms = tc->timeout_s * 1000 * timeout_scale();
    bool exited = wait_child(pid, timeout_ms, &status);
    kill(-pid, SIGKILL); /* whatever the test started in its group goes too */
    if (!exited) waitpid(pid, &status, 0);

    enum outcome result;
    if (!exited) {
        printf("not ok %d - %s # timed out after %d s\n", number, tc->name, timeout_ms / 1000);
        show_output(log_path, "#   ");
        result = FAILED;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok %d - %s\n", number, tc->name);
        result = PASSED;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_EXIT_CODE) {
        char reason[1024];
        skip_reason(log_path, reason, sizeof reason);
        printf("ok %d - %s # SKIP %s\n", number, tc->name, reason);
        result = SKIPPED;
    } else {
        if (WIFSIGNALED(status))
            printf("not ok %d - %s # killed by signal %d\n", number, tc->name, WTERMSIG(status));
        else
            printf("not ok %d - %s # exit code %d\n", number, tc->name, WEXITSTATUS(status));
        show_output(log_path, "#   ");
        result = FAILED;
    }
    nftw(current_tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    remove(log_path);
    fflush(stdout);
    return result;
}

/* Run inside a Slurm allocation (a CI job under sbatch), elasticrun would
 * take its settings from the allocation's SLURM_* variables: the suite
 * starts without them; the Slurm tests give their own. */
static void forget_slurm_environment(void)
{
    extern char **environ;
    for (int i = 0; environ[i] != NULL;) {
        const char *entry = environ[i];
        if (strncmp(entry, "SLURM_", 6) != 0 && strncmp(entry, "SLURMD_", 7) != 0) {
            i++;
            continue;
        }
        char name[256];
        size_t len = strcspn(entry, "=");
        if (len >= sizeof name) { /* no such Slurm variable: leave it */
            i++;
            continue;
        }
        snprintf(name, sizeof name, "%.*s", (int)len, entry);
        unsetenv(name); /* environ shifts: look at index i again */
    }
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    forget_slurm_environment();
    selection sel = { 0 };
    int rc = parse_args(argc, argv, &sel);
    if (rc != 0) {
        free(sel.substrings);
        free(sel.exact);
        return rc;
    }
    if (sel.list) {
        for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
            if (name_selected(tc->name, &sel)) printf("%s\n", tc->name);
        free(sel.substrings);
        free(sel.exact);
        return fflush(stdout) == 0 ? 0 : 2;
    }
    char root_template[] = "/tmp/elastic-test-XXXXXX";
    const char *root = mkdtemp(root_template);
    if (root == NULL) {
        perror("mkdtemp");
        return 2;
    }
    int selected = 0;
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (name_selected(tc->name, &sel)) selected++;
    printf("1..%d\n", selected);

    int counts[3] = { 0, 0, 0 }, number = 0;
    for (test_case *tc = registered_tests; tc != NULL; tc = tc->next)
        if (name_selected(tc->name, &sel)) counts[run_one(tc, ++number, root)]++;
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(sel.substrings);
    free(sel.exact);

    printf("%d passed, %d failed, %d skipped\n", counts[PASSED], counts[FAILED], counts[SKIPPED]);
    return counts[FAILED] == 0 ? 0 : 1;
}

/*
 * A worker for the agent's tests: reports its start (and environment) to a
 * file, then behaves as told: sleep, exit with a code, fail on one rank,
 * fork a grandchild, write an error file.
 *
 *   agent_worker --report FILE [--env-dir DIR] [--fail-rank R --fail-code C]
 *                [--fail-until-restart N] [--exit-after-restart N] [--sleep-ms MS]
 *                [--grandchild] [--error-file-text TEXT] [--tag TEXT] [--exit-when-world N]
 *                [--exit-when-file PATH]
 *
 * Without --sleep-ms the worker exits 0 at once when --exit-after-restart is
 * reached, and otherwise waits to be killed; with --exit-when-file it exits 0
 * once PATH exists (a test ends the job on its own event), 1 after 120 s.
 */
#include "elastic.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct worker_args {
    const char *report;
    const char *env_dir;
    int fail_rank;
    int fail_code;
    int fail_until_restart; /* fail only while the restart count is below this */
    int exit_after_restart; /* exit 0 once the restart count reaches this */
    int sleep_ms;
    int grandchild;
    const char *error_file_text;
    const char *tag;            /* echoed in the start line (checks argument substitution) */
    int exit_when_world;        /* exit 0 at once when WORLD_SIZE is this */
    const char *exit_when_file; /* exit 0 once this file exists */
} worker_args;

static int env_int(const char *name, int fallback)
{
    const char *value = getenv(name);
    return value != NULL ? atoi(value) : fallback;
}

static void append_line(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = write(fd, line, strlen(line)); /* one write: lines of workers do not mix */
    (void)ignored;
    close(fd);
}

static void dump_environment(const char *dir, int rank, int restart)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/restart%d_rank%d.env", dir, restart, rank);
    FILE *file = fopen(path, "w");
    if (file == NULL) return;
    for (char **entry = environ; *entry != NULL; entry++) fprintf(file, "%s\n", *entry);
    /* Whether the job's store takes us with what the agent handed over (the
     * token comes from ELASTIC_STORE_TOKEN_FILE, never the environment). */
    const char *endpoint = getenv("ELASTIC_STORE_ENDPOINT"),
               *token_file = getenv("ELASTIC_STORE_TOKEN_FILE");
    struct stat st;
    if (token_file != NULL && stat(token_file, &st) == 0)
        fprintf(file, "#token_file_mode=%03o\n", (unsigned)(st.st_mode & 0777));
    elastic_store *store = NULL;
    int rc = endpoint != NULL ? elastic_store_connect(endpoint, NULL, &store) : ELASTIC_EINVAL;
    if (rc == 0) rc = elastic_store_set(store, "agent_worker/probe", "1", 1);
    fprintf(file, "#store_check=%s\n", rc == 0 ? "ok" : elastic_err_name(rc));
    elastic_store_close(store);
    fclose(file);
}

static void parse(int argc, char **argv, worker_args *args)
{
    *args = (worker_args){ .fail_rank = -1,
                           .fail_code = 1,
                           .fail_until_restart = 1 << 30,
                           .exit_after_restart = -1,
                           .sleep_ms = -1 };
    for (int i = 1; i + 1 < argc || (i < argc && strcmp(argv[i], "--grandchild") == 0); i++) {
        if (strcmp(argv[i], "--grandchild") == 0) {
            args->grandchild = 1;
            continue;
        }
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--report") == 0)
            args->report = value;
        else if (strcmp(argv[i - 1], "--env-dir") == 0)
            args->env_dir = value;
        else if (strcmp(argv[i - 1], "--fail-rank") == 0)
            args->fail_rank = atoi(value);
        else if (strcmp(argv[i - 1], "--fail-code") == 0)
            args->fail_code = atoi(value);
        else if (strcmp(argv[i - 1], "--fail-until-restart") == 0)
            args->fail_until_restart = atoi(value);
        else if (strcmp(argv[i - 1], "--exit-after-restart") == 0)
            args->exit_after_restart = atoi(value);
        else if (strcmp(argv[i - 1], "--sleep-ms") == 0)
            args->sleep_ms = atoi(value);
        else if (strcmp(argv[i - 1], "--error-file-text") == 0)
            args->error_file_text = value;
        else if (strcmp(argv[i - 1], "--tag") == 0)
            args->tag = value;
        else if (strcmp(argv[i - 1], "--exit-when-world") == 0)
            args->exit_when_world = atoi(value);
        else if (strcmp(argv[i - 1], "--exit-when-file") == 0)
            args->exit_when_file = value;
    }
}

int main(int argc, char **argv)
{
    worker_args args;
    parse(argc, argv, &args);
    int rank = env_int("RANK", -1), restart = env_int("TORCHELASTIC_RESTART_COUNT", -1);
    pid_t grandchild = 0;
    if (args.grandchild && (grandchild = fork()) == 0) {
        for (;;) pause();
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char line[512];
    snprintf(line, sizeof line,
             "start rank=%d local=%d world=%d restart=%d gen=%s pid=%d child=%d tag=%s t=%lld\n",
             rank, env_int("LOCAL_RANK", -1), env_int("WORLD_SIZE", -1), restart,
             getenv("ELASTIC_GENERATION") ? getenv("ELASTIC_GENERATION") : "?", (int)getpid(),
             (int)grandchild, args.tag ? args.tag : "-",
             (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    if (args.env_dir != NULL) dump_environment(args.env_dir, rank, restart);
    if (args.report != NULL) append_line(args.report, line);
    if (rank == args.fail_rank && restart < args.fail_until_restart) {
        fprintf(stderr, "worker rank %d fails on purpose with code %d\n", rank, args.fail_code);
        const char *error_file = getenv("TORCHELASTIC_ERROR_FILE");
        if (args.error_file_text != NULL && error_file != NULL)
            append_line(error_file, args.error_file_text);
        return args.fail_code;
    }
    if ((args.exit_after_restart >= 0 && restart >= args.exit_after_restart) ||
        (args.exit_when_world > 0 && env_int("WORLD_SIZE", -1) == args.exit_when_world)) {
        if (args.sleep_ms > 0) usleep((useconds_t)args.sleep_ms * 1000);
        printf("rank %d done\n", rank);
        return 0;
    }
    if (args.exit_when_file != NULL) {
        for (int waited_ms = 0; waited_ms < 120000; waited_ms += 20) {
            if (access(args.exit_when_file, F_OK) == 0) {
                printf("rank %d done\n", rank);
                return 0;
            }
            usleep(20000);
        }
        fprintf(stderr, "worker rank %d: %s did not appear in 120 s\n", rank, args.exit_when_file);
        return 1;
    }
    for (;;) pause();
}

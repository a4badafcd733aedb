/*
 * What elasticrun writes on disk: a link planted where a log, a log
 * directory or an error file will go is not followed, and the log tree,
 * event log and error file are private (0700 directories, 0600 files).
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define RUN_MS 30000

/* One worker, no restart: what every run of these tests shares. */
static void files_args_init(elasticrun_args *cmd)
{
    elasticrun_args_init(cmd);
    elasticrun_args_add(cmd, "--nproc-per-node", "1", "--max-restarts", "0");
}

static int run_agent(const char *name, const elasticrun_args *cmd)
{
    pid_t pid = elasticrun_args_spawn(cmd, NULL, name);
    int status = 0;
    if (!agent_harness_wait_exit(pid, RUN_MS, &status)) {
        kill(pid, SIGKILL);
        FAIL("%s did not exit", name);
    }
    ASSERT(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) FAIL("%s does not exist", path);
    return (unsigned)(st.st_mode & 0777);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

TEST_TIMEOUT(agent_log_tree_event_log_and_error_file_are_private, 60)
{
    char logs[512], events[512], error_file[512], report[512], path[900];
    agent_harness_path(logs, sizeof logs, "logs");
    agent_harness_path(events, sizeof events, "events.jsonl");
    agent_harness_path(error_file, sizeof error_file, "root_cause.json");
    agent_harness_path(report, sizeof report, "report");
    elasticrun_args flags;
    files_args_init(&flags);
    elasticrun_args_add(&flags, "--log-dir", logs, "--rdzv-id", "modes", "--event-log", events,
                        "--error-file", error_file, "--no-python", agent_harness_worker(),
                        "--report", report, "--fail-rank", "0", "--fail-code", "3");
    ASSERT(run_agent("modes", &flags) != 0); /* the failure writes the root-cause error file */
    snprintf(path, sizeof path, "%s/modes", logs);
    ASSERT_EQ(mode_of(path), 0700);
    snprintf(path, sizeof path, "%s/modes/gen_1", logs);
    ASSERT_EQ(mode_of(path), 0700);
    snprintf(path, sizeof path, "%s/modes/gen_1/rank_0", logs);
    ASSERT_EQ(mode_of(path), 0700);
    snprintf(path, sizeof path, "%s/modes/gen_1/rank_0/stdout.log", logs);
    ASSERT_EQ(mode_of(path), 0600);
    snprintf(path, sizeof path, "%s/modes/gen_1/rank_0/stderr.log", logs);
    ASSERT_EQ(mode_of(path), 0600);
    ASSERT_EQ(mode_of(events), 0600);
    ASSERT_EQ(mode_of(error_file), 0600);
}

TEST_TIMEOUT(agent_does_not_follow_planted_links, 90)
{
    char logs[512], victim[512], report[512], path[900], other[512];
    agent_harness_path(logs, sizeof logs, "logs");
    agent_harness_path(victim, sizeof victim, "victim");
    agent_harness_path(report, sizeof report, "report");
    agent_harness_path(other, sizeof other, "elsewhere");
    write_text(victim, "precious\n");
    /* Someone prepared L/jobS/gen_1/rank_0/stdout.log as a link to a file
     * the agent may write (the root-owned file). */
    const char *dirs[] = { "", "/jobS", "/jobS/gen_1", "/jobS/gen_1/rank_0" };
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", logs, dirs[i]);
        ASSERT_EQ(mkdir(path, 0700), 0);
    }
    snprintf(path, sizeof path, "%s/jobS/gen_1/rank_0/stdout.log", logs);
    ASSERT_EQ(symlink(victim, path), 0);
    elasticrun_args flags;
    files_args_init(&flags);
    elasticrun_args_add(&flags, "--log-dir", logs, "--rdzv-id", "jobS", "--no-python",
                        agent_harness_worker(), "--report", report, "--exit-after-restart", "0");
    run_agent("stdout_link", &flags);
    char *content = agent_harness_read_file(victim);
    ASSERT(content != NULL);
    ASSERT_STR_EQ(content, "precious\n");
    free(content);
    struct stat st;
    ASSERT_EQ(lstat(path, &st), 0);
    ASSERT(S_ISLNK(st.st_mode)); /* left as it was, not replaced through */
    /* A link in place of the run's directory: refused, nothing written there. */
    ASSERT_EQ(mkdir(other, 0700), 0);
    snprintf(path, sizeof path, "%s/jobL", logs);
    ASSERT_EQ(symlink(other, path), 0);
    elasticrun_args flags2;
    files_args_init(&flags2);
    elasticrun_args_add(&flags2, "--log-dir", logs, "--rdzv-id", "jobL", "--no-python",
                        agent_harness_worker(), "--report", report, "--exit-after-restart", "0");
    ASSERT(run_agent("dir_link", &flags2) != 0);
    snprintf(path, sizeof path, "%s/gen_1", other);
    ASSERT(lstat(path, &st) != 0);
    agent_harness_path(path, sizeof path, "dir_link.err");
    char *err = agent_harness_read_file(path);
    ASSERT(err != NULL);
    if (strstr(err, "jobL") == NULL) FAIL("the refusal does not name the directory: %s", err);
    free(err);
    /* A link planted as the root-cause error file is not written through. */
    char error_link[512];
    agent_harness_path(error_link, sizeof error_link, "error_link.json");
    ASSERT_EQ(symlink(victim, error_link), 0);
    elasticrun_args flags3;
    files_args_init(&flags3);
    elasticrun_args_add(&flags3, "--log-dir", logs, "--rdzv-id", "jobE", "--error-file", error_link,
                        "--no-python", agent_harness_worker(), "--report", report, "--fail-rank",
                        "0");
    ASSERT(run_agent("error_link", &flags3) != 0);
    content = agent_harness_read_file(victim);
    ASSERT(content != NULL);
    ASSERT_STR_EQ(content, "precious\n");
    free(content);
}

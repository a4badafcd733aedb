/*
 * Interpreters started ahead (src/agent/prestart.c), with the defaults a
 * user gets (a Python script, --max-restarts > 0): generation 0's rank 1
 * fails once the agent's interpreters for the next generation exist; the
 * restarted ranks must be those processes (their pids existed before the
 * failure) and see what a spawned worker sees: the same environment as
 * generation 0's spawned workers but for the five per-generation variables
 * (which carry generation 1's values), __name__ == "__main__", sys.argv,
 * sys.path[0] as CPython sets it (an import from the script's directory
 * works) and __file__. And when they die before they are needed, the ranks
 * are started afresh, said once on the console.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3"

/* The trainer: dumps its environment and facts per generation and rank;
 * generation 0's rank 1 waits (with a deadline) for WAIT_FOR and exits 3. */
static const char trainer_py[] =
    "import os, sys, time\n"
    "import sibling\n"
    "out, gen, rank = os.environ['DUMP_DIR'], os.environ['TORCHELASTIC_RESTART_COUNT'], "
    "os.environ['RANK']\n"
    "with open(os.path.join(out, 'env_%s_%s' % (gen, rank)), 'w') as f:\n"
    "    f.writelines('%s=%s\\n' % kv for kv in sorted(os.environ.items()))\n"
    "with open(os.path.join(out, 'facts_%s_%s' % (gen, rank)), 'w') as f:\n"
    "    f.write('pid=%d\\nname=%s\\nargv=%s\\npath0=%s\\nfile=%s\\nsibling=%s\\n' % (os.getpid(), "
    "__name__, '|'.join(sys.argv), sys.path[0], __file__, sibling.VALUE))\n"
    "def ahead(agent):\n"
    "    found = []\n"
    "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "        try:\n"
    "            with open('/proc/%s/stat' % pid) as f:\n"
    "                ppid = int(f.read().rsplit(')', 1)[1].split()[1])\n"
    "            with open('/proc/%s/cmdline' % pid, 'rb') as f:\n"
    "                cmd = f.read()\n"
    "        except OSError:\n"
    "            continue\n"
    "        if ppid == agent and b'_elastic_prestart' in cmd:\n"
    "            found.append(pid)\n"
    "    return found\n"
    "def died():\n"
    "    return [n[5:] for n in os.listdir(out) if n.startswith('died_')]\n"
    "if gen == '0' and rank == '1':\n"
    "    probe = ahead if os.environ['WAIT_FOR'] == 'ahead' else lambda agent: died()\n"
    "    deadline = time.monotonic() + 60\n"
    "    pids = probe(os.getppid())\n"
    "    while len(pids) < int(os.environ['LOCAL_WORLD_SIZE']) and time.monotonic() < deadline:\n"
    "        time.sleep(0.05)\n"
    "        pids = probe(os.getppid())\n"
    "    with open(os.path.join(out, 'before_failure'), 'w') as f:\n"
    "        f.write(' %s \\n' % ' '.join(pids))\n"
    "    sys.exit(3)\n"
    "if gen == '0':\n"
    "    time.sleep(120)  # stopped by the agent when rank 1 fails\n";

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* <tmpdir>/app/{trainer,sibling,die_ahead}.py and <tmpdir>/dump. */
static void make_app(char *app, size_t app_size, char *dump, size_t dump_size)
{
    agent_harness_path(app, app_size, "app");
    agent_harness_path(dump, dump_size, "dump");
    ASSERT_EQ(mkdir(app, 0755), 0);
    ASSERT_EQ(mkdir(dump, 0755), 0);
    write_file(app, "trainer.py", trainer_py);
    write_file(app, "sibling.py", "VALUE = 'from the script directory'\n");
    /* imported ahead (ELASTIC_PRESTART_IMPORTS) in the failure test: dies at once */
    write_file(app, "die_ahead.py",
               "import os\n"
               "open(os.path.join(os.environ['DUMP_DIR'], 'died_%d' % os.getpid()), 'w').close()\n"
               "os._exit(7)\n");
}

static char *read_dump(const char *dump, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dump, name);
    char *text = agent_harness_read_file(path);
    if (text == NULL) FAIL("%s is missing", path);
    return text;
}

/* Runs elasticrun on the trainer to its end (exit 0); returns its stderr. */
static char *run_trainer(const char *app, const char *dump, const char *wait_for,
                         const char *imports)
{
    char script[1100], dump_env[1100], wait_env[64], path_env[1100];
    snprintf(script, sizeof script, "%s/trainer.py", app);
    snprintf(dump_env, sizeof dump_env, "DUMP_DIR=%s", dump);
    snprintf(wait_env, sizeof wait_env, "WAIT_FOR=%s", wait_for);
    snprintf(path_env, sizeof path_env, "PYTHONPATH=%s", app); /* -m trainer finds it */
    bool module = strcmp(wait_for, "module") == 0;
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    char events[512];
    agent_harness_path(events, sizeof events, "events.jsonl");
    elasticrun_args_add(&cmd, "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                        "--event-log", events);
    if (module)
        elasticrun_args_add(&cmd, "-m", "trainer", "--flag", "two words");
    else
        elasticrun_args_add(&cmd, script, "--flag", "two words");
    const char *env[] = { "PYTHON_EXEC=" PYTHON, dump_env, module ? "WAIT_FOR=ahead" : wait_env,
                          module ? path_env : imports, NULL };
    pid_t agent = elasticrun_args_spawn(&cmd, env, "agent");
    int code = agent_harness_exit_code(agent, test_scaled_ms(90000));
    char path[512];
    char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, "agent.err"));
    if (code != 0) FAIL("elasticrun exited %d:\n%s", code, err ? err : "");
    return err;
}

/* "KEY=" of a dump line, the key included. */
static size_t key_len(const char *line)
{
    return strcspn(line, "=\n") + 1;
}

static bool per_generation(const char *line)
{
    static const char *const keys[] = { "ELASTIC_GENERATION=", "ELASTIC_STORE_PREFIX=",
                                        "MASTER_PORT=", "TORCHELASTIC_ERROR_FILE=",
                                        "TORCHELASTIC_RESTART_COUNT=" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strncmp(line, keys[i], strlen(keys[i])) == 0) return true;
    return false;
}

static const char *next_line(const char *line)
{
    line += strcspn(line, "\n");
    return *line == '\n' ? line + 1 : line;
}

/* Every line of `a` is in `b` (per-generation keys: the key only). */
static void assert_lines_in(const char *a, const char *b, const char *what)
{
    for (const char *line = a; *line != '\0'; line = next_line(line)) {
        size_t len = per_generation(line) ? key_len(line) : strcspn(line, "\n") + 1;
        bool found = false;
        for (const char *at = b; *at != '\0' && !found; at = next_line(at))
            found = strncmp(at, line, len) == 0;
        if (!found) FAIL("%s: %.*s", what, (int)strcspn(line, "\n"), line);
    }
}

static void assert_has(const char *text, const char *needle)
{
    if (strstr(text, needle) == NULL) FAIL("no \"%s\" in:\n%s", needle, text);
}

/* The journal's worker_started events of generation G name how each process
 * came to be: `process` is "spawned" or "started_ahead", `count` times. */
static void assert_started(uint64_t generation, const char *process, int count)
{
    char path[512], want[160];
    char *events = agent_harness_read_file(agent_harness_path(path, sizeof path, "events.jsonl"));
    if (events == NULL) FAIL("no event log");
    snprintf(want, sizeof want, "\"process\":\"%s\"", process);
    char generation_field[48];
    snprintf(generation_field, sizeof generation_field, "\"generation\":%llu,",
             (unsigned long long)generation);
    int seen = 0;
    for (const char *line = events; *line != '\0'; line = next_line(line)) {
        size_t len = strcspn(line, "\n");
        char one[2048];
        snprintf(one, sizeof one, "%.*s", (int)len, line);
        if (strstr(one, "\"event\":\"worker_started\"") != NULL &&
            strstr(one, generation_field) != NULL && strstr(one, want) != NULL)
            seen++;
    }
    if (seen != count)
        FAIL("generation %llu: %d worker_started with %s, want %d:\n%s",
             (unsigned long long)generation, seen, want, count, events);
    free(events);
}

TEST_TIMEOUT(agent_prestart_restarted_ranks_are_the_interpreters_started_ahead, 120)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    char app[512], dump[512];
    make_app(app, sizeof app, dump, sizeof dump);
    free(run_trainer(app, dump, "ahead", NULL));
    char *before = read_dump(dump, "before_failure");
    for (int rank = 0; rank < 2; rank++) {
        char name[32], line[96];
        snprintf(name, sizeof name, "facts_1_%d", rank);
        char *facts = read_dump(dump, name);
        snprintf(line, sizeof line, " %ld ", agent_harness_line_field(facts, "pid"));
        if (strstr(before, line) == NULL)
            FAIL("rank %d (pid%s) was not started ahead (%s)", rank, line, before);
        assert_has(facts, "\nname=__main__\n");
        char expect[1400];
        snprintf(expect, sizeof expect, "\nargv=%s/trainer.py|--flag|two words\n", app);
        assert_has(facts, expect);
        char *real = realpath(app, NULL);
        ASSERT(real != NULL);
        snprintf(expect, sizeof expect, "\npath0=%s\nfile=%s/trainer.py\n", real, app);
        free(real);
        assert_has(facts, expect);
        assert_has(facts, "\nsibling=from the script directory\n");
        free(facts);
        /* the environment: generation 0's spawned worker's, both ways */
        char env0[32], env1[32];
        snprintf(env0, sizeof env0, "env_0_%d", rank);
        snprintf(env1, sizeof env1, "env_1_%d", rank);
        char *spawned = read_dump(dump, env0), *ahead = read_dump(dump, env1);
        assert_lines_in(spawned, ahead, "a spawned worker's variable differs or is missing");
        assert_lines_in(ahead, spawned, "a variable a spawned worker does not have");
        assert_has(ahead, "TORCHELASTIC_RESTART_COUNT=1\n");
        assert_has(ahead, "\nELASTIC_GENERATION=2\n");
        snprintf(expect, sizeof expect, "/gen_2/rank_%d/error.json\n", rank);
        assert_has(ahead, expect);
        assert_has(ahead, "/gen/2/\n");
        free(spawned);
        free(ahead);
    }
    free(before);
    assert_started(1, "spawned", 2);
    assert_started(2, "started_ahead", 2);
}

TEST_TIMEOUT(agent_prestart_that_died_falls_back_to_a_spawn_said_once, 120)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    char app[512], dump[512];
    make_app(app, sizeof app, dump, sizeof dump);
    char *err = run_trainer(app, dump, "died", "ELASTIC_PRESTART_IMPORTS=die_ahead");
    const char *said = strstr(err, "interpreters started ahead off: local rank 0's interpreter "
                                   "started ahead (pid ");
    if (said == NULL) FAIL("the fallback is not said:\n%s", err);
    assert_has(said, "ended (exit code 7) before it was needed; workers start afresh");
    if (strstr(said + 1, "interpreters started ahead off") != NULL)
        FAIL("said more than once:\n%s", err);
    char *before = read_dump(dump, "before_failure");
    for (int rank = 0; rank < 2; rank++) {
        char name[32], line[96];
        snprintf(name, sizeof name, "facts_1_%d", rank);
        char *facts = read_dump(dump, name);
        snprintf(line, sizeof line, " %ld ", agent_harness_line_field(facts, "pid"));
        if (strstr(before, line) != NULL) FAIL("rank %d ran in a dead interpreter?", rank);
        assert_has(facts, "\nname=__main__\n");
        free(facts);
    }
    free(before);
    assert_started(2, "spawned", 2);
    free(err);
}

/* python -m: sys.argv[0] is the module's file, __name__ "__main__", as CPython sets them. */
TEST_TIMEOUT(agent_prestart_runs_a_module_as_python_m_does, 120)
{
    if (access(PYTHON, X_OK) != 0) SKIP(PYTHON " is not installed");
    char app[512], dump[512];
    make_app(app, sizeof app, dump, sizeof dump);
    free(run_trainer(app, dump, "module", NULL));
    char *before = read_dump(dump, "before_failure");
    for (int rank = 0; rank < 2; rank++) {
        char name[32], line[96], expect[1400];
        snprintf(name, sizeof name, "facts_1_%d", rank);
        char *facts = read_dump(dump, name);
        snprintf(line, sizeof line, " %ld ", agent_harness_line_field(facts, "pid"));
        if (strstr(before, line) == NULL)
            FAIL("rank %d (pid%s) was not started ahead (%s)", rank, line, before);
        assert_has(facts, "\nname=__main__\n");
        snprintf(expect, sizeof expect, "\nargv=%s/trainer.py|--flag|two words\n", app);
        assert_has(facts, expect);
        assert_has(facts, "\nsibling=from the script directory\n");
        free(facts);
    }
    free(before);
}

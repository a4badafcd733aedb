/* The site health command: exit 0 healthy; otherwise fatal with its first
 * line; killed (with what it started) past its timeout; output bounded. */
#include "support/health_fixture.h"
#include "common/clock.h"

#include <errno.h>
#include <signal.h>

static health__report *run(const char *cmd, int timeout_ms)
{
    health__report *r = health_new_report();
    health__site_check(cmd, timeout_ms, NULL, r);
    ASSERT_EQ(r->count, 1);
    ASSERT_STR_EQ(r->findings[0].check, "site_cmd");
    return r;
}

TEST(health_site_command_exit_zero_is_healthy)
{
    health__report *r = run("echo all good; exit 0", 5000);
    ASSERT_EQ(r->findings[0].verdict, HEALTH__OK);
    ASSERT(strstr(r->findings[0].text, "all good") != NULL);
    free(r);
}

TEST(health_site_command_failing_is_fatal_with_its_first_line)
{
    health__report *r =
        run("echo; echo 'dcgm: GPU 3 failed the memory test'; echo more >&2; exit 3", 5000);
    ASSERT_EQ(r->findings[0].verdict, HEALTH__FATAL);
    ASSERT_EQ(r->findings[0].value, 3);
    ASSERT_STR_EQ(r->findings[0].text, "exit 3: dcgm: GPU 3 failed the memory test");
    free(r);
    r = run("exit 1", 5000);
    ASSERT_STR_EQ(r->findings[0].text, "exit 1: (no output)");
    free(r);
    r = run("kill -9 $$", 5000);
    ASSERT_EQ(r->findings[0].verdict, HEALTH__FATAL);
    ASSERT(strstr(r->findings[0].text, "killed by signal 9") != NULL);
    free(r);
}

TEST(health_site_command_that_hangs_is_killed_at_its_timeout)
{
    char pidfile[4096], cmd[8192];
    snprintf(pidfile, sizeof pidfile, "%s/child", test_tmpdir());
    /* It starts a child of its own (which holds the output pipe) and hangs. */
    snprintf(cmd, sizeof cmd, "echo checking; sleep 60 & echo $! > %s; wait", pidfile);
    uint64_t started = elastic__now_ms();
    health__report *r = run(cmd, 300);
    uint64_t took = elastic__now_ms() - started;
    ASSERT_EQ(r->findings[0].verdict, HEALTH__FATAL);
    ASSERT_EQ(r->findings[0].value, -1);
    ASSERT(strstr(r->findings[0].text, "did not finish in 300 ms: checking") != NULL);
    ASSERT(took >= 300);
    ASSERT(took < (uint64_t)test_scaled_ms(3000));
    FILE *f = fopen(pidfile, "r");
    ASSERT(f != NULL);
    int pid = 0;
    ASSERT_EQ(fscanf(f, "%d", &pid), 1);
    fclose(f);
    /* The grandchild went with its process group (it may linger as a zombie of init). */
    uint64_t deadline = elastic__now_ms() + (uint64_t)test_scaled_ms(5000);
    for (;;) {
        char stat_path[64], line[256] = "";
        snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", pid);
        FILE *s = fopen(stat_path, "r");
        if (s == NULL) break;
        char *got = fgets(line, sizeof line, s);
        fclose(s);
        char *close_paren = got != NULL ? strrchr(line, ')') : NULL;
        if (close_paren != NULL && close_paren[2] == 'Z') break;
        ASSERT(elastic__ms_left(deadline) > 0);
        usleep(10000);
    }
    free(r);
}

TEST(health_site_command_output_is_bounded_and_never_blocks_it)
{
    uint64_t started = elastic__now_ms();
    health__report *r = run("head -c 2000000 /dev/zero | tr '\\0' 'x'; echo; exit 0", 20000);
    ASSERT_EQ(r->findings[0].verdict, HEALTH__OK);
    ASSERT(strlen(r->findings[0].text) < HEALTH__TEXT_MAX);
    ASSERT(elastic__now_ms() - started < (uint64_t)test_scaled_ms(10000));
    free(r);
}

TEST(health_site_command_runs_in_a_round_after_the_other_checks)
{
    health__config config;
    health__config_defaults(&config);
    config.gpu = false;
    config.network = false;
    config.site_cmd = "echo 'node prolog: /scratch is read-only'; exit 2";
    config.site_timeout_ms = 5000;
    health__monitor *m = NULL;
    ASSERT_OK(health__open(&config, &m));
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(r->worst, HEALTH__FATAL);
    ASSERT_STR_EQ(health_expect(r, "site_cmd", -1, HEALTH__FATAL)->text,
                  "exit 2: node prolog: /scratch is read-only");
    ASSERT(r->wall_ns >= r->cpu_ns / 4); /* the wall time includes the command */
    health__close(m);
    free(r);
}

/* The site's command gets the agent's environment without its secrets: a
 * script that logs its environment spills no token or etcd password. */
TEST(health_site_command_gets_no_store_token_or_etcd_password)
{
    setenv("ELASTIC_STORE_TOKEN", "the-token", 1);
    setenv("ELASTIC_ETCD_PASSWORD", "the-password", 1);
    setenv("ELASTIC_SITE_KEEPS", "this", 1);
    health__report *r = run("env | grep -c -e the-token -e the-password; "
                            "test \"$ELASTIC_SITE_KEEPS\" = this",
                            5000);
    ASSERT_EQ(r->findings[0].verdict, HEALTH__OK);
    ASSERT(strstr(r->findings[0].text, "0") != NULL);
    free(r);
}

/* The hang probe end to end: a worker that stops heartbeating is detected
 * within the timeout plus one probe interval, its stacks reach its log (by
 * gdb, or by the library's own handler when no debugger is there), and a
 * replacement in a new generation is watched afresh. */
#include "support/probe_harness.h"
#include "probe/monitor.h"

#include <sys/stat.h>

#define HANG_TIMEOUT_MS 1000
#define INTERVAL_MS     200

static bool one_failure(harness *h)
{
    return h->failure_count >= 1;
}
static bool first_exited(harness *h)
{
    return !h->running[0];
}

static bool replacement_beating(harness *h)
{
    elastic__text text;
    elastic__text_init(&text, 1 << 20);
    monitor__render(h->monitor, &text);
    bool beating = strstr(text.data, "elastic_worker_step{rank=\"0\"") != NULL;
    elastic__text_free(&text);
    return beating;
}

static void check_detection(const harness *h)
{
    const probe__failure *f = &h->failures[0];
    ASSERT_STR_EQ(f->probe, "hang");
    ASSERT_EQ(f->rank, 0);
    ASSERT_EQ(f->last_step, 20);
    /* Detected by the first tick after the timeout; slack for a loaded machine. */
    ASSERT(f->silent_ms > HANG_TIMEOUT_MS);
    if (f->silent_ms > (uint64_t)test_scaled_ms(HANG_TIMEOUT_MS + INTERVAL_MS + 300))
        FAIL("detected after %llu ms of silence", (unsigned long long)f->silent_ms);
    ASSERT(strstr(f->reason, "rank 0") != NULL && strstr(f->reason, "last step 20") != NULL);
}

TEST_TIMEOUT(probe_hang_detected_with_stacks_in_log, 90)
{
    if (probe__stack_debugger() == NULL) SKIP("no gdb or eu-stack on PATH");
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = HANG_TIMEOUT_MS;
    h.opts.interval_ms = INTERVAL_MS;
    h.opts.stack_dump_budget_ms =
        15000; /* room for the debugger (a 1 s timeout alone would skip it) */
    harness_start(&h);
    const char *args[] = { "hang", "20", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_run_until(&h, one_failure, 60000, "the hang to be reported");
    check_detection(&h);
    const char *log = harness_log(&h, 0);
    if (strstr(log, "elastic: stacks of pid") == NULL || strstr(log, "hang_here") == NULL)
        FAIL("no stack with hang_here in the log:\n%s", log);

    /* Recovery as the agent does it: kill, next generation, a new process. */
    harness_kill(&h, 0);
    harness_run_until(&h, first_exited, 10000, "the hung worker to die");
    harness_new_generation(&h, 1);
    const char *steady[] = { "steady", "10", NULL };
    harness_spawn(&h, 0, 0, steady);
    harness_run_until(&h, replacement_beating, 20000, "the replacement's heartbeat");
    ASSERT_EQ(h.failure_count, 1);
    harness_stop(&h);
}

TEST_TIMEOUT(probe_hang_without_debugger_uses_worker_backtrace, 60)
{
    char empty_dir[4200];
    snprintf(empty_dir, sizeof empty_dir, "%s/empty-path", test_tmpdir());
    mkdir(empty_dir, 0700);
    setenv("PATH", empty_dir, 1); /* no gdb, no eu-stack */
    ASSERT(probe__stack_debugger() == NULL);
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = HANG_TIMEOUT_MS;
    h.opts.interval_ms = INTERVAL_MS;
    harness_start(&h);
    const char *args[] = { "hang", "20", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_run_until(&h, one_failure, 30000, "the hang to be reported");
    check_detection(&h);
    const char *log = harness_log(&h, 0);
    if (strstr(log, "backtrace requested by the agent's hang probe") == NULL ||
        strstr(log, "end of backtrace") == NULL)
        FAIL("no backtrace in the log:\n%s", log);
    harness_stop(&h);
}

TEST_TIMEOUT(probe_startup_timeout_without_first_beat, 60)
{
    char empty_dir[4200];
    snprintf(empty_dir, sizeof empty_dir, "%s/empty-path", test_tmpdir());
    mkdir(empty_dir, 0700);
    setenv("PATH", empty_dir, 1); /* keep it quick: the signal path */
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = 300;
    h.opts.startup_timeout_ms = 1500;
    h.opts.interval_ms = 100;
    harness_start(&h);
    const char *args[] = { "silent", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_run_until(&h, one_failure, 30000, "the startup timeout");
    ASSERT_STR_EQ(h.failures[0].probe, "startup");
    ASSERT(h.failures[0].silent_ms >= 1500); /* the startup timeout applied, not the hang timeout */
    harness_stop(&h);
}

/* A short timeout leaves no room for a debugger (attaching takes most of a
 * second): the worker's own backtrace is used, so the group is restarted
 * within the timeout + 10% (measured in bench/agent_bench). */
TEST_TIMEOUT(probe_hang_short_timeout_uses_the_worker_backtrace_not_a_debugger, 60)
{
    if (probe__stack_debugger() == NULL) SKIP("no gdb or eu-stack on PATH: nothing to skip");
    harness h;
    harness_init(&h, 1);
    h.opts.hang_timeout_ms = HANG_TIMEOUT_MS;
    h.opts.interval_ms = INTERVAL_MS;
    harness_start(&h);
    const char *args[] = { "hang", "20", NULL };
    harness_spawn(&h, 0, 0, args);
    harness_run_until(&h, one_failure, 30000, "the hang to be reported");
    check_detection(&h);
    const char *log = harness_log(&h, 0);
    if (strstr(log, "backtrace requested by the agent's hang probe") == NULL ||
        strstr(log, "elastic: stacks of pid") != NULL)
        FAIL("expected the worker's own backtrace and no debugger:\n%s", log);
    harness_stop(&h);
}

/*
 * elasticrun agents with --rdzv-backend etcd-v3 against a real etcd on
 * loopback, training with store-mode checkpoints (ckpt_step_worker): the
 * node hosting the job's store can die and the survivors re-form on a new
 * store and resume from the checkpoint; etcd's leader can die without a new
 * generation; etcd gone past the lease fences every node.
 */
#include "support/agent_harness.h"
#include "support/elasticrun_args.h"
#include "support/etcd_fixture.h"
#include "test.h"
#include "common/dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#define FORM_MS 60000

typedef struct etcd_job {
    char report[512];
    char ckpt_dir[512];
    char worker[512];
    const char *endpoints;
    const char *run_id;
    const char *conf;
    const char *max_restarts;
    const char *exit_on_store_loss;
} etcd_job;

static void etcd_job_init(etcd_job *j, const etcd_cluster *c, const char *run_id, const char *conf)
{
    agent_harness_path(j->report, sizeof j->report, "report");
    agent_harness_path(j->ckpt_dir, sizeof j->ckpt_dir, "ckpt");
    snprintf(j->worker, sizeof j->worker, "%s", test_helper_path("ckpt_step_worker"));
    j->endpoints = c->endpoints;
    j->run_id = run_id;
    j->conf = conf;
    j->max_restarts = "3";
    j->exit_on_store_loss = "0";
}

static pid_t etcd_job_agent_env(const etcd_job *j, const char *name, const char *nodes,
                                const char *const *env)
{
    elasticrun_args cmd;
    elasticrun_args_init(&cmd);
    elasticrun_args_add(&cmd, "--nnodes", nodes, "--nproc-per-node", "1", "--rdzv-backend", "etcd",
                        "--rdzv-endpoint", j->endpoints, "--rdzv-id", j->run_id);
    /* No conf: the defaults users get. */
    if (j->conf != NULL && j->conf[0] != '\0') elasticrun_args_add(&cmd, "--rdzv-conf", j->conf);
    elasticrun_args_add(&cmd, "--local-addr", "127.0.0.1", "--max-restarts", j->max_restarts,
                        "--no-python", j->worker, "--dir", j->ckpt_dir, "--report", j->report,
                        "--step-ms", "100", "--exit-on-store-loss", j->exit_on_store_loss);
    return elasticrun_args_spawn(&cmd, env, name);
}

/* Without a configured token: each store host makes up one, published in etcd. */
static pid_t etcd_job_agent(const etcd_job *j, const char *name, const char *nodes)
{
    return etcd_job_agent_env(j, name, nodes, NULL);
}

static void stop_agents(pid_t *agents, int n)
{
    for (int i = 0; i < n; i++)
        if (agents[i] > 0) kill(agents[i], SIGTERM);
    for (int i = 0; i < n; i++) {
        int status;
        if (agents[i] > 0 && !agent_harness_wait_exit(agents[i], 20000, &status))
            kill(agents[i], SIGKILL);
    }
}

/* The n-th line with every needle, or a failure naming what was awaited. */
static void nth_line(const char *path, const char *const *needles, int n, char *out, size_t size)
{
    if (!agent_harness_nth_line(path, needles, n, out, size))
        FAIL("no line %d with %s in %s", n, needles[0], path);
}

static long commits_seen(const char *report, const char *gen_needle)
{
    const char *needles[] = { "commit ", gen_needle, NULL };
    long best = 0;
    char line[256];
    for (int i = 0; agent_harness_nth_line(report, needles, i, line, sizeof line); i++) {
        long step = agent_harness_line_field(line, "step");
        if (step > best) best = step;
    }
    return best;
}

TEST_TIMEOUT(agent_etcd_survivors_reform_on_a_new_store_when_its_host_dies, 180)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    etcd_job j;
    /* keep-alive timeout 1 s: 0.2 s x 5 */
    /* The defaults users get: the survivors do not wait for the dead host's
     * lease (it is counted gone the moment its store resets). */
    etcd_job_init(&j, &c, "storehost", NULL);
    /* The trainers fail when their store vanishes, as real ones do, and the
     * job has no restart budget: the host's loss must cost none. */
    j.max_restarts = "0";
    j.exit_on_store_loss = "1";
    pid_t agents[3];
    char names[3][32];
    for (int i = 0; i < 3; i++) {
        snprintf(names[i], sizeof names[i], "agent%d", i);
        agents[i] = etcd_job_agent(&j, names[i], "2:3");
    }
    const char *three[] = { "resume ", "world=3 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, three, 3, FORM_MS), 3);
    char line[256];
    const char *rank0[] = { "resume ", "world=3 ", "rank=0 ", NULL };
    nth_line(j.report, rank0, 0, line, sizeof line);
    long gen = agent_harness_line_field(line, "gen");
    char gen_needle[32];
    snprintf(gen_needle, sizeof gen_needle, "gen=%ld ", gen);
    /* A few steps committed through the generation's store. */
    const char *committed[] = { "commit ", gen_needle, NULL };
    ASSERT(agent_harness_wait_lines(j.report, committed, 3, FORM_MS) >= 3);
    /* Group rank 0's agent hosts the store: it is rank 0's worker's parent. */
    pid_t host = (pid_t)agent_harness_line_field(line, "ppid");
    int victim = -1;
    for (int i = 0; i < 3; i++)
        if (agents[i] == host) victim = i;
    if (victim < 0) FAIL("rank 0's parent %d is none of the agents", (int)host);
    long before = commits_seen(j.report, gen_needle);
    uint64_t killed_at = etcd_fixture_now_ms();
    ASSERT_EQ(kill(host, SIGKILL), 0);
    int status;
    ASSERT(agent_harness_wait_exit(host, 10000, &status));
    agents[victim] = -1;
    const char *two[] = { "resume ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, two, 2, FORM_MS), 2);
    uint64_t resumed_at = etcd_fixture_now_ms();
    for (int i = 0; i < 2; i++) {
        nth_line(j.report, two, i, line, sizeof line);
        long step = agent_harness_line_field(line, "step");
        /* From the checkpoint: at least what was committed before the kill. */
        if (step < before)
            FAIL("resumed at step %ld, but step %ld was committed before the kill", step, before);
        ASSERT(agent_harness_line_field(line, "gen") > gen);
    }
    /* Training goes on: steps commit through the new host's store. */
    nth_line(j.report, two, 0, line, sizeof line);
    char new_gen[32];
    snprintf(new_gen, sizeof new_gen, "gen=%ld ", agent_harness_line_field(line, "gen"));
    const char *later[] = { "commit ", new_gen, NULL };
    ASSERT(agent_harness_wait_lines(j.report, later, 2, FORM_MS) >= 2);
    uint64_t took = resumed_at - killed_at;
    printf("# store host killed -> survivors resumed from the checkpoint in %llu ms\n",
           (unsigned long long)took);
    if (took > (uint64_t)test_scaled_ms(2500))
        FAIL("re-formed in %llu ms (> 2.5 s)", (unsigned long long)took);
    stop_agents(agents, 3);
    etcd_cluster_stop(&c);
}

TEST_TIMEOUT(agent_etcd_unreachable_fences_every_node, 120)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    etcd_job j;
    etcd_job_init(
        &j, &c, "fence",
        "keep_alive_interval=0.2,keep_alive_max_attempt=5,read_timeout=2,join_timeout=10");
    /* This job has a configured token: the store and the workers use it. */
    char token_path[512], token_env[600];
    agent_harness_path(token_path, sizeof token_path, "token");
    FILE *token = fopen(token_path, "w");
    ASSERT(token != NULL);
    fputs("a configured token with spaces\n", token);
    fclose(token);
    snprintf(token_env, sizeof token_env, "ELASTIC_STORE_TOKEN_FILE=%s", token_path);
    const char *env[] = { token_env, NULL };
    pid_t agents[2] = { etcd_job_agent_env(&j, "agent0", "2", env),
                        etcd_job_agent_env(&j, "agent1", "2", env) };
    const char *two[] = { "resume ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, two, 2, FORM_MS), 2);
    /* Steps commit through the store: the workers hold the right token. */
    const char *committed[] = { "commit ", NULL };
    ASSERT(agent_harness_wait_lines(j.report, committed, 2, FORM_MS) >= 2);
    pid_t workers[2];
    char line[256];
    for (int i = 0; i < 2; i++) {
        nth_line(j.report, two, i, line, sizeof line);
        workers[i] = (pid_t)agent_harness_line_field(line, "pid");
    }
    uint64_t cut = etcd_fixture_now_ms();
    kill(c.m[0].pid, SIGSTOP); /* etcd unreachable: frozen, every call times out */
    for (int i = 0; i < 2; i++) {
        if (!agent_harness_wait_gone(workers[i], test_scaled_ms(10000)))
            FAIL("worker %d outlived the fence", i);
    }
    uint64_t took = etcd_fixture_now_ms() - cut;
    printf("# etcd frozen -> every worker stopped in %llu ms\n", (unsigned long long)took);
    /* keep-alive timeout (1 s) + 1 s */
    if (took > (uint64_t)test_scaled_ms(2000))
        FAIL("workers stopped %llu ms after etcd froze", (unsigned long long)took);
    /* Fenced, each waits for etcd to come back until its join_timeout (10 s), then gives up. */
    for (int i = 0; i < 2; i++) {
        int status;
        if (!agent_harness_wait_exit(agents[i], test_scaled_ms(30000), &status))
            FAIL("agent %d did not exit 30 s after etcd froze (join_timeout 10 s)", i);
        uint64_t exited = etcd_fixture_now_ms() - cut;
        printf("# agent%d gave up on etcd %llu ms after it froze\n", i, (unsigned long long)exited);
        if (exited < 9000) /* join_timeout runs from the rejoin, after the fence */
            FAIL("agent %d gave up %llu ms after etcd froze, before its join_timeout of 10 s", i,
                 (unsigned long long)exited);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
        char path[512], name[32];
        snprintf(name, sizeof name, "agent%d.err", i);
        char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
        ASSERT(err != NULL);
        if (strstr(err, "fenced out of generation") == NULL)
            FAIL("agent%d has no fencing line:\n%s", i, err);
        if (strstr(err, "the job failed: lost etcd at") == NULL)
            FAIL("agent%d does not say it lost etcd:\n%s", i, err);
        free(err);
    }
    kill(c.m[0].pid, SIGCONT);
    etcd_cluster_stop(&c);
}

/* ---- etcd's own faults, with the defaults users get ------------------------------ */

/* The default lease: what the agent asks etcd for with no keep_alive_* set
 * (docs/RDZV.md), and etcd's default election timeout. */
#define DEFAULT_TTL_MS   5000
#define ETCD_ELECTION_MS 1000

typedef struct ha_job {
    etcd_cluster c;
    etcd_job j;
    pid_t agents[2];
    char gen_needle[32];
    long before; /* the last step committed before the fault */
} ha_job;

/* A 3-member etcd with etcd's timing, two agents with default settings, a
 * few steps committed. Member 0 comes first in every agent's endpoints: the
 * one their calls go to until it fails them. */
static void ha_job_start(ha_job *h, const char *run_id)
{
    etcd_cluster_start_defaults(&h->c);
    etcd_job_init(&h->j, &h->c, run_id, NULL);
    h->agents[0] = etcd_job_agent(&h->j, "agent0", "2");
    h->agents[1] = etcd_job_agent(&h->j, "agent1", "2");
    const char *two[] = { "resume ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(h->j.report, two, 2, FORM_MS), 2);
    char line[256];
    nth_line(h->j.report, two, 0, line, sizeof line);
    snprintf(h->gen_needle, sizeof h->gen_needle, "gen=%ld ",
             agent_harness_line_field(line, "gen"));
    const char *committed[] = { "commit ", h->gen_needle, NULL };
    ASSERT(agent_harness_wait_lines(h->j.report, committed, 3, FORM_MS) >= 3);
    h->before = commits_seen(h->j.report, h->gen_needle);
}

/* The job trained on in the same generation for longer than a whole lease
 * after the fault (steps of 100 ms), nobody fenced, no new generation. */
static void ha_job_kept_its_generation(ha_job *h, const char *fault)
{
    const char *more[] = { "commit ", h->gen_needle, NULL };
    int want = (int)h->before + (DEFAULT_TTL_MS + 2000) / 100;
    uint64_t since = etcd_fixture_now_ms();
    if (agent_harness_wait_lines(h->j.report, more, want, FORM_MS) < want) {
        for (int i = 0; i < 2; i++) { /* what the agents said about it */
            char path[512], name[32];
            snprintf(name, sizeof name, "agent%d.err", i);
            char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
            size_t len = err != NULL ? strlen(err) : 0;
            printf("agent%d (last of its log):\n%s\n", i,
                   err != NULL ? err + (len > 3000 ? len - 3000 : 0) : "");
            free(err);
        }
        FAIL("after %s the job did not reach step %d in its generation", fault, want);
    }
    const char *any_resume[] = { "resume ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(h->j.report, any_resume, 3, 10), 2); /* no new generation */
    for (int i = 0; i < 2; i++) {
        if (!agent_harness_process_alive(h->agents[i])) FAIL("agent%d exited after %s", i, fault);
        char path[512], name[32];
        snprintf(name, sizeof name, "agent%d.err", i);
        char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
        if (err != NULL && strstr(err, "fenced") != NULL)
            FAIL("agent%d fenced itself after %s:\n%s", i, fault, err);
        free(err);
    }
    printf("# %s: %d steps in generation %s after it (%llu ms), nobody fenced\n", fault,
           want - (int)h->before, h->gen_needle,
           (unsigned long long)(etcd_fixture_now_ms() - since));
    stop_agents(h->agents, 2);
    etcd_cluster_stop(&h->c);
}

static int wait_leader(etcd_cluster *c, int timeout_ms)
{
    uint64_t deadline = etcd_fixture_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    int leader;
    while ((leader = etcd_cluster_leader(c)) < 0 && etcd_fixture_now_ms() < deadline) {
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
    return leader;
}

TEST_TIMEOUT(agent_etcd_job_keeps_its_generation_when_the_etcd_leader_dies, 180)
{
    ha_job h;
    ha_job_start(&h, "leader");
    int leader = wait_leader(&h.c, 10000);
    if (leader < 0) FAIL("no etcd leader");
    uint64_t killed = etcd_fixture_now_ms();
    etcd_member_kill(&h.c, leader);
    int next = wait_leader(&h.c, 15000);
    if (next < 0) FAIL("no new etcd leader after killing member %d", leader);
    printf("# etcd leader (member %d) SIGKILLed -> member %d leads %llu ms later\n", leader, next,
           (unsigned long long)(etcd_fixture_now_ms() - killed));
    ha_job_kept_its_generation(&h, "the etcd leader's SIGKILL");
}

TEST_TIMEOUT(agent_etcd_job_keeps_its_generation_when_an_etcd_member_restarts, 180)
{
    ha_job h;
    ha_job_start(&h, "restart");
    /* Member 0: the one every agent talks to. */
    etcd_member_restart(&h.c, 0);
    if (wait_leader(&h.c, 15000) < 0) FAIL("no etcd leader after member 0 restarted");
    ha_job_kept_its_generation(&h, "etcd member 0's restart");
}

TEST_TIMEOUT(agent_etcd_job_keeps_its_generation_when_an_etcd_member_is_cut_off, 180)
{
    ha_job h;
    ha_job_start(&h, "cutoff");
    /* Member 0, the one every agent talks to, loses the other two (its
     * calls hang, then it answers "no leader"): the agents fail over. */
    etcd_member_cut_off(&h.c);
    uint64_t cut = etcd_fixture_now_ms();
    /* It is cut off: it soon knows no leader, while the other two have one. */
    uint64_t deadline = cut + (uint64_t)test_scaled_ms(10000);
    while (etcd_member_sees_leader(&h.c, 0) != 0) {
        if (etcd_fixture_now_ms() > deadline)
            FAIL("etcd member 0 still has a leader 10 s after the cut");
        struct timespec pause = { 0, 20 * 1000000L };
        nanosleep(&pause, NULL);
    }
    printf("# etcd member 0 cut off -> it knows no leader %llu ms later\n",
           (unsigned long long)(etcd_fixture_now_ms() - cut));
    if (etcd_member_sees_leader(&h.c, 1) <= 0 && etcd_member_sees_leader(&h.c, 2) <= 0 &&
        wait_leader(&h.c, 10000) < 0)
        FAIL("members 1 and 2 have no leader after member 0 was cut off");
    ha_job_kept_its_generation(&h, "etcd member 0 cut off from the other two");
}

TEST_TIMEOUT(agent_etcd_node_cut_off_from_etcd_is_fenced_within_its_ttl, 180)
{
    etcd_cluster c;
    etcd_cluster_start_defaults(&c);
    etcd_job j;
    etcd_job_init(&j, &c, "nodecut", NULL);
    /* agent1 reaches every member through a proxy of its own. */
    pid_t proxies[3];
    char endpoints[256];
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        int port = 0;
        proxies[i] = etcd_fixture_proxy(c.m[i].client_port, false, &port); /* freezing it cuts whoever connects through it off, silently */
        at += (size_t)snprintf(endpoints + at, sizeof endpoints - at, "%s127.0.0.1:%d",
                               i ? "," : "", port);
    }
    pid_t agents[2];
    agents[0] = etcd_job_agent(&j, "agent0", "2");
    etcd_job cut = j;
    cut.endpoints = endpoints;
    agents[1] = etcd_job_agent(&cut, "agent1", "2");
    const char *two[] = { "resume ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, two, 2, FORM_MS), 2);
    const char *committed[] = { "commit ", NULL };
    ASSERT(agent_harness_wait_lines(j.report, committed, 3, FORM_MS) >= 3);
    /* agent1's worker: the resume line whose parent is agent1. */
    pid_t worker = 0;
    char line[256];
    for (int i = 0; i < 2; i++) {
        nth_line(j.report, two, i, line, sizeof line);
        if ((pid_t)agent_harness_line_field(line, "ppid") == agents[1])
            worker = (pid_t)agent_harness_line_field(line, "pid");
    }
    if (worker <= 0) FAIL("no worker of agent1 in the report");
    uint64_t cut_at = etcd_fixture_now_ms();
    for (int i = 0; i < 3; i++) kill(proxies[i], SIGSTOP);
    if (!agent_harness_wait_gone(worker, test_scaled_ms(DEFAULT_TTL_MS + 10000)))
        FAIL("agent1's worker outlived its lease by 10 s");
    uint64_t took = etcd_fixture_now_ms() - cut_at;
    printf("# agent1 cut off from etcd -> fenced, its worker gone, in %llu ms (TTL %d ms + 1 s "
           "allowed)\n",
           (unsigned long long)took, DEFAULT_TTL_MS);
    /* Not before etcd could have expired the lease (the last keep-alive
     * acknowledged up to an interval before the cut), not later than 1 s after. */
    if (took + 600 < DEFAULT_TTL_MS)
        FAIL("fenced after %llu ms, before its lease could expire", (unsigned long long)took);
    if (took > (uint64_t)test_scaled_ms(DEFAULT_TTL_MS + 1000))
        FAIL("fenced %llu ms after the cut (> TTL %d ms + 1 s)", (unsigned long long)took,
             DEFAULT_TTL_MS);
    char path[512];
    char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, "agent1.err"));
    if (err == NULL || strstr(err, "fenced out of generation") == NULL)
        FAIL("agent1 has no fencing line:\n%s", err != NULL ? err : "");
    free(err);
    for (int i = 0; i < 3; i++) {
        kill(proxies[i], SIGKILL);
        waitpid(proxies[i], NULL, 0);
    }
    stop_agents(agents, 2);
    etcd_cluster_stop(&c);
}

/* ---- descriptors while etcd is gone (issue 26) ----------------------------------- */

static int open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *dir = elastic__opendir(path);
    if (dir == NULL) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(dir);
    return n;
}

/* The most descriptors any of the agents holds, sampled for ms. */
static int most_fds_during(const pid_t *agents, int n, int ms, int *most_of)
{
    int most = 0;
    uint64_t end = etcd_fixture_now_ms() + (uint64_t)ms;
    do {
        for (int i = 0; i < n; i++) {
            int fds = open_fds(agents[i]);
            if (fds > most_of[i]) most_of[i] = fds;
            if (fds > most) most = fds;
        }
        struct timespec pause = { 0, 200 * 1000000L };
        nanosleep(&pause, NULL);
    } while (etcd_fixture_now_ms() < end);
    return most;
}

/* An agent whose etcd is unreachable for a minute, first silent (frozen:
 * every call times out), then refusing (killed), is fenced, keeps trying
 * within its join_timeout, holds a bounded number of descriptors (an old
 * chaos run saw 19 grow to 1,539), and rejoins once etcd is back. */
TEST_TIMEOUT(agent_etcd_holds_a_bounded_number_of_fds_while_etcd_is_down, 240)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    etcd_job j;
    etcd_job_init(&j, &c, "fds", NULL); /* the defaults users get */
    pid_t agents[2] = { etcd_job_agent(&j, "agent0", "2"), etcd_job_agent(&j, "agent1", "2") };
    const char *two[] = { "resume ", "world=2 ", NULL };
    ASSERT_EQ(agent_harness_wait_lines(j.report, two, 2, FORM_MS), 2);
    const char *committed[] = { "commit ", NULL };
    ASSERT(agent_harness_wait_lines(j.report, committed, 2, FORM_MS) >= 2);
    int before[2] = { 0, 0 }, silent[2] = { 0, 0 }, refused[2] = { 0, 0 };
    most_fds_during(agents, 2, 2000, before);
    kill(c.m[0].pid, SIGSTOP);
    most_fds_during(agents, 2, test_scaled_ms(30000), silent);
    etcd_member_kill(&c, 0); /* from frozen to gone: now every connection is refused */
    most_fds_during(agents, 2, test_scaled_ms(30000), refused);
    for (int i = 0; i < 2; i++) {
        printf("# agent%d fds: %d running, at most %d while etcd was frozen, %d while it refused "
               "(30 s each)\n",
               i, before[i], silent[i], refused[i]);
        if (!agent_harness_process_alive(agents[i])) {
            char path[512], name[32];
            snprintf(name, sizeof name, "agent%d.err", i);
            char *err = agent_harness_read_file(agent_harness_path(path, sizeof path, name));
            size_t len = err != NULL ? strlen(err) : 0;
            FAIL("agent%d exited while etcd was down (its join_timeout is 600 s):\n%s", i,
                 err != NULL ? err + (len > 1500 ? len - 1500 : 0) : "");
        }
        /* A few more connections while it fails over and rejoins, no growth. */
        if (silent[i] > before[i] + 16 || refused[i] > before[i] + 16)
            FAIL("agent%d's fds grew from %d to %d/%d while etcd was down", i, before[i], silent[i],
                 refused[i]);
    }
    etcd_member_spawn(&c, 0, false); /* back on its data: the two form a new generation */
    etcd_cluster_wait_ready(&c, 30000);
    ASSERT_EQ(agent_harness_wait_lines(j.report, two, 4, FORM_MS), 4);
    stop_agents(agents, 2);
    etcd_cluster_stop(&c);
}

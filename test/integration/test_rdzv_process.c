/*
 * Rendezvous with a node as a real process: killed with SIGKILL (its
 * connection closes, its lease ends at once) or frozen with SIGSTOP (its
 * keep-alives stop, the lease runs out) — either way the others learn of it
 * through the store and form the next generation without it.
 */
#include "support/rdzv_fixture.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

typedef struct child_node {
    pid_t pid;
    int out_fd;
} child_node;

static void child_start(child_node *c, const rdzv_env *env, int max_nodes, int keepalive_timeout_ms)
{
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    char max_text[16], timeout_text[16];
    snprintf(max_text, sizeof max_text, "%d", max_nodes);
    snprintf(timeout_text, sizeof timeout_text, "%d", keepalive_timeout_ms);
    c->pid = fork();
    ASSERT(c->pid >= 0);
    if (c->pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        const char *path = test_helper_path("rdzv_node");
        execl(path, path, env->endpoint, "job", "1", max_text, timeout_text, "child-node",
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    c->out_fd = fds[0];
}

/* Reads the child's "formed ..." line, waiting at most timeout_ms. */
static void child_expect_formed(child_node *c, int timeout_ms)
{
    char line[128];
    size_t used = 0;
    uint64_t deadline = rdzv_test_now_ms() + (uint64_t)test_scaled_ms(timeout_ms);
    while (memchr(line, '\n', used) == NULL) {
        uint64_t now = rdzv_test_now_ms();
        if (now >= deadline) FAIL("the child node did not join in time");
        struct pollfd pfd = { .fd = c->out_fd, .events = POLLIN };
        if (poll(&pfd, 1, (int)(deadline - now)) <= 0) continue;
        ssize_t got = read(c->out_fd, line + used, sizeof line - 1 - used);
        if (got <= 0) FAIL("the child node exited before joining");
        used += (size_t)got;
    }
    ASSERT(strncmp(line, "formed ", 7) == 0);
}

static void child_reap(child_node *c)
{
    kill(c->pid, SIGKILL);
    int status;
    waitpid(c->pid, &status, 0);
    close(c->out_fd);
}

/* Forms a generation of two thread nodes and the child, removes the child
 * with `sig`, and checks that the others re-form without it. Returns how
 * long the members took to learn of the loss. */
static uint64_t lose_child_with(int sig, int keepalive_timeout_ms)
{
    rdzv_env env;
    rdzv_env_start(&env);
    elastic_rdzv_opts o;
    rdzv_node nodes[2];
    for (int i = 0; i < 2; i++) {
        rdzv_test_opts(&o, &env, "job", 1, 3);
        o.keepalive_timeout_ms = keepalive_timeout_ms;
        rdzv_node_open(&nodes[i], &o);
    }
    child_node child;
    child_start(&child, &env, 3, keepalive_timeout_ms);
    for (int i = 0; i < 2; i++) rdzv_node_join(&nodes[i]);
    child_expect_formed(&child, 15000);
    for (int i = 0; i < 2; i++) rdzv_node_expect_joined(&nodes[i], 15000);

    uint64_t first = nodes[0].result.generation;
    ASSERT_EQ(nodes[0].result.group_world_size, 3);
    uint64_t start = rdzv_test_now_ms();
    ASSERT_EQ(kill(child.pid, sig), 0);
    for (int i = 0; i < 2; i++) {
        elastic_rdzv_cause cause = { .struct_size = sizeof cause };
        ASSERT_OK(elastic_rdzv_watch(nodes[i].rdzv, test_scaled_ms(15000), &cause));
        ASSERT_EQ(cause.kind, ELASTIC_RDZV_NODE_LOST);
        ASSERT_STR_EQ(cause.node_id, "child-node");
    }
    uint64_t took = rdzv_test_now_ms() - start;
    rdzv_nodes_form(nodes, 2, 15000);
    ASSERT(nodes[0].result.generation > first);
    ASSERT_EQ(nodes[0].result.group_world_size, 2);
    child_reap(&child);
    for (int i = 0; i < 2; i++) rdzv_node_close(&nodes[i]);
    rdzv_env_stop(&env);
    return took;
}

TEST(rdzv_killed_node_process_is_evicted_and_the_others_reform)
{
    /* A long keep-alive timeout: only the closed connection can explain a
     * prompt eviction. Both scale, so the bound stays half the timeout. */
    uint64_t took = lose_child_with(SIGKILL, test_scaled_ms(30000));
    if (took >= (uint64_t)test_scaled_ms(15000))
        FAIL("eviction took %llu ms; the closed connection should end the lease",
             (unsigned long long)took);
}

TEST(rdzv_frozen_node_process_is_evicted_after_its_keepalive_timeout)
{
    uint64_t took = lose_child_with(SIGSTOP, 1000);
    /* Its connection stayed open: only the lapsed keep-alives evict it. */
    if (took < 500)
        FAIL("evicted after %llu ms, before its 1000 ms keep-alive timeout",
             (unsigned long long)took);
}

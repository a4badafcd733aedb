/*
 * A job on etcd whose every node was killed (a cancelled allocation, a power
 * cut) leaves its last generation behind in etcd, full and never ended: no
 * monitor is left to see its members' leases end. The job started again
 * with the same run id (the fixed --rdzv-id of a launch script)
 * must form once those leases are gone, not wait as spares of the dead
 * generation for ever.
 */
#include "support/etcd_fixture.h"
#include "support/rdzv_fixture.h"

#include <sys/wait.h>

#define NODES 2

static void crash_opts(elastic_rdzv_opts *o, const etcd_cluster *c)
{
    rdzv_env unused = { 0 };
    rdzv_test_opts(o, &unused, "crashed", NODES, NODES);
    o->endpoint = NULL;
    o->backend = ELASTIC_RDZV_BACKEND_ETCD;
    o->etcd_endpoints = c->endpoints;
    o->keepalive_interval_ms = 200;
    o->keepalive_timeout_ms = test_scaled_ms(1000);
}

/* Forms the job in a child process, then kills it with every node in it:
 * nothing ends the generation, the leases run out on etcd's clock. */
static uint64_t form_and_kill_every_node(const etcd_cluster *c)
{
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        elastic_rdzv_opts o;
        crash_opts(&o, c);
        rdzv_node nodes[NODES];
        uint64_t generation = 0, incarnation = 0;
        rdzv_nodes_form_one_incarnation(nodes, NODES, &o, &generation, &incarnation);
        if (write(fds[1], &generation, sizeof generation) != sizeof generation) _exit(1);
        for (;;) pause(); /* until the SIGKILL */
    }
    close(fds[1]);
    uint64_t generation = 0;
    ssize_t got = read(fds[0], &generation, sizeof generation);
    close(fds[0]);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof generation) FAIL("the first job did not form");
    return generation;
}

TEST_TIMEOUT(rdzv_etcd_a_job_started_again_after_every_node_was_killed_forms_again, 90)
{
    etcd_cluster c;
    etcd_cluster_start(&c, 1);
    uint64_t dead = form_and_kill_every_node(&c);
    /* Started again at once, while the dead nodes' leases still live. */
    elastic_rdzv_opts o;
    crash_opts(&o, &c);
    rdzv_node nodes[NODES];
    uint64_t generation = 0, incarnation = 0;
    rdzv_nodes_form_one_incarnation(nodes, NODES, &o, &generation, &incarnation);
    if (generation <= dead)
        FAIL("generation %llu after the killed job's %llu", (unsigned long long)generation,
             (unsigned long long)dead);
    rdzv_nodes_close(nodes, NODES);
    etcd_cluster_stop(&c);
}

/*
 * Membership of a job with one node (--standalone, or --nnodes 1): there is
 * no one to agree with, so generations, the restart budget and the first
 * failure live in memory and a new generation costs no round trip.
 */
#include "agent/membership.h"
#include "common/clock.h"

#include <stdio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct local_membership {
    agent_membership base;
    int nproc;
    int max_restarts;
    int failures;
    uint64_t generation;
    uint64_t incarnation; /* this agent's start (wall ms): its generations count from 1 */
    bool generation_ended;
    bool have_first_failure;
    elastic_rdzv_cause first_failure;
    char master_addr[256];
} local_membership;

/* A port the kernel says is free now, as torchrun picks MASTER_PORT. */
static int free_port(const char *addr, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return elastic__fail(ELASTIC_ESYS, "socket: %s", strerror(errno));
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                     getsockname(fd, (struct sockaddr *)&sa, &len) == 0
                 ? 0
                 : -1;
    int saved = errno;
    close(fd);
    if (rc != 0)
        return elastic__fail(ELASTIC_ESYS, "finding a free port on %s: %s", addr, strerror(saved));
    *port = ntohs(sa.sin_port);
    return 0;
}

static int local_next(agent_membership *m, elastic_rdzv_result *result)
{
    local_membership *local = (local_membership *)m;
    if (local->failures > local->max_restarts)
        return elastic__fail(ELASTIC_EBUDGET, "%d failures with --max-restarts %d", local->failures,
                             local->max_restarts);
    memset(result, 0, sizeof *result);
    result->struct_size = sizeof *result;
    int rc = free_port(local->master_addr, &result->master_port);
    if (rc != 0) return rc;
    result->generation = ++local->generation;
    result->incarnation = local->incarnation;
    local->generation_ended = false;
    result->group_rank = 0;
    result->group_world_size = 1;
    result->rank_base = 0;
    result->local_world_size = local->nproc;
    result->world_size = local->nproc;
    result->restart_count = local->failures;
    result->max_restarts = local->max_restarts;
    snprintf(result->master_addr, sizeof result->master_addr, "%s", local->master_addr);
    return 0;
}

static int local_end_generation(agent_membership *m, const elastic_rdzv_cause *cause)
{
    local_membership *local = (local_membership *)m;
    if (local->generation_ended) return 0; /* the first cause wins */
    local->generation_ended = true;
    if (cause->kind != ELASTIC_RDZV_FAILURE) return 0;
    local->failures++;
    if (!local->have_first_failure) {
        local->first_failure = *cause;
        local->have_first_failure = true;
    }
    return 0;
}

static int local_nothing(agent_membership *m)
{
    (void)m;
    return 0;
}

static int local_first_failure(agent_membership *m, elastic_rdzv_cause *cause)
{
    local_membership *local = (local_membership *)m;
    if (!local->have_first_failure) return ELASTIC_ENOTFOUND;
    *cause = local->first_failure;
    return 0;
}

static void local_destroy(agent_membership *m)
{
    free(m);
}

static const agent_membership_ops local_ops = {
    .next_blocks = false,
    .next = local_next,
    .end_generation = local_end_generation,
    .finish = local_nothing,
    .leave = local_nothing,
    .first_failure = local_first_failure,
    .destroy = local_destroy,
};

int agent__membership_local(int nproc, int max_restarts, const char *master_addr,
                            agent_membership **out)
{
    local_membership *local = calloc(1, sizeof *local);
    if (local == NULL) return elastic__fail(ELASTIC_ENOMEM, "out of memory");
    local->base.ops = &local_ops;
    local->nproc = nproc;
    local->max_restarts = max_restarts;
    /* The only node writes it: a restarted agent's is larger (see
     * src/rdzv/incarnation.c), so its checkpoints are not fenced by the last
     * run's markers. */
    uint64_t now = elastic__wall_ms();
    local->incarnation = now > 0 ? now : 1;
    snprintf(local->master_addr, sizeof local->master_addr, "%s", master_addr);
    *out = &local->base;
    return 0;
}

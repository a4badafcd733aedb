/* Which communicator an abort stops. The watchdog reports a fault and then
 * aborts, without the lock in between; on a loaded machine the agent's own
 * abort and the next generation's rebuild can overtake that second step (CI
 * saw the rebuild's ncclCommInitRankConfig aborted by the late watchdog, and
 * the job fail). So the watchdog's abort acts only on the build it found
 * faulted; the agent's abort acts on whatever is in flight. */
#include "test.h"
#include "nccl/nccl.h"

static int aborts, revokes;
static int count_abort(void *comm)
{
    (void)comm;
    aborts++;
    return NCCL__SUCCESS;
}

static int count_revoke(void *comm, int flags)
{
    (void)comm;
    (void)flags;
    revokes++;
    return NCCL__SUCCESS;
}

static int never_shrink(void *comm, int *exclude, int count, void **fresh, nccl__config *config,
                        int flags)
{
    (void)comm, (void)exclude, (void)count, (void)fresh, (void)config, (void)flags;
    return 3; /* ncclInternalError */
}

static nccl__api api = { .comm_abort = count_abort };
static int nccl_object;

static elastic_nccl_comm *comm_in(nccl__state state, bool faulted)
{
    static elastic_nccl_comm c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.wake, NULL);
    snprintf(c.tag, sizeof c.tag, "dp");
    c.api = &api;
    c.nccl = &nccl_object;
    c.state = state;
    c.faulted = faulted;
    aborts = revokes = 0;
    return &c;
}

TEST(nccl_late_watchdog_abort_spares_the_next_generations_build)
{
    elastic_nccl_comm *c = comm_in(NCCL__STATE_BUILDING, true); /* the rebuild is under way */
    ASSERT_OK(nccl__abort_faulted(c, "nccl_timeout"));
    ASSERT_EQ(aborts, 0);
    ASSERT_EQ(c->state, NCCL__STATE_BUILDING);
    ASSERT(c->nccl == &nccl_object);

    c = comm_in(NCCL__STATE_READY, false); /* rebuilt: finish() cleared faulted */
    ASSERT_OK(nccl__abort_faulted(c, "nccl_timeout"));
    ASSERT_EQ(aborts, 0);
    ASSERT_EQ(c->state, NCCL__STATE_READY);

    c = comm_in(NCCL__STATE_ABORTED, true); /* the agent's abort came first */
    c->nccl = NULL;
    ASSERT_OK(nccl__abort_faulted(c, "nccl_timeout"));
    ASSERT_EQ(aborts, 0);
}

TEST(nccl_watchdog_abort_stops_the_faulted_build_and_agent_abort_any)
{
    elastic_nccl_comm *c = comm_in(NCCL__STATE_READY, true); /* nobody else acted yet */
    ASSERT_OK(nccl__abort_faulted(c, "nccl_timeout"));
    ASSERT_EQ(aborts, 1);
    ASSERT_EQ(c->state, NCCL__STATE_ABORTED);
    ASSERT(c->nccl == NULL);

    c = comm_in(NCCL__STATE_BUILDING, false); /* the agent ends a build under way */
    ASSERT_OK(nccl__abort(c, "the generation ended"));
    ASSERT_EQ(aborts, 1);
    ASSERT_EQ(c->state, NCCL__STATE_NONE);

    api.comm_revoke = count_revoke; /* NCCL 2.28: revoke, keep the object for a shrink */
    api.comm_shrink = never_shrink; /* only its presence matters */
    c = comm_in(NCCL__STATE_READY, true);
    ASSERT_OK(nccl__abort_faulted(c, "nccl_timeout"));
    ASSERT_EQ(revokes, 1);
    ASSERT_EQ(aborts, 0);
    ASSERT_EQ(c->state, NCCL__STATE_REVOKED);
    api.comm_revoke = NULL;
    api.comm_shrink = NULL;
}

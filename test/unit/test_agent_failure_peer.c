/* A collective failure after another rank's death (failure_say.c's
 * agent__failure_note_peer, issue 37): the rank whose collective broke after
 * another rank's failure had ended the generation is that failure's
 * consequence (it names the rank and decides nothing, so one failure is
 * counted); its own failure, one that ended later, another generation's, or
 * a crash of its own is never blamed on the rank that ended it. */
#include "agent/failure_decide.h"
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char *const COLLECTIVE_BROKE =
    "Traceback (most recent call last):\n"
    "  File \"/j/trainer.py\", line 80, in train_step\n"
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
    "remote process exited or there was a network error\n";

/* Rank 0 of node "b", generation 3, failed at wall time 1000 with stderr. */
static void classify(agent_classify *c, const char *stderr_tail, int exit_code, int signal)
{
    memset(c, 0, sizeof *c);
    failure_evidence e = { .source = FS_WORKER_EXIT,
                           .exit_code = exit_code,
                           .signal = signal,
                           .stderr_tail = stderr_tail };
    failure__classify(&e, &c->verdict);
    failure_policy__config_defaults(&c->config, 3);
    c->config.world_size = 2;
    c->config.nodes = 2;
    c->entry = (failure_policy_entry){ .generation = 3,
                                       .step = -1,
                                       .rank = 0,
                                       .cls = c->verdict.cls,
                                       .consequence = c->verdict.consequence,
                                       .time_ms = 1000 };
    snprintf(c->entry.node, sizeof c->entry.node, "b");
    c->facts = (agent_failure_facts){ .generation = 3, .rank = 0, .cause_rank = -1 };
    c->today = (failure_policy_result){ .decision = FD_RESTART, .rule = FR_BUDGET, .spends = true };
}

static elastic_rdzv_cause ended_by(const char *node, int rank, uint64_t generation,
                                   uint64_t time_ms)
{
    elastic_rdzv_cause won = { .struct_size = sizeof won,
                               .kind = ELASTIC_RDZV_FAILURE,
                               .generation = generation,
                               .rank = rank,
                               .signal = SIGKILL,
                               .time_ms = time_ms };
    snprintf(won.node_id, sizeof won.node_id, "%s", node);
    return won;
}

TEST(agent_failure_peer_collective_after_a_death_is_its_consequence)
{
    agent_classify c;
    classify(&c, COLLECTIVE_BROKE, 1, 0);
    ASSERT_EQ(c.verdict.cls, FC_COMM);
    ASSERT(!c.verdict.consequence);
    elastic_rdzv_cause won = ended_by("a", 1, 3, 990);
    agent__failure_note_peer(&c, &won);
    ASSERT(c.verdict.consequence);
    ASSERT(c.entry.consequence);
    ASSERT_EQ(c.facts.cause_rank, 1);
    ASSERT(strstr(c.verdict.evidence, "after rank 1's failure had ended generation 3") != NULL);
    /* decided: nothing of its own, no restart spent (the dead rank's decides) */
    failure_policy_history *memory = calloc(1, sizeof *memory);
    ASSERT(memory != NULL);
    c.memory = memory;
    agent__failure_decide_run(NULL, &c);
    ASSERT_EQ(c.result.decision, FD_NONE);
    ASSERT_EQ(c.result.rule, FR_CONSEQUENCE);
    ASSERT(!c.result.spends);
    ASSERT_EQ(c.result.budget_used, 0);
    free(memory);
}

TEST(agent_failure_peer_never_blames_its_own_or_a_later_or_other_generation)
{
    agent_classify c;
    elastic_rdzv_cause own = ended_by("b", 0, 3, 1000);
    classify(&c, COLLECTIVE_BROKE, 1, 0);
    agent__failure_note_peer(&c, &own); /* its END won: it came first */
    ASSERT(!c.verdict.consequence);
    ASSERT_EQ(c.facts.cause_rank, -1);

    elastic_rdzv_cause later = ended_by("a", 1, 3, 1001);
    agent__failure_note_peer(&c, &later);
    ASSERT(!c.verdict.consequence);

    elastic_rdzv_cause older = ended_by("a", 1, 2, 990); /* the generation before */
    agent__failure_note_peer(&c, &older);
    ASSERT(!c.verdict.consequence);

    elastic_rdzv_cause lost = ended_by("a", 1, 3, 990);
    lost.kind = ELASTIC_RDZV_NODE_LOST; /* not a rank's failure */
    agent__failure_note_peer(&c, &lost);
    ASSERT(!c.verdict.consequence);
    agent__failure_note_peer(&c, NULL);
    ASSERT(!c.verdict.consequence);
}

TEST(agent_failure_peer_a_crash_that_lost_the_race_is_still_its_own)
{
    agent_classify c;
    elastic_rdzv_cause won = ended_by("a", 1, 3, 990);
    classify(&c, "", -1, SIGKILL); /* killed, nothing said: not a collective of its own */
    agent__failure_note_peer(&c, &won);
    ASSERT(!c.verdict.consequence);
    classify(&c,
             "Traceback (most recent call last):\n"
             "  File \"/j/trainer.py\", line 42, in check_batch\n"
             "ValueError: bad batch\n",
             1, 0);
    agent__failure_note_peer(&c, &won);
    ASSERT_EQ(c.verdict.cls, FC_USER_CODE);
    ASSERT(!c.verdict.consequence);
}

/*
 * The restore plan in a RECONFIGURE / PROMOTE payload: written by the one
 * formatter (channel__worker_env_format) and turned by the worker library
 * into the process' ELASTIC_RESTORE_* variables, which
 * elastic_ckpt_restore_begin reads; a payload without a plan removes an
 * older generation's, and a malformed one changes nothing.
 */
#include "channel/channel.h"
#include "worker/worker.h"
#include "test.h"

static const char *lookup(void *ctx, const char *name)
{
    return channel__kv_get(ctx, name);
}

/* Formats `env` as the agent sends it and applies the plan it carries. */
static int apply_payload(const channel__worker_env *env)
{
    elastic__text text;
    elastic__text_init(&text, 16384);
    ASSERT_OK(channel__worker_env_format(env, &text));
    static char payload[16384];
    snprintf(payload, sizeof payload, "%s", text.data);
    elastic__text_free(&text);
    channel__kv kv;
    ASSERT_OK(channel__kv_parse(payload, strlen(payload), &kv));
    return worker__restore_plan_apply(lookup, &kv);
}

static channel__worker_env rank_env(void)
{
    return (channel__worker_env){ .rank = 3,
                                  .local_rank = 1,
                                  .world_size = 4,
                                  .local_world_size = 2,
                                  .generation = 2,
                                  .run_id = "job",
                                  .store_endpoint = "127.0.0.1:1",
                                  .store_prefix = "job/job/gen/2/" };
}

TEST(worker_restore_plan_from_the_payload_replaces_or_removes_the_variables)
{
    setenv(CHANNEL__ENV_RESTORE_STEP, "7", 1); /* an older generation's plan */
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "disk", 1);
    channel__worker_env env = rank_env();
    env.restore_step = 142;
    env.restore_source = "peer";
    env.restore_node = "node-b";
    ASSERT_OK(apply_payload(&env));
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_STEP), "142");
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_SOURCE), "peer");
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_NODE), "node-b");

    /* The next generation has no plan: none of the old one is left behind. */
    env = rank_env();
    ASSERT_OK(apply_payload(&env));
    ASSERT(getenv(CHANNEL__ENV_RESTORE_STEP) == NULL);
    ASSERT(getenv(CHANNEL__ENV_RESTORE_SOURCE) == NULL);
    ASSERT(getenv(CHANNEL__ENV_RESTORE_NODE) == NULL);
}

TEST(worker_restore_plan_that_is_malformed_changes_nothing)
{
    setenv(CHANNEL__ENV_RESTORE_STEP, "5", 1);
    setenv(CHANNEL__ENV_RESTORE_SOURCE, "local", 1);
    channel__worker_env env = rank_env();
    env.restore_step = 9;
    env.restore_source = "tape";
    ASSERT_ERR(apply_payload(&env), ELASTIC_EPROTO);
    ASSERT(strstr(elastic_last_error(), "local, peer or disk") != NULL);
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_STEP), "5");
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_SOURCE), "local");

    /* a step without a source (not what the formatter writes, but a payload could) */
    char payload[] = "RANK=0\nELASTIC_RESTORE_STEP=3\n";
    channel__kv kv;
    ASSERT_OK(channel__kv_parse(payload, strlen(payload), &kv));
    ASSERT_ERR(worker__restore_plan_apply(lookup, &kv), ELASTIC_EPROTO);
    char bad_step[] = "ELASTIC_RESTORE_STEP=x\nELASTIC_RESTORE_SOURCE=disk\n";
    ASSERT_OK(channel__kv_parse(bad_step, strlen(bad_step), &kv));
    ASSERT_ERR(worker__restore_plan_apply(lookup, &kv), ELASTIC_EPROTO);
    ASSERT_STR_EQ(getenv(CHANNEL__ENV_RESTORE_STEP), "5");
}

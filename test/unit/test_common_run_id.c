/* One rule for run ids in every entry point: --rdzv-id, the agent's and the
 * rendezvous' C options (and so the bindings built on them): 1..64 of
 * [A-Za-z0-9._-], never '/' (run "a/r/2/n/1" must not write into run a). */
#include "test.h"

static char why[512]; /* the refusal's detail, kept past the cleanup calls */

static const char *const bad_ids[] = { "a/r/2/n/1", "",           ".",         "..",
                                       "has space", "semi;colon", "tab\there", NULL };

static int rdzv_open_with(const char *run_id)
{
    elastic_rdzv_opts o;
    elastic_rdzv_opts_init(&o, sizeof o);
    o.run_id = run_id;
    o.endpoint = "127.0.0.1:1"; /* refused ids fail before any connection */
    elastic_rdzv *r = NULL;
    int rc = elastic_rdzv_open(&o, &r);
    snprintf(why, sizeof why, "%s", elastic_last_error());
    elastic_rdzv_free(r);
    return rc;
}

static int agent_create_with(const char *run_id)
{
    elastic_agent_opts o;
    elastic_agent_opts_init(&o, sizeof o);
    static const char *const argv[] = { "true", NULL };
    o.argv = argv;
    o.argc = 1;
    o.no_python = 1;
    o.run_id = run_id;
    elastic_agent *a = NULL;
    int rc = elastic_agent_create(&o, &a);
    snprintf(why, sizeof why, "%s", elastic_last_error());
    elastic_agent_free(a);
    return rc;
}

TEST(common_run_id_rule_is_the_same_for_the_flag_the_agent_and_rendezvous)
{
    char longest[ELASTIC_RUN_ID_MAX + 2];
    memset(longest, 'r', ELASTIC_RUN_ID_MAX + 1);
    longest[ELASTIC_RUN_ID_MAX + 1] = '\0'; /* one over */
    for (size_t i = 0; bad_ids[i] != NULL; i++) {
        ASSERT_ERR(rdzv_open_with(bad_ids[i]), ELASTIC_EINVAL);
        ASSERT(strstr(why, "[A-Za-z0-9._-]") != NULL);
        ASSERT_ERR(agent_create_with(bad_ids[i]), ELASTIC_EINVAL);
        ASSERT(strstr(why, "[A-Za-z0-9._-]") != NULL);
    }
    ASSERT_ERR(rdzv_open_with(longest), ELASTIC_EINVAL);
    ASSERT_ERR(agent_create_with(longest), ELASTIC_EINVAL);
    longest[ELASTIC_RUN_ID_MAX] =
        '\0'; /* exactly the limit: the run id is fine, the endpoint is not */
    ASSERT_NE(rdzv_open_with(longest), ELASTIC_EINVAL);
}

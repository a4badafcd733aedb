/*
 * The agent's public calls in a library built with ELASTIC_AGENT=0 (the
 * Makefile compiles this file instead of src/agent/ and src/probe/): a
 * program that links them still links, and each call says, as an error
 * rather than a missing symbol, that this build has no agent.
 */
#include "common/common.h"

static int no_agent(const char *call)
{
    return elastic__fail(ELASTIC_EUNSUPPORTED,
                         "%s: this libelastic was built without the agent (ELASTIC_AGENT=0)", call);
}

ELASTIC_EXTERN int elastic_agent_opts_init(elastic_agent_opts *opts, size_t struct_size)
{
    return no_agent("elastic_agent_opts_init");
}

ELASTIC_EXTERN int elastic_agent_parse_args(int argc, const char *const *argv,
                                            const char *const *envp, elastic_agent_opts *opts)
{
    return no_agent("elastic_agent_parse_args");
}

ELASTIC_EXTERN const char *elastic_agent_usage(void)
{
    return "elasticrun is not part of this build of libelastic (ELASTIC_AGENT=0)\n";
}

ELASTIC_EXTERN int elastic_agent_create(const elastic_agent_opts *opts, elastic_agent **agent)
{
    if (agent != NULL) *agent = NULL;
    return no_agent("elastic_agent_create");
}

ELASTIC_EXTERN int elastic_agent_run(elastic_agent *agent, elastic_agent_result *result)
{
    return no_agent("elastic_agent_run");
}

/* No agent can exist, so there is nothing to stop or free. */
ELASTIC_EXTERN void elastic_agent_request_stop(elastic_agent *agent, int signum) {}

ELASTIC_EXTERN void elastic_agent_free(elastic_agent *agent) {}

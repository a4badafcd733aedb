/*
 * The store server in a library built with ELASTIC_AGENT=0: it is the part of
 * the store the agent hosts (libuv's event loop), so it goes with the agent.
 * The client (elastic_store_connect and the calls on a handle) stays: a
 * trainer still commits checkpoints through a job's store hosted elsewhere.
 */
#include "common/common.h"

static int no_server(const char *call)
{
    return elastic__fail(ELASTIC_EUNSUPPORTED,
                         "%s: this libelastic was built without the store server, which comes "
                         "with the agent (ELASTIC_AGENT=0)",
                         call);
}

ELASTIC_EXTERN int elastic_store_server_opts_init(elastic_store_server_opts *opts,
                                                  size_t struct_size)
{
    return no_server("elastic_store_server_opts_init");
}

ELASTIC_EXTERN int elastic_store_server_start(const elastic_store_server_opts *opts,
                                              elastic_store_server **server)
{
    if (server != NULL) *server = NULL;
    return no_server("elastic_store_server_start");
}

ELASTIC_EXTERN int elastic_store_server_get_port(const elastic_store_server *server, int *port)
{
    return no_server("elastic_store_server_get_port");
}

/* No server can exist: nothing to close. */
ELASTIC_EXTERN void elastic_store_server_close(elastic_store_server *server) {}

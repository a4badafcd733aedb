/*
 * The process' way to the agent for library modules below the worker (the
 * checkpoint store's divergence check): the worker handle, while attached,
 * registers a function that sends a control frame on its socket; a module
 * that has something to report calls channel__sink_send, which does nothing
 * (ELASTIC_ENOTFOUND) outside elasticrun. One sink per process: a process
 * has one worker handle.
 */
#include "channel/channel.h"

#include <pthread.h>

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static channel__sink_fn sink_fn;
static void *sink_user;

void channel__sink_set(channel__sink_fn fn, void *user)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = user;
    pthread_mutex_unlock(&sink_lock);
}

void channel__sink_clear(void *user)
{
    pthread_mutex_lock(&sink_lock);
    if (sink_user == user) sink_fn = NULL, sink_user = NULL;
    pthread_mutex_unlock(&sink_lock);
}

int channel__sink_send(int type, const char *payload)
{
    /* Held while sending: a worker closing waits for a send in flight. */
    pthread_mutex_lock(&sink_lock);
    int rc = sink_fn != NULL ? sink_fn(sink_user, type, payload) : ELASTIC_ENOTFOUND;
    pthread_mutex_unlock(&sink_lock);
    return rc;
}

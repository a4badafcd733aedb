/*
 * The library's one log sink. Default: one line per message on stderr with
 * the level and module; hosts replace it with elastic_set_log_callback().
 */
#include "common/common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static elastic_log_fn sink_fn;
static void *sink_user;
static int max_level = -1; /* -1: not yet read from ELASTIC_LOG_LEVEL */

static const char *const level_names[] = { "error", "warn", "info", "debug" };

static int level_from_env(void)
{
    const char *value = getenv("ELASTIC_LOG_LEVEL");
    if (value == NULL) return ELASTIC_LOG_WARN;
    for (int level = 0; level < (int)ELASTIC__ARRAY_LEN(level_names); level++)
        if (strcasecmp(value, level_names[level]) == 0) return level;
    return ELASTIC_LOG_WARN;
}

bool elastic__log_enabled(int level)
{
    int current = __atomic_load_n(&max_level, __ATOMIC_RELAXED);
    if (current < 0) {
        current = level_from_env();
        __atomic_store_n(&max_level, current, __ATOMIC_RELAXED);
    }
    return level <= current;
}

ELASTIC_EXTERN void elastic_set_log_level(int level)
{
    if (level < ELASTIC_LOG_ERROR) level = ELASTIC_LOG_ERROR;
    if (level > ELASTIC_LOG_DEBUG) level = ELASTIC_LOG_DEBUG;
    __atomic_store_n(&max_level, level, __ATOMIC_RELAXED);
}

ELASTIC_EXTERN void elastic_set_log_callback(elastic_log_fn fn, void *user)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = user;
    pthread_mutex_unlock(&sink_lock);
}

void elastic__log(int level, const char *module, const char *fmt, ...)
{
    if (!elastic__log_enabled(level)) return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);

    pthread_mutex_lock(&sink_lock);
    elastic_log_fn fn = sink_fn;
    void *user = sink_user;
    pthread_mutex_unlock(&sink_lock);
    if (fn != NULL) {
        fn(user, level, module, message);
        return;
    }
    fprintf(stderr, "elastic[%s] %s: %s\n", level_names[level], module, message);
}

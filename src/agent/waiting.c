/*
 * "waiting for nodes" on the console while a rendezvous takes long: every
 * few seconds a look at the open round in the job store (how many joined,
 * which members of the last generation are not back), done on libuv's
 * thread pool because store calls block, then one console line.
 */
#include "agent/group.h"

#include "common/clock.h"
#include "common/parse_int.h"
#include "rdzv/rdzv.h"

#include <stdio.h>
#include <stdlib.h>

#define WAITING_EVERY_MS 5000
#define WAITING_MAX_SLOTS 64         /* join records read per look */

static bool get_text(elastic_store *store, const char *key, char *out, size_t size, size_t *len_out)
{
    void *value = NULL;
    size_t len = 0;
    if (elastic_store_try_get(store, key, &value, &len) != 0) return false;
    bool fits = len < size;
    if (fits) {
        memcpy(out, value, len);
        out[len] = '\0';
        if (len_out != NULL) *len_out = len;
    }
    elastic_free(value);
    return fits;
}

/* The number a value starts with ("<round> <sealed> ..." or a counter), or -1. */
static long leading_int(const char *text)
{
    int64_t v;
    if (elastic__parse_i64_n(NULL, text, strcspn(text, " "), 0, 999999999, &v) != 0) return -1;
    return (long)v;
}

static void append_name(agent_waiting *w, const char *name)
{
    size_t used = strlen(w->missing);
    if (used + strlen(name) + 3 >= sizeof w->missing) return;
    snprintf(w->missing + used, sizeof w->missing - used, "%s%s", used ? ", " : "", name);
    w->missing_count++;
}

/* Thread pool: reads round, count, join records and the last members. */
static void look(uv_work_t *req)
{
    agent_waiting *w = req->data;
    agent_group *group = w->group;
    char key[400], text[256];
    w->joined = -1;
    w->missing[0] = '\0';
    w->missing_count = 0;
    uint64_t round = 1;
    snprintf(key, sizeof key, "rdzv/%s/round", group->run_id);
    if (get_text(group->store, key, text, sizeof text, NULL) && leading_int(text) > 0) round = (uint64_t)leading_int(text);
    snprintf(key, sizeof key, "rdzv/%s/r/%llu/count", group->run_id, (unsigned long long)round);
    w->joined = get_text(group->store, key, text, sizeof text, NULL) ? (int)leading_int(text) : 0;
    if (w->joined < 0 || w->last_generation == 0) return;
    /* Who of the last generation is not back: its members minus the live join records. */
    snprintf(key, sizeof key, "rdzv/%s/r/%llu/info", group->run_id, (unsigned long long)w->last_generation);
    void *value = NULL;
    size_t len = 0;
    if (elastic_store_try_get(group->store, key, &value, &len) != 0) return;
    rdzv__info info;
    rdzv__record *members = NULL;
    int rc = rdzv__info_decode(value, len, &info, &members);
    elastic_free(value);
    if (rc != 0) return;
    int slots = w->joined < WAITING_MAX_SLOTS ? w->joined : WAITING_MAX_SLOTS;
    rdzv__record *joined = calloc((size_t)slots + 1, sizeof *joined);
    int njoined = 0;
    for (int slot = 1; joined != NULL && slot <= slots; slot++) {
        char rec[RDZV__MAX_RECORD];
        size_t rec_len = 0;
        snprintf(key, sizeof key, "rdzv/%s/r/%llu/n/%d/rec", group->run_id, (unsigned long long)round, slot);
        if (get_text(group->store, key, rec, sizeof rec, &rec_len) && rdzv__record_decode(rec, rec_len, &joined[njoined]) == 0)
            njoined++;
    }
    for (int i = 0; i < info.group_world_size; i++) {
        bool back = strcmp(members[i].node_id, group->node_id) == 0;
        for (int j = 0; j < njoined && !back; j++) back = strcmp(members[i].node_id, joined[j].node_id) == 0;
        if (!back) append_name(w, members[i].node_id);
    }
    free(joined);
    free(members);
}

static void looked(uv_work_t *req, int status)
{
    agent_waiting *w = req->data;
    agent_group *group = w->group;
    w->in_flight = false;
    if (status != 0 || group->state != AGENT_RENDEZVOUS || w->joined < 0) return;
    uint64_t waited = elastic__now_ms() - group->rendezvous_started_ms;
    char missing[sizeof w->missing + 32] = "";
    if (w->missing_count > 0) snprintf(missing, sizeof missing, "; missing: %s", w->missing);
    char wanted[48];
    if (group->opts->min_nodes == group->opts->max_nodes) snprintf(wanted, sizeof wanted, "%d", group->opts->min_nodes);
    else snprintf(wanted, sizeof wanted, "%d to %d", group->opts->min_nodes, group->opts->max_nodes);
    agent__console(group, "waiting for nodes: %d joined, %s wanted, %.0f s so far%s", w->joined, wanted,
                   (double)waited / 1000.0, missing);
    agent_event event;
    agent__event_begin(&event, group->events, "waiting");
    agent__event_int(&event, "joined", w->joined);
    agent__event_int(&event, "min_nodes", group->opts->min_nodes);
    agent__event_int(&event, "waited_ms", (int64_t)waited);
    agent__event_str(&event, "missing", w->missing);
    agent__event_emit(group->events, &event);
}

/* On etcd the rendezvous keys are not in the job's store (and the agent's
 * store handle changes every generation): no look, only how long. */
static bool rendezvous_in_store(const agent_group *group)
{
    const char *backend = group->opts != NULL ? group->opts->rdzv_backend : NULL;
    return backend == NULL || (strcmp(backend, "etcd-v3") != 0 && strcmp(backend, "etcd") != 0);
}

static void on_waiting_timer(uv_timer_t *timer)
{
    agent_waiting *w = timer->data;
    if (w->in_flight || w->group->state != AGENT_RENDEZVOUS) return;
    if (!rendezvous_in_store(w->group)) {
        agent__console(w->group, "waiting for nodes: %d to %d wanted, %.0f s so far", w->group->opts->min_nodes,
                       w->group->opts->max_nodes,
                       (double)(elastic__now_ms() - w->group->rendezvous_started_ms) / 1000.0);
        return;
    }
    w->last_generation = w->group->generations > 0 ? w->group->current.generation : 0;
    w->work.data = w;
    if (uv_queue_work(w->group->loop, &w->work, look, looked) == 0) w->in_flight = true;
}

int agent__waiting_init(agent_group *group)
{
    agent_waiting *w = &group->waiting;
    w->group = group;
    int rc = uv_timer_init(group->loop, &w->timer);
    if (rc != 0) return elastic__fail(ELASTIC_ESYS, "agent loop: %s", uv_strerror(rc));
    w->timer.data = w;
    return 0;
}

void agent__waiting_start(agent_group *group)
{
    if (group->opts == NULL || group->opts->max_nodes <= 1) return; /* one node: nobody to wait for */
    if (rendezvous_in_store(group) && group->store == NULL) return;
    uv_timer_start(&group->waiting.timer, on_waiting_timer, WAITING_EVERY_MS, WAITING_EVERY_MS);
}

void agent__waiting_stop(agent_group *group) { uv_timer_stop(&group->waiting.timer); }

void agent__waiting_close(agent_group *group) { uv_close((uv_handle_t *)&group->waiting.timer, NULL); }

/*
 * Tells the agent which checkpoint step this worker saved last (and in which
 * tier), so elasticrun's summary and the event log can name it, and what
 * this worker restored (step, source, bytes, time: checkpoint_restored):
 * words in the worker's heartbeat slot (the shared memory the agent already
 * reads on its probe tick). Outside elasticrun (no heartbeat file) it does
 * nothing.
 */
#include "ckpt/ckpt.h"

#include "channel/channel.h"
#include "common/parse_int.h"

#include <stdlib.h>
#include <sys/time.h>

static pthread_once_t attach_once = PTHREAD_ONCE_INIT;
static channel__hb_region *report_region; /* mapped for the process' life (kept reachable) */
static channel__hb_slot *report_slot;

static void attach(void)
{
    const char *path = getenv(CHANNEL__ENV_HEARTBEAT_SHM),
               *slot_text = getenv(CHANNEL__ENV_HEARTBEAT_SLOT);
    if (path == NULL || *path == '\0' || slot_text == NULL) return;
    uint64_t slot;
    if (elastic__parse_u64(NULL, slot_text, 0, CHANNEL__HB_MAX_SLOTS - 1, &slot) != 0) return;
    if (channel__hb_attach(path, (unsigned)slot, &report_region, &report_slot) != 0) {
        ELASTIC_LOG_D("ckpt", "no heartbeat slot to report checkpoints in: %s",
                      elastic_last_error());
        report_slot = NULL;
    }
}

void ckpt__report_saved(uint64_t step, unsigned tier)
{
    pthread_once(&attach_once, attach);
    if (report_slot == NULL) return;
    __atomic_store_n(&report_slot->ckpt_tier, tier, __ATOMIC_RELAXED);
    struct timeval now;
    gettimeofday(&now, NULL);
    __atomic_store_n(&report_slot->ckpt_step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&report_slot->ckpt_wall_ms,
                     (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_usec / 1000u,
                     __ATOMIC_RELAXED);
    __atomic_fetch_add(&report_slot->ckpt_saves, 1,
                       __ATOMIC_RELEASE); /* last: the agent reads it first */
}

void ckpt__report_stall(uint64_t ns)
{
    pthread_once(&attach_once, attach);
    if (report_slot != NULL) __atomic_fetch_add(&report_slot->ckpt_stall_ns, ns, __ATOMIC_RELAXED);
}

void ckpt__report_restore(uint64_t ns)
{
    pthread_once(&attach_once, attach);
    if (report_slot != NULL)
        __atomic_fetch_add(&report_slot->ckpt_restore_ns, ns, __ATOMIC_RELAXED);
}

void ckpt__report_restored(unsigned source, uint64_t step, uint64_t bytes, uint64_t us)
{
    pthread_once(&attach_once, attach);
    if (report_slot == NULL) return;
    __atomic_store_n(&report_slot->restore_step, step, __ATOMIC_RELAXED);
    __atomic_store_n(&report_slot->restore_bytes, bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&report_slot->restore_us, us, __ATOMIC_RELAXED);
    __atomic_store_n(&report_slot->restore_source, source,
                     __ATOMIC_RELEASE); /* last: the agent reads it first */
}

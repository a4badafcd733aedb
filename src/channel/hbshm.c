/*
 * The heartbeat shared-memory file: the agent creates it with one slot per
 * local worker; each worker maps it and writes its own slot. Both sides check
 * the header so a stale or foreign file is refused instead of misread.
 */
#include "common/common.h"
#include "channel/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(channel__hb_header) == 64, "header is one cache line");
_Static_assert(sizeof(channel__hb_slot) == 192, "slot is three cache lines");

struct channel__hb_region {
    void *base;
    size_t size;
    unsigned slot_count;
    char *path;
};

static size_t region_size(unsigned slot_count)
{
    return sizeof(channel__hb_header) + (size_t)slot_count * sizeof(channel__hb_slot);
}

static channel__hb_slot *slot_at(const channel__hb_region *region, unsigned slot)
{
    return (channel__hb_slot *)((char *)region->base + sizeof(channel__hb_header)) + slot;
}

static int map_fd(int fd, size_t size, channel__hb_region **out)
{
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return elastic__fail(elastic__from_errno(errno), "mmap heartbeat file: %s",
                             strerror(errno));
    channel__hb_region *region = calloc(1, sizeof *region);
    if (region == NULL) {
        munmap(base, size);
        return elastic__fail(ELASTIC_ENOMEM, "heartbeat region");
    }
    region->base = base;
    region->size = size;
    *out = region;
    return 0;
}

int channel__hb_create(const char *path, unsigned slot_count, channel__hb_region **out)
{
    if (path == NULL || out == NULL || slot_count == 0 || slot_count > CHANNEL__HB_MAX_SLOTS)
        return elastic__fail(ELASTIC_EINVAL, "heartbeat file: bad path or slot count %u",
                             slot_count);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return elastic__fail(elastic__from_errno(errno), "create %s: %s", path, strerror(errno));
    size_t size = region_size(slot_count);
    int rc = ftruncate(fd, (off_t)size) == 0
                 ? 0
                 : elastic__fail(elastic__from_errno(errno), "size %s: %s", path, strerror(errno));
    channel__hb_region *region = NULL;
    if (rc == 0) rc = map_fd(fd, size, &region);
    close(fd);
    if (rc != 0) {
        unlink(path);
        return rc;
    }
    region->slot_count = slot_count;
    region->path = elastic__strdup(path);
    channel__hb_header *header = region->base;
    header->version = CHANNEL__HB_VERSION;
    header->slot_count = slot_count;
    header->slot_size = sizeof(channel__hb_slot);
    __atomic_store_n(&header->magic, CHANNEL__HB_MAGIC,
                     __ATOMIC_RELEASE); /* last: marks it complete */
    *out = region;
    return 0;
}

static int check_header(const channel__hb_header *header, size_t file_size, const char *path)
{
    if (__atomic_load_n(&header->magic, __ATOMIC_ACQUIRE) != CHANNEL__HB_MAGIC ||
        header->version != CHANNEL__HB_VERSION || header->slot_size != sizeof(channel__hb_slot))
        return elastic__fail(ELASTIC_EPROTO, "%s is not a heartbeat file of this version", path);
    if (header->slot_count == 0 || header->slot_count > CHANNEL__HB_MAX_SLOTS ||
        region_size(header->slot_count) > file_size)
        return elastic__fail(ELASTIC_ECORRUPT, "%s: slot count %u does not fit the file", path,
                             header->slot_count);
    return 0;
}

int channel__hb_attach(const char *path, unsigned slot, channel__hb_region **out,
                       channel__hb_slot **slot_out)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return elastic__fail(elastic__from_errno(errno), "open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)region_size(1) ||
        st.st_size > (off_t)region_size(CHANNEL__HB_MAX_SLOTS)) {
        close(fd);
        return elastic__fail(ELASTIC_ECORRUPT, "%s: size is not that of a heartbeat file", path);
    }
    channel__hb_region *region = NULL;
    int rc = map_fd(fd, (size_t)st.st_size, &region);
    close(fd);
    if (rc != 0) return rc;
    const channel__hb_header *header = region->base;
    rc = check_header(header, region->size, path);
    if (rc == 0 && slot >= header->slot_count)
        rc = elastic__fail(ELASTIC_ERANGE, "heartbeat slot %u is not below the file's %u slots",
                           slot, header->slot_count);
    if (rc != 0) {
        channel__hb_close(region, false);
        return rc;
    }
    region->slot_count = header->slot_count;
    *out = region;
    *slot_out = slot_at(region, slot);
    return 0;
}

unsigned channel__hb_slot_count(const channel__hb_region *region)
{
    return region->slot_count;
}

channel__hb_slot *channel__hb_slot_at(channel__hb_region *region, unsigned slot)
{
    return slot_at(region, slot);
}

void channel__hb_reset(channel__hb_region *region, unsigned slot)
{
    if (slot >= region->slot_count) return;
    uint64_t *words = (uint64_t *)slot_at(region, slot);
    /* The next worker is started after this (fork and exec order it). */
    for (size_t i = 0; i < sizeof(channel__hb_slot) / sizeof(uint64_t); i++)
        __atomic_store_n(&words[i], 0, __ATOMIC_RELEASE);
}

void channel__hb_read(const channel__hb_region *region, unsigned slot, channel__hb_snapshot *out)
{
    memset(out, 0, sizeof *out);
    if (slot >= region->slot_count) return;
    channel__hb_slot *s = slot_at(region, slot);
    out->last_beat_ns = __atomic_load_n(&s->last_beat_ns, __ATOMIC_ACQUIRE);
    out->beats = __atomic_load_n(&s->beats, __ATOMIC_RELAXED);
    out->step = __atomic_load_n(&s->step, __ATOMIC_RELAXED);
    out->interval_steps = __atomic_load_n(&s->interval_steps, __ATOMIC_RELAXED);
    out->interval_sum_ns = __atomic_load_n(&s->interval_sum_ns, __ATOMIC_RELAXED);
    out->compute_count = __atomic_load_n(&s->compute_count, __ATOMIC_RELAXED);
    out->compute_sum_ns = __atomic_load_n(&s->compute_sum_ns, __ATOMIC_RELAXED);
    out->pid = __atomic_load_n(&s->pid, __ATOMIC_RELAXED);
    out->stack_signal = __atomic_load_n(&s->stack_signal, __ATOMIC_RELAXED);
    out->stack_dumps = __atomic_load_n(&s->stack_dumps, __ATOMIC_ACQUIRE);
    out->ckpt_saves =
        __atomic_load_n(&s->ckpt_saves, __ATOMIC_ACQUIRE); /* pairs with the release in report.c */
    out->ckpt_step = __atomic_load_n(&s->ckpt_step, __ATOMIC_RELAXED);
    out->ckpt_wall_ms = __atomic_load_n(&s->ckpt_wall_ms, __ATOMIC_RELAXED);
    out->ckpt_stall_ns = __atomic_load_n(&s->ckpt_stall_ns, __ATOMIC_RELAXED);
    out->ckpt_restore_ns = __atomic_load_n(&s->ckpt_restore_ns, __ATOMIC_RELAXED);
    out->ckpt_tier = __atomic_load_n(&s->ckpt_tier, __ATOMIC_RELAXED);
    out->restore_source =
        __atomic_load_n(&s->restore_source, __ATOMIC_ACQUIRE); /* pairs with report.c */
    out->restore_step = __atomic_load_n(&s->restore_step, __ATOMIC_RELAXED);
    out->restore_bytes = __atomic_load_n(&s->restore_bytes, __ATOMIC_RELAXED);
    out->restore_us = __atomic_load_n(&s->restore_us, __ATOMIC_RELAXED);
}

void channel__hb_close(channel__hb_region *region, bool unlink_file)
{
    if (region == NULL) return;
    munmap(region->base, region->size);
    if (unlink_file && region->path != NULL) unlink(region->path);
    free(region->path);
    free(region);
}

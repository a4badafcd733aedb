/* libFuzzer target: every rendezvous value a node reads from the store (join
 * records, assignments, causes, a generation's info). Whatever decodes must
 * encode again and decode to the same fields: a value one node accepts is a
 * value every node reads the same way. */
#include "rdzv/rdzv.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void record_roundtrip(const rdzv__record *rec)
{
    char buf[RDZV__MAX_RECORD];
    size_t len = rdzv__record_encode(rec, buf, sizeof buf);
    rdzv__record again;
    if (len == 0 || rdzv__record_decode(buf, len, &again) != 0) abort();
    if (again.local_world_size != rec->local_world_size ||
        again.prev_generation != rec->prev_generation || strcmp(again.node_id, rec->node_id) != 0 ||
        strcmp(again.addr, rec->addr) != 0)
        abort();
}

static void assignment_roundtrip(const rdzv__assignment *a)
{
    char buf[RDZV__MAX_RECORD];
    size_t len = rdzv__assignment_encode(a, buf, sizeof buf);
    rdzv__assignment again;
    if (len == 0 || rdzv__assignment_decode(buf, len, &again) != 0) abort();
    if (again.generation != a->generation || again.group_rank != a->group_rank ||
        again.world_size != a->world_size || strcmp(again.master_addr, a->master_addr) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *value = (const char *)data;
    rdzv__record rec;
    if (rdzv__record_decode(value, size, &rec) == 0) record_roundtrip(&rec);
    rdzv__assignment a;
    if (rdzv__assignment_decode(value, size, &a) == 0) assignment_roundtrip(&a);
    elastic_rdzv_cause cause = { .struct_size = sizeof cause };
    (void)rdzv__cause_decode(value, size, &cause);
    rdzv__info info;
    rdzv__record *members = NULL;
    if (rdzv__info_decode(value, size, &info, &members) == 0) {
        if (info.formed && info.group_world_size > 0 && members == NULL) abort();
        for (int i = 0; info.formed && i < info.group_world_size; i++)
            record_roundtrip(&members[i]);
    }
    free(members);
    return 0;
}

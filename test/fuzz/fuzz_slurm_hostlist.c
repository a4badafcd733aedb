/* libFuzzer target for src/slurm/hostlist.c: whatever is accepted expands to
 * 1..max_hosts names of host characters, each at most 253 long, and the
 * names written back as a plain comma list expand to the same names in the
 * same order (a name never holds a separator or a bracket); a refused text
 * leaves the output untouched (a list whose plain form is over the text
 * bound is not written back). The first byte picks a small host budget. The
 * tasks-per-node parser gets the same text: an accepted one names a count
 * 1..65536 for the asked node. */
#include "slurm/slurm.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const elastic__hostlist *list, size_t max_hosts)
{
    if (list->count == 0 || list->count > max_hosts) abort();
    for (size_t i = 0; i < list->count; i++) {
        size_t len = strlen(list->names[i]);
        if (len == 0 || len > ELASTIC__HOSTLIST_NAME_MAX) abort();
        if (strspn(list->names[i],
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t max_hosts = data[0] & 1 ? (size_t)(data[0] >> 1) + 1 : 4096;
    char *text = malloc(size);
    if (text == NULL) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    elastic__hostlist list = { (char **)text, 12345 };
    int rc = elastic__hostlist_expand("fuzz", text, max_hosts, &list);
    if (rc != 0) {
        if ((rc != ELASTIC_EINVAL && rc != ELASTIC_ENOMEM) || list.names != (char **)text ||
            list.count != 12345)
            abort();
    } else {
        check_names(&list, max_hosts);
        size_t total = 0;
        for (size_t i = 0; i < list.count; i++) total += strlen(list.names[i]) + 1;
        /* A plain list longer than the text bound is refused by design: no round trip. */
        if (total - 1 > ELASTIC__HOSTLIST_MAX_TEXT) {
            elastic__hostlist_free(&list);
            free(text);
            return 0;
        }
        char *back = malloc(total);
        if (back == NULL) abort();
        size_t used = 0;
        for (size_t i = 0; i < list.count; i++) {
            size_t len = strlen(list.names[i]);
            memcpy(back + used, list.names[i], len);
            used += len;
            back[used++] = ',';
        }
        back[used - 1] = '\0';
        elastic__hostlist again;
        if (elastic__hostlist_expand("fuzz", back, max_hosts, &again) != 0 ||
            again.count != list.count)
            abort();
        for (size_t i = 0; i < list.count; i++)
            if (strcmp(again.names[i], list.names[i]) != 0) abort();
        elastic__hostlist_free(&again);
        elastic__hostlist_free(&list);
        free(back);
    }
    int count = -7;
    size_t nodes = 99;
    rc = elastic__slurm_tasks_per_node("fuzz", text, data[0], &count, &nodes);
    if (rc == 0 ? (count < 1 || count > 65536 || nodes <= data[0] || nodes > 65536)
                : (count != -7 || nodes != 99))
        abort();
    free(text);
    return 0;
}

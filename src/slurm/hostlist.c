/*
 * Slurm's hostlist grammar (slurm.h): entries split at ',' or whitespace
 * outside brackets; an entry is literal text around up to
 * ELASTIC__HOSTLIST_MAX_GROUPS bracket groups; each group is a comma list of
 * numbers and lo-hi ranges, expanded first group slowest ("a[1-2]b[3-4]":
 * a1b3 a1b4 a2b3 a2b4, as `scontrol show hostnames` prints it). Every count is
 * checked against the host budget before anything is allocated for it.
 */
#include "slurm/slurm.h"

#include "common/parse_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct number {
    uint32_t value;
    int width; /* digits to print: the width of the range's low bound as written */
} number;

typedef struct group {
    number *numbers;
    size_t count;
} group;

/* One entry: literal[0] group[0] literal[1] ... group[n-1] literal[n]. */
typedef struct entry {
    const char *literal[ELASTIC__HOSTLIST_MAX_GROUPS + 1];
    size_t literal_len[ELASTIC__HOSTLIST_MAX_GROUPS + 1];
    group groups[ELASTIC__HOSTLIST_MAX_GROUPS];
    size_t ngroups;
} entry;

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

static int refuse(const char *what, const char *text, size_t len, const char *fmt_rule,
                  const char *detail)
{
    char rule[160];
    snprintf(rule, sizeof rule, fmt_rule, detail != NULL ? detail : "");
    return elastic__fail(ELASTIC_EINVAL, "%s: \"%.*s%s\" %s", what, len > 80 ? 80 : (int)len, text,
                         len > 80 ? "..." : "", rule);
}

static void entry_free(entry *e)
{
    for (size_t i = 0; i < e->ngroups; i++) free(e->groups[i].numbers);
    e->ngroups = 0;
}

/* One bound: 1..MAX_DIGITS digits. */
static bool parse_bound(const char *text, size_t len, uint32_t *value)
{
    if (len == 0 || len > ELASTIC__HOSTLIST_MAX_DIGITS) return false;
    uint64_t v = 0;
    if (elastic__parse_u64_n(NULL, text, len, 0, UINT32_MAX, &v) != 0) return false;
    *value = (uint32_t)v;
    return true;
}

/* The numbers between '[' and ']' (body, len) appended to *g, at most budget of them. */
static int parse_group(const char *what, const char *body, size_t len, size_t budget, group *g)
{
    size_t cap = 0;
    g->numbers = NULL;
    g->count = 0;
    if (len == 0) return refuse(what, body - 1, len + 2, "is an empty bracket group%s", NULL);
    const char *p = body, *end = body + len;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma != NULL ? comma : end;
        const char *dash = memchr(p, '-', (size_t)(item_end - p));
        uint32_t lo = 0, hi = 0;
        size_t lo_len = (size_t)((dash != NULL ? dash : item_end) - p);
        if (!parse_bound(p, lo_len, &lo) ||
            (dash != NULL && !parse_bound(dash + 1, (size_t)(item_end - dash - 1), &hi)))
            goto bad_item;
        if (dash == NULL) hi = lo;
        if (hi < lo) {
            free(g->numbers);
            return refuse(what, p, (size_t)(item_end - p), "is a range that runs backwards%s",
                          NULL);
        }
        uint64_t span = (uint64_t)hi - lo + 1;
        if (span > budget - g->count) {
            char limit[32];
            snprintf(limit, sizeof limit, "%zu", budget);
            free(g->numbers);
            return refuse(what, p, (size_t)(item_end - p),
                          "expands to more hosts than the limit leaves (%s)", limit);
        }
        if (g->count + span > cap) {
            size_t want = cap == 0 ? 8 : cap;
            while (want < g->count + span) want *= 2;
            number *grown = realloc(g->numbers, want * sizeof *grown);
            if (grown == NULL) {
                free(g->numbers);
                return elastic__fail(ELASTIC_ENOMEM, "%s: out of memory", what);
            }
            g->numbers = grown;
            cap = want;
        }
        for (uint64_t v = lo; v <= hi; v++)
            g->numbers[g->count++] = (number){ (uint32_t)v, (int)lo_len };
        if (comma == NULL) break;
        p = comma + 1;
        continue;
    bad_item:
        free(g->numbers);
        g->numbers = NULL;
        return refuse(what, p, (size_t)(item_end - p),
                      "is not a number or a lo-hi range (digits, at most 9)%s", NULL);
    }
    return 0;
}

/* Splits one entry (text, len) into literals and groups; *hosts = the product of the counts. */
static int parse_entry(const char *what, const char *text, size_t len, size_t budget, entry *e,
                       size_t *hosts)
{
    memset(e, 0, sizeof *e);
    const char *p = text, *end = text + len;
    size_t product = 1;
    for (;;) {
        const char *open = memchr(p, '[', (size_t)(end - p));
        const char *lit_end = open != NULL ? open : end;
        for (const char *c = p; c < lit_end; c++) {
            if (*c == ']') {
                entry_free(e);
                return refuse(what, text, len, "has a ']' without its '['%s", NULL);
            }
            if (!host_char(*c)) {
                entry_free(e);
                return refuse(what, text, len,
                              "has a character that is not in a host name ([A-Za-z0-9._-])%s",
                              NULL);
            }
        }
        e->literal[e->ngroups] = p;
        e->literal_len[e->ngroups] = (size_t)(lit_end - p);
        if (open == NULL) break;
        const char *close = memchr(open + 1, ']', (size_t)(end - open - 1));
        if (close == NULL) {
            entry_free(e);
            return refuse(what, text, len, "has a '[' without its ']'%s", NULL);
        }
        if (memchr(open + 1, '[', (size_t)(close - open - 1)) != NULL) {
            entry_free(e);
            return refuse(what, text, len, "nests brackets%s", NULL);
        }
        if (e->ngroups == ELASTIC__HOSTLIST_MAX_GROUPS) {
            entry_free(e);
            return refuse(what, text, len, "has more than 4 bracket groups in one name%s", NULL);
        }
        group *g = &e->groups[e->ngroups];
        int rc = parse_group(what, open + 1, (size_t)(close - open - 1), budget, g);
        if (rc != 0) {
            entry_free(e);
            return rc;
        }
        e->ngroups++;
        if (g->count > budget / product) {
            entry_free(e);
            char limit[32];
            snprintf(limit, sizeof limit, "%zu", budget);
            return refuse(what, text, len, "expands to more hosts than the limit leaves (%s)",
                          limit);
        }
        product *= g->count;
        p = close + 1;
    }
    *hosts = product;
    return 0;
}

/* Writes host number `index` of entry e (odometer, group 0 slowest) into buf. */
static int format_host(const char *what, const entry *e, size_t index, char *buf, size_t size)
{
    size_t digits[ELASTIC__HOSTLIST_MAX_GROUPS];
    for (size_t i = e->ngroups; i-- > 0;) {
        digits[i] = index % e->groups[i].count;
        index /= e->groups[i].count;
    }
    size_t used = 0;
    for (size_t i = 0; i <= e->ngroups; i++) {
        if (e->literal_len[i] >= size - used) goto too_long;
        memcpy(buf + used, e->literal[i], e->literal_len[i]);
        used += e->literal_len[i];
        if (i == e->ngroups) break;
        const number *n = &e->groups[i].numbers[digits[i]];
        int wrote = snprintf(buf + used, size - used, "%0*u", n->width, (unsigned)n->value);
        if (wrote < 0 || (size_t)wrote >= size - used) goto too_long;
        used += (size_t)wrote;
    }
    buf[used] = '\0';
    if (used == 0) return elastic__fail(ELASTIC_EINVAL, "%s: a host name is empty", what);
    return 0;
too_long:
    return elastic__fail(ELASTIC_EINVAL, "%s: a host name is longer than %d characters", what,
                         ELASTIC__HOSTLIST_NAME_MAX);
}

void elastic__hostlist_free(elastic__hostlist *list)
{
    if (list == NULL) return;
    for (size_t i = 0; i < list->count; i++) free(list->names[i]);
    free(list->names);
    list->names = NULL;
    list->count = 0;
}

static bool separator(char c)
{
    return c == ',' || isspace((unsigned char)c);
}

/* The end of the entry starting at p: the first separator outside brackets. */
static const char *entry_end(const char *p)
{
    bool inside = false;
    for (; *p != '\0'; p++) {
        if (*p == '[') inside = true;
        if (*p == ']') inside = false;
        if (!inside && separator(*p)) break;
    }
    return p;
}

int elastic__hostlist_expand(const char *what, const char *text, size_t max_hosts,
                             elastic__hostlist *out)
{
    if (what == NULL) what = "hostlist";
    if (max_hosts == 0 || max_hosts > ELASTIC__HOSTLIST_MAX_HOSTS)
        max_hosts = ELASTIC__HOSTLIST_MAX_HOSTS;
    if (text == NULL) return elastic__fail(ELASTIC_EINVAL, "%s: no node list", what);
    size_t text_len = strnlen(text, ELASTIC__HOSTLIST_MAX_TEXT + 1);
    if (text_len > ELASTIC__HOSTLIST_MAX_TEXT)
        return refuse(what, text, text_len, "is longer than 65536 characters%s", NULL);
    elastic__hostlist list = { NULL, 0 };
    size_t cap = 0;
    char name[ELASTIC__HOSTLIST_NAME_MAX + 1];
    const char *p = text;
    int rc = 0;
    while (*p != '\0') {
        if (separator(*p)) { /* empty entries ("a,,b") are skipped, as Slurm does */
            p++;
            continue;
        }
        const char *end = entry_end(p);
        entry e;
        size_t hosts = 0;
        rc = parse_entry(what, p, (size_t)(end - p), max_hosts - list.count, &e, &hosts);
        if (rc != 0) goto fail;
        if (hosts > max_hosts - list.count) {
            entry_free(&e);
            rc = elastic__fail(ELASTIC_EINVAL, "%s: expands to more hosts than the limit of %zu",
                               what, max_hosts);
            goto fail;
        }
        if (list.count + hosts > cap) {
            size_t want = cap == 0 ? 8 : cap;
            while (want < list.count + hosts) want *= 2;
            char **grown = realloc(list.names, want * sizeof *grown);
            if (grown == NULL) {
                entry_free(&e);
                rc = elastic__fail(ELASTIC_ENOMEM, "%s: out of memory", what);
                goto fail;
            }
            list.names = grown;
            cap = want;
        }
        for (size_t i = 0; i < hosts; i++) {
            rc = format_host(what, &e, i, name, sizeof name);
            if (rc == 0 && (list.names[list.count] = elastic__strdup(name)) == NULL)
                rc = elastic__fail(ELASTIC_ENOMEM, "%s: out of memory", what);
            if (rc != 0) {
                entry_free(&e);
                goto fail;
            }
            list.count++;
        }
        entry_free(&e);
        p = end;
    }
    if (list.count == 0) {
        rc = elastic__fail(ELASTIC_EINVAL, "%s: the node list is empty", what);
        goto fail;
    }
    *out = list;
    return 0;
fail:
    elastic__hostlist_free(&list);
    return rc;
}

int elastic__slurm_tasks_per_node(const char *what, const char *text, size_t index, int *count,
                                  size_t *nodes)
{
    static const char rule[] = "is not Slurm's tasks per node (counts 1..65536 as \"2(x3),1\")%s";
    if (text == NULL || text[0] == '\0')
        return elastic__fail(ELASTIC_EINVAL, "%s: empty tasks-per-node list", what);
    size_t text_len = strnlen(text, 4097);
    if (text_len > 4096) return refuse(what, text, text_len, "is too long%s", NULL);
    size_t used = 0;
    int found = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t item_len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        const char *paren = memchr(p, '(', item_len);
        size_t count_len = paren != NULL ? (size_t)(paren - p) : item_len;
        int64_t per_node = 0, repeat = 1;
        if (elastic__parse_i64_n(NULL, p, count_len, 1, 65536, &per_node) != 0)
            return refuse(what, text, text_len, rule, NULL);
        if (paren != NULL) { /* "(xN)" is the whole rest of the item */
            size_t rest = item_len - count_len;
            if (rest < 4 || paren[1] != 'x' || paren[rest - 1] != ')' ||
                elastic__parse_i64_n(NULL, paren + 2, rest - 3, 1, 65536, &repeat) != 0)
                return refuse(what, text, text_len, rule, NULL);
        }
        if ((uint64_t)repeat > ELASTIC__HOSTLIST_MAX_HOSTS - used)
            return refuse(what, text, text_len, "names more than 65536 nodes%s", NULL);
        if (index >= used && index < used + (size_t)repeat) found = (int)per_node;
        used += (size_t)repeat;
        if (comma == NULL) break;
        p = comma + 1;
    }
    if (found == 0)
        return elastic__fail(ELASTIC_EINVAL, "%s: \"%.80s\" has no entry for node %zu", what, text,
                             index);
    *count = found;
    *nodes = used;
    return 0;
}

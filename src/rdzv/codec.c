/*
 * Text encodings of the rendezvous records kept in the store, and their
 * validating parsers: every length, count and number read back is bounded,
 * so a corrupt or hostile value yields ELASTIC_ECORRUPT, never a crash.
 */
#include "rdzv/rdzv.h"

#include "common/names.h"
#include "common/parse_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_FIELDS 16

bool rdzv__valid_token(const char *text, size_t cap)
{
    if (text == NULL) return false;
    size_t len = strnlen(text, cap);
    if (len == 0 || len >= cap) return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] <= 0x20 || (unsigned char)text[i] >= 0x7f) return false;
    return true;
}

int rdzv__parse_int(const char *value, size_t len, int64_t min, int64_t max, int64_t *out)
{
    /* Another node wrote it: a bad number is a corrupt record, not a bad argument. */
    return elastic__parse_i64_n(NULL, value, len, min, max, out) == 0 ? 0 : ELASTIC_ECORRUPT;
}

/* Splits a NUL-terminated line at single spaces into at most max fields; with
 * keep_rest the last field takes the rest of the line, spaces included. */
static int split(char *line, char **fields, int max, bool keep_rest)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        fields[n++] = p;
        if (keep_rest && n == max) break;
        char *space = strchr(p, ' ');
        if (space == NULL) break;
        *space = '\0';
        p = space + 1;
    }
    return n;
}

static int field_int(const char *field, int64_t min, int64_t max, int64_t *out)
{
    return rdzv__parse_int(field, strlen(field), min, max, out);
}

static int copy_token(char *dst, size_t cap, const char *src)
{
    if (!rdzv__valid_token(src, cap)) return ELASTIC_ECORRUPT;
    strcpy(dst, src);
    return 0;
}

/* A stored value as a NUL-terminated copy, rejecting embedded NULs and
 * anything longer than cap-1 bytes. */
static int bounded_copy(const char *value, size_t len, char *buf, size_t cap)
{
    if (value == NULL || len >= cap || memchr(value, '\0', len) != NULL) return ELASTIC_ECORRUPT;
    memcpy(buf, value, len);
    buf[len] = '\0';
    return 0;
}

/* ---- join records ------------------------------------------------------- */

static size_t record_line(const rdzv__record *rec, bool with_slot, char *buf, size_t cap)
{
    int n = with_slot ? snprintf(buf, cap, "%d %d %d %" PRIu64 " %d %d %s %s\n", rec->slot,
                                 rec->local_world_size, rec->master_port, rec->prev_generation,
                                 rec->prev_rank, rec->preferred_rank, rec->node_id, rec->addr)
                      : snprintf(buf, cap, "R2 %d %d %" PRIu64 " %d %d %s %s",
                                 rec->local_world_size, rec->master_port, rec->prev_generation,
                                 rec->prev_rank, rec->preferred_rank, rec->node_id, rec->addr);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

size_t rdzv__record_encode(const rdzv__record *rec, char *buf, size_t cap)
{
    return record_line(rec, false, buf, cap);
}

/* fields: lws port prev_gen prev_rank preferred_rank node_id addr */
static int record_fields(char **f, rdzv__record *rec)
{
    int64_t lws, port, prev_gen, prev_rank, preferred;
    if (field_int(f[0], 1, RDZV__MAX_LOCAL_WORLD, &lws) != 0 ||
        field_int(f[1], 0, 65535, &port) != 0 || field_int(f[2], 0, INT64_MAX, &prev_gen) != 0 ||
        field_int(f[3], -1, RDZV__MAX_NODES - 1, &prev_rank) != 0 ||
        field_int(f[4], -1, RDZV__MAX_NODES - 1, &preferred) != 0)
        return ELASTIC_ECORRUPT;
    rec->local_world_size = (int)lws;
    rec->master_port = (int)port;
    rec->prev_generation = (uint64_t)prev_gen;
    rec->prev_rank = (int)prev_rank;
    rec->preferred_rank = (int)preferred;
    /* A member's id reaches file names, metrics and scontrol (--slurm-drain):
     * one that could not be a host name is no member. */
    if (!elastic__host_name_ok(f[5], sizeof rec->node_id - 1) ||
        copy_token(rec->node_id, sizeof rec->node_id, f[5]) != 0 ||
        copy_token(rec->addr, sizeof rec->addr, f[6]) != 0)
        return ELASTIC_ECORRUPT;
    return 0;
}

int rdzv__record_decode(const char *value, size_t len, rdzv__record *rec)
{
    char buf[RDZV__MAX_RECORD];
    char *f[MAX_FIELDS];
    if (bounded_copy(value, len, buf, sizeof buf) != 0 || split(buf, f, 9, false) != 8 ||
        strcmp(f[0], "R2") != 0 || record_fields(f + 1, rec) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt join record (%zu bytes)", len);
    return 0;
}

/* ---- assignments ---------------------------------------------------------- */

size_t rdzv__assignment_encode(const rdzv__assignment *a, char *buf, size_t cap)
{
    int n;
    switch (a->outcome) {
    case RDZV__EXCLUDED: n = snprintf(buf, cap, "X"); break;
    case RDZV__VOID: n = snprintf(buf, cap, "V"); break;
    case RDZV__CLOSED: n = snprintf(buf, cap, "C"); break;
    default:
        n = snprintf(buf, cap, "A2 %" PRIu64 " %d %d %d %d %d %d %d %d %s %s %" PRIu64,
                     a->generation, a->group_rank, a->group_world_size, a->rank_base,
                     a->local_world_size, a->world_size, a->restart_count, a->master_port,
                     a->next_slot, a->master_addr, a->next_node_id, a->incarnation);
    }
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

static int assignment_fields(char **f, rdzv__assignment *a)
{
    int64_t v[9];
    static const int64_t lo[9] = { 1, 0, 1, 0, 1, 1, 0, 1, 1 };
    static const int64_t hi[9] = {
        INT64_MAX, RDZV__MAX_NODES - 1, RDZV__MAX_NODES, INT32_MAX, RDZV__MAX_LOCAL_WORLD,
        INT32_MAX, INT32_MAX,           65535,           INT32_MAX
    };
    for (int i = 0; i < 9; i++)
        if (field_int(f[i], lo[i], hi[i], &v[i]) != 0) return ELASTIC_ECORRUPT;
    if (v[1] >= v[2] || v[3] + v[4] > v[5]) return ELASTIC_ECORRUPT;
    a->outcome = RDZV__ASSIGNED;
    a->generation = (uint64_t)v[0];
    a->group_rank = (int)v[1];
    a->group_world_size = (int)v[2];
    a->rank_base = (int)v[3];
    a->local_world_size = (int)v[4];
    a->world_size = (int)v[5];
    a->restart_count = (int)v[6];
    a->master_port = (int)v[7];
    a->next_slot = (int)v[8];
    if (copy_token(a->master_addr, sizeof a->master_addr, f[9]) != 0 ||
        copy_token(a->next_node_id, sizeof a->next_node_id, f[10]) != 0)
        return ELASTIC_ECORRUPT;
    return 0;
}

int rdzv__assignment_decode(const char *value, size_t len, rdzv__assignment *a)
{
    char buf[RDZV__MAX_RECORD];
    char *f[MAX_FIELDS];
    memset(a, 0, sizeof *a);
    if (bounded_copy(value, len, buf, sizeof buf) != 0) goto corrupt;
    if (strcmp(buf, "X") == 0)
        a->outcome = RDZV__EXCLUDED;
    else if (strcmp(buf, "V") == 0)
        a->outcome = RDZV__VOID;
    else if (strcmp(buf, "C") == 0)
        a->outcome = RDZV__CLOSED;
    else {
        /* A1: an older sealer's, without the incarnation; it and an A2's 0
         * leave the node to read it from the store. */
        int n = split(buf, f, 14, false);
        bool a1 = n == 12 && strcmp(f[0], "A1") == 0, a2 = n == 13 && strcmp(f[0], "A2") == 0;
        if ((!a1 && !a2) || assignment_fields(f + 1, a) != 0) goto corrupt;
        int64_t incarnation = 0;
        if (a2 && field_int(f[12], 0, INT64_MAX, &incarnation) != 0) goto corrupt;
        a->incarnation = (uint64_t)incarnation;
    }
    return 0;
corrupt:
    return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt assignment (%zu bytes)", len);
}

/* ---- causes --------------------------------------------------------------- */

size_t rdzv__cause_encode(const elastic_rdzv_cause *cause, char *buf, size_t cap)
{
    char reason[sizeof cause->reason];
    snprintf(reason, sizeof reason, "%s", cause->reason);
    for (char *p = reason; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) *p = ' ';
    const char *node =
        rdzv__valid_token(cause->node_id, sizeof cause->node_id) ? cause->node_id : "-";
    int n = snprintf(buf, cap, "C1 %d %" PRIu64 " %d %d %d %" PRIu64 " %s %s", cause->kind,
                     cause->generation, cause->rank, cause->exit_code, cause->signal,
                     cause->time_ms, node, reason);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

int rdzv__cause_decode(const char *value, size_t len, elastic_rdzv_cause *cause)
{
    char buf[RDZV__MAX_RECORD + sizeof cause->reason];
    char *f[MAX_FIELDS];
    int64_t kind, gen, rank, exit_code, sig, time_ms;
    memset(cause, 0, sizeof *cause);
    cause->struct_size = sizeof *cause;
    if (bounded_copy(value, len, buf, sizeof buf) != 0 || split(buf, f, 9, true) != 9 ||
        strcmp(f[0], "C1") != 0 ||
        field_int(f[1], ELASTIC_RDZV_FAILURE, ELASTIC_RDZV_JOB_ENDED, &kind) != 0 ||
        field_int(f[2], 0, INT64_MAX, &gen) != 0 || field_int(f[3], -1, INT32_MAX, &rank) != 0 ||
        field_int(f[4], -1, 255, &exit_code) != 0 || field_int(f[5], 0, 128, &sig) != 0 ||
        field_int(f[6], 0, INT64_MAX, &time_ms) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt generation-end record (%zu bytes)",
                             len);
    if (strcmp(f[7], "-") != 0 && copy_token(cause->node_id, sizeof cause->node_id, f[7]) != 0)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt node id in a generation-end record");
    cause->kind = (int)kind;
    cause->generation = (uint64_t)gen;
    cause->rank = (int)rank;
    cause->exit_code = (int)exit_code;
    cause->signal = (int)sig;
    cause->time_ms = (uint64_t)time_ms;
    snprintf(cause->reason, sizeof cause->reason, "%s", f[8]);
    return 0;
}

/* ---- the generation's commit record ---------------------------------------- */

int rdzv__info_encode(const rdzv__info *info, const rdzv__record *members, char **blob, size_t *len)
{
    size_t n = info->formed ? (size_t)info->group_world_size : 0;
    size_t cap = 96 + n * (RDZV__MAX_ID + RDZV__MAX_ADDR + 64);
    char *out = malloc(cap);
    if (out == NULL) return elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    int used =
        snprintf(out, cap, "I1 %d %" PRIu64 " %d %d %d\n", info->formed ? 1 : 0, info->generation,
                 info->group_world_size, info->sealed_count, info->restart_count);
    size_t pos = (size_t)used;
    for (size_t i = 0; i < n; i++) {
        size_t wrote = record_line(&members[i], true, out + pos, cap - pos);
        if (wrote == 0) {
            free(out);
            return elastic__fail(ELASTIC_EINVAL, "rdzv: member record too long");
        }
        pos += wrote;
    }
    *blob = out;
    *len = pos;
    return 0;
}

static int info_header(char *line, rdzv__info *info)
{
    char *f[MAX_FIELDS];
    int64_t formed, gen, gws, sealed, restarts;
    if (split(line, f, 7, false) != 6 || strcmp(f[0], "I1") != 0 ||
        field_int(f[1], 0, 1, &formed) != 0 || field_int(f[2], 1, INT64_MAX, &gen) != 0 ||
        field_int(f[3], 0, RDZV__MAX_NODES, &gws) != 0 ||
        field_int(f[4], 0, INT32_MAX, &sealed) != 0 ||
        field_int(f[5], 0, INT32_MAX, &restarts) != 0)
        return ELASTIC_ECORRUPT;
    info->formed = formed == 1;
    info->generation = (uint64_t)gen;
    info->group_world_size = (int)gws;
    info->sealed_count = (int)sealed;
    info->restart_count = (int)restarts;
    return info->formed == (gws > 0) ? 0 : ELASTIC_ECORRUPT;
}

static int member_line(char *line, rdzv__record *rec)
{
    char *f[MAX_FIELDS];
    int64_t slot;
    if (split(line, f, 9, false) != 8 || field_int(f[0], 1, INT32_MAX, &slot) != 0)
        return ELASTIC_ECORRUPT;
    rec->slot = (int)slot;
    return record_fields(f + 1, rec);
}

static int info_parse(char *text, rdzv__info *info, rdzv__record **members)
{
    char *line_end = strchr(text, '\n');
    if (line_end == NULL) return ELASTIC_ECORRUPT;
    *line_end = '\0';
    if (info_header(text, info) != 0) return ELASTIC_ECORRUPT;
    if (members == NULL) return 0;
    size_t n = (size_t)info->group_world_size;
    rdzv__record *out = calloc(n > 0 ? n : 1, sizeof *out);
    if (out == NULL) return ELASTIC_ENOMEM;
    char *line = line_end + 1;
    for (size_t i = 0; i < n; i++) {
        line_end = strchr(line, '\n');
        if (line_end == NULL || (size_t)(line_end - line) >= RDZV__MAX_RECORD) goto corrupt;
        *line_end = '\0';
        if (member_line(line, &out[i]) != 0) goto corrupt;
        line = line_end + 1;
    }
    if (*line != '\0') goto corrupt;
    *members = out;
    return 0;
corrupt:
    free(out);
    return ELASTIC_ECORRUPT;
}

int rdzv__info_decode(const char *value, size_t len, rdzv__info *info, rdzv__record **members)
{
    if (members != NULL) *members = NULL;
    size_t cap = 96 + (size_t)RDZV__MAX_NODES * RDZV__MAX_RECORD;
    if (value == NULL || len >= cap || memchr(value, '\0', len) != NULL)
        return elastic__fail(ELASTIC_ECORRUPT, "rdzv: corrupt generation record (%zu bytes)", len);
    char *text = malloc(len + 1);
    if (text == NULL) return elastic__fail(ELASTIC_ENOMEM, "rdzv: out of memory");
    memcpy(text, value, len);
    text[len] = '\0';
    int rc = info_parse(text, info, members);
    free(text);
    if (rc == ELASTIC_ENOMEM) return elastic__fail(rc, "rdzv: out of memory");
    if (rc != 0) return elastic__fail(rc, "rdzv: corrupt generation record (%zu bytes)", len);
    return 0;
}

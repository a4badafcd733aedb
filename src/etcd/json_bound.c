/*
 * Bounds on what etcd says, checked on the raw bytes before json-c builds
 * objects of them (etcd.h, etcd__json_budget): json-c grows without limit on
 * an endless stream message, and spends ~75 bytes of objects per array
 * element ("[0,0,...]" in an 8 MiB reply cost 306 MB), ~700 per object. One pass, no
 * allocation, resumable across the chunks a stream arrives in.
 */
#include "etcd/etcd.h"

#include <stdio.h>

void etcd__json_budget_reset(etcd__json_budget *b)
{
    memset(b, 0, sizeof *b);
}

int etcd__json_budget_add(etcd__json_budget *b, const char *text, size_t len, char *why, size_t cap)
{
    if (len > ETCD__MAX_RESPONSE - b->bytes) {
        snprintf(why, cap, "a message larger than %u bytes", ETCD__MAX_RESPONSE);
        return ELASTIC_ELIMIT;
    }
    b->bytes += len;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (b->in_string) {
            if (b->escape)
                b->escape = false;
            else if (ch == '\\')
                b->escape = true;
            else if (ch == '"')
                b->in_string = false;
            continue;
        }
        switch (ch) {
        case '"': b->in_string = true; break;
        case '[':
        case '{':
            /* An object costs json-c a hash table (~700 bytes with its
             * entries, measured), an array element ~75: weighed so. */
            b->elements += ch == '{' ? ETCD__OBJECT_WEIGHT : 1;
            if (++b->depth > ETCD__MAX_DEPTH) {
                snprintf(why, cap, "JSON nested deeper than %u", ETCD__MAX_DEPTH);
                return ELASTIC_ELIMIT;
            }
            break;
        case ']':
        case '}':
            if (b->depth > 0) b->depth--;
            break;
        case ',': b->elements++; break;
        default: break;
        }
        if (b->elements > ETCD__MAX_ELEMENTS) {
            snprintf(why, cap, "a message of more than %u JSON values (an object counts %u)",
                     ETCD__MAX_ELEMENTS, ETCD__OBJECT_WEIGHT);
            return ELASTIC_ELIMIT;
        }
    }
    return 0;
}

json_tokener *etcd__json_tokener(void)
{
    json_tokener *tok = json_tokener_new_ex(ETCD__MAX_DEPTH + 1);
    /* Strict: no comments, no single-quoted strings, where a '"' the budget
     * counted as a string's start would hide brackets from it. Several
     * messages follow each other in a stream: what follows one is the next. */
    if (tok != NULL)
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
    return tok;
}

json_object *etcd__json_parse(const char *text, size_t len)
{
    json_tokener *tok = len <= INT32_MAX ? etcd__json_tokener() : NULL;
    if (tok == NULL) return NULL;
    json_object *value = json_tokener_parse_ex(tok, text, (int)len);
    json_tokener_free(tok);
    return value;
}

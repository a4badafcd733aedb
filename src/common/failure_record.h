/*
 * A classified failure as one line of text (failure_record.c), so the job's
 * history of failures can live in its store: each node that records a
 * failure writes its entry, and whichever node decides reads every entry
 * back and runs the policy (failure_policy.h) over the same history. The
 * text is bounded, versioned and validated field by field on the way back:
 * the store is input like any other.
 */
#ifndef ELASTIC_COMMON_FAILURE_RECORD_H
#define ELASTIC_COMMON_FAILURE_RECORD_H

#include "common/failure_policy.h"

#include <stddef.h>

/* "F1\t<gen>\t<step>\t<rank>\t<class>\t<consequence>\t<replaced>\t<time_ms>\t<hash hex>\t<node>\t<signature>" */
#define FAILURE_RECORD_MAX (FAILURE_SIGNATURE_MAX + 256)

/* The entry as text in out (size >= FAILURE_RECORD_MAX); its length, or 0
 * when a field cannot be written (a tab or newline in the node id). */
size_t failure_record__encode(const failure_policy_entry *e, char *out, size_t size);
/* 0, or -1 for anything but a well-formed record (out then unspecified). */
int failure_record__decode(const char *text, size_t len, failure_policy_entry *out);

#endif /* ELASTIC_COMMON_FAILURE_RECORD_H */

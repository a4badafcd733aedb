/*
 * The ckpt module's public API (filled in by its issue).
 * Included by <elastic.h>; do not include directly.
 */
#ifndef ELASTIC_CKPT_H
#define ELASTIC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif /* ELASTIC_CKPT_H */

/*
 * elastic_has_feature's registry. The built-in parts are answered here; a
 * feature whose answer needs a higher module (NCCL and the CUDA runtime found
 * at run time, in src/nccl/) is answered by a probe that module registers
 * from a constructor, so common (and the worker, which asks) never depend on
 * it. In a static link the probe comes with the module: a program that links
 * any elastic_nccl_* call has it; libelastic.so always has it.
 */
#ifndef ELASTIC_COMMON_FEATURES_H
#define ELASTIC_COMMON_FEATURES_H

/* Returns 1 when the feature is available here, else 0. */
typedef int (*elastic__feature_probe)(void);

/* Registers `probe` for `name` (a string literal). Called from constructors,
 * before any thread of ours exists; at most 8 probes, a later one for the
 * same name replaces the earlier. */
void elastic__feature_register(const char *name, elastic__feature_probe probe);

#endif

/*
 * The environment without the agent's secrets (env_secrets.c).
 */
#ifndef ELASTIC_COMMON_ENV_SECRETS_H
#define ELASTIC_COMMON_ENV_SECRETS_H

#include <stdbool.h>

/* Whether a "NAME=value" entry is one of the agent's secrets
 * (ELASTIC_STORE_TOKEN, ELASTIC_ETCD_PASSWORD). */
bool elastic__env_is_secret(const char *entry);
/* environ without them: an array of pointers into environ's strings (valid
 * while environ is not changed), NULL-terminated; free() it. NULL: out of
 * memory. */
char **elastic__environ_without_secrets(void);

#endif

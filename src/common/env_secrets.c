/*
 * The agent's environment as the programs it runs for itself get it (the
 * site's health command, scontrol): without its secrets. The store token
 * and the etcd password may sit in the agent's own environment (they are
 * read from there); nothing the agent starts needs them, and a site script
 * that logs its environment would spill them. Workers get theirs through
 * worker_env.c, which drops the token too.
 */
#include "common/env_secrets.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

static const char *const secrets[] = { "ELASTIC_STORE_TOKEN=", "ELASTIC_ETCD_PASSWORD=" };

bool elastic__env_is_secret(const char *entry)
{
    for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
        if (strncmp(entry, secrets[i], strlen(secrets[i])) == 0) return true;
    return false;
}

char **elastic__environ_without_secrets(void)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) n++;
    char **out = calloc(n + 1, sizeof *out);
    if (out == NULL) return NULL;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!elastic__env_is_secret(environ[i])) out[kept++] = environ[i];
    out[kept] = NULL;
    return out;
}

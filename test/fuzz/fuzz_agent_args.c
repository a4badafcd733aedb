/*
 * libFuzzer target for elasticrun's command line: the input is split at NUL
 * or newline into argv (and, after a line "--env--", PET_* environment
 * entries); the same strings go through the --rdzv-conf, Std and endpoint
 * parsers. Nothing may crash, leak or read out of bounds.
 */
#include "agent/agent.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0;
    char *text = malloc(size + 1);
    if (text == NULL) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *argv[FUZZ_MAX_ARGS + 1] = { "elasticrun" };
    const char *envp[FUZZ_MAX_ARGS + 1] = { NULL };
    int argc = 1, envc = 0;
    bool in_env = false;
    for (char *save = NULL, *item = strtok_r(text, "\n", &save); item != NULL;
         item = strtok_r(NULL, "\n", &save)) {
        if (strcmp(item, "--env--") == 0) {
            in_env = true;
            continue;
        }
        if (in_env && envc < FUZZ_MAX_ARGS)
            envp[envc++] = item;
        else if (!in_env && argc < FUZZ_MAX_ARGS)
            argv[argc++] = item;
    }
    envp[envc] = NULL;
    elastic_agent_opts opts;
    elastic_agent_opts_init(&opts, sizeof opts);
    elastic_agent_parse_args(argc, argv, envp, &opts);
    for (int i = 1; i < argc; i++) {
        agent_rdzv_conf conf;
        int mask;
        agent__rdzv_conf_parse(argv[i], &conf);
        agent__std_parse(argv[i], i, &mask); /* endpoints: fuzz_endpoint.c */
    }
    free(text);
    return 0;
}

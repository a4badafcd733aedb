/*
 * elasticrun: a drop-in torchrun. Parses the command line into agent
 * options, forwards SIGTERM/SIGINT to the agent, runs it, prints the root
 * cause when the job failed, and exits with the job's code (2: bad flags).
 */
#include <elastic.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static elastic_agent *running_agent;

static void on_signal(int signum)
{
    elastic_agent_request_stop(running_agent, signum);
}

static void install_signal_handlers(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed console must not kill the agent */
}

int main(int argc, char **argv)
{
    elastic_agent_opts opts;
    elastic_agent_opts_init(&opts, sizeof opts);
    if (elastic_agent_parse_args(argc, (const char *const *)argv, NULL, &opts) != 0) {
        fprintf(stderr, "elasticrun: %s\n", elastic_last_error());
        return 2;
    }
    if (opts.help) {
        fputs(elastic_agent_usage(), stdout);
        if (opts.slurm_summary != NULL)
            printf("\nIn this Slurm job step (each a default its flag overrides):\n  %s\n",
                   opts.slurm_summary);
        return 0;
    }
    if (opts.version) {
        printf("elasticrun %s\n", elastic_version_string());
        return 0;
    }
    if (opts.slurm_stand_aside) { /* srun started several tasks here: local task 0 is the agent */
        fprintf(stderr,
                "elasticrun: slurm: another task of this step runs node %s's agent; "
                "this one has nothing to do\n",
                opts.node_name != NULL ? opts.node_name : "?");
        return 0;
    }
    int rc = elastic_agent_create(&opts, &running_agent);
    if (rc != 0) {
        fprintf(stderr, "elasticrun: %s: %s\n", elastic_strerror(rc), elastic_last_error());
        return rc == ELASTIC_EINVAL ? 2 : 1;
    }
    install_signal_handlers();
    elastic_agent_result result;
    memset(&result, 0, sizeof result);
    result.struct_size = sizeof result;
    rc = elastic_agent_run(running_agent, &result);
    if (rc != 0) {
        fprintf(stderr, "elasticrun: %s: %s\n", elastic_strerror(rc), elastic_last_error());
        result.exit_code = 1;
    } else if (result.exit_code != 0 && result.summary[0] != '\0') {
        fprintf(stderr, "elasticrun: %s", result.summary);
        if (result.summary[strlen(result.summary) - 1] != '\n') fputc('\n', stderr);
    }
    sigset_t stop_signals; /* no handler may reach the agent while it is freed */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop_signals, NULL);
    elastic_agent *agent = running_agent;
    running_agent = NULL;
    elastic_agent_free(agent);
    return result.exit_code;
}

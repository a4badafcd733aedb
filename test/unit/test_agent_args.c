/*
 * elasticrun's command line: torchrun spellings, PET_* fallbacks, the
 * program and its arguments, and one clear error per bad flag or value.
 */
#include "agent/agent.h"
#include "agent/worker_env.h"
#include "test.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof((argv)[0])))

static int parse(elastic_agent_opts *opts, int argc, const char *const *argv,
                 const char *const *envp)
{
    static const char *const no_env[] = { NULL };
    elastic_agent_opts_init(opts, sizeof *opts);
    return elastic_agent_parse_args(argc, argv, envp != NULL ? envp : no_env, opts);
}

TEST(agent_args_reads_torchrun_spellings)
{
    const char *argv[] = { "elasticrun",
                           "--nnodes=2:4",
                           "--nproc_per_node",
                           "8",
                           "--rdzv-backend",
                           "c10d",
                           "--rdzv_endpoint=host1:29400",
                           "--rdzv-id",
                           "job7",
                           "--max_restarts=3",
                           "--monitor-interval",
                           "0.1",
                           "-r",
                           "3",
                           "-t2",
                           "--log_dir",
                           "/tmp/logs",
                           "--role",
                           "trainer",
                           "train.py",
                           "--lr",
                           "0.1",
                           "--nnodes",
                           "5" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT_EQ(opts.min_nodes, 2);
    ASSERT_EQ(opts.max_nodes, 4);
    ASSERT_EQ(opts.nproc_per_node, 8);
    ASSERT_STR_EQ(opts.rdzv_backend, "c10d");
    ASSERT_STR_EQ(opts.rdzv_endpoint, "host1:29400");
    ASSERT_STR_EQ(opts.run_id, "job7");
    ASSERT_EQ(opts.max_restarts, 3);
    ASSERT_EQ(opts.monitor_interval_ms, 100);
    ASSERT_STR_EQ(opts.redirects, "3");
    ASSERT_STR_EQ(opts.tee, "2");
    ASSERT_STR_EQ(opts.log_dir, "/tmp/logs");
    ASSERT_STR_EQ(opts.role, "trainer");
    ASSERT_EQ(opts.argc, 5); /* the program's own flags are its own */
    ASSERT_STR_EQ(opts.argv[0], "train.py");
    ASSERT_STR_EQ(opts.argv[3], "--nnodes");
}

TEST(agent_args_has_torchrun_defaults)
{
    const char *argv[] = { "elasticrun", "train.py" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT_EQ(opts.min_nodes, 1);
    ASSERT_EQ(opts.max_nodes, 1);
    ASSERT_EQ(opts.nproc_per_node, 1);
    ASSERT_STR_EQ(opts.rdzv_backend, "static");
    ASSERT_STR_EQ(opts.run_id, "none");
    ASSERT_EQ(opts.max_restarts, 0);
    ASSERT_EQ(opts.master_port, 29500);
    ASSERT_EQ(opts.no_python, 0);
}

/* The failure policy's deterministic stop is the default; --torchrun-restarts
 * (or PET_TORCHRUN_RESTARTS=1) asks for torchrun's exact counting. */
TEST(agent_args_torchrun_restarts_switch)
{
    const char *plain[] = { "elasticrun", "--max-restarts", "10", "prog" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(plain), plain, NULL));
    ASSERT_EQ(opts.torchrun_restarts, 0);
    const char *asked[] = { "elasticrun", "--torchrun-restarts", "--max-restarts", "10", "prog" };
    ASSERT_OK(parse(&opts, ARGC(asked), asked, NULL));
    ASSERT_EQ(opts.torchrun_restarts, 1);
    const char *envp[] = { "PET_TORCHRUN_RESTARTS=1", NULL };
    ASSERT_OK(parse(&opts, ARGC(plain), plain, envp));
    ASSERT_EQ(opts.torchrun_restarts, 1);
}

/* Interpreters started ahead are the default; --no-prestart (or
 * PET_NO_PRESTART=1) turns them off. */
TEST(agent_args_no_prestart_switch)
{
    const char *plain[] = { "elasticrun", "--max-restarts", "3", "train.py" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(plain), plain, NULL));
    ASSERT_EQ(opts.no_prestart, 0);
    const char *asked[] = { "elasticrun", "--no-prestart", "--max-restarts", "3", "train.py" };
    ASSERT_OK(parse(&opts, ARGC(asked), asked, NULL));
    ASSERT_EQ(opts.no_prestart, 1);
    const char *envp[] = { "PET_NO_PRESTART=1", NULL };
    ASSERT_OK(parse(&opts, ARGC(plain), plain, envp));
    ASSERT_EQ(opts.no_prestart, 1);
}

TEST(agent_args_accepts_unique_prefixes_like_argparse)
{
    const char *argv[] = { "elasticrun", "--nproc", "2", "--stand", "--no-py", "prog" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT_EQ(opts.nproc_per_node, 2);
    ASSERT_EQ(opts.standalone, 1);
    ASSERT_EQ(opts.no_python, 1);
    const char *ambiguous[] = { "elasticrun", "--rdzv", "x",
                                "prog" }; /* rdzv_backend, rdzv_endpoint, ... */
    ASSERT_ERR(parse(&opts, ARGC(ambiguous), ambiguous, NULL), ELASTIC_EINVAL);
}

TEST(agent_args_falls_back_to_pet_environment)
{
    const char *argv[] = { "elasticrun", "--max-restarts", "9", "prog" };
    const char *envp[] = { "PET_NPROC_PER_NODE=3",
                           "PET_MAX_RESTARTS=1",
                           "PET_STANDALONE=1",
                           "PET_RDZV_ID=fromenv",
                           "PET_NNODES=1:1",
                           "UNRELATED=1",
                           NULL };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, envp));
    ASSERT_EQ(opts.nproc_per_node, 3);
    ASSERT_EQ(opts.max_restarts, 9); /* the flag wins over the environment */
    ASSERT_EQ(opts.standalone, 1);
    ASSERT_STR_EQ(opts.run_id, "fromenv");
    const char *bad_env[] = { "PET_NPROC_PER_NODE=lots", NULL };
    ASSERT_ERR(parse(&opts, ARGC(argv), argv, bad_env), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "PET_NPROC_PER_NODE") != NULL);
}

TEST(agent_args_resolves_nproc_words)
{
    const char *argv[] = { "elasticrun", "--nproc-per-node", "cpu", "prog" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT(opts.nproc_per_node >= 1);
    const char *auto_argv[] = { "elasticrun", "--nproc-per-node=auto", "prog" };
    ASSERT_OK(parse(&opts, ARGC(auto_argv), auto_argv, NULL));
    ASSERT(opts.nproc_per_node >= 1);
}

TEST(agent_args_rejects_bad_values_naming_the_flag)
{
    static const struct {
        const char *flag, *value, *mentions;
    } cases[] = {
        { "--nnodes", "0", "--nnodes" },
        { "--nnodes", "4:2", "MIN is greater" },
        { "--nnodes", "1:2:3", "--nnodes" },
        { "--nproc-per-node", "-1", "--nproc-per-node" },
        { "--nproc-per-node", "many", "--nproc-per-node" },
        { "--rdzv-backend", "zookeeper", "not supported" },
        { "--rdzv-backend", "etcd", "needs --rdzv-endpoint" },
        { "--rdzv-conf", "password=hunter2", "password_file" },
        { "--rdzv-conf", "cacert=", "cacert" },
        { "--max-restarts", "-1", "--max-restarts" },
        { "--max-restarts", "1e3", "--max-restarts" },
        { "--monitor-interval", "0", "--monitor-interval" },
        { "--monitor-interval", "nan", "--monitor-interval" },
        { "--master-port", "70000", "--master-port" },
        { "--redirects", "4", "--redirects" },
        { "--tee", "0:5", "--tee" },
        { "--rdzv-conf", "join_timeout", "key=value" },
        { "--rdzv-conf", "join_timeout=soon", "join_timeout" },
        { "--rdzv-conf", "is_host=maybe", "is_host" },
        { "--rdzv-id", "a/b", "--rdzv-id" },
        { "--rdzv-id", "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr",
          "1-64" }, /* 65 */
        { "--start-method", "thread", "--start-method" },
        { "--grace-period", "-3", "--grace-period" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = { "elasticrun", cases[i].flag, cases[i].value, "prog" };
        elastic_agent_opts opts;
        if (parse(&opts, ARGC(argv), argv, NULL) != ELASTIC_EINVAL)
            FAIL("%s %s was accepted", cases[i].flag, cases[i].value);
        if (strstr(elastic_last_error(), cases[i].mentions) == NULL)
            FAIL("%s %s: \"%s\" does not mention %s", cases[i].flag, cases[i].value,
                 elastic_last_error(), cases[i].mentions);
        ASSERT(strchr(elastic_last_error(), '\n') == NULL);
    }
}

TEST(agent_args_rejects_unknown_flags_missing_values_and_conflicts)
{
    elastic_agent_opts opts;
    const char *unknown[] = { "elasticrun", "--frobnicate", "prog" };
    ASSERT_ERR(parse(&opts, ARGC(unknown), unknown, NULL), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "--frobnicate") != NULL);
    const char *missing[] = { "elasticrun", "--nnodes" };
    ASSERT_ERR(parse(&opts, ARGC(missing), missing, NULL), ELASTIC_EINVAL);
    ASSERT(strstr(elastic_last_error(), "needs a value") != NULL);
    const char *no_program[] = { "elasticrun", "--standalone" };
    ASSERT_ERR(parse(&opts, ARGC(no_program), no_program, NULL), ELASTIC_EINVAL);
    const char *both[] = { "elasticrun", "-m", "--no-python", "pkg.main" };
    ASSERT_ERR(parse(&opts, ARGC(both), both, NULL), ELASTIC_EINVAL);
    const char *switch_value[] = { "elasticrun", "--standalone=1", "prog" };
    ASSERT_ERR(parse(&opts, ARGC(switch_value), switch_value, NULL), ELASTIC_EINVAL);
    const char *help[] = { "elasticrun", "--help" };
    ASSERT_OK(parse(&opts, ARGC(help), help, NULL));
    ASSERT_EQ(opts.help, 1);
}

TEST(agent_args_double_dash_starts_the_program)
{
    const char *argv[] = { "elasticrun", "--standalone", "--", "--weird-name", "x" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT_EQ(opts.argc, 2);
    ASSERT_STR_EQ(opts.argv[0], "--weird-name");
}

TEST(agent_args_etcd_backend_takes_an_endpoint_list_and_tls_conf)
{
    const char *argv[] = { "elasticrun",      "--nnodes=2:4",
                           "--rdzv-backend",  "etcd",
                           "--rdzv-endpoint", "e1:2379,e2:2379,e3:2379",
                           "--rdzv-conf",     "cacert=/ca.pem,cert=/c.pem,key=/k.pem,user=u",
                           "train.py" };
    elastic_agent_opts opts;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    ASSERT_STR_EQ(opts.rdzv_backend, "etcd-v3"); /* the alias and the name are one backend */
    ASSERT_STR_EQ(opts.rdzv_endpoint, "e1:2379,e2:2379,e3:2379");
    agent_rdzv_conf conf;
    ASSERT_OK(agent__rdzv_conf_parse(opts.rdzv_conf, &conf));
    ASSERT_STR_EQ(conf.cacert, "/ca.pem");
    ASSERT_STR_EQ(conf.cert, "/c.pem");
    ASSERT_STR_EQ(conf.key, "/k.pem");
    ASSERT_STR_EQ(conf.user, "u");
    ASSERT_STR_EQ(conf.etcd_prefix, "");
    char too_long[400];
    memset(too_long, 'a', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    char text[420];
    snprintf(text, sizeof text, "cacert=%s", too_long);
    ASSERT_ERR(agent__rdzv_conf_parse(text, &conf), ELASTIC_EINVAL);
}

TEST(agent_rdzv_conf_parses_like_torchrun)
{
    agent_rdzv_conf conf;
    ASSERT_OK(agent__rdzv_conf_parse(
        "join_timeout=60, last_call_timeout = 2.5,is_host=true,store_type=tcp", &conf));
    ASSERT_EQ(conf.join_timeout_ms, 60000);
    ASSERT_EQ(conf.last_call_timeout_ms, 2500);
    ASSERT_EQ(conf.is_host, 1);
    ASSERT_EQ(conf.close_timeout_ms, -1);
    ASSERT_OK(agent__rdzv_conf_parse("", &conf));
    ASSERT_EQ(conf.is_host, -1);
    ASSERT_ERR(agent__rdzv_conf_parse("=1", &conf), ELASTIC_EINVAL);
    ASSERT_ERR(agent__rdzv_conf_parse("a=", &conf), ELASTIC_EINVAL);
    ASSERT_ERR(agent__rdzv_conf_parse("a=1,,b=2", &conf), ELASTIC_EINVAL);
    ASSERT_ERR(agent__rdzv_conf_parse("keep_alive_max_attempt=0", &conf), ELASTIC_EINVAL);
}

TEST(agent_std_maps_ranks)
{
    int mask;
    ASSERT_OK(agent__std_parse("3", 5, &mask));
    ASSERT_EQ(mask, 3);
    ASSERT_OK(agent__std_parse("0:1,2:2", 2, &mask));
    ASSERT_EQ(mask, AGENT_STD_ERR);
    ASSERT_OK(agent__std_parse("0:1,2:2", 1, &mask));
    ASSERT_EQ(mask, 0);
    ASSERT_ERR(agent__std_parse("0:1,x", 0, &mask), ELASTIC_EINVAL);
}

/* The endpoint grammar itself: test_common_endpoint.c. */
TEST(agent_address_is_local_names_this_machine)
{
    ASSERT(agent__address_is_local("localhost"));
    ASSERT(agent__address_is_local("127.0.0.1"));
    ASSERT(!agent__address_is_local("192.0.2.1")); /* TEST-NET-1: never a local interface */
}

TEST(agent_command_runs_programs_like_torchrun)
{
    const char *argv[] = { "elasticrun", "train.py", "--rank=${local_rank}" };
    elastic_agent_opts opts;
    char **command = NULL;
    ASSERT_OK(parse(&opts, ARGC(argv), argv, NULL));
    opts.python = "/usr/bin/python3";
    ASSERT_OK(agent__command_build(&opts, 3, &command));
    ASSERT_STR_EQ(command[0], "/usr/bin/python3");
    ASSERT_STR_EQ(command[1], "-u");
    ASSERT_STR_EQ(command[2], "train.py");
    ASSERT_STR_EQ(command[3], "--rank=3");
    ASSERT(command[4] == NULL);
    agent__strv_free(command);
    const char *module[] = { "elasticrun", "-m", "pkg.train" };
    ASSERT_OK(parse(&opts, ARGC(module), module, NULL));
    opts.python = "python3";
    ASSERT_OK(agent__command_build(&opts, 0, &command));
    ASSERT_STR_EQ(command[2], "-m");
    ASSERT_STR_EQ(command[3], "pkg.train");
    agent__strv_free(command);
    const char *binary[] = { "elasticrun", "--no-python", "./trainer", "x" };
    ASSERT_OK(parse(&opts, ARGC(binary), binary, NULL));
    ASSERT_OK(agent__command_build(&opts, 0, &command));
    ASSERT_STR_EQ(command[0], "./trainer");
    ASSERT_STR_EQ(command[1], "x");
    agent__strv_free(command);
}

/* Recovery asked for without a budget: torchrun's default 0 would end the job
 * at the first failure while a spare is parked and the step is in memory, so
 * the flags did nothing. Unset, the budget is 3; an explicit 0 (flag or
 * PET_MAX_RESTARTS) stays 0, and without recovery the default stays 0. */
TEST(agent_args_recovery_without_max_restarts_gets_a_budget_of_three)
{
    elastic_agent_opts opts;
    const char *in_process[] = { "elasticrun", "--in-process-recovery", "prog" };
    ASSERT_OK(parse(&opts, ARGC(in_process), in_process, NULL));
    ASSERT_EQ(opts.max_restarts, 3);
    const char *memory[] = { "elasticrun", "--memory-ckpt", "prog" };
    ASSERT_OK(parse(&opts, ARGC(memory), memory, NULL));
    ASSERT_EQ(opts.max_restarts, 3);
    const char *spares[] = { "elasticrun", "--in-process-recovery", "--warm-spares=1", "prog" };
    ASSERT_OK(parse(&opts, ARGC(spares), spares, NULL));
    ASSERT_EQ(opts.max_restarts, 3);
    const char *explicit_zero[] = { "elasticrun", "--memory-ckpt", "--max-restarts", "0", "prog" };
    ASSERT_OK(parse(&opts, ARGC(explicit_zero), explicit_zero, NULL));
    ASSERT_EQ(opts.max_restarts, 0);
    const char *env_zero[] = { "PET_MAX_RESTARTS=0", NULL };
    ASSERT_OK(parse(&opts, ARGC(in_process), in_process, env_zero));
    ASSERT_EQ(opts.max_restarts, 0);
    const char *plain[] = { "elasticrun", "prog" };
    ASSERT_OK(parse(&opts, ARGC(plain), plain, NULL));
    ASSERT_EQ(opts.max_restarts, 0);
    const char *bad[] = { "elasticrun", "--max-restarts", "-1", "prog" };
    ASSERT_ERR(parse(&opts, ARGC(bad), bad, NULL), ELASTIC_EINVAL);
}

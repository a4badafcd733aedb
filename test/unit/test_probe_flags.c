/* elasticrun's probe and in-process recovery flags: parsed, bounded. */
#include "test.h"

TEST(probe_flags_parse_into_agent_options)
{
    const char *argv[] = { "elasticrun",
                           "--hang-timeout",
                           "2",
                           "--startup-timeout=30",
                           "--metrics-port",
                           "0",
                           "--metrics-host",
                           "0.0.0.0",
                           "--straggler-window",
                           "10",
                           "--straggler-rounds",
                           "3",
                           "--straggler-evict",
                           "--user-probe",
                           "test -e /",
                           "--user-probe-interval",
                           "5",
                           "--in-process-recovery",
                           "--abort-ack-timeout",
                           "2.5",
                           "train.py",
                           NULL };
    const char *envp[] = { NULL };
    elastic_agent_opts o;
    elastic_agent_opts_init(&o, sizeof o);
    ASSERT_EQ(o.metrics_port, -1);
    ASSERT_EQ(o.in_process_recovery, 0);
    ASSERT_OK(elastic_agent_parse_args((int)(sizeof argv / sizeof argv[0]) - 1, argv, envp, &o));
    ASSERT_EQ(o.hang_timeout_ms, 2000);
    ASSERT_EQ(o.startup_timeout_ms, 30000);
    ASSERT_EQ(o.metrics_port, 0);
    ASSERT_STR_EQ(o.metrics_host, "0.0.0.0");
    ASSERT_EQ(o.straggler_window, 10);
    ASSERT_EQ(o.straggler_rounds, 3);
    ASSERT_EQ(o.straggler_evict, 1);
    ASSERT_STR_EQ(o.user_probe, "test -e /");
    ASSERT_EQ(o.user_probe_interval_ms, 5000);
    ASSERT_EQ(o.in_process_recovery, 1);
    ASSERT_EQ(o.abort_ack_timeout_ms, 2500);
    ASSERT_EQ(o.argc, 1);
}

TEST(probe_flags_reject_out_of_range)
{
    const char *envp[] = { NULL };
    const char *bad_port[] = { "elasticrun", "--metrics-port", "70000", "x", NULL };
    const char *bad_window[] = { "elasticrun", "--straggler-window", "5000", "x", NULL };
    const char *zero_ack[] = { "elasticrun", "--abort-ack-timeout", "0", "x", NULL };
    const char *const *cases[] = { bad_port, bad_window, zero_ack };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        elastic_agent_opts o;
        elastic_agent_opts_init(&o, sizeof o);
        ASSERT_ERR(elastic_agent_parse_args(4, cases[i], envp, &o), ELASTIC_EINVAL);
    }
}

TEST(probe_straggler_quarantine_flag_defaults_parses_and_is_bounded)
{
    const char *envp[] = { NULL };
    elastic_agent_opts o;
    elastic_agent_opts_init(&o, sizeof o);
    ASSERT_EQ(o.straggler_quarantine_ms, 300000);
    const char *set[] = { "elasticrun", "--straggler-quarantine=1.5", "x", NULL };
    ASSERT_OK(elastic_agent_parse_args(3, set, envp, &o));
    ASSERT_EQ(o.straggler_quarantine_ms, 1500);
    const char *leave[] = { "elasticrun", "--straggler-quarantine", "0", "x", NULL };
    ASSERT_OK(elastic_agent_parse_args(4, leave, envp, &o));
    ASSERT_EQ(o.straggler_quarantine_ms, 0);
    const char *negative[] = { "elasticrun", "--straggler-quarantine", "-1", "x", NULL };
    const char *huge[] = { "elasticrun", "--straggler-quarantine", "99999999999", "x", NULL };
    ASSERT_ERR(elastic_agent_parse_args(4, negative, envp, &o), ELASTIC_EINVAL);
    ASSERT_ERR(elastic_agent_parse_args(4, huge, envp, &o), ELASTIC_EINVAL);
}

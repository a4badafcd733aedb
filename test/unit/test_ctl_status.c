/* elasticctl's status table (tools/elasticctl/status.c) from a known metrics
 * page: the job line, one row per rank (with "-" where a rank has no data),
 * failures and recoveries; a malformed page is refused. */
#include "elasticctl/status.h"
#include "test.h"

static const char page[] =
    "# HELP elastic_job_info x\n"
    "elastic_job_info{run_id=\"job7\",node=\"n1\"} 1\n"
    "elastic_generation 3\nelastic_restarts_total 2\nelastic_nodes 2\nelastic_world_size 4\n"
    "elastic_group_rank 1\nelastic_workers 2\nelastic_workers_alive 2\nelastic_healthy 1\n"
    "elastic_worker_pid{rank=\"2\",local_rank=\"0\"} 4242\n"
    "elastic_worker_alive{rank=\"2\",local_rank=\"0\"} 1\n"
    "elastic_worker_step{rank=\"2\",local_rank=\"0\"} 120\n"
    "elastic_worker_straggler_score{rank=\"2\",local_rank=\"0\"} 0.95\n"
    "elastic_worker_pid{rank=\"3\",local_rank=\"1\"} 4243\n"
    "elastic_probe_failures_total{probe=\"hang\"} 1\n"
    "elastic_recovery_seconds_count{mode=\"restart\"} 2\n"
    "elastic_recovery_last_seconds{mode=\"restart\"} 1.5\n";

TEST(ctl_status_table_from_a_metrics_page)
{
    elastic__text out;
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(page, 200, "ok\n", &out));
    ASSERT(out.data != NULL);
    if (strstr(out.data, "job job7  node n1 (group rank 1 of 2 nodes)\n") == NULL)
        FAIL("%s", out.data);
    if (strstr(out.data,
               "generation 3  restarts 2  world size 4  workers 2/2 alive  health: healthy\n") ==
        NULL)
        FAIL("%s", out.data);
    /* rank 2 has data, rank 3 only a pid */
    const char *row2 = strstr(out.data, "\n     2      0     4242   yes");
    if (row2 == NULL || strstr(row2, "120") == NULL || strstr(row2, "0.95") == NULL)
        FAIL("%s", out.data);
    if (strstr(out.data, "\n     3      1     4243     -") == NULL) FAIL("%s", out.data);
    if (strstr(out.data, "failures: hang 1, startup 0") == NULL) FAIL("%s", out.data);
    if (strstr(out.data, "recoveries: restart 2 (last 1.500 s)") == NULL) FAIL("%s", out.data);
    elastic__text_free(&out);
}

TEST(ctl_status_names_an_unhealthy_reason_and_refuses_a_bad_page)
{
    elastic__text out;
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(page, 503, "worker 1 hung\nmore", &out));
    if (strstr(out.data, "health: worker 1 hung\n") == NULL) FAIL("%s", out.data);
    elastic__text_free(&out);
    elastic__text_init(&out, 1 << 16);
    ASSERT_ERR(ctl_status_format("elastic_generation{ 3\n", 200, "ok", &out), ELASTIC_EPROTO);
    elastic__text_free(&out);
}

/* The job-wide node scores get one line when the page has them, none otherwise. */
TEST(ctl_status_shows_job_wide_node_scores)
{
    const char *scores = "elastic_job_info{run_id=\"r\",node=\"a\"} 1\n"
                         "elastic_node_straggler_rounds_total 7\n"
                         "elastic_node_straggler_score{node=\"a\"} 1.5\n"
                         "elastic_node_straggler_score{node=\"b\"} 0.333\n";
    elastic__text out;
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(scores, 200, "ok", &out));
    if (out.data == NULL ||
        strstr(out.data, "node straggler scores (job-wide): a 1.50, b 0.33\n") == NULL)
        FAIL("%s", out.data ? out.data : "(empty)");
    elastic__text_free(&out);
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(page, 200, "ok", &out));
    if (out.data == NULL || strstr(out.data, "node straggler scores") != NULL) FAIL("%s", out.data);
    elastic__text_free(&out);
}

TEST(ctl_status_shows_the_node_health_checks_verdict)
{
    static const char health_page[] =
        "elastic_job_info{run_id=\"job7\",node=\"n1\"} 1\n"
        "elastic_node_health 2\n"
        "elastic_gpu_health{gpu=\"0\",uuid=\"GPU-a\",pci_bus_id=\"00000000:10:00.0\"} 0\n"
        "elastic_gpu_health{gpu=\"1\",uuid=\"GPU-b\",pci_bus_id=\"00000000:11:00.0\"} 2\n"
        "elastic_gpu_health{gpu=\"2\",uuid=\"GPU-c\",pci_bus_id=\"00000000:12:00.0\"} 1\n"
        "elastic_health_check_verdict{check=\"xid\",gpu=\"1\",port=\"\"} 2\n"
        "elastic_health_check_verdict{check=\"temperature\",gpu=\"2\",port=\"\"} 1\n"
        "elastic_health_check_verdict{check=\"ib_errors\",gpu=\"-1\",port=\"mlx5_0/1\"} 1\n";
    elastic__text out;
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(health_page, 200, "ok\n", &out));
    if (strstr(out.data, "node checks: fatal  GPUs: 1 ok, 1 warning, 1 fatal  (xid GPU 1 (fatal), "
                         "temperature GPU 2, ib_errors mlx5_0/1)\n") == NULL)
        FAIL("%s", out.data);
    elastic__text_free(&out);
    /* A page without health checks has no such line. */
    elastic__text_init(&out, 1 << 16);
    ASSERT_OK(ctl_status_format(page, 200, "ok\n", &out));
    ASSERT(strstr(out.data, "node checks") == NULL);
    elastic__text_free(&out);
}

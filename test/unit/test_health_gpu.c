/* The NVML checks, each through the NVML double: every check's verdict, the
 * baselines later rounds compare against, and NVML missing. */
#include "support/health_fixture.h"

static const char *const per_gpu_checks[] = { "ecc_uncorrected", "row_remap",     "recovery_action",
                                              "nvlink_state",    "nvlink_errors", "throttle",
                                              "pcie_width",      "pcie_gen",      "temperature" };

TEST(health_healthy_node_passes_every_gpu_check)
{
    health_use_double();
    health_state("gpus 8\n");
    health__monitor *m = health_gpu_monitor(8);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_STR_EQ(r->nvml_status, "");
    ASSERT_EQ(r->worst, HEALTH__OK);
    ASSERT_EQ(r->gpu_count, 8);
    ASSERT_EQ(health_expect(r, "gpu_count", -1, HEALTH__OK)->value, 8);
    for (int gpu = 0; gpu < 8; gpu++) {
        for (size_t c = 0; c < ELASTIC__ARRAY_LEN(per_gpu_checks); c++)
            health_expect(r, per_gpu_checks[c], gpu, HEALTH__OK);
        const health__finding *f = health_find(r, "temperature", gpu);
        ASSERT_EQ(f->value, 40);
        ASSERT(strncmp(f->uuid, "GPU-", 4) == 0);
        ASSERT(strlen(f->pci_bus_id) == 16);
        ASSERT(r->gpus[gpu].present);
        ASSERT_EQ(r->gpus[gpu].pcie_width, 16);
    }
    ASSERT_EQ(r->dropped, 0);
    ASSERT(r->cpu_ns > 0);
    health__close(m);
    free(r);
}

TEST(health_fewer_gpus_than_expected_is_fatal)
{
    health_use_double();
    health_state("gpus 7\n");
    health__monitor *m = health_gpu_monitor(8);
    health__report *r = health_new_report();
    health__round(m, r);
    const health__finding *f = health_expect(r, "gpu_count", -1, HEALTH__FATAL);
    ASSERT_EQ(f->value, 7);
    ASSERT(strstr(f->text, "7 GPUs present, 8 expected") != NULL);
    ASSERT_EQ(r->worst, HEALTH__FATAL);
    health__close(m);
    free(r);
}

TEST(health_gpu_count_falling_below_the_first_round_is_fatal)
{
    health_use_double();
    health_state("gpus 4\n");
    health__monitor *m = health_gpu_monitor(0);
    health__report *r = health_new_report();
    health__round(m, r);
    health_expect(r, "gpu_count", -1, HEALTH__OK);
    health_state("gpus 3\n");
    health__round(m, r);
    ASSERT_EQ(health_expect(r, "gpu_count", -1, HEALTH__FATAL)->value, 3);
    health__close(m);
    free(r);
}

TEST(health_gpu_fallen_off_the_bus_is_fatal_and_named)
{
    health_use_double();
    health_state("gpus 4\n");
    health__monitor *m = health_gpu_monitor(4);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(r->worst, HEALTH__OK);
    health_state("gpus 4\nlost 2\n");
    health__round(m, r);
    const health__finding *f = health_expect(r, "gpu_lost", 2, HEALTH__FATAL);
    ASSERT(strstr(f->text, "GPU is lost") != NULL);
    ASSERT(strstr(f->uuid, "000000000002") != NULL); /* named by the UUID it had */
    ASSERT_EQ(health_count(r, "gpu_lost"), 1);
    ASSERT(health_find(r, "temperature", 2) == NULL); /* nothing else read from it */
    health_expect(r, "temperature", 1, HEALTH__OK);
    ASSERT_EQ(r->gpus[2].verdict, HEALTH__FATAL);
    ASSERT_EQ(r->gpus[1].verdict, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_uncorrected_ecc_rising_is_fatal_old_counts_warn)
{
    health_use_double();
    health_state("gpus 4\necc 2 5\n");
    health__monitor *m = health_gpu_monitor(4);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(health_expect(r, "ecc_uncorrected", 2, HEALTH__WARNING)->value, 5);
    health_expect(r, "ecc_uncorrected", 1, HEALTH__OK);
    health_state("gpus 4\necc 2 7\n");
    health__round(m, r);
    const health__finding *f = health_expect(r, "ecc_uncorrected", 2, HEALTH__FATAL);
    ASSERT_EQ(f->value, 7);
    ASSERT(strstr(f->text, "2 new uncorrected") != NULL);
    health__round(m, r); /* reported once: no new errors since */
    health_expect(r, "ecc_uncorrected", 2, HEALTH__WARNING);
    health__close(m);
    free(r);
}

TEST(health_pending_or_failed_row_remap_is_fatal)
{
    health_use_double();
    health_state("gpus 3\nremap 0 pending\nremap 1 failed\n");
    health__monitor *m = health_gpu_monitor(3);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT(strstr(health_expect(r, "row_remap", 0, HEALTH__FATAL)->text, "pending") != NULL);
    ASSERT(strstr(health_expect(r, "row_remap", 1, HEALTH__FATAL)->text, "failed") != NULL);
    health_expect(r, "row_remap", 2, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_pending_page_retirement_is_fatal_before_row_remapping)
{
    health_use_double();
    health_state("gpus 2\nno_remap 0\nno_remap 1\nretired 1 pending\n");
    health__monitor *m = health_gpu_monitor(2);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT(health_find(r, "row_remap", 0) == NULL);
    health_expect(r, "retired_pages", 0, HEALTH__OK);
    health_expect(r, "retired_pages", 1, HEALTH__FATAL);
    health__close(m);
    free(r);
}

TEST(health_gpu_recovery_action_other_than_none_is_fatal)
{
    health_use_double();
    health_state("gpus 3\nrecovery 1 2\nrecovery 2 4\n");
    health__monitor *m = health_gpu_monitor(3);
    health__report *r = health_new_report();
    health__round(m, r);
    health_expect(r, "recovery_action", 0, HEALTH__OK);
    const health__finding *f = health_expect(r, "recovery_action", 1, HEALTH__FATAL);
    ASSERT_EQ(f->value, 2);
    ASSERT(strstr(f->text, "node reboot") != NULL);
    ASSERT(strstr(health_expect(r, "recovery_action", 2, HEALTH__FATAL)->text, "drain and reset") !=
           NULL);
    ASSERT_EQ(r->gpus[1].recovery_action, 2);
    health__close(m);
    free(r);
}

TEST(health_driver_without_recovery_action_skips_that_check)
{
    health_use_double();
    health_state("gpus 2\nno_recovery\n");
    health__monitor *m = health_gpu_monitor(2);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(health_count(r, "recovery_action"), 0);
    ASSERT_EQ(r->gpus[0].recovery_action, -1);
    ASSERT_EQ(r->worst, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_nvlink_going_down_is_fatal_down_from_the_start_warns)
{
    health_use_double();
    health_state("gpus 2\nnvlinks 4\nnvlink_down 1 3\n");
    health__monitor *m = health_gpu_monitor(2);
    health__report *r = health_new_report();
    health__round(m, r);
    health_expect(r, "nvlink_state", 0, HEALTH__OK);
    ASSERT_EQ(health_expect(r, "nvlink_state", 1, HEALTH__WARNING)->value, 1);
    health_state("gpus 2\nnvlinks 4\nnvlink_down 1 3\nnvlink_down 0 2\n");
    health__round(m, r);
    const health__finding *f = health_expect(r, "nvlink_state", 0, HEALTH__FATAL);
    ASSERT(strstr(f->text, "went down (mask 0x4), 3 of 4 up") != NULL);
    health_expect(r, "nvlink_state", 1, HEALTH__WARNING);
    health__close(m);
    free(r);
}

TEST(health_nvlink_error_counters_growing_warn)
{
    health_use_double();
    health_state("gpus 1\nnvlinks 4\nnvlink_errors 0 2 10\n");
    health__monitor *m = health_gpu_monitor(1);
    health__report *r = health_new_report();
    health__round(m, r);
    health_expect(r, "nvlink_errors", 0, HEALTH__OK); /* old counts are the baseline */
    health_state("gpus 1\nnvlinks 4\nnvlink_errors 0 2 25\n");
    health__round(m, r);
    const health__finding *f = health_expect(r, "nvlink_errors", 0, HEALTH__WARNING);
    ASSERT_EQ(f->value, 15);
    ASSERT_EQ(r->worst, HEALTH__WARNING);
    health__round(m, r);
    health_expect(r, "nvlink_errors", 0, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_gpu_without_nvlink_reports_no_nvlink_findings)
{
    health_use_double();
    health_state("gpus 1\nnvlinks 0\n");
    health__monitor *m = health_gpu_monitor(1);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(health_count(r, "nvlink_state") + health_count(r, "nvlink_errors"), 0);
    health__close(m);
    free(r);
}

TEST(health_pcie_below_the_maximum_warns_an_idle_gpus_generation_does_not)
{
    health_use_double();
    health_state("gpus 3\npcie_width 0 8 16\npcie_gen 1 3 5\npcie_gen 2 3 5\nthrottle 2 0x1\n");
    health__monitor *m = health_gpu_monitor(3);
    health__report *r = health_new_report();
    health__round(m, r);
    const health__finding *w = health_expect(r, "pcie_width", 0, HEALTH__WARNING);
    ASSERT_EQ(w->value, 8);
    ASSERT(strstr(w->text, "x8, below the GPU's x16") != NULL);
    health_expect(r, "pcie_gen", 0, HEALTH__OK);
    ASSERT_EQ(health_expect(r, "pcie_gen", 1, HEALTH__WARNING)->value, 3);
    ASSERT(strstr(health_expect(r, "pcie_gen", 2, HEALTH__OK)->text, "idle") != NULL);
    health_expect(r, "throttle", 2, HEALTH__OK); /* idle is not a hardware throttle */
    ASSERT_EQ(r->worst, HEALTH__WARNING);
    health__close(m);
    free(r);
}

TEST(health_hardware_throttling_warns_software_power_cap_does_not)
{
    health_use_double();
    health_state("gpus 3\nthrottle 0 0x40\nthrottle 1 0x88\nthrottle 2 0x4\n");
    health__monitor *m = health_gpu_monitor(3);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT(strstr(health_expect(r, "throttle", 0, HEALTH__WARNING)->text,
                  "hardware thermal slowdown") != NULL);
    const health__finding *f = health_expect(r, "throttle", 1, HEALTH__WARNING);
    ASSERT_EQ(f->value, 0x88);
    ASSERT(strstr(f->text, "hardware slowdown, power brake") != NULL);
    health_expect(r, "throttle", 2, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_temperature_over_the_limit_warns)
{
    health_use_double();
    health_state("gpus 2\ntemp 0 86\nslowdown 0 90\ntemp 1 84\n");
    health__monitor *m = health_gpu_monitor(2);
    health__report *r = health_new_report();
    health__round(m, r);
    /* The limit is 5 C under the device's slowdown threshold. */
    const health__finding *f = health_expect(r, "temperature", 0, HEALTH__WARNING);
    ASSERT_EQ(f->value, 86);
    ASSERT(strstr(f->text, "over 85 C") != NULL);
    health_expect(r, "temperature", 1, HEALTH__OK);
    health__close(m);

    health__config config;
    health__config_defaults(&config);
    config.network = false;
    config.temperature_max_c = 95;
    ASSERT_OK(health__open(&config, &m));
    health__round(m, r);
    health_expect(r, "temperature", 0, HEALTH__OK);
    health__close(m);
    free(r);
}

TEST(health_without_nvml_the_gpu_checks_say_why_and_skip)
{
    setenv("ELASTIC_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    health__monitor *m = health_gpu_monitor(0);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT(strstr(r->nvml_status,
                  "NVML not available (ELASTIC_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1") ==
           r->nvml_status);
    ASSERT_EQ(r->count, 0);
    ASSERT_EQ(r->worst, HEALTH__OK);
    health__close(m);
    /* Expecting GPUs without NVML is fatal: the node cannot show it has them. */
    m = health_gpu_monitor(8);
    health__round(m, r);
    const health__finding *f = health_expect(r, "nvml", -1, HEALTH__FATAL);
    ASSERT(strstr(f->text, "8 GPUs expected") != NULL);
    health__close(m);
    free(r);
}

TEST(health_nvml_init_failure_is_not_available)
{
    health_use_double();
    health_state("init_error 9\n");
    health__monitor *m = health_gpu_monitor(0);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_STR_EQ(r->nvml_status, "NVML not available (nvmlInit: Driver Not Loaded, 9)");
    ASSERT_EQ(r->count, 0);
    health__close(m);
    free(r);
}

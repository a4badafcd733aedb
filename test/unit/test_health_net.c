/* InfiniBand/RoCE ports from a fake sysfs tree: state, link_downed, error counters. */
#include "support/health_fixture.h"

#include <sys/stat.h>

static char root[4096];

static void write_file(const char *relative, const char *text)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", root, relative);
    for (char *slash = strchr(path + strlen(root) + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0755);
        *slash = '/';
    }
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    fputs(text, f);
    ASSERT(fclose(f) == 0);
}

/* One port: state ("4: ACTIVE"), link layer, link_downed and symbol_error. */
static void port(const char *dev, int n, const char *state, const char *layer, int downed,
                 int symbol)
{
    char rel[512], text[32];
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/%d/state", dev, n);
    write_file(rel, state);
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/%d/link_layer", dev, n);
    write_file(rel, layer);
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/%d/counters/link_downed", dev, n);
    snprintf(text, sizeof text, "%d\n", downed);
    write_file(rel, text);
    snprintf(rel, sizeof rel, "class/infiniband/%s/ports/%d/counters/symbol_error", dev, n);
    snprintf(text, sizeof text, "%d\n", symbol);
    write_file(rel, text);
}

static const health__finding *port_finding(const health__report *r, const char *check,
                                           const char *name, health__verdict verdict)
{
    for (int i = 0; i < r->count; i++)
        if (strcmp(r->findings[i].check, check) == 0 && strcmp(r->findings[i].port, name) == 0) {
            if (r->findings[i].verdict != verdict)
                FAIL("%s %s: %s (%s)", check, name, health__verdict_name(r->findings[i].verdict),
                     r->findings[i].text);
            return &r->findings[i];
        }
    FAIL("no %s finding for %s", check, name);
}

static health__monitor *net_monitor(void)
{
    snprintf(root, sizeof root, "%s/sys", test_tmpdir());
    mkdir(root, 0755);
    health__config config;
    health__config_defaults(&config);
    config.gpu = false;
    config.sysfs_root = root;
    health__monitor *m = NULL;
    ASSERT_OK(health__open(&config, &m));
    return m;
}

TEST(health_ib_port_going_down_or_link_downed_growing_is_fatal)
{
    health__monitor *m = net_monitor();
    port("mlx5_0", 1, "4: ACTIVE\n", "InfiniBand\n", 2, 0);
    port("mlx5_1", 1, "4: ACTIVE\n", "Ethernet\n", 0, 0);
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(r->worst, HEALTH__OK);
    ASSERT_EQ(port_finding(r, "ib_link_downed", "mlx5_0/1", HEALTH__OK)->value, 2);
    ASSERT(strstr(port_finding(r, "ib_port_state", "mlx5_1/1", HEALTH__OK)->text, "RoCE") != NULL);
    port("mlx5_0", 1, "4: ACTIVE\n", "InfiniBand\n", 3, 0); /* flapped and came back */
    port("mlx5_1", 1, "1: DOWN\n", "Ethernet\n", 0, 0);
    health__round(m, r);
    const health__finding *f = port_finding(r, "ib_link_downed", "mlx5_0/1", HEALTH__FATAL);
    ASSERT(strstr(f->text, "1 times") != NULL);
    f = port_finding(r, "ib_port_state", "mlx5_1/1", HEALTH__FATAL);
    ASSERT_EQ(f->value, 1);
    ASSERT_EQ(f->gpu, -1);
    health__close(m);
    free(r);
}

TEST(health_ib_port_down_from_the_start_and_errors_growing_warn)
{
    health__monitor *m = net_monitor();
    port("mlx5_0", 1, "1: DOWN\n", "InfiniBand\n", 0, 10);
    port("mlx5_0", 2, "4: ACTIVE\n", "InfiniBand\n", 0, 10);
    health__report *r = health_new_report();
    health__round(m, r);
    port_finding(r, "ib_port_state", "mlx5_0/1", HEALTH__WARNING);
    port_finding(r, "ib_errors", "mlx5_0/2", HEALTH__OK);
    port("mlx5_0", 2, "4: ACTIVE\n", "InfiniBand\n", 0, 14);
    health__round(m, r);
    ASSERT_EQ(port_finding(r, "ib_errors", "mlx5_0/2", HEALTH__WARNING)->value, 4);
    ASSERT_EQ(r->worst, HEALTH__WARNING);
    health__close(m);
    free(r);
}

TEST(health_node_without_ib_ports_has_no_network_findings)
{
    health__monitor *m = net_monitor();
    health__report *r = health_new_report();
    health__round(m, r);
    ASSERT_EQ(r->count, 0);
    write_file("class/infiniband/mlx5_0/ports/1/garbage", "x"); /* a port with no state file */
    health__round(m, r);
    ASSERT_EQ(r->count, 0);
    health__close(m);
    free(r);
}

TEST(health_ib_garbage_in_sysfs_is_skipped_not_trusted)
{
    health__monitor *m = net_monitor();
    write_file("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
    write_file("class/infiniband/mlx5_0/ports/1/counters/link_downed", "lots\n");
    write_file("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "-5\n");
    write_file("class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors",
               "999999999999999999999999\n");
    write_file("class/infiniband/mlx5_0/ports/2/state", "\n");
    health__report *r = health_new_report();
    health__round(m, r);
    port_finding(r, "ib_port_state", "mlx5_0/1", HEALTH__OK);
    ASSERT_EQ(health_count(r, "ib_link_downed"), 0); /* not a number: no verdict from it */
    ASSERT_EQ(health_count(r, "ib_errors"), 0);
    /* An empty state is a port not active from the start. */
    ASSERT_EQ(port_finding(r, "ib_port_state", "mlx5_0/2", HEALTH__WARNING)->value, 0);
    health__close(m);
    free(r);
}

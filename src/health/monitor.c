/*
 * A health monitor: the GPU checks (when NVML is there), the network ports
 * and the site command, run together as one round. The CPU cost of a round is
 * measured on the calling thread (the site command's own CPU is its child's,
 * not counted; its wall time is in wall_ns).
 */
#include "common/clock.h"
#include "health/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct health__monitor {
    health__config config;
    char *sysfs_root, *site_cmd;
    health__gpus *gpus;
    char nvml_status[200];
    health__net_state net;
    uint64_t rounds;
    _Atomic bool cancel;
};

void health__config_defaults(health__config *config)
{
    *config = (health__config){
        .gpu = true, .network = true, .site_timeout_ms = 60000, .xid_poll_ms = 500
    };
}

int health__open(const health__config *config, health__monitor **out)
{
    health__monitor *m = calloc(1, sizeof *m);
    if (m == NULL) return elastic__fail(ELASTIC_ENOMEM, "health: out of memory");
    m->config = *config;
    m->sysfs_root = elastic__strdup(config->sysfs_root != NULL ? config->sysfs_root : "/sys");
    m->site_cmd = elastic__strdup(config->site_cmd);
    if (m->sysfs_root == NULL || (config->site_cmd != NULL && m->site_cmd == NULL)) {
        health__close(m);
        return elastic__fail(ELASTIC_ENOMEM, "health: out of memory");
    }
    m->config.sysfs_root = m->sysfs_root;
    m->config.site_cmd = m->site_cmd;
    if (config->gpu) {
        m->gpus = health__gpus_open(&m->config, m->nvml_status, sizeof m->nvml_status);
        if (m->gpus == NULL) ELASTIC_LOG_I("health", "GPU checks off: %s", m->nvml_status);
    } else {
        snprintf(m->nvml_status, sizeof m->nvml_status, "GPU checks not asked for");
    }
    *out = m;
    return 0;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void health__round(health__monitor *m, health__report *r)
{
    uint64_t wall = elastic__now_ns(), cpu = thread_cpu_ns();
    r->count = r->dropped = 0;
    r->worst = HEALTH__OK;
    r->gpu_count = 0;
    memset(r->gpus, 0, sizeof r->gpus);
    r->round = ++m->rounds;
    snprintf(r->nvml_status, sizeof r->nvml_status, "%s", m->nvml_status);
    if (m->gpus != NULL)
        health__gpus_check(m->gpus, &m->config, r);
    else if (m->config.gpu && (m->config.gpu_required || m->config.expected_gpus > 0))
        health__add(r, "nvml", -1, HEALTH__FATAL, 0, "GPU checks required (%d GPUs expected): %s",
                    m->config.expected_gpus, m->nvml_status);
    if (m->config.network) health__net_check(m->sysfs_root, &m->net, r);
    if (m->site_cmd != NULL && !m->cancel)
        health__site_check(m->site_cmd, m->config.site_timeout_ms, &m->cancel, r);
    r->cpu_ns = thread_cpu_ns() - cpu;
    r->wall_ns = elastic__now_ns() - wall;
}

void health__cancel(health__monitor *m)
{
    m->cancel = true;
}

void health__close(health__monitor *m)
{
    if (m == NULL) return;
    health__gpus_close(m->gpus);
    free(m->sysfs_root);
    free(m->site_cmd);
    free(m);
}

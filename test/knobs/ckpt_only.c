/*
 * A trainer that only saves checkpoints, as test_build_knobs.c links it
 * against a libelastic built with ELASTIC_AGENT=0 ELASTIC_ETCD=0: it must link
 * with the smaller library list (no libuv, libcurl, json-c), save and read
 * back a step, and find what
 * was left out reported as such (elastic_has_feature, ELASTIC_EUNSUPPORTED
 * naming the knob), never as a missing symbol. Prints "ok" and exits 0, or
 * names the first thing that was wrong and exits 1.
 */
#include <elastic.h>

#include <stdio.h>
#include <string.h>

static int wrong(const char *what, int rc)
{
    fprintf(stderr, "ckpt_only: %s (%s: %s)\n", what, elastic_err_name(rc), elastic_last_error());
    return 1;
}

static int save_and_read_back(const char *dir)
{
    static const char weights[] = "the weights of step 7";
    elastic_ckpt *ckpt = NULL;
    int rc = elastic_ckpt_open(dir, NULL, &ckpt);
    if (rc != 0) return wrong("elastic_ckpt_open failed", rc);
    elastic_ckpt_blob blob = { "weights", weights, sizeof weights, 0 };
    uint64_t step = 0;
    void *data = NULL;
    size_t len = 0;
    if ((rc = elastic_ckpt_save(ckpt, 7, &blob, 1)) != 0) return wrong("save failed", rc);
    if ((rc = elastic_ckpt_latest(ckpt, &step)) != 0 || step != 7)
        return wrong("the latest step is not 7", rc);
    if ((rc = elastic_ckpt_read(ckpt, 7, "weights", &data, &len)) != 0)
        return wrong("read failed", rc);
    int same = len == sizeof weights && memcmp(data, weights, len) == 0;
    elastic_free(data);
    elastic_ckpt_close(ckpt);
    return same ? 0 : wrong("read back other bytes than were saved", 0);
}

static int left_out_says_so(void)
{
    if (elastic_has_feature("agent") != 0) return wrong("has_feature(agent) is not 0", 0);
    if (elastic_has_feature("store_server") != 0)
        return wrong("has_feature(store_server) is not 0", 0);
    if (elastic_has_feature("etcd") != 0) return wrong("has_feature(etcd) is not 0", 0);
    if (elastic_has_feature("zstd") != 1) return wrong("has_feature(zstd) is not 1", 0);
    elastic_agent *agent = (elastic_agent *)&agent;
    int rc = elastic_agent_create(NULL, &agent);
    if (rc != ELASTIC_EUNSUPPORTED || agent != NULL ||
        strstr(elastic_last_error(), "ELASTIC_AGENT=0") == NULL)
        return wrong("elastic_agent_create is not ELASTIC_EUNSUPPORTED naming the knob", rc);
    elastic_store_server *server = NULL;
    rc = elastic_store_server_start(NULL, &server);
    if (rc != ELASTIC_EUNSUPPORTED || server != NULL)
        return wrong("elastic_store_server_start is not ELASTIC_EUNSUPPORTED", rc);
    /* a worker alone still works: a group of one without a store */
    elastic_worker *w = NULL;
    elastic_store *store = NULL;
    if ((rc = elastic_worker_init(NULL, &w)) != 0) return wrong("worker alone failed", rc);
    rc = elastic_worker_get_store(w, &store);
    elastic_worker_close(w);
    if (rc != ELASTIC_ENOTFOUND || store != NULL)
        return wrong("a worker alone has a store without a store server", rc);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ckpt_only CHECKPOINT_DIR\n");
        return 2;
    }
    if (save_and_read_back(argv[1]) != 0 || left_out_says_so() != 0) return 1;
    printf("ok\n");
    return 0;
}

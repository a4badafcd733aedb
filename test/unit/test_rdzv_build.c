/* The etcd backend is in the library unless it was built with ELASTIC_ETCD=0,
 * and then asking for it is one clear refusal, not a link error or a hang. */
#include "common/common.h"
#include "test.h"

TEST(rdzv_etcd_backend_is_built_in_unless_elastic_etcd_is_0)
{
    ASSERT_EQ(elastic_has_feature("etcd"), ELASTIC_WITH_ETCD);
    if (ELASTIC_WITH_ETCD) return; /* the etcd tests (rdzv_etcd_*) exercise the backend */
    elastic_rdzv_opts o;
    elastic_rdzv_opts_init(&o, sizeof o);
    o.backend = ELASTIC_RDZV_BACKEND_ETCD;
    o.etcd_endpoints = "127.0.0.1:1"; /* refused before any connection */
    o.run_id = "no-etcd";
    elastic_rdzv *r = NULL;
    ASSERT_ERR(elastic_rdzv_open(&o, &r), ELASTIC_EUNSUPPORTED);
    ASSERT(r == NULL);
    if (strstr(elastic_last_error(), "built without etcd (ELASTIC_ETCD=0)") == NULL)
        FAIL("the refusal does not say why: %s", elastic_last_error());
}

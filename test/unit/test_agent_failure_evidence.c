/* The agent's record of a failure as the classifier's evidence
 * (src/agent/failure_evidence.c): the error file or the stderr tail, the
 * probe's source, and the classes they lead to. */
#include "agent/failure_evidence.h"
#include "test.h"

#include <signal.h>

TEST(agent_failure_evidence_from_the_local_record)
{
    ASSERT_EQ(agent__failure_source_of_probe(NULL), FS_WORKER_EXIT);
    ASSERT_EQ(agent__failure_source_of_probe("hang"), FS_PROBE_HANG);
    ASSERT_EQ(agent__failure_source_of_probe("startup"), FS_PROBE_HANG);
    ASSERT_EQ(agent__failure_source_of_probe("nccl_timeout"), FS_PROBE_NCCL);
    ASSERT_EQ(agent__failure_source_of_probe("nccl_error"), FS_PROBE_NCCL);
    ASSERT_EQ(agent__failure_source_of_probe("straggler"), FS_PROBE_STRAGGLER);
    ASSERT_EQ(agent__failure_source_of_probe("user"), FS_PROBE_USER);

    static agent_failure f;
    memset(&f, 0, sizeof f);
    f.valid = true;
    f.cause.exit_code = 1;
    snprintf(f.detail, sizeof f.detail,
             "{\"message\": {\"message\": \"BadBatchError: batch 37 has a NaN label\"}}");
    f.detail_is_error_file = true;
    failure_evidence e;
    failure_verdict v;
    agent__failure_evidence(&f, NULL, "exited with code 1", false, NULL, false, -1, &e);
    ASSERT(e.error_file == f.detail && e.stderr_tail == NULL);
    failure__classify(&e, &v);
    ASSERT_EQ(v.cls, FC_USER_CODE);
    ASSERT_STR_EQ(v.type, "BadBatchError");

    f.detail_is_error_file = false;
    f.cause.exit_code = -1;
    f.cause.signal = SIGKILL;
    snprintf(f.detail, sizeof f.detail, "loss 0.25\n");
    agent__failure_evidence(&f, NULL, "killed by SIGKILL", true, NULL, false, -1, &e);
    ASSERT(e.stderr_tail == f.detail && e.error_file == NULL);
    failure__classify(&e, &v);
    ASSERT_EQ(v.cls, FC_OOM);
    agent__failure_evidence(&f, NULL, "killed by SIGKILL", false, NULL, false, -1, &e);
    failure__classify(&e, &v);
    ASSERT_EQ(v.cls, FC_UNKNOWN); /* a SIGKILL without an OOM kill: not user code, not OOM */

    agent__failure_evidence(&f, "hang", "no heartbeat for 30 s", false, NULL, true, 2, &e);
    failure__classify(&e, &v);
    ASSERT_EQ(v.cls, FC_HANG);
    ASSERT(v.consequence);
}

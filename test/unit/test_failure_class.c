/* The failure classifier (src/common/failure_class.c): one table row per
 * rule, over the evidence the agent has (exit status, signal, error file,
 * stderr tail, probe, health finding, OOM kill, a peer that failed first),
 * the traceback reader, and the message normalizer. */
#include "common/failure_class.h"
#include "test.h"

#include <signal.h>

static const char *const python_tail =
    "rank 0 at step 36\n"
    "Traceback (most recent call last):\n"
    "  File \"/home/u/job/trainer.py\", line 88, in <module>\n"
    "    main()\n"
    "  File \"/home/u/job/trainer.py\", line 80, in main\n"
    "    check_batch(batch, step)\n"
    "  File \"/home/u/job/trainer.py\", line 41, in check_batch\n"
    "    raise ValueError(f\"bad batch at step {step}: label 0x7f3a22 out of range\")\n"
    "ValueError: bad batch at step 37: label 0x7f3a22 out of range\n";

static const char *const library_tail =
    "Traceback (most recent call last):\n"
    "  File \"/job/train.py\", line 12, in step\n"
    "    loss = model(x)\n"
    "  File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 1511, in _call\n"
    "    return forward(*args)\n"
    "  File \"/usr/lib/python3.11/functools.py\", line 20, in wrapper\n"
    "    ^^^^^^^^^^^^\n"
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x128 and 256x10)\n";

static const char *const error_file_python =
    "{\"message\": {\"message\": \"ValueError: bad batch at step 37\", \"extraInfo\": "
    "{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"/x/trainer.py\\\", line "
    "41, in check_batch\\n    raise ValueError\\nValueError: bad batch at step 37\\n\", "
    "\"timestamp\": \"1700000000\"}}}";

static const char *const error_file_c =
    "{\"message\": {\"message\": \"BadBatchError: batch 37 has a NaN label\", \"extraInfo\": "
    "{\"timestamp\": \"1700000000\"}}}";

typedef struct row {
    const char *name;
    failure_evidence e;
    int cls;
    bool consequence;
    const char *type;  /* NULL: not checked */
    const char *frame; /* NULL: not checked */
} row;

TEST(common_failure_class_every_rule)
{
    static const row rows[] = {
        { "python traceback on stderr",
          { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = python_tail },
          FC_USER_CODE,
          false,
          "ValueError",
          "trainer.py:41 in check_batch" },
        { "innermost user frame skips the library's",
          { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = library_tail },
          FC_USER_CODE,
          false,
          "RuntimeError",
          "train.py:12 in step" },
        { "python error file",
          { .source = FS_WORKER_EXIT, .exit_code = 1, .error_file = error_file_python },
          FC_USER_CODE,
          false,
          "ValueError",
          "trainer.py:41 in check_batch" },
        { "C error file",
          { .source = FS_WORKER_EXIT, .exit_code = 3, .error_file = error_file_c },
          FC_USER_CODE,
          false,
          "BadBatchError",
          "" },
        { "error file wins over stderr",
          { .source = FS_WORKER_EXIT,
            .exit_code = 3,
            .error_file = error_file_c,
            .stderr_tail = library_tail },
          FC_USER_CODE,
          false,
          "BadBatchError",
          NULL },
        { "CUDA OOM in the traceback",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .stderr_tail =
                "Traceback (most recent call last):\n  File \"/j/t.py\", line 3, in f\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" },
          FC_OOM,
          false,
          "torch.OutOfMemoryError",
          NULL },
        { "host MemoryError",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .stderr_tail = "Traceback (most recent call last):\n  File \"/j/t.py\", line 3, in "
                           "f\nMemoryError\n" },
          FC_OOM,
          false,
          "MemoryError",
          NULL },
        { "bad_alloc without a traceback",
          { .source = FS_WORKER_EXIT,
            .signal = SIGABRT,
            .exit_code = -1,
            .stderr_tail = "terminate called after throwing an instance of 'std::bad_alloc'\n" },
          FC_OOM,
          false,
          NULL,
          NULL },
        { "the kernel's OOM killer (cgroup oom_kill)",
          { .source = FS_WORKER_EXIT, .signal = SIGKILL, .exit_code = -1, .oom_kill = true },
          FC_OOM,
          false,
          "oom_kill",
          NULL },
        { "SIGKILL without an OOM kill is no user code",
          { .source = FS_WORKER_EXIT, .signal = SIGKILL, .exit_code = -1 },
          FC_UNKNOWN,
          false,
          "SIGKILL",
          NULL },
        { "SIGTERM from outside is an operator's",
          { .source = FS_WORKER_EXIT, .signal = SIGTERM, .exit_code = -1 },
          FC_OPERATOR,
          false,
          "SIGTERM",
          NULL },
        { "KeyboardInterrupt",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .stderr_tail = "Traceback (most recent call last):\n  File \"/j/t.py\", line 3, in "
                           "f\nKeyboardInterrupt\n" },
          FC_OPERATOR,
          false,
          "KeyboardInterrupt",
          NULL },
        { "SIGSEGV is a native crash of the code",
          { .source = FS_WORKER_EXIT, .signal = SIGSEGV, .exit_code = -1 },
          FC_USER_CODE,
          false,
          "SIGSEGV",
          NULL },
        { "SIGBUS is not known to be the code's",
          { .source = FS_WORKER_EXIT, .signal = SIGBUS, .exit_code = -1 },
          FC_UNKNOWN,
          false,
          "SIGBUS",
          NULL },
        { "exit 1 with nothing said",
          { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = "loss 0.3\n" },
          FC_UNKNOWN,
          false,
          "exit 1",
          NULL },
        { "NCCL error, first to fail: a communication failure that is the cause",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .stderr_tail =
                "Traceback (most recent call last):\n  File \"/j/t.py\", line 9, in step\n"
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                "remote process exited\n" },
          FC_COMM,
          false,
          "torch.distributed.DistBackendError",
          NULL },
        { "NCCL error after a peer died: its consequence",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .peer_failed_first = true,
            .peer_rank = 2,
            .stderr_tail =
                "Traceback (most recent call last):\n  File \"/j/t.py\", line 9, in step\n"
                "RuntimeError: Connection reset by peer\n" },
          FC_COMM,
          true,
          "RuntimeError",
          NULL },
        { "gloo without a traceback after a peer died",
          { .source = FS_WORKER_EXIT,
            .signal = SIGABRT,
            .exit_code = -1,
            .peer_failed_first = true,
            .stderr_tail = "terminate called after throwing an instance of 'gloo::IoException'\n"
                           "  what():  Connection closed by peer [127.0.0.1]:4021\n" },
          FC_COMM,
          true,
          NULL,
          NULL },
        { "a SIGKILL after a peer died: a consequence",
          { .source = FS_WORKER_EXIT,
            .signal = SIGKILL,
            .exit_code = -1,
            .peer_failed_first = true },
          FC_UNKNOWN,
          true,
          NULL,
          NULL },
        { "a user-code error after a peer died is its own",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .peer_failed_first = true,
            .stderr_tail = python_tail },
          FC_USER_CODE,
          false,
          "ValueError",
          NULL },
        { "a fatal Xid at the time outranks the traceback",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .health_finding = "Xid 79 on GPU 3 (fallen off the bus)",
            .stderr_tail =
                "Traceback (most recent call last):\n  File \"/j/t.py\", line 9, in step\n"
                "RuntimeError: CUDA error: unspecified launch failure\n" },
          FC_HARDWARE,
          false,
          NULL,
          NULL },
        { "hang probe",
          { .source = FS_PROBE_HANG, .reason = "no heartbeat for 30 s" },
          FC_HANG,
          false,
          NULL,
          NULL },
        { "hang probe after a peer died",
          { .source = FS_PROBE_HANG, .peer_failed_first = true },
          FC_HANG,
          true,
          NULL,
          NULL },
        { "NCCL watchdog",
          { .source = FS_PROBE_NCCL, .reason = "nccl_timeout: allreduce" },
          FC_COMM,
          false,
          NULL,
          NULL },
        { "straggler", { .source = FS_PROBE_STRAGGLER }, FC_STRAGGLER, false, NULL, NULL },
        { "user probe",
          { .source = FS_PROBE_USER, .reason = "user probe exited with 1" },
          FC_UNKNOWN,
          false,
          NULL,
          NULL },
        { "health",
          { .source = FS_HEALTH, .reason = "Xid 48 (double-bit ECC)" },
          FC_HARDWARE,
          false,
          NULL,
          NULL },
        { "node lost", { .source = FS_NODE_LOST }, FC_NODE_LOST, false, NULL, NULL },
        { "fenced", { .source = FS_FENCED }, FC_NODE_LOST, false, NULL, NULL },
        { "operator stop",
          { .source = FS_OPERATOR, .reason = "SIGTERM" },
          FC_OPERATOR,
          false,
          NULL,
          NULL },
        { "replica divergence", { .source = FS_REPLICA_DIVERGENCE }, FC_SDC, false, NULL, NULL },
        { "malformed error file falls back to stderr",
          { .source = FS_WORKER_EXIT,
            .exit_code = 1,
            .error_file = "{not json",
            .stderr_tail = python_tail },
          FC_USER_CODE,
          false,
          "ValueError",
          NULL },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        failure_verdict v;
        failure__classify(&r->e, &v);
        if (v.cls != r->cls)
            FAIL("%s: class %s, expected %s (evidence: %s)", r->name, failure__class_name(v.cls),
                 failure__class_name(r->cls), v.evidence);
        if (v.consequence != r->consequence)
            FAIL("%s: consequence %d, expected %d", r->name, v.consequence, r->consequence);
        if (r->type != NULL && strcmp(v.type, r->type) != 0)
            FAIL("%s: type \"%s\", expected \"%s\"", r->name, v.type, r->type);
        if (r->frame != NULL && strcmp(v.frame, r->frame) != 0)
            FAIL("%s: frame \"%s\", expected \"%s\"", r->name, v.frame, r->frame);
        if (v.evidence[0] == '\0') FAIL("%s: no evidence in words", r->name);
        if (strncmp(v.signature, failure__class_name(v.cls), strlen(failure__class_name(v.cls))) !=
            0)
            FAIL("%s: signature \"%s\" does not start with its class", r->name, v.signature);
    }
}

/* The same bug in two generations (other paths, addresses, steps in the
 * message) has one signature; a different frame or type has another. */
TEST(common_failure_class_signature_is_stable_across_runs)
{
    failure_evidence a = { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = python_tail };
    const char *other_run = "Traceback (most recent call last):\n"
                            "  File \"/scratch/run2/trainer.py\", line 41, in check_batch\n"
                            "ValueError: bad batch at step 1037: label 0x55aa01 out of range\n";
    failure_evidence b = { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = other_run };
    failure_verdict va, vb;
    failure__classify(&a, &va);
    failure__classify(&b, &vb);
    ASSERT_STR_EQ(va.signature, vb.signature);
    ASSERT_EQ(va.signature_hash, vb.signature_hash);
    ASSERT_STR_EQ(va.message, "bad batch at step <n>: label <addr> out of range");
    const char *other_frame = "Traceback (most recent call last):\n"
                              "  File \"/j/trainer.py\", line 52, in check_labels\n"
                              "ValueError: bad batch at step 37: label 0x7f3a22 out of range\n";
    failure_evidence c = { .source = FS_WORKER_EXIT, .exit_code = 1, .stderr_tail = other_frame };
    failure_verdict vc;
    failure__classify(&c, &vc);
    ASSERT(strcmp(va.signature, vc.signature) != 0);
    ASSERT(va.signature_hash != vc.signature_hash);
}

TEST(common_failure_class_normalizer_strips_what_changes)
{
    static const char *const cases[][2] = {
        { "bad batch at step 37", "bad batch at step <n>" },
        { "tensor at 0x7ffd1234abcd freed", "tensor at <addr> freed" },
        { "cannot open /data/shard-00017.bin: no such file", "cannot open <path> no such file" },
        { "file '/tmp/x/y.pt' is truncated", "file '<path>' is truncated" },
        { "loss -3.5e-4 is nan", "loss <n> is nan" },
        { "Tried to allocate 2.00 GiB", "Tried to allocate <n> GiB" },
        { "rank3 on cuda:0 failed", "rank3 on cuda:<n> failed" },
        { "id deadbeef12345678 unknown", "id <hex> unknown" },
        { "word deadbeef stays", "word deadbeef stays" },
        { "  many\t\tblanks \n here  ", "many blanks here" },
        { "", "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        failure__normalize(cases[i][0], out, sizeof out);
        if (strcmp(out, cases[i][1]) != 0)
            FAIL("normalize(\"%s\") = \"%s\", expected \"%s\"", cases[i][0], out, cases[i][1]);
    }
    char small[8];
    failure__normalize("a very long message 12345", small, sizeof small);
    ASSERT_STR_EQ(small, "a very"); /* cut at the size, no blank left at the end */
    failure__normalize(NULL, small, sizeof small);
    ASSERT_STR_EQ(small, "");
}

/* A chained exception: the last traceback's exception and frames count. */
TEST(common_failure_class_traceback_reads_the_last_exception)
{
    const char *chained = "Traceback (most recent call last):\n"
                          "  File \"/j/a.py\", line 5, in load\n"
                          "KeyError: 'x'\n"
                          "\n"
                          "During handling of the above exception, another exception occurred:\n"
                          "\n"
                          "Traceback (most recent call last):\n"
                          "  File \"/j/b.py\", line 9, in fallback\n"
                          "TypeError: cannot unpack non-iterable NoneType object\n"
                          "exiting\n";
    char type[96], message[192], frame[192];
    ASSERT(failure__read_traceback(chained, type, sizeof type, message, sizeof message, frame,
                                   sizeof frame));
    ASSERT_STR_EQ(type, "TypeError");
    ASSERT_STR_EQ(frame, "b.py:9 in fallback");
    ASSERT_STR_EQ(message, "cannot unpack non-iterable NoneType object");
    ASSERT(!failure__read_traceback("no traceback here\nValueError: loose line\n", type,
                                    sizeof type, message, sizeof message, frame, sizeof frame));
    ASSERT(!failure__read_traceback(NULL, type, sizeof type, message, sizeof message, frame,
                                    sizeof frame));
    /* cut off mid-traceback (a tail's start, no exception line yet) */
    ASSERT(!failure__read_traceback("Traceback (most recent call last):\n  File \"/j/a.py\", li",
                                    type, sizeof type, message, sizeof message, frame,
                                    sizeof frame));
}

TEST(common_failure_class_names_round_trip)
{
    for (int c = 0; c < FC_CLASSES; c++) {
        ASSERT_EQ(failure__class_of_name(failure__class_name(c)), c);
        ASSERT(failure__class_label(c)[0] != '\0');
    }
    ASSERT_EQ(failure__class_of_name("nope"), -1);
    ASSERT_STR_EQ(failure__class_label(FC_SDC), "hardware: silent corruption");
    ASSERT_STR_EQ(failure__class_name(99), "unknown");
}

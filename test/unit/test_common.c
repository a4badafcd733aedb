/* Tests of src/common: error names, options structs, logging, versions. */
#include "common/common.h"
#include "test.h"

TEST(common_error_codes_have_names_and_sentences)
{
    ASSERT_STR_EQ(elastic_err_name(ELASTIC_ETIMEDOUT), "ELASTIC_ETIMEDOUT");
    ASSERT_STR_EQ(elastic_strerror(ELASTIC_ETIMEDOUT), "timed out");
    ASSERT_STR_EQ(elastic_err_name(0), "ELASTIC_OK");
    ASSERT_STR_EQ(elastic_err_name(-999), "ELASTIC_EUNKNOWN");
    ASSERT_STR_EQ(elastic_strerror(12345), "unknown error");
}

TEST(common_last_error_keeps_the_detail_per_thread)
{
    ASSERT_EQ(elastic__fail(ELASTIC_EIO, "write %s", "x.bin"), ELASTIC_EIO);
    ASSERT_STR_EQ(elastic_last_error(), "write x.bin");
    elastic__clear_error();
    ASSERT_STR_EQ(elastic_last_error(), "");
}

TEST(common_version_matches_header)
{
    ASSERT_EQ(elastic_version(), ELASTIC_VERSION_HEX);
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", ELASTIC_VERSION_MAJOR, ELASTIC_VERSION_MINOR,
             ELASTIC_VERSION_PATCH);
    ASSERT_STR_EQ(elastic_version_string(), expected);
}

TEST(common_features_are_reported)
{
    ASSERT_EQ(elastic_has_feature("store"), 1);
    /* the whole library: nothing left out (test_build_knobs.c checks the other side) */
    ASSERT_EQ(elastic_has_feature("agent"), 1);
    ASSERT_EQ(elastic_has_feature("store_server"), 1);
    ASSERT_EQ(elastic_has_feature("agen"), 0);
    ASSERT_EQ(elastic_has_feature(""), 0);
    ASSERT_EQ(elastic_has_feature("no-such-feature"), 0);
    ASSERT_EQ(elastic_has_feature(NULL), 0);
}

typedef struct {
    size_t struct_size;
    int first;
    int second;
    int third;
} three_field_opts;

TEST(common_struct_read_reads_only_what_the_caller_sized)
{
    three_field_opts defaults = { sizeof defaults, 1, 2, 3 };
    struct {
        size_t struct_size;
        int first;
        int second;
    } older = { sizeof older, 10, 20 };
    ASSERT_EQ(sizeof older, 16);
    ASSERT_OK(ELASTIC__STRUCT_READ(&defaults, &older, "three_field_opts"));
    ASSERT_EQ(defaults.first, 10);
    ASSERT_EQ(defaults.second, 20);
    ASSERT_EQ(defaults.third, 3); /* not covered by the older struct: default kept */
    three_field_opts zero = { 0, 5, 6, 7 };
    ASSERT_ERR(ELASTIC__STRUCT_READ(&defaults, &zero, "three_field_opts"), ELASTIC_EINVAL);
    ASSERT_OK(ELASTIC__STRUCT_READ(&defaults, NULL, "three_field_opts"));
    ASSERT_EQ(defaults.first, 10);
}

static int captured_level = -1;
static char captured_message[128];

static void capture_log(void *user, int level, const char *module, const char *message)
{
    (void)user;
    captured_level = level;
    snprintf(captured_message, sizeof captured_message, "%s:%s", module, message);
}

TEST(common_log_callback_receives_messages_at_or_below_the_level)
{
    elastic_set_log_callback(capture_log, NULL);
    elastic_set_log_level(ELASTIC_LOG_INFO);
    elastic__log(ELASTIC_LOG_DEBUG, "test", "hidden");
    ASSERT_EQ(captured_level, -1);
    elastic__log(ELASTIC_LOG_WARN, "test", "shown %d", 7);
    ASSERT_EQ(captured_level, ELASTIC_LOG_WARN);
    ASSERT_STR_EQ(captured_message, "test:shown 7");
    elastic_set_log_callback(NULL, NULL);
}

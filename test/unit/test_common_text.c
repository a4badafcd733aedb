/* The bounded text buffer (common/text.c): printf and raw appends share one
 * ceiling, a write past it is cut and flagged, and raw bytes keep their NULs. */
#include "test.h"
#include "common/text.h"

TEST(common_text_printf_and_append_share_the_ceiling)
{
    elastic__text t;
    elastic__text_init(&t, 10);
    elastic__text_printf(&t, "%d-", 1234);
    elastic__text_append(&t, "abc", 3);
    ASSERT_EQ(t.len, (size_t)8);
    ASSERT_STR_EQ(t.data, "1234-abc");
    ASSERT(!t.overflow);
    elastic__text_append(&t, "XYZ", 3);
    ASSERT(t.overflow);
    ASSERT_EQ(t.len, (size_t)10);
    ASSERT_STR_EQ(t.data, "1234-abcXY");
    elastic__text_printf(&t, "more");
    ASSERT_EQ(t.len, (size_t)10);
    elastic__text_free(&t);
    ASSERT(t.data == NULL);
}

TEST(common_text_append_keeps_nul_bytes_and_terminates)
{
    elastic__text t;
    elastic__text_init(&t, 1u << 20);
    static const char raw[] = { 'a', '\0', 'b' };
    elastic__text_append(&t, raw, sizeof raw);
    ASSERT_EQ(t.len, sizeof raw);
    ASSERT_MEM_EQ(t.data, raw, sizeof raw);
    ASSERT_EQ(t.data[t.len], '\0');
    /* growing past the first allocation keeps what was there */
    char block[5000];
    memset(block, 'x', sizeof block);
    elastic__text_append(&t, block, sizeof block);
    ASSERT_EQ(t.len, sizeof raw + sizeof block);
    ASSERT_MEM_EQ(t.data, raw, sizeof raw);
    ASSERT_EQ(t.data[t.len - 1], 'x');
    ASSERT_EQ(t.data[t.len], '\0');
    ASSERT(!t.overflow);
    elastic__text_free(&t);
}

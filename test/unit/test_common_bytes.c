/* Tests of src/common/bytes.c: the little-endian writer and reader the store
 * protocol and the checkpoint format share. Byte order, bounds, and the
 * sticky error of both sides. */
#include "common/bytes.h"
#include "test.h"

TEST(common_bytes_writer_puts_little_endian)
{
    bytes__buf b = { 0 };
    bytes__put_u8(&b, 0x01);
    bytes__put_u16(&b, 0x0302);
    bytes__put_u32(&b, 0x07060504u);
    bytes__put_u64(&b, 0x0f0e0d0c0b0a0908ull);
    bytes__put_bytes(&b, "xy", 2);
    static const uint8_t expect[] = { 1,  2,  3,  4,  5, 6, 7, 8, 9,   10, 11,
                                      12, 13, 14, 15, 2, 0, 0, 0, 'x', 'y' };
    ASSERT(!b.failed);
    ASSERT_EQ(b.len, sizeof expect);
    ASSERT_MEM_EQ(b.data, expect, sizeof expect);
    bytes__buf_free(&b);
    ASSERT(b.data == NULL);
    ASSERT_EQ(b.len, 0);
}

TEST(common_bytes_reader_reads_what_the_writer_wrote)
{
    bytes__buf b = { 0 };
    bytes__put_u8(&b, 0xfe);
    bytes__put_u16(&b, 0xbeef);
    bytes__put_u32(&b, 0xdeadbeefu);
    bytes__put_u64(&b, UINT64_MAX - 1);
    bytes__put_bytes(&b, "hello", 5);
    bytes__put_bytes(&b, NULL, 0);
    bytes__reader r = bytes__reader_of(b.data, b.len);
    ASSERT_EQ(bytes__read_u8(&r), 0xfe);
    ASSERT_EQ(bytes__read_u16(&r), 0xbeef);
    ASSERT_EQ(bytes__read_u32(&r), 0xdeadbeefu);
    ASSERT(bytes__read_u64(&r) == UINT64_MAX - 1);
    uint32_t len = 99;
    const uint8_t *p = bytes__read_bytes(&r, 16, &len);
    ASSERT_EQ(len, 5);
    ASSERT_MEM_EQ(p, "hello", 5);
    bytes__read_bytes(&r, 16, &len);
    ASSERT_EQ(len, 0);
    ASSERT(!r.bad);
    ASSERT_EQ(r.left, 0);
    bytes__buf_free(&b);
}

TEST(common_bytes_reader_error_is_sticky_and_reads_zeros)
{
    const uint8_t data[6] = { 1, 2, 3, 4, 5, 6 };
    bytes__reader r = bytes__reader_of(data, sizeof data);
    ASSERT_EQ(bytes__read_u32(&r), 0x04030201);
    ASSERT_EQ(bytes__read_u32(&r), 0); /* two bytes left: refused, nothing consumed */
    ASSERT(r.bad);
    ASSERT_EQ(bytes__read_u8(&r), 0); /* a byte is still there, but the error sticks */
    ASSERT(bytes__take(&r, 0) == NULL);
}

TEST(common_bytes_reader_refuses_a_length_over_its_bound_or_past_the_end)
{
    uint8_t data[4 + 3] = { 3, 0, 0, 0, 'a', 'b', 'c' };
    uint32_t len = 7;
    bytes__reader r = bytes__reader_of(data, sizeof data);
    ASSERT(bytes__read_bytes(&r, 2, &len) == NULL); /* 3 > max 2 */
    ASSERT(r.bad);
    ASSERT_EQ(len, 0);
    r = bytes__reader_of(data, sizeof data);
    ASSERT(bytes__read_bytes(&r, 3, &len) != NULL); /* exactly at the bound */
    ASSERT_EQ(len, 3);
    data[0] = 4; /* claims one byte more than there is */
    r = bytes__reader_of(data, sizeof data);
    ASSERT(bytes__read_bytes(&r, 100, &len) == NULL);
    ASSERT(r.bad);
    data[0] = 0xff, data[3] = 0xff; /* ~4 GiB claimed */
    r = bytes__reader_of(data, sizeof data);
    ASSERT(bytes__read_bytes(&r, UINT32_MAX, &len) == NULL);
    ASSERT(r.bad);
}

TEST(common_bytes_fixed_writer_never_writes_past_its_array)
{
    uint8_t array[8 + 1];
    memset(array, 0xaa, sizeof array);
    bytes__buf w = bytes__buf_over(array, 8);
    bytes__put_u32(&w, 1);
    bytes__put_u16(&w, 2);
    ASSERT(!w.failed);
    bytes__put_u32(&w, 3); /* 6 + 4 > 8: refused whole */
    ASSERT(w.failed);
    ASSERT_EQ(w.len, 6);
    bytes__put_u8(&w, 4); /* would fit, but the error sticks */
    ASSERT_EQ(w.len, 6);
    ASSERT_EQ(array[6], 0xaa);
    ASSERT_EQ(array[8], 0xaa);
    bytes__buf_free(&w); /* the caller's array: not freed, only emptied */
    ASSERT(w.data == array);
    ASSERT_EQ(w.len, 0);
    bytes__put_zeros(&w, 8);
    ASSERT(!w.failed);
    ASSERT_EQ(array[7], 0);
    ASSERT_EQ(array[8], 0xaa);
}

TEST(common_bytes_writer_limit_is_a_hard_bound)
{
    bytes__buf b = { .limit = 10 };
    bytes__put_u64(&b, 1);
    bytes__put_u16(&b, 2);
    ASSERT(!b.failed);
    ASSERT_EQ(b.len, 10);
    bytes__put_u8(&b, 3);
    ASSERT(b.failed);
    ASSERT_EQ(b.len, 10);
    ASSERT(!bytes__buf_reserve(&b, 0)); /* sticky for reserve too */
    bytes__buf_free(&b);
    bytes__buf huge = { 0 };
    ASSERT(!bytes__buf_reserve(&huge, SIZE_MAX - 8)); /* no wrap-around, no allocation */
    ASSERT(huge.failed);
    ASSERT(huge.data == NULL);
    bytes__put_bytes(&huge, "x", 1);
    ASSERT_EQ(huge.len, 0);
}

TEST(common_bytes_writer_grows_and_consumes)
{
    bytes__buf b = { 0 };
    for (uint32_t i = 0; i < 10000; i++) bytes__put_u32(&b, i);
    ASSERT(!b.failed);
    ASSERT_EQ(b.len, 40000);
    bytes__buf_consume(&b, 4 * 9998);
    ASSERT_EQ(b.len, 8);
    ASSERT_EQ(bytes__le32(b.data), 9998);
    ASSERT_EQ(bytes__le32(b.data + 4), 9999);
    bytes__buf_consume(&b, 100);
    ASSERT_EQ(b.len, 0);
    bytes__buf_free(&b);
}

TEST(common_bytes_positional_access_round_trips)
{
    uint8_t p[8];
    bytes__set_le16(p, 0xa1b2);
    ASSERT_EQ(p[0], 0xb2);
    ASSERT_EQ(bytes__le16(p), 0xa1b2);
    bytes__set_le32(p, 0x80000001u);
    ASSERT_EQ(p[3], 0x80);
    ASSERT_EQ(bytes__le32(p), 0x80000001u);
    bytes__set_le64(p, 0x8000000000000001ull);
    ASSERT_EQ(p[7], 0x80);
    ASSERT(bytes__le64(p) == 0x8000000000000001ull);
}

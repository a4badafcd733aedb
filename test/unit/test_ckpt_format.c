/* The checkpoint's bytes on disk are frozen (docs/CHECKPOINT.md): these
 * fixtures were written by the encoder before it moved onto common/bytes.h
 * and must stay byte-for-byte what every encoder writes and decoder reads. */
#include "ckpt/ckpt.h"
#include "test.h"

/* Hex text to bytes; returns the length. */
static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    ASSERT(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

static const char header_hex[] = "454c434b53485244010000000010000008070605040302010700000000000000"
                                 "0100000003000000000010000000000000000000000000000000000000000000";
static const char trailer_hex[] = "454c434b5441494c6410000000000000c800000000000000efcdab0000000000"
                                  "090000000000000032afb6c88b03e2ef";
static const char manifest_hex[] =
    "454c434b4d414e49010000000000010009000000000000000700000000000000"
    "0100000003000000020000000000000001000100020000000500010000000000"
    "7700000100000001000000000000000000111100000000000005000000050000"
    "000000000000000000222200000000000003000000010000000a000000000000"
    "006f70740a0000000900000001000000000000003333000000000000";
static const char commit_hex[] = "454c434b434d4954010000000200000009000000000000000700000000000000"
                                 "64000000000000005500000000000000c8000000000000006600000000000000"
                                 "370a9b3d8d94b098";

TEST(ckpt_header_and_trailer_bytes_are_frozen)
{
    static uint8_t out[CKPT_HEADER_BYTES], want[64];
    ckpt_header h = {
        .step = 0x0102030405060708ull, .generation = 7, .rank = 1, .world = 3, .chunk_size = 1 << 20
    };
    ckpt__header_encode(&h, out);
    ASSERT_EQ(unhex(header_hex, want, sizeof want), 64);
    ASSERT_MEM_EQ(out, want, 64);
    ASSERT(ckpt__hash(out, sizeof out) == 0x8d1500ffb22e2548ull); /* padding and checksum too */
    ckpt_header back;
    ASSERT_OK(ckpt__header_decode(out, sizeof out, &back));
    ASSERT(back.step == h.step && back.generation == 7 && back.rank == 1 && back.world == 3);
    ASSERT_EQ(back.chunk_size, 1 << 20);
    ASSERT(back.incarnation == 0); /* what was padding: old files read as incarnation 0 */
    h.incarnation = 1764600000123ull;
    ckpt__header_encode(&h, out);
    ASSERT_MEM_EQ(out, want, 44); /* the fields before it keep their bytes */
    ASSERT_OK(ckpt__header_decode(out, sizeof out, &back));
    ASSERT(back.incarnation == h.incarnation && back.generation == 7);

    uint8_t tr[CKPT_TRAILER_BYTES], want_tr[CKPT_TRAILER_BYTES];
    ckpt_trailer t = {
        .manifest_offset = 4096 + 100, .manifest_len = 200, .manifest_hash = 0xabcdef, .step = 9
    };
    ckpt__trailer_encode(&t, tr);
    ASSERT_EQ(unhex(trailer_hex, want_tr, sizeof want_tr), sizeof tr);
    ASSERT_MEM_EQ(tr, want_tr, sizeof tr);
    ckpt_trailer tback;
    ASSERT_OK(ckpt__trailer_decode(tr, sizeof tr, &tback));
    ASSERT(tback.manifest_offset == t.manifest_offset && tback.manifest_len == 200 &&
           tback.step == 9);
}

TEST(ckpt_manifest_and_commit_bytes_are_frozen)
{
    ckpt_chunk ch[3] = { { .raw_len = 65536, .stored_len = 65536, .codec = 0, .hash = 0x1111 },
                         { .raw_len = 5, .stored_len = 5, .codec = 0, .hash = 0x2222 },
                         { .raw_len = 10, .stored_len = 9, .codec = 1, .hash = 0x3333 } };
    ckpt_blob bl[2] = {
        { .name = "w", .flags = 1, .raw_len = 65541, .first_chunk = 0, .chunk_count = 2 },
        { .name = "opt", .flags = 0, .raw_len = 10, .first_chunk = 2, .chunk_count = 1 }
    };
    ckpt_manifest m = { .step = 9,
                        .generation = 7,
                        .rank = 1,
                        .world = 3,
                        .chunk_size = 65536,
                        .blobs = bl,
                        .blob_count = 2,
                        .chunks = ch,
                        .chunk_count = 3 };
    bytes__buf mb = { 0 };
    ASSERT_OK(ckpt__manifest_encode(&m, &mb));
    uint8_t want[512];
    size_t n = unhex(manifest_hex, want, sizeof want);
    ASSERT_EQ(mb.len, n);
    ASSERT_MEM_EQ(mb.data, want, n);
    ckpt_manifest back;
    uint64_t data_end = CKPT_HEADER_BYTES + 65536 + 5 + 9;
    ASSERT_OK(ckpt__manifest_decode(want, n, CKPT_HEADER_BYTES, data_end, &back));
    ASSERT_EQ(back.blob_count, 2);
    ASSERT_EQ(back.chunk_count, 3);
    ASSERT_STR_EQ(back.blobs[1].name, "opt");
    ASSERT(back.chunks[2].hash == 0x3333 && back.chunks[2].offset == CKPT_HEADER_BYTES + 65536 + 5);
    ckpt__manifest_free(&back);
    bytes__buf_free(&mb);

    ckpt_shard_digest d[2] = { { 100, 0x55 }, { 200, 0x66 } };
    ckpt_commit_record r = { .step = 9, .generation = 7, .world = 2, .shards = d };
    bytes__buf cb = { 0 };
    ASSERT_OK(ckpt__commit_encode(&r, &cb));
    n = unhex(commit_hex, want, sizeof want);
    ASSERT_EQ(cb.len, n);
    ASSERT_MEM_EQ(cb.data, want, n);
    ckpt_commit_record rback;
    ASSERT_OK(ckpt__commit_decode(want, n, &rback));
    ASSERT(rback.world == 2 && rback.shards[1].file_size == 200 &&
           rback.shards[1].manifest_hash == 0x66);
    ckpt__commit_free(&rback);
    bytes__buf_free(&cb);
}

/* Compression only where it pays, with default options: a blob that does not
 * shrink (random bytes, float weights) is stored raw; a low-entropy blob
 * (zeros, a constant, a repeated pattern) is compressed, even right after
 * a blob that was stored raw or after raw chunks of the same blob. Read back
 * from the shard's manifest. */
#include "ckpt/ckpt.h"
#include "ckpt/view.h"
#include "support/ckpt_content.h"
#include "test.h"

#define CHUNK    (1u << 20)
#define BLOB_LEN (6u * CHUNK)

typedef struct expectation {
    const char *name;
    bool compressed;
} expectation;

static void fill(float *t, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = ckpt_test_mix(i + 1);
        union {
            uint32_t u;
            float f;
        } v = { .u = 0x3F800000u | (uint32_t)(r >> 41) }; /* [1, 2): random mantissa */
        switch (kind) {
        case 0: t[i] = 0.0f; break;
        case 1: t[i] = 1.0f; break;
        case 2: t[i] = (float)(i % 1024); break;
        case 3: t[i] = (r & 1 ? 1.0f - v.f : v.f - 1.0f) * 0.02f; break; /* float weights */
        default: memcpy(&t[i], &r, sizeof t[i]); break;                  /* random bytes */
        }
    }
}

/* Every chunk of the blob has the expected codec; compressed ones shrank to
 * a tenth, raw ones are stored at their size. */
static void check_blob(const ckpt_manifest *m, const expectation *e)
{
    const ckpt_blob *b = ckpt__manifest_find(m, e->name);
    ASSERT(b != NULL);
    ASSERT_EQ(b->raw_len, BLOB_LEN);
    ASSERT_EQ(b->chunk_count, BLOB_LEN / CHUNK);
    for (size_t i = 0; i < b->chunk_count; i++) {
        const ckpt_chunk *ch = &m->chunks[b->first_chunk + i];
        if (e->compressed && (ch->codec != CKPT_CODEC_ZSTD || ch->stored_len * 10 > ch->raw_len))
            FAIL("blob %s chunk %zu: codec %u, %u of %u bytes stored; want compressed", e->name, i,
                 ch->codec, ch->stored_len, ch->raw_len);
        if (!e->compressed && (ch->codec != CKPT_CODEC_RAW || ch->stored_len != ch->raw_len))
            FAIL("blob %s chunk %zu: codec %u, %u of %u bytes stored; want raw", e->name, i,
                 ch->codec, ch->stored_len, ch->raw_len);
    }
}

TEST(ckpt_default_compresses_low_entropy_blobs_and_stores_the_rest_raw)
{
    static const expectation expect[] = {
        { "random", false }, { "zeros", true },     { "weights", false },
        { "ones", true },    { "positions", true },
    };
    static const int kinds[] = { 4, 0, 3, 1, 2 };
    enum { BLOBS = sizeof expect / sizeof expect[0] };
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o); /* default compression */
    o.chunk_bytes = CHUNK;
    o.threads = 2;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    elastic_ckpt_blob blobs[BLOBS];
    float *data[BLOBS];
    for (int i = 0; i < BLOBS; i++) {
        data[i] = malloc(BLOB_LEN);
        ASSERT(data[i] != NULL);
        fill(data[i], BLOB_LEN / sizeof(float), kinds[i]);
        blobs[i] = (elastic_ckpt_blob){ expect[i].name, data[i], BLOB_LEN, 0 };
    }
    /* Twice: a synchronous save, then an asynchronous one (its own thread's contexts). */
    ASSERT_OK(elastic_ckpt_save(c, 1, blobs, BLOBS));
    ASSERT_OK(elastic_ckpt_save_async(c, 2, blobs, BLOBS, test_scaled_ms(30000)));
    ASSERT_OK(elastic_ckpt_async_wait(c, test_scaled_ms(30000), NULL));
    for (uint64_t step = 1; step <= 2; step++) {
        ckpt_step_view *v;
        ASSERT_OK(ckpt__view_open(c, step, ELASTIC_CKPT_VERIFY_FULL, &v));
        ASSERT_EQ(v->record.world, 1);
        for (int i = 0; i < BLOBS; i++) check_blob(&v->shards[0].m, &expect[i]);
        ckpt__view_free(v);
        for (int i = 0; i < BLOBS; i++) {
            void *got;
            size_t len;
            ASSERT_OK(elastic_ckpt_read(c, step, expect[i].name, &got, &len));
            ASSERT_EQ(len, BLOB_LEN);
            ASSERT_MEM_EQ(got, data[i], len);
            elastic_free(got);
        }
    }
    for (int i = 0; i < BLOBS; i++) free(data[i]);
    elastic_ckpt_close(c);
}

/* Within one blob, zeros after a long run of raw chunks are caught by the
 * quick probe (not only every 8th chunk's full sample): all compressed. */
TEST(ckpt_default_compresses_zeros_after_raw_chunks_in_the_same_blob)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = CHUNK;
    o.threads = 2;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    const size_t half = 12u * CHUNK;
    float *data = calloc(1, 2 * half); /* the second half stays zero */
    ASSERT(data != NULL);
    fill(data, half / sizeof(float), 4);
    elastic_ckpt_blob blob = { "tail", data, 2 * half, 0 };
    ASSERT_OK(elastic_ckpt_save(c, 1, &blob, 1));
    ckpt_step_view *v;
    ASSERT_OK(ckpt__view_open(c, 1, ELASTIC_CKPT_VERIFY_FULL, &v));
    const ckpt_manifest *m = &v->shards[0].m;
    const ckpt_blob *b = ckpt__manifest_find(m, "tail");
    ASSERT(b != NULL);
    ASSERT_EQ(b->chunk_count, 24);
    for (size_t i = 0; i < b->chunk_count; i++) {
        const ckpt_chunk *ch = &m->chunks[b->first_chunk + i];
        bool zeros = i >= 12;
        if (zeros != (ch->codec == CKPT_CODEC_ZSTD))
            FAIL("chunk %zu (%s): codec %u, %u of %u bytes stored", i, zeros ? "zeros" : "random",
                 ch->codec, ch->stored_len, ch->raw_len);
    }
    ckpt__view_free(v);
    void *got;
    size_t len;
    ASSERT_OK(elastic_ckpt_read(c, 1, "tail", &got, &len));
    ASSERT_EQ(len, 2 * half);
    ASSERT_MEM_EQ(got, data, len);
    elastic_free(got);
    free(data);
    elastic_ckpt_close(c);
}

/* compression = ELASTIC_CKPT_NONE stores even zeros raw. */
TEST(ckpt_compression_off_stores_low_entropy_blobs_raw)
{
    elastic_ckpt_opts o;
    elastic_ckpt_opts_init(&o, sizeof o);
    o.chunk_bytes = CHUNK;
    o.compression = ELASTIC_CKPT_NONE;
    elastic_ckpt *c;
    ASSERT_OK(elastic_ckpt_open(test_tmpdir(), &o, &c));
    float *zeros = calloc(1, BLOB_LEN);
    ASSERT(zeros != NULL);
    elastic_ckpt_blob blob = { "zeros", zeros, BLOB_LEN, 0 };
    ASSERT_OK(elastic_ckpt_save(c, 1, &blob, 1));
    ckpt_step_view *v;
    ASSERT_OK(ckpt__view_open(c, 1, ELASTIC_CKPT_VERIFY_FULL, &v));
    check_blob(&v->shards[0].m, &(expectation){ "zeros", false });
    ckpt__view_free(v);
    free(zeros);
    elastic_ckpt_close(c);
}

/* Tests of src/ckpt/io.c helpers that the reader relies on for safe cleanup. */
#include "ckpt/ckpt.h"
#include "test.h"

TEST(ckpt_small_file_read_failure_leaves_no_pointer_to_free)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/vanished", test_tmpdir());
    /* A commit record can vanish between stat and open when another rank's
     * retention removes its step: the caller then frees whatever came back. */
    uint8_t sentinel, *data = &sentinel;
    size_t len = 99;
    ASSERT_ERR(ckpt__read_small_file(path, 4096, &data, &len), ELASTIC_ENOTFOUND);
    ASSERT(data == NULL);
    ASSERT_EQ(len, 0);
    free(data);
}

/*
 * The tests that are bash scripts (test/netns/, test/slurm/): one TEST each,
 * passing, skipping or failing as its script did.
 */
#ifndef ELASTIC_TEST_SCRIPT_TEST_H
#define ELASTIC_TEST_SCRIPT_TEST_H

/* Runs test/<dir>/<script> with bash, TMPDIR set to the test's directory.
 * Exit 0 passes, 77 skips the test (the script printed "SKIP: why"),
 * anything else fails it. */
void script_test_run(const char *dir, const char *script);

#endif /* ELASTIC_TEST_SCRIPT_TEST_H */

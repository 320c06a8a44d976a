/* The checks the test programs make: a failed check prints where and why, and is counted, so
 * a program reports every failure before it exits nonzero. */
#ifndef FAKEGPU_TEST_EXPECT_H
#define FAKEGPU_TEST_EXPECT_H

#include <stdio.h>

static int failures = 0;

#define EXPECT(cond, ...)                                   \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "FAILED %s:%d: ", __func__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      ++failures;                                           \
    }                                                       \
  } while (0)

/* A call that must return 0 (cudaSuccess, ncclSuccess). */
#define OK(call)                                                \
  do {                                                          \
    int status_ = (int)(call);                                  \
    EXPECT(status_ == 0, "%s returned %d", #call, status_);     \
  } while (0)

#endif

/* How the test programs' ranks exchange an ncclUniqueId without MPI: rank 0 writes it to a
 * file (atomically, by rename), the others wait for the file. */
#ifndef FAKEGPU_TEST_SHARE_ID_H
#define FAKEGPU_TEST_SHARE_ID_H

#include <nccl.h>
#include <stdio.h>
#include <time.h>

/* Returns 0 on success, -1 (after printing why) on failure. */
static inline int share_unique_id(const char* path, int rank, ncclUniqueId* id) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      fprintf(stderr, "rank 0: ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
      return -1;
    }
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      fprintf(stderr, "rank 0: cannot write %s\n", path);
      return -1;
    }
    return 0;
  }
  for (int waited_ms = 0; waited_ms < 60000; ++waited_ms) {
    FILE* f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (n == 1) return 0;
    }
    struct timespec ms = {0, 1000000L};
    nanosleep(&ms, NULL);
  }
  fprintf(stderr, "rank %d: no unique id appeared in %s\n", rank, path);
  return -1;
}

#endif

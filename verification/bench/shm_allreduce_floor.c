/* The floor for a small AllReduce among processes of one host: N processes sum one double each
 * through shared memory, with no coordinator in between. Each writes its value into its slot and
 * counts itself in; the last to arrive adds the slots up, publishes the sum and opens the next
 * round, while the others poll (yielding the core) until it does. Two sets of slots alternate,
 * so a round's slots are never rewritten before everyone has read its sum.
 * Usage: shm_allreduce_floor RANKS ITERS. Prints: ranks, median us per call (the first rank's).
 * Exits 3 when a sum is wrong, 4 when a round waits more than 10 s (a rank died): a rank that
 * fails says so in shared memory, so the others stop polling for it. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 256

struct round {
  _Alignas(64) atomic_uint arrived;
  _Alignas(64) atomic_uint done;  /* rounds completed with this set of slots */
  _Alignas(64) double sum;
  double value[MAX_RANKS];
};

struct shared {
  struct round rounds[2];
  _Alignas(64) atomic_int failed;  /* a rank's exit code once it has given up */
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void give_up(struct shared* s, int code) {
  atomic_store(&s->failed, code);
  _exit(code);
}

/* One AllReduce: round i uses slot set i % 2, for the (i / 2 + 1)-th time. */
static double allreduce(struct shared* s, int ranks, int rank, long i, double value) {
  struct round* r = &s->rounds[i % 2];
  const unsigned generation = (unsigned)(i / 2) + 1;
  r->value[rank] = value;
  if (atomic_fetch_add(&r->arrived, 1) == (unsigned)ranks - 1) {
    double sum = 0;
    for (int k = 0; k < ranks; ++k) sum += r->value[k];
    r->sum = sum;
    atomic_store(&r->arrived, 0);
    atomic_store(&r->done, generation);
  } else {
    const double deadline = now_us() + 10e6;
    while (atomic_load(&r->done) != generation) {
      if (atomic_load(&s->failed)) _exit(atomic_load(&s->failed));
      if (now_us() > deadline) give_up(s, 4);
      sched_yield();
    }
  }
  return r->sum;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int ranks = atoi(argv[1]);
  const long iters = atol(argv[2]);
  if (ranks < 1 || ranks > MAX_RANKS || iters < 1) return 2;
  struct shared* s = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) return 1;
  for (int rank = 0; rank < ranks; ++rank) {
    if (fork() != 0) continue;
    double* t = malloc(sizeof(double) * iters);
    const double expected = ranks * (ranks + 1) / 2.0;
    for (long i = -100; i < iters; ++i) {
      const double start = now_us();
      const double sum = allreduce(s, ranks, rank, i + 100, rank + 1);
      if (sum != expected) give_up(s, 3);
      if (i >= 0) t[i] = now_us() - start;
    }
    qsort(t, iters, sizeof(double), cmp);
    if (rank == 0) printf("%d %.1f\n", ranks, t[iters / 2]);
    fflush(stdout);
    _exit(0);
  }
  int status, failed = 0;
  while (wait(&status) > 0)
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return failed;
}

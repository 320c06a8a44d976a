/* MPI_Allreduce reference timing for fakegpu's benchmark: float sum, median of ITERS calls.
 * Usage: mpirun -np N mpi_allreduce BYTES ITERS [MODE]. MODE loop (the default) times calls
 * back to back, as rank 0 sees them; barrier puts an untimed MPI_Barrier before each call and
 * counts each call's slowest rank, as allreduce_bench's barrier mode does. Rank 0 prints:
 * ranks, bytes, median us. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 4;
  int iters = argc > 2 ? atoi(argv[2]) : 50;
  const int barrier = argc > 3 && strcmp(argv[3], "barrier") == 0;
  size_t count = bytes / sizeof(float);
  float* send = calloc(count + 1, sizeof(float));
  float* recv = calloc(count + 1, sizeof(float));
  double* t = malloc(sizeof(double) * iters);
  for (int i = -5; i < iters; ++i) {
    if (barrier) MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (i >= 0) t[i] = (MPI_Wtime() - start) * 1e6;
  }
  if (barrier) MPI_Allreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, iters, sizeof(double), cmp);
  if (rank == 0) printf("%d %zu %.1f\n", world, bytes, t[iters / 2]);
  MPI_Finalize();
  return 0;
}

// A real nvcc-built CUDA program (kernels registered by nvcc's generated code, <<<>>> launches,
// __device__ symbols) run over fakegpu's libcudart.so.13, plus CUDA IPC between two processes.
// Usage: cuda_features            (parent: every check, spawns itself for IPC)
//        cuda_features child HEX  (opens the IPC handle HEX, checks and rewrites the buffer)
// Prints "CUDA FEATURES OK" or names each failed check and exits 1.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "expect.h"
#include "fake_cuda_bridge.h"

__device__ int table[4];

__global__ void scale(int* data, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= k;
}

static const size_t kIpcBytes = 1 << 20;
static unsigned char pattern(size_t i, int seed) { return (unsigned char)(i * 7 + seed); }

static int child(const char* hex) {
  cudaIpcMemHandle_t handle;
  if (strlen(hex) != 2 * sizeof handle) return fprintf(stderr, "child: bad handle\n"), 1;
  for (size_t i = 0; i < sizeof handle; ++i) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    handle.reserved[i] = (char)v;
  }
  void* d = nullptr;
  OK(cudaIpcOpenMemHandle(&d, handle, cudaIpcMemLazyEnablePeerAccess));
  if (!d) return 1;
  static unsigned char host[kIpcBytes];
  OK(cudaMemcpy(host, d, kIpcBytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < kIpcBytes; ++i) bad += host[i] != pattern(i, 1);
  EXPECT(bad == 0, "child: %zu bytes differ from the parent's pattern", bad);
  for (size_t i = 0; i < kIpcBytes; ++i) host[i] = pattern(i, 2);
  OK(cudaMemcpy(d, host, kIpcBytes, cudaMemcpyHostToDevice));
  OK(cudaIpcCloseMemHandle(d));
  return failures ? 1 : 0;
}

// The parent exports a buffer; a fresh process (its own runtime, as in a real multi-process
// job) opens it, checks the parent's bytes and writes its own, which the parent must then see.
static void ipc_across_processes() {
  void* d = nullptr;
  OK(cudaMalloc(&d, kIpcBytes));
  static unsigned char host[kIpcBytes];
  for (size_t i = 0; i < kIpcBytes; ++i) host[i] = pattern(i, 1);
  OK(cudaMemcpy(d, host, kIpcBytes, cudaMemcpyHostToDevice));
  cudaIpcMemHandle_t handle;
  OK(cudaIpcGetMemHandle(&handle, d));
  char hex[2 * sizeof handle + 1];
  for (size_t i = 0; i < sizeof handle; ++i) snprintf(hex + 2 * i, 3, "%02x", (unsigned char)handle.reserved[i]);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "cuda_features", "child", hex, (char*)nullptr);
    _exit(127);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "IPC child failed (status %d)", status);
  OK(cudaMemcpy(host, d, kIpcBytes, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < kIpcBytes; ++i) bad += host[i] != pattern(i, 2);
  EXPECT(bad == 0, "parent: %zu bytes are not the child's pattern", bad);
  OK(cudaFree(d));
}

static std::atomic<int> gate{0};
static void hold(void*) {
  while (!gate.load()) usleep(1000);
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);

  // Loaded from the build tree, not NVIDIA's: only fakegpu's runtime has the bridge table.
  auto bridge = (fakegpu_cuda_bridge_fn)dlsym(RTLD_DEFAULT, "fakegpu_cuda_bridge");
  const fakegpu_cuda_bridge_table* runtime = bridge ? bridge(FAKEGPU_CUDA_BRIDGE_VERSION) : nullptr;
  if (!runtime) {
    fprintf(stderr, "FAILED: this is not fakegpu's libcudart (check LD_LIBRARY_PATH)\n");
    return 1;
  }
  auto launches = runtime->kernel_launches;

  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  int* d = nullptr;
  OK(cudaMalloc(&d, 1000 * sizeof(int)));
  const uint64_t before = launches();
  scale<<<4, 256, 0, s>>>(d, 1000, 2);
  scale<<<dim3(2, 2), dim3(32, 8), 0, s>>>(d, 1000, 3);
  scale<<<1, 1>>>(d, 1000, 4);  // the default stream: legacy, or per-thread with --default-stream per-thread
  OK(cudaGetLastError());
  OK(cudaDeviceSynchronize());  // launches are counted when their stream runs them
  EXPECT(launches() - before == 3, "3 launches counted as %llu", (unsigned long long)(launches() - before));
  scale<<<1, 2048, 0, s>>>(d, 1000, 5);
  cudaError_t e = cudaGetLastError();
  EXPECT(e == cudaErrorInvalidConfiguration, "2048-thread block gave %d (%s)", (int)e, cudaGetErrorName(e));
  EXPECT(cudaGetLastError() == cudaSuccess, "cudaGetLastError did not clear the error");
  EXPECT(launches() - before == 3, "an invalid launch was counted");

  // __device__ variables: the symbol round-trips, and an offset write lands where it should.
  int in[4] = {11, 22, 33, 44}, out[4] = {0, 0, 0, 0}, one = 99;
  OK(cudaMemcpyToSymbol(table, in, sizeof in));
  OK(cudaMemcpyToSymbol(table, &one, sizeof one, 2 * sizeof(int)));
  OK(cudaMemcpyFromSymbol(out, table, sizeof out));
  EXPECT(out[0] == 11 && out[1] == 22 && out[2] == 99 && out[3] == 44, "symbol read back %d %d %d %d", out[0], out[1],
         out[2], out[3]);
  size_t size = 0;
  OK(cudaGetSymbolSize(&size, table));
  EXPECT(size == sizeof table, "cudaGetSymbolSize %zu", size);
  e = cudaMemcpyToSymbol(table, in, sizeof in + 4);
  EXPECT(e != cudaSuccess, "a copy past the end of the symbol succeeded");
  (void)cudaGetLastError();

  // cudaStreamQuery: busy while a host function holds the stream, idle after.
  OK(cudaLaunchHostFunc(s, hold, nullptr));
  scale<<<1, 32, 0, s>>>(d, 1000, 6);
  e = cudaStreamQuery(s);
  EXPECT(e == cudaErrorNotReady, "cudaStreamQuery on a held stream gave %d", (int)e);
  gate.store(1);
  OK(cudaStreamSynchronize(s));
  OK(cudaStreamQuery(s));

  // Events around a 16 MiB copy measure modeled time, which must be positive.
  const size_t bytes = 16 << 20;
  void *h = nullptr, *db = nullptr;
  OK(cudaMallocHost(&h, bytes));
  OK(cudaMalloc(&db, bytes));
  cudaEvent_t e0, e1;
  OK(cudaEventCreate(&e0));
  OK(cudaEventCreate(&e1));
  OK(cudaEventRecord(e0, s));
  OK(cudaMemcpyAsync(db, h, bytes, cudaMemcpyHostToDevice, s));
  OK(cudaEventRecord(e1, s));
  OK(cudaEventSynchronize(e1));
  float ms = -1;
  OK(cudaEventElapsedTime(&ms, e0, e1));
  EXPECT(ms > 0 && ms < 100, "16 MiB copy took %f ms", ms);

  ipc_across_processes();

  OK(cudaEventDestroy(e0));
  OK(cudaEventDestroy(e1));
  OK(cudaFree(db));
  OK(cudaFreeHost(h));
  OK(cudaFree(d));
  OK(cudaStreamDestroy(s));
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("CUDA FEATURES OK\n");
  return 0;
}

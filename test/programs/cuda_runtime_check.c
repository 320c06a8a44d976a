/* Checks of fakegpu's CUDA runtime (libcudart.so.13) through the public API only, so the same
 * source builds against fakegpu's include/ and against NVIDIA's CUDA 13 headers: the second
 * build proves the struct layouts and enum values agree with the real ABI.
 *
 * Usage: cuda_runtime_check SCENARIO [ARG]
 *   count N      cudaGetDeviceCount == N (the test sets FAKEGPU_DEVICE_COUNT, or not)
 *   nodevice     a runtime setting is malformed (FAKEGPU_DEVICE_COUNT=0, FAKEGPU_TIME_MODE=fast):
 *                no devices, an initialisation error
 *   cluster      node 1 of configs/demo_2node_16gpu.yaml: 8 H100s in PCI domain 1
 *   props        FAKEGPU_GPU_PROFILE=a100-40gb: the profile's numbers, props == attributes
 *   memory       capacity, cudaMemGetInfo, pointer attributes, host registration, 2D, async
 *   graph        stream capture, instantiate, replay; sync on a capturing stream fails
 *   kernels      registration, counted launches, launch checks (as nvcc's code registers them)
 *   timing       event times on an H100 in FAKEGPU_TIME_MODE (modeled, paced or wall)
 *   started      work in two parts (the bridge's start_clocked_host_func): where and when each
 *                part runs, and that nothing waits on parked work for ever; events on drained
 *                streams
 *   unsupported  an unimplemented API: 801 and a log line; runtime version 13000
 * Prints "<scenario>: OK" and exits 0, or names every failed check and exits 1. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FAKEGPU_CUDA_RUNTIME_H
/* Not in fakegpu's header (it is unimplemented); NVIDIA's declares it with typed pointers. */
cudaError_t cudaArrayGetInfo(void* desc, void* extent, void* flags, void* array);
#endif

#include "expect.h"
#include "fake_cuda_bridge.h"
#define ERR(expected, call)                                                                   \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    EXPECT(e_ == (expected), "%s returned %d, expected %s (%d)", #call, (int)e_, #expected, (int)(expected)); \
  } while (0)

static int attr(enum cudaDeviceAttr a, int dev) {
  int v = -12345;
  OK(cudaDeviceGetAttribute(&v, a, dev));
  return v;
}

/* Properties and attributes are two views of one set of facts; they must never disagree. The
 * runtime writes exactly sizeof(struct cudaDeviceProp): nothing past it. */
static void props_agree_with_attributes(int dev, struct cudaDeviceProp* out) {
  unsigned char buf[sizeof(struct cudaDeviceProp) + 64];
  memset(buf, 0xAB, sizeof buf);
  OK(cudaGetDeviceProperties((struct cudaDeviceProp*)buf, dev));
  for (size_t i = sizeof(struct cudaDeviceProp); i < sizeof buf; ++i)
    EXPECT(buf[i] == 0xAB, "device %d: cudaGetDeviceProperties wrote byte %zu past the struct", dev, i);
  struct cudaDeviceProp p;
  memcpy(&p, buf, sizeof p);
  EXPECT(p.name[0] != '\0', "device %d: empty name", dev);
  EXPECT(p.major == attr(cudaDevAttrComputeCapabilityMajor, dev), "device %d: major %d", dev, p.major);
  EXPECT(p.minor == attr(cudaDevAttrComputeCapabilityMinor, dev), "device %d: minor %d", dev, p.minor);
  EXPECT(p.multiProcessorCount == attr(cudaDevAttrMultiProcessorCount, dev), "device %d: SMs %d", dev,
         p.multiProcessorCount);
  EXPECT(p.pciBusID == attr(cudaDevAttrPciBusId, dev), "device %d: pciBusID %d", dev, p.pciBusID);
  EXPECT(p.pciDomainID == attr(cudaDevAttrPciDomainId, dev), "device %d: pciDomainID %d", dev, p.pciDomainID);
  EXPECT(p.l2CacheSize == attr(cudaDevAttrL2CacheSize, dev), "device %d: L2 %d", dev, p.l2CacheSize);
  EXPECT(p.maxThreadsPerMultiProcessor == attr(cudaDevAttrMaxThreadsPerMultiProcessor, dev),
         "device %d: threads/SM %d", dev, p.maxThreadsPerMultiProcessor);
  EXPECT(p.memoryBusWidth == attr(cudaDevAttrGlobalMemoryBusWidth, dev), "device %d: bus width %d", dev,
         p.memoryBusWidth);
  EXPECT(p.warpSize == 32 && p.warpSize == attr(cudaDevAttrWarpSize, dev), "device %d: warp %d", dev, p.warpSize);
  EXPECT(p.maxThreadsPerBlock == attr(cudaDevAttrMaxThreadsPerBlock, dev), "device %d: threads/block", dev);
  EXPECT(p.l2CacheSize > 0 && p.memoryBusWidth > 0 && p.maxThreadsPerMultiProcessor > 0,
         "device %d: zero L2/bus width/threads per SM", dev);
  if (out) *out = p;
}

static void scenario_count(int expected) {
  int n = -1;
  OK(cudaGetDeviceCount(&n));
  EXPECT(n == expected, "cudaGetDeviceCount gave %d, expected %d", n, expected);
  OK(cudaSetDevice(expected - 1));
  ERR(cudaErrorInvalidDevice, cudaSetDevice(expected));
  int v;
  ERR(cudaErrorInvalidDevice, cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, expected));
  (void)cudaGetLastError();
}

static void scenario_nodevice(void) {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  EXPECT(e != cudaSuccess, "cudaGetDeviceCount succeeded with a malformed setting");
  EXPECT(n == 0, "cudaGetDeviceCount reported %d devices", n);
  void* p = NULL;
  EXPECT(cudaMalloc(&p, 16) != cudaSuccess, "cudaMalloc succeeded without devices");
}

/* The process is on node 1 of a 2-node cluster: its PCI domain is the node index, buses count
 * from 1, and bus ids map back to ordinals. */
static void scenario_cluster(void) {
  int n = -1;
  OK(cudaGetDeviceCount(&n));
  EXPECT(n == 8, "node 1 has 8 GPUs, cudaGetDeviceCount gave %d", n);
  for (int dev = 0; dev < n; ++dev) {
    char id[32] = "", want[32];
    OK(cudaDeviceGetPCIBusId(id, sizeof id, dev));
    snprintf(want, sizeof want, "0001:%02x:00.0", dev + 1);
    EXPECT(strcmp(id, want) == 0, "device %d: bus id \"%s\", expected \"%s\"", dev, id, want);
    int back = -1;
    OK(cudaDeviceGetByPCIBusId(&back, id));
    EXPECT(back == dev, "cudaDeviceGetByPCIBusId(%s) gave %d", id, back);
    struct cudaDeviceProp p;
    props_agree_with_attributes(dev, &p);
    EXPECT(p.pciDomainID == 1 && p.pciBusID == dev + 1, "device %d: PCI %d:%d", dev, p.pciDomainID, p.pciBusID);
    EXPECT(strstr(p.name, "H100") != NULL, "device %d: name \"%s\" is not an H100", dev, p.name);
  }
  int back = -1;
  /* node 0's first GPU is not in this process */
  ERR(cudaErrorInvalidDevice, cudaDeviceGetByPCIBusId(&back, "0000:01:00.0"));
  (void)cudaGetLastError();
  int can = -1;
  OK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT(can == 1, "GPUs of one node can access each other");
}

static void scenario_props(void) {
  int n = -1;
  OK(cudaGetDeviceCount(&n));
  EXPECT(n == 8, "8 devices by default, got %d", n);
  struct cudaDeviceProp p;
  props_agree_with_attributes(0, &p);
  EXPECT(strcmp(p.name, "NVIDIA A100-SXM4-40GB") == 0, "name \"%s\"", p.name);
  EXPECT(p.multiProcessorCount == 108, "A100 has 108 SMs, got %d", p.multiProcessorCount);
  EXPECT(p.major == 8 && p.minor == 0, "A100 is cc 8.0, got %d.%d", p.major, p.minor);
  EXPECT(p.totalGlobalMem == (size_t)40960 << 20, "A100-40GB has 40960 MiB, got %zu bytes", p.totalGlobalMem);
  EXPECT(p.pciDomainID == 0 && p.pciBusID == 1, "device 0 at 0000:01, got %d:%d", p.pciDomainID, p.pciBusID);
  struct cudaDeviceProp q;
  props_agree_with_attributes(7, &q);
  EXPECT(q.pciBusID == 8, "device 7 is on bus 8, got %d", q.pciBusID);
}

static void scenario_memory(void) {
  size_t free0 = 0, total = 0;
  OK(cudaMemGetInfo(&free0, &total));
  struct cudaDeviceProp p;
  OK(cudaGetDeviceProperties(&p, 0));
  EXPECT(total == p.totalGlobalMem, "cudaMemGetInfo total %zu != totalGlobalMem %zu", total, p.totalGlobalMem);
  EXPECT(free0 <= total && free0 > total / 2, "free %zu of %zu at start", free0, total);

  /* Capacity: more than the device has fails, as on a GPU, and is the last error. */
  void* big = NULL;
  ERR(cudaErrorMemoryAllocation, cudaMalloc(&big, total + 1));
  ERR(cudaErrorMemoryAllocation, cudaGetLastError());
  ERR(cudaErrorMemoryAllocation, cudaMallocManaged(&big, total + 1, cudaMemAttachGlobal));
  (void)cudaGetLastError();

  /* Free memory drops by an allocation's size (rounded to the 256-byte alignment at most)
   * and comes back after cudaFree. */
  const size_t bytes = (64u << 20) + 100;
  void* d = NULL;
  OK(cudaMalloc(&d, bytes));
  size_t free1 = 0;
  OK(cudaMemGetInfo(&free1, NULL));
  EXPECT(free0 - free1 >= bytes && free0 - free1 < bytes + 256, "free dropped by %zu for %zu bytes", free0 - free1,
         bytes);
  EXPECT(((size_t)d & 255) == 0, "cudaMalloc pointer %p not 256-byte aligned", d);

  /* Pointer attributes, by kind. */
  void *h = NULL, *m = NULL;
  OK(cudaMallocHost(&h, 4096));
  OK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
  char* plain = malloc(4096);
  struct cudaPointerAttributes a;
  memset(&a, 0x5A, sizeof a);
  OK(cudaPointerGetAttributes(&a, d));
  EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == d, "cudaMalloc: type %d device %d",
         (int)a.type, a.device);
  OK(cudaPointerGetAttributes(&a, (char*)d + 1000));
  EXPECT(a.type == cudaMemoryTypeDevice, "interior device pointer: type %d", (int)a.type);
  OK(cudaPointerGetAttributes(&a, h));
  EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == h, "cudaMallocHost: type %d", (int)a.type);
  OK(cudaPointerGetAttributes(&a, m));
  EXPECT(a.type == cudaMemoryTypeManaged && a.devicePointer == m && a.hostPointer == m, "managed: type %d",
         (int)a.type);
  OK(cudaPointerGetAttributes(&a, plain));
  EXPECT(a.type == cudaMemoryTypeUnregistered && a.device == -2 && a.devicePointer == NULL && a.hostPointer == NULL,
         "malloc: type %d device %d", (int)a.type, a.device);

  /* Host registration: twice (or overlapping) is an error; unregistering twice too. */
  OK(cudaHostRegister(plain, 4096, cudaHostRegisterDefault));
  OK(cudaPointerGetAttributes(&a, plain + 10));
  EXPECT(a.type == cudaMemoryTypeHost, "registered memory: type %d", (int)a.type);
  ERR(cudaErrorHostMemoryAlreadyRegistered, cudaHostRegister(plain, 4096, cudaHostRegisterDefault));
  ERR(cudaErrorHostMemoryAlreadyRegistered, cudaHostRegister(plain + 2048, 4096, cudaHostRegisterDefault));
  OK(cudaHostUnregister(plain));
  ERR(cudaErrorHostMemoryNotRegistered, cudaHostUnregister(plain));
  (void)cudaGetLastError();

  /* 2D: a 4x10 host block with pitch 16 into a pitched device block; a memset of a 3x2
   * window; the device's row padding must be untouched by both. */
  size_t pitch = 0;
  unsigned char* d2 = NULL;
  OK(cudaMallocPitch((void**)&d2, &pitch, 10, 4));
  EXPECT(pitch >= 10, "pitch %zu", pitch);
  OK(cudaMemset(d2, 0xEE, pitch * 4));
  unsigned char src[4 * 16], back[4 * 12];
  for (int i = 0; i < 4 * 16; ++i) src[i] = (unsigned char)i;
  OK(cudaMemcpy2D(d2, pitch, src, 16, 10, 4, cudaMemcpyHostToDevice));
  OK(cudaMemset2D(d2 + 2, pitch, 0x55, 3, 2));
  memset(back, 0, sizeof back);
  OK(cudaMemcpy2D(back, 12, d2, pitch, 10, 4, cudaMemcpyDeviceToHost));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 12; ++c) {
      int want = c >= 10 ? 0 : (r < 2 && c >= 2 && c < 5) ? 0x55 : r * 16 + c;
      EXPECT(back[r * 12 + c] == want, "2D row %d col %d: %d, expected %d", r, c, back[r * 12 + c], want);
    }
  unsigned char* linear = malloc(pitch * 4);
  OK(cudaMemcpy(linear, d2, pitch * 4, cudaMemcpyDeviceToHost));
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 10; c < pitch; ++c)
      EXPECT(linear[r * pitch + c] == 0xEE, "2D copy or set wrote padding at row %zu col %zu", r, c);
  ERR(cudaErrorInvalidPitchValue, cudaMemcpy2D(d2, 8, src, 16, 10, 4, cudaMemcpyHostToDevice));
  (void)cudaGetLastError();
  OK(cudaFree(d2));
  free(linear);

  /* Stream-ordered allocation: usable at once on its stream, released when the stream
   * reaches the free. */
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  size_t before_async = 0;
  OK(cudaMemGetInfo(&before_async, NULL));
  void* ad = NULL;
  OK(cudaMallocAsync(&ad, 1 << 20, s));
  EXPECT(ad != NULL, "cudaMallocAsync gave NULL");
  OK(cudaMemsetAsync(ad, 7, 1 << 20, s));
  OK(cudaMemcpyAsync(h, (char*)ad + 4000, 96, cudaMemcpyDeviceToHost, s));
  OK(cudaFreeAsync(ad, s));
  OK(cudaStreamSynchronize(s));
  for (int i = 0; i < 96; ++i) EXPECT(((unsigned char*)h)[i] == 7, "async memset/copy byte %d: %d", i, ((unsigned char*)h)[i]);
  size_t after_async = 0;
  OK(cudaMemGetInfo(&after_async, NULL));
  EXPECT(after_async == before_async, "cudaFreeAsync did not give the memory back (%zu vs %zu)", after_async,
         before_async);
  OK(cudaPointerGetAttributes(&a, ad));
  EXPECT(a.type == cudaMemoryTypeUnregistered, "freed async memory still has type %d", (int)a.type);
  OK(cudaStreamDestroy(s));

  OK(cudaFree(d));
  ERR(cudaErrorInvalidDevicePointer, cudaFree(d));
  (void)cudaGetLastError();
  OK(cudaFreeHost(h));
  OK(cudaFree(m));
  size_t free2 = 0;
  OK(cudaMemGetInfo(&free2, NULL));
  EXPECT(free2 == free0, "free memory %zu after freeing everything, %zu at start", free2, free0);
  free(plain);
}

/* A host function records what it saw, so the test knows how often and in which order the
 * captured work ran. */
static int host_calls = 0;
static unsigned char seen[8];
static void record_host(void* p) {
  if (host_calls < 8) seen[host_calls] = *(unsigned char*)p;
  ++host_calls;
}

static void scenario_graph(void) {
  cudaStream_t s;
  OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned char *h = NULL, *d = NULL;
  OK(cudaMallocHost((void**)&h, 64));
  OK(cudaMalloc((void**)&d, 64));
  memset(h, 0, 64);

  ERR(cudaErrorStreamCaptureUnsupported, cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal));
  (void)cudaGetLastError();
  OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  OK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusActive, "capture status %d", (int)st);
  OK(cudaMemsetAsync(d, 0x11, 64, s));
  OK(cudaMemcpyAsync(h, d, 64, cudaMemcpyDeviceToHost, s));
  OK(cudaLaunchHostFunc(s, record_host, h));
  cudaGraph_t g = NULL;
  OK(cudaStreamEndCapture(s, &g));
  OK(cudaStreamIsCapturing(s, &st));
  EXPECT(st == cudaStreamCaptureStatusNone, "still capturing after EndCapture: %d", (int)st);
  OK(cudaStreamSynchronize(s));
  EXPECT(host_calls == 0 && h[0] == 0, "captured work ran during capture (calls %d, byte %d)", host_calls, h[0]);

  size_t nodes = 0;
  OK(cudaGraphGetNodes(g, NULL, &nodes));
  EXPECT(nodes == 3, "captured graph has %zu nodes, expected 3", nodes);
  cudaGraphExec_t exec = NULL;
  OK(cudaGraphInstantiate(&exec, g, 0));
  OK(cudaGraphLaunch(exec, s));
  OK(cudaGraphLaunch(exec, s));
  OK(cudaStreamSynchronize(s));
  EXPECT(host_calls == 2, "two graph launches ran the host function %d times", host_calls);
  EXPECT(seen[0] == 0x11 && seen[1] == 0x11, "host function ran before the copy: saw %d, %d", seen[0], seen[1]);
  for (int i = 0; i < 64; ++i) EXPECT(h[i] == 0x11, "replayed copy byte %d: %d", i, h[i]);
  OK(cudaGraphExecDestroy(exec));
  OK(cudaGraphDestroy(g));

  /* Synchronising a capturing stream is an error and invalidates the capture. */
  OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  ERR(cudaErrorStreamCaptureUnsupported, cudaStreamSynchronize(s));
  cudaGraph_t bad = (cudaGraph_t)1;
  ERR(cudaErrorStreamCaptureInvalidated, cudaStreamEndCapture(s, &bad));
  EXPECT(bad == NULL, "an invalidated capture returned a graph");
  (void)cudaGetLastError();
  OK(cudaStreamSynchronize(s));  /* not capturing any more */
  OK(cudaStreamDestroy(s));
  OK(cudaFree(d));
  OK(cudaFreeHost(h));
}

/* Host functions for the timing scenario: one takes wall time and no modeled time; the other
 * takes modeled time and no wall time, reporting it as fakegpu's NCCL reports a collective's
 * (through the modeled_now and collective_done calls of the runtime's bridge table). */
static void sleep_30ms(void* unused) {
  (void)unused;
  usleep(30000);
}
static const fakegpu_cuda_bridge_table* bridge;
static void modeled_40ms(void* unused, fakegpu_stream_clock* clock) {
  (void)unused;
  double now = bridge->modeled_now(clock, NULL);
  bridge->collective_done(clock, now, now + 40000.0);
}

/* fakegpu's runtime's bridge table, as its other libraries find it; NULL when it is missing or
 * of another version. */
static const fakegpu_cuda_bridge_table* find_bridge(void) {
  fakegpu_cuda_bridge_fn lookup;
  *(void**)&lookup = dlsym(RTLD_DEFAULT, "fakegpu_cuda_bridge");
  const fakegpu_cuda_bridge_table* table = lookup ? lookup(FAKEGPU_CUDA_BRIDGE_VERSION) : NULL;
  EXPECT(table && table->version == FAKEGPU_CUDA_BRIDGE_VERSION && table->size == sizeof *table,
         "fakegpu_cuda_bridge is not exported, or answered with another table");
  if (lookup) EXPECT(lookup(FAKEGPU_CUDA_BRIDGE_VERSION + 1) == NULL, "the runtime answered a bridge version it is not");
  return table && table->version == FAKEGPU_CUDA_BRIDGE_VERSION && table->size == sizeof *table ? table : NULL;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static float elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = -1;
  OK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

/* A stream that waits on an event takes the time of the recording current at the call, even
 * when the event is recorded again, 40 modeled ms later, before the wait runs. (It used to take
 * the newest recording's time: how often that happened depended on thread timing.) */
static int release_waiter;
static void hold_until_released(void* unused) {
  (void)unused;
  while (!__atomic_load_n(&release_waiter, __ATOMIC_ACQUIRE)) usleep(100);
}
static void wait_takes_its_recording(void) {
  cudaStream_t recorder, waiter;
  cudaEvent_t e, begin, end;
  OK(cudaStreamCreate(&recorder));
  OK(cudaStreamCreate(&waiter));
  OK(cudaEventCreate(&e));
  OK(cudaEventCreate(&begin));
  OK(cudaEventCreate(&end));
  OK(cudaEventRecord(begin, waiter));
  OK(cudaLaunchHostFunc(waiter, hold_until_released, NULL)); /* the wait runs after both recordings */
  OK(cudaEventRecord(e, recorder));
  OK(cudaStreamWaitEvent(waiter, e, 0));
  OK(cudaEventRecord(end, waiter)); /* queued before the host waits below, which would move it on */
  OK(bridge->launch_clocked_host_func(recorder, modeled_40ms, NULL));
  OK(cudaEventRecord(e, recorder));
  OK(cudaStreamSynchronize(recorder));
  __atomic_store_n(&release_waiter, 1, __ATOMIC_RELEASE);
  OK(cudaStreamSynchronize(waiter));
  float waited = elapsed(begin, end);
  EXPECT(waited >= 0 && waited < 1.0f, "the wait took the later recording's time: %f ms", waited);
  OK(cudaEventDestroy(end));
  OK(cudaEventDestroy(begin));
  OK(cudaEventDestroy(e));
  OK(cudaStreamDestroy(waiter));
  OK(cudaStreamDestroy(recorder));
}

/* An event may be destroyed while its recording is still queued and another stream waits on
 * it: CUDA frees it once that work is done. (ThreadSanitizer saw the waiting stream read it
 * after the runtime had freed it.) */
static void destroy_pending_event(void) {
  cudaStream_t recorder, waiter;
  cudaEvent_t e;
  OK(cudaStreamCreate(&recorder));
  OK(cudaStreamCreate(&waiter));
  OK(cudaEventCreate(&e));
  OK(cudaLaunchHostFunc(recorder, sleep_30ms, NULL));
  OK(cudaEventRecord(e, recorder));
  OK(cudaStreamWaitEvent(waiter, e, 0));
  OK(cudaEventDestroy(e));
  OK(cudaStreamSynchronize(waiter));
  OK(cudaStreamDestroy(waiter));
  OK(cudaStreamDestroy(recorder));
}

/* ---- work in two parts: start_clocked_host_func ---- */

/* What each part saw: which thread ran it, and in what order the parts ran. */
struct Parts {
  pthread_t start_thread, finish_thread;
  int started, finished;  /* the order they ran in, counting from 1; 0: not yet */
  double modeled_ms;      /* finish reports this much modeled time on its stream's clock */
};
static int parts_ran;
static void part_start(void* user, fakegpu_stream_clock* clock) {
  (void)clock;
  struct Parts* p = user;
  p->start_thread = pthread_self();
  p->started = __atomic_add_fetch(&parts_ran, 1, __ATOMIC_ACQ_REL);
}
static void part_finish(void* user, fakegpu_stream_clock* clock) {
  struct Parts* p = user;
  double now = bridge->modeled_now(clock, NULL);
  if (p->modeled_ms > 0) bridge->collective_done(clock, now, now + p->modeled_ms * 1e3);
  p->finish_thread = pthread_self();
  __atomic_store_n(&p->finished, __atomic_add_fetch(&parts_ran, 1, __ATOMIC_ACQ_REL), __ATOMIC_RELEASE);
}
static int finished(struct Parts* p) { return __atomic_load_n(&p->finished, __ATOMIC_ACQUIRE); }
static int parts_done(void* p) { return finished(p) != 0; }
/* The ready probe of a Parts: finish would not wait once `ready_now` is set. */
static int ready_now;
static int parts_ready(void* user) {
  (void)user;
  return __atomic_load_n(&ready_now, __ATOMIC_ACQUIRE);
}

/* Polls until done() holds, for at most 10 s: parked work that nobody takes would hang. */
static int eventually(int (*done)(void*), void* arg) {
  for (double end = now_ms() + 10000; now_ms() < end;) {
    if (done(arg)) return 1;
    usleep(100);
  }
  return 0;
}
static int stream_idle(void* s) { return cudaStreamQuery((cudaStream_t)s) == cudaSuccess; }
static int event_done(void* e) { return cudaEventQuery((cudaEvent_t)e) == cudaSuccess; }

/* A host function another thread queues while `start` runs: it comes after `finish`. */
struct Meanwhile {
  struct Parts parts; /* first: part_finish takes a Meanwhile as its Parts */
  cudaStream_t stream;
  int queued;
  struct Parts after; /* filled by record_after, run as a plain host function */
};
static void record_after(void* user) { part_start(user, NULL); }
static void* queue_meanwhile(void* arg) {
  struct Meanwhile* m = arg;
  while (!__atomic_load_n(&parts_ran, __ATOMIC_ACQUIRE)) usleep(50); /* start has begun */
  OK(cudaLaunchHostFunc(m->stream, record_after, &m->after));
  __atomic_store_n(&m->queued, 1, __ATOMIC_RELEASE);
  return NULL;
}
static void start_waiting_for_meanwhile(void* user, fakegpu_stream_clock* clock) {
  struct Meanwhile* m = user;
  part_start(&m->parts, clock);
  while (!__atomic_load_n(&m->queued, __ATOMIC_ACQUIRE)) usleep(50);
}

static void scenario_started(void) {
  bridge = find_bridge();
  if (!bridge) return;
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  const pthread_t self = pthread_self();

  /* 1. Idle stream: start runs before the call returns, on this thread; finish waits, parked,
   * and the thread that synchronises runs it, with its modeled time on the stream. */
  cudaEvent_t before, after;
  OK(cudaEventCreate(&before));
  OK(cudaEventCreate(&after));
  OK(cudaEventRecord(before, s));
  OK(cudaStreamSynchronize(s));
  struct Parts idle = {.modeled_ms = 40};
  parts_ran = 0;
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &idle));
  EXPECT(idle.started == 1 && pthread_equal(idle.start_thread, self), "start did not run at once on the calling thread");
  usleep(20000); /* time enough for a worker that was woken to take finish */
  EXPECT(!finished(&idle), "finish ran although nothing waited for it");
  OK(cudaEventRecord(after, s));
  OK(cudaStreamSynchronize(s));
  EXPECT(idle.finished == 2, "finish ran %d-th", idle.finished);
  float ms = elapsed(before, after);
  EXPECT(ms > 39.9f && ms < 40.1f, "the two parts took %f modeled ms, expected 40", ms);
  struct Parts stolen = {0};
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &stolen));
  OK(cudaStreamSynchronize(s));
  EXPECT(finished(&stolen) && pthread_equal(stolen.finish_thread, self),
         "the synchronising thread did not run the parked finish itself");

  /* 2. Parked work ends for a caller that only polls: the stream, or an event behind it. Without
   * a probe the worker takes it. */
  struct Parts polled = {0};
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &polled));
  EXPECT(eventually(stream_idle, s), "cudaStreamQuery never saw parked work end");
  EXPECT(finished(&polled) && !pthread_equal(polled.finish_thread, self), "finish did not run on the stream's worker");
  struct Parts evented = {0};
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &evented));
  OK(cudaEventRecord(after, s));
  EXPECT(eventually(event_done, after), "cudaEventQuery never saw an event behind parked work complete");
  struct Parts kicked = {0};
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &kicked));
  bridge->kick_streams();
  EXPECT(eventually(parts_done, &kicked), "kick_streams did not hand parked work to the worker");

  /* A probe that says finish would not wait lets the thread that queries run it; until then the
   * query leaves it parked, for the caller's next look. */
  struct Parts probed = {0};
  ready_now = 0;
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, parts_ready, &probed));
  EXPECT(cudaStreamQuery(s) == cudaErrorNotReady, "the stream looked idle with parked work");
  usleep(20000);
  EXPECT(!finished(&probed), "parked work ran although its probe said it would wait");
  __atomic_store_n(&ready_now, 1, __ATOMIC_RELEASE);
  EXPECT(cudaStreamQuery(s) == cudaSuccess, "a query did not run parked work that would not wait");
  EXPECT(finished(&probed) && pthread_equal(probed.finish_thread, self), "the querying thread did not run it");

  /* Work queued behind parked work must start without anyone looking: a collective's peers
   * wait for it to be posted, as they would for a GPU to reach it. The worker takes both. */
  struct Parts ahead = {0}, behind = {0};
  ready_now = 0;
  parts_ran = 0;
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, parts_ready, &ahead));
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, parts_ready, &behind));
  eventually(parts_done, &behind);
  EXPECT(finished(&ahead) == 2 && finished(&behind) == 4, "work behind parked work did not run unasked (%d %d)",
         finished(&ahead), finished(&behind));
  EXPECT(!pthread_equal(behind.start_thread, self), "work behind parked work started on the calling thread");

  /* 3. Behind queued work both parts queue: neither runs before the call returns. */
  release_waiter = 0;
  OK(cudaLaunchHostFunc(s, hold_until_released, NULL));
  struct Parts queued = {0};
  parts_ran = 0;
  OK(bridge->start_clocked_host_func(s, part_start, part_finish, NULL, &queued));
  usleep(20000);
  EXPECT(parts_ran == 0, "a part ran ahead of the work queued before it");
  __atomic_store_n(&release_waiter, 1, __ATOMIC_RELEASE);
  OK(cudaStreamSynchronize(s));
  EXPECT(queued.started == 1 && queued.finished == 2, "queued parts ran %d-th and %d-th", queued.started, queued.finished);

  /* 4. Work another thread queues while start runs comes after finish. */
  struct Meanwhile m = {.stream = s};
  parts_ran = 0;
  pthread_t helper;
  EXPECT(pthread_create(&helper, NULL, queue_meanwhile, &m) == 0, "no thread");
  OK(bridge->start_clocked_host_func(s, start_waiting_for_meanwhile, part_finish, NULL, &m));
  pthread_join(helper, NULL);
  OK(cudaStreamSynchronize(s));
  EXPECT(m.after.started == 3, "work queued while start ran did not come after finish (ran %d-th)", m.after.started);

  /* 5. On a drained stream an event's recording, and a wait for a recording already complete,
   * are done when the call returns: no work is left for the worker. */
  OK(cudaEventRecord(before, s));
  EXPECT(cudaEventQuery(before) == cudaSuccess, "an event recorded on a drained stream was still pending");
  cudaStream_t other;
  OK(cudaStreamCreate(&other));
  OK(cudaStreamWaitEvent(other, before, 0));
  EXPECT(cudaStreamQuery(other) == cudaSuccess, "a wait for a complete recording was left queued");
  OK(cudaStreamDestroy(other));

  OK(cudaEventDestroy(before));
  OK(cudaEventDestroy(after));
  OK(cudaStreamDestroy(s));
}

/* Events report the stream's modeled clock by default: a 64 MiB copy over an H100's PCIe
 * takes a fraction of a millisecond to a few, three copies three times that, and a host
 * function's wall time counts for nothing. Paced mode also makes modeled time pass in wall
 * time. Wall mode reports real time instead. */
static void scenario_timing(void) {
  const char* mode_env = getenv("FAKEGPU_TIME_MODE");
  const char* mode = mode_env && *mode_env ? mode_env : "modeled";
  bridge = find_bridge();
  if (!bridge) return;
  static fakegpu_activity_slice drained[4096];
  bridge->take_activity(drained, 4096, 0, NULL); /* what earlier scenarios logged */
  const size_t bytes = 64u << 20;
  void *h = NULL, *d = NULL;
  OK(cudaMallocHost(&h, bytes));
  OK(cudaMalloc(&d, bytes));
  memset(h, 1, bytes);
  cudaStream_t s;
  cudaEvent_t e[5];
  OK(cudaStreamCreate(&s));
  for (int i = 0; i < 5; ++i) OK(cudaEventCreate(&e[i]));
  double wall0 = now_ms();
  OK(cudaEventRecord(e[0], s));
  OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
  OK(cudaEventRecord(e[1], s));
  OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
  OK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
  OK(cudaEventRecord(e[2], s));
  OK(cudaLaunchHostFunc(s, sleep_30ms, NULL));
  OK(cudaEventRecord(e[3], s));
  OK(cudaStreamSynchronize(s));
  double wall_copies = now_ms() - wall0, wall1 = now_ms();
  OK(bridge->launch_clocked_host_func(s, modeled_40ms, NULL));
  OK(cudaEventRecord(e[4], s));
  OK(cudaEventSynchronize(e[4]));
  double wall_model = now_ms() - wall1, wall_all = now_ms() - wall0;
  float one = elapsed(e[0], e[1]), three = elapsed(e[0], e[2]), slept = elapsed(e[2], e[3]);
  float model = elapsed(e[3], e[4]), all = elapsed(e[0], e[4]);
  printf("%s: 64 MiB H2D %.4f ms, 3 copies %.4f ms (wall %.1f), 30 ms sleep %.4f ms, 40 ms modeled %.4f ms (wall %.1f)\n",
         mode, one, three, wall_copies, slept, model, wall_model);
  if (strcmp(mode, "wall") == 0) {
    EXPECT(one > 0 && three >= one, "copies took %f and %f ms", one, three);
    EXPECT(slept >= 29.0f, "a 30 ms host function took %f ms of wall time", slept);
    EXPECT(model < 20.0f, "wall mode reported %f ms of modeled time", model);
    EXPECT(all <= wall_all + 0.5, "event time %f ms exceeds the wall time around it (%f ms)", all, wall_all);
  } else {
    EXPECT(one > 0.1f && one < 100.0f, "64 MiB copy took %f ms", one);
    EXPECT(three > 2.9f * one && three < 3.1f * one, "three copies %f ms vs one %f ms", three, one);
    EXPECT(slept >= 0 && slept < 0.01f, "a host function's wall time counted as %f modeled ms", slept);
    EXPECT(model > 39.9f && model < 40.1f, "40 ms of reported modeled time measured %f ms", model);
    if (strcmp(mode, "paced") == 0)
      EXPECT(wall_model >= 39.0, "paced: 40 modeled ms passed in %f wall ms", wall_model);
  }
  /* The log holds the stream's three back-to-back copies (one slice: the first is apart from
   * the other two only by an event) and the 40 ms collective, on one track. */
  fakegpu_activity_slice got[64];
  size_t n = bridge->take_activity(got, 64, 0, NULL);
  int copies = 0, collectives = 0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT(got[i].track == got[0].track, "slice %zu is on another track", i);
    if (got[i].kind == 1) copies += (int)got[i].count;
    if (got[i].kind == 2) {
      ++collectives;
      EXPECT(got[i].end_us - got[i].start_us > 39999.0 && got[i].end_us - got[i].start_us < 40001.0,
             "the collective's slice spans %f us", got[i].end_us - got[i].start_us);
    }
  }
  if (strcmp(mode, "wall") != 0)
    EXPECT(copies == 3 && collectives == 1 && n == 2, "activity log: %zu slices, %d copies, %d collectives", n, copies,
           collectives);

  /* The host waited for stream s (cudaEventSynchronize above), so work it queues afterwards on
   * a fresh stream starts no earlier than s's modeled clock did. */
  cudaStream_t later;
  cudaEvent_t mark;
  OK(cudaStreamCreate(&later));
  OK(cudaEventCreate(&mark));
  OK(cudaEventRecord(mark, later));
  OK(cudaEventSynchronize(mark));
  float after = elapsed(e[4], mark);
  if (strcmp(mode, "wall") != 0) EXPECT(after >= 0 && after < 0.01f, "a fresh stream's work started %f ms after the host's wait", after);
  OK(cudaEventDestroy(mark));
  OK(cudaStreamDestroy(later));
  for (int i = 0; i < 5; ++i) OK(cudaEventDestroy(e[i]));
  OK(cudaStreamDestroy(s));
  OK(cudaFree(d));
  OK(cudaFreeHost(h));
  destroy_pending_event();
  if (strcmp(mode, "modeled") == 0) wait_takes_its_recording();
}

/* What nvcc's generated code calls at start-up, declared here (no header has them for C), so
 * kernels can be checked without nvcc: a "kernel" is any host address registered this way. */
void** __cudaRegisterFatBinary(void* fat_cubin);
void __cudaRegisterFatBinaryEnd(void** handle);
void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun, const char* device_name,
                            int thread_limit, void* tid, void* bid, void* block, void* grid, int* warp_size);
static void fake_kernel(void) {}
static void unregistered_kernel(void) {}

static void scenario_kernels(void) {
  const fakegpu_cuda_bridge_table* table = find_bridge();
  if (!table) return;
  uint64_t (*launches)(void) = table->kernel_launches;
  static const int fatbin = 0;
  void** module = __cudaRegisterFatBinary((void*)&fatbin);
  __cudaRegisterFunction(module, (const char*)fake_kernel, "fake_kernel", "fake_kernel", -1, NULL, NULL, NULL, NULL,
                         NULL);
  __cudaRegisterFatBinaryEnd(module);
  const void* k = (const void*)fake_kernel;
  cudaStream_t s;
  OK(cudaStreamCreate(&s));
  dim3 grid = {4, 1, 1}, block = {256, 1, 1};
  const unsigned long long before = launches();
  OK(cudaLaunchKernel(k, grid, block, NULL, 0, s));
  OK(cudaLaunchKernel(k, grid, block, NULL, 1024, 0));
  EXPECT(launches() - before == 2, "2 launches counted as %llu", launches() - before);
  /* Invalid launches fail as CUDA's do, become the last error, and are not counted. */
  dim3 too_many = {2048, 1, 1}, too_deep = {1, 1, 65}, tall_grid = {1, 65536, 1};
  ERR(cudaErrorInvalidConfiguration, cudaLaunchKernel(k, grid, too_many, NULL, 0, s));
  ERR(cudaErrorInvalidConfiguration, cudaGetLastError());
  ERR(cudaErrorInvalidConfiguration, cudaLaunchKernel(k, grid, too_deep, NULL, 0, s));
  ERR(cudaErrorInvalidConfiguration, cudaLaunchKernel(k, tall_grid, block, NULL, 0, s));
  ERR(cudaErrorInvalidValue, cudaLaunchKernel(k, grid, block, NULL, 1u << 30, s));
  ERR(cudaErrorInvalidDeviceFunction, cudaLaunchKernel((const void*)unregistered_kernel, grid, block, NULL, 0, s));
  (void)cudaGetLastError();
  EXPECT(launches() - before == 2, "invalid launches were counted (%llu)", launches() - before);
  OK(cudaStreamSynchronize(s));

  struct cudaFuncAttributes fa;
  memset(&fa, 0, sizeof fa);
  OK(cudaFuncGetAttributes(&fa, k));
  EXPECT(fa.maxThreadsPerBlock == 1024, "maxThreadsPerBlock %d", fa.maxThreadsPerBlock);
  ERR(cudaErrorInvalidDeviceFunction, cudaFuncGetAttributes(&fa, (const void*)unregistered_kernel));
  (void)cudaGetLastError();
  /* An H100 SM holds 2048 threads: eight 256-thread blocks. */
  int blocks = -1;
  OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 256, 0));
  EXPECT(blocks == 8, "occupancy of 256-thread blocks: %d", blocks);
  OK(cudaStreamDestroy(s));
}

/* An unimplemented API returns cudaErrorNotSupported, records it, and logs one line naming
 * itself on stderr (captured here through a temporary file). */
static void scenario_unsupported(void) {
  int v = 0;
  OK(cudaRuntimeGetVersion(&v));
  EXPECT(v == 13000, "cudaRuntimeGetVersion gave %d", v);
  fflush(stderr);
  FILE* log = tmpfile();
  int saved = dup(2);
  dup2(fileno(log), 2);
  cudaError_t e1 = cudaArrayGetInfo(NULL, NULL, NULL, NULL);
  cudaError_t e2 = cudaArrayGetInfo(NULL, NULL, NULL, NULL);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  EXPECT((int)e1 == 801 && (int)e2 == 801, "cudaArrayGetInfo returned %d, %d", (int)e1, (int)e2);
  EXPECT((int)cudaGetLastError() == 801, "the unsupported call is the last error");
  EXPECT(cudaGetLastError() == cudaSuccess, "cudaGetLastError clears the error");
  char text[512] = "";
  rewind(log);
  size_t got = fread(text, 1, sizeof text - 1, log);
  text[got] = '\0';
  fclose(log);
  EXPECT(strstr(text, "cudaArrayGetInfo") != NULL, "no log line names the API: \"%s\"", text);
  EXPECT(strchr(text, '\n') == text + strlen(text) - 1, "expected exactly one log line, got \"%s\"", text);
  const char* name = cudaGetErrorName((cudaError_t)801);
  EXPECT(name && strcmp(name, "cudaErrorNotSupported") == 0, "cudaGetErrorName(801) = %s", name ? name : "NULL");
  const char* desc = cudaGetErrorString((cudaError_t)801);
  EXPECT(desc && *desc, "cudaGetErrorString(801) is empty");
}

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "";
  if (strcmp(what, "count") == 0 && argc > 2)
    scenario_count(atoi(argv[2]));
  else if (strcmp(what, "nodevice") == 0)
    scenario_nodevice();
  else if (strcmp(what, "cluster") == 0)
    scenario_cluster();
  else if (strcmp(what, "props") == 0)
    scenario_props();
  else if (strcmp(what, "memory") == 0)
    scenario_memory();
  else if (strcmp(what, "graph") == 0)
    scenario_graph();
  else if (strcmp(what, "kernels") == 0)
    scenario_kernels();
  else if (strcmp(what, "timing") == 0)
    scenario_timing();
  else if (strcmp(what, "started") == 0)
    scenario_started();
  else if (strcmp(what, "unsupported") == 0)
    scenario_unsupported();
  else {
    fprintf(stderr, "usage: %s count N|nodevice|cluster|props|memory|graph|kernels|timing|started|unsupported\n", argv[0]);
    return 2;
  }
  if (failures) {
    fprintf(stderr, "%s: %d check(s) failed\n", what, failures);
    return 1;
  }
  printf("%s: OK\n", what);
  return 0;
}

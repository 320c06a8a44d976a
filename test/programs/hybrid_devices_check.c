/* libfakegpu-hybrid-devices.so over a runtime with GPUS devices, preloaded with
 * FAKEGPU_HYBRID_DEVICES=SHOWN: the program sees SHOWN devices, device d runs on GPU d % GPUS,
 * and every call that names or reports a device speaks of the device the thread chose.
 * Usage: hybrid_devices_check SHOWN GPUS. Prints "hybrid devices: OK" or names each failed check. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "expect.h"

static int bus_id(int device) {
  int v = -1;
  OK(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, device));
  return v;
}

/* A thread that sets no device is on device 0, as with CUDA. */
static void* fresh_thread(void* out) {
  *(int*)out = -1;
  OK(cudaGetDevice((int*)out));
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SHOWN GPUS\n", argv[0]);
    return 2;
  }
  const int shown = atoi(argv[1]), gpus = atoi(argv[2]);
  int count = 0, device = -1;
  OK(cudaGetDeviceCount(&count));
  EXPECT(count == shown, "cudaGetDeviceCount: %d devices, expected %d", count, shown);
  OK(cudaGetDevice(&device));
  EXPECT(device == 0, "before any cudaSetDevice the device is %d", device);
  EXPECT(cudaSetDevice(shown) == cudaErrorInvalidDevice, "device %d of %d was accepted", shown, shown);
  EXPECT(cudaSetDevice(-1) == cudaErrorInvalidDevice, "device -1 was accepted");
  int props_bus = -1;
  struct cudaDeviceProp props;
  EXPECT(cudaGetDeviceProperties(&props, shown) == cudaErrorInvalidDevice, "properties of device %d", shown);

  for (int d = 0; d < shown; ++d) {
    OK(cudaSetDevice(d));
    OK(cudaGetDevice(&device));
    EXPECT(device == d, "set device %d, cudaGetDevice says %d", d, device);
    /* The GPU under it: the same bus as device d % gpus, and a different one from the next GPU. */
    EXPECT(bus_id(d) == bus_id(d % gpus), "device %d is not on GPU %d", d, d % gpus);
    if (gpus > 1) EXPECT(bus_id(d) != bus_id((d + 1) % gpus), "devices %d and %d share a bus", d, (d + 1) % gpus);
    OK(cudaGetDeviceProperties(&props, d));
    props_bus = props.pciBusID;
    EXPECT(props_bus == bus_id(d), "device %d: properties say bus %d, the attribute %d", d, props_bus, bus_id(d));
    void* p = NULL;
    OK(cudaMalloc(&p, 256));
    struct cudaPointerAttributes attr;
    OK(cudaPointerGetAttributes(&attr, p));
    EXPECT(attr.device == d, "memory allocated on device %d reports device %d", d, attr.device);
    OK(cudaFree(p));
  }

  /* Devices on one GPU reach each other's memory, with nothing to enable. */
  int can = -1;
  if (shown > gpus) {
    OK(cudaDeviceCanAccessPeer(&can, 0, gpus));
    EXPECT(can == 1, "devices 0 and %d share GPU 0 but cannot reach each other", gpus);
    OK(cudaSetDevice(0));
    OK(cudaDeviceEnablePeerAccess(gpus, 0));
  }
  EXPECT(cudaDeviceCanAccessPeer(&can, 0, shown) == cudaErrorInvalidDevice, "peer device %d accepted", shown);

  pthread_t thread;
  int other = -1;
  OK(cudaSetDevice(shown - 1));
  pthread_create(&thread, NULL, fresh_thread, &other);
  pthread_join(thread, NULL);
  EXPECT(other == 0, "a new thread is on device %d", other);
  OK(cudaGetDevice(&device));
  EXPECT(device == shown - 1, "this thread's device became %d", device);

  if (failures) return 1;
  printf("hybrid devices: OK (%d devices on %d GPUs)\n", shown, gpus);
  return 0;
}

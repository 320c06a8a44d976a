/* libfakegpu-hybrid-devices.so over a runtime with GPUS devices, preloaded with
 * FAKEGPU_HYBRID_DEVICES=SHOWN: the program sees SHOWN devices, device d runs on GPU d % GPUS,
 * and every call that names or reports a device speaks of the device the thread chose; the
 * driver's calls too, reached as PyTorch reaches them: through the handle dlopen("libcuda.so.1")
 * returns, and as the runtime's entry points.
 * Usage: hybrid_devices_check SHOWN GPUS. Prints "hybrid devices: OK" or names each failed check. */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
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

/* cuda.h's CUmemAllocationProp and CUmemAccessDesc, as far as a device is named in them. */
struct mem_location {
  int type; /* 1: a device */
  int id;
};
struct mem_allocation_prop {
  int type; /* 1: pinned device memory */
  int handle_types;
  struct mem_location location;
  void* win32_metadata;
  unsigned char flags[8];
};
struct mem_access_desc {
  struct mem_location location;
  int flags; /* 3: read and write */
};

typedef int (*count_fn)(int*);
typedef int (*state_fn)(int, unsigned*, int*);
typedef int (*attribute_fn)(int*, int, int);
typedef int (*ctx_device_fn)(int*);
typedef int (*pointer_attribute_fn)(void*, int, unsigned long long);
typedef int (*granularity_fn)(size_t*, const struct mem_allocation_prop*, int);
typedef int (*create_fn)(unsigned long long*, size_t, const struct mem_allocation_prop*, unsigned long long);
typedef int (*release_fn)(unsigned long long);

/* The driver's calls that name a device, found on the handle of libcuda.so.1. */
static void driver_checks(int shown) {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  EXPECT(driver != NULL, "libcuda.so.1 is not loaded");
  if (!driver) return;
  count_fn count_devices = (count_fn)dlsym(driver, "cuDeviceGetCount");
  state_fn state = (state_fn)dlsym(driver, "cuDevicePrimaryCtxGetState");
  attribute_fn attribute = (attribute_fn)dlsym(driver, "cuDeviceGetAttribute");
  ctx_device_fn ctx_device = (ctx_device_fn)dlsym(driver, "cuCtxGetDevice");
  pointer_attribute_fn pointer_attribute = (pointer_attribute_fn)dlsym(driver, "cuPointerGetAttribute");
  granularity_fn granularity = (granularity_fn)dlsym(driver, "cuMemGetAllocationGranularity");
  create_fn create = (create_fn)dlsym(driver, "cuMemCreate");
  release_fn release = (release_fn)dlsym(driver, "cuMemRelease");
  EXPECT(count_devices && state && attribute && ctx_device && pointer_attribute && granularity && create && release,
         "a driver call is missing from the handle of libcuda.so.1");
  if (failures) return;
  int count = 0;
  OK(count_devices(&count));
  EXPECT(count == shown, "cuDeviceGetCount: %d devices, expected %d", count, shown);
  for (int d = 0; d < shown; ++d) {
    unsigned flags = 0;
    int active = -1, bus = -1, current = -1, ordinal = -1;
    OK(state(d, &flags, &active));
    OK(attribute(&bus, 33 /* CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */, d));
    EXPECT(bus == bus_id(d), "device %d: the driver says bus %d, the runtime %d", d, bus, bus_id(d));
    OK(cudaSetDevice(d));
    OK(ctx_device(&current));
    EXPECT(current == d, "set device %d, cuCtxGetDevice says %d", d, current);
    void* p = NULL;
    OK(cudaMalloc(&p, 256));
    OK(pointer_attribute(&ordinal, 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */, (unsigned long long)p));
    EXPECT(ordinal == d, "memory allocated on device %d has ordinal %d", d, ordinal);
    OK(cudaFree(p));
    /* Virtual memory located on the device, as PyTorch's expandable segments make it. */
    struct mem_allocation_prop prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;
    prop.location.type = 1;
    prop.location.id = d;
    size_t grain = 0;
    OK(granularity(&grain, &prop, 0));
    unsigned long long handle = 0;
    OK(create(&handle, grain, &prop, 0));
    OK(release(handle));
  }
  unsigned flags = 0;
  int active = 0;
  EXPECT(state(shown, &flags, &active) != 0, "the primary context of device %d was found", shown);
  /* PyTorch's driver API asks the runtime for entry points: the same calls. */
  void* entry = NULL;
  enum cudaDriverEntryPointQueryResult found;
  OK(cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &entry, 12000, 0, &found));
  EXPECT(entry != NULL && ((state_fn)entry)(shown - 1, &flags, &active) == 0,
         "the entry point of cuDevicePrimaryCtxGetState does not take device %d", shown - 1);
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

  driver_checks(shown);
  if (failures) return 1;
  printf("hybrid devices: OK (%d devices on %d GPUs)\n", shown, gpus);
  return 0;
}

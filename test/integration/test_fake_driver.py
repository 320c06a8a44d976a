"""fakegpu's CUDA driver (libcuda.so.1) and NVML (libnvidia-ml.so.1) over fakegpu's runtime,
through ctypes: devices from the cluster YAML, primary contexts, pointer queries, entry points,
and a clear refusal for what they do not simulate."""

import ctypes
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import CONFIGS, built

HERE = os.path.dirname(os.path.abspath(__file__))

# Run in a child process: each case needs its own environment (cluster, node) before the
# runtime reads it.
PROLOGUE = f"""
import ctypes, os, sys
cudart = ctypes.CDLL({str(built("libcudart.so.13"))!r}, mode=os.RTLD_GLOBAL)
cu = ctypes.CDLL({str(built("libcuda.so.1"))!r}, mode=os.RTLD_GLOBAL)
def ok(rc, what):
    if rc != 0:
        sys.exit(f"{{what}} returned {{rc}}")
"""


def run(body, **env):
    full = {**os.environ, "FAKEGPU_CLUSTER_CONFIG": str(CONFIGS / "cluster_valid.yaml"), **env}
    return subprocess.run([sys.executable, "-c", PROLOGUE + body], capture_output=True, text=True, env=full,
                          timeout=60)


class FakeDriver(unittest.TestCase):
    def check(self, body, **env):
        r = run(body, **env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def test_devices_are_the_nodes_gpus(self):
        out = self.check("""
ok(cu.cuInit(0), "cuInit")
n = ctypes.c_int(); ok(cu.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
name = ctypes.create_string_buffer(64); ok(cu.cuDeviceGetName(name, 64, 1), "cuDeviceGetName")
sms = ctypes.c_int(); ok(cu.cuDeviceGetAttribute(ctypes.byref(sms), 16, 1), "cuDeviceGetAttribute")
mem = ctypes.c_size_t(); ok(cu.cuDeviceTotalMem_v2(ctypes.byref(mem), 0), "cuDeviceTotalMem")
version = ctypes.c_int(); ok(cu.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
print(n.value, name.value.decode(), sms.value, mem.value >> 20, version.value)
bad = cu.cuDeviceGetName(name, 64, 2)
print("bad device", bad)
""", FAKEGPU_NODE="1")
        self.assertIn("2 NVIDIA H100 80GB HBM3 132 81559 13000", out)
        self.assertIn("bad device 101", out)  # CUDA_ERROR_INVALID_DEVICE

    def test_a_gpu_the_config_describes_is_what_the_runtime_reports(self):
        # gpu_types: a consumer card with no peer access over PCIe, next to one that has it.
        config = Path(tempfile.mkstemp(suffix=".yaml")[1])
        self.addCleanup(config.unlink)
        config.write_text("""version: 1
cluster: {name: workstation}
gpu_types:
  rtx-4090: {product_name: NVIDIA GeForce RTX 4090, memory_gib: 24, sm_count: 128, compute_capability: 8.9, p2p: false}
  a6000: {product_name: NVIDIA RTX A6000, memory_gib: 48, sm_count: 84, compute_capability: 8.6}
nodes:
  - {id: n0, ranks: [0, 1, 2, 3], gpus: [{profile: rtx-4090}, {profile: rtx-4090}, {profile: a6000}, {profile: a6000}]}
fabric:
  intra_node: {type: pcie, bandwidth_gbps: 256, latency_us: 2}
""")
        out = self.check("""
name = ctypes.create_string_buffer(64); ok(cu.cuInit(0), "cuInit")
ok(cu.cuDeviceGetName(name, 64, 0), "cuDeviceGetName")
attr = lambda a, d: (ok(cudart.cudaDeviceGetAttribute(ctypes.byref(v := ctypes.c_int()), a, d), "attribute"), v.value)[1]
mem = ctypes.c_size_t(); ok(cu.cuDeviceTotalMem_v2(ctypes.byref(mem), 0), "cuDeviceTotalMem")
peer = lambda a, b: (ok(cudart.cudaDeviceCanAccessPeer(ctypes.byref(v := ctypes.c_int()), a, b), "peer"), v.value)[1]
print(name.value.decode(), attr(16, 0), attr(75, 0), attr(76, 0), mem.value >> 30, attr(16, 2), attr(76, 2))
print("peers", peer(0, 1), peer(2, 3), peer(0, 2))
""", FAKEGPU_CLUSTER_CONFIG=str(config))
        self.assertIn("NVIDIA GeForce RTX 4090 128 8 9 24 84 6", out)
        self.assertIn("peers 0 1 0", out)

    def test_a_device_context_is_active_once_the_runtime_uses_the_device(self):
        out = self.check("""
state, active = ctypes.c_uint(), ctypes.c_int()
ok(cu.cuDevicePrimaryCtxGetState(1, ctypes.byref(state), ctypes.byref(active)), "state")
before = active.value
ctx = ctypes.c_void_p(); ok(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
none_current = ctx.value is None
ok(cudart.cudaSetDevice(1), "cudaSetDevice")
ok(cu.cuDevicePrimaryCtxGetState(1, ctypes.byref(state), ctypes.byref(active)), "state")
ok(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
dev = ctypes.c_int(); ok(cu.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
retained = ctypes.c_void_p(); ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(retained), 1), "retain")
print(before, none_current, active.value, dev.value, retained.value == ctx.value)
""")
        self.assertIn("0 True 1 1 True", out)

    def test_pointer_queries_and_32_bit_fills(self):
        out = self.check("""
p = ctypes.c_void_p(); ok(cudart.cudaMalloc(ctypes.byref(p), 4096), "cudaMalloc")
inner = ctypes.c_uint64(p.value + 100)
base, size = ctypes.c_uint64(), ctypes.c_size_t()
ok(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), inner), "cuMemGetAddressRange")
kind = ctypes.c_uint(); ok(cu.cuPointerGetAttribute(ctypes.byref(kind), 2, inner), "memory type")
ordinal = ctypes.c_int(); ok(cu.cuPointerGetAttribute(ctypes.byref(ordinal), 9, inner), "device ordinal")
ok(cu.cuMemsetD32Async(ctypes.c_uint64(p.value), ctypes.c_uint(0xdeadbeef), ctypes.c_size_t(8), None), "cuMemsetD32Async")
ok(cudart.cudaDeviceSynchronize(), "sync")
words = (ctypes.c_uint32 * 9).from_address(p.value)
host = (ctypes.c_char * 8)()
outside = cu.cuPointerGetAttribute(ctypes.byref(kind), 2, ctypes.c_uint64(ctypes.addressof(host)))
print(base.value == p.value, size.value, kind.value, ordinal.value, hex(words[7]), words[8] == 0xdeadbeef, outside)
""")
        self.assertIn("True 4096 2 0 0xdeadbeef False 1", out)

    def test_entry_points_are_the_drivers_newest_abi(self):
        out = self.check("""
fn, status = ctypes.c_void_p(), ctypes.c_int()
ok(cudart.cudaGetDriverEntryPointByVersion(b"cuMemGetAddressRange", ctypes.byref(fn), 12000, 0, ctypes.byref(status)), "entry point")
direct = ctypes.cast(cu.cuMemGetAddressRange_v2, ctypes.c_void_p).value
missing = cudart.cudaGetDriverEntryPoint(b"cuNoSuchFunction", ctypes.byref(fn), 0, ctypes.byref(status))
print(status.value, fn.value is None, missing)
ok(cudart.cudaGetDriverEntryPoint(b"cuMemGetAddressRange", ctypes.byref(fn), 0, ctypes.byref(status)), "entry point")
print(fn.value == direct, status.value)
""")
        self.assertIn("1 True 0", out)  # not found: cudaDriverEntryPointSymbolNotFound, no error
        self.assertIn("True 0", out.splitlines()[-1])

    def test_virtual_memory_maps_device_memory(self):
        # Two handles mapped side by side in one range: device memory to every other call, one
        # buffer across both, counted against the device until released.
        out = self.check("""
ok(cu.cuInit(0), "cuInit")
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("handle_types", ctypes.c_int), ("location_type", ctypes.c_int),
                ("location_id", ctypes.c_int), ("win32", ctypes.c_void_p), ("flags", ctypes.c_ubyte * 8)]
prop = Prop(1, 1, 1, 1)  # pinned, POSIX descriptors requested, on device 1
grain = ctypes.c_size_t(); ok(cu.cuMemGetAllocationGranularity(ctypes.byref(grain), ctypes.byref(prop), 0), "granularity")
g = grain.value
base = ctypes.c_uint64(); ok(cu.cuMemAddressReserve(ctypes.byref(base), 4 * g, 0, 0, 0), "reserve")
ok(cudart.cudaSetDevice(1), "cudaSetDevice")
free0, total = ctypes.c_size_t(), ctypes.c_size_t(); ok(cudart.cudaMemGetInfo(ctypes.byref(free0), ctypes.byref(total)), "info")
handles = []
for i in range(2):
    h = ctypes.c_uint64(); ok(cu.cuMemCreate(ctypes.byref(h), g, ctypes.byref(prop), 0), "create")
    ok(cu.cuMemMap(ctypes.c_uint64(base.value + i * g), g, 0, h, 0), "map")
    handles.append(h)
access = (ctypes.c_int * 3)(1, 1, 3)
ok(cu.cuMemSetAccess(base, 2 * g, access, 1), "access")
free1 = ctypes.c_size_t(); ok(cudart.cudaMemGetInfo(ctypes.byref(free1), ctypes.byref(total)), "info")
data = (ctypes.c_ubyte * (2 * g))(*([7] * (2 * g)))
ok(cudart.cudaMemcpy(ctypes.c_void_p(base.value), data, 2 * g, 1), "to the mapping")
back = (ctypes.c_ubyte * 16)()
ok(cudart.cudaMemcpy(back, ctypes.c_void_p(base.value + 2 * g - 16), 16, 2), "back")
kind = ctypes.c_int(); ok(cu.cuPointerGetAttribute(ctypes.byref(kind), 2, ctypes.c_uint64(base.value + g)), "memory type")
print("granularity", g, "counted", free0.value - free1.value == 2 * g, "read", list(back)[:2], "type", kind.value)
print("cudaFree", cudart.cudaFree(ctypes.c_void_p(base.value)))
print("map twice", cu.cuMemMap(base, g, 0, handles[0], 0))
too_much = ctypes.c_size_t((total.value // g + 1) * g)
print("too much", cu.cuMemCreate(ctypes.byref(ctypes.c_uint64()), too_much, ctypes.byref(prop), 0))
print("export", cu.cuMemExportToShareableHandle(ctypes.byref(ctypes.c_int()), handles[0], 1, 0))
ok(cu.cuMemUnmap(base, 2 * g), "unmap")
for h in handles: ok(cu.cuMemRelease(h), "release")
ok(cu.cuMemAddressFree(base, 4 * g), "free")
free2 = ctypes.c_size_t(); ok(cudart.cudaMemGetInfo(ctypes.byref(free2), ctypes.byref(total)), "info")
print("given back", free2.value == free0.value)
""")
        self.assertIn("granularity 2097152 counted True read [7, 7] type 2", out)  # CU_MEMORYTYPE_DEVICE
        self.assertIn("cudaFree 17", out)  # not cudaMalloc's: cudaErrorInvalidDevicePointer
        self.assertIn("map twice 1", out)
        self.assertIn("too much 2", out)  # CUDA_ERROR_OUT_OF_MEMORY
        self.assertIn("export 801", out)  # CUDA_ERROR_NOT_SUPPORTED
        self.assertIn("given back True", out)
        r = run("e = ctypes.c_char_p(); cu.cuGetErrorString(801, ctypes.byref(e)); print(e.value.decode())")
        self.assertIn("operation not supported", r.stdout)
        # The attributes say what is simulated: virtual memory; not shareable handles or multicast.
        out = self.check("""
ok(cu.cuInit(0), "cuInit")
values = []
for attribute in (102, 103, 128, 132):
    v = ctypes.c_int(7); ok(cu.cuDeviceGetAttribute(ctypes.byref(v), attribute, 0), f"attribute {attribute}")
    values.append(v.value)
print(values)
""")
        self.assertIn("[1, 0, 0, 0]", out)


class FakeNvml(unittest.TestCase):
    """libnvidia-ml.so.1 names the runtime's devices: count, names, UUIDs, PCI bus ids, memory."""

    def test_devices_are_the_runtimes(self):
        r = run(f"""
nvml = ctypes.CDLL({str(built("libnvidia-ml.so.1"))!r})
ok(nvml.nvmlInit_v2(), "nvmlInit_v2")
n = ctypes.c_uint(); ok(nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)), "count")
print("count", n.value)
for i in range(n.value):
    dev = ctypes.c_void_p(); ok(nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(dev)), "handle")
    name = ctypes.create_string_buffer(96); ok(nvml.nvmlDeviceGetName(dev, name, 96), "name")
    uuid = ctypes.create_string_buffer(96); ok(nvml.nvmlDeviceGetUUID(dev, uuid, 96), "uuid")
    raw = (ctypes.c_ubyte * 16)(); ok(cu.cuDeviceGetUuid_v2(raw, i), "cuDeviceGetUuid")
    # A bus id as CUDA spells it finds the same device.
    bus = ctypes.create_string_buffer(32); ok(cudart.cudaDeviceGetPCIBusId(bus, 32, i), "bus id")
    by_bus = ctypes.c_void_p(); ok(nvml.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(by_bus)), "by bus id")
    memory = (ctypes.c_ulonglong * 3)(); ok(nvml.nvmlDeviceGetMemoryInfo(dev, memory), "memory")
    total = ctypes.c_size_t(); ok(cu.cuDeviceTotalMem_v2(ctypes.byref(total), i), "cuDeviceTotalMem")
    print(i, name.value.decode(), uuid.value.decode()[4:].replace("-", "") == bytes(raw).hex(),
          by_bus.value == dev.value, memory[0] == total.value, memory[0] == memory[1] + memory[2])
processes = ctypes.c_uint(5); ok(nvml.nvmlDeviceGetComputeRunningProcesses(dev, ctypes.byref(processes), None), "procs")
fabric = (ctypes.c_ubyte * 36)(); fabric[28] = 9
ok(nvml.nvmlDeviceGetGpuFabricInfoV(dev, fabric), "fabric")
print("processes", processes.value, "fabric state", fabric[28])
bad = ctypes.c_void_p(); print("unknown bus", nvml.nvmlDeviceGetHandleByPciBusId_v2(b"0000:ff:1f.0", ctypes.byref(bad)))
state = ctypes.c_int(); print("nvlink", nvml.nvmlDeviceGetNvLinkState(dev, 0, ctypes.byref(state)))
# Once the process uses the device it is the one running there, with what the device has in use
# (the context at least): asked with no room first, as NVML's callers do.
ok(cudart.cudaSetDevice(n.value - 1), "cudaSetDevice")
count = ctypes.c_uint(0); short = nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(count), None)
infos = (ctypes.c_ulonglong * 6)(); ok(nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, ctypes.byref(count), infos), "procs v3")
ok(nvml.nvmlDeviceGetMemoryInfo(dev, memory), "memory")
print("running", short, count.value, infos[0] & 0xffffffff == os.getpid(), infos[1] == memory[2] > 0)
""", FAKEGPU_NODE="1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("count 2", r.stdout)
        self.assertEqual(r.stdout.count("NVIDIA H100 80GB HBM3 True True True True"), 2, r.stdout)
        self.assertIn("processes 0 fabric state 0", r.stdout)  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
        self.assertIn("unknown bus 6", r.stdout)  # NVML_ERROR_NOT_FOUND
        self.assertIn("nvlink 3", r.stdout)  # NVML_ERROR_NOT_SUPPORTED, and one line naming the call
        self.assertIn("running 7 1 True True", r.stdout)  # NVML_ERROR_INSUFFICIENT_SIZE, then this process
        self.assertIn("fakegpu: nvmlDeviceGetNvLinkState: not simulated by fakegpu's NVML", r.stderr)


if __name__ == "__main__":
    unittest.main()

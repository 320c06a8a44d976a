"""Which mode pairs can run on this machine. simulate/simulate needs nothing. The others run on
a real GPU: hybrid computes on it, passthrough hands it the whole program, and the proxy and
passthrough dist modes record around NVIDIA's libnccl.so.2 (FAKEGPU_REAL_NCCL_PATH). Of those,
hybrid/simulate is implemented."""

import ctypes
import os

from .paths import SetupError


def local_gpus():
    """(number of CUDA devices the driver reports, why there are none)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, "no NVIDIA driver (libcuda.so.1 cannot be loaded)"
    try:
        init, get_count = cuda.cuInit, cuda.cuDeviceGetCount
    except AttributeError as e:
        return 0, f"libcuda.so.1 is not an NVIDIA driver ({e})"
    rc = init(0)
    if rc != 0:
        return 0, f"the NVIDIA driver is there but cuInit failed with CUresult {rc}"
    count = ctypes.c_int(0)
    if get_count(ctypes.byref(count)) != 0 or count.value == 0:
        return 0, "the NVIDIA driver reports no device"
    return count.value, ""


def loaded_library(soname: str):
    """The file this process loaded for `soname` (NVIDIA's driver or NVML), loading it if it can;
    None when it cannot."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return None
    stem = soname.split(".so")[0] + ".so"
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(stem):
                return fields[5].strip()
    return None


def check_modes(mode: str, dist_mode: str) -> int:
    """Returns how many GPUs the pair computes on (0 for simulate/simulate) when it can run
    here; otherwise raises SetupError saying what is missing."""
    if mode == "simulate" and dist_mode == "simulate":
        return 0
    pair = f"--mode {mode} --dist-mode {dist_mode}"
    count, why = local_gpus()
    if count == 0:
        raise SetupError(f"{pair} runs on a real GPU, and this machine has none: {why}. "
                         "--mode simulate --dist-mode simulate (the default) needs no GPU")
    if mode == "hybrid" and dist_mode == "simulate":
        return count
    if dist_mode in ("proxy", "passthrough"):
        real = os.environ.get("FAKEGPU_REAL_NCCL_PATH", "")
        if not real or not os.path.isfile(real):
            raise SetupError(f"--dist-mode {dist_mode} records around NVIDIA's libnccl.so.2: set "
                             "FAKEGPU_REAL_NCCL_PATH to that file" + (f" ({real} does not exist)" if real else ""))
    raise SetupError(f"{pair}: this machine has {count} GPU(s), but fakegpu does not implement this mode "
                     "yet; --mode simulate and --mode hybrid run with --dist-mode simulate")

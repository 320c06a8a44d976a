"""Run by every Python process that fgpu starts in simulate mode, and in hybrid mode with
--measure-kernels (fgpu puts this folder first on PYTHONPATH). PyTorch's CUDA build finds
NVIDIA's libraries through RPATH, which LD_LIBRARY_PATH cannot override. The dynamic loader,
though, satisfies a library's dependency with an already loaded library of the same soname. So
fakegpu's CUDA runtime, driver and cuBLAS are loaded here, globally, before anything imports
torch; torch then runs on them unchanged. Once `import torch` has finished, fakegpu's PyTorch
hook (fakegpu.torch_hook) installs itself; in hybrid mode only the operators' timing does
(torch_hook/kernel_timing.py). A sitecustomize of the user's own, later on the path, still runs
afterwards."""

import ctypes
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


def _torch_cuda_major():
    """The CUDA major version the installed torch was built for: None for a CPU build, 0 when
    torch is not installed. Read from torch/version.py without importing torch."""
    spec = importlib.machinery.PathFinder.find_spec("torch", sys.path)
    if spec is None or not spec.submodule_search_locations:
        return 0
    version_file = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(version_file) as f:
            for line in f:
                if line.startswith("cuda"):
                    value = line.split("=", 1)[1].split("#")[0].strip().strip("'\"")
                    return int(value.split(".")[0]) if value and value != "None" else None
    except (OSError, ValueError):
        pass
    return None


def _preload():
    """Loads fakegpu's CUDA libraries; False (having said why, where it matters) when it did not."""
    build = os.environ.get("FAKEGPU_BUILD_DIR", "")
    major = _torch_cuda_major()
    if major == 0:
        return False  # no torch: a Python rank that loads CUDA itself picks its own runtime
    if major is None:
        sys.stderr.write("fakegpu: the installed torch is a CPU build; fakegpu runs PyTorch's CUDA build "
                         "(pip install torch==2.14.1 gives the CUDA 13 build)\n")
        return False
    if major not in (12, 13):
        sys.stderr.write(f"fakegpu: the installed torch is built for CUDA {major}; fakegpu provides CUDA 12 and 13 "
                         "runtimes (pip install torch==2.14.1 gives the CUDA 13 build)\n")
        return False
    # The runtime first: the driver and cuBLAS find it among the process's symbols.
    handles = []
    for name in (f"libcudart.so.{major}", "libcuda.so.1", "libnvidia-ml.so.1", f"libcublasLt.so.{major}",
                 f"libcublas.so.{major}"):
        path = os.path.join(build, name)
        try:
            handles.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
        except OSError as e:
            sys.stderr.write(f"fakegpu: cannot load {path} ({e}); build fakegpu first\n")
            return False
    _fakegpu_package()
    from fakegpu.torch_hook import bridge

    bridge.use_runtime(handles[0])
    return True


def _fakegpu_package():
    """The fakegpu package this file belongs to, imported as `fakegpu`: the rank's Python may not
    have it installed, and where it has, the hook must come from the build that loads its libraries."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    loaded = sys.modules.get("fakegpu")
    if loaded is not None and os.path.dirname(os.path.abspath(loaded.__file__)) == package:
        return
    spec = importlib.util.spec_from_file_location("fakegpu", os.path.join(package, "__init__.py"),
                                                  submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["fakegpu"] = module
    spec.loader.exec_module(module)


def _install_after_torch_import(simulate):
    """Arranges for the hook's install() (simulate mode) and the kernel timing of fgpu
    --measure-kernels (when asked for) to run right after `import torch` completes."""

    class AfterTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                if simulate:
                    import fakegpu.torch_hook

                    fakegpu.torch_hook.install()
                from fakegpu.torch_hook import kernel_timing

                kernel_timing.install()

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterTorch())


def _chain_user_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("FAKEGPU_MODE", "simulate") == "simulate":
    if _preload():
        _install_after_torch_import(simulate=True)
elif os.environ.get("FAKEGPU_MEASURE_KERNELS"):  # hybrid mode, timing operators on the GPU
    _fakegpu_package()
    _install_after_torch_import(simulate=False)
_chain_user_sitecustomize()

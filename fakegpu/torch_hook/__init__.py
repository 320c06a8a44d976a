"""fakegpu's PyTorch hook: PyTorch's CUDA build runs unchanged on fakegpu's CUDA libraries, its
operators compute real results on the CPU and are priced by the runtime's kernel model. fgpu's
sitecustomize (python_hook/) loads the libraries before torch and calls install() once `import
torch` has finished; every module here but bridge.py imports torch.

- bridge.py: the runtime's table, mirrored with ctypes (the one binding to fakegpu's C libraries).
- dispatch.py: a kernel for PyTorch's CUDA dispatch key for every ATen operator that computes.
- kernels.py, stand_ins.py: what each such kernel does: run the operator on CPU (or meta)
  tensors over the same bytes, once its stream got there, and price it.
- cost.py: an operator's facts for the kernel model (kinds of kernels, FLOPs, bytes, shapes).
- operators/: operators no CPU kernel computes as CUDA does (fused attention, flex attention,
  sync batch norm, a few fallbacks).
- values.py (shapes mode's computed control values), random_draws.py (CUDA generators),
  capture.py (CUDA graphs), memory.py (library workspaces, peaks, out of memory), host.py
  (the modeled host clock's events).
- steps.py, representative.py, compile_backend.py: patches of torch's Python (step marks and the
  report's flush, representative runs, torch.compile's backend); fusion.py: a compiled graph's
  operators grouped into inductor's fused kernels, each priced once."""

import os

_installed = False


def install():
    """Installs the hook in this process, once; torch is imported. FAKEGPU_TORCH_COMPUTE=1 computes
    on the CPU, shapes runs operators on the meta device (modeled time, no values), 0 leaves
    PyTorch's CUDA kernels in place (they then do not run: only copies, NCCL and cuBLAS compute)."""
    global _installed
    if _installed:
        return
    _installed = True
    mode = os.environ.get("FAKEGPU_TORCH_COMPUTE", "1")
    if mode not in ("0", "1", "shapes"):
        raise RuntimeError(f"fakegpu: FAKEGPU_TORCH_COMPUTE={mode!r}: expected 1 (compute on the CPU), "
                           "shapes (modeled time only) or 0 (PyTorch's kernels, which do not run)")
    if mode == "shapes":
        # No values are computed, so collectives larger than the metadata programs exchange (DDP's
        # parameter check) would only move, and make the coordinator touch, bytes nobody wrote.
        os.environ.setdefault("FAKEGPU_PAYLOAD", "small")
    from fakegpu.torch_hook import compile_backend, dispatch, representative, steps

    if mode != "0":
        dispatch.install(shapes_only=mode == "shapes")
    steps.install()  # also marks steps when FAKEGPU_TORCH_COMPUTE=0, which computes nothing
    representative.install()
    compile_backend.install()

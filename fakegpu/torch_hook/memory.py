"""PyTorch's use of GPU memory where the hook stands in for its CUDA kernels, and what fakegpu's
report says about it.

- cuBLAS workspaces. On a GPU, PyTorch gives cuBLAS (and cuBLASLt, which shares it) a workspace
  from its caching allocator the first time each thread runs a product on a stream, and keeps it:
  CUBLAS_WORKSPACE_CONFIG's ":SIZE_KiB:COUNT" pairs summed, else 32 MiB on compute capability 9.x,
  10.x and 12.x and 8 MiB + 128 KiB elsewhere. The hook's products never reach cuBLAS, so it makes
  the same allocation at the same moment: memory_allocated and memory_reserved match a GPU's.
- cuDNN workspaces. PyTorch's cuDNN convolutions take each pass's workspace from its caching
  allocator and free it when the pass is done; cuDNN's size for the engine it picks is the
  kernel model's (planner/kernel_model.cpp: the NCHW tensors it copies into NHWC). cuDNN is off
  here, so the hook takes and frees the same sizes once the operator's results are allocated:
  the allocator's segments, and so memory_reserved, grow as on a GPU.
- PyTorch's own peaks (max_memory_allocated and max_memory_reserved) go to the runtime at exit,
  for the report beside what the runtime counted.
- Out of memory: PyTorch raises torch.OutOfMemoryError with its own message (the runtime refuses
  the cudaMalloc, and answers cudaMemGetInfo and NVML as a GPU would). Its allocator's observer
  hands the request and the largest live blocks to the runtime, and the figures go to the
  coordinator at once, before the error unwinds the program.
"""

import os
import sys
import threading

import torch

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import cost

_bridge = None
_workspaces = {}  # (thread, stream) -> the tensor that holds the workspace
_LARGE_WORKSPACE_MAJORS = (9, 10, 12)


def install():
    global _bridge
    _bridge = B.find()
    # The observer attaches to the allocator of each device, which exists once CUDA is set up.
    torch.cuda._lazy_call(_attach_observer)


def workspace_bytes(config, capability):
    """cuBLAS's workspace as PyTorch sizes it; ValueError for a malformed config."""
    if config:
        parts = config.split(":")
        if parts[0] != "" or len(parts) % 2 == 0:
            raise ValueError(f"CUBLAS_WORKSPACE_CONFIG={config!r}: expected :SIZE:COUNT pairs such as :4096:8")
        return sum(int(size) * int(count) * 1024 for size, count in zip(parts[1::2], parts[2::2]))
    major = capability[0]
    return 4096 * 8 * 1024 if major in _LARGE_WORKSPACE_MAJORS else (4096 * 2 + 16 * 8) * 1024


def before_product(stream):
    """A product is about to run on the stream from this thread: its workspace, made once."""
    key = (threading.get_ident(), stream)
    if key in _workspaces:
        return
    device = torch.cuda.current_device()
    size = workspace_bytes(os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""), torch.cuda.get_device_capability(device))
    _workspaces[key] = torch.empty(size, dtype=torch.uint8, device=device) if size else None


def library_workspaces(result, nbytes, calls):
    """A library's scratch memory for an operator whose results are `result`: `calls` times,
    `nbytes` taken from the allocator on the results' device and freed."""
    device = next((t.device for t in cost.tree_leaves(result) if isinstance(t, torch.Tensor) and t.is_cuda), None)
    if device is None:
        return
    for _ in range(calls):
        torch.empty(nbytes, dtype=torch.uint8, device=device)  # freed at once, kept in the cache


def report_peaks():
    """PyTorch's peaks on each device it set up, to the runtime."""
    if _bridge is None or not torch.cuda.is_initialized():
        return
    for device in range(torch.cuda.device_count()):
        reserved = torch.cuda.max_memory_reserved(device)
        if reserved:
            _bridge.torch_memory(device, torch.cuda.max_memory_allocated(device), reserved)


def _attach_observer():
    torch._C._cuda_attach_out_of_memory_observer(_out_of_memory)


def _out_of_memory(device, requested, device_total, device_free):
    try:
        blocks = [b["size"] for segment in torch.cuda.memory._snapshot()["segments"] if segment["device"] == device
                  for b in segment["blocks"] if b["state"] == "active_allocated"]
        blocks.sort(reverse=True)
        _bridge.torch_out_of_memory(device, requested, blocks[:B.LARGEST_BLOCKS])
        report_peaks()
        _bridge.flush_to_coordinator()  # sends nothing without fakegpu's NCCL library
    except Exception as e:  # the user's error matters more than the report's
        sys.stderr.write(f"fakegpu: could not record the out-of-memory error for the report: {e}\n")

"""CUDA graphs of PyTorch operators on fake GPUs. An operator computes on the CPU when it is
called, once its stream has reached it; under stream capture nothing may run yet, and waiting
for the stream would spoil the capture (as any synchronisation does in CUDA). So a captured
operator gets its results' device memory at capture time (their shapes from PyTorch's meta
kernels, the memory from the graph's pool) and puts its CPU work on the stream as a host
function, which becomes a node of the graph: every replay computes it again, in stream order,
on whatever the graph's input buffers then hold. Its modeled time is a node of the graph too."""

import ctypes
import sys
import traceback

_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CAPTURE_STATUS_ACTIVE = 1  # cudaStreamCaptureStatusActive

_runtime = None
_work = []  # host functions of captured operators: graphs may replay them for the process's life
_failures = []  # replays that failed, raised in the program by the next operator it calls


def install(runtime):
    global _runtime
    _runtime = runtime
    runtime.cudaStreamIsCapturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    runtime.cudaLaunchHostFunc.argtypes = [ctypes.c_void_p, _HOST_FN, ctypes.c_void_p]


def capturing(stream):
    status = ctypes.c_int(0)
    _runtime.cudaStreamIsCapturing(stream, ctypes.byref(status))
    return status.value == _CAPTURE_STATUS_ACTIVE


def raise_failed_replay():
    """A replay's CPU work runs on the runtime's thread, where an exception reaches nobody: the
    program gets it at its next operator, as CUDA reports a failed kernel at the next call."""
    if _failures:
        raise RuntimeError(_failures.pop(0))


def defer(stream, name, compute):
    """Puts compute() on the capturing stream as a host function that every replay runs."""

    def host_fn(_):
        try:
            compute()
        except BaseException:
            message = f"fakegpu: {name} failed in a CUDA graph replay:\n{traceback.format_exc()}"
            print(message, file=sys.stderr, flush=True)
            _failures.append(message)

    callback = _HOST_FN(host_fn)
    _work.append(callback)
    error = _runtime.cudaLaunchHostFunc(stream, callback, None)
    if error:
        raise RuntimeError(f"fakegpu: {name}: cudaLaunchHostFunc under stream capture failed (error {error})")

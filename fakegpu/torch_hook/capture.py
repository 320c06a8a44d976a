"""CUDA graphs of PyTorch operators on fake GPUs. An operator computes on the CPU when it is
called, once its stream has reached it; under stream capture nothing may run yet, and waiting
for the stream would spoil the capture (as any synchronisation does in CUDA). So a captured
operator gets its results' device memory at capture time (their shapes from PyTorch's meta
kernels, the memory from the graph's pool) and puts its CPU work on the stream as a host
function, which becomes a node of the graph: every replay computes it again, in stream order,
on whatever the graph's input buffers then hold. Its modeled time is a node of the graph too."""

import sys
import traceback

from fakegpu.torch_hook import bridge as B

_bridge = None
_work = []  # host functions of captured operators: graphs may replay them for the process's life
_failures = []  # replays that failed, raised in the program by the next operator it calls


def install():
    global _bridge
    _bridge = B.find()


def capturing(stream):
    return _bridge.stream_capturing(stream)


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

    callback = B.HOST_FN(host_fn)
    _work.append(callback)
    error = _bridge.launch_host_func(stream, callback)
    if error:
        raise RuntimeError(f"fakegpu: {name}: cudaLaunchHostFunc under stream capture failed (error {error})")

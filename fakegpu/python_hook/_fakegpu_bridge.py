"""The runtime's table for this hook (common/fake_torch_bridge.h and common/op_facts.h), mirrored
with ctypes: the one name looked up in fakegpu's CUDA runtime is fakegpu_torch_bridge, and every
call goes through the typed table it returns, refused unless its version and size are the ones
written here."""

import ctypes

VERSION = 4

# fakegpu_op_kind
(MEMORY, GEMM, CONV, ATTENTION, ATTENTION_BACKWARD, REDUCTION, NORM, NORM_BACKWARD, SOFTMAX, SOFTMAX_BACKWARD,
 FOREACH, EMBEDDING_BACKWARD, BATCH_NORM, BATCH_NORM_BACKWARD, HOST_COPY, NO_KERNEL, POOL) = range(17)
# fakegpu_op_math
MEMORY_BOUND, FP64, FP32, TF32, HALF, FP8 = range(6)
# flags
IN_BACKWARD, CAUSAL, CHANNELS_LAST, RECORDS_GRAD = 1, 2, 4, 8
# fakegpu_host_event
BACKWARD_CALL, MODULE_CALL, OPTIMIZER_STEP = range(3)
LARGEST_BLOCKS = 8  # FAKEGPU_MEMORY_LARGEST_BLOCKS
# fakegpu_op_bound
BOUND_NAMES = ("memory", "compute", "launch")


class OpFacts(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("math", ctypes.c_int32), ("flags", ctypes.c_uint32),
                ("element_bytes", ctypes.c_int32), ("row_alignment", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("flops", ctypes.c_double), ("bytes", ctypes.c_double), ("dims", ctypes.c_int64 * 8)]


class OpCost(ctypes.Structure):
    _fields_ = [("gpu_us", ctypes.c_double), ("host_us", ctypes.c_double), ("kernels", ctypes.c_int32),
                ("bound", ctypes.c_int32), ("workspace_bytes", ctypes.c_double), ("workspace_calls", ctypes.c_int32),
                ("reserved", ctypes.c_int32)]


_STATUS = ctypes.c_int


class _Table(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("drain_stream", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p)),
                ("record_op", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(OpFacts),
                                               ctypes.POINTER(OpCost))),
                ("host_event", ctypes.CFUNCTYPE(_STATUS, ctypes.c_int, ctypes.c_int64)),
                ("matmul_share", ctypes.CFUNCTYPE(_STATUS, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double))),
                ("mark_step", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p, ctypes.c_int)),
                ("torch_memory", ctypes.CFUNCTYPE(_STATUS, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64)),
                ("torch_out_of_memory", ctypes.CFUNCTYPE(_STATUS, ctypes.c_int, ctypes.c_uint64,
                                                         ctypes.POINTER(ctypes.c_uint64), ctypes.c_int))]


def facts(kind, math=MEMORY_BOUND, flops=0.0, nbytes=0.0, dims=(), flags=0, element_bytes=0, row_alignment=16):
    """An OpFacts; dims are up to 8 counts whose meaning the kind gives (op_facts.h)."""
    f = OpFacts(kind, math, flags, element_bytes, row_alignment, 0, float(flops), float(nbytes))
    for i, d in enumerate(dims):
        f.dims[i] = int(d)
    return f


class Bridge:
    """fakegpu's CUDA runtime, as this hook calls it."""

    def __init__(self, table):
        self._t = table
        self._names = {}  # operator name -> its bytes, made once

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"fakegpu: the CUDA runtime refused {what} (cudaError_t {status})")

    def drain_stream(self, stream):
        self._check(self._t.drain_stream(stream), "draining a stream")

    def record(self, stream, op, name):
        """Queues the operator's modeled time on the stream and counts it under `name` in the
        rank's table of operators; returns its OpCost."""
        key = self._names.get(name)
        if key is None:
            key = self._names[name] = name.encode()
        cost = OpCost()
        self._check(self._t.record_op(stream, key, ctypes.byref(op), ctypes.byref(cost)), f"the cost of {name}")
        return cost

    def host_event(self, event, count=0):
        self._check(self._t.host_event(event, count), "a host event")

    def matmul_share(self, math, alignment):
        share = ctypes.c_double(1.0)
        self._check(self._t.matmul_share(math, alignment, ctypes.byref(share)), "a product's share")
        return share.value

    def mark_step(self, stream, begin):
        self._check(self._t.mark_step(stream, int(begin)), "a step mark")

    def torch_memory(self, device, peak_allocated, peak_reserved):
        self._check(self._t.torch_memory(device, peak_allocated, peak_reserved), "PyTorch's memory peaks")

    def torch_out_of_memory(self, device, nbytes, largest):
        largest = list(largest)[:LARGEST_BLOCKS]
        blocks = (ctypes.c_uint64 * max(1, len(largest)))(*largest)
        self._check(self._t.torch_out_of_memory(device, nbytes, blocks, len(largest)), "an out-of-memory error")


def coordinator_flush():
    """fakegpu's NCCL library's call that sends what the runtime logged so far (activity, operator
    totals, memory) to the coordinator, connecting first if the process has not; None when fakegpu's
    NCCL library is not loaded."""
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "fakegpu_nccl_flush_activity"):
        return None
    flush = lib.fakegpu_nccl_flush_activity
    flush.argtypes, flush.restype = [], None
    return flush


def find():
    """The bridge of the fakegpu runtime loaded in this process; None when there is none. A runtime
    of another version is an error: the hook and the runtime come from one build."""
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "fakegpu_torch_bridge"):
        return None
    lib.fakegpu_torch_bridge.restype = ctypes.POINTER(_Table)
    lib.fakegpu_torch_bridge.argtypes = [ctypes.c_uint]
    table = lib.fakegpu_torch_bridge(VERSION)
    if not table:
        raise RuntimeError(f"fakegpu: the loaded CUDA runtime does not offer version {VERSION} of the PyTorch "
                           "hook's table: the hook and the runtime come from different builds")
    if table.contents.version != VERSION or table.contents.size != ctypes.sizeof(_Table):
        raise RuntimeError(f"fakegpu: the CUDA runtime's table for the PyTorch hook has version "
                           f"{table.contents.version} and {table.contents.size} bytes; this hook expects version "
                           f"{VERSION} and {ctypes.sizeof(_Table)} bytes")
    return Bridge(table.contents)

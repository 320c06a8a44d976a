"""The runtime's table for this hook (common/bridge/fake_torch_bridge.h and common/bridge/op_facts.h), mirrored
with ctypes: the one binding between the hook and fakegpu's C libraries. The table is asked of the
runtime sitecustomize loaded (its handle, never a search of the process's symbols), and every call
goes through the typed table it returns, refused unless its version and size are the ones written
here. test/integration/test_bridge_mirror.py checks this mirror against the headers. Imported before torch is."""

import ctypes

VERSION = 9

# fakegpu_op_kind
(MEMORY, GEMM, CONV, ATTENTION, ATTENTION_BACKWARD, REDUCTION, NORM, NORM_BACKWARD, SOFTMAX, SOFTMAX_BACKWARD,
 FOREACH, EMBEDDING_BACKWARD, BATCH_NORM, BATCH_NORM_BACKWARD, HOST_COPY, NO_KERNEL, POOL) = range(17)
# fakegpu_op_math
MEMORY_BOUND, FP64, FP32, TF32, HALF, FP8 = range(6)
# flags
IN_BACKWARD, CAUSAL, CHANNELS_LAST, RECORDS_GRAD, FLEX = 1, 2, 4, 8, 16
SHARE_UNITS = 1000000  # FAKEGPU_OP_SHARE_UNITS
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
HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # a host function's signature, as cudaHostFn_t


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
                                                         ctypes.POINTER(ctypes.c_uint64), ctypes.c_int)),
                ("stream_capturing", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))),
                ("launch_host_func", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p, HOST_FN, ctypes.c_void_p)),
                ("coordinator_linked", ctypes.CFUNCTYPE(_STATUS, ctypes.POINTER(ctypes.c_int))),
                ("flush_to_coordinator", ctypes.CFUNCTYPE(_STATUS)),
                ("describe_group", ctypes.CFUNCTYPE(_STATUS, ctypes.c_char_p, ctypes.c_int,
                                                    ctypes.POINTER(ctypes.c_int32))),
                ("record_measured_op", ctypes.CFUNCTYPE(_STATUS, ctypes.c_void_p, ctypes.c_char_p,
                                                        ctypes.POINTER(OpFacts), ctypes.c_double, ctypes.c_char_p,
                                                        ctypes.POINTER(OpCost)))]


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

    def record_measured(self, stream, op, name, measured_us, measured_on):
        """As record, for an operator whose kernels took measured_us on a GPU of the profile named
        measured_on (None: the current device's): the runtime scales that time to the current device."""
        key = self._names.get(name)
        if key is None:
            key = self._names[name] = name.encode()
        cost = OpCost()
        on = measured_on.encode() if measured_on else None
        self._check(self._t.record_measured_op(stream, key, ctypes.byref(op), measured_us, on, ctypes.byref(cost)),
                    f"the measured cost of {name} (on {measured_on})")
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

    def stream_capturing(self, stream):
        """Whether the stream is capturing a CUDA graph."""
        capturing = ctypes.c_int(0)
        self._check(self._t.stream_capturing(stream, ctypes.byref(capturing)), "a stream's capture status")
        return bool(capturing.value)

    def launch_host_func(self, stream, callback):
        """Queues callback (a HOST_FN the caller keeps alive) on the stream; returns the cudaError_t."""
        return self._t.launch_host_func(stream, callback, None)

    def coordinator_linked(self):
        """Whether fakegpu's NCCL library, which sends the runtime's figures to the coordinator, is loaded."""
        linked = ctypes.c_int(0)
        self._check(self._t.coordinator_linked(ctypes.byref(linked)), "whether the coordinator is reachable")
        return bool(linked.value)

    def flush_to_coordinator(self):
        """Sends what the runtime logged so far (activity, operator totals, memory) to the
        coordinator, connecting first if the process has not."""
        self._check(self._t.flush_to_coordinator(), "a flush to the coordinator")

    def describe_group(self, name, ranks):
        """Names a process group and its global ranks to the coordinator (representative runs);
        returns the cudaError_t. fakegpu's NCCL library says itself when it could not send it."""
        members = (ctypes.c_int32 * max(1, len(ranks)))(*ranks)
        return self._t.describe_group(name.encode(), len(ranks), members)


_runtime = None  # the ctypes handle of fakegpu's CUDA runtime, as sitecustomize loaded it
_bridge = None


def use_runtime(handle):
    """Called by sitecustomize with the handle of the fakegpu CUDA runtime it loaded."""
    global _runtime, _bridge
    _runtime, _bridge = handle, None


def find():
    """The bridge of the fakegpu runtime loaded in this process; None when there is none. A runtime
    of another version is an error: the hook and the runtime come from one build."""
    global _bridge
    if _bridge is not None or _runtime is None:
        return _bridge
    if not hasattr(_runtime, "fakegpu_torch_bridge"):
        return None  # NVIDIA's runtime
    _runtime.fakegpu_torch_bridge.restype = ctypes.POINTER(_Table)
    _runtime.fakegpu_torch_bridge.argtypes = [ctypes.c_uint]
    table = _runtime.fakegpu_torch_bridge(VERSION)
    if not table:
        raise RuntimeError(f"fakegpu: the loaded CUDA runtime does not offer version {VERSION} of the PyTorch "
                           "hook's table: the hook and the runtime come from different builds")
    if table.contents.version != VERSION or table.contents.size != ctypes.sizeof(_Table):
        raise RuntimeError(f"fakegpu: the CUDA runtime's table for the PyTorch hook has version "
                           f"{table.contents.version} and {table.contents.size} bytes; this hook expects version "
                           f"{VERSION} and {ctypes.sizeof(_Table)} bytes")
    _bridge = Bridge(table.contents)
    return _bridge

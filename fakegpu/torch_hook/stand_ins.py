"""Stand-ins for CUDA tensors, for one operator call. Fake device memory is host memory, so a CPU
tensor over the same bytes (CpuView) lets PyTorch's CPU kernel compute what the CUDA kernel would;
a meta tensor of the same shape (MetaView) lets the meta kernel give the result shapes alone
(shapes mode). Results come back as CUDA tensors: an input the operator wrote is that tensor, a new
result gets new device memory."""

import ctypes

import torch


# Operator arguments and results are tensors, scalars, and lists, tuples and dicts of them: a
# plain walk over those is several times cheaper than torch's general pytree, and runs per operator.
def tree_map(fn, x):
    if isinstance(x, (list, tuple)):
        return type(x)(tree_map(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: tree_map(fn, v) for k, v in x.items()}
    return fn(x)


def cpu_over(address, nbytes, dtype, offset, size, stride):
    """A CPU tensor over `nbytes` of device memory at `address`, laid out as given (a fresh one
    where there are no bytes)."""
    if not nbytes:
        return torch.empty_strided(size, stride, dtype=dtype)
    raw = torch.frombuffer((ctypes.c_char * nbytes).from_address(address), dtype=torch.uint8)
    return torch.empty(0, dtype=dtype).set_(raw.untyped_storage(), offset, size, stride)


class CpuView:
    """CPU tensors over the bytes of CUDA tensors, for one operator call."""

    def __init__(self):
        self.originals = {}  # id(cpu alias) -> (cuda tensor, its storage address, the alias itself)
        self.device = None

    def alias(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            if isinstance(t, torch.Generator) and t.device.type == "cuda":
                return None  # the CPU kernel draws from the CPU generator instead
            if isinstance(t, torch.device) and t.type == "cuda":
                self.device = self.device or t
                return torch.device("cpu")
            return t
        self.device = self.device or t.device
        storage = t.untyped_storage()
        address = storage.data_ptr()
        cpu = cpu_over(address, storage.nbytes(), t.dtype, t.storage_offset(), t.size(), t.stride())
        self.originals[id(cpu)] = (t, address, cpu)
        return cpu

    def result(self, r):
        """A CPU result as the CUDA operator would have returned it: an input the operator wrote
        (in place, or an out= argument) is returned as that CUDA tensor; a new tensor is copied to
        new device memory."""
        if not isinstance(r, torch.Tensor):
            return r
        known = self.originals.get(id(r))
        if known is not None:
            cuda, address, _ = known
            if r.untyped_storage().data_ptr() != address:  # the CPU kernel resized an out= tensor
                cuda.resize_(r.size())
                copy_into(cuda, r)
            return cuda
        return to_device(r, self.device)


def copy_into(cuda, cpu):
    cpu = cpu.contiguous()
    if cuda.is_contiguous() and cpu.numel():
        ctypes.memmove(cuda.data_ptr(), cpu.data_ptr(), cpu.numel() * cpu.element_size())
    elif cpu.numel():
        CpuView().alias(cuda).copy_(cpu)


def _dense(t):
    """Whether t's elements fill its span exactly once (contiguous in some dimension order), so
    that its bytes can be copied as one block with its strides kept."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.size(), t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def to_device(cpu, device):
    if not _dense(cpu):
        cpu = cpu.contiguous()
    out = torch.empty_strided(cpu.size(), cpu.stride(), dtype=cpu.dtype, device=device)
    if cpu.numel():
        ctypes.memmove(out.data_ptr(), cpu.data_ptr(), cpu.numel() * cpu.element_size())
    return out


class MetaView(CpuView):
    """Shape-only stand-ins for CUDA tensors (FAKEGPU_TORCH_COMPUTE=shapes): the operator runs on
    the meta device, which computes result shapes and nothing else, and new results get device
    memory that nobody writes."""

    def alias(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            return super().alias(t)
        self.device = self.device or t.device
        meta = torch.empty(0, dtype=t.dtype, device="meta").as_strided(t.size(), t.stride(), t.storage_offset())
        self.originals[id(meta)] = (t, None, meta)
        return meta

    def result(self, r):
        if not isinstance(r, torch.Tensor):
            return r
        known = self.originals.get(id(r))
        if known is not None:
            cuda = known[0]
            if cuda.size() != r.size():  # an out= tensor the operator resized
                cuda.resize_(r.size())
            return cuda
        return torch.empty_strided(r.size(), r.stride(), dtype=r.dtype, device=self.device)


class Frozen:
    """Where a CUDA tensor's elements were in device memory when a CUDA graph captured an
    operator. A replay reads and writes there, as the graph's kernels would with the addresses
    baked into them, whatever the tensor object holds by then: FSDP2 frees its parameters'
    storage after each pass and allocates it again for the next."""

    __slots__ = ("address", "nbytes", "dtype", "offset", "size", "stride", "device")

    def __init__(self, t):
        storage = t.untyped_storage()
        self.address, self.nbytes, self.dtype = storage.data_ptr(), storage.nbytes(), t.dtype
        self.offset, self.size, self.stride, self.device = t.storage_offset(), t.size(), t.stride(), t.device

    def cpu(self):
        return cpu_over(self.address, self.nbytes, self.dtype, self.offset, self.size, self.stride)


def freeze(x):
    return Frozen(x) if isinstance(x, torch.Tensor) and x.device.type == "cuda" else x


class FrozenView(CpuView):
    """CPU tensors over the device memory of Frozen tensors, for one replay of an operator."""

    def alias(self, t):
        if not isinstance(t, Frozen):
            return super().alias(t)
        self.device = self.device or t.device
        cpu = t.cpu()
        self.originals[id(cpu)] = (t, t.address, cpu)
        return cpu

"""A minimal ctypes binding of NCCL for fakegpu's Python checks, and a helper that runs a
function as N rank processes against a fresh coordinator.

The checks call libnccl.so.2 from Python processes, the way a framework does, so they run
without torch or a GPU. Buffers are fake device memory from fakegpu's libcudart.
"""

import ctypes
import os
import pickle
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cluster_files import write_single_node_config  # noqa: E402
from fakegpu.coordinator import Coordinator  # noqa: E402
from fakegpu.paths import built  # noqa: E402

sys.path.insert(0, str(REPO / "test" / "integration"))
from rank_jobs import run_rank_processes  # noqa: E402

# ncclDataType_t values, with the matching ctypes element type.
DTYPES = {
    "int8": (0, ctypes.c_int8), "uint8": (1, ctypes.c_uint8), "int32": (2, ctypes.c_int32),
    "uint32": (3, ctypes.c_uint32), "int64": (4, ctypes.c_int64), "uint64": (5, ctypes.c_uint64),
    "float32": (7, ctypes.c_float), "float64": (8, ctypes.c_double),
}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}


class NcclError(RuntimeError):
    pass


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Nccl:
    def __init__(self):
        self.cuda = ctypes.CDLL(str(built("libcudart.so.13")), mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(str(built("libnccl.so.2")), mode=ctypes.RTLD_GLOBAL)
        self.lib.ncclGetErrorString.restype = ctypes.c_char_p
        self.lib.ncclGetLastError.restype = ctypes.c_char_p

    def check(self, result, what):
        if result != 0:
            raise NcclError(f"{what}: {self.lib.ncclGetErrorString(result).decode()}: "
                            f"{self.lib.ncclGetLastError(None).decode()}")

    def unique_id(self) -> bytes:
        uid = UniqueId()
        self.check(self.lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        return ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid))

    def init_rank(self, nranks, uid: bytes, rank):
        comm = ctypes.c_void_p()
        packed = UniqueId()
        ctypes.memmove(ctypes.byref(packed), uid, len(uid))  # c_char arrays would stop at a NUL byte
        self.check(self.lib.ncclCommInitRank(ctypes.byref(comm), nranks, packed, rank), "ncclCommInitRank")
        return comm

    def split(self, comm, color, key):
        child = ctypes.c_void_p()
        self.check(self.lib.ncclCommSplit(comm, color, key, ctypes.byref(child), None), "ncclCommSplit")
        return child

    def destroy(self, comm):
        self.check(self.lib.ncclCommDestroy(comm), "ncclCommDestroy")

    def device_array(self, ctype, values):
        """Fake device memory holding values; returns (pointer, ctypes array view)."""
        ptr = ctypes.c_void_p()
        self.check(self.cuda.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(max(1, len(values)) * ctypes.sizeof(ctype))),
                   "cudaMalloc")
        view = (ctype * len(values)).from_address(ptr.value)
        view[:] = values
        return ptr, view

    def stream(self):
        """A new stream: NCCL calls on it are queued and their failures become the communicator's
        asynchronous error. Calls on the legacy stream (None) run at once and return their error."""
        stream = ctypes.c_void_p()
        if self.cuda.cudaStreamCreate(ctypes.byref(stream)) != 0:
            raise NcclError("cudaStreamCreate failed")
        return stream

    def synchronize(self, stream):
        if self.cuda.cudaStreamSynchronize(stream) != 0:
            raise NcclError("cudaStreamSynchronize failed")

    def all_reduce(self, send, recv, count, dtype, op, comm, stream=None):
        self.check(self.lib.ncclAllReduce(send, recv, ctypes.c_size_t(count), DTYPES[dtype][0], OPS[op], comm, stream),
                   "ncclAllReduce")

    def all_gather(self, send, recv, count, dtype, comm):
        self.check(self.lib.ncclAllGather(send, recv, ctypes.c_size_t(count), DTYPES[dtype][0], comm, None),
                   "ncclAllGather")

    def broadcast(self, send, recv, count, dtype, root, comm):
        self.check(self.lib.ncclBroadcast(send, recv, ctypes.c_size_t(count), DTYPES[dtype][0], root, comm, None),
                   "ncclBroadcast")

    def reduce_scatter(self, send, recv, recv_count, dtype, op, comm):
        self.check(self.lib.ncclReduceScatter(send, recv, ctypes.c_size_t(recv_count), DTYPES[dtype][0], OPS[op], comm,
                                              None), "ncclReduceScatter")

    def reduce(self, send, recv, count, dtype, op, root, comm):
        self.check(self.lib.ncclReduce(send, recv, ctypes.c_size_t(count), DTYPES[dtype][0], OPS[op], root, comm, None),
                   "ncclReduce")

    def async_error(self, comm) -> int:
        """The communicator's ncclResult_t as ncclCommGetAsyncError reports it (0: healthy)."""
        result = ctypes.c_int()
        self.check(self.lib.ncclCommGetAsyncError(comm, ctypes.byref(result)), "ncclCommGetAsyncError")
        return result.value

    def send(self, buf, count, dtype, peer, comm):
        self.check(self.lib.ncclSend(buf, ctypes.c_size_t(count), DTYPES[dtype][0], peer, comm, None), "ncclSend")

    def recv(self, buf, count, dtype, peer, comm):
        self.check(self.lib.ncclRecv(buf, ctypes.c_size_t(count), DTYPES[dtype][0], peer, comm, None), "ncclRecv")

    def group_start(self):
        self.check(self.lib.ncclGroupStart(), "ncclGroupStart")

    def group_end(self):
        self.check(self.lib.ncclGroupEnd(), "ncclGroupEnd")


def rank_preload() -> str:
    """LD_PRELOAD for Python ranks. They load the libraries themselves, with ctypes: nothing of
    ours to preload, only, in a sanitizer build, the sanitizer's runtime (test/CMakeLists.txt)."""
    return os.environ.get("FAKEGPU_SANITIZER_PRELOAD", "")


def run_ranks(script: str, world: int, timeout=120):
    """Runs `script --rank` as `world` processes against a new coordinator. Each process must
    call rank_main(); returns the list of results the rank functions returned."""
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-py-"))
    config = write_single_node_config(world, name=f"py-{world}")
    with Coordinator(config, "unix") as coord:
        results = run_rank_processes(sys.executable, [script, "--rank", tmp], coord, world, timeout=timeout,
                                     extra_env={"LD_PRELOAD": rank_preload()})
    errors = [f"rank {r} exited with {p.returncode}:\n{p.stderr}" for r, p in enumerate(results) if p.returncode]
    if errors:
        raise AssertionError("\n".join(errors))
    return [pickle.loads((tmp / f"result.{r}").read_bytes()) for r in range(world)]


def rank_main(body):
    """Entry point in a rank process: sets up NCCL, shares the unique id through a file, runs
    body(nccl, comm, rank, world) and stores what it returns for run_ranks."""
    tmp = Path(sys.argv[sys.argv.index("--rank") + 1])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    nccl = Nccl()
    id_file = tmp / "unique-id"
    if rank == 0:
        (tmp / "unique-id.tmp").write_bytes(nccl.unique_id())
        os.rename(tmp / "unique-id.tmp", id_file)
    else:
        import time
        while not id_file.exists():
            time.sleep(0.005)
    comm = nccl.init_rank(world, id_file.read_bytes(), rank)
    result = body(nccl, comm, rank, world)
    nccl.destroy(comm)
    (tmp / f"result.{rank}").write_bytes(pickle.dumps(result))

"""One answer per question: the time the runtime's timeline gives an operation (the job report's
`operations` rows) and the time `fgpu model` prints for it on the same cluster agree within 1%,
for each collective and for a grouped send/recv ring (each rank sending right and receiving from
the left, as nccl-tests' sendrecv runs), on one node, on two and on sixteen; and for an
all-reduce small enough that the ranks exchange it among themselves (peer_exchange.h)."""

import json
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

from pynccl import DTYPES, rank_main, rank_preload
from rank_jobs import REPO, Coordinator, fgpu, run_rank_processes

sys.path.insert(0, str(REPO))
from fakegpu.clusters import write_cluster_config  # noqa: E402

I32 = DTYPES["int32"][1]
MIB = 1 << 20
SIZE = 4 * MIB  # bytes of each operation, nccl-tests' way (the whole buffer; the gathered total)

# The report's name for each operation, and fgpu model's.
OPERATIONS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "Broadcast": "broadcast", "Send": "sendrecv",
              "ReduceScatter": "reduce_scatter", "Reduce": "reduce"}
SMALL = 4 << 10  # an all-reduce the ranks of one host exchange among themselves (4 KiB a rank at most)


def body(nccl, comm, rank, world):
    count = SIZE // 4
    buf, _ = nccl.device_array(I32, [rank] * count)
    nccl.all_reduce(buf, buf, count, "int32", "sum", comm)
    nccl.broadcast(buf, buf, count, "int32", 0, comm)
    part, _ = nccl.device_array(I32, [rank] * (count // world))
    nccl.all_gather(part, buf, count // world, "int32", comm)
    nccl.reduce_scatter(buf, part, count // world, "int32", "sum", comm)
    nccl.reduce(buf, buf, count, "int32", "sum", 0, comm)
    small, _ = nccl.device_array(I32, [rank] * (SMALL // 4))
    for _ in range(2):  # the first through the coordinator, which tells the ranks its time; then among them
        nccl.all_reduce(small, small, SMALL // 4, "int32", "sum", comm)
    send, _ = nccl.device_array(I32, [rank] * count)
    recv, view = nccl.device_array(I32, [0] * count)
    nccl.group_start()
    nccl.send(send, count, "int32", (rank + 1) % world, comm)
    nccl.recv(recv, count, "int32", (rank - 1) % world, comm)
    nccl.group_end()
    return view[0]


class RuntimeAndModelAgree(unittest.TestCase):
    def check(self, nodes, gpus_per_node):
        """The job on `nodes` DGX H100 servers using `gpus_per_node` GPUs of each (fgpu's clusters)."""
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-agree-"))
        self.addCleanup(shutil.rmtree, tmp)
        config = write_cluster_config("h100", None, nodes, gpus_per_node, directory=tmp)
        world = nodes * gpus_per_node
        with Coordinator(config, "unix", report=tmp / "report.json") as coord:
            results = run_rank_processes(sys.executable, [__file__, "--rank", tmp], coord, world,
                                         extra_env={"LD_PRELOAD": rank_preload()}, timeout=300)
        for rank, p in enumerate(results):
            self.assertEqual(p.returncode, 0, f"rank {rank}: {p.stderr}")
        report = json.loads((tmp / "report.json").read_text())
        self.assertGreater(report["data_plane"]["peer_exchange_ops"], 0, "the small all-reduce took the peer path")
        rows = {(row["collective"], row["bytes"]): row for row in report["operations"]}
        expected = [(name, collective, SIZE) for name, collective in OPERATIONS.items()]
        expected.append(("AllReduce", "all_reduce", SMALL))
        for name, collective, size in expected:
            with self.subTest(collective=collective, size=size):
                self.assertIn((name, size), rows, report["operations"])
                row = rows[(name, size)]
                r = fgpu("model", "--cluster-config", config, "--collective", collective, "-b", size, "-e", size,
                         "--datatype", "int32", "--json")
                self.assertEqual(r.returncode, 0, r.stderr)
                modeled = json.loads(r.stdout)["results"][0]["time_us"]
                self.assertAlmostEqual(row["modeled_time_us"], modeled, delta=0.01 * modeled,
                                       msg=f"{name} of {size} B: the runtime's {row['modeled_time_us']:.2f} us "
                                           f"against fgpu model's {modeled:.2f} us")

    def test_one_node(self):
        self.check(1, 4)

    def test_two_nodes(self):
        self.check(2, 2)

    def test_sixteen_nodes(self):
        self.check(16, 1)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(body)
        sys.exit(0)
    unittest.main(verbosity=2)

"""What fgpu reads from its options and environment before it starts anything: representative
ranks (fakegpu/representative.py) and nccl-tests' printed results (fakegpu/nccl_tests_output.py)."""

import unittest

from fakegpu import nccl_tests_output, representative
from fakegpu.paths import SetupError


class RepresentativeRanks(unittest.TestCase):
    def test_lists_and_ranges(self):
        self.assertEqual(representative.rank_list("0"), [0])
        self.assertEqual(representative.rank_list("8, 0-3,2"), [0, 1, 2, 3, 8])

    def test_malformed(self):
        for text, says in (("0,x", "'x' is not a rank"), ("0-", "'0-' is not a rank"), ("4-7", "rank 0 must run")):
            with self.subTest(text=text), self.assertRaisesRegex(SetupError, says):
                representative.rank_list(text)

    def test_the_command_one_rank_runs(self):
        direct = representative.direct_command
        self.assertEqual(direct(["/v/bin/torchrun", "--nproc_per_node=8", "train.py", "--x"]),
                         ["/v/bin/python", "train.py", "--x"])
        self.assertEqual(direct(["python3", "-m", "torch.distributed.run", "-m", "pkg.train"]),
                         ["python3", "-m", "pkg.train"])
        self.assertEqual(direct(["torchrun", "--no-python", "./a.out"]), ["./a.out"])
        with self.assertRaisesRegex(SetupError, "torchrun is given no script"):
            direct(["torchrun", "--nproc_per_node=2"])


NCCL_TESTS = """\
0: # nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703
0: # Collective test starting: all_reduce_perf
0: # nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
0: #  Rank  0 Group  0 Pid   101 on    node-a device  0 [0x18] NVIDIA H100 80GB HBM3
0: #  Rank  1 Group  0 Pid   102 on    node-b device  0 [0x18] NVIDIA H100 80GB HBM3
0: node-a:101:101 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}
0:            8             2     float     sum      -1    12.50    0.00    0.00      0    12.00    0.00    0.00      0
0:      1048576        262144     float     sum      -1    40.25   26.05   26.05      0    39.75   26.38   26.38      0
"""


class NcclTestsOutput(unittest.TestCase):
    def test_a_run_with_prefixes_hosts_and_tuning(self):
        [run] = nccl_tests_output.parse(NCCL_TESTS)
        self.assertEqual(run.collective, "all_reduce")
        self.assertEqual(run.nccl_version, "2.27.3")
        self.assertEqual(run.ranks_per_host(), {"node-a": 1, "node-b": 1})
        self.assertEqual([(r.size, r.root, r.out_of_place_us, r.in_place_us) for r in run.rows],
                         [(8, -1, 12.5, 12.0), (1048576, -1, 40.25, 39.75)])
        self.assertEqual(run.choices, {("all_reduce", 1048576, True): ("Ring", "Simple")})

    def test_numbered_algorithms_before_nccl_2_26(self):
        self.assertEqual(nccl_tests_output.algorithm_and_protocol("1", "2"), ("Ring", "Simple"))
        self.assertEqual(nccl_tests_output.algorithm_and_protocol("NVLS_TREE", "ll128"), ("NVLSTree", "LL128"))
        self.assertIsNone(nccl_tests_output.algorithm_and_protocol("9", "0"))


if __name__ == "__main__":
    unittest.main()


class KernelTimesPrediction(unittest.TestCase):
    """What fgpu --measure-kernels says to run next: the same job, the same cluster, in a simulate run."""

    def predicted(self, *argv):
        from fakegpu.cli import main_parser, predict_command

        return predict_command(main_parser().parse_args(list(argv)))

    def test_the_same_command_on_the_same_cluster(self):
        self.assertEqual(self.predicted("--mode", "hybrid", "--measure-kernels", "t.json", "--gpu", "h200", "--nodes",
                                        "2", "torchrun", "--nproc_per_node=8", "train.py", "--lr", "1e-3"),
                         "fgpu --kernel-times t.json --nodes 2 --gpu h200 torchrun --nproc_per_node=8 train.py --lr 1e-3")
        self.assertEqual(self.predicted("--mode", "hybrid", "--measure-kernels", "t.json", "--cluster-config", "c.yaml",
                                        "--nproc", "2", "python", "my script.py"),
                         "fgpu --kernel-times t.json --cluster-config c.yaml --nproc 2 python 'my script.py'")

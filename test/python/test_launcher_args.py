"""fgpu's reading of a launcher's command: torchrun's options, which it keeps and which it decides
itself, the torchrun each virtual node gets (fakegpu/torchrun.py), and the ranks a launcher asks
for (fakegpu/launchers.py)."""

import unittest

from fakegpu import torchrun
from fakegpu.launchers import launcher_name, launcher_world_size
from fakegpu.paths import SetupError


class Split(unittest.TestCase):
    def test_not_torchrun(self):
        for command in ([], ["python", "train.py"], ["mpirun", "-np", "2", "a.out"], ["python", "-m", "other"]):
            with self.subTest(command=command):
                self.assertIsNone(torchrun.split(command))

    def test_options_values_and_flags(self):
        launcher, given, kept, script = torchrun.split(
            ["/venv/bin/torchrun", "--nproc_per_node=8", "--max_restarts", "3", "--standalone", "--nnodes", "1",
             "train.py", "--lr", "0.1"])
        self.assertEqual(launcher, ["/venv/bin/torchrun"])
        self.assertEqual(given, {"--nproc_per_node": "8", "--max_restarts": "3", "--standalone": True,
                                 "--nnodes": "1"})
        self.assertEqual(kept, ["--max_restarts", "3"])  # the rest are fgpu's to decide
        self.assertEqual(script, ["train.py", "--lr", "0.1"])  # the script's own options are its own

    def test_module_form(self):
        launcher, given, kept, script = torchrun.split(
            ["python3", "-m", "torch.distributed.run", "--no-python", "./a.out", "--size", "4"])
        self.assertEqual(launcher, ["python3", "-m", "torch.distributed.run"])
        self.assertEqual(given, {"--no-python": True})
        self.assertEqual((kept, script), (["--no-python"], ["./a.out", "--size", "4"]))


class LauncherName(unittest.TestCase):
    def test_launchers_and_programs(self):
        for command, name in ((["/v/bin/torchrun", "--nproc_per_node=2", "t.py"], "torchrun"),
                              (["python3", "-m", "torch.distributed.run", "t.py"], "torchrun"),
                              (["mpirun", "-np", "4", "./a.out"], "mpirun"), (["/usr/bin/srun", "./a.out"], "srun"),
                              (["python3", "t.py"], None), (["./a.out"], None), ([], None)):
            with self.subTest(command=command):
                self.assertEqual(launcher_name(command), name)


class PerNode(unittest.TestCase):
    def test_one_torchrun_per_node(self):
        launches = torchrun.per_node_launches(["torchrun", "--nproc_per_node=4", "train.py"], ["n0", "n1"],
                                              [[0, 1, 2, 3], [4, 5, 6, 7]], {"KEEP": "1"})
        self.assertEqual(len(launches), 2)
        ports = set()
        for index, (cmd, env) in enumerate(launches):
            self.assertEqual(cmd[cmd.index("--node_rank") + 1], str(index))
            self.assertEqual(cmd[cmd.index("--nnodes") + 1], "2")
            self.assertEqual(cmd[cmd.index("--nproc_per_node") + 1], "4")
            self.assertEqual(cmd[-1], "train.py")
            ports.add(cmd[cmd.index("--master_port") + 1])
            self.assertEqual((env["FAKEGPU_NODE"], env["FAKEGPU_HOSTNAME"], env["KEEP"]),
                             (str(index), f"n{index}", "1"))
        self.assertEqual(len(ports), 1)  # one rendezvous for all nodes

    def test_options_that_contradict_the_cluster(self):
        for option in (["--nproc_per_node=8"], ["--nnodes", "3"]):
            with self.subTest(option=option), self.assertRaisesRegex(SetupError, "does not match the cluster"):
                torchrun.per_node_launches(["torchrun", *option, "train.py"], ["n0", "n1"], [[0, 1], [2, 3]], {})

    def test_unequal_nodes(self):
        with self.assertRaisesRegex(SetupError, "same number of ranks on every node"):
            torchrun.per_node_launches(["torchrun", "train.py"], ["n0", "n1"], [[0, 1], [2]], {})


class WorldSize(unittest.TestCase):
    def test_the_ranks_a_launcher_asks_for(self):
        cases = [(["mpirun", "-np", "4", "./a"], 4), (["/usr/bin/mpiexec", "-n", "2", "./a"], 2),
                 (["srun", "--ntasks=6", "./a"], 6),
                 (["torchrun", "--nproc_per_node=4", "--nnodes", "2", "t.py"], 8),
                 (["python3", "-m", "torch.distributed.run", "--nproc-per-node", "3", "t.py"], 3),
                 # The script's own arguments are not torchrun's.
                 (["torchrun", "--nproc_per_node", "2", "t.py", "--nnodes", "4"], 2),
                 (["./a", "-np", "4"], None),  # only launchers' flags count
                 (["mpirun", "./a"], None), (["torchrun", "--nproc_per_node=gpu", "t.py"], None), ([], None)]
        for command, world in cases:
            with self.subTest(command=command):
                self.assertEqual(launcher_world_size(command), world)


if __name__ == "__main__":
    unittest.main()

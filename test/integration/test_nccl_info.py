"""What NCCL tells a user at init, from the cost model's channels: NCCL_DEBUG=INFO lines in
NCCL's formats, NCCL_DEBUG_SUBSYS filtering, NCCL_GRAPH_DUMP_FILE and NCCL_TOPO_DUMP_FILE."""

import os
import re
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from rank_jobs import CONFIGS, Coordinator, built, run_rank_processes, single_node_config


def run(config, world, env, new_session=False):
    """One communicator over the world, one small allreduce."""
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-info-"))
    with Coordinator(config, "unix", report=tmp / "report.json") as coord:
        results = run_rank_processes(built("allreduce_bench"), [tmp / "id", "256", "1"], coord, world, extra_env=env,
                                     new_session=new_session)
    for rank, r in enumerate(results):
        if r.returncode != 0:
            raise AssertionError(f"rank {rank}: {r.stderr}")
    return results


def info_lines(stderr):
    return [line.split(" NCCL INFO ", 1)[1] for line in stderr.splitlines() if " NCCL INFO " in line]


class NcclInfo(unittest.TestCase):
    def test_init_lines_on_one_h100_node(self):
        results = run(single_node_config(8), 8, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH"})
        lines0 = info_lines(results[0].stderr)
        channels = [line for line in lines0 if line.startswith("Channel ")]
        self.assertEqual(len(channels), 24, "\n".join(lines0))
        self.assertEqual(channels[0], "Channel 00/24 : 0 1 2 3 4 5 6 7")
        for rank, r in enumerate(results):
            lines = info_lines(r.stderr)
            self.assertIn(f"rank {rank} nRanks 8 nNodes 1 localRanks 8 localRank {rank} MNNVL 0",
                          "\n".join(lines))
            ring0 = next(line for line in lines if line.startswith("Ring 00 : "))
            self.assertEqual(ring0, f"Ring 00 : {(rank + 7) % 8} -> {rank} -> {(rank + 1) % 8}")
            trees = next(line for line in lines if line.startswith("Trees "))
            self.assertEqual(len(re.findall(r" \[\d+\] -?\d+/-?\d+/-?\d+->\d+->-?\d+", trees)), 24, trees)
            self.assertIn("24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, "
                          "32 p2p channels per peer", lines)
            complete = [line for line in lines if line.endswith("- Init COMPLETE")]
            self.assertEqual(len(complete), 1, lines)
            self.assertRegex(complete[0], rf"^ncclCommInitRank comm 0x[0-9a-f]+ rank {rank} nranks 8 cudaDev \d+ "
                                          rf"nvmlDev \d+ busId [0-9a-f]+ commId 0x[0-9a-f]+ - Init COMPLETE$")
            if rank:
                self.assertFalse(any(line.startswith("Channel ") for line in lines), "only rank 0 dumps rings")

    def test_waits_spin_only_where_a_yield_reaches_the_peers(self):
        """Ranks sharing a session spin before they sleep; a rank alone in its session (torchrun
        starts them so) sleeps at once where autogroup is on, since its yields reach no peer."""
        autogroup = Path("/proc/sys/kernel/sched_autogroup_enabled")
        own_group = autogroup.exists() and autogroup.read_text().strip() == "1"
        # Ranks started from here share our session, unless we lead it (they are our children).
        shared_spins = not (own_group and os.getsid(0) == os.getpid())
        for new_session, spins in ((False, shared_spins), (True, not own_group)):
            for r in run(single_node_config(2), 2, {"NCCL_DEBUG": "INFO"}, new_session=new_session):
                opened = [line for line in info_lines(r.stderr) if line.startswith("Control ring open")]
                self.assertEqual(len(opened), 1, r.stderr)
                self.assertEqual("waits spin up to 5000 us" in opened[0], spins, opened[0])
                self.assertEqual("waits sleep at once" in opened[0], not spins, opened[0])

    def test_subsys_filter(self):
        results = run(single_node_config(4), 4, {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^GRAPH"})
        lines = info_lines(results[1].stderr)
        self.assertTrue(any(line.startswith("Trees ") for line in lines), lines)
        self.assertFalse(any(line.startswith("Ring ") for line in lines), "GRAPH lines were excluded")
        quiet = run(single_node_config(4), 4, {"NCCL_DEBUG": "WARN"})
        self.assertEqual(info_lines(quiet[0].stderr), [])

    def test_graph_and_topology_dumps_of_two_nodes(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-dump-"))
        graph, topo = tmp / "graph.xml", tmp / "topo.xml"
        run(CONFIGS / "demo_2node_16gpu.yaml", 16, {"NCCL_GRAPH_DUMP_FILE": str(graph),
                                                     "NCCL_TOPO_DUMP_FILE": str(topo)})
        graphs = ET.parse(graph).getroot()
        self.assertEqual(graphs.tag, "graphs")
        ring = graphs.find("graph[@id='0']")
        self.assertEqual(ring.get("pattern"), "4")
        channels = ring.findall("channel")
        self.assertEqual(len(channels), int(ring.get("nchannels")))
        self.assertGreater(len(channels), 0)
        for ch in channels:
            kids = [e.tag for e in ch]
            self.assertEqual(kids[0], "net")   # two nodes: each channel enters and leaves on a NIC
            self.assertEqual(kids[-1], "net")
            devs = sorted(int(g.get("dev")) for g in ch.findall("gpu"))
            self.assertEqual(devs, list(range(8)), "rank 0's node: its 8 GPUs in channel order")
        system = ET.parse(topo).getroot()
        self.assertEqual(system.tag, "system")
        gpus = system.findall(".//gpu")
        self.assertEqual(len(gpus), 8, "rank 0 dumps its own node")
        self.assertEqual({g.get("sm") for g in gpus}, {"90"})
        self.assertGreater(len(system.findall(".//net")), 0)


if __name__ == "__main__":
    unittest.main()

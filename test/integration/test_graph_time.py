"""Collectives on the modeled clock and in CUDA graphs (one process driving two ranks):
cudaEventElapsedTime around an allreduce reads the coordinator's modeled time for it, captured
collectives replay as new operations with the right results, and FAKEGPU_PAYLOAD=none runs the
same program without moving any data."""

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, rank_environment, single_node_config


def run(args=(), extra_env=None):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-graph-time-"))
    with Coordinator(single_node_config(2), "unix", report=tmp / "report.json") as coord:
        env = rank_environment(os.environ, coord.transport, coord.address, coord.cluster_config)
        env.update(extra_env or {})
        for var in ("RANK", "WORLD_SIZE", "FAKEGPU_TIME_MODE", "FAKEGPU_PAYLOAD"):
            env.pop(var, None)
        env.update(extra_env or {})
        r = subprocess.run([str(built("graph_time_check")), *args], env=env, capture_output=True, text=True,
                           timeout=120)
    return r, json.loads((tmp / "report.json").read_text())


def allreduce_row(report):
    rows = [op for op in report["operations"] if op["collective"] == "AllReduce"]
    assert len(rows) == 1, rows
    return rows[0]


class GraphTime(unittest.TestCase):
    def test_events_read_modeled_time_and_graphs_replay(self):
        r, report = run()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GRAPH TIME OK", r.stdout)
        measured = float(re.search(r"MODELED_US ([0-9.]+)", r.stdout).group(1))
        row = allreduce_row(report)
        self.assertEqual(row["calls"], 4, "one eager call and three graph replays, each a new operation")
        self.assertAlmostEqual(measured, row["modeled_time_us"], delta=0.01 * row["modeled_time_us"])
        self.assertEqual(report["data_plane"]["payload_free_bytes"], 0)

    def test_payload_free_run_moves_nothing(self):
        r, report = run(["payload-free"], {"FAKEGPU_PAYLOAD": "none"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GRAPH TIME OK", r.stdout)
        self.assertEqual(report["data_plane"]["shared_memory_bytes"], 0)
        self.assertEqual(report["data_plane"]["socket_bytes"], 0)
        self.assertGreater(report["data_plane"]["payload_free_bytes"], 0)
        self.assertEqual(allreduce_row(report)["calls"], 4, "payload-free operations are still matched and modeled")


if __name__ == "__main__":
    unittest.main(verbosity=2)

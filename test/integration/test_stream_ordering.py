"""Collectives queue on their stream and return at once; streams, events and finalize observe
completion. Run over fakegpu's memory directly, and again through the staging path that hybrid
mode uses over a real CUDA runtime (copies queued around a host function)."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, rank_environment, single_node_config


def run(extra_env):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-streams-"))
    with Coordinator(single_node_config(2), "unix", report=tmp / "report.json") as coord:
        env = rank_environment(os.environ, coord.transport, coord.address, coord.cluster_config)
        env.update(extra_env)
        for var in ("RANK", "WORLD_SIZE"):
            env.pop(var, None)
        r = subprocess.run([str(built("stream_order_check"))], env=env, capture_output=True, text=True, timeout=120)
    return r, json.loads((tmp / "report.json").read_text())


class StreamOrdering(unittest.TestCase):
    def test_direct(self):
        r, report = run({})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("STREAMS OK", r.stdout)
        self.assertEqual(report["data_plane"]["socket_bytes"], 0)

    def test_through_staging_buffers(self):
        r, report = run({"FAKEGPU_FORCE_STAGING": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("STREAMS OK", r.stdout)
        self.assertGreater(report["data_plane"]["socket_bytes"], 0, "staged data travels in the frames")


if __name__ == "__main__":
    unittest.main(verbosity=2)

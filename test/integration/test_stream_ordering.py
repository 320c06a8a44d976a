"""Collectives queue on their stream and return at once; streams, events and finalize observe
completion. Run over fakegpu's memory directly, and again through the staging path that hybrid
mode uses over a real CUDA runtime (copies queued around a host function)."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, rank_environment, run_rank_processes, single_node_config


def run(extra_env, program="stream_order_check"):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-streams-"))
    with Coordinator(single_node_config(2), "unix", report=tmp / "report.json") as coord:
        env = rank_environment(os.environ, coord.transport, coord.address, coord.cluster_config)
        env.update(extra_env)
        for var in ("RANK", "WORLD_SIZE"):
            env.pop(var, None)
        r = subprocess.run([str(built(program))], env=env, capture_output=True, text=True, timeout=120)
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
        # The staging buffers live in shared memory: the coordinator works on them in place.
        self.assertEqual(report["data_plane"]["socket_bytes"], 0)
        self.assertGreater(report["data_plane"]["shared_memory_bytes"], 0)

    def test_through_staging_buffers_over_the_socket(self):
        r, report = run({"FAKEGPU_FORCE_STAGING": "1", "FAKEGPU_STAGING_FORCE_SOCKET": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("STREAMS OK", r.stdout)
        self.assertEqual(report["data_plane"]["shared_memory_bytes"], 0)
        self.assertGreater(report["data_plane"]["socket_bytes"], 0, "staged data travels in the frames")

    def test_staged_collectives_never_wait_in_host_functions(self):
        # Host functions one at a time, as NVIDIA's runtime runs them: a staged collective that
        # waited for its peers inside one would hold up the peers' (two_streams_check.c), also
        # when the two collectives are captured into CUDA graphs and replayed.
        for socket in ("0", "1"):
            with self.subTest(data_in_frames=socket):
                r, report = run({"FAKEGPU_FORCE_STAGING": "1", "FAKEGPU_SERIAL_HOST_FUNCTIONS": "1",
                                 "FAKEGPU_STAGING_FORCE_SOCKET": socket}, "two_streams_check")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("TWO STREAMS OK", r.stdout)
                # One of each, then the two graphs' collectives at each of two replays.
                self.assertEqual(report["totals"]["collective_calls"], 3 + 2 * 2, report["totals"])

    def test_staging_buffers_are_reused(self):
        # Each AllReduce stages through blocks from a pool. Ten times the operations must not
        # take one block more: nothing is allocated per operation once the pool has grown.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-pool-"))
        growth = {}
        for iters in (2, 20):
            with Coordinator(single_node_config(2), "unix") as coord:
                results = run_rank_processes(built("allreduce_bench"), [tmp / f"id{iters}", "100000", iters], coord, 2,
                                             extra_env={"FAKEGPU_FORCE_STAGING": "1", "NCCL_DEBUG": "INFO",
                                                        "NCCL_DEBUG_SUBSYS": "ALLOC"})
            for r in results:
                self.assertEqual(r.returncode, 0, r.stderr)
            growth[iters] = [r.stderr.count("Staging pool: new") for r in results]
        self.assertEqual(growth[2], growth[20])
        self.assertGreater(min(growth[2]), 0, "the pool announces each block it adds")

if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Coordinator plus 2, 4 and 8 rank processes over unix and tcp: allreduce checked element by element."""

import json
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config


class AllReduceEndToEnd(unittest.TestCase):
    def run_job(self, transport, world, count):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-e2e-"))
        report = tmp / "report.json"
        config = single_node_config(world)
        with Coordinator(config, transport, report=report) as coord:
            results = run_rank_processes(built("nccl_check"), [tmp / "id", "--count", count, "--iters", 2], coord,
                                         world)
        for rank, r in enumerate(results):
            self.assertEqual(r.returncode, 0, f"rank {rank} failed:\n{r.stderr}")
            self.assertIn(f"rank {rank}/{world}: OK", r.stdout)
        data = json.loads(report.read_text())
        self.assertEqual(data["world_size"], world)
        self.assertEqual(len(data["ranks"]), world)
        self.assertEqual(data["errors"], [])
        # Per iteration: world, tp and dp allreduces, then a grouped tp + dp pair, on every
        # communicator instance: 1 world comm, world/tp tp comms, tp dp comms.
        tp = 2 if world > 1 else 1
        instances = 1 + world // tp + tp
        per_iter = instances + (world // tp + tp)
        self.assertEqual(data["collectives"]["AllReduce"]["calls"], 2 * per_iter)
        return data

    def test_unix_and_tcp_with_2_4_8_ranks(self):
        for transport in ("unix", "tcp"):
            for world in (2, 4, 8):
                with self.subTest(transport=transport, world=world):
                    self.run_job(transport, world, count=10007)

    def test_large_payload(self):
        self.run_job("unix", 4, count=(1 << 20) + 3)

    def test_zero_count(self):
        self.run_job("unix", 2, count=0)

    def test_world_larger_than_the_config_fails_on_every_rank(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-e2e-"))
        with Coordinator(single_node_config(2), "unix") as coord:
            results = run_rank_processes(built("nccl_check"), [tmp / "id"], coord, 4, timeout=60)
        for rank, r in enumerate(results):
            self.assertNotEqual(r.returncode, 0, f"rank {rank} should have failed")
            self.assertIn("a communicator of 4 ranks does not fit cluster 'test-2'", r.stderr,
                          f"rank {rank} stderr:\n{r.stderr}")
            self.assertIn("world size of 2", r.stderr)

    def test_payload_over_the_coordinator_limit_fails_clearly(self):
        # 4 MiB per rank over the socket, against a 1 MiB limit: every rank is told why, and the
        # coordinator stays up for the next job.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-e2e-"))
        config = single_node_config(2)
        import os
        os.environ["FAKEGPU_COORDINATOR_MAX_BUFFER"] = str(1 << 20)
        try:
            coord = Coordinator(config, "unix").start()
        finally:
            del os.environ["FAKEGPU_COORDINATOR_MAX_BUFFER"]
        try:
            results = run_rank_processes(built("nccl_check"), [tmp / "id", "--count", 1 << 20], coord, 2, timeout=60,
                                         extra_env={"FAKEGPU_STAGING_FORCE_SOCKET": "1"})
            for rank, r in enumerate(results):
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("FAKEGPU_COORDINATOR_MAX_BUFFER", r.stderr, f"rank {rank}:\n{r.stderr}")
            self.assertIsNone(coord.process.poll(), "the coordinator survives")
            ok = run_rank_processes(built("nccl_check"), [tmp / "id2", "--count", 1000], coord, 2, timeout=60,
                                    extra_env={"FAKEGPU_STAGING_FORCE_SOCKET": "1"})
            self.assertTrue(all(r.returncode == 0 for r in ok), ok[0].stderr)
        finally:
            coord.stop()

    def test_rank_environment_must_match_the_config(self):
        # Two ranks of a 2-rank communicator, but the launcher claims a world of 3.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-e2e-"))
        with Coordinator(single_node_config(2), "unix") as coord:
            results = run_rank_processes(built("nccl_check"), [tmp / "id"], coord, 2, timeout=60,
                                         extra_env={"FAKEGPU_WORLD_SIZE": "3"})
        for rank, r in enumerate(results):
            self.assertNotEqual(r.returncode, 0, f"rank {rank} should have failed")
            self.assertIn("WORLD_SIZE=3 but cluster 'test-2'", r.stderr, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

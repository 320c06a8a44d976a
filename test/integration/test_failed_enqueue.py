"""A collective that cannot be queued leaves no trace: ncclCommDestroy returns, and the rank's
next collective still matches its peers'. Graphs own the collectives captured into them, so
destroying graphs frees what the captures took."""

import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config

# Ranks that hang (an operation left in flight, or sequence numbers out of step) fail here.
TIMEOUT = 60


def run(mode, world, *args, extra_env=None):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-failed-enqueue-"))
    with Coordinator(single_node_config(world), "unix") as coord:
        return run_rank_processes(built("failed_enqueue_check"), [tmp / "id", mode, *args], coord, world,
                                  timeout=TIMEOUT, extra_env=extra_env)


class FailedEnqueue(unittest.TestCase):
    def assert_ok(self, results):
        for rank, r in enumerate(results):
            self.assertEqual(r.returncode, 0, f"rank {rank}:\n{r.stderr}")
            self.assertIn("FAILED ENQUEUE OK", r.stdout)

    def test_one_rank_recovers_and_destroys(self):
        self.assert_ok(run("fail", 1))

    def test_failed_calls_keep_ranks_matched(self):
        self.assert_ok(run("fail", 2))

    def test_failed_calls_keep_ranks_matched_through_staging(self):
        # Staging queues two functions per operation, which share the in-flight count.
        self.assert_ok(run("fail", 2, extra_env={"FAKEGPU_FORCE_STAGING": "1"}))

    def test_number_that_cannot_go_back_fails_the_communicator(self):
        results = run("gap", 1)
        self.assert_ok(results)
        self.assertIn("can no longer match its peers", results[0].stderr)

    def test_graphs_replay_after_their_instances_are_destroyed(self):
        self.assert_ok(run("graphs", 2, 5))

    def test_destroyed_graphs_give_their_staging_buffers_back(self):
        # Each capture stages through blocks of the pool. Were the captured function never freed,
        # every capture would hold its blocks for good and the pool would grow with the rounds.
        env = {"FAKEGPU_FORCE_STAGING": "1", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALLOC"}
        growth = {}
        for rounds in (2, 12):
            results = run("graphs", 2, rounds, extra_env=env)
            self.assert_ok(results)
            growth[rounds] = [r.stderr.count("Staging pool: new") for r in results]
        self.assertGreater(min(growth[2]), 0, "the pool announces each block it adds")
        self.assertEqual(growth[2], growth[12])

    def test_user_object_lives_as_long_as_its_graphs(self):
        self.assert_ok(run("user_objects", 1))


if __name__ == "__main__":
    unittest.main(verbosity=2)

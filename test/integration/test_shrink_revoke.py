"""ncclCommShrink leaves a rank out (one that stopped calling, one that died, or none after a
revoke) and the survivors' new communicator works; ncclCommRevoke stops queued work."""

import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config


def run(mode, world=4):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-shrink-"))
    with Coordinator(single_node_config(world), "unix") as coord:
        return run_rank_processes(built("shrink_check"), [tmp / "id", mode], coord, world, timeout=60)


class ShrinkAndRevoke(unittest.TestCase):
    def check(self, mode, dead_rank=None):
        for rank, r in enumerate(run(mode)):
            if rank == dead_rank:
                continue
            self.assertEqual(r.returncode, 0, f"{mode}: rank {rank}:\n{r.stderr}")
            self.assertIn(f"rank {rank}: shrink OK", r.stdout)

    def test_exclude_a_rank_that_stopped_calling(self):
        self.check("exclude")

    def test_exclude_a_dead_rank(self):
        self.check("dead", dead_rank=3)

    def test_revoke_then_shrink(self):
        self.check("revoke")


if __name__ == "__main__":
    unittest.main(verbosity=2)

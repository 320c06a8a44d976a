"""Collectives on created streams keep stream order, NCCL's return-before-the-peers semantics and
their modeled time whether the calling thread posts them (FAKEGPU_EAGER_COLLECTIVES=1, the
default) or the stream's worker does (0); see test/programs/eager_collective_check.c."""

import re
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config


def run(eager):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-eager-"))
    with Coordinator(single_node_config(2), "unix") as coord:
        results = run_rank_processes(built("eager_collective_check"), [tmp / "id", tmp / "go", tmp / "done"], coord, 2,
                                     extra_env={"FAKEGPU_EAGER_COLLECTIVES": str(int(eager))})
    for r in results:
        assert r.returncode == 0 and "EAGER OK" in r.stdout, r.stdout + r.stderr
    return float(re.search(r"modeled_ms (\S+)", results[0].stdout).group(1))


class EagerCollectives(unittest.TestCase):
    def test_eager_and_queued_keep_semantics_and_modeled_time(self):
        eager_ms = run(eager=True)
        queued_ms = run(eager=False)
        self.assertGreater(eager_ms, 0)
        self.assertAlmostEqual(eager_ms, queued_ms, delta=eager_ms * 1e-6)


if __name__ == "__main__":
    unittest.main(verbosity=2)

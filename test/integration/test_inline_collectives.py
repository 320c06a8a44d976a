"""A collective whose stream is idle runs from the calling thread (FAKEGPU_INLINE_COLLECTIVES):
it keeps its place in the stream's order, against work queued before it, after it, and from
another thread while it runs, and takes the same modeled time as when it is queued."""

import re
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config


def run(inline):
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-inline-"))
    with Coordinator(single_node_config(2), "unix") as coord:
        results = run_rank_processes(built("inline_collective_check"), [tmp / "id", tmp / "go", int(inline)], coord, 2,
                                     extra_env={"FAKEGPU_INLINE_COLLECTIVES": str(int(inline))})
    for r in results:
        assert r.returncode == 0 and "INLINE OK" in r.stdout, r.stderr
    return float(re.search(r"modeled_ms (\S+)", results[0].stdout).group(1))


class InlineCollectives(unittest.TestCase):
    def test_inline_and_queued_runs_keep_order_and_modeled_time(self):
        inline_ms = run(inline=True)
        queued_ms = run(inline=False)
        self.assertGreater(inline_ms, 0)
        self.assertAlmostEqual(inline_ms, queued_ms, delta=inline_ms * 1e-6)


if __name__ == "__main__":
    unittest.main(verbosity=2)

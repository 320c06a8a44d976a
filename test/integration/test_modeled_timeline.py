"""The modeled timeline follows the program (test/programs/timeline_check.c, one process driving
two ranks): calls in a row on a stream, a collective beside a kernel on another stream, a
dependency across communicators through an event or a host synchronize, and a rank held up by a
slower one, each within 1% of the time worked out by hand. The trace then draws each rank's
streams as tracks whose slices nest."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, rank_environment, single_node_config
from trace_check import trace_problems


class ModeledTimeline(unittest.TestCase):
    def test_program_order_on_the_modeled_clock(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-timeline-"))
        with Coordinator(single_node_config(2), "unix", report=tmp / "report.json") as coord:
            env = rank_environment(os.environ, coord.transport, coord.address, coord.cluster_config)
            for var in ("RANK", "WORLD_SIZE", "FAKEGPU_TIME_MODE", "FAKEGPU_PAYLOAD"):
                env.pop(var, None)
            r = subprocess.run([str(built("timeline_check"))], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("TIMELINE OK", r.stdout)
        # Every track exists and nests (the Coordinator helper checks every trace; here it must have run).
        events = json.loads((tmp / "report.trace.json").read_text())["traceEvents"]
        tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
        self.assertGreaterEqual(len(tracks), 4, "two ranks, two streams each")
        self.assertEqual(trace_problems(tmp / "report.trace.json"), [])

if __name__ == "__main__":
    unittest.main()

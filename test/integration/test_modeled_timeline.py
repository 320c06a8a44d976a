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
        # On every track, slices nest: none starts inside another and ends after it.
        events = json.loads((tmp / "report.trace.json").read_text())["traceEvents"]
        tracks = {}
        for e in events:
            if e["ph"] == "X":
                tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        self.assertGreaterEqual(len(tracks), 4, "two ranks, two streams each")
        for track, slices in tracks.items():
            open_ends = []
            for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
                while open_ends and open_ends[-1] <= start + 1e-6:
                    open_ends.pop()
                if open_ends:
                    self.assertLessEqual(end, open_ends[-1] + 1e-6, f"track {track}: slices overlap partly")
                open_ends.append(end)


if __name__ == "__main__":
    unittest.main()

"""Reading a cluster report and the summary fgpu prints from it (fakegpu/report.py)."""

import json
import tempfile
import unittest
from pathlib import Path

from fakegpu import report
from fakegpu.paths import SetupError


def steps(times, marked_by="optimizer"):
    return {"median_time_us": sorted(times[1:] or times)[len(times[1:] or times) // 2], "count": len(times),
            "marked_by": marked_by,
            "per_step": [{"step": i + 1, "time_us": t, "slowest_rank": i % 2, "compute_us": t * 0.75,
                          "comm_us": t * 0.5, "exposed_comm_us": t * 0.25} for i, t in enumerate(times)]}


class Units(unittest.TestCase):
    def test_bytes_and_times(self):
        cases = {0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 29: "1.5 GiB", 5 << 40: "5.0 TiB",
                 7 << 50: "7168.0 TiB"}
        for n, text in cases.items():
            with self.subTest(n=n):
                self.assertEqual(report.human_bytes(n), text)
        self.assertEqual(report.human_us(999.94), "999.9 us")
        self.assertEqual(report.human_us(21100), "21.10 ms")

    def test_rank_spans(self):
        self.assertEqual(report.span_list([0, 1, 2, 3, 8, 12, 13, 14, 15]), "0-3, 8, 12-15")
        self.assertEqual(report.span_list([]), "")


class Steps(unittest.TestCase):
    def test_the_first_step_is_left_out(self):
        s = steps([9000.0, 1000.0, 1100.0, 1050.0])
        self.assertEqual(report.typical_step(s)["step"], 4)  # 1050 is the median of steps 2-4
        line = report.step_line(s)
        self.assertTrue(line.startswith("predicted step time: 1.05 ms (median of steps 2-4, marked by optimizer)"),
                        line)
        self.assertIn("on rank 1: compute 787.5 us, communication 525.0 us (262.5 us of it not hidden", line)

    def test_one_step_and_no_marks(self):
        self.assertIn("(median of 1 step,", report.step_line(steps([500.0])))
        self.assertTrue(report.step_line(steps([500.0], "none")).startswith("modeled run (no steps marked): 500.0 us"))


class Load(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-report-test-"))

    def write(self, name, text):
        path = self.tmp / name
        path.write_text(text)
        return path

    def test_what_the_file_is_instead(self):
        cases = {("r.md", "# report"): "Markdown companion", ("r.json", "{"): "not a JSON cluster report",
                 ("t.json", json.dumps({"traceEvents": []})): "Perfetto trace",
                 ("o.json", json.dumps({"a": 1})): "not a fakegpu cluster report"}
        for (name, text), says in cases.items():
            with self.subTest(name=name), self.assertRaisesRegex(SetupError, says):
                report.load(self.write(name, text))
        with self.assertRaisesRegex(SetupError, "cannot read the report"):
            report.load(self.tmp / "missing.json")

    def test_summary_of_a_small_report(self):
        path = self.write("r.json", json.dumps({
            "schema_version": 1, "world_size": 2, "cluster": {"name": "tiny", "nodes": [{}, {}]},
            "ranks": [{}, {}], "communicators": [{}], "errors": ["rank 1 hung"]}))
        text = report.summarize(report.load(path))
        self.assertIn("cluster 'tiny': world size 2, 2 node(s)", text)
        self.assertIn("ranks seen: 2, communicators: 1", text)
        self.assertIn("errors: 1 (first: rank 1 hung)", text)

    def test_a_representative_run_from_rank_0_alone_says_how_to_run_rank_0s_own_work(self):
        def summary(processes, stood_in):
            return report.summarize({"world_size": 4, "cluster": {"name": "tiny"},
                                     "representative": {"processes": processes, "stood_in": stood_in}})
        self.assertIn("representative run: 1 rank(s) ran as processes (0); the coordinator stood in for 3",
                      summary([0], [1, 2, 3]))
        self.assertIn("FAKEGPU_REPRESENTATIVE=0,1 runs the others as rank 1", summary([0], [1, 2, 3]))
        self.assertNotIn("FAKEGPU_REPRESENTATIVE=0,1", summary([0, 1], [2, 3]))
        # A job that ended before making a communicator: nobody was stood in for.
        self.assertIn("(0); the coordinator stood in for none (it stands in for ranks as their communicators are made)",
                      summary([0], []))

    def test_a_representative_run_from_ranks_0_and_1_compares_their_work(self):
        def summary(zero_us, one_us):
            steps = {"ranks": [{"global_rank": r, "per_step": [{"compute_us": 1.0}, {"compute_us": us}]}
                               for r, us in ((0, zero_us), (1, one_us))]}
            return report.summarize({"world_size": 4, "cluster": {"name": "tiny"}, "steps": steps,
                                     "representative": {"processes": [0, 1], "stood_in": [2, 3]}})
        self.assertIn("ranks 0 and 1 compute alike: 2.01 ms in their last step", summary(2000, 2010))
        self.assertIn("rank 0 computes 3.00 ms in its last step, rank 1 2.00 ms", summary(3000, 2000))


if __name__ == "__main__":
    unittest.main()

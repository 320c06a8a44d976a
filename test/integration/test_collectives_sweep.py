"""Every collective x native dtype x op, in place and out of place, counts 0/1/7/1000, with
1..8 and 16 ranks; send/recv patterns; 2^20+3 elements; a mismatch failing every rank; data in
socket frames, streamed in chunks of FAKEGPU_STAGING_CHUNK_BYTES."""

import json
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, built, run_rank_processes, single_node_config


def sweep(world, *flags, extra_env=None):
    """Runs the sweep; returns the rank results and the coordinator's report."""
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-sweep-"))
    with Coordinator(single_node_config(world), "unix", report=tmp / "report.json") as coord:
        results = run_rank_processes(built("coll_sweep"), [tmp / "id", *flags], coord, world, timeout=240,
                                     extra_env=extra_env)
    return results, json.loads((tmp / "report.json").read_text())


class CollectivesSweep(unittest.TestCase):
    def test_every_world_size(self):
        for world in (1, 2, 3, 4, 5, 6, 7, 8, 16):
            with self.subTest(world=world):
                results, report = sweep(world)
                for rank, r in enumerate(results):
                    self.assertEqual(r.returncode, 0, f"rank {rank} of {world}:\n{r.stderr}")
                    self.assertIn("sweep OK", r.stdout)
                # cudaMalloc'd buffers are shared memory: no payload crosses the socket.
                self.assertEqual(report["data_plane"]["socket_bytes"], 0)
                self.assertGreater(report["data_plane"]["shared_memory_bytes"], 0)
                # Each rank process exchanged its frames through a control ring.
                self.assertEqual(report["data_plane"]["control_ring_clients"], world)
                # Small AllReduces of a size already seen ran among the ranks themselves, exact
                # like the rest ("sweep OK").
                if world > 1:
                    self.assertGreater(report["data_plane"]["peer_exchange_ops"], 0)

    def test_peer_exchange_changes_neither_results_nor_modeled_times(self):
        reports = {}
        for setting in ("1", "0"):
            results, reports[setting] = sweep(4, extra_env={"FAKEGPU_PEER_EXCHANGE": setting})
            for rank, r in enumerate(results):
                self.assertEqual(r.returncode, 0, f"rank {rank}, FAKEGPU_PEER_EXCHANGE={setting}:\n{r.stderr}")
                self.assertIn("sweep OK", r.stdout)
        self.assertGreater(reports["1"]["data_plane"]["peer_exchange_ops"], 0)
        self.assertEqual(reports["0"]["data_plane"]["peer_exchange_ops"], 0)
        self.assertEqual(reports["0"]["data_plane"]["peer_mailboxes"], 0)
        self.assertEqual(reports["1"]["totals"]["modeled_makespan_us"], reports["0"]["totals"]["modeled_makespan_us"])
        self.assertEqual(reports["1"]["operations"], reports["0"]["operations"])

    def test_trace_links_every_send_to_its_recv(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-sweep-"))
        with Coordinator(single_node_config(4), "unix", report=tmp / "report.json") as coord:
            results = run_rank_processes(built("coll_sweep"), [tmp / "id"], coord, 4, timeout=240)
        self.assertTrue(all(r.returncode == 0 for r in results))
        report = json.loads((tmp / "report.json").read_text())
        events = json.loads((tmp / "report.trace.json").read_text())["traceEvents"]
        starts = {e["id"]: e for e in events if e["ph"] == "s"}
        ends = {e["id"]: e for e in events if e["ph"] == "f"}
        self.assertEqual(len(starts), report["collectives"]["Send"]["calls"])
        self.assertEqual(starts.keys(), ends.keys())
        sends = [e for e in events if e["ph"] == "X" and e["name"].startswith("Send ")]
        recvs = [e for e in events if e["ph"] == "X" and e["name"].startswith("Recv ")]
        self.assertEqual(len(sends), len(starts))
        self.assertEqual(len(recvs), len(starts))
        for k, s in starts.items():
            self.assertLessEqual(s["ts"], ends[k]["ts"])

    def test_socket_path_gives_the_same_results(self):
        # 4 KiB chunks: the larger counts' data, and the gathers' replies cut across ranks' slices,
        # stream in pieces both ways.
        results, report = sweep(4, extra_env={"FAKEGPU_STAGING_FORCE_SOCKET": "1", "FAKEGPU_STAGING_CHUNK_BYTES": "4K"})
        for rank, r in enumerate(results):
            self.assertEqual(r.returncode, 0, f"rank {rank}:\n{r.stderr}")
        plane = report["data_plane"]
        self.assertEqual(plane["shared_memory_bytes"], 0)
        self.assertGreater(plane["socket_bytes"], 0)
        self.assertEqual(plane["control_ring_clients"], 0)
        self.assertGreater(plane["payload_chunks_in"], 0)
        self.assertGreater(plane["payload_chunks_out"], 0)

    def test_socket_payloads_stream_in_chunks_of_the_size_asked(self):
        # 2 ranks x 6 AllReduces (5 warm-up) of 100000 bytes in 4096-byte chunks: each message
        # and each reply is 24 PayloadChunk frames and the message with the last 1696 bytes.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-chunks-"))
        for value, chunks in (("4096", 2 * 6 * 24), (None, 0)):  # unset: 1 MiB, no pieces
            env = {"FAKEGPU_STAGING_FORCE_SOCKET": "1"}
            if value:
                env["FAKEGPU_STAGING_CHUNK_BYTES"] = value
            with Coordinator(single_node_config(2), "unix", report=tmp / "report.json") as coord:
                results = run_rank_processes(built("allreduce_bench"), [tmp / "id", "100000", "1"], coord, 2,
                                             extra_env=env)
            self.assertTrue(all(r.returncode == 0 for r in results), results[0].stderr)
            plane = json.loads((tmp / "report.json").read_text())["data_plane"]
            self.assertEqual((plane["payload_chunks_in"], plane["payload_chunks_out"]), (chunks, chunks))

    def test_a_malformed_setting_fails_the_init_naming_it(self):
        # FAKEGPU_PAYLOAD is first needed by the collective: the init checks it all the same.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-chunks-"))
        for name, value, accepted in (("FAKEGPU_STAGING_CHUNK_BYTES", "1x", "a byte count of at least 4096"),
                                      ("FAKEGPU_STAGING_CHUNK_BYTES", "100", "a byte count of at least 4096"),
                                      ("FAKEGPU_PAYLOAD", "nothing", "one of none")):
            with Coordinator(single_node_config(2), "unix") as coord:
                results = run_rank_processes(built("allreduce_bench"), [tmp / "id", "4", "1"], coord, 2,
                                             extra_env={name: value})
            for r in results:
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(f"ncclCommInitRank: {name}={value}: expected {accepted}", r.stderr)

    def test_frames_on_the_socket_give_the_same_results(self):
        # FAKEGPU_CONTROL_RING=0: data still in shared memory, frames over the unix socket.
        results, report = sweep(4, extra_env={"FAKEGPU_CONTROL_RING": "0"})
        for rank, r in enumerate(results):
            self.assertEqual(r.returncode, 0, f"rank {rank}:\n{r.stderr}")
        self.assertGreater(report["data_plane"]["shared_memory_bytes"], 0)
        self.assertEqual(report["data_plane"]["control_ring_clients"], 0)

    def test_large_counts(self):
        for rank, r in enumerate(sweep(2, "--big")[0]):
            self.assertEqual(r.returncode, 0, f"rank {rank}:\n{r.stderr}")

    def test_mismatch_fails_every_rank_naming_the_calls(self):
        for rank, r in enumerate(sweep(3, "--mismatch")[0]):
            self.assertEqual(r.returncode, 0, f"rank {rank}:\n{r.stdout}{r.stderr}")
            self.assertIn("message names both calls: yes", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)

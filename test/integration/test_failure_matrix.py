"""Failure rows that need a process to die: a rank killed with SIGKILL, and the coordinator
killed under waiting ranks. Either way the others get an error promptly, never a hang. And a
mismatch among ranks that exchange a small AllReduce among themselves, which the coordinator
still diagnoses."""

import json
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pynccl import DTYPES, NcclError, rank_main, rank_preload  # noqa: E402
from cluster_files import write_single_node_config  # noqa: E402
from rank_jobs import Coordinator, run_rank_processes  # noqa: E402

I32 = DTYPES["int32"][1]
# How soon the survivors must hear of it: a hang would be the 30 s a rank waits here. Detection
# takes milliseconds; the bound leaves room for a loaded machine running tests side by side.
PROMPT_S = 5.0


def killed_rank_body(nccl, comm, rank, world):
    stream = nccl.stream()
    buf, _ = nccl.device_array(I32, [rank] * 4)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm, stream)
    nccl.synchronize(stream)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)  # no destroy, no goodbye
    # The survivors queue the next reduction and watch the communicator, as torch's watchdog does.
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm, stream)
    start = time.monotonic()
    while nccl.async_error(comm) == 0 and time.monotonic() - start < 30:
        time.sleep(0.001)
    result = {"async_error": nccl.async_error(comm), "after_s": time.monotonic() - start}
    try:
        nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
        result["later"] = None
    except NcclError as e:
        result["later"] = str(e)
    return result


def coordinator_killed_body(nccl, comm, rank, world):
    buf, _ = nccl.device_array(I32, [rank] * 4)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
    marker = Path(os.environ["KILLED_MARKER"])
    if rank == world - 1:  # never joins: the others wait until the coordinator is killed under them
        while not marker.exists():
            time.sleep(0.01)
    else:
        (marker.parent / f"waiting.{rank}").touch()
    try:
        nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
        return {"error": None}
    except NcclError as e:
        return {"error": str(e), "at": time.time()}


def split_after_failure_body(nccl, comm, rank, world):
    buf, _ = nccl.device_array(I32, [rank] * 4)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
    if rank == 1:
        os._exit(0)  # leaves without destroying the communicator
    try:
        nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
    except NcclError:
        pass
    try:
        nccl.split(comm, 0, 0)
        return {"split": None}
    except NcclError as e:
        return {"split": str(e)}


def exchanged_mismatch_body(nccl, comm, rank, world):
    buf, _ = nccl.device_array(I32, [rank] * 8)
    for count in (4, 8):  # both sizes seen once: from now on the ranks exchange them themselves
        nccl.all_reduce(buf, buf, count, "int32", "sum", comm)
    try:
        nccl.all_reduce(buf, buf, 8 if rank == 0 else 4, "int32", "sum", comm)
        return {"error": None}
    except NcclError as e:
        return {"error": str(e)}


BODIES = {"exchanged_mismatch": exchanged_mismatch_body, "killed_rank": killed_rank_body,
          "coordinator_killed": coordinator_killed_body,
          "split_after_failure": split_after_failure_body}


def run(body, world, during=None):
    """Runs BODIES[body] as ranks against a new coordinator; during(coord, tmp) runs in a thread
    meanwhile. Returns the rank processes, the results of those that finished, and the report
    (None when the coordinator did not live to write one)."""
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-failure-"))
    with Coordinator(write_single_node_config(world, name=body), "unix", report=tmp / "report.json") as coord:
        if during:
            threading.Thread(target=during, args=(coord, tmp), daemon=True).start()
        procs = run_rank_processes(sys.executable, [__file__, "--rank", tmp], coord, world, timeout=90,
                                   extra_env={"LD_PRELOAD": rank_preload(), "FAILURE_BODY": body,
                                              "KILLED_MARKER": str(tmp / "killed")})
    results = {r: pickle.loads((tmp / f"result.{r}").read_bytes()) for r in range(world)
               if (tmp / f"result.{r}").exists()}
    report = json.loads((tmp / "report.json").read_text()) if (tmp / "report.json").exists() else None
    return procs, results, report


class FailureMatrix(unittest.TestCase):
    def test_killed_rank_fails_the_survivors_promptly(self):
        procs, results, report = run("killed_rank", 3)
        self.assertEqual(procs[2].returncode, -signal.SIGKILL)
        for rank in (0, 1):
            self.assertEqual(procs[rank].returncode, 0, procs[rank].stderr)
            r = results[rank]
            self.assertEqual(r["async_error"], 6, "ncclRemoteError through ncclCommGetAsyncError")
            self.assertLess(r["after_s"], PROMPT_S)
            self.assertIn("rank 2 of communicator", r["later"])
            self.assertIn("disconnected without destroying it", r["later"])
        failures = [c.get("failure", "") for c in report["communicators"]]
        self.assertTrue(any("rank 2 of communicator" in f for f in failures), failures)
        self.assertTrue(any("disconnected without destroying it" in e for e in report["errors"]))

    def test_coordinator_killed_under_waiting_ranks(self):
        killed_at = []

        def kill_when_waiting(coord, tmp):
            # Once ranks 0 and 1 are on their way into the second AllReduce (and a moment to get
            # there). The last rank joins it only when the coordinator is dead and its sockets
            # closed: otherwise the ranks could complete it among themselves while it still was.
            deadline = time.time() + 60
            while not all((tmp / f"waiting.{r}").exists() for r in (0, 1)) and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)
            killed_at.append(time.time())
            coord.process.send_signal(signal.SIGKILL)
            coord.process.wait()
            (tmp / "killed").touch()

        procs, results, _ = run("coordinator_killed", 3, kill_when_waiting)
        for rank in range(3):
            self.assertEqual(procs[rank].returncode, 0, procs[rank].stderr)
            error = results[rank]["error"]
            self.assertIsNotNone(error)
            self.assertIn("fakegpu coordinator", error)
            self.assertLess(results[rank]["at"] - killed_at[0], PROMPT_S)

    def test_a_mismatch_among_exchanging_ranks_is_diagnosed(self):
        procs, results, report = run("exchanged_mismatch", 3)
        for rank in range(3):
            self.assertEqual(procs[rank].returncode, 0, procs[rank].stderr)
            self.assertIn("SIZE_OR_SYNTAX_MISMATCH", results[rank]["error"] or "no error")
            self.assertIn("rank 0 called AllReduce", results[rank]["error"])
        self.assertGreater(report["data_plane"]["peer_mailboxes"], 0)
        self.assertEqual(report["diagnoses"]["mismatches"], {"SIZE_OR_SYNTAX_MISMATCH": 1})

    def test_a_split_of_a_failed_communicator_says_why(self):
        _, results, _ = run("split_after_failure", 2)
        why = results[0]["split"]
        self.assertIsNotNone(why)
        self.assertIn("the parent communicator has failed: ", why)
        self.assertIn("disconnected without destroying it", why)
        self.assertNotIn("failed to initialise", why)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(BODIES[os.environ["FAILURE_BODY"]])
    else:
        unittest.main()

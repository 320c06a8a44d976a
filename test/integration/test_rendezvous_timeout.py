"""A rank that never posts: with FAKEGPU_COORDINATOR_TIMEOUT_MS set, the ranks waiting for it get
an error naming it and where it was last seen, instead of hanging; the report counts it."""

import os
import sys
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pynccl import DTYPES, NcclError, rank_main, run_ranks  # noqa: E402

I32 = DTYPES["int32"][1]
TIMEOUT_S = 1.5


def body(nccl, comm, rank, world):
    buf, _ = nccl.device_array(I32, [rank] * 4)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)  # everyone: sequence 1
    if rank == world - 1:
        time.sleep(3 * TIMEOUT_S)  # the straggler never posts sequence 2
        return {"error": None}
    start = time.monotonic()
    try:
        nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
        return {"error": None}
    except NcclError as e:
        return {"error": str(e), "after_s": time.monotonic() - start}


class RendezvousTimeout(unittest.TestCase):
    def test_waiting_ranks_get_the_diagnosis(self):
        os.environ["FAKEGPU_COORDINATOR_TIMEOUT_MS"] = str(int(TIMEOUT_S * 1000))  # the coordinator inherits it
        results = run_ranks(__file__, 3)
        self.assertIsNone(results[2]["error"])
        for rank in (0, 1):
            error = results[rank]["error"]
            self.assertIsNotNone(error, f"rank {rank} should have been failed, not left waiting")
            self.assertIn("rendezvous timeout", error)
            self.assertIn("ranks 0-1 waited", error)
            self.assertIn("rank 2 (global rank 2", error)
            self.assertIn("last posted AllReduce #1", error)
            self.assertGreaterEqual(results[rank]["after_s"], TIMEOUT_S * 0.9)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(body)
    else:
        unittest.main()

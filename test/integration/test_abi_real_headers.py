"""An NCCL program compiled against NVIDIA's real nccl.h / cuda_runtime.h and linked against
NVIDIA's libraries runs on fakegpu's libraries: init, split and allreduce across 8 processes."""

import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import Coordinator, run_rank_processes, single_node_config

BINARY = sys.argv.pop(1) if len(sys.argv) > 1 else ""


class RealHeadersAbi(unittest.TestCase):
    def test_eight_processes(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-abi-"))
        with Coordinator(single_node_config(8), "unix") as coord:
            results = run_rank_processes(BINARY, [tmp / "id", "--count", 4099, "--tp", 4], coord, 8)
        for rank, r in enumerate(results):
            self.assertEqual(r.returncode, 0, f"rank {rank} failed:\n{r.stderr}")
            self.assertIn(f"rank {rank}/8: OK", r.stdout)
            self.assertIn("NCCL 22809", r.stdout)


if __name__ == "__main__":
    if not BINARY:  # ctest counts exit code 77 as skipped (SKIP_RETURN_CODE), never as passed
        print("SKIP: no CUDA toolkit headers were found at configure time; ABI test skipped")
        sys.exit(77)
    unittest.main(verbosity=2)

"""One process driving several ranks: ncclCommInitAll with grouped calls, non-blocking init,
older config layouts and the error codes of bad calls (see programs/nccl_api_check.c)."""

import os
import subprocess
import unittest

from rank_jobs import Coordinator, built, rank_environment, single_node_config


class SingleProcessApi(unittest.TestCase):
    def test_api_checks(self):
        with Coordinator(single_node_config(4), "unix") as coord:
            env = rank_environment(os.environ, coord.transport, coord.address, coord.cluster_config)
            for var in ("RANK", "WORLD_SIZE", "FAKEGPU_RANK", "FAKEGPU_WORLD_SIZE"):
                env.pop(var, None)
            r = subprocess.run([str(built("nccl_api_check"))], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("API OK", r.stdout)
        # Bad calls are reported, each on one NCCL WARN line naming the function.
        self.assertIn("NCCL WARN ncclDevCommCreate: NCCL's device API needs GPU-initiated communication", r.stderr)
        self.assertIn("NCCL WARN ncclSend: peer 1 is outside 0..0", r.stderr)
        self.assertIn("NCCL WARN ncclCommCount: invalid or destroyed communicator", r.stderr)
        self.assertIn("NCCL WARN ncclAllReduce: invalid datatype 42", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""AllReduce from Python ranks: every dtype the binding knows x sum/prod/max/min/avg, in place
and out of place, with 2, 3 and 4 ranks; each element compared with a reference computed here."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pynccl import DTYPES, OPS, rank_main, run_ranks  # noqa: E402

COUNT = 257


def contribution(rank, i, op):
    return (1 + (rank + i) % 2) if op == "prod" else (rank * 13 + i * 5) % 41


def expected(world, i, dtype, op):
    values = [contribution(r, i, op) for r in range(world)]
    if op == "sum":
        return sum(values)
    if op == "prod":
        out = 1
        for v in values:
            out *= v
        return out
    if op == "max":
        return max(values)
    if op == "min":
        return min(values)
    # avg: integers divide the sum; floats multiply each input by 1/n (values here keep it exact
    # only for power-of-two n, so compare floats with a tolerance of one part in 1e6).
    return sum(values) // world if dtype.startswith(("int", "uint")) else sum(values) / world


def body(nccl, comm, rank, world):
    results = {}
    for dtype, (_, ctype) in DTYPES.items():
        for op in OPS:
            for in_place in (False, True):
                send, send_view = nccl.device_array(ctype, [contribution(rank, i, op) for i in range(COUNT)])
                recv, recv_view = (send, send_view) if in_place else nccl.device_array(ctype, [0] * COUNT)
                nccl.all_reduce(send, recv, COUNT, dtype, op, comm)
                results[(dtype, op, in_place)] = list(recv_view)
    return results


class AllReduceCorrectness(unittest.TestCase):
    def test_every_dtype_and_op(self):
        for world in (2, 3, 4):
            for rank, results in enumerate(run_ranks(__file__, world)):
                for (dtype, op, in_place), got in results.items():
                    want = [expected(world, i, dtype, op) for i in range(COUNT)]
                    with self.subTest(world=world, rank=rank, dtype=dtype, op=op, in_place=in_place):
                        if dtype.startswith("float"):
                            for g, w in zip(got, want):
                                self.assertAlmostEqual(g, w, delta=abs(w) * 1e-6 + 1e-6)
                        else:
                            bits = 8 * {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4}.get(dtype, 8)
                            wrap = [w % (1 << bits) for w in want]
                            self.assertEqual([g % (1 << bits) for g in got], wrap)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(body)
    else:
        unittest.main(verbosity=2)

"""AllGather from Python ranks: several dtypes and counts, in place and out of place, with 2 to
5 ranks; the gathered buffer must hold every rank's block in rank order."""

import ctypes
import sys
import unittest

from pynccl import DTYPES, rank_main, run_ranks

COUNTS = (0, 1, 33, 4096)
TYPES = ("int8", "int32", "int64", "float32", "float64")


def block(rank, count):
    return [(rank * 7 + i) % 100 for i in range(count)]


def body(nccl, comm, rank, world):
    results = {}
    for dtype in TYPES:
        ctype = DTYPES[dtype][1]
        for count in COUNTS:
            for in_place in (False, True):
                recv, view = nccl.device_array(ctype, [0] * (count * world))
                if in_place:  # the rank's own block already sits at its place in the output
                    view[rank * count:(rank + 1) * count] = block(rank, count)
                    send = ctypes.c_void_p(recv.value + rank * count * ctypes.sizeof(ctype))
                else:
                    send, _ = nccl.device_array(ctype, block(rank, count))
                nccl.all_gather(send, recv, count, dtype, comm)
                results[(dtype, count, in_place)] = list(view)
    return results


class AllGatherCorrectness(unittest.TestCase):
    def test_blocks_in_rank_order(self):
        for world in (2, 3, 5):
            for rank, results in enumerate(run_ranks(__file__, world)):
                for (dtype, count, in_place), got in results.items():
                    want = [v for r in range(world) for v in block(r, count)]
                    with self.subTest(world=world, rank=rank, dtype=dtype, count=count, in_place=in_place):
                        self.assertEqual(got, want)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(body)
    else:
        unittest.main(verbosity=2)

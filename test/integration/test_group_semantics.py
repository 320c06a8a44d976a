"""Grouped submission from Python ranks: several collectives in one group, a send/recv ring in a
group, nested groups, a group spanning two communicators, a split with NCCL_SPLIT_NOCOLOR, and a
pair exchanging while the other ranks call nothing."""

import sys
import unittest

from pynccl import DTYPES, rank_main, run_ranks

I32 = DTYPES["int32"][1]
N = 100


def body(nccl, comm, rank, world):
    out = {}
    # Three allreduces in one group, each on its own buffers.
    bufs = [nccl.device_array(I32, [rank + k] * N) for k in range(3)]
    nccl.group_start()
    for ptr, _ in bufs:
        nccl.all_reduce(ptr, ptr, N, "int32", "sum", comm)
    nccl.group_end()
    out["three_allreduces"] = [view[0] for _, view in bufs]

    # A ring: send right, receive from the left, in one group (deadlocks without it).
    send, _ = nccl.device_array(I32, [rank * 10] * N)
    recv, recv_view = nccl.device_array(I32, [0] * N)
    nccl.group_start()
    nccl.send(send, N, "int32", (rank + 1) % world, comm)
    nccl.recv(recv, N, "int32", (rank - 1) % world, comm)
    nccl.group_end()
    out["ring"] = recv_view[0]

    # Nested groups count as one; the group spans the world comm and a split of it.
    half = nccl.split(comm, rank % 2, rank)
    a, a_view = nccl.device_array(I32, [1] * N)
    b, b_view = nccl.device_array(I32, [rank] * N)
    nccl.group_start()
    nccl.group_start()
    nccl.all_reduce(a, a, N, "int32", "sum", comm)
    nccl.group_end()
    nccl.all_reduce(b, b, N, "int32", "max", half)
    nccl.group_end()
    out["two_comms"] = (a_view[0], b_view[0])
    nccl.destroy(half)

    # Odd ranks opt out of a split with NCCL_SPLIT_NOCOLOR and get no communicator.
    evens = nccl.split(comm, -1 if rank % 2 else 0, rank)
    if evens.value is None:
        out["nocolor"] = None
    else:
        e, e_view = nccl.device_array(I32, [rank] * N)
        nccl.all_reduce(e, e, N, "int32", "sum", evens)
        out["nocolor"] = e_view[0]
        nccl.destroy(evens)

    # Only ranks 0 and 1 exchange; the others do nothing at all.
    if rank < 2:
        s, _ = nccl.device_array(I32, [100 + rank] * N)
        r, r_view = nccl.device_array(I32, [0] * N)
        nccl.group_start()
        nccl.send(s, N, "int32", 1 - rank, comm)
        nccl.recv(r, N, "int32", 1 - rank, comm)
        nccl.group_end()
        out["pair"] = r_view[0]
    return out


class GroupSemantics(unittest.TestCase):
    def test_groups(self):
        world = 4
        results = run_ranks(__file__, world)
        for rank, out in enumerate(results):
            with self.subTest(rank=rank):
                self.assertEqual(out["three_allreduces"], [sum(r + k for r in range(world)) for k in range(3)])
                self.assertEqual(out["ring"], ((rank - 1) % world) * 10)
                same_parity = [r for r in range(world) if r % 2 == rank % 2]
                self.assertEqual(out["two_comms"], (world, max(same_parity)))
                evens = [r for r in range(world) if r % 2 == 0]
                self.assertEqual(out["nocolor"], None if rank % 2 else sum(evens))
                if rank < 2:
                    self.assertEqual(out["pair"], 100 + (1 - rank))
                else:
                    self.assertNotIn("pair", out)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(body)
    else:
        unittest.main(verbosity=2)

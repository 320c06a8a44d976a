"""What the coordinator says about a job that cannot progress, and who may talk to it:
- `fakegpu-coordinator status` shows, while the job runs, who waits in which operation and
  what the missing rank is doing;
- a cross-communicator deadlock is named and broken: both ranks get an error, not a hang;
- over tcp a token is required off loopback, and a client without it is refused;
- a stranger's oversized first frame closes only its own connection, and a client that stalls
  in the middle of a frame holds up nobody else;
- a control ring offered without a usable shared-memory area is refused with a reason, and the
  client stays on its socket;
- a payload streamed in pieces out of order drops only its client, and one too large to buffer is
  refused with the limit named while the connection stays in step."""

import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pynccl import DTYPES, NcclError, rank_main, run_ranks  # noqa: E402
from cluster_files import write_single_node_config  # noqa: E402
from fakegpu.paths import SetupError, built  # noqa: E402
from rank_jobs import Coordinator  # noqa: E402

I32 = DTYPES["int32"][1]
COORDINATOR = str(built("fakegpu-coordinator"))
DEADLOCK_MS = 1000
PROTOCOL_VERSION = int(re.search(r"kProtocolVersion = (\d+);",
                                 (Path(__file__).resolve().parents[2] / "common/wire/wire.h").read_text()).group(1))


def status(transport, address, *extra, env=None):
    return subprocess.run([COORDINATOR, "status", "--transport", transport, "--address", address, *extra],
                          capture_output=True, text=True, timeout=30, env=env)


def lagging_rank_body(nccl, comm, rank, world):
    buf, view = nccl.device_array(I32, [rank] * 4)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
    seen = None
    if rank == world - 1:
        # The others go on to operation 2 and wait there for this rank: look at them from outside.
        where = (os.environ["FAKEGPU_COORDINATOR_TRANSPORT"], os.environ["FAKEGPU_COORDINATOR_ADDR"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            state = json.loads(status(*where, "--json").stdout)
            waiting = [w for c in state["communicators"] for w in c["waiting"]]
            if waiting and waiting[0]["arrived"] == "0-1":
                seen = {"json": state, "text": status(*where).stdout}
                break
            time.sleep(0.05)
    nccl.all_reduce(buf, buf, 4, "int32", "sum", comm)
    return {"seen": seen, "sum": list(view)}


def deadlock_body(nccl, comm, rank, world):
    other = nccl.split(comm, 0, rank)
    buf, _ = nccl.device_array(I32, [rank] * 4)
    # Rank 0 reduces on the first communicator, then on the second; rank 1 the other way round.
    order = (comm, other) if rank == 0 else (other, comm)
    start = time.monotonic()
    try:
        for c in order:
            nccl.all_reduce(buf, buf, 4, "int32", "sum", c)
        return {"error": None}
    except NcclError as e:
        return {"error": str(e), "after_s": time.monotonic() - start}


BODIES = {"lagging": lagging_rank_body, "deadlock": deadlock_body}


def run_body(name, world, **env):
    """Runs BODIES[name] as `world` ranks; env is set for the ranks and the coordinator."""
    saved = dict(os.environ)
    os.environ.update(DIAGNOSIS_BODY=name, **env)
    try:
        return run_ranks(__file__, world)
    finally:
        os.environ.clear()
        os.environ.update(saved)


class Diagnosis(unittest.TestCase):
    def test_status_shows_who_waits_for_whom(self):
        results = run_body("lagging", 3)
        seen = results[2]["seen"]
        self.assertIsNotNone(seen, "status never showed ranks 0-1 waiting")
        comm = seen["json"]["communicators"][0]
        self.assertEqual(seen["json"]["ranks_connected"], 3)
        missing = comm["waiting"][0]["missing"]
        self.assertEqual([m["rank"] for m in missing], [2])
        self.assertIn("is idle: last posted AllReduce #1", missing[0]["doing"])
        self.assertIn("#2 AllReduce(count=4, int32, sum): waiting", seen["text"])
        self.assertIn("waits in AllReduce(count=4, int32, sum) #2 on communicator", seen["text"])
        self.assertEqual(results[0]["sum"], [9] * 4)  # 0 + 1 + 2, then that summed over 3 ranks

    def test_cross_communicator_deadlock_is_named(self):
        results = run_body("deadlock", 2, FAKEGPU_DEADLOCK_TIMEOUT_MS=str(DEADLOCK_MS))
        for rank in (0, 1):
            error = results[rank]["error"]
            self.assertIsNotNone(error, f"rank {rank} should have been told of the deadlock")
            self.assertIn("cross-communicator deadlock: 2 ranks wait only for each other", error)
            self.assertIn("for rank 1", error)
            self.assertIn("for rank 0", error)
            self.assertGreaterEqual(results[rank]["after_s"], DEADLOCK_MS / 1000 * 0.9)


class Lockdown(unittest.TestCase):
    def setUp(self):
        self.config = write_single_node_config(2, name="lockdown")

    def test_tcp_off_loopback_needs_a_token(self):
        env = {k: v for k, v in os.environ.items() if k != "FAKEGPU_COORDINATOR_TOKEN"}
        with self.assertRaises(SetupError) as refused:
            Coordinator(self.config, "tcp", "0.0.0.0:0", env=env).start()
        self.assertIn("without a token: set FAKEGPU_COORDINATOR_TOKEN", str(refused.exception))

    def test_a_client_without_the_token_is_refused(self):
        token = os.urandom(16).hex()
        with Coordinator(self.config, "tcp", "127.0.0.1:0", env=dict(os.environ, FAKEGPU_COORDINATOR_TOKEN=token)) as coord:
            for given, expect in ((None, "requires a token"), ("wrong", "does not match")):
                env = {k: v for k, v in os.environ.items() if k != "FAKEGPU_COORDINATOR_TOKEN"}
                if given:
                    env["FAKEGPU_COORDINATOR_TOKEN"] = given
                out = status("tcp", coord.address, env=env)
                self.assertEqual(out.returncode, 1)
                self.assertIn(expect, out.stderr)
            out = status("tcp", coord.address, env=dict(os.environ, FAKEGPU_COORDINATOR_TOKEN=token))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("0 of 2 ranks connected", out.stdout)
            self.assertIn("refused pid", coord.output())

    def test_a_strangers_huge_frame_is_dropped(self):
        with Coordinator(self.config, "unix") as coord, socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(coord.address)
            # A frame header (magic, Hello, 16 bytes of fields) announcing a 1 GiB body.
            s.sendall(struct.pack("<IIIIQQ", 0x55504746, 1, 16, 0, 1, 1 << 30))
            self.assertEqual(s.recv(1), b"", "the coordinator should close the connection")
            self.assertEqual(status("unix", coord.address).returncode, 0, "and still serve others")
            self.assertIn("before the Hello", coord.output())

    def test_a_stalled_client_blocks_nobody(self):
        with Coordinator(self.config, "unix") as coord, socket.socket(socket.AF_UNIX) as half_header, \
                socket.socket(socket.AF_UNIX) as half_body:
            half_header.connect(coord.address)
            half_header.sendall(b"FGP")  # three bytes of a header, then nothing
            half_body.connect(coord.address)
            # A whole header announcing a 64-byte Hello, then half of it, then nothing.
            half_body.sendall(struct.pack("<IIIIQQ", 0x55504746, 1, 64, 0, 1, 64) + bytes(32))
            for _ in range(3):
                out = status("unix", coord.address)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn("0 of 2 ranks connected", out.stdout)

    def test_a_bad_control_ring_offer_is_refused_clearly(self):
        offer = struct.pack("<Q", 4096)  # OpenControlRing: the capacity of each ring
        with Coordinator(self.config, "unix") as coord, socket.socket(socket.AF_UNIX) as s:
            greet(s, coord.address)
            # No descriptor with the offer.
            s.sendall(frame(21, 2, offer))
            msg_type, request_id, body = read_frame(s)
            self.assertEqual((msg_type, request_id), (3, 2), "an Error answering the offer")
            self.assertIn(b"control ring refused: no descriptor came with OpenControlRing", body)
            # A memfd that is not sealed at its size could shrink under the coordinator.
            fd = os.memfd_create("not-sealed")
            os.ftruncate(fd, 4096 + 2 * 4096)
            socket.send_fds(s, [frame(21, 3, offer)], [fd])
            os.close(fd)
            msg_type, request_id, body = read_frame(s)
            self.assertEqual((msg_type, request_id), (3, 3))
            self.assertIn(b"not sealed at its size", body)
            # The connection stays on the socket and keeps working.
            self.assertEqual(status("unix", coord.address).returncode, 0)
            s.sendall(frame(21, 4, offer))
            self.assertEqual(read_frame(s)[:2], (3, 4))

    def test_a_payload_stream_out_of_order_drops_only_that_client(self):
        with Coordinator(self.config, "unix") as coord, socket.socket(socket.AF_UNIX) as s:
            greet(s, coord.address)
            s.sendall(frame(PAYLOAD_CHUNK, 2, struct.pack("<QQ", 0, 10000), bytes(4096)))
            s.sendall(frame(PAYLOAD_CHUNK, 2, struct.pack("<QQ", 8192, 10000), bytes(4096)))  # skips 4096..8191
            self.assertEqual(s.recv(1), b"", "the coordinator should close the connection")
            self.assertEqual(status("unix", coord.address).returncode, 0, "and still serve others")
            self.assertIn("claims offset 8192 of 10000 bytes, where 4096 of 10000 have come", coord.output())

    def test_a_streamed_message_over_the_buffer_limit_is_refused_clearly(self):
        env = dict(os.environ, FAKEGPU_COORDINATOR_MAX_BUFFER="8192")
        destroy = struct.pack("<Qi", 99, 0)  # CommDestroy of a communicator that does not exist
        with Coordinator(self.config, "unix", env=env) as coord, socket.socket(socket.AF_UNIX) as s:
            greet(s, coord.address)
            s.sendall(frame(PAYLOAD_CHUNK, 2, struct.pack("<QQ", 0, 20000), bytes(8192)))
            s.sendall(frame(PAYLOAD_CHUNK, 2, struct.pack("<QQ", 8192, 20000), bytes(8192)))
            s.sendall(frame(8, 2, destroy, bytes(20000 - 2 * 8192)))  # the message ends the stream
            msg_type, request_id, body = read_frame(s)
            self.assertEqual((msg_type, request_id), (3, 2))
            self.assertIn(b"needs 20012 bytes buffered in the coordinator, more than its limit of 8192 bytes", body)
            # The pieces were dropped in step: the connection is still in sync.
            s.sendall(frame(8, 3, destroy))
            self.assertEqual(read_frame(s)[:2], (3, 3))


PAYLOAD_CHUNK = 22


def frame(msg_type, request_id, fields, bulk=b""):
    return struct.pack("<IIIIQQ", 0x55504746, msg_type, len(fields), 0, request_id, len(fields) + len(bulk)) + \
        fields + bulk


def read_frame(s):
    header = s.recv(32, socket.MSG_WAITALL)
    _, msg_type, fields_bytes, _, request_id, body_bytes = struct.unpack("<IIIIQQ", header)
    return msg_type, request_id, s.recv(body_bytes, socket.MSG_WAITALL)


def greet(s, address):
    """Connects s as a rank: Hello (rank 0 of 2, host "test", no token, 4 KiB chunks, no GPU named), Welcome."""
    s.settimeout(10)
    s.connect(address)
    hello = struct.pack("<IiiI", PROTOCOL_VERSION, 0, 2, os.getpid()) + struct.pack("<I", 4) + b"test" + \
        b"\x00" + struct.pack("<I", 0) + struct.pack("<Q", 4096) + struct.pack("<I", 0)
    s.sendall(frame(1, 1, hello))
    assert read_frame(s)[0] == 2, "Welcome"


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(BODIES[os.environ["DIAGNOSIS_BODY"]])
    else:
        unittest.main()

"""Multi-host over TCP on one machine: the coordinator and each host in its own network namespace,
with its own address, the ranks reaching the coordinator across a bridge.

Collectives are checked element by element, and the report must show each rank on its node and
the data crossing between nodes over the socket, streamed in chunks. Then a host fails in two ways:
- its processes are killed: the kernel closes their connections, so the coordinator fails their
  communicators and the survivors get ncclRemoteError within a second;
- its link vanishes: nothing is closed (no FIN, no RST) and the coordinator cannot tell a lost
  host from a slow one, so the survivors wait until FAKEGPU_COORDINATOR_TIMEOUT_MS, whose error
  names the ranks that went silent and their host. The unplugged ranks are not told either: with
  nothing left to resend and no keepalive, their connections never fail, so they wait until killed.
Needs root, iproute2 and util-linux's unshare; skips (exit code 77) without them.
"""

import json
import os
import pickle
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pynccl import DTYPES, NcclError, rank_main, rank_preload  # noqa: E402
from rank_jobs import Coordinator  # noqa: E402
from fakegpu.launch import rank_environment  # noqa: E402
from virtual_hosts import COORDINATOR_IP, VirtualHosts, missing_requirements  # noqa: E402

HOSTS, RANKS_PER_HOST = 2, 2
WORLD = HOSTS * RANKS_PER_HOST
COUNT = 4099  # odd on purpose: no chunking of the data path divides it
BROADCAST_ROOT = WORLD - 1  # on the last host, so the broadcast crosses hosts
LOOP_COUNT, WARMUP = 64, 20  # every rank completes WARMUP checked iterations before a host fails
LOOP_LIMIT_S = 20  # a looping rank that is never failed stops by itself
RENDEZVOUS_TIMEOUT_S = 2.0
NCCL_REMOTE_ERROR = 6


def node_of(rank):
    return rank // RANKS_PER_HOST


def hostname(node):
    return f"fakegpu-host{node}"


# ---- inputs, shared by the ranks and the reference ------------------------------------------
def allreduce_input(rank):
    return [rank * 7919 - i * (rank + 1) for i in range(COUNT)]


def allgather_input(rank):
    return [rank + i / 8 for i in range(COUNT)]  # eighths: exact in float64


def broadcast_input(rank):
    return [(i * 31 + rank) * (-1) ** i for i in range(COUNT)]


# ---- the bodies the rank processes run -------------------------------------------------------
def run_dir():
    return Path(sys.argv[sys.argv.index("--rank") + 1])


def collectives(nccl, comm, rank, world):
    i64, f64, i32 = DTYPES["int64"][1], DTYPES["float64"][1], DTYPES["int32"][1]
    reduced, reduced_view = nccl.device_array(i64, allreduce_input(rank))
    nccl.all_reduce(reduced, reduced, COUNT, "int64", "sum", comm)
    mine, _ = nccl.device_array(f64, allgather_input(rank))
    gathered, gathered_view = nccl.device_array(f64, [0.0] * (COUNT * world))
    nccl.all_gather(mine, gathered, COUNT, "float64", comm)
    cast, cast_view = nccl.device_array(i32, broadcast_input(rank))
    nccl.broadcast(cast, cast, COUNT, "int32", BROADCAST_ROOT, comm)
    return {"allreduce": list(reduced_view), "allgather": list(gathered_view), "broadcast": list(cast_view),
            "netns": os.stat("/proc/self/ns/net").st_ino}


def looping(nccl, comm, rank, world):
    """AllReduces, each checked, until one fails; returns the error, when it came and the
    communicator's async error. Even ranks queue them on a stream and poll ncclCommGetAsyncError,
    as a framework's watchdog does; odd ranks use the legacy stream, where the call returns it."""
    stream = nccl.stream() if rank % 2 == 0 else None
    buf, view = nccl.device_array(DTYPES["int64"][1], [0] * LOOP_COUNT)
    deadline = time.monotonic() + LOOP_LIMIT_S
    iteration = 0
    while time.monotonic() < deadline:
        view[:] = [rank + iteration] * LOOP_COUNT
        try:
            nccl.all_reduce(buf, buf, LOOP_COUNT, "int64", "sum", comm, stream)
            if stream:
                nccl.synchronize(stream)
                nccl.check(nccl.async_error(comm), "ncclCommGetAsyncError")
        except NcclError as e:
            return {"error": str(e), "failed_at": time.time(), "async_error": nccl.async_error(comm)}
        expected = world * iteration + world * (world - 1) // 2
        assert list(view) == [expected] * LOOP_COUNT, f"iteration {iteration}: {list(view)[:4]}..."
        iteration += 1
        if iteration == WARMUP:
            (run_dir() / f"warm.{rank}").touch()
    return {"error": None}


BODIES = {"collectives": collectives, "looping": looping}


def take_hostname(name):
    """Names the rank's host, so that the coordinator reports it. Only inside the UTS namespace
    that `unshare --uts` made for it: the machine's own name must never change."""
    if os.stat("/proc/self/ns/uts").st_ino == os.stat(f"/proc/{os.getppid()}/ns/uts").st_ino:
        sys.exit("refusing to set the hostname: this rank has no UTS namespace of its own")
    socket.sethostname(name)


# ---- the test --------------------------------------------------------------------------------
def rank_set(ranges: str) -> set:
    """{0, 1, 2, 5} from the coordinator's "0-2, 5"."""
    ranks = set()
    for part in ranges.split(", "):
        first, _, last = part.partition("-")
        ranks.update(range(int(first), int(last or first) + 1))
    return ranks


class MultiHostOverNamespaces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = missing_requirements()
        if reason:
            raise unittest.SkipTest(reason)

    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="fakegpu-netns-"))
        # The shared secret that admits ranks to a coordinator reachable from other hosts.
        self.token = secrets.token_hex(16)
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.hosts = VirtualHosts(HOSTS).create()
        self.addCleanup(self.hosts.close)

    def cluster_config(self):
        nodes = "".join(f"  - {{id: node{n}, host: {VirtualHosts.host_ip(n)}, "
                        f"ranks: [{', '.join(str(n * RANKS_PER_HOST + i) for i in range(RANKS_PER_HOST))}], "
                        f"gpus: [{', '.join(['{profile: h100}'] * RANKS_PER_HOST)}]}}\n" for n in range(HOSTS))
        path = self.dir / "cluster.yaml"
        path.write_text(f"version: 1\ncluster: {{name: netns-{HOSTS}hosts}}\nnodes:\n{nodes}"
                        "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}\n"
                        "  inter_node: {type: infiniband, bandwidth_gbps: 400, latency_us: 5}\n")
        return path

    def start_job(self, body, rendezvous_timeout_s=None):
        """The coordinator in its namespace, then every rank in its host's; returns the ranks."""
        env = dict(os.environ, FAKEGPU_COORDINATOR_TOKEN=self.token)
        env.pop("FAKEGPU_COORDINATOR_TIMEOUT_MS", None)
        if rendezvous_timeout_s:
            env["FAKEGPU_COORDINATOR_TIMEOUT_MS"] = str(int(rendezvous_timeout_s * 1000))
        self.report = self.dir / "report.json"
        self.coordinator = Coordinator(self.cluster_config(), "tcp", address=f"{COORDINATOR_IP}:0", report=self.report,
                                       prefix=self.hosts.exec_prefix(self.hosts.coordinator), env=env).start()
        self.addCleanup(self.coordinator.stop)
        ranks_env = rank_environment(env, "tcp", self.coordinator.address, self.coordinator.cluster_config)
        ranks_env["LD_PRELOAD"] = rank_preload()
        ranks_env["FAKEGPU_STAGING_CHUNK_BYTES"] = "8K"  # every message's data streams in several pieces
        procs = []
        for rank in range(WORLD):
            node = node_of(rank)
            rank_env = dict(ranks_env, RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank % RANKS_PER_HOST),
                            LOCAL_WORLD_SIZE=str(RANKS_PER_HOST), FAKEGPU_NODE=str(node))
            # unshare --uts gives the host its own hostname, which the coordinator reports.
            cmd = [*self.hosts.exec_prefix(self.hosts.hosts[node]), "unshare", "--uts", sys.executable, __file__,
                   "--rank", str(self.dir), body, hostname(node)]
            procs.append(subprocess.Popen(cmd, env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        self.addCleanup(self.reap, procs)
        return procs

    @staticmethod
    def reap(procs):
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def finish(self, procs, ranks, timeout=20):
        """Waits for those ranks, which must exit 0; returns what each rank's body returned."""
        for rank in ranks:
            p = procs[rank]
            try:
                _, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.fail(f"rank {rank} did not finish within {timeout} s (hang); coordinator:\n"
                          f"{self.coordinator.output()}")
            self.assertEqual(p.returncode, 0, f"rank {rank} exited with {p.returncode}:\n{err}")
        return {rank: pickle.loads((self.dir / f"result.{rank}").read_bytes()) for rank in ranks}

    def stop_and_read_report(self):
        self.coordinator.stop()  # SIGTERM: the coordinator writes its report
        return json.loads(self.report.read_text())

    def wait_until_warm(self, procs):
        deadline = time.monotonic() + 20
        while not all((self.dir / f"warm.{r}").exists() for r in range(WORLD)):
            for r, p in enumerate(procs):
                if p.poll() is not None:
                    self.fail(f"rank {r} exited early with {p.returncode}:\n{p.communicate()[1]}")
            self.assertLess(time.monotonic(), deadline, "the ranks did not start looping")
            time.sleep(0.01)

    def test_collectives_across_hosts_are_exact(self):
        procs = self.start_job("collectives")
        results = self.finish(procs, range(WORLD))
        allreduce = [sum(col) for col in zip(*(allreduce_input(r) for r in range(WORLD)))]
        allgather = [x for r in range(WORLD) for x in allgather_input(r)]
        for rank, result in results.items():
            with self.subTest(rank=rank):
                self.assertEqual(result["allreduce"], allreduce)
                self.assertEqual(result["allgather"], allgather)
                self.assertEqual(result["broadcast"], broadcast_input(BROADCAST_ROOT))
                ns = self.hosts.hosts[node_of(rank)]
                self.assertEqual(result["netns"], os.stat(f"/run/netns/{ns}").st_ino, f"rank {rank} is not in {ns}")

        report = self.stop_and_read_report()
        self.assertEqual(report["errors"], [])
        self.assertEqual(report["coordinator"]["transport"], "tcp")
        self.assertTrue(report["coordinator"]["address"].startswith(COORDINATOR_IP + ":"))
        self.assertEqual(report["data_plane"]["shared_memory_bytes"], 0, "hosts share no memory")
        self.assertGreater(report["data_plane"]["socket_bytes"], 0)
        self.assertEqual(report["data_plane"]["control_ring_clients"], 0, "rings are for one host")
        self.assertGreater(report["data_plane"]["payload_chunks_in"], 0, "data streams in chunks over tcp")
        self.assertGreater(report["data_plane"]["payload_chunks_out"], 0)
        crossing = {(p["from"], p["to"]): p["bytes"] for p in report["node_pairs"]}
        self.assertGreater(crossing.get(("node0", "node1"), 0), 0, report["node_pairs"])
        self.assertGreater(crossing.get(("node1", "node0"), 0), 0, report["node_pairs"])
        nodes = report["cluster"]["nodes"]
        for entry in report["ranks"]:
            rank = entry["global_rank"]
            self.assertEqual(entry["pid"], procs[rank].pid)
            self.assertEqual(entry["host"], hostname(node_of(rank)))
            self.assertIn(rank, nodes[node_of(rank)]["ranks"])
            self.assertEqual(nodes[node_of(rank)]["host"], VirtualHosts.host_ip(node_of(rank)))
        self.assertEqual(sorted(e["global_rank"] for e in report["ranks"]), list(range(WORLD)))

    def lose_last_host(self, how, rendezvous_timeout_s=None):
        """Runs the looping job, makes the last host vanish by how(), and waits for the others.
        Returns the ranks, the lost ones, the survivors' results and when the host vanished."""
        procs = self.start_job("looping", rendezvous_timeout_s)
        self.wait_until_warm(procs)
        lost = [r for r in range(WORLD) if node_of(r) == HOSTS - 1]
        vanished_at = time.time()
        how()
        results = self.finish(procs, [r for r in range(WORLD) if r not in lost])
        for rank, result in results.items():
            with self.subTest(rank=rank):
                self.assertIsNotNone(result["error"], "a survivor should have been failed, not left waiting")
                # How the failure reaches the rank depends on its stream (see looping()).
                where = "ncclCommGetAsyncError" if rank % 2 == 0 else "ncclAllReduce"
                self.assertTrue(result["error"].startswith(f"{where}: remote process exited or there was a network "
                                                           "error: "), result["error"])
                if where == "ncclCommGetAsyncError":
                    self.assertEqual(result["async_error"], NCCL_REMOTE_ERROR)
        return procs, lost, results, vanished_at

    def test_killed_host_fails_the_survivors_at_once(self):
        killed = []
        procs, lost, results, killed_at = self.lose_last_host(
            lambda: killed.extend(self.hosts.kill_processes(self.hosts.hosts[-1])))
        self.assertEqual(sorted(killed), sorted(procs[r].pid for r in lost))
        for rank, result in results.items():
            with self.subTest(rank=rank):
                # The kernel closed the killed ranks' connections: the coordinator knew at once.
                self.assertRegex(result["error"], rf"rank [{''.join(map(str, lost))}] of communicator \d+ "
                                                  rf"\(global rank \d+ \(pid \d+ on {hostname(HOSTS - 1)}\)\) "
                                                  "disconnected without destroying it")
                self.assertLess(result["failed_at"] - killed_at, 2.0)
        report = self.stop_and_read_report()
        failures = [c.get("failure", "") for c in report["communicators"]]
        self.assertTrue(any("disconnected without destroying it" in f for f in failures), failures)

    def test_unplugged_host_fails_the_survivors_at_the_rendezvous_timeout(self):
        procs, lost, results, unplugged_at = self.lose_last_host(lambda: self.hosts.unplug(HOSTS - 1),
                                                                 RENDEZVOUS_TIMEOUT_S)
        survivors = sorted(results)
        for rank, result in results.items():
            with self.subTest(rank=rank):
                error = result["error"]
                waiting = re.search(rf"rendezvous timeout after {RENDEZVOUS_TIMEOUT_S:.0f} s on communicator \d+, "
                                    r"operation \d+ \(AllReduce\(count=\d+, int64, sum\)\): ranks? ([\d ,-]+) waited "
                                    "for the others", error)
                self.assertIsNotNone(waiting, error)
                # A lost rank whose post reached the coordinator before the link went is waiting
                # too (for a reply it will never get); the silent ones are named, with their host.
                silent = set(range(WORLD)) - rank_set(waiting.group(1))
                self.assertTrue(silent and silent <= set(lost), error)
                for r in silent:
                    self.assertIn(f"rank {r} (global rank {r} (pid {procs[r].pid} on {hostname(node_of(r))})) "
                                  "is idle: last posted AllReduce", error)
                waited = result["failed_at"] - unplugged_at
                self.assertGreater(waited, RENDEZVOUS_TIMEOUT_S * 0.9)
                self.assertLess(waited, RENDEZVOUS_TIMEOUT_S + 2.0)
        for r in lost:  # nothing closed their connections: they cannot know yet
            self.assertIsNone(procs[r].poll(), f"unplugged rank {r} should still be waiting")
        # TCP keepalive probes (or the unacknowledged-data timeout) find the dead link within about
        # 15 s, on both ends: the unplugged ranks hear that they lost the coordinator.
        for rank, result in self.finish(procs, lost, timeout=40).items():
            with self.subTest(rank=rank):
                self.assertIn("lost connection to the fakegpu coordinator", result["error"] or "")
        report = self.stop_and_read_report()
        timeouts = {e["global_rank"]: e["timeouts"] for e in report["ranks"]}
        self.assertTrue(all(timeouts[r] > 0 for r in survivors), timeouts)
        self.assertTrue(any(timeouts[r] == 0 for r in lost), timeouts)


if __name__ == "__main__":
    if "--rank" in sys.argv:
        body, host = sys.argv[-2:]
        take_hostname(host)
        rank_main(BODIES[body])
    else:
        reason = missing_requirements()
        if reason:
            print(f"SKIP: {reason}")
            sys.exit(77)  # ctest's SKIP_RETURN_CODE
        unittest.main(verbosity=2)

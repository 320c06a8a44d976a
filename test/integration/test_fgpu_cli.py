"""The fgpu launcher: validate, report, running a command, and its error messages."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import jsonschema

from rank_jobs import CONFIGS, FGPU, REPO, TWO_BY_TWO, built, fgpu
from fakegpu.modes import local_gpus

# torchrun's static-rendezvous interface, enough to start one node's ranks.
FAKE_TORCHRUN = """#!/usr/bin/env python3
import argparse, os, subprocess, sys
p = argparse.ArgumentParser()
for flag in ("--nnodes", "--node_rank", "--nproc_per_node", "--master_port"):
    p.add_argument(flag, type=int, required=True)
p.add_argument("--master_addr", required=True)
p.add_argument("script", nargs=argparse.REMAINDER)
a = p.parse_args()
procs = []
for local in range(a.nproc_per_node):
    env = dict(os.environ, RANK=str(a.node_rank * a.nproc_per_node + local), LOCAL_RANK=str(local),
               WORLD_SIZE=str(a.nnodes * a.nproc_per_node), MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port))
    procs.append(subprocess.Popen(a.script, env=env))
sys.exit(max(p.wait() for p in procs))
"""

# mpirun on one machine: every rank local to it (OpenMPI's variables).
FAKE_MPIRUN = """#!/usr/bin/env python3
import os, subprocess, sys
n = int(sys.argv[2])  # mpirun -np N COMMAND...
procs = [subprocess.Popen(sys.argv[3:], env=dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE=str(n),
                                                 OMPI_COMM_WORLD_LOCAL_RANK=str(r), OMPI_COMM_WORLD_LOCAL_SIZE=str(n)))
         for r in range(n)]
sys.exit(max(p.wait() for p in procs))
"""


def stand_in_launch(launcher, launcher_text, rank_text):
    """A directory holding an executable stand-in for `launcher`, the 2 x 2 cluster and an
    executable rank.sh; returns (directory, cluster config, rank.sh, environment finding the
    stand-in first)."""
    tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
    config = tmp / "cluster.yaml"
    config.write_text(TWO_BY_TWO)
    for path, text in ((tmp / launcher, launcher_text), (tmp / "rank.sh", rank_text(tmp))):
        path.write_text(text)
        path.chmod(0o755)
    return tmp, config, tmp / "rank.sh", dict(os.environ, PATH=f"{tmp}:{os.environ['PATH']}")


def nccl_check_line(tmp):
    return f'exec {built("nccl_check")} {tmp / "id"} --tp 2 --iters 2 --count 1024\n'


def report_hosts(path):
    return {x["global_rank"]: x["host"] for x in json.loads(path.read_text())["ranks"]}


class FgpuCli(unittest.TestCase):
    def test_validate_accepts_good_and_rejects_bad_configs(self):
        ok = fgpu("validate", CONFIGS / "cluster_valid.yaml")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("world size 4", ok.stdout)
        for bad in sorted((CONFIGS / "invalid").glob("*.yaml")):
            expected = bad.with_suffix(".expected").read_text().strip()
            r = fgpu("validate", bad)
            with self.subTest(config=bad.name):
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(expected, r.stderr)

    def test_validate_takes_several_configs(self):
        bad = sorted((CONFIGS / "invalid").glob("*.yaml"))[0]
        r = fgpu("validate", CONFIGS / "cluster_valid.yaml", CONFIGS / "single_node_8gpu.yaml", bad)
        self.assertEqual(r.returncode, 1, "one of them is bad")
        self.assertIn("cluster_valid.yaml: OK: cluster 'dev-cluster', 2 nodes, world size 4", r.stdout)
        self.assertIn("single_node_8gpu.yaml: OK:", r.stdout)
        self.assertIn(", 1 node, world size 8", r.stdout)
        self.assertIn("fgpu validate: ", r.stderr)
        self.assertNotIn("fakegpu-coordinator:", r.stderr)
        self.assertIn(bad.with_suffix(".expected").read_text().strip(), r.stderr)

    def test_module_runs_from_any_directory(self):
        # ./scripts/setup installs the launcher editable into build/torch-venv.
        python = REPO / "build" / "torch-venv" / "bin" / "python"
        if not python.exists():
            self.skipTest("build/torch-venv is not set up (./scripts/setup makes it)")
        elsewhere = tempfile.mkdtemp(prefix="fakegpu-cli-")
        try:
            r = subprocess.run([python, "-m", "fakegpu", "validate", CONFIGS / "cluster_valid.yaml"], cwd=elsewhere,
                               capture_output=True, text=True, timeout=60)
        finally:
            shutil.rmtree(elsewhere)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("world size 4", r.stdout)

    def test_report_names_what_the_file_is_instead(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        (tmp / "r.md").write_text("# fakegpu cluster report\n")
        (tmp / "r.trace.json").write_text('{"traceEvents": []}')
        (tmp / "other.json").write_text('{"a": 1}')
        for name, says in [("missing.json", "cannot read the report"), ("r.md", "the Markdown companion"),
                           ("r.trace.json", "is the Perfetto trace"), ("other.json", "not a fakegpu cluster report")]:
            with self.subTest(file=name):
                r = fgpu("report", tmp / name)
                self.assertEqual(r.returncode, 2)
                self.assertIn(says, r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_calibrate_refuses_without_a_real_gpu(self):
        # fgpu calibrate measures a real NVIDIA GPU; a Python without PyTorch, or a machine without
        # a GPU, is refused with one line saying so (with a GPU, an unknown class of cases is).
        r = fgpu("calibrate", "--python", sys.executable)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("has no PyTorch; give --python a Python with its CUDA build", r.stderr)
        venv = REPO / "build" / "torch-venv" / "bin" / "python"
        if venv.exists():
            r = fgpu("calibrate", "--only", "no-such-class", "--out", Path(tempfile.mkdtemp()) / "t.jsonl")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertTrue("no NVIDIA GPU here" in r.stderr or "no cases of class 'no-such-class'" in r.stderr, r.stderr)
            self.assertNotIn("Traceback", r.stderr)

    def test_nproc_below_one_is_refused(self):
        for n in ("0", "-3"):
            with self.subTest(nproc=n):
                r = fgpu("--nproc", n, "true")
                self.assertEqual(r.returncode, 2)
                self.assertIn(f"--nproc {n}: the number of ranks must be at least 1", r.stderr)

    def test_runs_n_ranks_and_summarises(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        report = tmp / "r.json"
        r = fgpu("--nproc", 4, "--cluster-config", CONFIGS / "cluster_valid.yaml", "--report", report,
                 built("nccl_check"), tmp / "id")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"cluster report written to {report}", r.stdout)
        self.assertIn("AllReduce:", r.stdout)
        self.assertIn("over the socket", r.stdout)
        data = json.loads(report.read_text())
        self.assertEqual(data["world_size"], 4)
        self.assertEqual(data["data_plane"]["socket_bytes"], 0, "cudaMalloc buffers move in place")
        summary = fgpu("report", report)
        self.assertEqual(summary.returncode, 0)
        self.assertIn("cluster 'dev-cluster'", summary.stdout)

    def test_demo_runs_the_tp_dp_job(self):
        # The README's first command: 16 ranks on 2 nodes x 8 GPUs, split into TP (8 per node)
        # and DP (2 across nodes), allreducing on each and on both in one group.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        r = fgpu("demo", "--report", tmp / "demo.json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("all 16 ranks verified every element", r.stdout)
        report = json.loads((tmp / "demo.json").read_text())
        self.assertEqual(report["world_size"], 16)
        sizes = sorted(c["nranks"] for c in report["communicators"])
        self.assertEqual(sizes, [2] * 8 + [8] * 2 + [16])
        tp = [c["global_ranks"] for c in report["communicators"] if c["nranks"] == 8]
        self.assertEqual(sorted(tp), [list(range(8)), list(range(8, 16))])
        dp = [c["global_ranks"] for c in report["communicators"] if c["nranks"] == 2]
        self.assertEqual(sorted(dp), [[g, g + 8] for g in range(8)])
        # One machine plays both nodes: each rank reports its virtual node as its host.
        hosts = {r["global_rank"]: r["host"] for r in report["ranks"]}
        self.assertEqual(hosts, {g: "node0" if g < 8 else "node1" for g in range(16)})
        # Every allreduce is priced by the cost model on the communicator's own GPUs.
        allreduce = report["collectives"]["AllReduce"]
        self.assertGreater(allreduce["modeled_time_us"], 0)
        self.assertEqual(sum(allreduce["algorithms"].values()), allreduce["calls"])
        self.assertIn("modeled", r.stdout)
        # Per kind of operation: its plan and time; calls add up to the collective's.
        kinds = [o for o in report["operations"] if o["collective"] == "AllReduce"]
        self.assertEqual(sum(o["calls"] for o in kinds), allreduce["calls"])
        for o in kinds:
            self.assertIn(o["protocol"], ("LL", "LL128", "Simple"))
            self.assertAlmostEqual(o["algbw_gbs"], o["bytes"] / o["modeled_time_us"] / 1e3, places=6)
        # TP and DP overlap on the timeline: the job takes less than its operations' sum.
        totals = report["totals"]
        self.assertLess(totals["modeled_makespan_us"], totals["modeled_time_us"])
        # DP crosses nodes on every rail NIC; TP stays on NVLink.
        names = {link["link"] for link in report["links"]}
        self.assertTrue({f"node0/nic{g} tx" for g in range(8)} <= names, names)
        for link in report["links"]:
            self.assertLessEqual(link["utilization"], 1.0 + 1e-9)
        # Traffic per node pair: TP inside each node, DP and the world across both ways.
        pairs = {(p["from"], p["to"]): p["bytes"] for p in report["node_pairs"]}
        for pair in (("node0", "node0"), ("node1", "node1"), ("node0", "node1"), ("node1", "node0")):
            self.assertGreater(pairs.get(pair, 0), 0, pairs)
        self.assertEqual(pairs[("node0", "node1")], pairs[("node1", "node0")], "allreduce traffic is symmetric")
        # Every communicator the model priced lists its rings and trees, one per channel.
        world = next(c for c in report["communicators"] if c["nranks"] == 16)
        self.assertEqual(len(world["channels"]["rings"]), world["channels"]["count"])
        for ring in world["channels"]["rings"]:
            self.assertEqual(sorted(ring), list(range(16)))
        # Rank pairs by NCCL path type: 2 x 28 pairs inside the nodes on NVLink, 64 across.
        self.assertEqual(world["channels"]["path_types"], {"NVL": 56, "NET": 64})
        self.assertIn("modeled timeline", r.stdout)
        # Every rank's GPU holds its CUDA context and NCCL's buffers for its three communicators
        # (world, TP, DP), by NCCL's rules (test_nccl_memory.cpp); cudaMemGetInfo counts them.
        memory = {r["global_rank"]: r for r in report["memory"]["ranks"]}
        self.assertEqual(sorted(memory), list(range(16)))
        for entry in memory.values():
            parts = entry["peak"]["parts"]
            self.assertGreater(parts["nccl"], 200 << 20, entry)
            self.assertGreater(parts["context"], 400 << 20, entry)
            self.assertEqual(entry["peak"]["bytes"], sum(parts.values()))
            self.assertEqual(entry["in_use_at_end"]["nccl"], 0, "destroyed communicators give their buffers back")
        self.assertTrue(report["memory"]["fits"])
        self.assertIn("peak GPU memory: ", r.stdout)
        # The report follows its published schema; a report missing a section does not.
        schema = json.loads((REPO / "docs" / "report.schema.json").read_text())
        jsonschema.validate(report, schema)
        broken = dict(report)
        del broken["links"]
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
        # The Markdown companion and the trace sit beside the JSON.
        md = (tmp / "demo.md").read_text()
        for section in ("## Collectives", "## Operations", "## Busiest links", "## Traffic between nodes", "## Ranks",
                        "## Communicators"):
            self.assertIn(section, md)
        self.assertIn("| AllReduce | 63 |", md)
        trace = json.loads((tmp / "demo.trace.json").read_text())["traceEvents"]
        slices = [e for e in trace if e["ph"] == "X" and e["cat"].startswith("comm")]
        # One NCCL slice per rank per call: world 3 x 16, TP 2 x 6 x 8, DP 8 x 6 x 2.
        self.assertEqual(len(slices), 3 * 16 + 2 * 6 * 8 + 8 * 6 * 2)
        # Each rank has a track per stream (thread id rank * 1000 + n): the demo's collectives
        # share one stream, its copies and checks another.
        self.assertEqual({e["tid"] // 1000 for e in slices}, set(range(16)))
        self.assertEqual({e["pid"] for e in slices if e["tid"] >= 8000}, {2}, "ranks 8-15 on node1's track group")
        for e in slices:
            self.assertGreater(e["dur"], 0)
        # Program order: each rank synchronizes after every call, so on each of its tracks no
        # slice starts before the previous one ended (the grouped TP and DP calls run side by
        # side, on the same stream, as one NCCL group).
        by_track = {}
        for e in sorted(slices, key=lambda e: e["ts"]):
            by_track.setdefault((e["tid"], e["ts"]), []).append(e)
        ends = {}
        for (tid, ts), group in sorted(by_track.items(), key=lambda kv: kv[0][1]):
            self.assertGreaterEqual(ts, ends.get(tid, 0) - 1e-6, f"track {tid}: a call starts before the last ended")
            ends[tid] = max(e["ts"] + e["dur"] for e in group)
        self.assertTrue(any(e["cat"] == "copy" for e in trace if e["ph"] == "X"), "the ranks' copies are traced")
        # Each rank waits for every call it makes, so its modeled run is the sum of its dependent
        # operations: its slices (copies, checks, calls) leave no gap from 0 to its last end.
        run_us = report["steps"]["median_time_us"]
        for rank in range(16):
            covered = 0.0
            for start, end in sorted((e["ts"], e["ts"] + e["dur"]) for e in trace
                                     if e["ph"] == "X" and e["tid"] // 1000 == rank):
                self.assertLessEqual(start, covered + 1e-3, f"rank {rank} idles from {covered} to {start} us")
                covered = max(covered, end)
            self.assertLessEqual(covered, run_us + 1e-3)
            self.assertGreater(covered, 0.99 * run_us, "the slowest rank's run is the job's")
        counters = [e for e in trace if e["ph"] == "C" and "busy" in e["args"]]
        self.assertTrue({"NVLink busy %", "network busy %"} <= {e["name"] for e in counters})
        for e in counters:
            self.assertLessEqual(e["args"]["busy"], 100.0 + 1e-6)
        # Each rank's GPU memory is a counter too, in GiB, never past the GPU's 79.6.
        memory = [e for e in trace if e["ph"] == "C" and e["name"].endswith(" GPU memory")]
        self.assertEqual({e["name"] for e in memory}, {f"rank {g} GPU memory" for g in range(16)})
        self.assertTrue(all(0 < e["args"]["GiB"] < 79.7 for e in memory))

    def test_returns_the_command_exit_code(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        r = fgpu("--report", tmp / "r.json", "sh", "-c", "exit 7")
        self.assertEqual(r.returncode, 7)

    def test_command_sees_the_coordinator_environment(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        r = fgpu("--report", tmp / "r.json", "sh", "-c", 'echo "$FAKEGPU_COORDINATOR_ADDR|$LD_PRELOAD"')
        addr, preload = r.stdout.splitlines()[0].split("|")
        self.assertTrue(os.path.isabs(addr))
        self.assertIn("libnccl.so.2", preload)

    def test_coordinator_live_line_only_on_a_terminal(self):
        if not shutil.which("script"):
            self.skipTest("script(1) is needed to give the coordinator a terminal")
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        coordinator = [str(built("fakegpu-coordinator")), "--cluster-config", str(CONFIGS / "cluster_valid.yaml")]
        on_tty = subprocess.run(["script", "-qec", shlex.join(["timeout", "-s", "TERM", "3", *coordinator,
                                                                "--address", str(tmp / "a.sock")]), "/dev/null"],
                                capture_output=True, text=True, timeout=30)
        self.assertIn("0 ranks, 0 operations, 0.0 ms modeled", on_tty.stdout)
        piped = subprocess.run(["timeout", "-s", "TERM", "3", *coordinator, "--address", str(tmp / "b.sock")],
                               capture_output=True, text=True, timeout=30)
        self.assertIn("shutting down", piped.stdout)
        self.assertNotIn("ms modeled", piped.stdout + piped.stderr)

    def test_missing_command_is_a_clear_error(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        r = fgpu("--report", tmp / "r.json", "--nproc", "2", tmp / "no-such-program")
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot run", r.stderr)
        self.assertIn("no-such-program", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_a_malformed_setting_stops_the_coordinator(self):
        # Refused before anything listens or any rank starts, naming the variable: exit 2 from the
        # coordinator, and from fgpu, which starts one.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        env = dict(os.environ, FAKEGPU_TRACE_MAX_OPS="lots")
        refusal = "FAKEGPU_TRACE_MAX_OPS=lots: expected a whole number of at least 1"
        r = subprocess.run([str(built("fakegpu-coordinator")), "--cluster-config", str(CONFIGS / "cluster_valid.yaml"),
                            "--address", str(tmp / "a.sock")], capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(refusal, r.stderr)
        self.assertFalse((tmp / "a.sock").exists())
        r = fgpu("--report", tmp / "r.json", "--nproc", "2", "true", env=env)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(refusal, r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_shared_coordinator_start_status_stop(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        state, report = tmp / "state.json", tmp / "shared" / "r.json"
        common = ["--state-file", state]
        self.assertEqual(fgpu("coordinator", "status", *common).returncode, 3)
        started = fgpu("coordinator", "start", *common, "--cluster-config", CONFIGS / "cluster_valid.yaml",
                       "--report", report)
        self.assertEqual(started.returncode, 0, started.stderr)
        try:
            self.assertEqual(fgpu("coordinator", "start", *common).returncode, 1, "one per state file")
            status = fgpu("coordinator", "status", *common)
            self.assertEqual(status.returncode, 0)
            address = json.loads(state.read_text())["address"]
            self.assertIn(address, status.stdout)
            # Two jobs share it; the coordinator keeps running between them.
            for _ in range(2):
                job = fgpu("--coordinator-addr", address, "--cluster-config", CONFIGS / "cluster_valid.yaml",
                           "--nproc", "4", built("allreduce_bench"), tmp / f"id{_}", "1024", "3")
                self.assertEqual(job.returncode, 0, job.stderr)
            self.assertEqual(fgpu("coordinator", "status", *common).returncode, 0)
        finally:
            stopped = fgpu("coordinator", "stop", *common)
        self.assertEqual(stopped.returncode, 0, stopped.stdout)
        self.assertEqual(fgpu("coordinator", "status", *common).returncode, 3)
        data = json.loads(report.read_text())
        self.assertGreaterEqual(data["collectives"]["AllReduce"]["calls"], 2 * 4)
        self.assertTrue(report.with_suffix(".md").exists())

    def test_status_shows_a_running_jobs_ranks(self):
        # While the job runs, its command asks for the status: first of its own coordinator (named
        # in its environment), then, as another shell would, of the jobs running.
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp))
        script = f"{FGPU} coordinator status && env -u FAKEGPU_COORDINATOR_ADDR {FGPU} coordinator status"
        r = fgpu("--report", tmp / "r.json", "--", "sh", "-c", script, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("0 of 8 ranks connected, 0 operations completed"), 2, r.stdout)
        self.assertIn("fgpu job coordinator at", r.stdout)
        self.assertIn(f"for: sh -c {script}", r.stdout)
        self.assertEqual(fgpu("coordinator", "status", env=env).returncode, 3, "the job has ended")

    def test_torchrun_starts_one_launcher_per_node(self):
        # torchrun itself is not needed: a stand-in with its interface starts the ranks (RANK,
        # LOCAL_RANK, WORLD_SIZE from --nnodes/--node_rank/--nproc_per_node) and fgpu must give
        # it one launch per node of a 2 x 2 cluster.
        # Each rank records what it was told, then runs the NCCL check.
        tmp, config, rank, env = stand_in_launch("torchrun", FAKE_TORCHRUN, lambda tmp: (
            '#!/bin/sh\necho "$RANK $LOCAL_RANK $FAKEGPU_NODE $FAKEGPU_HOSTNAME" > "$0.$RANK"\n' + nccl_check_line(tmp)))
        r = fgpu("--cluster-config", config, "--report", tmp / "r.json", "torchrun", "--standalone",
                 "--nproc_per_node=2", rank, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(": OK ("), 4, r.stdout)
        for g in range(4):
            told = (tmp / f"rank.sh.{g}").read_text().split()
            self.assertEqual(told, [str(g), str(g % 2), str(g // 2), f"n{g // 2}"])
        self.assertEqual(report_hosts(tmp / "r.json"), {0: "n0", 1: "n0", 2: "n1", 3: "n1"})
        wrong = fgpu("--cluster-config", config, "torchrun", "--nproc_per_node=4", rank, env=env)
        self.assertEqual(wrong.returncode, 2)
        self.assertIn("torchrun --nproc_per_node 4 does not match the cluster config, which has 2 nodes of 2 GPUs",
                      wrong.stderr)
        # --nproc copies the command, and each torchrun would start a job of its own: refused.
        twice = fgpu("--nproc", "4", "torchrun", "--nproc_per_node=4", rank, env=env)
        self.assertEqual(twice.returncode, 2)
        self.assertIn("--nproc 4 starts 4 copies of the command, and torchrun starts ranks of its own", twice.stderr)

    def test_mpirun_ranks_take_their_virtual_node(self):
        # A launcher fgpu cannot split per node: each rank takes its node of a 2 x 2 cluster as
        # it starts (local rank variables, FAKEGPU_NODE, host name), so a program that groups
        # ranks by gethostname() (nccl-tests) finds two hosts.
        tmp, config, rank, env = stand_in_launch("mpirun", FAKE_MPIRUN, lambda tmp: (
            '#!/bin/sh\n'
            'host=$(python3 -c "import socket; print(socket.gethostname())")\n'
            'echo "$OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE $FAKEGPU_NODE $host" > "$0.$OMPI_COMM_WORLD_RANK"\n'
            'RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK '
            + nccl_check_line(tmp)))
        r = fgpu("--cluster-config", config, "--report", tmp / "r.json", "mpirun", "-np", "4", rank, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(": OK ("), 4, r.stdout)
        for g in range(4):
            told = (tmp / f"rank.sh.{g}").read_text().split()
            self.assertEqual(told, [str(g % 2), "2", str(g // 2), f"n{g // 2}"])
        self.assertEqual(report_hosts(tmp / "r.json"), {0: "n0", 1: "n0", 2: "n1", 3: "n1"})
        # A rank already placed keeps its place; a process that is no rank is left alone.
        probe = [sys.executable, "-c", "import os, socket; print(os.environ.get('OMPI_COMM_WORLD_LOCAL_RANK'), "
                 "os.environ.get('FAKEGPU_HOSTNAME'), socket.gethostname() == os.uname().nodename)"]
        base = dict(os.environ, LD_PRELOAD=str(built("libnccl.so.2")), FAKEGPU_VIRTUAL_NODES="n0=0-1;n1=2-3",
                    OMPI_COMM_WORLD_LOCAL_RANK="3")
        base.pop("FAKEGPU_HOSTNAME", None)
        for extra in ({"OMPI_COMM_WORLD_RANK": "3", "FAKEGPU_NODE": "0"}, {}):
            out = subprocess.run(probe, env=dict(base, **extra), capture_output=True, text=True)
            self.assertEqual(out.stdout.split(), ["3", "None", "True"], out.stderr)

    def test_gpu_modes_say_what_is_missing(self):
        gpus, _ = local_gpus()
        env = {k: v for k, v in os.environ.items() if k != "FAKEGPU_REAL_NCCL_PATH"}
        pairs = [["--dist-mode", "proxy"], ["--mode", "passthrough", "--dist-mode", "passthrough"]]
        if gpus == 0:  # with a GPU, hybrid runs (test_hybrid_mode.py)
            pairs.append(["--mode", "hybrid"])
        for pair in pairs:
            r = fgpu(*pair, "true", env=env)
            self.assertEqual(r.returncode, 2, pair)
            self.assertNotIn("Traceback", r.stderr)
            if gpus == 0:
                self.assertIn("runs on a real GPU, and this machine has none: ", r.stderr)
            elif "--dist-mode" in pair:
                self.assertIn("set FAKEGPU_REAL_NCCL_PATH", r.stderr)
            else:
                self.assertIn("does not implement this mode yet", r.stderr)
        r = fgpu("--mode", "bogus", "true")
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid choice: 'bogus'", r.stderr)

    def test_missing_coordinator_address_is_named(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-cli-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAKEGPU_")}
        env.update(RANK="0", WORLD_SIZE="1", LD_PRELOAD=str(built("libnccl.so.2")))
        r = subprocess.run([str(built("nccl_check")), str(tmp / "id")], capture_output=True, text=True, env=env,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("FAKEGPU_COORDINATOR_ADDR is not set", r.stderr)

    def test_model_prints_a_sweep_like_nccl_tests(self):
        r = fgpu("model", "--cluster-config", CONFIGS / "demo_2node_16gpu.yaml", "--collective", "all_reduce",
                 "-b", "8", "-e", "1G", "-f", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.split() for line in r.stdout.splitlines() if line and not line.startswith("#")]
        self.assertEqual([int(row[0]) for row in rows], [8 * 4 ** k for k in range(14)])
        times = [float(row[5]) for row in rows]
        self.assertTrue(all(t > 0 for t in times))
        self.assertGreater(times[-1], times[0] * 50, "512 MiB should take far longer than 8 bytes")
        self.assertIn(rows[0][8], ("Ring", "Tree"))  # the small end uses a low-latency protocol
        self.assertEqual(rows[0][9], "LL")

    def test_model_json_covers_every_collective_and_honours_forcing(self):
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--collective", "all",
                 "-b", "1M", "-e", "1M", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["ranks"], 8)
        names = {row["collective"] for row in doc["results"]}
        self.assertEqual(names, {"all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall",
                                 "sendrecv", "gather", "scatter"})
        forced = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "-b", "1G", "-e", "1G",
                      "--algo", "ring", "--proto", "simple", "--json")
        row = json.loads(forced.stdout)["results"][0]
        self.assertEqual((row["algorithm"], row["protocol"]), ("Ring", "Simple"))
        # 1024 ranks: the demo's node shape repeated over 128 nodes.
        big = fgpu("model", "--cluster-config", CONFIGS / "demo_2node_16gpu.yaml", "--nodes", "128", "-b", "8",
                   "-e", "4G", "--json")
        self.assertEqual(big.returncode, 0, big.stderr)
        self.assertEqual(json.loads(big.stdout)["ranks"], 1024)

    def test_model_lists_the_flow_plan(self):
        size = 1 << 20
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "-b", str(size), "-e", str(size),
                 "--algo", "ring", "--flows", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        flows = json.loads(r.stdout)["results"][0]["flows"]
        # Ring AllReduce: all ranks together send 2(n-1)/n of the buffer each.
        total = sum(f["bytes_per_step"] * f["steps"] for f in flows)
        self.assertAlmostEqual(total, 8 * 2 * 7 / 8 * size, delta=1)
        self.assertTrue(all(f["src"].startswith("rank ") and f["dst"].startswith("rank ") for f in flows))
        nvls = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "-b", "1G", "-e", "1G",
                    "--algo", "nvls", "--flows")
        self.assertIn("-> nvswitch", nvls.stdout)

    def test_model_rejects_bad_input_clearly(self):
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--algo", "hypercube")
        self.assertEqual(r.returncode, 2)
        self.assertIn("hypercube", r.stderr)
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--collective", "allgatherv")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown --collective 'allgatherv'; use one of all_gather, all_reduce, alltoall,", r.stderr)
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--datatype", "fp12")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown --datatype 'fp12'; use one of bfloat16, double,", r.stderr)
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "-b", "1G", "-e", "1M")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--min-bytes 1G is larger than --max-bytes 1M", r.stderr)
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--nodes", "2")
        self.assertIn("fabric.inter_node is needed", r.stderr)
        # More GPUs than the cluster has: named, not quietly fewer.
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--gpus-per-node", "9")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpus-per-node 9: node 'node0' of", r.stderr)
        self.assertIn("single_node_8gpu.yaml has 8 GPUs", r.stderr)
        r = fgpu("model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "--ranks", "9")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--ranks 9: the cluster modeled has 8 GPUs", r.stderr)

    def test_model_takes_the_names_people_use(self):
        base = ["model", "--cluster-config", CONFIGS / "single_node_8gpu.yaml", "-b", "1M", "-e", "1M", "--json"]
        plain = json.loads(fgpu(*base).stdout)
        for coll, dtype in [("allreduce", "fp32"), ("AllReduce", "float32"), ("all-reduce", "float")]:
            with self.subTest(collective=coll, datatype=dtype):
                r = fgpu(*base, "--collective", coll, "--datatype", dtype)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout), plain)
        half = json.loads(fgpu(*base, "--datatype", "fp16").stdout)
        self.assertEqual(half["datatype"], "half")
        self.assertEqual(fgpu(*base, "--datatype", "bf16").returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

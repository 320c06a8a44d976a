"""`fgpu --representative` against running every rank: the same SPMD training job
(test/torch/representative_job.py, shapes mode) on the same cluster, once with a process per rank and
once with rank 0 alone (or the processes a test lists), the coordinator standing in for the rest.
The predicted step time, every communicator's collectives, every rank's calls, bytes and
communicator inits, and every rank's peak GPU memory must agree, also where PyTorch makes the
groups by splitting the world's communicator. Besides: what a representative run refuses, and what
stood-in ranks send. Skips (exit 77) without PyTorch's CUDA build in build/torch-venv."""

import json
import os
import tempfile
import unittest
from pathlib import Path

from torch_jobs import PYTHON, TORCH_SCRIPTS, TORCHRUN, fgpu_torch, require_torch

JOB = TORCH_SCRIPTS / "representative_job.py"
# PyTorch's caching allocator may take one more large segment in one run than in the other: a block
# freed while a collective on another stream still uses it (DDP's buckets) is reused only once that
# stream has really got there, which depends on how fast the processes ran, not on the model.
ALLOCATOR_SEGMENT = 20 << 20


def communicators(report):
    """Collectives by (kind of group, global ranks): ids and group numbers differ between runs."""
    return {(c["name"].rpartition(":")[0], tuple(c["global_ranks"])): c["collectives"] for c in report["communicators"]}


def ranks(report):
    return {r["global_rank"]: (r["collectives"], r["bytes"], r["comm_inits"]) for r in report["ranks"]}


def peaks(report):
    return {m["global_rank"]: m["peak"]["bytes"] for m in report["memory"]["ranks"]}


class Representative(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-representative-"))

    def run_job(self, nodes, per_node, style, *flags, torchrun=False, job_flags=(), processes=None):
        report = self.tmp / f"{style}-{nodes}x{per_node}{''.join(flags + job_flags)}{processes or ''}.json"
        env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes")
        if processes:
            env["FAKEGPU_REPRESENTATIVE"] = processes
        world = nodes * per_node
        command = ([TORCHRUN, f"--nnodes={nodes}", f"--nproc_per_node={per_node}", JOB] if torchrun
                   else ["--nproc", world, PYTHON, JOB])
        r = fgpu_torch(*flags, "--gpu", "h100", "--nodes", nodes, "--gpus-per-node", per_node, "--report", report,
                       *command, "--style", style, *job_flags, env=env, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-6000:])
        return r, json.loads(report.read_text())

    def check_same(self, nodes, per_node, style, torchrun=False, job_flags=(), processes=None):
        _, full = self.run_job(nodes, per_node, style, job_flags=job_flags)
        r, rep = self.run_job(nodes, per_node, style, "--representative", torchrun=torchrun, job_flags=job_flags,
                              processes=processes)
        world = nodes * per_node
        ran = [int(p) for p in processes.split(",")] if processes else [0]
        self.assertEqual(rep["representative"]["processes"], ran)
        self.assertEqual(rep["representative"]["stood_in"], [r for r in range(world) if r not in ran])
        self.assertIn(f"representative run: {len(ran)} rank(s) ran as processes", r.stdout)
        self.assertIn(f"the coordinator stood in for {world - len(ran)}", r.stdout)
        self.assertEqual(full["steps"]["count"], rep["steps"]["count"])
        self.assertAlmostEqual(rep["steps"]["median_time_us"] / full["steps"]["median_time_us"], 1.0, delta=0.01)
        self.assertEqual(communicators(rep), communicators(full))
        for kind, figures in full["collectives"].items():  # modeled times are sums, in another order
            self.assertEqual((rep["collectives"][kind]["calls"], rep["collectives"][kind]["bytes"]),
                             (figures["calls"], figures["bytes"]), kind)
            self.assertAlmostEqual(rep["collectives"][kind]["modeled_time_us"], figures["modeled_time_us"], places=3)
        self.assertEqual(sorted(rep["collectives"]), sorted(full["collectives"]))
        self.assertEqual(ranks(rep), ranks(full))
        self.assertEqual(sorted(peaks(rep)), list(range(world)))
        for rank, bytes_ in peaks(full).items():
            self.assertLessEqual(abs(peaks(rep)[rank] - bytes_), 0.005 * bytes_ + ALLOCATOR_SEGMENT,
                                 f"rank {rank}: {peaks(rep)[rank]} bytes at its peak, {bytes_} with every rank run")
        return full, rep, r.stdout

    def test_ddp_on_eight_ranks(self):
        self.check_same(2, 4, "ddp")

    def test_fsdp_on_eight_ranks(self):
        self.check_same(2, 4, "fsdp")

    def test_ddp_on_sixteen_ranks(self):
        self.check_same(2, 8, "ddp")

    def test_fsdp_on_sixteen_ranks(self):
        self.check_same(2, 8, "fsdp")

    def test_pipeline_of_two_stages_on_eight_ranks(self):
        # A process per stage: the stood-in ranks of each stage repeat its first rank.
        full, _, _ = self.check_same(2, 4, "pp", processes="0,4")
        self.assertIn("Send", full["collectives"], "the stages pass activations and gradients point to point")

    def test_pipeline_of_two_stages_on_sixteen_ranks(self):
        self.check_same(2, 8, "pp", processes="0,8")

    def test_fsdp_by_tensor_parallel_on_eight_ranks_from_torchrun(self):
        full, _, _ = self.check_same(2, 4, "tp_dp", torchrun=True)
        self.assertGreater(len(full["communicators"]), 3, "TP and FSDP groups each have communicators")

    def test_fsdp_by_tensor_parallel_on_sixteen_ranks(self):
        self.check_same(2, 8, "tp_dp")

    def test_communicators_of_more_than_128_ranks_from_one_process(self):
        # PyTorch initialises a communicator of over 128 ranks from several roots, each of which
        # publishes an NCCL id; stood-in roots publish none, so fgpu asks for one root.
        r, report = self.run_job(17, 8, "fsdp", "--representative")
        self.assertEqual(report["world_size"], 136)
        self.assertIn(136, [len(c["global_ranks"]) for c in report["communicators"]])
        self.assertEqual(report["steps"]["count"], 4)  # the job's four AdamW steps

    def test_fsdp_by_tensor_parallel_from_split_communicators_on_eight_ranks(self):
        # With a device_id, PyTorch splits each mesh dimension's groups from the world's
        # communicator in one ncclCommSplit instead of making them with new_group.
        full, _, _ = self.check_same(2, 4, "tp_dp", job_flags=("--device-id",))
        self.assertTrue(any("/split" in c["name"] for c in full["communicators"]), full["communicators"])

    def test_rank_one_as_a_process_too(self):
        # How a job whose rank 0 does work of its own runs: ranks 2-7 repeat rank 1. On a 2 x 4
        # (dp, tp) mesh rank 4 repeats rank 1, but its dp group (0, 4) holds rank 0, not rank 1,
        # so there it repeats rank 0; the dp groups (2, 6) and (3, 7) repeat rank 1's (1, 5).
        _, _, output = self.check_same(2, 4, "tp_dp", processes="0,1")
        self.assertIn("ranks 0 and 1 compute alike", output)

    def test_a_group_whose_first_rank_runs_no_process_is_refused(self):
        # Rank 7's dp group (3, 7) starts at rank 3, and its tp group (4-7) at rank 4: a group's
        # broadcasts and scatters start at its first rank, which only a process can post.
        r = fgpu_torch("--representative", "--gpu", "h100", "--nodes", 2, "--gpus-per-node", 4, "--nproc", 8, PYTHON,
                       JOB, "--style", "tp_dp", env=dict(os.environ, FAKEGPU_REPRESENTATIVE="0,7"), timeout=600)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("process group of ranks [3, 7] holds rank 7, which runs as a process, but its first rank, 3, "
                      "runs none: run it with FAKEGPU_REPRESENTATIVE=0,3,7", r.stdout + r.stderr)

    def test_messages_and_broadcasts_from_stood_in_ranks(self):
        # Rank 0 receives from rank 1 and takes a broadcast from rank 2, both stood in: they send
        # zeros (a stand-in repeats collectives, not its own data). With a device_id the message
        # goes on the group's communicator.
        script = self.tmp / "from_stand_ins.py"
        script.write_text(
            "import os, torch, torch.distributed as dist\n"
            "device = torch.device('cuda', int(os.environ['LOCAL_RANK']))\n"
            "dist.init_process_group('nccl', device_id=device)  # messages on the group's communicator\n"
            "t = torch.full((4096,), 7.0, device=device)\n"
            "if dist.get_rank() == 0:\n"
            "    dist.recv(t, src=1)\n"
            "elif dist.get_rank() == 1:\n"
            "    dist.send(t, dst=0)\n"
            "u = torch.full((4096,), 7.0, device=device)\n"
            "dist.broadcast(u, src=2)\n"
            "print('received', t.sum().item(), u.sum().item())\n"
            "dist.destroy_process_group()\n")
        r = fgpu_torch("--representative", "--gpu", "h100", "--nodes", 1, "--gpus-per-node", 4, "--nproc", 4, PYTHON,
                       script, env=dict(os.environ, FAKEGPU_TORCH_COMPUTE="1"), timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("received 0.0 0.0", r.stdout)
        # Without a device_id, PyTorch makes a communicator of the two ranks for the message; the
        # hook names the pair, and the coordinator brings the stood-in one.
        script.write_text(script.read_text().replace(", device_id=device)", ")\ntorch.cuda.set_device(device)"))
        report = self.tmp / "pair.json"
        r = fgpu_torch("--representative", "--gpu", "h100", "--nodes", 1, "--gpus-per-node", 4, "--nproc", 4,
                       "--report", report, PYTHON, script, env=dict(os.environ, FAKEGPU_TORCH_COMPUTE="1"), timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("received 0.0 0.0", r.stdout)
        self.assertIn([0, 1], [c["global_ranks"] for c in json.loads(report.read_text())["communicators"]])

    def test_pairwise_exchanges_by_xor_from_one_process(self):
        # Recursive doubling: in round d every rank exchanges with rank ^ d, a group of one Send and
        # one Receive with that peer (batch_isend_irecv). The stood-in ranks pair up alike, so every
        # rank's calls and bytes are those of running every rank. On 6 ranks the pairs of round 2
        # leave the world for ranks 4 and 5, which rank 0 alone cannot show: the job stops, saying so.
        script = self.tmp / "doubling.py"
        script.write_text(
            "import os, torch, torch.distributed as dist\n"
            "device = torch.device('cuda', int(os.environ['LOCAL_RANK']))\n"
            "dist.init_process_group('nccl', device_id=device)\n"
            "rank, world = dist.get_rank(), dist.get_world_size()\n"
            "mine, theirs = torch.ones(1 << 16, device=device), torch.empty(1 << 16, device=device)\n"
            "d = 1\n"
            "while d < world:\n"
            "    if rank ^ d < world:\n"
            "        ops = [dist.P2POp(dist.isend, mine, rank ^ d), dist.P2POp(dist.irecv, theirs, rank ^ d)]\n"
            "        for work in dist.batch_isend_irecv(ops):\n"
            "            work.wait()\n"
            "        mine += theirs\n"
            "    d *= 2\n"
            "torch.cuda.synchronize()\n"
            "dist.destroy_process_group()\n")
        env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes")
        reports = {}
        for flags in ((), ("--representative",)):
            reports[flags] = self.tmp / f"doubling{len(flags)}.json"
            r = fgpu_torch(*flags, "--gpu", "h100", "--nodes", 2, "--gpus-per-node", 4, "--nproc", 8,
                           "--report", reports[flags], PYTHON, script, env=env, timeout=600)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        full, rep = (json.loads(reports[flags].read_text()) for flags in ((), ("--representative",)))
        self.assertEqual(rep["representative"]["processes"], [0])
        self.assertEqual(full["collectives"]["Send"]["calls"], 8 * 3)
        self.assertEqual((rep["collectives"]["Send"]["calls"], rep["collectives"]["Send"]["bytes"]),
                         (full["collectives"]["Send"]["calls"], full["collectives"]["Send"]["bytes"]))
        self.assertEqual(ranks(rep), ranks(full))
        r = fgpu_torch("--representative", "--gpu", "h100", "--nodes", 2, "--gpus-per-node", 3, "--nproc", 6, PYTHON,
                       script, env=env, timeout=600)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("a pairwise exchange, whose stood-in ranks pair by the XOR of their ranks (2), but rank 4's "
                      "partner, 6, is beyond the communicator's 6 ranks, so the stood-in ranks cannot repeat it; run "
                      "every rank", r.stdout)

    def test_split_group_from_one_process(self):
        env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes")
        script = self.tmp / "split.py"
        script.write_text(
            "import os, torch, torch.distributed as dist\n"
            "device = torch.device('cuda', int(os.environ['LOCAL_RANK']))\n"
            "dist.init_process_group('nccl', device_id=device)\n"
            "dist.all_reduce(torch.ones(4, device=device))\n"
            "half = dist.split_group(split_ranks=[[0, 1], [2, 3]])\n"
            "dist.all_reduce(torch.ones(4, device=device), group=half)\n"
            "dist.destroy_process_group()\n")
        report = self.tmp / "split.json"
        r = fgpu_torch("--representative", "--gpu", "h100", "--nodes", 1, "--gpus-per-node", 4, "--nproc", 4,
                       "--report", report, PYTHON, script, env=env, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        by_ranks = {tuple(c["global_ranks"]): c["collectives"] for c in json.loads(report.read_text())["communicators"]}
        self.assertEqual(by_ranks, {(0, 1, 2, 3): 1, (0, 1): 1, (2, 3): 1})

if __name__ == "__main__":
    require_torch()
    unittest.main()

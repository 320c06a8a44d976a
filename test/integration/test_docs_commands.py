"""Every command the README and docs/ show (their ```sh blocks) is exercised: run here, or by
a named test of the suite, or, for the few that need what CI lacks (a GPU cluster's tools, a
long sanitizer build), listed with the reason. A command added to the docs without a line in
COVERAGE fails this test, and so does a line naming a test that no longer exists."""

import re
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import REPO
from fakegpu.paths import build_dir

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# (pattern matching the command, how it is exercised, detail)
#   run:    run here from the repository root; {report} stands for a report this test writes
#   test:   the named test (a ctest name, or a test function) runs it, or the same with a
#           program of its own where the docs say ./my_nccl_program
#   manual: not run by the suite, for the reason given
COVERAGE = [
    (r"^FAKEGPU_TORCH_COMPUTE=shapes \./fgpu --representative ", "test", "test_fsdp_by_tensor_parallel_on_sixteen_ranks"),
    (r"^\./scripts/setup && \./fgpu demo$", "test", "test_demo_runs_the_tp_dp_job"),
    (r"^\./scripts/test$", "manual", "it is the suite itself; CI runs it through .ci/run"),
    (r"^PYTHONPATH=\. python3 -m unittest discover -s test/python$", "test", "python_units"),
    (r"^\./fgpu --nproc 4 --cluster-config configs/cluster_valid\.yaml \./my_nccl_program$", "test",
     "test_runs_n_ranks_and_summarises"),
    (r"^\./fgpu --cluster-config configs/cluster_valid\.yaml \./launch_my_job\.sh$", "test",
     "test_command_sees_the_coordinator_environment"),
    (r"^\./fgpu validate configs/\S+\.yaml$", "run", None),
    (r"^\./fgpu report fakegpu-cluster-report\.json$", "run", None),
    (r"^\./fgpu model .*--plot ", "test", "test_plot_has_a_line_per_cluster_or_algorithm"),
    (r"^\./fgpu model .*--measured ", "test", "test_each_size_beside_the_model"),
    (r"^\./fgpu model ", "run", None),
    (r"^\./fgpu --nproc 32 \./my_nccl_program$", "test", "test_nproc_alone_fills_servers_of_eight"),
    (r"^\./fgpu --nodes 2 --gpus-per-node 4 --gpu a100 --nproc 8 \./my_nccl_program$", "test",
     "test_nodes_gpus_per_node_and_gpu"),
    (r"^\./fgpu coordinator status$", "test", "test_status_shows_a_running_jobs_ranks"),
    (r"^cmake |^cd build-|^(\./)?scripts/test-sanitizers", "manual",
     "sanitizer builds take tens of minutes on two cores; docs/development.md records their results"),
    (r"^verification/fuzz\.sh", "manual",
     "needs clang; the suite replays the same fuzz targets over their corpora (fuzz_wire_corpus)"),
    (r"^git clone https://github\.com/NVIDIA/nccl-tests$|^cd nccl-tests$|^make -j CUDA_HOME", "manual",
     "fetches and builds NVIDIA's nccl-tests with nvcc"),
    (r"all_reduce_perf|^verification/nccl_tests_matrix\.sh|^verification/nccl_examples\.sh", "manual",
     "needs nccl-tests or NCCL's examples built; docs/nccl-tests.md records the results"),
    (r"^python3 verification/bench/allreduce_latency\.py", "test", "bench_runs"),
    (r"^python3 verification/bench/coordinator_soak\.py", "test", "soak_runs"),
    (r"^python3 verification/bench/coordinator_jobs_soak\.py", "test", "coordinator_jobs_soak"),
    (r"^build/model_speed \d+$", "test", "model_speed_runs"),
    (r"^python3 verification/bench/torch_ddp_bench\.py", "test", "torch_bench_runs"),
    (r"^python3 verification/bench/gpu_kernel_rates\.py", "test", "gpu_kernel_rates_runs"),
    (r"^python3 verification/bench/kernel_fidelity\.py", "test", "kernel_fidelity_runs"),
    (r"^python3 verification/bench/torchtitan_host_memory\.py", "test", "torchtitan_host_memory_runs"),
    (r"^python3 verification/bench/step_fidelity\.py", "test", "step_fidelity_runs"),
    (r"^\./fgpu calibrate --fit ", "test", "rate_fit_runs"),
    (r"^\./fgpu --gpu \S+\.gpu\.yaml ", "test", "test_fgpu_builds_the_base_gpus_servers_of_the_file"),
    (r"^\./fgpu calibrate", "manual",
     "needs a real NVIDIA GPU; test_calibrate_refuses_without_a_real_gpu checks its refusals here"),
    (r"^FAKEGPU_TORCH_COMPUTE=shapes \./fgpu --nodes 1 --gpus-per-node 1 --gpu h100 --nproc 1 "
     r"build/torch-venv/bin/python verification/predict/gpt2_ddp\.py$", "test", "test_gpt2_step_is_near_an_h100_measurement"),
    (r"^\./fgpu --nproc 4 build/torch-venv/bin/python train\.py$", "test", "test_fgpu_nproc_with_device_id"),
    (r"^\./fgpu --gpu h100 --nodes 1 --gpus-per-node 4 build/torch-venv/bin/torchrun --nproc_per_node=4 "
     r"-m torchtitan\.train ", "test", "test_fsdp_with_tensor_parallel"),
    (r"^\./fgpu --cluster-config configs/presets/\S+\.yaml build/torch-venv/bin/torchrun --nproc_per_node=\d+ train\.py$",
     "test", "test_two_virtual_nodes_with_torchrun_per_node"),
    (r"^\./build/fakegpu-coordinator --transport (unix|tcp) --address (/tmp/fakegpu\.sock|127\.0\.0\.1:29591) "
     r"--cluster-config configs/cluster_valid\.yaml --report /tmp/fakegpu-report\.json$", "test", "coordinator_smoke"),
    (r"^export (LD_PRELOAD|FAKEGPU_)", "test", "allreduce_end_to_end"),
    (r"^mpirun -np 4 \./my_nccl_program$", "manual", "needs OpenMPI; docs/nccl-tests.md runs MPI programs this way"),
    (r"^\./build/fakegpu-coordinator --transport tcp --address 10\.77\.0\.1|^RANK=2 WORLD_SIZE=4|^ip |"
     r"^export FAKEGPU_COORDINATOR_TOKEN", "test", "netns_multihost"),
    (r"^python3 test/integration/test_coordinator_smoke\.py$", "test", "coordinator_smoke"),
    (r"^python3 test/integration/test_allreduce_correctness\.py$", "test", "allreduce_correctness"),
    (r"^python3 test/integration/test_allgather_correctness\.py$", "test", "allgather_correctness"),
    (r"^python3 test/integration/test_group_semantics\.py$", "test", "group_semantics"),
    (r"^\./test/run_(multinode_sim|ddp_multinode)\.sh \d$", "test", "run_multinode_sim_2"),
    (r"^\./test/run_hybrid_(multinode|ddp|parallel)\.sh \d$", "test", "run_hybrid_multinode_2"),
    (r"^\./scripts/gpu-checks$", "manual",
     "needs a real GPU: the hybrid checks it runs skip here (run_hybrid_*), and fgpu calibrate refuses"),
    (r"^\./fgpu --mode hybrid --measure-kernels ", "manual",
     "needs a GPU and CUDA torch; torch_kernel_times times the operators over fakegpu's runtime here"),
    (r"^\./fgpu --kernel-times ", "test", "test_a_table_measured_in_one_run_prices_every_operator_of_the_next"),
    (r"^\./fgpu --mode hybrid torchrun ", "manual",
     "needs a GPU and CUDA torch; run_hybrid_ddp_4 runs it where they are, test_hybrid_mode.py drives hybrid mode here"),
    (r"^MASTER_ADDR=\S+ MASTER_PORT=\d+ \./fgpu --nproc 4 python3 verification/ddp_reference_check\.py --device cpu",
     "manual",
     "runs the check on the CPU with gloo under the machine's own python3; run_ddp_multinode_2 runs the same "
     "script under fgpu on fake GPUs"),
]


def doc_commands():
    """(file, command) for every command line of every ```sh block, continuations joined and
    comments dropped."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"^```sh\n(.*?)^```", doc.read_text(), re.S | re.M):
            for line in block.replace("\\\n", " ").splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                command = re.sub(r"\s+", " ", command)
                if command and not command.startswith("#"):
                    found.append((doc.relative_to(REPO), command))
    return found


def coverage_of(command):
    for pattern, how, detail in COVERAGE:
        if re.search(pattern, command):
            return how, detail
    return None, None


# The checks the usage page this project grew from tells users to run, by those paths.
SEED_COMMANDS = ["verification/test_coordinator_smoke.py", "test/test_allreduce_correctness.py",
                 "verification/test_allgather_correctness.py", "verification/test_group_semantics.py"]


class DocsCommands(unittest.TestCase):
    def test_the_seeds_commands_reach_their_checks(self):
        # Each path runs the check of its name (unittest's usage line names the file it runs);
        # the checks themselves are ctests of their own.
        for path in SEED_COMMANDS:
            with self.subTest(command=path):
                r = subprocess.run([sys.executable, path, "-h"], cwd=REPO, capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"usage: {Path(path).name} ", r.stdout)

    def test_every_command_is_covered(self):
        commands = doc_commands()
        self.assertGreater(len(commands), 30)
        missing = [f"{doc}: {command}" for doc, command in commands if coverage_of(command)[0] is None]
        self.assertEqual(missing, [], "commands in the docs that no test exercises")

    def test_named_tests_exist(self):
        listed = subprocess.run(["ctest", "-N", "--test-dir", str(build_dir())], capture_output=True, text=True)
        ctest_names = set(re.findall(r"Test\s+#\d+: (\S+)", listed.stdout))
        self.assertIn("docs_commands", ctest_names, listed.stdout + listed.stderr)
        functions = set()
        for source in (REPO / "test").rglob("test_*.py"):
            functions.update(re.findall(r"def (test_\w+)", source.read_text()))
        for pattern, how, detail in COVERAGE:
            if how == "test":
                with self.subTest(test=detail):
                    self.assertIn(detail, ctest_names | functions)

    def test_runnable_commands_succeed(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-docs-"))
        report = tmp / "fakegpu-cluster-report.json"
        made = subprocess.run([str(REPO / "fgpu"), "--report", str(report), "true"], capture_output=True, text=True)
        self.assertEqual(made.returncode, 0, made.stderr)
        ran = 0
        for doc, command in doc_commands():
            if coverage_of(command)[0] != "run":
                continue
            argv = [str(report) if a == "fakegpu-cluster-report.json" else a for a in shlex.split(command)]
            with self.subTest(doc=str(doc), command=command):
                r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
                self.assertEqual(r.returncode, 0, f"{command}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
                self.assertTrue(r.stdout.strip(), f"{command} printed nothing")
            ran += 1
        self.assertGreaterEqual(ran, 8)


if __name__ == "__main__":
    unittest.main()

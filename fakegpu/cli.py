"""fgpu: run a command, or N copies of it, as ranks of a simulated GPU cluster."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import __version__
from .configs import launcher_world_size, write_single_node_config
from .coordinator import Coordinator, answers
from .daemon import cmd_coordinator, register_job
from .launch import rank_environment, run_all, run_ranks, virtual_nodes_value
from .modes import check_modes
from .paths import REPO_ROOT, SetupError, build_dir, built
from .report import load, summarize
from .torchrun import free_port, per_node_launches

SUBCOMMANDS = ("demo", "validate", "report", "model", "coordinator")


def env_default(name, fallback=None):
    return os.environ.get(name) or fallback


def main_parser():
    p = argparse.ArgumentParser(
        prog="fgpu",
        description="Run COMMAND with fakegpu's NCCL and CUDA libraries, talking to a fakegpu coordinator. "
                    "Subcommands: demo, validate CONFIG, report FILE, model, coordinator start|stop|status "
                    "(see fgpu SUBCOMMAND --help).",
        epilog="Example: fgpu --nproc 4 ./my_nccl_program    |    fgpu torchrun --nproc_per_node=4 train.py")
    p.add_argument("--mode", default=env_default("FAKEGPU_MODE", "simulate"),
                   choices=("simulate", "hybrid", "passthrough"), help="compute mode [FAKEGPU_MODE]")
    p.add_argument("--dist-mode", default=env_default("FAKEGPU_DIST_MODE", "simulate"),
                   choices=("simulate", "proxy", "passthrough"), help="distributed mode [FAKEGPU_DIST_MODE]")
    p.add_argument("--cluster-config", default=env_default("FAKEGPU_CLUSTER_CONFIG"),
                   help="cluster YAML [FAKEGPU_CLUSTER_CONFIG]; default: one node with --nproc (or 8) GPUs")
    p.add_argument("--coordinator-transport", default=env_default("FAKEGPU_COORDINATOR_TRANSPORT", "unix"),
                   choices=("unix", "tcp"), help="[FAKEGPU_COORDINATOR_TRANSPORT]")
    p.add_argument("--coordinator-addr", default=env_default("FAKEGPU_COORDINATOR_ADDR"),
                   help="absolute socket path or host:port [FAKEGPU_COORDINATOR_ADDR]; a coordinator already "
                        "answering there is used as is, otherwise fgpu starts one")
    p.add_argument("--device-count", type=int, default=env_default("FAKEGPU_DEVICE_COUNT"),
                   help="fake devices each process sees [FAKEGPU_DEVICE_COUNT]")
    p.add_argument("--report", default=env_default("FAKEGPU_CLUSTER_REPORT_PATH", "fakegpu-cluster-report.json"),
                   help="JSON cluster report path [FAKEGPU_CLUSTER_REPORT_PATH]")
    p.add_argument("--nproc", type=int, help="start N copies of COMMAND as ranks 0..N-1 (sets RANK, WORLD_SIZE, "
                                             "LOCAL_RANK); without it COMMAND is run once, e.g. torchrun or mpirun")
    p.add_argument("--version", action="version", version=f"fgpu {__version__}")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run")
    return p


def node_layout(cluster_config: str):
    """(node ids, rank lists per node), as the coordinator's own validating parser reads them."""
    result = subprocess.run([str(built("fakegpu-coordinator")), "--print-layout", "--cluster-config", cluster_config],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SetupError(result.stderr.strip() or result.stdout.strip())
    nodes = json.loads(result.stdout)["nodes"]
    return [node["id"] for node in nodes], [node["ranks"] for node in nodes]


def run_job(args, quiet_summary=False) -> int:
    gpus = check_modes(args.mode, args.dist_mode)
    if gpus and args.device_count:
        raise SetupError(f"--device-count sets how many fake devices a rank sees; with --mode {args.mode} "
                         f"the ranks see this machine's {gpus} GPU(s)")
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        raise SetupError("no command given (try: fgpu --nproc 2 ./program, or fgpu demo)")
    # Without a cluster config: one node with as many GPUs as the launcher starts ranks.
    world = args.nproc or launcher_world_size(args.command) or args.device_count or 8
    config = args.cluster_config or write_single_node_config(world)
    report = str(Path(args.report).resolve())
    owned = None
    address = args.coordinator_addr
    registration = None
    if not (address and answers(args.coordinator_transport, address)):
        owned = Coordinator(config, args.coordinator_transport, address, report).start()
        address = owned.address
        registration = register_job(owned, args.command)
    env = rank_environment(os.environ, args.coordinator_transport, address, str(Path(config).resolve()),
                           args.device_count, args.mode)
    try:
        names, nodes = node_layout(config)
        if gpus:
            per_node = max(len(n) for n in nodes)
            print(f"fgpu: --mode {args.mode}: up to {per_node} ranks per node compute on this machine's {gpus} "
                  "GPU(s), each on the device its program selects; where they outnumber the GPUs, select "
                  "LOCAL_RANK % device count", file=sys.stderr)
        several = len(nodes) > 1
        if args.nproc:
            world = sum(len(n) for n in nodes)
            if args.nproc != world:
                raise SetupError(f"--nproc {args.nproc} does not match the world size {world} of {config}")
            # As torchrun does: torch's env:// rendezvous on this host, unless the caller chose one.
            env.setdefault("MASTER_ADDR", "127.0.0.1")
            env.setdefault("MASTER_PORT", str(free_port()))
            code = run_ranks(args.command, nodes, env, names if several else None)
        elif several and (launches := per_node_launches(args.command, names, nodes, env)):
            code = run_all(launches)  # one torchrun per node
        else:
            if several:  # each rank takes its node as it starts
                env["FAKEGPU_VIRTUAL_NODES"] = virtual_nodes_value(names, nodes)
            code = subprocess.call(args.command, env=env)
    except OSError as e:  # the command does not exist or cannot be run
        raise SetupError(f"cannot run {args.command[0]}: {e.strerror}") from e
    finally:
        if registration:
            registration.unlink(missing_ok=True)
        if owned:
            stop_code = owned.stop()
            if stop_code != 0:
                print(f"fgpu: the coordinator exited with {stop_code}:\n{owned.output()}", file=sys.stderr)
    if owned and Path(report).exists():
        print(f"fgpu: cluster report written to {report}")
        if not quiet_summary:
            print(summarize(load(report)))
    elif owned:
        print(f"fgpu: no report was written; coordinator output:\n{owned.output()}", file=sys.stderr)
    return code


def cmd_demo(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu demo", description="A 16-rank job on 2 simulated nodes of 8 H100s: the "
                                "world communicator is split into tensor-parallel (8 per node) and data-parallel "
                                "(2 across nodes) groups, and each iteration allreduces on all of them.")
    p.add_argument("--coordinator-transport", default="unix", choices=("unix", "tcp"))
    p.add_argument("--report", default=str(build_dir() / "demo" / "cluster-report.json"))
    p.add_argument("--iters", type=int, default=3)
    a = p.parse_args(argv)
    Path(a.report).parent.mkdir(parents=True, exist_ok=True)
    id_file = Path(tempfile.mkdtemp(prefix="fakegpu-demo-")) / "unique-id"
    args = main_parser().parse_args([
        "--cluster-config", str(REPO_ROOT / "configs" / "demo_2node_16gpu.yaml"),
        "--coordinator-transport", a.coordinator_transport, "--report", a.report, "--nproc", "16",
        str(built("nccl_check")), str(id_file), "--count", "65536", "--iters", str(a.iters), "--tp", "8"])
    args.mode = args.dist_mode = "simulate"
    args.coordinator_addr = None
    code = run_job(args)
    print("fgpu demo: " + ("all 16 ranks verified every element" if code == 0 else f"FAILED (exit code {code})"))
    return code


def cmd_validate(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu validate", description="Check a cluster YAML and print a summary.")
    p.add_argument("config")
    a = p.parse_args(argv)
    return subprocess.call([str(built("fakegpu-coordinator")), "--check-config", "--cluster-config", a.config])


def cmd_report(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu report", description="Summarise a JSON cluster report.")
    p.add_argument("file")
    a = p.parse_args(argv)
    print(summarize(load(a.file)))
    return 0


def cmd_model(argv) -> int:
    """What-if cost model; the C++ planner does the work and owns the flags."""
    return subprocess.call([str(built("fakegpu-model"))] + list(argv))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            commands = {"demo": cmd_demo, "validate": cmd_validate, "report": cmd_report, "model": cmd_model,
                        "coordinator": cmd_coordinator}
            return commands[argv[0]](argv[1:])
        return run_job(main_parser().parse_args(argv))
    except SetupError as e:
        print(f"fgpu: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

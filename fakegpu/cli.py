"""fgpu: run a command, or N copies of it, as ranks of a simulated GPU cluster."""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import __version__, kernel_times
from .calibrate import cmd_calibrate
from .clusters import DEFAULT_GPU, cluster_config_path, cluster_layout, write_cluster_config
from .launchers import launcher_name, launcher_world_size
from .coordinator import Coordinator, answers, resolve_transport
from .daemon import cmd_coordinator, live_status, register_job, report_owner, status_json
from .failures import failure_table
from .launch import prepend, rank_environment, rank_launches, share_gpus, virtual_nodes_value
from .model_cmd import cmd_model
from .modes import check_modes
from .paths import SetupError, build_dir, built, configs_dir
from .report import load, summarize
from .representative import check_representative, direct_command, representative_launches
from .supervise import Interrupted, Launch, interruptible, supervise
from .torchrun import free_port, per_node_launches

SUBCOMMANDS = ("demo", "validate", "report", "model", "calibrate", "coordinator")
DEFAULT_REPORT = "fakegpu-cluster-report.json"


def env_default(name, fallback=None):
    return os.environ.get(name) or fallback


def main_parser():
    p = argparse.ArgumentParser(
        prog="fgpu",
        description="Run COMMAND with fakegpu's NCCL and CUDA libraries, talking to a fakegpu coordinator. "
                    "Subcommands: demo, validate CONFIG..., report FILE, model, calibrate, coordinator start|stop|status "
                    "(see fgpu SUBCOMMAND --help).",
        epilog="Example: fgpu --nproc 4 ./my_nccl_program    |    fgpu torchrun --nproc_per_node=4 train.py")
    p.add_argument("--mode", default=env_default("FAKEGPU_MODE", "simulate"),
                   choices=("simulate", "hybrid", "passthrough"), help="compute mode [FAKEGPU_MODE]")
    p.add_argument("--dist-mode", default=env_default("FAKEGPU_DIST_MODE", "simulate"),
                   choices=("simulate", "proxy", "passthrough"), help="distributed mode [FAKEGPU_DIST_MODE]")
    p.add_argument("--cluster-config", default=env_default("FAKEGPU_CLUSTER_CONFIG"),
                   help="cluster YAML, or a preset by name or family (dgx-h100-2node, aws-p5) "
                        "[FAKEGPU_CLUSTER_CONFIG]; default: the job's ranks on servers of "
                        f"--gpu {DEFAULT_GPU} (DGX H100: 8 GPUs a node), as many as they fill")
    p.add_argument("--nodes", type=int, help="without --cluster-config: this many servers of --gpu")
    p.add_argument("--gpus-per-node", type=int, help="without --cluster-config: GPUs used on each server")
    p.add_argument("--gpu", help=f"without --cluster-config: the GPU, as the server of its preset family "
                                 f"(a100, h100, h200, h20, gb200, or a family such as dgx-h100); default {DEFAULT_GPU}")
    p.add_argument("--coordinator-transport", default=env_default("FAKEGPU_COORDINATOR_TRANSPORT"),
                   choices=("unix", "tcp"),
                   help="[FAKEGPU_COORDINATOR_TRANSPORT]; default: tcp for a host:port address, otherwise unix")
    p.add_argument("--coordinator-addr", default=env_default("FAKEGPU_COORDINATOR_ADDR"),
                   help="absolute socket path or host:port [FAKEGPU_COORDINATOR_ADDR]; a coordinator already "
                        "answering there is used as is, otherwise fgpu starts one")
    p.add_argument("--device-count", type=int, default=env_default("FAKEGPU_DEVICE_COUNT"),
                   help="fake devices each process sees [FAKEGPU_DEVICE_COUNT]")
    p.add_argument("--report", default=env_default("FAKEGPU_CLUSTER_REPORT_PATH"),
                   help=f"JSON cluster report path [FAKEGPU_CLUSTER_REPORT_PATH]; default: {DEFAULT_REPORT}, or "
                        f"{Path(DEFAULT_REPORT).stem}.PID.json while a running job writes that one")
    p.add_argument("--nccl-version", help="model this NCCL release's rules, 2.18 to 2.30 (e.g. 2.21 or 2.21.5) "
                                          "[FAKEGPU_NCCL_VERSION]; default: the cluster's cluster.nccl_version, "
                                          "else the newest")
    p.add_argument("--nproc", type=int, help="start N copies of COMMAND as ranks 0..N-1 (sets RANK, WORLD_SIZE, "
                                             "LOCAL_RANK); without it COMMAND is run once, e.g. torchrun or mpirun")
    p.add_argument("--representative", action="store_true",
                   help="start only rank 0 of an SPMD PyTorch job (the ranks in FAKEGPU_REPRESENTATIVE when set) and "
                        "let the coordinator stand in for the others, in shapes mode: a large job's step time and "
                        "memory from one process (docs/pytorch.md)")
    p.add_argument("--measure-kernels", metavar="FILE",
                   help="with --mode hybrid: time every PyTorch operator the ranks run on this machine's GPU, each "
                        "alone, and write the table to FILE, for --kernel-times (docs/hybrid.md)")
    p.add_argument("--kernel-times", metavar="FILE", default=env_default("FAKEGPU_KERNEL_TIMES"),
                   help="price PyTorch's operators at the times --measure-kernels measured on a real GPU, carried to "
                        "the cluster's GPU; operators it lacks, with the kernel model [FAKEGPU_KERNEL_TIMES]")
    p.add_argument("--version", action="version", version=f"fgpu {__version__}")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run")
    return p


def node_layout(cluster_config: str):
    """(node ids, rank lists per node), as the coordinator's own validating parser reads them."""
    nodes = cluster_layout(cluster_config)["nodes"]
    return [node["id"] for node in nodes], [node["ranks"] for node in nodes]


def choose_report(given) -> Path:
    """The report's path, checked before anything starts: its directory must be writable, and no
    job still running may be writing the same file. The default name then gets this job's pid."""
    path = Path(given or DEFAULT_REPORT).resolve()
    what = f"--report {given}" if given else f"the report {path}"
    if not path.parent.is_dir():
        raise SetupError(f"{what}: directory {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise SetupError(f"{what}: directory {path.parent} is not writable")
    owner = report_owner(path)
    if owner and given:
        raise SetupError(f"{what} is being written by a job still running ({owner}): choose another path")
    if owner:
        unique = path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")
        print(f"fgpu: {path.name} belongs to a job still running ({owner}); this job's report is {unique.name}",
              file=sys.stderr)
        return unique
    return path


def file_stamp(path: Path):
    """What tells one version of a file from another (None when there is none): a report left by an
    earlier job must not pass for this job's when this job's coordinator wrote none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def stopped_how(code: int) -> str:
    """A coordinator's exit status in words."""
    if code >= 0:
        return f"exited with {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    why = " (the kernel's out-of-memory killer ends processes so: see dmesg)" if -code == signal.SIGKILL else ""
    return f"was killed by {name}{why}"


def check_is_coordinator(transport: str, address: str):
    """Something answers at the address: make sure it is a fakegpu coordinator this build speaks to."""
    if status_json(transport, address) is None:
        why = live_status(transport, address).strip()
        raise SetupError(f"something answers at {transport}:{address}, but not as a fakegpu coordinator this build "
                         f"can use ({why}); choose another --coordinator-addr, or leave it out to start one")


def run_job(args, quiet_summary=False) -> int:
    """Runs the job; SIGINT and SIGTERM stop it cleanly, with the report written."""
    workdir = tempfile.mkdtemp(prefix="fakegpu-job-")  # what fgpu writes for this job alone
    try:
        with interruptible():
            return run_job_in(args, Path(workdir), quiet_summary)
    except RunAgain as e:  # a rank found ranks of another kind without processes (a pipeline's stages)
        print("fgpu: running the job again with a process for each kind of rank: "
              f"FAKEGPU_REPRESENTATIVE={e.processes}", file=sys.stderr)
        os.environ["FAKEGPU_REPRESENTATIVE"] = e.processes
        return run_job(args, quiet_summary)
    except Interrupted as e:  # before the ranks started, or while stopping: nothing more to report
        print(f"fgpu: {e}", file=sys.stderr)
        return 128 + e.signum
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class RunAgain(Exception):
    """The job is to run again with these processes (FAKEGPU_REPRESENTATIVE)."""

    def __init__(self, processes):
        super().__init__(processes)
        self.processes = processes


def default_cluster(args, workdir: Path) -> str:
    """Without a cluster config: servers of --gpu for the ranks, --nodes x --gpus-per-node of them or
    as many as the ranks fill (the world size from --nproc or the launcher's own flags)."""
    world = args.nproc if args.nodes else args.nproc or launcher_world_size(args.command) or args.device_count or 8
    return write_cluster_config(args.gpu, world, args.nodes, args.gpus_per_node, directory=workdir)


def check_kernel_options(args):
    if args.measure_kernels and args.mode != "hybrid":
        raise SetupError("--measure-kernels times operators on this machine's GPU: it needs --mode hybrid (a "
                         "simulate run takes the table it writes with --kernel-times)")
    if args.kernel_times and args.mode != "simulate":
        raise SetupError(f"--kernel-times prices a simulate run's operators; with --mode {args.mode} they run on "
                         "the GPU")


def predict_command(args) -> str:
    """The simulate run that prices this job's operators at the times --measure-kernels wrote."""
    cluster = ["--cluster-config", args.cluster_config] if args.cluster_config else [
        option for name in ("nodes", "gpus_per_node", "gpu") if getattr(args, name)
        for option in (f"--{name.replace('_', '-')}", str(getattr(args, name)))]
    nproc = ["--nproc", str(args.nproc)] if args.nproc else []
    return shlex.join(["fgpu", "--kernel-times", args.measure_kernels, *cluster, *nproc, *args.command])


def measure_kernels_in(env, workdir: Path) -> Path:
    """The folder where the ranks leave their operators' times (torch_hook/kernel_timing.py), which
    fakegpu's sitecustomize installs in hybrid mode too when asked."""
    folder = workdir / "kernel-times"
    folder.mkdir()
    env["FAKEGPU_MEASURE_KERNELS"] = str(folder)
    env["PYTHONPATH"] = prepend("PYTHONPATH", str(Path(__file__).resolve().parent / "python_hook"), env)
    return folder


def run_job_in(args, workdir: Path, quiet_summary) -> int:
    gpus = check_modes(args.mode, args.dist_mode)
    if gpus and args.device_count:
        raise SetupError(f"--device-count sets how many fake devices a rank sees; with --mode {args.mode} "
                         f"the ranks see this machine's {gpus} GPU(s)")
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        raise SetupError("no command given (try: fgpu --nproc 2 ./program, or fgpu demo)")
    if args.nproc is not None and args.nproc < 1:
        raise SetupError(f"--nproc {args.nproc}: the number of ranks must be at least 1")
    if args.nproc and (launcher := launcher_name(args.command)):
        # Each copy would start a job of its own: N x M processes, each torchrun's world its own.
        raise SetupError(f"--nproc {args.nproc} starts {args.nproc} copies of the command, and {launcher} starts "
                         f"ranks of its own; leave out --nproc (fgpu takes the ranks from {launcher}'s options), or "
                         f"give --nproc the program without {launcher}")
    if args.cluster_config and (args.nodes or args.gpus_per_node or args.gpu):
        raise SetupError("--nodes, --gpus-per-node and --gpu describe a cluster in place of --cluster-config; "
                         "(FAKEGPU_CLUSTER_CONFIG); give one or the other")
    check_kernel_options(args)
    times = kernel_times.check(args.kernel_times) if args.kernel_times else None
    transport = resolve_transport(args.coordinator_transport, args.coordinator_addr)
    representatives = check_representative(args, gpus) if args.representative else None
    config = str(cluster_config_path(args.cluster_config)) if args.cluster_config else default_cluster(args, workdir)
    owned = None
    address = args.coordinator_addr
    registration = None
    report = earlier_report = None
    if address and answers(transport, address):
        check_is_coordinator(transport, address)
        if args.nccl_version:
            raise SetupError(f"--nccl-version {args.nccl_version}: the coordinator at {address} is already running "
                             "with its own; start it with FAKEGPU_NCCL_VERSION set instead")
        if args.representative:
            raise SetupError(f"--representative: the coordinator at {address} is already running, and stands in for "
                             "no rank; let fgpu start its own (leave out --coordinator-addr)")
    else:
        report = choose_report(args.report)
        earlier_report = file_stamp(report)
        coordinator_env = dict(os.environ, FAKEGPU_NCCL_VERSION=args.nccl_version) if args.nccl_version else None
        if args.representative:
            coordinator_env = dict(coordinator_env or os.environ, FAKEGPU_REPRESENTATIVE=representatives)
        if times:  # the report names the table
            coordinator_env = dict(coordinator_env or os.environ, FAKEGPU_KERNEL_TIMES=times)
        owned = Coordinator(config, transport, address, report, env=coordinator_env).start()
        address = owned.address
        registration = register_job(owned, args.command, report)
    env = rank_environment(os.environ, transport, address, str(Path(config).resolve()), args.device_count, args.mode)
    timed = measure_kernels_in(env, workdir) if args.measure_kernels else None
    if times:
        env["FAKEGPU_KERNEL_TIMES"] = times
    rerun = None
    if args.representative:
        if not os.environ.get("FAKEGPU_REPRESENTATIVE"):  # fgpu's guess, "0": a rank may ask for more
            rerun = workdir / "representatives"
            env["FAKEGPU_REPRESENTATIVE_RERUN"] = str(rerun)
        env["FAKEGPU_REPRESENTATIVE"] = representatives
        env.setdefault("FAKEGPU_TORCH_COMPUTE", "shapes")  # values are not computed: stand-ins have none
        # PyTorch has every 128th rank of a large communicator publish an NCCL id in the store for
        # ncclCommInitRankScalable, and waits for them all; stood-in ranks publish nothing. One root.
        env.setdefault("TORCH_NCCL_RANKS_PER_ROOT", str(1 << 30))
    live = {}

    def before_stop():
        """Where every rank is, printed and kept for the failure table, before fgpu stops them."""
        print(f"fgpu: where every rank is:\n{live_status(transport, address)}", end="", file=sys.stderr)
        live.update(status_json(transport, address) or {})

    try:
        names, nodes = node_layout(config)
        if gpus:
            shared = share_gpus(env, max(len(n) for n in nodes), gpus, workdir)
            print(f"fgpu: --mode {args.mode}: {shared}", file=sys.stderr)
        several = len(nodes) > 1
        world = sum(len(n) for n in nodes)
        if args.nproc and args.nproc != world:
            raise SetupError(f"--nproc {args.nproc} does not match the world size {world} of {config}")
        if args.nproc or args.representative:
            # As torchrun does: torch's env:// rendezvous on this host, unless the caller chose one.
            env.setdefault("MASTER_ADDR", "127.0.0.1")
            env.setdefault("MASTER_PORT", str(free_port()))
        if args.representative:
            command = args.command if args.nproc else direct_command(args.command)
            launches = representative_launches(rank_launches(command, nodes, env, names if several else None),
                                               representatives)
        elif args.nproc:
            launches = rank_launches(args.command, nodes, env, names if several else None)
        elif several and (per_node := per_node_launches(args.command, names, nodes, env)):
            launches = [Launch(cmd, node_env, f"{name}'s {Path(cmd[0]).name}", node=name)  # one torchrun per node
                        for (cmd, node_env), name in zip(per_node, names)]
        else:
            if several:  # each rank takes its node as it starts
                env["FAKEGPU_VIRTUAL_NODES"] = virtual_nodes_value(names, nodes)
            launches = [Launch(args.command, env, "the command")]
        outcome = supervise(launches, before_stop=before_stop)
    except OSError as e:  # the command does not exist or cannot be run
        raise SetupError(f"cannot run {args.command[0]}: {e.strerror}") from e
    finally:
        if registration:
            registration.unlink(missing_ok=True)
        if owned:
            stop_code = owned.stop()
            if stop_code != 0:
                print(f"fgpu: the coordinator {stopped_how(stop_code)}:\n{owned.output()}", file=sys.stderr)
    if rerun and rerun.exists():
        raise RunAgain(rerun.read_text().strip())
    if timed:
        said = kernel_times.gather(timed, Path(args.measure_kernels))
        print(f"fgpu: {said or '--measure-kernels: no rank timed a PyTorch operator on the GPU'}", file=sys.stderr)
        if said:
            print(f"fgpu: to predict the cluster's step time from them: {predict_command(args)}", file=sys.stderr)
    code = outcome.code
    written = load(report) if owned and file_stamp(report) not in (None, earlier_report) else {}
    if written:
        print(f"fgpu: cluster report written to {report}")
        if not quiet_summary:
            print(summarize(written))
    elif owned:
        print(f"fgpu: no report was written for this job; coordinator output:\n{owned.output()}", file=sys.stderr)
        code = code or 1
    if outcome.code != 0:
        print(failure_table(outcome, live, written), file=sys.stderr)
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
    with tempfile.TemporaryDirectory(prefix="fakegpu-demo-") as tmp:
        args = main_parser().parse_args([
            "--cluster-config", str(configs_dir() / "demo_2node_16gpu.yaml"),
            "--coordinator-transport", a.coordinator_transport, "--report", a.report, "--nproc", "16",
            str(built("nccl_check")), str(Path(tmp) / "unique-id"), "--count", "65536", "--iters", str(a.iters),
            "--tp", "8"])
        args.mode = args.dist_mode = "simulate"
        args.coordinator_addr = None
        code = run_job(args)
    print("fgpu demo: " + ("all 16 ranks verified every element" if code == 0 else f"FAILED (exit code {code})"))
    return code


def cmd_validate(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu validate", description="Check cluster YAMLs and print a summary of each.")
    p.add_argument("config", nargs="+")
    a = p.parse_args(argv)
    failed = 0
    for config in a.config:
        r = subprocess.run([str(built("fakegpu-coordinator")), "--check-config", "--cluster-config", config],
                           capture_output=True, text=True)
        print(r.stdout, end="")
        # The coordinator prefixes its errors with its own name; here they are fgpu's answer.
        print(r.stderr.replace("fakegpu-coordinator: error: ", "fgpu validate: "), end="", file=sys.stderr)
        failed += r.returncode != 0
    return 1 if failed else 0


def cmd_report(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu report", description="Summarise a JSON cluster report.")
    p.add_argument("file")
    a = p.parse_args(argv)
    print(summarize(load(a.file)))
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            commands = {"demo": cmd_demo, "validate": cmd_validate, "report": cmd_report, "model": cmd_model,
                        "calibrate": cmd_calibrate, "coordinator": cmd_coordinator}
            return commands[argv[0]](argv[1:])
        return run_job(main_parser().parse_args(argv))
    except SetupError as e:
        print(f"fgpu: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

"""fgpu coordinator start|stop|status: a coordinator that outlives one command, shared by
several jobs or shells. Its address, pid and report path are kept in a small state file.
Coordinators that `fgpu COMMAND` starts for one job register beside it while the job runs, so
`fgpu coordinator status` can show where every rank of a running (or hung) job is."""

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .clusters import write_cluster_config
from .coordinator import Coordinator, answers, resolve_transport
from .paths import built


def default_state_file() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return str(Path(base) / f"fakegpu-{os.getuid()}" / "coordinator.json")


def job_state_file(pid: int) -> Path:
    """Where `fgpu COMMAND` (process pid) registers the coordinator it started."""
    return Path(default_state_file()).parent / "jobs" / f"{pid}.json"


def register_job(coord, command, report) -> Path:
    path = job_state_file(os.getpid())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    state = {"pid": coord.process.pid, "transport": coord.transport, "address": coord.address,
             "command": " ".join(command), "report": str(report), "launcher": os.getpid()}
    path.write_text(json.dumps(state) + "\n")
    return path


def report_owner(report: Path):
    """Who writes `report` now: "fgpu pid N" for a job still running, "the shared coordinator"
    for the one `fgpu coordinator start` runs; None when nobody does."""
    state_file = default_state_file()
    for job in running_jobs(state_file):
        if job.get("report") == str(report):
            return f"fgpu pid {job['launcher']}"
    state = read_state(state_file)
    if running(state) and state.get("report") == str(report):
        return f"the shared coordinator, pid {state['pid']}"
    return None


def status_json(transport: str, address: str):
    """The coordinator's status as a dict, or None when it does not answer as one."""
    try:
        out = subprocess.run([str(built("fakegpu-coordinator")), "status", "--json", "--transport", transport,
                              "--address", address], capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (subprocess.TimeoutExpired, ValueError):
        return None


def running_jobs(state_file: str):
    """States of the per-job coordinators registered beside state_file and still running; stale
    registrations are removed."""
    jobs = []
    for path in sorted((Path(state_file).parent / "jobs").glob("*.json")):
        state = read_state(str(path))
        if running(state):
            jobs.append(state)
        else:
            path.unlink(missing_ok=True)
    return jobs


def live_status(transport: str, address: str) -> str:
    """The coordinator's own account of who waits where (fakegpu-coordinator status)."""
    out = subprocess.run([str(built("fakegpu-coordinator")), "status", "--transport", transport, "--address", address],
                         capture_output=True, text=True, timeout=60)
    return out.stdout if out.returncode == 0 else out.stderr


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def read_state(path: str):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def running(state) -> bool:
    """The coordinator is up, and so is the fgpu that started it for a job (a coordinator outlives
    its launcher by no more than a moment)."""
    return (bool(state) and alive(state["pid"]) and ("launcher" not in state or alive(state["launcher"]))
            and answers(state["transport"], state["address"]))


def start(a) -> int:
    state = read_state(a.state_file)
    if running(state):
        print(f"fgpu coordinator: already running at {state['address']} (pid {state['pid']})")
        return 1
    report = str(Path(a.report).resolve())
    Path(report).parent.mkdir(parents=True, exist_ok=True)
    # Its private directory (socket, log, and the default cluster config) goes when it is stopped.
    coord = Coordinator(a.cluster_config or "", transport_of(a), a.coordinator_addr, report, detach=True)
    if not a.cluster_config:
        coord.cluster_config = write_cluster_config(world=8, directory=coord.private_dir)
    coord.start()
    state = {"pid": coord.process.pid, "transport": coord.transport, "address": coord.address,
             "cluster_config": str(Path(coord.cluster_config).resolve()), "report": report,
             "log": str(coord.log_path), "private_dir": coord.private_dir}
    Path(a.state_file).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    Path(a.state_file).write_text(json.dumps(state) + "\n")
    print(f"fgpu coordinator: running at {coord.address} (pid {coord.process.pid}); jobs reach it with")
    print(f"  fgpu --coordinator-transport {coord.transport} --coordinator-addr {coord.address} "
          f"--cluster-config {state['cluster_config']} COMMAND")
    return 0


def status(a) -> int:
    if a.coordinator_addr:  # any coordinator, named explicitly
        if not answers(transport_of(a), a.coordinator_addr):
            print(f"fgpu coordinator: nothing answers at {a.coordinator_addr}")
            return 3
        print(live_status(transport_of(a), a.coordinator_addr), end="")
        return 0
    state = read_state(a.state_file)
    jobs = running_jobs(a.state_file)
    if not running(state) and not jobs:
        print("fgpu coordinator: not running")
        return 3
    if running(state):
        print(f"fgpu coordinator: running at {state['address']} (pid {state['pid']}, {state['transport']}), "
              f"cluster {state['cluster_config']}, report {state['report']}")
        print(live_status(state["transport"], state["address"]), end="")
    for job in jobs:
        print(f"fgpu job coordinator at {job['address']} (pid {job['pid']}) for: {job['command']}")
        print(live_status(job["transport"], job["address"]), end="")
    return 0


def stop(a, timeout=30.0) -> int:
    state = read_state(a.state_file)
    if not state or not alive(state["pid"]):
        print("fgpu coordinator: not running")
        Path(a.state_file).unlink(missing_ok=True)
        return 3
    os.kill(state["pid"], signal.SIGTERM)  # the coordinator writes its report on SIGTERM
    deadline = time.monotonic() + timeout
    while alive(state["pid"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    Path(a.state_file).unlink(missing_ok=True)
    if alive(state["pid"]):
        print(f"fgpu coordinator: pid {state['pid']} did not stop within {timeout:.0f} s")
        return 1
    log = Path(state["log"])
    log_text = log.read_text() if log.exists() else ""
    if state.get("private_dir"):
        shutil.rmtree(state["private_dir"], ignore_errors=True)
    if not Path(state["report"]).exists():
        print(f"fgpu coordinator: stopped, but wrote no report; its log:\n{log_text}")
        return 1
    print(f"fgpu coordinator: stopped; report at {state['report']}")
    return 0


def transport_of(a) -> str:
    return resolve_transport(a.coordinator_transport, a.coordinator_addr)


def cmd_coordinator(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu coordinator",
                                description="Start, stop or query a coordinator that several jobs can share.")
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--cluster-config", default=os.environ.get("FAKEGPU_CLUSTER_CONFIG"),
                   help="cluster YAML [FAKEGPU_CLUSTER_CONFIG]; default: one node of 8 GPUs")
    p.add_argument("--coordinator-transport", default=os.environ.get("FAKEGPU_COORDINATOR_TRANSPORT") or None,
                   choices=("unix", "tcp"), help="default: tcp for a host:port address, otherwise unix")
    p.add_argument("--coordinator-addr", default=os.environ.get("FAKEGPU_COORDINATOR_ADDR"),
                   help="socket path or host:port; default: a private socket (unix) or a free port (tcp). "
                        "With status: ask the coordinator at this address")
    p.add_argument("--report", default=os.environ.get("FAKEGPU_CLUSTER_REPORT_PATH", "fakegpu-cluster-report.json"),
                   help="where the coordinator writes its report when stopped [FAKEGPU_CLUSTER_REPORT_PATH]")
    p.add_argument("--state-file", default=default_state_file(), help="where start records the running coordinator")
    a = p.parse_args(argv)
    return {"start": start, "stop": stop, "status": status}[a.action](a)

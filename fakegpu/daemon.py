"""fgpu coordinator start|stop|status: a coordinator that outlives one command, shared by
several jobs or shells. Its address, pid and report path are kept in a small state file."""

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path

from .configs import write_single_node_config
from .coordinator import Coordinator, answers


def default_state_file() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return str(Path(base) / f"fakegpu-{os.getuid()}" / "coordinator.json")


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
    return bool(state) and alive(state["pid"]) and answers(state["transport"], state["address"])


def start(a) -> int:
    state = read_state(a.state_file)
    if running(state):
        print(f"fgpu coordinator: already running at {state['address']} (pid {state['pid']})")
        return 1
    config = a.cluster_config or write_single_node_config(8)
    report = str(Path(a.report).resolve())
    Path(report).parent.mkdir(parents=True, exist_ok=True)
    coord = Coordinator(config, a.coordinator_transport, a.coordinator_addr, report).start()
    state = {"pid": coord.process.pid, "transport": coord.transport, "address": coord.address,
             "cluster_config": str(Path(config).resolve()), "report": report, "log": str(coord.log_path)}
    Path(a.state_file).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    Path(a.state_file).write_text(json.dumps(state) + "\n")
    print(f"fgpu coordinator: running at {coord.address} (pid {coord.process.pid}); jobs reach it with")
    print(f"  fgpu --coordinator-transport {coord.transport} --coordinator-addr {coord.address} "
          f"--cluster-config {state['cluster_config']} COMMAND")
    return 0


def status(a) -> int:
    state = read_state(a.state_file)
    if not running(state):
        print("fgpu coordinator: not running")
        return 3
    print(f"fgpu coordinator: running at {state['address']} (pid {state['pid']}, {state['transport']}), "
          f"cluster {state['cluster_config']}, report {state['report']}")
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
    if not Path(state["report"]).exists():
        print(f"fgpu coordinator: stopped, but wrote no report; its log: {state['log']}")
        return 1
    print(f"fgpu coordinator: stopped; report at {state['report']}")
    return 0


def cmd_coordinator(argv) -> int:
    p = argparse.ArgumentParser(prog="fgpu coordinator",
                                description="Start, stop or query a coordinator that several jobs can share.")
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--cluster-config", default=os.environ.get("FAKEGPU_CLUSTER_CONFIG"),
                   help="cluster YAML [FAKEGPU_CLUSTER_CONFIG]; default: one node of 8 GPUs")
    p.add_argument("--coordinator-transport", default=os.environ.get("FAKEGPU_COORDINATOR_TRANSPORT", "unix"),
                   choices=("unix", "tcp"))
    p.add_argument("--coordinator-addr", default=os.environ.get("FAKEGPU_COORDINATOR_ADDR"),
                   help="socket path or host:port; default: a private socket (unix) or a free port (tcp)")
    p.add_argument("--report", default=os.environ.get("FAKEGPU_CLUSTER_REPORT_PATH", "fakegpu-cluster-report.json"),
                   help="where the coordinator writes its report when stopped [FAKEGPU_CLUSTER_REPORT_PATH]")
    p.add_argument("--state-file", default=default_state_file(), help="where start records the running coordinator")
    a = p.parse_args(argv)
    return {"start": start, "stop": stop, "status": status}[a.action](a)

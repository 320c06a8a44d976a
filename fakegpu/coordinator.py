"""Starting, finding and stopping a fakegpu-coordinator."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .paths import SetupError, built


def answers(transport: str, address: str) -> bool:
    """True when a coordinator accepts connections at the address."""
    try:
        if transport == "unix":
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(address)
        else:
            host, _, port = address.rpartition(":")
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1):
                pass
        return True
    except (OSError, ValueError):
        return False


def resolve_transport(given, address) -> str:
    """The transport as given, or else the one the address implies: host:port is tcp, a path unix."""
    if given:
        return given
    return "tcp" if address and not address.startswith("/") and ":" in address else "unix"


class Coordinator:
    """A coordinator process owned by this launcher. Use as a context manager."""

    def __init__(self, cluster_config, transport="unix", address=None, report=None, quiet=True, prefix=(), env=None,
                 detach=False):
        """prefix runs before the coordinator's command line and must exec it, keeping its pid (for
        example `ip netns exec NS`); env replaces the inherited environment. detach starts it in a
        session of its own, for a coordinator that outlives this launcher; otherwise it writes its
        report and exits when this process is gone, and stop() removes its private directory."""
        self.cluster_config = str(cluster_config)
        self.prefix = list(prefix)
        self.env = env
        self.transport = transport
        self.report = str(report) if report else None
        self.quiet = quiet
        self.detach = detach
        self.private_dir = tempfile.mkdtemp(prefix="fakegpu-")  # mode 0700: only we can reach the socket
        if address is None:
            address = os.path.join(self.private_dir, "coordinator.sock") if transport == "unix" else "127.0.0.1:0"
        self.address = address
        self.process = None
        self.log_path = Path(self.private_dir) / "coordinator.log"

    def start(self, timeout=30.0):
        ready = Path(self.private_dir) / "ready"
        cmd = [*self.prefix, str(built("fakegpu-coordinator")), "--transport", self.transport,
               "--address", self.address, "--cluster-config", self.cluster_config, "--ready-file", str(ready)]
        if self.report:
            cmd += ["--report", self.report]
        if not self.detach:
            cmd.append("--exit-with-parent")
        self._log = open(self.log_path, "w")
        # Its own process group keeps a terminal's Ctrl-C away from it, so that stop() still gets
        # the report. Only a detached one gets its own session: Linux schedules each session as
        # one group (autogroup), and a coordinator polling in a group of its own would hold a
        # whole core while ranks that outnumber the cores queue on the others.
        if self.detach:
            session = {"start_new_session": True}
        else:
            session = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env, **session)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.process.poll() is not None:
                self.stop()
                raise SetupError("the coordinator failed to start:\n" + self.output().strip())
            if time.monotonic() > deadline:
                self.stop()
                raise SetupError(f"the coordinator did not start within {timeout:.0f} s")
            time.sleep(0.01)
        self.address = ready.read_text().strip()
        return self

    def stop(self, timeout=30.0):
        """SIGTERM, which makes the coordinator write its report; returns its exit code. A
        coordinator that is not detached leaves nothing behind: its log is kept for output()."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and not self._log.closed:
            self._log.close()
        if not self.detach and os.path.isdir(self.private_dir):
            self._output = self.output()
            shutil.rmtree(self.private_dir, ignore_errors=True)
        return self.process.returncode if self.process else None

    def output(self) -> str:
        if self.log_path.exists():
            return self.log_path.read_text()
        return getattr(self, "_output", "")

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

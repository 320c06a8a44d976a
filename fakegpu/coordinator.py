"""Starting, finding and stopping a fakegpu-coordinator."""

import os
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


class Coordinator:
    """A coordinator process owned by this launcher. Use as a context manager."""

    def __init__(self, cluster_config, transport="unix", address=None, report=None, quiet=True, prefix=(), env=None,
                 detach=False):
        """prefix runs before the coordinator's command line and must exec it, keeping its pid (for
        example `ip netns exec NS`); env replaces the inherited environment. detach starts it in a
        session of its own, for a coordinator that outlives this launcher."""
        self.cluster_config = str(cluster_config)
        self.prefix = list(prefix)
        self.env = env
        self.transport = transport
        self.report = str(report) if report else None
        self.quiet = quiet
        self.detach = detach
        self._private_dir = tempfile.mkdtemp(prefix="fakegpu-")  # mode 0700: only we can reach the socket
        if address is None:
            address = os.path.join(self._private_dir, "coordinator.sock") if transport == "unix" else "127.0.0.1:0"
        self.address = address
        self.process = None
        self.log_path = Path(self._private_dir) / "coordinator.log"

    def start(self, timeout=30.0):
        ready = Path(self._private_dir) / "ready"
        cmd = [*self.prefix, str(built("fakegpu-coordinator")), "--transport", self.transport,
               "--address", self.address, "--cluster-config", self.cluster_config, "--ready-file", str(ready)]
        if self.report:
            cmd += ["--report", self.report]
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
                self._log.close()
                raise SetupError("the coordinator failed to start:\n" + self.log_path.read_text().strip())
            if time.monotonic() > deadline:
                self.stop()
                raise SetupError(f"the coordinator did not start within {timeout:.0f} s")
            time.sleep(0.01)
        self.address = ready.read_text().strip()
        return self

    def stop(self, timeout=30.0):
        """SIGTERM, which makes the coordinator write its report; returns its exit code."""
        if self.process is None or self.process.poll() is not None:
            if self.process:
                self._log.close()
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
        return self.process.returncode

    def output(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

"""Several "hosts" on one Linux machine: network namespaces joined by veth pairs to a bridge.

The coordinator's namespace holds the bridge and its address; each host namespace has one
interface, eth0, whose peer is a port of that bridge. Deleting that port is a host dropping
off the network: its processes keep running and nothing tells their peers (no FIN, no RST).
Every address and interface lives inside the namespaces, so parallel runs never collide.
"""

import os
import shutil
import signal
import subprocess

SUBNET = "10.77.0"
COORDINATOR_IP = f"{SUBNET}.1"
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21  # ip netns add also mounts, hence CAP_SYS_ADMIN


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _effective_capabilities() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def missing_requirements():
    """Why virtual hosts cannot be made here, or None when they can."""
    if not os.path.exists("/proc/self/ns/net"):
        return "network namespaces need Linux"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if not shutil.which(tool):
            return f"the `{tool}` command ({package}) is not installed"
    caps = _effective_capabilities()
    if not (caps >> CAP_NET_ADMIN & 1 and caps >> CAP_SYS_ADMIN & 1):
        return "creating network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    probe = f"fakegpu{os.getpid()}-probe"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


class VirtualHosts:
    """A coordinator namespace and `count` host namespaces: create() makes them, close() kills
    whatever still runs inside and deletes them (call it in a finally or a test cleanup)."""

    def __init__(self, count):
        tag = f"fakegpu{os.getpid()}"  # a live pid is unique, so is the tag
        self.coordinator = f"{tag}-coord"
        self.hosts = [f"{tag}-host{i}" for i in range(count)]

    @staticmethod
    def host_ip(index):
        return f"{SUBNET}.{10 + index}"

    @staticmethod
    def port(index):
        """The bridge port, in the coordinator's namespace, that joins host `index`."""
        return f"host{index}"

    def create(self):
        """Makes the namespaces and the network; on any failure removes what it made, and raises."""
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self):
        for ns in [self.coordinator, *self.hosts]:
            ip("netns", "del", ns, check=False)  # left by a run killed before it cleaned up
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", self.coordinator, "link", "add", "br0", "type", "bridge")
        ip("-n", self.coordinator, "addr", "add", f"{COORDINATOR_IP}/24", "dev", "br0")
        ip("-n", self.coordinator, "link", "set", "br0", "up")
        for i, ns in enumerate(self.hosts):
            # Made inside the coordinator's namespace with the peer moved straight into the
            # host's, so no interface name ever appears in the machine's own namespace.
            ip("-n", self.coordinator, "link", "add", self.port(i), "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("-n", self.coordinator, "link", "set", self.port(i), "master", "br0", "up")
            ip("-n", ns, "addr", "add", f"{self.host_ip(i)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")

    def exec_prefix(self, ns):
        """A command prefix that runs what follows inside ns, keeping its pid (ip execs it)."""
        return ["ip", "netns", "exec", ns]

    def unplug(self, index):
        """Host `index` drops off the network: its bridge port and eth0 vanish, its processes stay."""
        ip("-n", self.coordinator, "link", "del", self.port(index))

    def kill_processes(self, ns):
        """SIGKILL to everything in ns, as `ip netns pids NS | xargs kill -9`; returns the pids."""
        listed = ip("netns", "pids", ns, check=False)
        pids = [int(p) for p in listed.stdout.split()]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def close(self):
        for ns in [*self.hosts, self.coordinator]:
            self.kill_processes(ns)
            ip("netns", "del", ns, check=False)

"""Running a job's processes side by side and watching every one of them, as torchrun does:
the first to fail gives the others a grace period to finish (the coordinator tells them of the
failure), after which they are stopped; SIGINT and SIGTERM stop them at once. Nothing started
here outlives fgpu, even when fgpu is killed with SIGKILL."""

import ctypes
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, List, Optional

GRACE_SECONDS = 5.0  # how long the others may run on after a process failed
STOP_SECONDS = 5.0   # how long a stopped process may take to exit after SIGTERM, before SIGKILL

PR_SET_PDEATHSIG = 1
# Found here: the child between fork and exec must not look symbols up (another thread of the
# parent may have held the loader's lock at the fork).
_prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl


def _die_with_fgpu():
    """Runs in each child before exec: the kernel sends it SIGTERM when fgpu dies, however fgpu dies."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Interrupted(Exception):
    """fgpu itself got SIGINT or SIGTERM."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def interruptible():
    """Within it, SIGINT and SIGTERM raise Interrupted, so that cleanup code runs for both."""
    def raise_interrupted(signum, _frame):
        raise Interrupted(signum)
    previous = {s: signal.signal(s, raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass
class Launch:
    command: List[str]
    env: dict
    label: str                  # "rank 3", "the command", "node1's torchrun"
    rank: Optional[int] = None  # the global rank, for a process fgpu started as one rank
    node: str = ""


@dataclass
class Exit:
    launch: Launch
    pid: int
    code: Optional[int] = None  # as subprocess gives it: negative for a signal; None while running
    after_s: float = 0.0        # seconds after the job started
    stopped: bool = False       # fgpu stopped it (grace period over, or interrupted)

    def describe(self) -> str:
        if self.code is None:
            return "still running"
        what = f"signal {signal.Signals(-self.code).name}" if self.code < 0 else f"exit code {self.code}"
        return what + (" (stopped by fgpu)" if self.stopped else "")


@dataclass
class Outcome:
    code: int                       # the job's exit code: the first failure's, or 128 + signal
    exits: List[Exit] = field(default_factory=list)
    first_failure: Optional[Exit] = None
    interrupted: Optional[int] = None  # the signal fgpu got


def shell_code(code: int) -> int:
    """A subprocess return code as a shell reports it: 128 + N for signal N."""
    return 128 - code if code < 0 else code


def _to_stderr(message: str):
    print(message, file=sys.stderr)


def supervise(launches, grace_seconds=GRACE_SECONDS, before_stop: Callable[[], None] = None,
              log=_to_stderr, stdout=None) -> Outcome:
    """Runs the launches side by side until all exit. before_stop runs just before fgpu stops
    processes that are still running (to print where they are); stdout is the processes'
    (by default fgpu's own)."""
    started = time.monotonic()
    outcome = Outcome(0)
    procs = []
    try:
        for launch in launches:
            procs.append(subprocess.Popen(launch.command, env=launch.env, stdout=stdout, preexec_fn=_die_with_fgpu))
            outcome.exits.append(Exit(launch, procs[-1].pid))
        grace_end, announce = None, False
        while True:
            running = 0
            for proc, ex in zip(procs, outcome.exits):
                if ex.code is not None:
                    continue
                ex.code = proc.poll()
                if ex.code is None:
                    running += 1
                    continue
                ex.after_s = time.monotonic() - started
                if ex.code != 0 and outcome.first_failure is None:
                    outcome.first_failure = ex
                    grace_end = time.monotonic() + grace_seconds
                    announce = True
            if running == 0:
                break
            if announce:
                first = outcome.first_failure
                log(f"fgpu: {first.launch.label} (pid {first.pid}) failed with {first.describe()}; "
                    f"{running} other process(es) get {grace_seconds:.0f} s to finish")
                announce = False
            if grace_end is not None and time.monotonic() > grace_end:
                _stop(procs, outcome.exits, started, before_stop)
                break
            time.sleep(0.01)
    except Interrupted as e:
        outcome.interrupted = e.signum
        log(f"\nfgpu: {e}: stopping {sum(ex.code is None for ex in outcome.exits)} process(es)")
        _stop(procs, outcome.exits, started, before_stop)
    finally:
        for proc, ex in zip(procs, outcome.exits):  # whatever happened above, nothing is left running
            if proc.poll() is None:
                proc.kill()
                ex.stopped = True
            ex.code = proc.wait()
    if outcome.interrupted:
        outcome.code = 128 + outcome.interrupted
    elif outcome.first_failure:
        outcome.code = shell_code(outcome.first_failure.code)
    return outcome


def _stop(procs, exits, started, before_stop):
    """SIGTERM to every process still running, SIGKILL to those still there STOP_SECONDS later
    (or at once on a second SIGINT or SIGTERM)."""
    if before_stop:
        try:
            before_stop()
        except Interrupted:
            pass
    for proc, ex in zip(procs, exits):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            ex.stopped = True
    deadline = time.monotonic() + STOP_SECONDS
    try:
        while time.monotonic() < deadline and any(proc.poll() is None for proc in procs):
            time.sleep(0.01)
    except Interrupted:
        pass
    for proc, ex in zip(procs, exits):
        if proc.poll() is None:
            proc.kill()
        ex.code = proc.wait()
        if not ex.after_s:
            ex.after_s = time.monotonic() - started

"""Failure rows at the launcher: a rank that dies before its first NCCL call, fgpu stopped with
SIGTERM, SIGINT or SIGKILL, a report that could not be written, an address where something else
answers. Each must end within seconds, leave no process behind, write the report, exit non-zero
and say which rank failed and how. fgpu runs in a session of its own, so every process it
started can be found afterwards."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rank_jobs import FGPU  # noqa: E402
from fakegpu.paths import built  # noqa: E402

NCCL_CHECK = str(built("nccl_check"))


def session_members(sid: int):
    """Live processes (not zombies) of session sid."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _ppid, _pgrp, session = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:4]
        except (OSError, ValueError):
            continue
        if int(session) == sid and state != "Z":
            found.append(int(entry.name))
    return found


def wait_for_ranks(session, command, count, timeout=60):
    """Waits until `count` processes of the session run `command` (a list of its arguments): fgpu
    has started its ranks, so it is past its start-up, whatever the machine's load."""
    wanted = ("\0".join(command) + "\0").encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = 0
        for pid in session_members(session):
            try:
                running += Path(f"/proc/{pid}/cmdline").read_bytes() == wanted
            except OSError:
                pass
        if running >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fgpu did not start {count} x {' '.join(command)} within {timeout} s")


class Run:
    """One fgpu command in a fresh directory with a private TMPDIR. With `sig`, the signal goes
    to fgpu once its `ranks` (a count and a command) run."""

    def __init__(self, test, *args, env=None, sig=None, ranks=None, prepare=None):
        self.dir = Path(tempfile.mkdtemp(prefix="launcher-"))
        test.addCleanup(lambda: subprocess.run(["rm", "-rf", str(self.dir)]))
        if prepare:
            prepare(self.dir)
        self.tmp = self.dir / "tmp"
        self.tmp.mkdir()
        # Its own state directory too, where running jobs register (fgpu coordinator status).
        self.env = dict(os.environ, TMPDIR=str(self.tmp), XDG_RUNTIME_DIR=str(self.tmp), **(env or {}))
        run_env = self.env
        started = time.monotonic()
        proc = subprocess.Popen([FGPU, *map(str, args)], cwd=self.dir, env=run_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        if sig:
            wait_for_ranks(proc.pid, ranks[1], ranks[0])
            os.kill(proc.pid, sig)
        self.out, self.err = proc.communicate(timeout=120)
        self.code = proc.returncode
        self.seconds = time.monotonic() - started
        deadline = time.monotonic() + 5
        while session_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.survivors = session_members(proc.pid)
        self.report = self.dir / "fakegpu-cluster-report.json"

    def left_in_tmp(self):
        """What fgpu left in TMPDIR, besides the per-user directory where running jobs register."""
        return sorted(p.name for p in self.tmp.iterdir() if p.name != f"fakegpu-{os.getuid()}")


# A rank command that SIGKILLs the job's coordinator, its sibling (both children of fgpu), as the
# kernel's out-of-memory killer would, then lingers a moment.
KILL_COORDINATOR = """
import os, signal, time
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        parent = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
        if int(parent) == os.getppid() and b"fakegpu-coordinator" in open(f"/proc/{pid}/cmdline", "rb").read():
            os.kill(int(pid), signal.SIGKILL)
    except (OSError, IndexError, ValueError):
        pass
time.sleep(1)
"""


def dies_before_init(rank: int, code: int, id_file: str):
    """A rank command: `rank` exits with `code` before any NCCL call, the others run nccl_check
    (sharing the unique id through id_file)."""
    return ["sh", "-c", f'if [ "$RANK" = {rank} ]; then sleep 0.3; exit {code}; fi; '
                        f'exec {NCCL_CHECK} {id_file} --count 16 --iters 1']


class LauncherFailures(unittest.TestCase):
    def assert_clean_end(self, run, code):
        self.assertEqual(run.code, code, run.err)
        self.assertEqual(run.survivors, [], "processes outlived fgpu")
        self.assertTrue(run.report.exists(), run.err)
        self.assertEqual(run.left_in_tmp(), [], "fgpu left temporary files")
        (run.dir / "uid").unlink(missing_ok=True)

    def test_a_rank_dying_before_init_ends_the_job_after_the_grace_period(self):
        run = Run(self, "--nproc", "4", *dies_before_init(3, 3, "uid"))
        self.assert_clean_end(run, 3)
        self.assertLess(run.seconds, 15)
        self.assertIn("fgpu: rank 3 (pid", run.err)
        self.assertIn("failed with exit code 3; 3 other process(es) get 5 s to finish", run.err)
        # The live picture before the others are stopped, then the table: rank 3 first.
        self.assertIn("waits in ncclCommInitRank of a 4-rank communicator for rank 3", run.err)
        self.assertIn("never connected: rank 3", run.err)
        table = run.err[run.err.index("fgpu: the job failed: rank 3 failed first, with exit code 3"):].splitlines()
        self.assertTrue(table[2].split()[:2] == ["rank", "3"], table)
        self.assertIn("never connected to the coordinator", table[2])
        for line in table[3:6]:
            self.assertIn("signal SIGTERM (stopped by fgpu)", line)
            self.assertIn("waits in ncclCommInitRank", line)

    def test_an_init_missing_a_rank_times_out_naming_it(self):
        run = Run(self, "--nproc", "3", *dies_before_init(1, 0, "uid"),
                  env={"FAKEGPU_COORDINATOR_TIMEOUT_MS": "1500"})
        self.assert_clean_end(run, 2)  # nccl_check exits 2 on an NCCL error
        self.assertLess(run.seconds, 10)
        self.assertIn("rendezvous timeout after 2 s in ncclCommInitRank of a 3-rank communicator: ranks 0, 2 waited "
                      "for the others; rank 1 has not connected to the coordinator", run.out)
        self.assertIn("diagnoses: 1 rendezvous timeout(s)", run.out)

    def check_stopped_by(self, sig, code):
        run = Run(self, "--nproc", "2", "sleep", "30", sig=sig, ranks=(2, ["sleep", "30"]))
        self.assert_clean_end(run, code)
        self.assertLess(run.seconds, 10)
        self.assertIn(f"fgpu: {sig.name}: stopping 2 process(es)", run.err)
        self.assertIn("fgpu: where every rank is:", run.err)
        self.assertIn(f"fgpu: interrupted by {sig.name}: the job was stopped", run.err)
        # Both ranks are in the table, stopped by fgpu (or, on Ctrl-C in a terminal, by the SIGINT itself).
        table = run.err[run.err.index("interrupted by"):].splitlines()[2:]
        self.assertEqual([line.split()[:2] for line in table], [["rank", "0"], ["rank", "1"]], run.err)
        for line in table:
            self.assertIn("(stopped by fgpu)", line)
            self.assertIn("never connected to the coordinator", line)

    def test_sigterm_stops_the_ranks_and_writes_the_report(self):
        self.check_stopped_by(signal.SIGTERM, 143)

    def test_ctrl_c_stops_the_ranks_and_writes_the_report(self):
        self.check_stopped_by(signal.SIGINT, 130)

    def test_a_killed_launcher_takes_its_ranks_and_coordinator_along(self):
        run = Run(self, "--nproc", "2", "sleep", "30", sig=signal.SIGKILL, ranks=(2, ["sleep", "30"]))
        self.assertEqual(run.code, -signal.SIGKILL)
        self.assertEqual(run.survivors, [], "ranks or the coordinator outlived a killed fgpu")
        self.assertLess(run.seconds, 10)
        self.assertTrue(run.report.exists(), "the coordinator writes its report when its launcher is gone")
        status = subprocess.run([FGPU, "coordinator", "status"], env=run.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(status.returncode, 3, "the killed job is no longer listed: " + status.stdout)
        self.assertIn("not running", status.stdout)

    def test_a_killed_coordinator_is_named_and_an_old_report_not_taken_for_the_jobs(self):
        stale = '{"note": "an earlier job\'s report"}'
        run = Run(self, "--nproc", "1", sys.executable, "-c", KILL_COORDINATOR,
                  prepare=lambda d: (d / "fakegpu-cluster-report.json").write_text(stale))
        self.assertNotEqual(run.code, 0)
        self.assertEqual(run.survivors, [], "processes outlived fgpu")
        self.assertIn("fgpu: the coordinator was killed by SIGKILL (the kernel's out-of-memory killer", run.err)
        self.assertIn("fgpu: no report was written for this job", run.err)
        self.assertNotIn("cluster report written", run.out)
        self.assertEqual(run.report.read_text(), stale, "the earlier report is left as it was")

    def test_an_unwritable_report_is_refused_before_the_job(self):
        run = Run(self, "--report", "/nonexistent/r.json", "--nproc", "2", "sleep", "30")
        self.assertEqual(run.code, 2)
        self.assertLess(run.seconds, 5)
        self.assertIn("--report /nonexistent/r.json: directory /nonexistent does not exist", run.err)
        self.assertEqual(run.survivors, [])
        self.assertEqual(run.left_in_tmp(), [])

    def test_an_address_where_something_else_answers_is_refused(self):
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        self.addCleanup(server.close)

        def answer_garbage():
            try:
                while True:
                    conn, _ = server.accept()
                    conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" * 8)
                    conn.close()
            except OSError:
                pass
        threading.Thread(target=answer_garbage, daemon=True).start()
        port = server.getsockname()[1]
        run = Run(self, "--coordinator-addr", f"127.0.0.1:{port}", "--nproc", "2", "true")
        self.assertEqual(run.code, 2, run.err)
        self.assertIn(f"something answers at tcp:127.0.0.1:{port}, but not as a fakegpu coordinator", run.err)
        self.assertIn("bad frame magic", run.err)

    def test_a_host_and_port_address_means_tcp(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        run = Run(self, "--coordinator-addr", f"127.0.0.1:{port}", "--nproc", "2", NCCL_CHECK, "uid", "--count", "16",
                  "--iters", "1")
        self.assert_clean_end(run, 0)
        self.assertIn("cluster report written", run.out)

    def test_a_second_job_in_the_directory_gets_its_own_report(self):
        first_dir = Path(tempfile.mkdtemp(prefix="launcher-"))
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(first_dir)]))
        first = subprocess.Popen([FGPU, "--nproc", "2", "sleep", "4"], cwd=first_dir, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        jobs = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"fakegpu-{os.getuid()}" / "jobs"
        while not (jobs / f"{first.pid}.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        second = subprocess.run([FGPU, "--nproc", "2", "true"], cwd=first_dir, capture_output=True, text=True,
                                timeout=60)
        first.communicate(timeout=60)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn(f"fakegpu-cluster-report.json belongs to a job still running (fgpu pid {first.pid})",
                      second.stderr)
        written = sorted(p.name for p in first_dir.glob("fakegpu-cluster-report*.json") if "trace" not in p.name)
        self.assertEqual(len(written), 2, written)
        self.assertIn("fakegpu-cluster-report.json", written)


if __name__ == "__main__":
    unittest.main()

"""Runs a test command with TMPDIR set to a new directory of its own, removed afterwards, so the
suite leaves nothing in the machine's temporary directory, whether the test passes or not.
(A new directory under the system's one keeps unix socket paths short.)
Usage: with_private_tmp.py NAME COMMAND..."""

import os
import shutil
import subprocess
import sys
import tempfile

tmp = tempfile.mkdtemp(prefix=f"{sys.argv[1]}-")
try:
    sys.exit(subprocess.call(sys.argv[2:], env=dict(os.environ, TMPDIR=tmp)))
finally:
    shutil.rmtree(tmp, ignore_errors=True)

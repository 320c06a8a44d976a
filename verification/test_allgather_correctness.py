#!/usr/bin/env python3
"""The usage page's `python3 verification/test_allgather_correctness.py`:
runs test/integration/test_allgather_correctness.py with these arguments."""
import os
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "integration", "test_allgather_correctness.py")
os.execv(sys.executable, [sys.executable, os.path.normpath(CHECK), *sys.argv[1:]])

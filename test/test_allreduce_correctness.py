#!/usr/bin/env python3
"""The usage page's `python3 test/test_allreduce_correctness.py`:
runs test/integration/test_allreduce_correctness.py with these arguments."""
import os
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "integration", "test_allreduce_correctness.py")
os.execv(sys.executable, [sys.executable, os.path.normpath(CHECK), *sys.argv[1:]])

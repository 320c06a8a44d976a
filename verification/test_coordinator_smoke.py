#!/usr/bin/env python3
"""The usage page's `python3 verification/test_coordinator_smoke.py`:
runs test/integration/test_coordinator_smoke.py with these arguments."""
import os
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "integration", "test_coordinator_smoke.py")
os.execv(sys.executable, [sys.executable, os.path.normpath(CHECK), *sys.argv[1:]])

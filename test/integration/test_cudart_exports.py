"""The fake libcudart's dynamic symbols: nvcc-built binaries bind cudaMalloc@libcudart.so.13
(or .12), so every export must carry its library's version node; and every name NVIDIA's
libcudart.so.13 exports must exist in ours, or some CUDA 13 program would fail to load."""

import os
import re
import shutil
import subprocess
import unittest
from pathlib import Path

BUILD = Path(os.environ.get("FAKEGPU_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
REAL = Path(os.environ.get("FAKEGPU_REAL_CUDART", "/usr/local/cuda/lib64/libcudart.so.13"))
# "  123: 0000... 37 FUNC GLOBAL DEFAULT 13 cudaMalloc@@libcudart.so.13"
LINE = re.compile(r"^\s*\d+:\s+\S+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\S+)\s+(\S+)")


def exports(library):
    """{name: version} of the defined global symbols, from readelf."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(library)], capture_output=True, text=True, check=True)
    found = {}
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if not m or m.group(3) == "UND" or m.group(2) not in ("GLOBAL", "WEAK"):
            continue
        name, _, version = m.group(4).partition("@")
        found[name] = version.lstrip("@")
    return found


@unittest.skipUnless(shutil.which("readelf"), "readelf not installed")
class CudartExports(unittest.TestCase):
    def test_version_nodes(self):
        for major in (12, 13):
            syms = exports(BUILD / f"libcudart.so.{major}")
            node = f"libcudart.so.{major}"
            self.assertIn("cudaMalloc", syms)
            self.assertIn("__cudaRegisterFatBinary", syms)
            wrong = {n: v for n, v in syms.items() if v != node and n != node}
            self.assertEqual(wrong, {}, f"exports of {node} without its version node")
            stray = [n for n in syms if not n.startswith(("cuda", "__cuda", "fakegpu_cuda_"))
                     and n not in (node, "fakegpu_torch_bridge")]
            self.assertEqual(stray, [], f"{node} leaks internal symbols")

    def test_major_specific_exports(self):
        # CUDA 12's header maps cudaGetDeviceProperties to _v2; CUDA 13 has no _v2.
        self.assertIn("cudaGetDeviceProperties_v2", exports(BUILD / "libcudart.so.12"))
        self.assertNotIn("cudaGetDeviceProperties_v2", exports(BUILD / "libcudart.so.13"))

    @unittest.skipUnless(REAL.exists(), f"no NVIDIA runtime at {REAL}")
    def test_every_real_cuda13_export_exists(self):
        real = exports(REAL)
        ours = exports(BUILD / "libcudart.so.13")
        self.assertGreater(len(real), 100, "could not read NVIDIA's exports")
        missing = sorted(set(real) - set(ours))
        self.assertEqual(missing, [], f"{len(missing)} CUDA 13 exports missing from fakegpu's libcudart.so.13")
        differ = {n: (v, ours[n]) for n, v in real.items() if n in ours and v != ours[n]}
        self.assertEqual(differ, {}, "version nodes differ from NVIDIA's")


if __name__ == "__main__":
    unittest.main(verbosity=2)

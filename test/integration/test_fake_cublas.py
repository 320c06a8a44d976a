"""fakegpu's cuBLAS and cuBLASLt, called through ctypes over fakegpu's CUDA runtime: every
product is checked element by element against a plain Python product of the same matrices."""

import ctypes
import os
import random
import struct
import subprocess
import sys
import unittest

from rank_jobs import built

N, T = 0, 1  # cublasOperation_t
R32F, R64F, R16BF = 0, 1, 14  # cudaDataType_t
COMPUTE_32F = 68
H2D, D2H = 1, 2


def load():
    mode = os.RTLD_GLOBAL
    cudart = ctypes.CDLL(str(built("libcudart.so.13")), mode=mode)
    blas = ctypes.CDLL(str(built("libcublas.so.13")), mode=mode)
    lt = ctypes.CDLL(str(built("libcublasLt.so.13")), mode=mode)
    return cudart, blas, lt


def bf16(x):
    """x rounded to bfloat16 (nearest, ties to even) and its bits."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits, struct.unpack("<f", struct.pack("<I", bits << 16))[0]


class FakeCublas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cudart, cls.blas, cls.lt = load()
        cls.handle = ctypes.c_void_p()
        assert cls.blas.cublasCreate_v2(ctypes.byref(cls.handle)) == 0

    def device(self, values, ctype=ctypes.c_float):
        """Device memory holding values (a flat list)."""
        host = (ctype * max(len(values), 1))(*values)
        ptr = ctypes.c_void_p()
        self.assertEqual(self.cudart.cudaMalloc(ctypes.byref(ptr), ctypes.sizeof(host)), 0)
        self.assertEqual(self.cudart.cudaMemcpy(ptr, host, ctypes.sizeof(host), H2D), 0)
        return ptr

    def read(self, ptr, count, ctype=ctypes.c_float):
        self.assertEqual(self.cudart.cudaDeviceSynchronize(), 0)
        host = (ctype * count)()
        self.assertEqual(self.cudart.cudaMemcpy(host, ptr, ctypes.sizeof(host), D2H), 0)
        return list(host)

    @staticmethod
    def product(op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        """Column-major alpha op(A) op(B) + beta C, in Python."""
        at = lambda i, p: a[p + i * lda] if op_a == T else a[i + p * lda]
        bt = lambda p, j: b[j + p * ldb] if op_b == T else b[p + j * ldb]
        out = list(c)
        for j in range(n):
            for i in range(m):
                out[i + j * ldc] = alpha * sum(at(i, p) * bt(p, j) for p in range(k)) + beta * c[i + j * ldc]
        return out

    def assert_close(self, got, want, tol=1e-5):
        self.assertEqual(len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertLessEqual(abs(g - w), tol * max(1.0, abs(w)), f"element {i}: {g} != {w}")

    def test_sgemm_every_transpose_with_padding_alpha_and_beta(self):
        rnd = random.Random(1)
        m, n, k = 5, 4, 3
        for op_a in (N, T):
            for op_b in (N, T):
                lda = (m if op_a == N else k) + 2
                ldb = (k if op_b == N else n) + 1
                ldc = m + 3
                a = [rnd.uniform(-1, 1) for _ in range(lda * (k if op_a == N else m))]
                b = [rnd.uniform(-1, 1) for _ in range(ldb * (n if op_b == N else k))]
                c = [rnd.uniform(-1, 1) for _ in range(ldc * n)]
                da, db, dc = self.device(a), self.device(b), self.device(c)
                alpha, beta = ctypes.c_float(1.5), ctypes.c_float(-0.5)
                rc = self.blas.cublasSgemm_v2(self.handle, op_a, op_b, m, n, k, ctypes.byref(alpha), da, lda, db, ldb,
                                              ctypes.byref(beta), dc, ldc)
                self.assertEqual(rc, 0)
                self.assert_close(self.read(dc, len(c)), self.product(op_a, op_b, m, n, k, 1.5, a, lda, b, ldb, -0.5, c, ldc))

    def test_dgemm_strided_batches(self):
        rnd = random.Random(2)
        m, n, k, batch = 3, 2, 4, 3
        a = [rnd.uniform(-1, 1) for _ in range(m * k * batch)]
        b = [rnd.uniform(-1, 1) for _ in range(k * n * batch)]
        c = [0.0] * (m * n * batch)
        da, db, dc = (self.device(x, ctypes.c_double) for x in (a, b, c))
        one, zero = ctypes.c_double(1), ctypes.c_double(0)
        rc = self.blas.cublasDgemmStridedBatched(self.handle, N, N, m, n, k, ctypes.byref(one), da, m,
                                                 ctypes.c_longlong(m * k), db, k, ctypes.c_longlong(k * n),
                                                 ctypes.byref(zero), dc, m, ctypes.c_longlong(m * n), batch)
        self.assertEqual(rc, 0)
        got = self.read(dc, len(c), ctypes.c_double)
        for i in range(batch):
            want = self.product(N, N, m, n, k, 1.0, a[i * m * k:], m, b[i * k * n:], k, 0.0, [0.0] * (m * n), m)
            self.assert_close(got[i * m * n:(i + 1) * m * n], want, 1e-12)

    def test_gemm_ex_bfloat16_inputs_float_output(self):
        rnd = random.Random(3)
        m, n, k = 4, 3, 5
        a_bits, a = zip(*(bf16(rnd.uniform(-2, 2)) for _ in range(m * k)))
        b_bits, b = zip(*(bf16(rnd.uniform(-2, 2)) for _ in range(k * n)))
        da, db = self.device(a_bits, ctypes.c_uint16), self.device(b_bits, ctypes.c_uint16)
        dc = self.device([0.0] * (m * n))
        one, zero = ctypes.c_float(1), ctypes.c_float(0)
        rc = self.blas.cublasGemmEx(self.handle, N, N, m, n, k, ctypes.byref(one), da, R16BF, m, db, R16BF, k,
                                    ctypes.byref(zero), dc, R32F, m, COMPUTE_32F, -1)
        self.assertEqual(rc, 0)
        self.assert_close(self.read(dc, m * n), self.product(N, N, m, n, k, 1.0, a, m, b, k, 0.0, [0.0] * (m * n), m))

    def test_alpha_in_device_memory_is_read_when_the_product_runs(self):
        a, b = self.device([2.0]), self.device([3.0])
        c = self.device([0.0])
        alpha, beta = self.device([0.0]), self.device([0.0])
        self.assertEqual(self.blas.cublasSetPointerMode_v2(self.handle, 1), 0)
        try:
            stream = ctypes.c_void_p()
            self.assertEqual(self.cudart.cudaStreamCreate(ctypes.byref(stream)), 0)
            self.assertEqual(self.blas.cublasSetStream_v2(self.handle, stream), 0)
            four = ctypes.c_float(4.0)
            # alpha is written on the stream before the product and must be the value it reads.
            self.assertEqual(self.cudart.cudaMemcpyAsync(alpha, ctypes.byref(four), 4, H2D, stream), 0)
            self.assertEqual(self.blas.cublasSgemm_v2(self.handle, N, N, 1, 1, 1, alpha, a, 1, b, 1, beta, c, 1), 0)
            self.assertEqual(self.read(c, 1), [24.0])
        finally:
            self.blas.cublasSetPointerMode_v2(self.handle, 0)
            self.blas.cublasSetStream_v2(self.handle, None)

    def test_sgemv_with_a_strided_vector(self):
        m, n = 3, 2
        a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # column-major 3 x 2
        x = [10.0, -1.0, 20.0]  # x = (10, 20) at stride 2
        da, dx, dy = self.device(a), self.device(x), self.device([1.0, 1.0, 1.0])
        one = ctypes.c_float(1)
        rc = self.blas.cublasSgemv_v2(self.handle, N, m, n, ctypes.byref(one), da, m, dx, 2, ctypes.byref(one), dy, 1)
        self.assertEqual(rc, 0)
        self.assertEqual(self.read(dy, 3), [1 + 10 + 80.0, 1 + 20 + 100.0, 1 + 30 + 120.0])

    def test_lt_matmul_with_bias_and_relu(self):
        lt = self.lt
        handle, desc = ctypes.c_void_p(), ctypes.c_void_p()
        self.assertEqual(lt.cublasLtCreate(ctypes.byref(handle)), 0)
        self.assertEqual(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), COMPUTE_32F, R32F), 0)
        trans = ctypes.c_int(T)
        self.assertEqual(lt.cublasLtMatmulDescSetAttribute(desc, 3, ctypes.byref(trans), 4), 0)  # TRANSA
        epilogue = ctypes.c_int(6)  # RELU_BIAS
        self.assertEqual(lt.cublasLtMatmulDescSetAttribute(desc, 7, ctypes.byref(epilogue), 4), 0)
        m, n, k = 2, 3, 2
        a = [1.0, -2.0, 3.0, 0.5]  # stored k x m, used transposed
        b = [1.0, 2.0, -1.0, 0.0, 0.5, 0.5]
        bias = self.device([0.25, -10.0])
        bias_ptr = ctypes.c_void_p(bias.value)
        self.assertEqual(lt.cublasLtMatmulDescSetAttribute(desc, 8, ctypes.byref(bias_ptr), 8), 0)
        layouts = []
        for rows, cols in ((k, m), (k, n), (m, n), (m, n)):
            layout = ctypes.c_void_p()
            self.assertEqual(lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), R32F, ctypes.c_uint64(rows),
                                                           ctypes.c_uint64(cols), ctypes.c_int64(rows)), 0)
            layouts.append(layout)
        da, db, dd = self.device(a), self.device(b), self.device([0.0] * (m * n))
        one, zero = ctypes.c_float(1), ctypes.c_float(0)
        rc = lt.cublasLtMatmul(handle, desc, ctypes.byref(one), da, layouts[0], db, layouts[1], ctypes.byref(zero), dd,
                               layouts[2], dd, layouts[3], None, None, ctypes.c_size_t(0), None)
        self.assertEqual(rc, 0)
        plain = self.product(T, N, m, n, k, 1.0, a, k, b, k, 0.0, [0.0] * (m * n), m)
        want = [max(0.0, v + (0.25 if i % m == 0 else -10.0)) for i, v in enumerate(plain)]
        self.assert_close(self.read(dd, m * n), want)

    def test_an_unsupported_function_fails_and_names_itself(self):
        code = ("import ctypes, sys; sys.path.insert(0, %r); from test_fake_cublas import load; "
                "c, b, l = load(); sys.exit(b.cublasCgemm_v2(None))") % os.path.dirname(os.path.abspath(__file__))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 15, r.stderr)  # CUBLAS_STATUS_NOT_SUPPORTED
        self.assertIn("fakegpu: cublasCgemm_v2: not simulated by fakegpu's cuBLAS", r.stderr)


if __name__ == "__main__":
    unittest.main()

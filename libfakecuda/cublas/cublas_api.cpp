// fakegpu's cuBLAS (libcublas.so.12/.13): handles and their settings, and the matrix products
// PyTorch uses (GEMM in every precision it asks for, strided and pointer-array batches, and
// matrix-vector products), computed on the CPU in stream order. The rest of cuBLAS is in
// cublas_unsupported.cpp.
#include <cstddef>
#include <cstdint>

#include "blas_common.h"
#include "gemm.h"

using namespace fakegpu::blas;

struct cublasContext {
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  int math_mode = 0;
  int pointer_mode = 0;  // CUBLAS_POINTER_MODE_HOST
  int atomics_mode = 0;
  int sm_count_target = 0;
};
using Handle = cublasContext*;

namespace {

constexpr int kVersionMajor = kBlasMajor, kVersionMinor = kBlasMinor, kVersionPatch = 0;

Handle checked(Handle h) {
  require(h != nullptr, kNotInitialized);
  return h;
}

bool transposed(int op) {
  require(op >= 0 && op <= 2);  // N, T, C: the same for real types
  return op != 0;
}

// Checks a GEMM's shape and types as cuBLAS does.
void check_shape(const Gemm& g) {
  require(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0);
  require(supported_type(g.a.type) && supported_type(g.b.type) && supported_type(g.d_type), kNotSupported);
  const int64_t a_rows = g.a.transposed ? g.k : g.m, b_rows = g.b.transposed ? g.n : g.k;
  require(g.a.ld >= (a_rows > 1 ? a_rows : 1) && g.b.ld >= (b_rows > 1 ? b_rows : 1) && g.ldd >= (g.m > 1 ? g.m : 1));
}

// Checks a GEMM and queues it on the handle's stream.
void queue_gemm(Handle h, Gemm g, Scalar alpha, Scalar beta) {
  check_shape(g);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  enqueue(h->stream, [g, alpha, beta]() mutable {
    g.alpha = alpha.value();
    g.beta = beta.value();
    run(g);
  });
}

Gemm make_gemm(int transa, int transb, int64_t m, int64_t n, int64_t k, const void* a, int a_type, int64_t lda,
               const void* b, int b_type, int64_t ldb, void* c, int c_type, int64_t ldc) {
  Gemm g;
  g.m = m, g.n = n, g.k = k;
  g.a = {a, a_type, lda, 0, transposed(transa)};
  g.b = {b, b_type, ldb, 0, transposed(transb)};
  g.c = {c, c_type, ldc, 0, false};
  g.d = c, g.d_type = c_type, g.ldd = ldc;
  return g;
}

Status typed_gemm(Handle h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int lda,
                  const void* b, int ldb, const void* beta, void* c, int ldc, int type, long long sa = 0,
                  long long sb = 0, long long sc = 0, int batch = 1) {
  return guarded([&] {
    checked(h);
    Gemm g = make_gemm(ta, tb, m, n, k, a, type, lda, b, type, ldb, c, type, ldc);
    g.a.batch_stride = sa, g.b.batch_stride = sb, g.c.batch_stride = g.d_batch_stride = sc, g.batch = batch;
    const bool device = h->pointer_mode == 1;
    queue_gemm(h, g, Scalar(alpha, type, device), Scalar(beta, type, device));
  });
}

// Pointer-array batches: each matrix's address is read when the work runs (the arrays are in
// device memory, written by earlier work on the stream).
Status pointer_array_gemm(Handle h, int ta, int tb, int m, int n, int k, const void* alpha, const void* const* a,
                          int a_type, int lda, const void* const* b, int b_type, int ldb, const void* beta,
                          void* const* c, int c_type, int ldc, int batch, int scale_type) {
  return guarded([&] {
    checked(h);
    require(batch >= 0 && (batch == 0 || (a && b && c)));
    const bool device = h->pointer_mode == 1;
    Scalar al(alpha, scale_type, device), be(beta, scale_type, device);
    check_shape(make_gemm(ta, tb, m, n, k, nullptr, a_type, lda, nullptr, b_type, ldb, nullptr, c_type, ldc));
    if (m == 0 || n == 0 || batch == 0) return;
    enqueue(h->stream, [=] {
      for (int i = 0; i < batch; ++i) {
        Gemm g = make_gemm(ta, tb, m, n, k, a[i], a_type, lda, b[i], b_type, ldb, c[i], c_type, ldc);
        g.alpha = al.value(), g.beta = be.value();
        run(g);
      }
    });
  });
}

Status gemv(Handle h, int trans, int m, int n, const void* alpha, const void* a, int lda, const void* x, int incx,
            const void* beta, void* y, int incy, int type) {
  return guarded([&] {
    checked(h);
    require(m >= 0 && n >= 0 && incx != 0 && incy != 0);
    if (incx < 0 || incy != 1) {
      log_once("cublas?gemv", "only a positive incx and incy == 1 are simulated");
      throw BlasError{kNotSupported};
    }
    // y = alpha op(A) x + beta y as a GEMM: op(A) is rows x cols, x a cols x 1 matrix read with
    // stride incx (a transposed 1 x cols matrix with leading dimension incx).
    const bool t = transposed(trans);
    const int rows = t ? n : m, cols = t ? m : n;
    Gemm g;
    g.m = rows, g.n = 1, g.k = cols;
    g.a = {a, type, lda, 0, t};
    g.b = {x, type, incx, 0, true};
    g.c = {y, type, rows > 1 ? rows : 1, 0, false};
    g.d = y, g.d_type = type, g.ldd = rows > 1 ? rows : 1;
    const bool device = h->pointer_mode == 1;
    queue_gemm(h, g, Scalar(alpha, type, device), Scalar(beta, type, device));
  });
}

}  // namespace

// ---- handles

FAKEBLAS_API Status cublasCreate_v2(Handle* handle) {
  return guarded([&] {
    require(handle != nullptr);
    *handle = new cublasContext;
  });
}
FAKEBLAS_API Status cublasDestroy_v2(Handle handle) {
  return guarded([&] { delete checked(handle); });
}
FAKEBLAS_API Status cublasGetVersion_v2(Handle handle, int* version) {
  return guarded([&] {
    checked(handle);
    require(version != nullptr);
    *version = kVersionMajor * 10000 + kVersionMinor * 100 + kVersionPatch;
  });
}
FAKEBLAS_API Status cublasGetProperty(int type, int* value) {
  return guarded([&] {
    require(value != nullptr && type >= 0 && type <= 2);
    *value = type == 0 ? kVersionMajor : type == 1 ? kVersionMinor : kVersionPatch;
  });
}
FAKEBLAS_API size_t cublasGetCudartVersion(void) { return kCudartVersion; }
FAKEBLAS_API Status cublasSetStream_v2(Handle handle, void* stream) {
  return guarded([&] { checked(handle)->stream = stream; });
}
FAKEBLAS_API Status cublasGetStream_v2(Handle handle, void** stream) {
  return guarded([&] {
    require(stream != nullptr);
    *stream = checked(handle)->stream;
  });
}
FAKEBLAS_API Status cublasSetWorkspace_v2(Handle handle, void* workspace, size_t bytes) {
  return guarded([&] {
    checked(handle)->workspace = workspace;
    handle->workspace_bytes = bytes;
  });
}
FAKEBLAS_API Status cublasSetMathMode(Handle handle, int mode) {
  return guarded([&] { checked(handle)->math_mode = mode; });
}
FAKEBLAS_API Status cublasGetMathMode(Handle handle, int* mode) {
  return guarded([&] {
    require(mode != nullptr);
    *mode = checked(handle)->math_mode;
  });
}
FAKEBLAS_API Status cublasSetPointerMode_v2(Handle handle, int mode) {
  return guarded([&] {
    require(mode == 0 || mode == 1);
    checked(handle)->pointer_mode = mode;
  });
}
FAKEBLAS_API Status cublasGetPointerMode_v2(Handle handle, int* mode) {
  return guarded([&] {
    require(mode != nullptr);
    *mode = checked(handle)->pointer_mode;
  });
}
FAKEBLAS_API Status cublasSetAtomicsMode(Handle handle, int mode) {
  return guarded([&] { checked(handle)->atomics_mode = mode; });
}
FAKEBLAS_API Status cublasGetAtomicsMode(Handle handle, int* mode) {
  return guarded([&] {
    require(mode != nullptr);
    *mode = checked(handle)->atomics_mode;
  });
}
FAKEBLAS_API Status cublasSetSmCountTarget(Handle handle, int count) {
  return guarded([&] {
    require(count >= 0);
    checked(handle)->sm_count_target = count;
  });
}
FAKEBLAS_API Status cublasGetSmCountTarget(Handle handle, int* count) {
  return guarded([&] {
    require(count != nullptr);
    *count = checked(handle)->sm_count_target;
  });
}
FAKEBLAS_API const char* cublasGetStatusName(Status status) {
  switch (status) {
    case kSuccess: return "CUBLAS_STATUS_SUCCESS";
    case kNotInitialized: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case kAllocFailed: return "CUBLAS_STATUS_ALLOC_FAILED";
    case kInvalidValue: return "CUBLAS_STATUS_INVALID_VALUE";
    case kExecutionFailed: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case kInternalError: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case kNotSupported: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}
FAKEBLAS_API const char* cublasGetStatusString(Status status) {
  switch (status) {
    case kSuccess: return "success";
    case kNotInitialized: return "the library was not initialized";
    case kInvalidValue: return "an invalid numeric value was used as an argument";
    case kNotSupported: return "the functionality requested is not supported";
    case kExecutionFailed: return "the GPU program failed to execute";
    default: return "an internal operation failed";
  }
}

// ---- matrix products

FAKEBLAS_API Status cublasSgemm_v2(Handle h, int ta, int tb, int m, int n, int k, const float* alpha, const float* a,
                                   int lda, const float* b, int ldb, const float* beta, float* c, int ldc) {
  return typed_gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, kR32F);
}
FAKEBLAS_API Status cublasDgemm_v2(Handle h, int ta, int tb, int m, int n, int k, const double* alpha,
                                   const double* a, int lda, const double* b, int ldb, const double* beta, double* c,
                                   int ldc) {
  return typed_gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, kR64F);
}
FAKEBLAS_API Status cublasSgemmStridedBatched(Handle h, int ta, int tb, int m, int n, int k, const float* alpha,
                                              const float* a, int lda, long long sa, const float* b, int ldb,
                                              long long sb, const float* beta, float* c, int ldc, long long sc,
                                              int batch) {
  return typed_gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, kR32F, sa, sb, sc, batch);
}
FAKEBLAS_API Status cublasDgemmStridedBatched(Handle h, int ta, int tb, int m, int n, int k, const double* alpha,
                                              const double* a, int lda, long long sa, const double* b, int ldb,
                                              long long sb, const double* beta, double* c, int ldc, long long sc,
                                              int batch) {
  return typed_gemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, kR64F, sa, sb, sc, batch);
}
FAKEBLAS_API Status cublasSgemmBatched(Handle h, int ta, int tb, int m, int n, int k, const float* alpha,
                                       const float* const a[], int lda, const float* const b[], int ldb,
                                       const float* beta, float* const c[], int ldc, int batch) {
  return pointer_array_gemm(h, ta, tb, m, n, k, alpha, reinterpret_cast<const void* const*>(a), kR32F, lda,
                            reinterpret_cast<const void* const*>(b), kR32F, ldb, beta,
                            reinterpret_cast<void* const*>(c), kR32F, ldc, batch, kR32F);
}
FAKEBLAS_API Status cublasDgemmBatched(Handle h, int ta, int tb, int m, int n, int k, const double* alpha,
                                       const double* const a[], int lda, const double* const b[], int ldb,
                                       const double* beta, double* const c[], int ldc, int batch) {
  return pointer_array_gemm(h, ta, tb, m, n, k, alpha, reinterpret_cast<const void* const*>(a), kR64F, lda,
                            reinterpret_cast<const void* const*>(b), kR64F, ldb, beta,
                            reinterpret_cast<void* const*>(c), kR64F, ldc, batch, kR64F);
}
FAKEBLAS_API Status cublasSgemmEx(Handle h, int ta, int tb, int m, int n, int k, const float* alpha, const void* a,
                                  int a_type, int lda, const void* b, int b_type, int ldb, const float* beta, void* c,
                                  int c_type, int ldc) {
  return guarded([&] {
    checked(h);
    const bool device = h->pointer_mode == 1;
    queue_gemm(h, make_gemm(ta, tb, m, n, k, a, a_type, lda, b, b_type, ldb, c, c_type, ldc),
               Scalar(alpha, kR32F, device), Scalar(beta, kR32F, device));
  });
}

namespace {
Status gemm_ex(Handle h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a, int a_type, int lda,
               long long sa, const void* b, int b_type, int ldb, long long sb, const void* beta, void* c, int c_type,
               int ldc, long long sc, int batch, int compute_type) {
  return guarded([&] {
    checked(h);
    const int scale = scale_type_of(compute_type);
    if (scale < 0) {
      log_once("cublasGemmEx", "integer compute types are not simulated");
      throw BlasError{kNotSupported};
    }
    Gemm g = make_gemm(ta, tb, m, n, k, a, a_type, lda, b, b_type, ldb, c, c_type, ldc);
    g.a.batch_stride = sa, g.b.batch_stride = sb, g.c.batch_stride = g.d_batch_stride = sc, g.batch = batch;
    const bool device = h->pointer_mode == 1;
    queue_gemm(h, g, Scalar(alpha, scale, device), Scalar(beta, scale, device));
  });
}
}  // namespace

FAKEBLAS_API Status cublasGemmEx(Handle h, int ta, int tb, int m, int n, int k, const void* alpha, const void* a,
                                 int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c,
                                 int c_type, int ldc, int compute_type, int /*algo*/) {
  return gemm_ex(h, ta, tb, m, n, k, alpha, a, a_type, lda, 0, b, b_type, ldb, 0, beta, c, c_type, ldc, 0, 1,
                 compute_type);
}
FAKEBLAS_API Status cublasGemmStridedBatchedEx(Handle h, int ta, int tb, int m, int n, int k, const void* alpha,
                                               const void* a, int a_type, int lda, long long sa, const void* b,
                                               int b_type, int ldb, long long sb, const void* beta, void* c,
                                               int c_type, int ldc, long long sc, int batch, int compute_type,
                                               int /*algo*/) {
  return gemm_ex(h, ta, tb, m, n, k, alpha, a, a_type, lda, sa, b, b_type, ldb, sb, beta, c, c_type, ldc, sc, batch,
                 compute_type);
}
FAKEBLAS_API Status cublasGemmBatchedEx(Handle h, int ta, int tb, int m, int n, int k, const void* alpha,
                                        const void* const a[], int a_type, int lda, const void* const b[], int b_type,
                                        int ldb, const void* beta, void* const c[], int c_type, int ldc, int batch,
                                        int compute_type, int /*algo*/) {
  const int scale = scale_type_of(compute_type);
  if (scale < 0) {
    log_once("cublasGemmBatchedEx", "integer compute types are not simulated");
    return kNotSupported;
  }
  return pointer_array_gemm(h, ta, tb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, batch,
                            scale);
}

FAKEBLAS_API Status cublasSgemv_v2(Handle h, int trans, int m, int n, const float* alpha, const float* a, int lda,
                                   const float* x, int incx, const float* beta, float* y, int incy) {
  return gemv(h, trans, m, n, alpha, a, lda, x, incx, beta, y, incy, kR32F);
}
FAKEBLAS_API Status cublasDgemv_v2(Handle h, int trans, int m, int n, const double* alpha, const double* a, int lda,
                                   const double* x, int incx, const double* beta, double* y, int incy) {
  return gemv(h, trans, m, n, alpha, a, lda, x, incx, beta, y, incy, kR64F);
}

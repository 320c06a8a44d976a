#include "gemm.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "small_float.h"

namespace fakegpu::blas {

bool supported_type(int type) { return type == kR32F || type == kR64F || type == kR16F || type == kR16BF; }

int type_bytes(int type) { return type == kR64F ? 8 : type == kR32F ? 4 : 2; }

double load(const void* base, int type, int64_t index) {
  switch (type) {
    case kR32F: return static_cast<const float*>(base)[index];
    case kR64F: return static_cast<const double*>(base)[index];
    case kR16F: return half_to_double(static_cast<const uint16_t*>(base)[index]);
    default: return bf16_to_double(static_cast<const uint16_t*>(base)[index]);
  }
}

void store(void* base, int type, int64_t index, double value) {
  switch (type) {
    case kR32F: static_cast<float*>(base)[index] = static_cast<float>(value); break;
    case kR64F: static_cast<double*>(base)[index] = value; break;
    case kR16F: static_cast<uint16_t*>(base)[index] = double_to_half(value); break;
    default: static_cast<uint16_t*>(base)[index] = double_to_bf16(value); break;
  }
}

namespace {

const void* offset(const void* base, int type, int64_t elements) {
  return static_cast<const char*>(base) + elements * type_bytes(type);
}

// Copies op(X)'s rows (rows x depth) into a dense row-major double array, so that each output
// element is a dot product of two contiguous rows.
void gather_rows(const Matrix& x, const void* data, int64_t rows, int64_t depth, bool rows_are_columns,
                 std::vector<double>* out) {
  out->resize(static_cast<size_t>(rows * depth));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < depth; ++p) {
      // A's row r of op(A) is element (r, p); B's "row" is column r of op(B), element (p, r).
      const bool swap = x.transposed != rows_are_columns;
      const int64_t index = swap ? p + r * x.ld : r + p * x.ld;
      (*out)[static_cast<size_t>(r * depth + p)] = load(data, x.type, index);
    }
}

double activate(Activation a, double v) {
  switch (a) {
    case Activation::kRelu: return v > 0 ? v : 0;
    case Activation::kGeluTanh: {
      const double c = std::sqrt(2.0 / M_PI);
      return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
    }
    default: return v;
  }
}

}  // namespace

void run(const Gemm& g) {
  std::vector<double> a_rows, b_cols;
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const void* a = offset(g.a.data, g.a.type, batch * g.a.batch_stride);
    const void* b = offset(g.b.data, g.b.type, batch * g.b.batch_stride);
    // op(A) row i: A(i, p) untransposed is A[i + p*lda]; op(B) column j: B(p, j) is B[p + j*ldb].
    gather_rows(g.a, a, g.m, g.k, false, &a_rows);
    gather_rows(g.b, b, g.n, g.k, true, &b_cols);
    const void* c = g.beta != 0 ? offset(g.c.data, g.c.type, batch * g.c.batch_stride) : nullptr;
    void* d = const_cast<void*>(offset(g.d, g.d_type, batch * g.d_batch_stride));
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        const double* ar = a_rows.data() + i * g.k;  // data(), not [], so that k == 0 is fine
        const double* bc = b_cols.data() + j * g.k;
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) sum += ar[p] * bc[p];
        double v = g.alpha * sum;
        if (c) v += g.beta * load(c, g.c.type, i + j * g.c.ld);
        if (g.bias) v += load(g.bias, g.bias_type, i);
        store(d, g.d_type, i + j * g.ldd, activate(g.activation, v));
      }
  }
}

}  // namespace fakegpu::blas

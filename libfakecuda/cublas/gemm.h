// The matrix product behind every fakegpu cuBLAS and cuBLASLt GEMM, computed on the CPU over
// fake device memory (which is host memory). Column-major, as cuBLAS is. Inputs of any
// supported type are widened to double and each element of the product is accumulated in
// double, then rounded once to the output type, so results match a CPU reference to within
// the output type's rounding.
#pragma once

#include <cstdint>

namespace fakegpu::blas {

// cudaDataType_t values fakegpu's GEMMs read and write.
enum DataType : int { kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14 };
bool supported_type(int type);
int type_bytes(int type);
double load(const void* base, int type, int64_t index);
void store(void* base, int type, int64_t index, double value);

// What follows the product, as cuBLASLt's epilogues: bias per row of D, then an activation.
enum class Activation { kNone, kRelu, kGeluTanh };

struct Matrix {
  const void* data = nullptr;
  int type = kR32F;
  int64_t ld = 0;
  int64_t batch_stride = 0;  // elements between consecutive matrices of a batch
  bool transposed = false;   // op(X) = X^T (cuBLAS's T and C are the same for real types)
};

struct Gemm {
  int64_t m = 0, n = 0, k = 0;  // op(A) is m x k, op(B) is k x n, C and D are m x n
  int64_t batch = 1;
  Matrix a, b, c;  // c may alias d
  void* d = nullptr;
  int d_type = kR32F;
  int64_t ldd = 0, d_batch_stride = 0;
  double alpha = 1, beta = 0;  // beta == 0: C is not read, as in cuBLAS
  const void* bias = nullptr;  // m elements of bias_type, added to every column
  int bias_type = kR32F;
  Activation activation = Activation::kNone;
};

void run(const Gemm& g);

}  // namespace fakegpu::blas

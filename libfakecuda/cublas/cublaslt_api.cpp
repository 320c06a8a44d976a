// fakegpu's cuBLASLt (libcublasLt.so.12/.13): descriptors, layouts, preferences, a heuristic
// that offers the one algorithm there is, and cublasLtMatmul with the epilogues PyTorch's
// fused linear layers use (bias, ReLU, tanh-GELU), computed on the CPU in stream order.
// Column-major layouts only; FP8 scaling and the auxiliary-output epilogues are not simulated.
#include <cstring>
#include <map>
#include <vector>

#include "blas_common.h"
#include "gemm.h"

using namespace fakegpu::blas;

struct cublasLtContext {};
struct cublasLtMatmulDescOpaque {
  std::map<int, std::vector<char>> attributes;  // by cublasLtMatmulDescAttributes_t
};
struct cublasLtMatrixLayoutOpaque {
  int type = kR32F;
  int order = 0;  // CUBLASLT_ORDER_COL
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  int64_t batch_stride = 0;
};
struct cublasLtMatmulPreferenceOpaque {
  std::map<int, std::vector<char>> attributes;
};
using LtHandle = cublasLtContext*;
using Desc = cublasLtMatmulDescOpaque*;
using Layout = cublasLtMatrixLayoutOpaque*;
using Preference = cublasLtMatmulPreferenceOpaque*;

namespace {

// cublasLtMatmulDescAttributes_t values read by the product.
enum DescAttribute {
  kComputeType = 0,
  kScaleType = 1,
  kPointerMode = 2,
  kTransA = 3,
  kTransB = 4,
  kEpilogue = 7,
  kBiasPointer = 8,
  kBiasDataType = 26,
};
// Attributes that change the arithmetic in ways fakegpu does not model; set to anything but
// zero, they make the product unsupported.
constexpr int kUnmodeled[] = {5 /* TRANSC */, 11 /* EPILOGUE_AUX_POINTER */, 17, 18, 19, 20, 21 /* FP8 scales */};

// cublasLtEpilogue_t values the product applies.
enum Epilogue { kDefault = 1, kRelu = 2, kBias = 4, kReluBias = 6, kGelu = 32, kGeluBias = 36 };

template <typename T>
T desc_value(const Desc d, int attribute, T fallback) {
  auto it = d->attributes.find(attribute);
  if (it == d->attributes.end()) return fallback;
  T v{};
  std::memcpy(&v, it->second.data(), std::min(sizeof v, it->second.size()));
  return v;
}

bool all_zero(const std::vector<char>& bytes) {
  for (char c : bytes)
    if (c) return false;
  return true;
}

void set_bytes(std::map<int, std::vector<char>>& attributes, int attribute, const void* buf, size_t bytes) {
  require(buf != nullptr && bytes > 0 && bytes <= 64);
  auto* p = static_cast<const char*>(buf);
  attributes[attribute].assign(p, p + bytes);
}

void get_bytes(const std::map<int, std::vector<char>>& attributes, int attribute, void* buf, size_t bytes,
               size_t* written) {
  auto it = attributes.find(attribute);
  const size_t have = it == attributes.end() ? 0 : it->second.size();
  if (written) *written = have;
  if (bytes == 0 && written) return;  // a size query
  require(buf != nullptr && bytes >= have);
  if (have) std::memcpy(buf, it->second.data(), have);
}

Matrix operand(const Layout l, const void* data, bool transposed) {
  return Matrix{data, l->type, l->ld, l->batch_stride, transposed};
}

void unsupported(const char* what) {
  log_once("cublasLtMatmul", what);
  throw BlasError{kNotSupported};
}

}  // namespace

FAKEBLAS_API Status cublasLtCreate(LtHandle* handle) {
  return guarded([&] {
    require(handle != nullptr);
    *handle = new cublasLtContext;
  });
}
FAKEBLAS_API Status cublasLtDestroy(LtHandle handle) {
  return guarded([&] {
    require(handle != nullptr, kNotInitialized);
    delete handle;
  });
}
FAKEBLAS_API size_t cublasLtGetVersion(void) { return kBlasMajor * 10000 + kBlasMinor * 100; }
FAKEBLAS_API size_t cublasLtGetCudartVersion(void) { return kCudartVersion; }

FAKEBLAS_API Status cublasLtMatmulDescCreate(Desc* desc, int compute_type, int scale_type) {
  return guarded([&] {
    require(desc != nullptr);
    auto* d = new cublasLtMatmulDescOpaque;
    set_bytes(d->attributes, kComputeType, &compute_type, sizeof compute_type);
    set_bytes(d->attributes, kScaleType, &scale_type, sizeof scale_type);
    *desc = d;
  });
}
FAKEBLAS_API Status cublasLtMatmulDescDestroy(Desc desc) {
  return guarded([&] { delete desc; });
}
FAKEBLAS_API Status cublasLtMatmulDescSetAttribute(Desc desc, int attribute, const void* buf, size_t bytes) {
  return guarded([&] {
    require(desc != nullptr);
    set_bytes(desc->attributes, attribute, buf, bytes);
  });
}
FAKEBLAS_API Status cublasLtMatmulDescGetAttribute(Desc desc, int attribute, void* buf, size_t bytes,
                                                   size_t* written) {
  return guarded([&] {
    require(desc != nullptr);
    get_bytes(desc->attributes, attribute, buf, bytes, written);
  });
}

FAKEBLAS_API Status cublasLtMatrixLayoutCreate(Layout* layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  return guarded([&] {
    require(layout != nullptr);
    auto* l = new cublasLtMatrixLayoutOpaque;
    l->type = type, l->rows = rows, l->cols = cols, l->ld = ld;
    *layout = l;
  });
}
FAKEBLAS_API Status cublasLtMatrixLayoutDestroy(Layout layout) {
  return guarded([&] { delete layout; });
}
FAKEBLAS_API Status cublasLtMatrixLayoutSetAttribute(Layout layout, int attribute, const void* buf, size_t bytes) {
  return guarded([&] {
    require(layout != nullptr && buf != nullptr);
    auto take = [&](auto& field) {
      require(bytes == sizeof field);
      std::memcpy(&field, buf, sizeof field);
    };
    switch (attribute) {
      case 0: take(layout->type); break;
      case 1: take(layout->order); break;
      case 2: take(layout->rows); break;
      case 3: take(layout->cols); break;
      case 4: take(layout->ld); break;
      case 5: take(layout->batch_count); break;
      case 6: take(layout->batch_stride); break;
      default:
        log_once("cublasLtMatrixLayoutSetAttribute", "only type, order, rows, cols, ld and strided batches are simulated");
        throw BlasError{kNotSupported};
    }
  });
}

FAKEBLAS_API Status cublasLtMatmulPreferenceCreate(Preference* pref) {
  return guarded([&] {
    require(pref != nullptr);
    *pref = new cublasLtMatmulPreferenceOpaque;
  });
}
FAKEBLAS_API Status cublasLtMatmulPreferenceDestroy(Preference pref) {
  return guarded([&] { delete pref; });
}
FAKEBLAS_API Status cublasLtMatmulPreferenceSetAttribute(Preference pref, int attribute, const void* buf,
                                                         size_t bytes) {
  return guarded([&] {
    require(pref != nullptr);
    set_bytes(pref->attributes, attribute, buf, bytes);
  });
}

// cublasLtMatmulHeuristicResult_t's layout: the algorithm (8 x 64 bits), the workspace it
// needs, its state, a waves count and four reserved ints.
struct HeuristicResult {
  uint64_t algo[8];
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

// One algorithm: fakegpu's CPU product, which needs no workspace.
FAKEBLAS_API Status cublasLtMatmulAlgoGetHeuristic(LtHandle handle, Desc desc, Layout a, Layout b, Layout c, Layout d,
                                                   Preference /*pref*/, int requested, HeuristicResult* results,
                                                   int* returned) {
  return guarded([&] {
    require(handle && desc && a && b && c && d && results && returned && requested > 0);
    results[0] = HeuristicResult{};
    results[0].state = kSuccess;
    results[0].waves_count = 1.0f;
    *returned = 1;
  });
}

FAKEBLAS_API Status cublasLtMatmul(LtHandle handle, Desc desc, const void* alpha, const void* a, Layout a_layout,
                                   const void* b, Layout b_layout, const void* beta, const void* c, Layout c_layout,
                                   void* d, Layout d_layout, const void* /*algo*/, void* /*workspace*/,
                                   size_t /*workspace_bytes*/, void* stream) {
  return guarded([&] {
    require(handle != nullptr, kNotInitialized);
    require(desc && a_layout && b_layout && c_layout && d_layout);
    for (int attribute : kUnmodeled) {
      auto it = desc->attributes.find(attribute);
      if (it != desc->attributes.end() && !all_zero(it->second))
        unsupported("FP8 scaling, TRANSC and auxiliary epilogue outputs are not simulated");
    }
    for (Layout l : {a_layout, b_layout, c_layout, d_layout})
      if (l->order != 0) unsupported("only column-major layouts are simulated");
    const bool ta = desc_value<int>(desc, kTransA, 0) != 0, tb = desc_value<int>(desc, kTransB, 0) != 0;
    const int scale_type = desc_value<int>(desc, kScaleType, kR32F);
    const int epilogue = desc_value<int>(desc, kEpilogue, kDefault);
    Gemm g;
    g.m = static_cast<int64_t>(d_layout->rows);
    g.n = static_cast<int64_t>(d_layout->cols);
    g.k = static_cast<int64_t>(ta ? a_layout->rows : a_layout->cols);
    require((ta ? a_layout->cols : a_layout->rows) == d_layout->rows);
    require((tb ? b_layout->rows : b_layout->cols) == d_layout->cols);
    require((tb ? b_layout->cols : b_layout->rows) == static_cast<uint64_t>(g.k));
    require(c_layout->rows == d_layout->rows && c_layout->cols == d_layout->cols);
    g.batch = d_layout->batch_count;
    g.a = operand(a_layout, a, ta);
    g.b = operand(b_layout, b, tb);
    g.c = operand(c_layout, c, false);
    g.d = d, g.d_type = d_layout->type, g.ldd = d_layout->ld, g.d_batch_stride = d_layout->batch_stride;
    switch (epilogue) {
      case kDefault: break;
      case kRelu: case kReluBias: g.activation = Activation::kRelu; break;
      case kGelu: case kGeluBias: g.activation = Activation::kGeluTanh; break;
      case kBias: break;
      default: unsupported("only the DEFAULT, BIAS, RELU(_BIAS) and GELU(_BIAS) epilogues are simulated");
    }
    if (epilogue & kBias) {
      g.bias = desc_value<const void*>(desc, kBiasPointer, nullptr);
      require(g.bias != nullptr);
      const int bias_type = desc_value<int>(desc, kBiasDataType, -1);
      g.bias_type = bias_type < 0 ? g.d_type : bias_type;
    }
    require(supported_type(g.a.type) && supported_type(g.b.type) && supported_type(g.c.type) &&
                supported_type(g.d_type) && supported_type(g.bias_type),
            kNotSupported);
    require(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1);
    const bool device = desc_value<int>(desc, kPointerMode, 0) != 0;
    Scalar al(alpha, scale_type, device), be(beta, scale_type, device);
    if (g.m == 0 || g.n == 0) return;
    enqueue(stream, [g, al, be]() mutable {
      g.alpha = al.value();
      g.beta = be.value();
      run(g);
    });
  });
}

// Choosing among algorithms by hand: there is only fakegpu's one.
#define FAKEGPU_CUBLASLT_UNSUPPORTED(X) \
  X(cublasLtMatmulAlgoInit) X(cublasLtMatmulAlgoCheck) X(cublasLtMatmulAlgoConfigSetAttribute) \
  X(cublasLtMatmulAlgoConfigGetAttribute) X(cublasLtMatmulAlgoGetIds) X(cublasLtMatmulAlgoCapGetAttribute)
#define FAKEGPU_DEFINE_UNSUPPORTED(name)                    \
  FAKEBLAS_API Status name() {                              \
    log_once(#name, "not simulated by fakegpu's cuBLASLt"); \
    return kNotSupported;                                   \
  }
FAKEGPU_CUBLASLT_UNSUPPORTED(FAKEGPU_DEFINE_UNSUPPORTED)

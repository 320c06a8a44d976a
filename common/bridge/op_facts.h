/* What fakegpu's PyTorch hook tells the runtime about one operator, and what the runtime answers:
 * the facts the kernel model (planner/kernel_model.h) prices. Plain C with fixed-width fields,
 * so that the hook can mirror it with ctypes (fakegpu/torch_hook/bridge.py); a change
 * here bumps FAKEGPU_TORCH_BRIDGE_VERSION (fake_torch_bridge.h). */
#ifndef FAKEGPU_OP_FACTS_H
#define FAKEGPU_OP_FACTS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an operator is, for the kernel model; `dims` means what the kind says. */
enum fakegpu_op_kind {
  FAKEGPU_OP_MEMORY = 0,           /* elementwise, copies, indexing: its bytes once; dims[0]: kernels it launches (0 = 1);
                                      for PyTorch's elementwise kernels where they cannot vectorize, dims[1]: elements,
                                      dims[2]: operands loaded and stored one element at a time with a type conversion
                                      (0: none), dims[3]: dimensions whose offsets each element computes (0: contiguous),
                                      dims[4]: 1 for a concatenation of tensors that are not contiguous */
  FAKEGPU_OP_GEMM = 1,             /* dims: batch, m, n, k, how many of the two matrices are not K-major (0-2) */
  FAKEGPU_OP_CONV = 2,             /* dims: batch, in channels, in pixels, out channels, kernel taps, out pixels,
                                      groups, passes (0: forward; bit 0: input gradient, bit 1: weight gradient) */
  FAKEGPU_OP_ATTENTION = 3,        /* fused attention forward; dims: batch, heads, query length, key length, head dim,
                                      the share of (query block, key block) pairs a block mask keeps, in
                                      FAKEGPU_OP_SHARE_UNITS (0: all, or the causal half with FAKEGPU_OP_CAUSAL) */
  FAKEGPU_OP_ATTENTION_BACKWARD = 4, /* the same dims */
  FAKEGPU_OP_REDUCTION = 5,        /* dims: outputs, elements reduced into each */
  FAKEGPU_OP_NORM = 6,             /* layer norm / RMS norm forward; dims: rows, width */
  FAKEGPU_OP_NORM_BACKWARD = 7,    /* dims: rows, width, whether it computes the weight's gradient */
  FAKEGPU_OP_SOFTMAX = 8,          /* softmax / log-softmax forward; dims: rows, width */
  FAKEGPU_OP_SOFTMAX_BACKWARD = 9, /* dims: rows, width */
  FAKEGPU_OP_FOREACH = 10,         /* a multi-tensor-apply kernel; dims: tensors per list, lists, elements in all */
  FAKEGPU_OP_EMBEDDING_BACKWARD = 11, /* dims: tokens, width, rows of the table */
  FAKEGPU_OP_BATCH_NORM = 12,      /* dims: batch x pixels, channels, whether it computes batch statistics,
                                      whether PyTorch's own kernels run it (not cuDNN's: bf16 tensors) */
  FAKEGPU_OP_BATCH_NORM_BACKWARD = 13, /* dims: batch x pixels, channels, (unused), PyTorch's own kernels */
  FAKEGPU_OP_HOST_COPY = 14,       /* a copy between host and device memory: bytes over the host link */
  FAKEGPU_OP_NO_KERNEL = 15,       /* launches nothing on the GPU (host cost only) */
  FAKEGPU_OP_POOL = 16,            /* max pooling with indices; dims: 0 forward or 1 backward, input elements */
  FAKEGPU_OP_KIND_COUNT = 17
};

/* The math a kernel computes with. */
enum fakegpu_op_math {
  FAKEGPU_MATH_MEMORY_BOUND = 0,
  FAKEGPU_MATH_FP64 = 1,
  FAKEGPU_MATH_FP32 = 2,
  FAKEGPU_MATH_TF32 = 3,
  FAKEGPU_MATH_HALF = 4, /* fp16 and bf16 */
  FAKEGPU_MATH_FP8 = 5,
  FAKEGPU_MATH_COUNT = 6
};

/* flags */
#define FAKEGPU_OP_IN_BACKWARD 1u   /* launched by autograd's engine, not by Python */
#define FAKEGPU_OP_CAUSAL 2u        /* attention with a causal mask */
#define FAKEGPU_OP_CHANNELS_LAST 4u /* a convolution on NHWC tensors */
#define FAKEGPU_OP_RECORDS_GRAD 8u  /* called with gradients on: autograd records a node for it */
#define FAKEGPU_OP_FLEX 16u         /* attention in a kernel inductor generates (FlexAttention), not flash */

/* A share given in dims, in millionths */
#define FAKEGPU_OP_SHARE_UNITS 1000000

typedef struct fakegpu_op_facts {
  int32_t kind;          /* fakegpu_op_kind */
  int32_t math;          /* fakegpu_op_math */
  uint32_t flags;        /* FAKEGPU_OP_* bits */
  int32_t element_bytes; /* of its main tensor */
  int32_t row_alignment; /* a matrix product's: the bytes each matrix row starts aligned to, up to 16 */
  int32_t reserved;
  double flops;          /* 2 x multiply-adds, where it has them */
  double bytes;          /* its tensors' bytes, each read or written once */
  int64_t dims[8];
} fakegpu_op_facts;

/* Why an operator takes the time it takes (FAKEGPU_BOUND_HOST, below, only in totals). */
enum fakegpu_op_bound { FAKEGPU_BOUND_MEMORY = 0, FAKEGPU_BOUND_COMPUTE = 1, FAKEGPU_BOUND_LAUNCH = 2 };

typedef struct fakegpu_op_cost {
  double gpu_us;    /* its kernels' modeled time on the GPU */
  double host_us;   /* the host's modeled time to launch them */
  int32_t kernels;  /* kernels it launches */
  int32_t bound;    /* fakegpu_op_bound of its GPU time */
  /* Scratch memory a library takes from the framework's allocator while it runs, and frees:
   * `workspace_calls` calls one after another (cuDNN's passes), each taking `workspace_bytes`. */
  double workspace_bytes;
  int32_t workspace_calls;
  int32_t reserved;
} fakegpu_op_cost;

/* One operator's totals over a rank's run, by name, for the report's table of operators. Each
 * call's GPU time goes to one of the four bound_us by what held it: its host launch when that
 * took longer than its kernels, otherwise the model's bound. */
#define FAKEGPU_OP_NAME_BYTES 96
typedef struct fakegpu_op_total {
  char name[FAKEGPU_OP_NAME_BYTES]; /* NUL-terminated, cut to fit */
  uint64_t calls;
  uint64_t kernels;
  double gpu_us;
  double host_us;
  double bound_us[4]; /* by fakegpu_op_bound, then host */
  int32_t kind;       /* fakegpu_op_kind of its first call */
  int32_t reserved;
  double measured_us; /* of gpu_us, in calls priced at a measured time (record_measured_op) */
} fakegpu_op_total;

#define FAKEGPU_BOUND_HOST 3

#ifdef __cplusplus
}
#endif

#endif /* FAKEGPU_OP_FACTS_H */

// The dense fallback of the constant operators (crate::operators): C = A B over a panel of n
// elements for an operator too large to be built in as a generated kernel
// (codegen::BUILT_IN_MAX_NNZ). One thread per element column and chunk of DENSE_ROWS rows of A
// (blockIdx.y), the chunk's accumulators in registers; A arrives transposed and padded,
// at[j * m_pad + i] = A[i][j] with zero rows up to m_pad (a multiple of DENSE_ROWS), so the
// chunk's entries of column j are consecutive (one uniform vector load for the whole warp) and
// the loop needs no bounds.
//
// Each output is computed as the generated kernels compute it (hdg_core::constant_operator's
// sequence: the first product, then one fma per column in increasing order), with the zero
// entries included: fma(b, 0, s) = s and fma(b, a, +-0) = b a rounded once, so the values are
// the generated kernels' but for the sign of a zero.
#include "common.cuh"
#include "operators.cuh"  // OPERATOR_BLOCK_X, DENSE_ROWS (build.rs, from src/codegen.rs)

template <typename T>
__device__ __forceinline__ T fused(T a, T b, T c);
template <>
__device__ __forceinline__ f64 fused(f64 a, f64 b, f64 c) { return fma(a, b, c); }
template <>
__device__ __forceinline__ f32 fused(f32 a, f32 b, f32 c) { return fmaf(a, b, c); }

template <typename T>
__device__ void dense_operator(int m, int m_pad, int k, const T* __restrict__ at, int n,
                               const T* __restrict__ b, int ldb, T* __restrict__ c, int ldc) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    const int r0 = blockIdx.y * DENSE_ROWS;
    T s[DENSE_ROWS];
    const T b0 = b[e];
#pragma unroll
    for (int r = 0; r < DENSE_ROWS; ++r) s[r] = fused(b0, at[r0 + r], (T)-0.0);
    for (int j = 1; j < k; ++j) {
        const T bj = b[(long long)j * ldb + e];
        const T* a = at + (long long)j * m_pad + r0;
#pragma unroll
        for (int r = 0; r < DENSE_ROWS; ++r) s[r] = fused(bj, a[r], s[r]);
    }
#pragma unroll
    for (int r = 0; r < DENSE_ROWS; ++r)
        if (r0 + r < m) c[(long long)(r0 + r) * ldc + e] = s[r];
}

#define DENSE_OPERATOR(T)                                                                      \
    extern "C" __global__ void __launch_bounds__(OPERATOR_BLOCK_X)                                         \
        dense_operator_##T(int m, int m_pad, int k, const T* at, int n, const T* b, int ldb,  \
                           T* c, int ldc) {                                                   \
        dense_operator<T>(m, m_pad, k, at, n, b, ldb, c, ldc);                                \
    }
DENSE_OPERATOR(f32)
DENSE_OPERATOR(f64)

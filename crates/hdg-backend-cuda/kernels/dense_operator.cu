// The dense fallback of the constant operators (crate::operators): C = A B over a panel of n
// elements for an operator that is not applied by a generated kernel (too many nonzeros to be
// built in, codegen::BUILT_IN_MAX_NNZ). A arrives transposed and padded, at[j * m_pad + i] =
// A[i][j] with zero rows up to m_pad (a multiple of DENSE_ROWS), so that a chunk's entries of
// column j are consecutive (uniform vector loads, the same for the whole warp) and the loop
// needs no bounds.
//
// Register tiling: a thread computes DENSE_ROWS rows of A for DENSE_COLUMNS element columns,
// its accumulators in registers, so that each value of A it loads serves DENSE_COLUMNS products
// and each value of B DENSE_ROWS. The columns of a warp are DENSE_COLUMNS runs of 32, lane
// fastest, so that every load and store of B and C is coalesced whatever the alignment. The
// row chunk is the fastest part of the one-dimensional block index (blockIdx.x = column_block
// * chunks + chunk): the chunks of a column block run together, and all but the first read B
// from the L2 cache (every chunk runs the same code, unlike codegen's row-split kernels).
//
// Each output is computed as the generated kernels compute it (hdg_core::constant_operator's
// sequence: the first product, then one fma per column in increasing order), with the zero
// entries included: fma(b, 0, s) = s and fma(b, a, -0) = b a rounded once, so the values are
// the generated kernels' but for the sign of a zero.
#include "common.cuh"
#include "operators.cuh"  // OPERATOR_BLOCK_X, DENSE_ROWS, DENSE_COLUMNS (build.rs, codegen.rs)

template <typename T>
__device__ __forceinline__ T fused(T a, T b, T c);
template <>
__device__ __forceinline__ f64 fused(f64 a, f64 b, f64 c) { return fma(a, b, c); }
template <>
__device__ __forceinline__ f32 fused(f32 a, f32 b, f32 c) { return fmaf(a, b, c); }

template <typename T>
__device__ void dense_operator(int m, int m_pad, int k, const T* __restrict__ at, int n,
                               const T* __restrict__ b, int ldb, T* __restrict__ c, int ldc) {
    const unsigned chunks = (unsigned)m_pad / DENSE_ROWS;
    const unsigned column_block = blockIdx.x / chunks;
    const int r0 = (int)(blockIdx.x % chunks) * DENSE_ROWS;
    const long long e0 =
        ((long long)column_block * blockDim.x + (threadIdx.x & ~31u)) * DENSE_COLUMNS +
        (threadIdx.x & 31u);
    if (e0 >= n) return;
    bool live[DENSE_COLUMNS];
#pragma unroll
    for (int q = 0; q < DENSE_COLUMNS; ++q) live[q] = e0 + 32 * q < n;
    T s[DENSE_COLUMNS][DENSE_ROWS];
    {
        T b0[DENSE_COLUMNS];
#pragma unroll
        for (int q = 0; q < DENSE_COLUMNS; ++q) b0[q] = live[q] ? b[e0 + 32 * q] : T(0);
#pragma unroll
        for (int r = 0; r < DENSE_ROWS; ++r) {
            const T a = at[r0 + r];
#pragma unroll
            for (int q = 0; q < DENSE_COLUMNS; ++q) s[q][r] = fused(b0[q], a, (T)-0.0);
        }
    }
    for (int j = 1; j < k; ++j) {
        const T* bj = b + (long long)j * ldb + e0;
        T v[DENSE_COLUMNS];
#pragma unroll
        for (int q = 0; q < DENSE_COLUMNS; ++q) v[q] = live[q] ? bj[32 * q] : T(0);
        const T* a = at + (long long)j * m_pad + r0;
#pragma unroll
        for (int r = 0; r < DENSE_ROWS; ++r) {
            const T ar = a[r];
#pragma unroll
            for (int q = 0; q < DENSE_COLUMNS; ++q) s[q][r] = fused(v[q], ar, s[q][r]);
        }
    }
#pragma unroll
    for (int q = 0; q < DENSE_COLUMNS; ++q) {
        if (!live[q]) continue;
#pragma unroll
        for (int r = 0; r < DENSE_ROWS; ++r)
            if (r0 + r < m) c[(long long)(r0 + r) * ldc + e0 + 32 * q] = s[q][r];
    }
}

#define DENSE_OPERATOR(T)                                                                      \
    extern "C" __global__ void __launch_bounds__(OPERATOR_BLOCK_X)                             \
        dense_operator_##T(int m, int m_pad, int k, const T* at, int n, const T* b, int ldb,  \
                           T* c, int ldc) {                                                   \
        dense_operator<T>(m, m_pad, k, at, n, b, ldb, c, ldc);                                \
    }
DENSE_OPERATOR(f32)
DENSE_OPERATOR(f64)

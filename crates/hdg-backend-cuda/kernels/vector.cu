// The vector kernels of the CUDA backend (src/vector/): level-1 operations, reductions, mixed
// precision, and the block-Jacobi factorisation and block solves.
//
// Compiled to PTX by build.rs (no fast math: f64 results must match the CPU backend to
// rounding). Every kernel is a C++ template instantiated for float and double (and, for the
// block solves, for each block size of block_sizes.cuh, which build.rs generates from
// src/block_sizes.rs) under an `extern "C"` name that the Rust side looks up: NAME_f32 /
// NAME_f64, solve_blocks_f64_b3, ...
//
// Conventions: lengths are 64-bit; every elementwise kernel uses a grid-stride loop so that any
// grid size is correct; every reduction runs with exactly REDUCE_THREADS threads per block and
// sums in a fixed order (per-thread strided sums, then a shared-memory tree, then the last
// block to finish sums the per-block partials in block order): the result depends on the
// length only, never on timing. The last block writes the results straight into page-locked
// host memory (mapped: unified addressing), so a reduction is one launch and one stream
// synchronisation, with no second kernel and no device-to-host copy: in CG that is three
// round trips per iteration, each on the critical path.

#include "block_sizes.cuh"
#include "common.cuh"

#define REDUCE_THREADS 256
#define MAX_PAIRS 32

// ---------------------------------------------------------------------------------------------
// Level-1 operations.

template <typename T>
__device__ void axpy(u64 n, T alpha, const T* __restrict__ x, T* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] += alpha * x[i]; }
}

template <typename T>
__device__ void xpby(u64 n, const T* __restrict__ x, T beta, T* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] = x[i] + beta * y[i]; }
}

template <typename T>
__device__ void axpby(u64 n, T alpha, const T* __restrict__ x, T beta, T* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] = alpha * x[i] + beta * y[i]; }
}

template <typename T>
__device__ void scale(u64 n, T alpha, T* __restrict__ x) {
    GRID_STRIDE(i, n) { x[i] *= alpha; }
}

template <typename T>
__device__ void pointwise_mul(u64 n, const T* __restrict__ a, const T* __restrict__ x,
                              T* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] = a[i] * x[i]; }
}

template <typename T>
__device__ void reciprocal(u64 n, T* __restrict__ v) {
    GRID_STRIDE(i, n) { v[i] = T(1) / v[i]; }
}

// Sum over the block (blockDim.x == REDUCE_THREADS, a power of two) in a fixed order; every
// thread gets the result.
template <typename T>
__device__ T block_sum(T v, T* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = REDUCE_THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    T r = shared[0];
    __syncthreads();
    return r;
}

// Pointers of the vector pairs of one dot_many call, passed by value (kernel parameter).
struct Pairs {
    u64 x[MAX_PAIRS];
    u64 y[MAX_PAIRS];
};

// partials[k * gridDim.x + block] = this block's part of x_k . y_k, k < m.
template <typename T>
__device__ void dot_partials(u64 n, unsigned m, const Pairs& p, T* __restrict__ partials,
                             T* shared) {
    for (unsigned k = 0; k < m; ++k) {
        const T* __restrict__ x = reinterpret_cast<const T*>(p.x[k]);
        const T* __restrict__ y = reinterpret_cast<const T*>(p.y[k]);
        T s = T(0);
        GRID_STRIDE(i, n) { s += x[i] * y[i]; }
        T b = block_sum(s, shared);
        if (threadIdx.x == 0) partials[(u64)k * gridDim.x + blockIdx.x] = b;
    }
}

// Called by every block after it wrote its partials[k * gridDim.x + blockIdx.x], k < m: the last
// block to arrive sums each row of partials in block order (strided per-thread sums, then the
// tree: the order of the former second kernel) into out[k] (page-locked host memory), and
// resets the arrival counter for the next reduction (stream-ordered after this one).
template <typename T>
__device__ void finish_reduction(unsigned m, const T* partials, unsigned* counter,
                                 volatile T* out, T* shared) {
    __shared__ bool last;
    __threadfence();  // this block's partials are visible before its arrival is counted
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    for (unsigned k = 0; k < m; ++k) {
        const T* row = partials + (u64)k * gridDim.x;
        T s = T(0);
        // L2 reads (__ldcg): other blocks' partials are not in this SM's L1.
        for (unsigned i = threadIdx.x; i < gridDim.x; i += REDUCE_THREADS) s += __ldcg(row + i);
        T b = block_sum(s, shared);
        if (threadIdx.x == 0) out[k] = b;
    }
    if (threadIdx.x == 0) {
        *counter = 0;
        __threadfence_system();
    }
}

// x += alpha p, r -= alpha ap, partials[block] = this block's part of r . r.
template <typename T>
__device__ void cg_update(u64 n, T alpha, const T* __restrict__ p, const T* __restrict__ ap,
                          T* __restrict__ x, T* __restrict__ r, T* __restrict__ partials,
                          T* shared) {
    T s = T(0);
    GRID_STRIDE(i, n) {
        x[i] += alpha * p[i];
        T ri = r[i] - alpha * ap[i];
        r[i] = ri;
        s += ri * ri;
    }
    T b = block_sum(s, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = b;
}

#define LEVEL1(T)                                                                              \
    extern "C" __global__ void axpy_##T(u64 n, T alpha, const T* x, T* y) {                  \
        axpy<T>(n, alpha, x, y);                                                               \
    }                                                                                          \
    extern "C" __global__ void xpby_##T(u64 n, const T* x, T beta, T* y) {                   \
        xpby<T>(n, x, beta, y);                                                                \
    }                                                                                          \
    extern "C" __global__ void axpby_##T(u64 n, T alpha, const T* x, T beta, T* y) {         \
        axpby<T>(n, alpha, x, beta, y);                                                        \
    }                                                                                          \
    extern "C" __global__ void scale_##T(u64 n, T alpha, T* x) { scale<T>(n, alpha, x); }    \
    extern "C" __global__ void pointwise_mul_##T(u64 n, const T* a, const T* x, T* y) {      \
        pointwise_mul<T>(n, a, x, y);                                                          \
    }                                                                                          \
    extern "C" __global__ void reciprocal_##T(u64 n, T* v) { reciprocal<T>(n, v); }          \
    extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) dot_##T(                     \
        u64 n, unsigned m, Pairs p, T* partials, unsigned* counter, T* out) {                 \
        __shared__ T shared[REDUCE_THREADS];                                                   \
        dot_partials<T>(n, m, p, partials, shared);                                            \
        finish_reduction<T>(m, partials, counter, out, shared);                                \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(REDUCE_THREADS) cg_update_##T(               \
        u64 n, T alpha, const T* p, const T* ap, T* x, T* r, T* partials, unsigned* counter,   \
        T* out) {                                                                              \
        __shared__ T shared[REDUCE_THREADS];                                                   \
        cg_update<T>(n, alpha, p, ap, x, r, partials, shared);                                 \
        finish_reduction<T>(1, partials, counter, out, shared);                                \
    }

LEVEL1(f32)
LEVEL1(f64)

// Selected entries, for the distributed pipeline's halo exchanges (src/vector/halo.rs): the
// entries a rank sends packed into one buffer, the ghost entries it receives unpacked from one,
// the ghost entries cleared. `idx` holds distinct entries of v.
#define HALO(T)                                                                                \
    extern "C" __global__ void gather_##T(u64 n, const unsigned* __restrict__ idx,            \
                                          const T* __restrict__ v, T* __restrict__ out) {     \
        GRID_STRIDE(i, n) { out[i] = v[idx[i]]; }                                              \
    }                                                                                          \
    extern "C" __global__ void scatter_##T(u64 n, const unsigned* __restrict__ idx,           \
                                           const T* __restrict__ values, T* __restrict__ v) { \
        GRID_STRIDE(i, n) { v[idx[i]] = values[i]; }                                           \
    }                                                                                          \
    extern "C" __global__ void clear_##T(u64 n, const unsigned* __restrict__ idx,             \
                                         T* __restrict__ v) {                                  \
        GRID_STRIDE(i, n) { v[idx[i]] = T(0); }                                                \
    }

HALO(f32)
HALO(f64)

// Mixed precision: y = (float) x (round to nearest), y += (double) x.
extern "C" __global__ void demote(u64 n, const f64* __restrict__ x, f32* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] = __double2float_rn(x[i]); }
}

extern "C" __global__ void promote_add(u64 n, const f32* __restrict__ x, f64* __restrict__ y) {
    GRID_STRIDE(i, n) { y[i] += (f64)x[i]; }
}

// ---------------------------------------------------------------------------------------------
// Block Jacobi: a batch of small SPD blocks, one thread per block, in place, row-major, the
// same operations in the same order as hdg_backend_cpu::dense::{cholesky,
// invert_from_cholesky}. The Cholesky factor checks definiteness: on a pivot that is not
// positive (or NaN), info[b] = pivot + 1 and the block's diagonal entry at the pivot holds the
// offending value; info[b] = 0 otherwise. A definite block is then replaced by its inverse
// (L^-1 in place, then L^-T L^-1 in place), so that a solve is a matrix-vector product with
// no division.

// A block's size: a run-time `unsigned`, or `Fixed<B>`, known at compile time, where the loops
// below unroll completely and a block copied into a local array stays in registers.
template <unsigned B>
struct Fixed {
    __device__ constexpr operator unsigned() const { return B; }
};

template <typename T, typename N>
__device__ void cholesky_block(N n, T* a, int* info) {
#pragma unroll
    for (unsigned j = 0; j < n; ++j) {
        T d = a[j * n + j];
#pragma unroll
        for (unsigned k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (!(d > T(0))) {
            a[j * n + j] = d;
            *info = (int)j + 1;
            return;
        }
        d = sqrt(d);
        a[j * n + j] = d;
        T inv = T(1) / d;
#pragma unroll
        for (unsigned i = j + 1; i < n; ++i) {
            T s = a[i * n + j];
#pragma unroll
            for (unsigned k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s * inv;
        }
    }
    *info = 0;
}

// The lower triangle of `a` holds L; on return `a` holds (L L^T)^-1, whole.
template <typename T, typename N>
__device__ void invert_from_cholesky(N n, T* a) {
    // X = L^-1, column by column from the left: column j of X needs L's columns >= j only.
#pragma unroll
    for (unsigned j = 0; j < n; ++j) {
        a[j * n + j] = T(1) / a[j * n + j];
#pragma unroll
        for (unsigned i = j + 1; i < n; ++i) {
            T s = T(0);
#pragma unroll
            for (unsigned k = j; k < i; ++k) s += a[i * n + k] * a[k * n + j];
            a[i * n + j] = -s / a[i * n + i];
        }
    }
    // X^T X, row by row from the top, the diagonal last in each row: entry (i, j) needs X's
    // rows >= i only.
#pragma unroll
    for (unsigned i = 0; i < n; ++i) {
#pragma unroll
        for (unsigned j = 0; j <= i; ++j) {
            T s = T(0);
#pragma unroll
            for (unsigned k = i; k < n; ++k) s += a[k * n + i] * a[k * n + j];
            a[i * n + j] = s;
        }
#pragma unroll
        for (unsigned j = 0; j < i; ++j) a[j * n + i] = a[i * n + j];
    }
}

// Any block size, in place in global memory (the tetrahedra's large blocks).
template <typename T>
__device__ void factor_blocks_any(u64 n_blocks, unsigned b, T* __restrict__ blocks,
                                  int* __restrict__ info) {
    GRID_STRIDE(blk, n_blocks) {
        T* block = blocks + blk * b * b;
        cholesky_block<T>(b, block, info + blk);
        if (info[blk] == 0) invert_from_cholesky<T>(b, block);
    }
}

// B known at compile time: the block read once into registers, factored and inverted there
// with the same operations in the same order, written back once (in place in global memory,
// every one of the ~B^3 / 2 steps was a load or store of its own).
template <typename T, unsigned B>
__device__ void factor_blocks_fixed(u64 n_blocks, T* __restrict__ blocks,
                                    int* __restrict__ info) {
    GRID_STRIDE(blk, n_blocks) {
        T* block = blocks + blk * (B * B);
        T a[B * B];
#pragma unroll
        for (unsigned i = 0; i < B * B; ++i) a[i] = block[i];
        int status;
        cholesky_block<T>(Fixed<B>(), a, &status);
        if (status == 0) invert_from_cholesky<T>(Fixed<B>(), a);
        info[blk] = status;
#pragma unroll
        for (unsigned i = 0; i < B * B; ++i) block[i] = a[i];
    }
}

// z_block = inverse * r_block; B known at compile time, the block's right-hand side in
// registers.
template <typename T, int B>
__device__ void solve_blocks_fixed(u64 n_blocks, const T* __restrict__ inverses,
                                   const T* __restrict__ r, T* __restrict__ z) {
    GRID_STRIDE(blk, n_blocks) {
        const T* inv = inverses + blk * (B * B);
        T v[B];
#pragma unroll
        for (int i = 0; i < B; ++i) v[i] = r[blk * B + i];
#pragma unroll
        for (int i = 0; i < B; ++i) {
            T s = T(0);
#pragma unroll
            for (int j = 0; j < B; ++j) s += inv[i * B + j] * v[j];
            z[blk * B + i] = s;
        }
    }
}

// Any block size: the same, r read from memory.
template <typename T>
__device__ void solve_blocks_any(u64 n_blocks, unsigned b, const T* __restrict__ inverses,
                                 const T* __restrict__ r, T* __restrict__ z) {
    GRID_STRIDE(blk, n_blocks) {
        const T* inv = inverses + blk * b * b;
        for (unsigned i = 0; i < b; ++i) {
            T s = T(0);
            for (unsigned j = 0; j < b; ++j) s += inv[i * b + j] * r[blk * b + j];
            z[blk * b + i] = s;
        }
    }
}

#define BLOCKS(T)                                                                              \
    extern "C" __global__ void factor_blocks_##T##_any(u64 n_blocks, unsigned b, T* blocks,   \
                                                       int* info) {                            \
        factor_blocks_any<T>(n_blocks, b, blocks, info);                                       \
    }                                                                                          \
    extern "C" __global__ void solve_blocks_##T##_any(u64 n_blocks, unsigned b,               \
                                                      const T* factors, const T* r, T* z) {    \
        solve_blocks_any<T>(n_blocks, b, factors, r, z);                                       \
    }
BLOCKS(f32)
BLOCKS(f64)

#define SOLVE_FIXED(T, B)                                                                      \
    extern "C" __global__ void solve_blocks_##T##_b##B(u64 n_blocks, const T* factors,        \
                                                       const T* r, T* z) {                     \
        solve_blocks_fixed<T, B>(n_blocks, factors, r, z);                                     \
    }

#define FACTOR_FIXED(T, B)                                                                     \
    extern "C" __global__ void factor_blocks_##T##_b##B(u64 n_blocks, T* blocks, int* info) {  \
        factor_blocks_fixed<T, B>(n_blocks, blocks, info);                                     \
    }

FOR_EACH_BLOCK_SIZE(FACTOR_FIXED, f32)
FOR_EACH_BLOCK_SIZE(FACTOR_FIXED, f64)
FOR_EACH_BLOCK_SIZE(SOLVE_FIXED, f32)
FOR_EACH_BLOCK_SIZE(SOLVE_FIXED, f64)
FOR_EACH_TETRAHEDRON_BLOCK_SIZE(SOLVE_FIXED, f32)
FOR_EACH_TETRAHEDRON_BLOCK_SIZE(SOLVE_FIXED, f64)

// y = value everywhere (an array of one value, as constant coefficients give, made on the
// device instead of copied).
#define FILL(T)                                                                                \
    extern "C" __global__ void fill_##T(u64 n, T value, T* y) {                                \
        GRID_STRIDE(i, n) y[i] = value;                                                        \
    }
FILL(f32)
FILL(f64)

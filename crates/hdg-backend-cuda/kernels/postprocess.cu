// The postprocessing to u* in P_{k+1} in the THREAD and BLOCK designs, for triangles and
// tetrahedra (element_common.cuh: cell traits and layouts). Loaded by src/element_kernels.rs;
// src/design.rs chooses the design and the launch.
//
// THREAD design: hdg-backend-cpu's postprocess_element (local.rs; dense.rs, here
// dense_thread.cuh) operation for operation, one thread per element (the CPU's numbers to the
// bit). BLOCK design (one thread block per element, a persistent grid): the (n' - 1) x (n' - 1)
// matrix with the right-hand side appended as one more row (packed, column-major) in shared
// memory (the right-hand side from W_s = sum_r (-det (J^-1)_sr / kappa) Q_r, one thread per
// entry, after the matrix): the first n' - 1 steps of the right-looking Cholesky of that bordered matrix
// (dense_block.cuh) leave L and y = L^-1 rhs; then x = L^-T y, one barrier per row. Agrees
// with the CPU to rounding.
//
// Kernel names (src/element_kernels.rs: the scheme): postprocess_thread_{f32,f64}_{tri,tet}{K}
// (tetrahedra up to the thread design's highest order), postprocess_block_..., for the orders
// of src/element_instances.rs.
#include "dense_block.cuh"
#include "dense_thread.cuh"

// Postprocessing (postprocess_element): u* in P_{k+1}, NP = n'; one thread per element.
template <class C, typename T, int N, int NP>
__device__ void postprocess_thread(const Tables& tb, const Cells& c, const T* __restrict__ u,
                                   const T* __restrict__ q, T* __restrict__ u_star,
                                   int* __restrict__ info, T* __restrict__ pivot_value) {
    constexpr int D = C::DIM;
    constexpr int M = NP - 1;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;
    Geometry<C, T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const T kappa = ptr<T>(c.kappa)[e];
    T b[D * D];
    metric<D>(g.jinv, b);

    T a[M * M];
    T rhs[M];
    for (int v = 0; v < M * M; ++v) a[v] = T(0);
    const T* stiff = ptr<T>(tb.post_stiffness);
    for (int s = 0; s < D; ++s)
        for (int t = 0; t < D; ++t) {
            T coef = mul(g.det, b[s * D + t]);
            const T* k = stiff + (s * D + t) * NP * NP;
#pragma unroll 1
            for (int i = 0; i < M; ++i)
#pragma unroll 4
                for (int j = 0; j < M; ++j)
                    a[i * M + j] = madd(a[i * M + j], coef, k[(i + 1) * NP + j + 1]);
        }
    for (int j = 0; j < M; ++j) rhs[j] = T(0);
    const T* pderiv = ptr<T>(tb.post_derivative);
    for (int r = 0; r < D; ++r)
        for (int s = 0; s < D; ++s) {
            T coef = mul(-g.det, g.jinv[s * D + r]) / kappa;
            const T* dp = pderiv + s * N * NP;
#pragma unroll 1
            for (int l = 0; l < N; ++l) {
                T cl = mul(coef, q[(u64)(r * N + l) * nc + e]);
#pragma unroll 4
                for (int j = 0; j < M; ++j) rhs[j] = madd(rhs[j], cl, dp[l * NP + j + 1]);
            }
        }
    T value = T(0);
    int bad = cholesky<T, M>(a, &value);
    if (bad >= 0) {
        info[e] = bad + 1;
        pivot_value[e] = value;
        return;
    }
    forward<T, M, 1>(a, rhs);
    backward<T, M, 1>(a, rhs);
    u_star[e] = u[e];
    for (int j = 0; j < M; ++j) u_star[(u64)(j + 1) * nc + e] = rhs[j];
    info[e] = 0;
}

// Bytes of dynamic shared memory of the block postprocessing, its layout: the bordered
// matrix of order n' (packed), dinv (n' - 1) and q, then W (d n) (checked at compile time below
// against src/element_instances.rs's postprocess_block_shared_values, with which
// src/design.rs launches it).
template <typename T, int D, int N, int NP>
__host__ __device__ constexpr u64 postprocess_block_shared_bytes() {
    return (u64)sizeof(T) * (NP * (NP + 1) / 2 + (NP - 1) + D * N);
}

template <class C, typename T, int N, int NP>
__device__ void postprocess_block(const Tables& tb, const Cells& c, const T* __restrict__ u,
                                  const T* __restrict__ q, T* __restrict__ u_star,
                                  int* __restrict__ info, T* __restrict__ pivot_value) {
    constexpr int D = C::DIM;
    constexpr int M = NP - 1;  // unknowns (the constant mode is fixed by the mean)
    constexpr int R = M + 1;   // order of the bordered matrix: rhs appended as row M
    constexpr int NS = R * (R + 1) / 2;
    if (!shared_memory_ok(postprocess_block_shared_bytes<T, D, N, NP>(), info)) return;
    HDG_DYNAMIC_SHARED(smem_raw);
    T* l = reinterpret_cast<T*>(smem_raw);
    T* dinv = l + NS;
    T* qs = dinv + M;
    __shared__ LocalCoefficients<C, T> cf;
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const u64 nc = c.n_cells;
    const T* stiff = ptr<T>(tb.post_stiffness);
    const T* pderiv = ptr<T>(tb.post_derivative);

    for (u64 e = blockIdx.x; e < nc; e += gridDim.x) {
        if (tid == 0) cf.load(c, e);
        for (int t = tid; t < D * N; t += nt) qs[t] = q[(u64)t * nc + e];
        __syncthreads();
        // W_s = sum_r (-det (J^-1)_sr / kappa) Q_r, in place: the thread of index ll alone reads
        // and writes qs[r * N + ll], for every r.
        for (int ll = tid; ll < N; ll += nt) {
            T qv[D];
#pragma unroll
            for (int r = 0; r < D; ++r) qv[r] = qs[r * N + ll];
#pragma unroll
            for (int sd = 0; sd < D; ++sd) {
                T w = T(0);
#pragma unroll
                for (int r = 0; r < D; ++r)
                    w = fmad(-cf.det * cf.jinv[sd * D + r] / cf.kappa, qv[r], w);
                qs[sd * N + ll] = w;
            }
        }
        // The matrix: det sum_st B_st K'_st[i+1][j+1], i, j < M (symmetric: read at (j, i));
        // L(M, M) is not used (0). Row M (the right-hand side) comes after the barrier.
        for (int t = tid; t < NS; t += nt) {
            int rr, cc;
            packed_row_col(NS - 1 - t, rr, cc);
            const int j = R - 1 - rr;  // column
            const int i = R - 1 - cc;  // row >= j
            if (i == M && j < M) continue;
            T s = T(0);
            if (i < M) {
#pragma unroll
                for (int sd = 0; sd < D; ++sd)
#pragma unroll
                    for (int td = 0; td < D; ++td) {
                        const T coef = cf.det * cf.metric_b[sd * D + td];
                        s = fmad(coef, stiff[(sd * D + td) * NP * NP + (j + 1) * NP + i + 1], s);
                    }
            }
            l[t] = s;
        }
        __syncthreads();
        // Row M: rhs_j = sum_s sum_l W_s[l] D'_s[l][j+1], one thread per j. (Inside the loop
        // above, its M entries fell to scattered lanes, each a d^2 n-term sum beside the other
        // lanes' d^2 terms: the warps ran them one after the other, most lanes idle.)
        for (int j = tid; j < M; j += nt) {
            T s = T(0);
#pragma unroll
            for (int sd = 0; sd < D; ++sd) {
                const T* dp = pderiv + sd * N * NP + j + 1;
#pragma unroll 4
                for (int ll = 0; ll < N; ++ll) s = fmad(qs[sd * N + ll], dp[ll * NP], s);
            }
            l[col_start(R, j) + M - j] = s;
        }
        __syncthreads();
        const int bad = block_cholesky<T>(R, M, l, dinv, &cf.fail_value);
        if (bad) {
            report_failure(e, bad, cf.fail_value, info, pivot_value);
            continue;
        }
        // Row M holds y = L^-1 rhs: x = L^-T y, one row per step, written out as it is found.
        for (int j = M - 1; j >= 0; --j) {
            const T xj = l[col_start(R, j) + M - j] * dinv[j];
            for (int i = tid; i < j; i += nt) {
                const int ci = col_start(R, i);
                l[ci + M - i] = fmad(-l[ci + j - i], xj, l[ci + M - i]);
            }
            if (tid == 0) u_star[(u64)(j + 1) * nc + e] = xj;
            __syncthreads();
        }
        if (tid == 0) {
            u_star[e] = u[e];
            info[e] = 0;
        }
        __syncthreads();
    }
}

#ifndef HDG_EMULATION  // the host emulation instantiates what it checks itself
// ---------------------------------------------------------------------------------------------
// Instantiations: n = CELL::n(K), n' = CELL::n(K + 1), for the orders of
// src/element_instances.rs.
#include "element_instances.cuh"

#define POSTPROCESS_THREAD(T, CELL, NAME, K)                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        postprocess_thread_##T##_##NAME##K(Tables tb, Cells c, const T* u, const T* q, T* us,  \
                                           int* info, T* pv) {                                  \
        postprocess_thread<CELL, T, CELL::n(K), CELL::n((K) + 1)>(tb, c, u, q, us, info, pv);  \
    }

#define POSTPROCESS_BLOCK(T, CELL, NAME, K)                                                     \
    static_assert(postprocess_block_shared_bytes<T, CELL::DIM, CELL::n(K), CELL::n((K) + 1)>() \
                      == sizeof(T) * BLOCK_SHARED_VALUES[CELL::DIM - 2][K][3],                 \
                  "postprocess.cu's shared memory is not src/element_instances.rs's");         \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        postprocess_block_##T##_##NAME##K(Tables tb, Cells c, const T* u, const T* q, T* us,   \
                                          int* info, T* pv) {                                   \
        postprocess_block<CELL, T, CELL::n(K), CELL::n((K) + 1)>(tb, c, u, q, us, info, pv);   \
    }

#define POSTPROCESS_KERNELS(T)                                                                  \
    FOR_EACH_ELEMENT_ORDER(POSTPROCESS_THREAD, T, Tri, tri)                                     \
    FOR_EACH_THREAD_TETRAHEDRON_ORDER(POSTPROCESS_THREAD, T, Tet, tet)                          \
    FOR_EACH_ELEMENT_ORDER(POSTPROCESS_BLOCK, T, Tri, tri)                                      \
    FOR_EACH_ELEMENT_ORDER(POSTPROCESS_BLOCK, T, Tet, tet)

POSTPROCESS_KERNELS(f32)
POSTPROCESS_KERNELS(f64)
#endif  // HDG_EMULATION

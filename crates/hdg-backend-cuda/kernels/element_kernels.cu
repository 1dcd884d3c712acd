// Condensation, recovery and postprocessing of the CUDA backend, in two designs, for triangles
// and tetrahedra (element_common.cuh: cell traits and layouts). Loaded by
// src/element_kernels.rs, which chooses the design, the block size and the dynamic shared
// memory of every launch (src/design.rs: the dispatch and the sizes, which must match the
// formulas here).
//
// THREAD design (one thread per element, scratch in local memory): mirrors the CPU backend
// kernel for kernel (hdg-backend-cpu condense.rs: condense_element; local.rs:
// recover_element, postprocess_element; dense.rs: the Cholesky and triangular solves), in the
// same order of operations and with the non-fusing intrinsics, so it gives the CPU backend's
// numbers to the bit. Instantiated where its local scratch stays moderate: triangles k = 1..8,
// tetrahedra k = 1..4 (recovery, whose scratch is only O(n + nl), for tetrahedra k = 1..8).
// Names: condense_thread_{f32,f64}_{tri,tet}{K}, recover_thread_..., postprocess_thread_...;
// launched with any block size, one thread per cell (threads beyond n_cells return).
//
// BLOCK design (one thread block per element, a persistent grid: block b handles cells b,
// b + gridDim.x, ...): the element's matrices in shared memory, cooperative algorithms:
//   condensation  S (packed lower triangle, column-major: L(i, j) at j N - j (j - 1) / 2 + i - j)
//                 and the n x (nl + 1) panel W = [P | F] (row-major, leading dimension
//                 nl + 1) in dynamic shared memory (variant "global": W in a global scratch of
//                 n (nl + 1) values per block, for elements whose panel does not fit);
//                 1. S, P, F formed from the tables (parallel over entries);
//                 2. right-looking Cholesky S = L L^T, one barrier per column (the trailing
//                    update parallel over its rows);
//                 3. W = L^-1 [P | F]: one thread per right-hand-side column, rows in register
//                    blocks of RB (no barrier);
//                 4. K_e = A - W^T W and b_e = W^T w0: parallel over the entries of the upper
//                    triangle (A formed on the fly from the tables), each thread RA rows of one
//                    column; written to both triangles, so K_e is exactly symmetric;
//                 5. [Z | u0] = L^-T W: one thread per column again, written out by its thread.
//   recovery      Lambda and U in shared memory; U = u0 + Z Lambda parallel over i, Q parallel
//                 over (r, j).
//   postprocess   the (n' - 1) x (n' - 1) matrix with the right-hand side appended as one more
//                 row (packed, column-major) in shared memory: the first n' - 1 steps of the
//                 right-looking Cholesky of that bordered matrix leave L and y = L^-1 rhs; then
//                 x = L^-T y, one barrier per row.
// Free to fuse multiply-adds and to sum in its own order: it agrees with the CPU to rounding
// (1e-11 relative in f64 in the tests), not to the bit. Instantiated for triangles and
// tetrahedra k = 1..8. Names: condense_block_..., condense_block_global_...,
// recover_block_..., postprocess_block_... Each block kernel checks that it got at least the
// dynamic shared memory its layout needs (else info[0] = -1 and it returns).
//
// tools/emulate_kernels.cpp runs these kernels on the host (a thread per CUDA thread, a
// barrier per __syncthreads) and compares the designs: the index arithmetic and the barrier
// structure can be checked without a GPU.
#include "block_common.cuh"

// ---------------------------------------------------------------------------------------------
// THREAD design: dense kernels of hdg-backend-cpu dense.rs.

// dense::cholesky; returns -1 on success, else the failing pivot (its value in *value).
template <typename T, int N>
__device__ int cholesky(T* a, T* value) {
#pragma unroll 1
    for (int j = 0; j < N; ++j) {
        T d = a[j * N + j];
#pragma unroll 4
        for (int k = 0; k < j; ++k) d = msub(d, a[j * N + k], a[j * N + k]);
        if (!(d > T(0))) {
            *value = d;
            return j;
        }
        d = root(d);
        a[j * N + j] = d;
        T inv = T(1) / d;
#pragma unroll 1
        for (int i = j + 1; i < N; ++i) {
            T s = a[i * N + j];
#pragma unroll 4
            for (int k = 0; k < j; ++k) s = msub(s, a[i * N + k], a[j * N + k]);
            a[i * N + j] = mul(s, inv);
        }
    }
    return -1;
}

// dense::forward_substitution: L Y = B for the N x M row-major b.
template <typename T, int N, int M>
__device__ void forward(const T* l, T* b) {
#pragma unroll 1
    for (int i = 0; i < N; ++i) {
#pragma unroll 1
        for (int k = 0; k < i; ++k) {
            T lik = l[i * N + k];
#pragma unroll 4
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lik, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
#pragma unroll 4
        for (int c = 0; c < M; ++c) b[i * M + c] = mul(b[i * M + c], inv);
    }
}

// dense::backward_substitution: L^T X = B for the N x M row-major b.
template <typename T, int N, int M>
__device__ void backward(const T* l, T* b) {
#pragma unroll 1
    for (int i = N - 1; i >= 0; --i) {
#pragma unroll 1
        for (int k = i + 1; k < N; ++k) {
            T lki = l[k * N + i];
#pragma unroll 4
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lki, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
#pragma unroll 4
        for (int c = 0; c < M; ++c) b[i * M + c] = mul(b[i * M + c], inv);
    }
}

// Condensation (condense_element), one thread per element.
template <class C, typename T, int N, int NF>
__device__ void condense_thread(const Tables& tb, const Cells& c, T* __restrict__ k_out,
                                T* __restrict__ b_out, T* __restrict__ z_out,
                                T* __restrict__ u0_out, int* __restrict__ info,
                                T* __restrict__ pivot_value) {
    constexpr int D = C::DIM;
    constexpr int F = C::NFACES;
    constexpr int NO = C::NORIENT;
    constexpr int NL = F * NF;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;

    Geometry<C, T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const unsigned char* orient = ptr<unsigned char>(c.orientations);
    int o[F];
    T tau[F];
    for (int f = 0; f < F; ++f) {
        o[f] = orient[f * nc + e];
        tau[f] = ptr<T>(c.tau)[f * nc + e];
    }
    const T kappa = ptr<T>(c.kappa)[e];
    const T reaction = ptr<T>(c.reaction)[e];
    T b[D * D];
    metric<D>(g.jinv, b);

    T s_mat[N * N];
    T p[N * NL];
    T a[NL * NL];
    T load[N];

    // S
    for (int v = 0; v < N * N; ++v) s_mat[v] = T(0);
    const T* dprod = ptr<T>(tb.derivative_products);
    for (int sd = 0; sd < D; ++sd)
        for (int td = 0; td < D; ++td) {
            T coef = mul(mul(kappa, g.det), b[sd * D + td]);
            const T* dp = dprod + (sd * D + td) * N * N;
#pragma unroll 4
            for (int v = 0; v < N * N; ++v) s_mat[v] = madd(s_mat[v], coef, dp[v]);
        }
    const T* fmass = ptr<T>(tb.face_mass);
    for (int f = 0; f < F; ++f) {
        T coef = mul(tau[f], g.fj[f]);
        const T* em = fmass + f * N * N;
#pragma unroll 4
        for (int v = 0; v < N * N; ++v) s_mat[v] = madd(s_mat[v], coef, em[v]);
    }
    const T mass = mul(reaction, g.det);
    for (int i = 0; i < N; ++i) s_mat[i * N + i] = add(s_mat[i * N + i], mass);

    // P
    const T* ftrace = ptr<T>(tb.face_trace);
    const T* dtrace = ptr<T>(tb.derivative_trace);
#pragma unroll 1
    for (int f = 0; f < F; ++f) {
        T coef_s[D];
        for (int sd = 0; sd < D; ++sd)
            coef_s[sd] = mul(mul(kappa, g.fj[f]), dot_dim<D>(g.jinv + sd * D, g.nrm + f * D));
        T tau_f = mul(tau[f], g.fj[f]);
        const T* gt = ftrace + (f * NO + o[f]) * N * NF;
#pragma unroll 1
        for (int i = 0; i < N; ++i)
#pragma unroll 4
            for (int m = 0; m < NF; ++m) {
                T v = mul(tau_f, gt[i * NF + m]);
                for (int sd = 0; sd < D; ++sd) {
                    const T* dt = dtrace + ((sd * F + f) * NO + o[f]) * N * NF;
                    v = madd(v, coef_s[sd], dt[i * NF + m]);
                }
                p[i * NL + f * NF + m] = v;
            }
    }

    // A
    const T* tprod = ptr<T>(tb.trace_products);
#pragma unroll 1
    for (int f = 0; f < F; ++f) {
#pragma unroll 1
        for (int gf = 0; gf < F; ++gf) {
            T nn = dot_dim<D>(g.nrm + f * D, g.nrm + gf * D);
            T coef = mul(mul(mul(kappa / g.det, nn), g.fj[f]), g.fj[gf]);
            const T* gtg = tprod + (((f * NO + o[f]) * F + gf) * NO + o[gf]) * NF * NF;
#pragma unroll 1
            for (int m = 0; m < NF; ++m)
#pragma unroll 4
                for (int l = 0; l < NF; ++l)
                    a[(f * NF + m) * NL + gf * NF + l] = mul(coef, gtg[m * NF + l]);
        }
        T tau_f = mul(tau[f], g.fj[f]);
        for (int m = 0; m < NF; ++m)
            a[(f * NF + m) * NL + f * NF + m] = add(a[(f * NF + m) * NL + f * NF + m], tau_f);
    }

    // F (evaluated on the host: f cannot run here)
    const T* fk = ptr<T>(c.load);
    for (int i = 0; i < N; ++i) load[i] = fk[i * nc + e];

    T value = T(0);
    int bad = cholesky<T, N>(s_mat, &value);
    if (bad >= 0) {
        info[e] = bad + 1;
        pivot_value[e] = value;
        return;
    }
    forward<T, N, NL>(s_mat, p);  // W = L^-1 P
    // K_e = A - W^T W (upper triangle, then mirrored)
#pragma unroll 1
    for (int k = 0; k < N; ++k)
#pragma unroll 1
        for (int i = 0; i < NL; ++i) {
            T wi = p[k * NL + i];
#pragma unroll 4
            for (int j = i; j < NL; ++j) a[i * NL + j] = msub(a[i * NL + j], wi, p[k * NL + j]);
        }
#pragma unroll 1
    for (int i = 0; i < NL; ++i)
        for (int j = 0; j < i; ++j) a[i * NL + j] = a[j * NL + i];
    forward<T, N, 1>(s_mat, load);  // w0 = L^-1 F
    // b_e = W^T w0
#pragma unroll 1
    for (int j = 0; j < NL; ++j) {
        T y = T(0);
        for (int k = 0; k < N; ++k) y = madd(y, p[k * NL + j], load[k]);
        b_out[condensed_at<T>(NL, j, e)] = y;
    }
    backward<T, N, NL>(s_mat, p);    // Z = L^-T W
    backward<T, N, 1>(s_mat, load);  // u0 = L^-T w0

#pragma unroll 4
    for (int v = 0; v < NL * NL; ++v) k_out[condensed_at<T>(NL * NL, v, e)] = a[v];
#pragma unroll 4
    for (int v = 0; v < N * NL; ++v) z_out[condensed_at<T>(N * NL, v, e)] = p[v];
    for (int i = 0; i < N; ++i) u0_out[condensed_at<T>(N, i, e)] = load[i];
    info[e] = 0;
}

// The element's trace unknowns Lambda: the free trace where the face is free, the Dirichlet
// data where it is not.
template <typename T, int NF>
__device__ __forceinline__ T trace_value(const unsigned* __restrict__ free_index,
                                         const T* __restrict__ trace,
                                         const T* __restrict__ dirichlet, u64 face, int m) {
    const unsigned free = free_index[face];
    return free == NONE_INDEX ? dirichlet[face * NF + m] : trace[(u64)free * NF + m];
}

// Recovery (recover_element): U = u0 + Z Lambda, Q_r; one thread per element.
template <class C, typename T, int N, int NF>
__device__ void recover_thread(const Tables& tb, const Cells& c,
                               const unsigned* __restrict__ free_index,
                               const T* __restrict__ trace, const T* __restrict__ dirichlet,
                               const T* __restrict__ z, const T* __restrict__ u0,
                               T* __restrict__ u_out, T* __restrict__ q_out) {
    constexpr int D = C::DIM;
    constexpr int F = C::NFACES;
    constexpr int NO = C::NORIENT;
    constexpr int NL = F * NF;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;
    Geometry<C, T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const unsigned char* orient = ptr<unsigned char>(c.orientations);
    const unsigned* faces = ptr<unsigned>(c.faces);
    const T kappa = ptr<T>(c.kappa)[e];

    T lambda[NL];
    int o[F];
    for (int f = 0; f < F; ++f) {
        o[f] = orient[f * nc + e];
        const u64 face = faces[f * nc + e];
        for (int m = 0; m < NF; ++m)
            lambda[f * NF + m] = trace_value<T, NF>(free_index, trace, dirichlet, face, m);
    }
    T u[N];
#pragma unroll 1
    for (int i = 0; i < N; ++i) {
        T s = T(0);
#pragma unroll 4
        for (int j = 0; j < NL; ++j) s = madd(s, z[condensed_at<T>(N * NL, i * NL + j, e)], lambda[j]);
        u[i] = add(u0[condensed_at<T>(N, i, e)], s);
        u_out[i * nc + e] = u[i];
    }
    const T scale = kappa / g.det;
    const T* deriv = ptr<T>(tb.derivative);
    const T* ftrace = ptr<T>(tb.face_trace);
#pragma unroll 1
    for (int r = 0; r < D; ++r) {
        T qr[N];
        for (int j = 0; j < N; ++j) qr[j] = T(0);
#pragma unroll 1
        for (int s = 0; s < D; ++s) {
            T coef = mul(g.det, g.jinv[s * D + r]);
            const T* dmat = deriv + s * N * N;
#pragma unroll 1
            for (int i = 0; i < N; ++i) {
                T ci = mul(coef, u[i]);
#pragma unroll 4
                for (int j = 0; j < N; ++j) qr[j] = madd(qr[j], ci, dmat[i * N + j]);
            }
        }
#pragma unroll 1
        for (int f = 0; f < F; ++f) {
            T coef = mul(-g.nrm[f * D + r], g.fj[f]);
            const T* gt = ftrace + (f * NO + o[f]) * N * NF;
#pragma unroll 1
            for (int i = 0; i < N; ++i) {
                T s = T(0);
#pragma unroll 4
                for (int m = 0; m < NF; ++m) s = madd(s, gt[i * NF + m], lambda[f * NF + m]);
                qr[i] = madd(qr[i], coef, s);
            }
        }
        for (int j = 0; j < N; ++j) q_out[(u64)(r * N + j) * nc + e] = mul(qr[j], scale);
    }
}

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

// ---------------------------------------------------------------------------------------------
// BLOCK design: cooperative dense kernels on packed column-major lower triangles in shared
// memory. Every function here is called by all threads of the block with the same arguments
// (its barriers must be reached by all).

// The first NP steps of the right-looking Cholesky factorisation of the SPD matrix held as a
// packed column-major lower triangle of order R >= NP in `l`. On return columns j < NP hold
// L (diagonal included) and dinv[j] = 1 / L(j, j); for R > NP the rows i >= NP of those columns
// hold the solution Y of Y L^T = B for the bordering rows B (the forward substitution of the
// bordered system comes for free). Returns 0, or p + 1 if pivot p is not positive (its value in
// *fail_value, written by thread 0).
//
// One barrier per column: step j reads the pivot and column j as left by step j - 1's update,
// and updates the trailing triangle with the scaled column computed on the fly; column j itself
// is scaled (and its diagonal set) during step j + 1, when nothing reads it any more.
template <typename T>
__device__ int block_cholesky(int R, int NP, T* l, T* dinv, T* fail_value) {
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    T prev_piv = T(0), prev_inv = T(0);
    for (int j = 0; j < NP; ++j) {
        const int cj = col_start(R, j);
        const T d = l[cj];  // L(j, j) before its square root; the same for every thread
        if (!(d > T(0))) {
            if (tid == 0) *fail_value = d;
            __syncthreads();
            return j + 1;
        }
        const T piv = root(d);
        const T inv = T(1) / piv;
        if (j > 0) {
            // Deferred: scale column j - 1 below its diagonal, set its diagonal.
            const int cp = col_start(R, j - 1);
            for (int i = j + tid; i < R; i += nt) l[cp + i - (j - 1)] *= prev_inv;
            if (tid == 0) {
                l[cp] = prev_piv;
                dinv[j - 1] = prev_inv;
            }
        }
        // Trailing update: L(i, m) -= L(i, j) L(m, j) / d for j < m <= i < R. Each thread owns
        // rows (i = j + 1 + tid, + nt, ...) and walks their columns: at each step the threads
        // of a warp touch consecutive rows of one column (no bank conflict) and read the same
        // L(m, j) (a broadcast); no index decoding.
        for (int i = j + 1 + tid; i < R; i += nt) {
            const T lij = -(l[cj + i - j] * inv);
            int cm = cj + (R - j);  // col_start(R, m) for m = j + 1
#pragma unroll 4
            for (int m = j + 1; m <= i; ++m) {
                const T lmj = l[cj + m - j] * inv;
                l[cm + i - m] = fmad(lij, lmj, l[cm + i - m]);
                cm += R - m;
            }
        }
        prev_piv = piv;
        prev_inv = inv;
        __syncthreads();
    }
    // Column NP - 1.
    const int cp = col_start(R, NP - 1);
    for (int i = NP + tid; i < R; i += nt) l[cp + i - (NP - 1)] *= prev_inv;
    if (tid == 0) {
        l[cp] = prev_piv;
        dinv[NP - 1] = prev_inv;
    }
    __syncthreads();
    return 0;
}

// Bytes of dynamic shared memory of the block condensation (src/design.rs mirrors this):
// L (n (n + 1) / 2), dinv (n), and with SHARED_W the panel W (n (nl + 1)).
template <typename T, int N, int NL, bool SHARED_W>
__host__ __device__ constexpr u64 condense_block_shared_bytes() {
    return (u64)sizeof(T) * (N * (N + 1) / 2 + N + (SHARED_W ? N * (NL + 1) : 0));
}

// Rows per register block of the column solves (RB) and rows per thread of the Gram product
// (RA): twice as many with the panel in global memory, to halve its traffic.
template <bool SHARED_W>
struct Blocking {
    static constexpr int RB = SHARED_W ? 8 : 16;
    static constexpr int RA = SHARED_W ? 4 : 8;
};

template <class C, typename T, int N, int NF, bool SHARED_W>
__device__ void condense_block(const Tables& tb, const Cells& c, T* __restrict__ k_out,
                               T* __restrict__ b_out, T* __restrict__ z_out,
                               T* __restrict__ u0_out, int* __restrict__ info,
                               T* __restrict__ pivot_value, T* __restrict__ scratch) {
    constexpr int F = C::NFACES;
    constexpr int NL = F * NF;
    constexpr int LD = NL + 1;  // columns of W: P (NL), then F
    constexpr int NS = N * (N + 1) / 2;
    constexpr int RB = Blocking<SHARED_W>::RB;
    constexpr int RA = Blocking<SHARED_W>::RA;
    if (!shared_memory_ok(condense_block_shared_bytes<T, N, NL, SHARED_W>(), info)) return;
    HDG_DYNAMIC_SHARED(smem_raw);
    T* l = reinterpret_cast<T*>(smem_raw);
    T* dinv = l + NS;
    T* w = SHARED_W ? dinv + N : scratch + (u64)blockIdx.x * (N * LD);
    __shared__ CondenseCoefficients<C, T> cf;

    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const u64 nc = c.n_cells;
    const T* fk = ptr<T>(c.load);

    for (u64 e = blockIdx.x; e < nc; e += gridDim.x) {
        if (tid == 0) cf.load(c, e);
        __syncthreads();

        // 1. S (packed column-major lower triangle), P and F (the panel W).
        for (int t = tid; t < NS; t += nt) {
            int rr, cc;
            packed_row_col(NS - 1 - t, rr, cc);
            const int j = N - 1 - rr;  // column
            const int i = N - 1 - cc;  // row >= j
            l[t] = cf.template volume<N>(tb, i, j);
        }
        for (int t = tid; t < N * NL; t += nt) {
            const int i = t / NL;
            const int col = t - i * NL;
            w[i * LD + col] = cf.template panel<N, NF>(tb, i, col);
        }
        for (int i = tid; i < N; i += nt) w[i * LD + NL] = fk[(u64)i * nc + e];
        __syncthreads();

        // 2. S = L L^T.
        const int bad = block_cholesky<T>(N, N, l, dinv, &cf.fail_value);
        if (bad) {
            if (tid == 0) {
                info[e] = bad;
                pivot_value[e] = cf.fail_value;
            }
            __syncthreads();
            continue;
        }

        // 3. W = L^-1 [P | F]: one thread per column, RB rows at a time in registers.
        for (int col = tid; col < LD; col += nt) {
#pragma unroll 1
            for (int i0 = 0; i0 < N; i0 += RB) {
                T acc[RB];
#pragma unroll
                for (int r = 0; r < RB; ++r) acc[r] = (i0 + r < N) ? w[(i0 + r) * LD + col] : T(0);
                int ck = 0;  // col_start(N, k)
#pragma unroll 2
                for (int k = 0; k < i0; ++k) {
                    const T wk = w[k * LD + col];
#pragma unroll
                    for (int r = 0; r < RB; ++r)
                        if (i0 + r < N) acc[r] = fmad(-l[ck + i0 + r - k], wk, acc[r]);
                    ck += N - k;
                }
                // The diagonal block: column by column.
#pragma unroll
                for (int q = 0; q < RB; ++q) {
                    if (i0 + q < N) {
                        const int cq = col_start(N, i0 + q);
                        acc[q] *= dinv[i0 + q];
#pragma unroll
                        for (int r = q + 1; r < RB; ++r)
                            if (i0 + r < N) acc[r] = fmad(-l[cq + r - q], acc[q], acc[r]);
                        w[(i0 + q) * LD + col] = acc[q];
                    }
                }
            }
        }
        __syncthreads();

        // 4. K_e = A - W^T W (a <= b < NL) and b_e = W^T w0 (b = NL): RA rows of one column
        // per task; tasks (row block ab, column b >= ab RA) enumerated row block by row block.
        {
            constexpr int NAB = (NL + RA - 1) / RA;
            // Tasks of row block ab: LD - ab RA; tasks before it: ab LD - RA ab (ab - 1) / 2.
            constexpr int TASKS = NAB * LD - RA * NAB * (NAB - 1) / 2;
            for (int task = tid; task < TASKS; task += nt) {
                int ab = 0;
                while (ab + 1 < NAB && (ab + 1) * LD - RA * (ab + 1) * ab / 2 <= task) ++ab;
                const int a0 = ab * RA;
                const int bcol = a0 + (task - (ab * LD - RA * ab * (ab - 1) / 2));
                T acc[RA];
#pragma unroll
                for (int r = 0; r < RA; ++r) acc[r] = T(0);
#pragma unroll 2
                for (int k = 0; k < N; ++k) {
                    const T wb = w[k * LD + bcol];
#pragma unroll
                    for (int r = 0; r < RA; ++r)
                        if (a0 + r < NL) acc[r] = fmad(w[k * LD + a0 + r], wb, acc[r]);
                }
#pragma unroll
                for (int r = 0; r < RA; ++r) {
                    const int a = a0 + r;
                    if (a >= NL || bcol < a) continue;
                    if (bcol == NL) {
                        b_out[condensed_at<T>(NL, a, e)] = acc[r];
                    } else {
                        const T v = cf.template trace<NF>(tb, a, bcol) - acc[r];
                        k_out[condensed_at<T>(NL * NL, a * NL + bcol, e)] = v;
                        if (a != bcol) k_out[condensed_at<T>(NL * NL, bcol * NL + a, e)] = v;
                    }
                }
            }
        }
        __syncthreads();

        // 5. [Z | u0] = L^-T W, one thread per column, from the last row block up; each thread
        // writes its own column out.
        for (int col = tid; col < LD; col += nt) {
            constexpr int NB = (N + RB - 1) / RB;
#pragma unroll 1
            for (int blk = NB - 1; blk >= 0; --blk) {
                const int i0 = blk * RB;
                T acc[RB];
#pragma unroll
                for (int r = 0; r < RB; ++r) acc[r] = (i0 + r < N) ? w[(i0 + r) * LD + col] : T(0);
                int base[RB];
#pragma unroll
                for (int r = 0; r < RB; ++r) base[r] = col_start(N, i0 + r) - (i0 + r);
#pragma unroll 2
                for (int k = i0 + RB; k < N; ++k) {
                    const T wk = w[k * LD + col];
#pragma unroll
                    for (int r = 0; r < RB; ++r) acc[r] = fmad(-l[base[r] + k], wk, acc[r]);
                }
#pragma unroll
                for (int q = RB - 1; q >= 0; --q) {
                    if (i0 + q < N) {
#pragma unroll
                        for (int r = q + 1; r < RB; ++r)
                            if (i0 + r < N) acc[q] = fmad(-l[base[q] + i0 + r], acc[r], acc[q]);
                        acc[q] *= dinv[i0 + q];
                        w[(i0 + q) * LD + col] = acc[q];
                    }
                }
            }
            if (col < NL) {
#pragma unroll 4
                for (int i = 0; i < N; ++i) z_out[condensed_at<T>(N * NL, i * NL + col, e)] = w[i * LD + col];
            } else {
                for (int i = 0; i < N; ++i) u0_out[condensed_at<T>(N, i, e)] = w[i * LD + col];
            }
        }
        if (tid == 0) info[e] = 0;
        __syncthreads();
    }
}

// Per-element scalars of the block recovery and postprocessing.
template <class C, typename T>
struct LocalCoefficients {
    T det;
    T kappa;
    T jinv[C::DIM * C::DIM];
    T fj[C::NFACES];
    T nrm[C::NFACES * C::DIM];
    T metric_b[C::DIM * C::DIM];  // B_st
    int orient[C::NFACES];
    T fail_value;

    __device__ void load(const Cells& c, u64 e) {
        const u64 nc = c.n_cells;
        Geometry<C, T> g;
        g.load(ptr<T>(c.geometry), nc, e);
        det = g.det;
        kappa = ptr<T>(c.kappa)[e];
        for (int v = 0; v < C::DIM * C::DIM; ++v) jinv[v] = g.jinv[v];
        metric<C::DIM>(g.jinv, metric_b);
        for (int f = 0; f < C::NFACES; ++f) {
            fj[f] = g.fj[f];
            orient[f] = ptr<unsigned char>(c.orientations)[f * nc + e];
        }
        for (int v = 0; v < C::NFACES * C::DIM; ++v) nrm[v] = g.nrm[v];
        fail_value = T(0);
    }
};

// Bytes of dynamic shared memory of the block recovery: Lambda (nl) and U (n).
template <typename T, int N, int NL>
__host__ __device__ constexpr u64 recover_block_shared_bytes() {
    return (u64)sizeof(T) * (NL + N);
}

template <class C, typename T, int N, int NF>
__device__ void recover_block(const Tables& tb, const Cells& c,
                              const unsigned* __restrict__ free_index,
                              const T* __restrict__ trace, const T* __restrict__ dirichlet,
                              const T* __restrict__ z, const T* __restrict__ u0,
                              T* __restrict__ u_out, T* __restrict__ q_out, int* info) {
    constexpr int D = C::DIM;
    constexpr int F = C::NFACES;
    constexpr int NO = C::NORIENT;
    constexpr int NL = F * NF;
    if (!shared_memory_ok(recover_block_shared_bytes<T, N, NL>(), info)) return;
    HDG_DYNAMIC_SHARED(smem_raw);
    T* lambda = reinterpret_cast<T*>(smem_raw);
    T* us = lambda + NL;
    __shared__ LocalCoefficients<C, T> cf;
    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const u64 nc = c.n_cells;
    const unsigned* faces = ptr<unsigned>(c.faces);
    const T* deriv = ptr<T>(tb.derivative);
    const T* ftrace = ptr<T>(tb.face_trace);

    for (u64 e = blockIdx.x; e < nc; e += gridDim.x) {
        if (tid == 0) cf.load(c, e);
        for (int t = tid; t < NL; t += nt) {
            const int f = t / NF;
            const u64 face = faces[f * nc + e];
            lambda[t] = trace_value<T, NF>(free_index, trace, dirichlet, face, t - f * NF);
        }
        __syncthreads();
        for (int i = tid; i < N; i += nt) {
            T s = T(0);
#pragma unroll 4
            for (int j = 0; j < NL; ++j) s = fmad(z[condensed_at<T>(N * NL, i * NL + j, e)], lambda[j], s);
            const T ui = u0[condensed_at<T>(N, i, e)] + s;
            us[i] = ui;
            u_out[(u64)i * nc + e] = ui;
        }
        __syncthreads();
        // Q_r[j] = kappa/det (det sum_s (J^-1)_sr (D^_s^T U)_j - sum_f n_{f,r} |f| (G_f Lambda_f)_j)
        for (int t = tid; t < D * N; t += nt) {
            const int r = t / N;
            const int j = t - r * N;
            T acc = T(0);
#pragma unroll
            for (int s = 0; s < D; ++s) {
                const T* dmat = deriv + s * N * N;
                T ds = T(0);
#pragma unroll 4
                for (int i = 0; i < N; ++i) ds = fmad(us[i], dmat[i * N + j], ds);
                acc = fmad(cf.det * cf.jinv[s * D + r], ds, acc);
            }
#pragma unroll
            for (int f = 0; f < F; ++f) {
                const T* gt = ftrace + (f * NO + cf.orient[f]) * N * NF + j * NF;
                T gs = T(0);
#pragma unroll 4
                for (int m = 0; m < NF; ++m) gs = fmad(gt[m], lambda[f * NF + m], gs);
                acc = fmad(-cf.nrm[f * D + r] * cf.fj[f], gs, acc);
            }
            q_out[(u64)t * nc + e] = acc * (cf.kappa / cf.det);
        }
        __syncthreads();
    }
}

// Bytes of dynamic shared memory of the block postprocessing: the bordered matrix of order
// n' (packed), dinv (n' - 1) and q (d n).
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
        // The matrix: det sum_st B_st K'_st[i+1][j+1], i, j < M (symmetric: read at (j, i)).
        // Row M: rhs_j = sum_r sum_s (-det (J^-1)_sr / kappa) sum_l Q_r[l] D'_s[l][j+1]; L(M, M)
        // is not used (0).
        for (int t = tid; t < NS; t += nt) {
            int rr, cc;
            packed_row_col(NS - 1 - t, rr, cc);
            const int j = R - 1 - rr;  // column
            const int i = R - 1 - cc;  // row >= j
            T s = T(0);
            if (i < M) {
#pragma unroll
                for (int sd = 0; sd < D; ++sd)
#pragma unroll
                    for (int td = 0; td < D; ++td) {
                        const T coef = cf.det * cf.metric_b[sd * D + td];
                        s = fmad(coef, stiff[(sd * D + td) * NP * NP + (j + 1) * NP + i + 1], s);
                    }
            } else if (j < M) {
#pragma unroll
                for (int r = 0; r < D; ++r)
#pragma unroll
                    for (int sd = 0; sd < D; ++sd) {
                        const T coef = -cf.det * cf.jinv[sd * D + r] / cf.kappa;
                        const T* dp = pderiv + sd * N * NP + j + 1;
                        T ds = T(0);
#pragma unroll 4
                        for (int ll = 0; ll < N; ++ll) ds = fmad(qs[r * N + ll], dp[ll * NP], ds);
                        s = fmad(coef, ds, s);
                    }
            }
            l[t] = s;
        }
        __syncthreads();
        const int bad = block_cholesky<T>(R, M, l, dinv, &cf.fail_value);
        if (bad) {
            if (tid == 0) {
                info[e] = bad;
                pivot_value[e] = cf.fail_value;
            }
            __syncthreads();
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

// ---------------------------------------------------------------------------------------------
// Gather: out[b * per + v] = value v of cell first + b of a sector-blocked array (condensed_at)
// for b < count, v < per (element-contiguous copies of a few elements of the condensation's
// outputs; benchmarks and exports).
template <typename T>
__device__ void gather_elements(const T* __restrict__ src, u64 per, u64 first, u64 count,
                                T* __restrict__ out) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= per * count) return;
    const u64 b = t / per, v = t - b * per;
    out[t] = src[condensed_at<T>(per, v, first + b)];
}

#ifndef HDG_EMULATION  // the host emulation instantiates what it checks itself
extern "C" __global__ void gather_elements_f32(const f32* src, u64 per, u64 first, u64 count,
                                               f32* out) {
    gather_elements<f32>(src, per, first, count, out);
}
extern "C" __global__ void gather_elements_f64(const f64* src, u64 per, u64 first, u64 count,
                                               f64* out) {
    gather_elements<f64>(src, per, first, count, out);
}

// ---------------------------------------------------------------------------------------------
// Instantiations. CELL::n(K), CELL::nf(K); the postprocessing space has n' = CELL::n(K + 1).

#define THREAD_CONDENSE(T, CELL, NAME, K)                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        condense_thread_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out, T* z_out,      \
                                        T* u0_out, int* info, T* pv) {                          \
        condense_thread<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, k_out, b_out, z_out, u0_out,  \
                                                          info, pv);                           \
    }

#define THREAD_POSTPROCESS(T, CELL, NAME, K)                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        postprocess_thread_##T##_##NAME##K(Tables tb, Cells c, const T* u, const T* q, T* us,  \
                                           int* info, T* pv) {                                  \
        postprocess_thread<CELL, T, CELL::n(K), CELL::n((K) + 1)>(tb, c, u, q, us, info, pv);  \
    }

#define THREAD_RECOVER(T, CELL, NAME, K)                                                        \
    extern "C" __global__ void __launch_bounds__(256) recover_thread_##T##_##NAME##K(          \
        Tables tb, Cells c, const unsigned* fi, const T* trace, const T* dir, const T* z,      \
        const T* u0, T* u, T* q) {                                                              \
        recover_thread<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, fi, trace, dir, z, u0, u, q);  \
    }

#define BLOCK_KERNELS(T, CELL, NAME, K)                                                         \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        condense_block_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out, T* z_out,       \
                                       T* u0_out, int* info, T* pv, T* scratch) {               \
        condense_block<CELL, T, CELL::n(K), CELL::nf(K), true>(tb, c, k_out, b_out, z_out,     \
                                                               u0_out, info, pv, scratch);     \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        condense_block_global_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out,          \
                                              T* z_out, T* u0_out, int* info, T* pv,           \
                                              T* scratch) {                                     \
        condense_block<CELL, T, CELL::n(K), CELL::nf(K), false>(tb, c, k_out, b_out, z_out,    \
                                                                u0_out, info, pv, scratch);    \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) recover_block_##T##_##NAME##K(           \
        Tables tb, Cells c, const unsigned* fi, const T* trace, const T* dir, const T* z,      \
        const T* u0, T* u, T* q, int* info) {                                                   \
        recover_block<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, fi, trace, dir, z, u0, u, q,    \
                                                        info);                                  \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        postprocess_block_##T##_##NAME##K(Tables tb, Cells c, const T* u, const T* q, T* us,   \
                                          int* info, T* pv) {                                   \
        postprocess_block<CELL, T, CELL::n(K), CELL::n((K) + 1)>(tb, c, u, q, us, info, pv);   \
    }

// Thread design: all three stages (triangles k <= 8, tetrahedra k <= 4).
#define THREAD_ALL(T, CELL, NAME, K)                                                            \
    THREAD_CONDENSE(T, CELL, NAME, K)                                                           \
    THREAD_POSTPROCESS(T, CELL, NAME, K)                                                        \
    THREAD_RECOVER(T, CELL, NAME, K)

#define PRECISION(T)                                                                            \
    THREAD_ALL(T, Tri, tri, 1)                                                                  \
    THREAD_ALL(T, Tri, tri, 2)                                                                  \
    THREAD_ALL(T, Tri, tri, 3)                                                                  \
    THREAD_ALL(T, Tri, tri, 4)                                                                  \
    THREAD_ALL(T, Tri, tri, 5)                                                                  \
    THREAD_ALL(T, Tri, tri, 6)                                                                  \
    THREAD_ALL(T, Tri, tri, 7)                                                                  \
    THREAD_ALL(T, Tri, tri, 8)                                                                  \
    THREAD_ALL(T, Tet, tet, 1)                                                                  \
    THREAD_ALL(T, Tet, tet, 2)                                                                  \
    THREAD_ALL(T, Tet, tet, 3)                                                                  \
    THREAD_ALL(T, Tet, tet, 4)                                                                  \
    THREAD_RECOVER(T, Tet, tet, 5)                                                              \
    THREAD_RECOVER(T, Tet, tet, 6)                                                              \
    THREAD_RECOVER(T, Tet, tet, 7)                                                              \
    THREAD_RECOVER(T, Tet, tet, 8)                                                              \
    BLOCK_KERNELS(T, Tri, tri, 1)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 2)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 3)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 4)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 5)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 6)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 7)                                                               \
    BLOCK_KERNELS(T, Tri, tri, 8)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 1)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 2)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 3)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 4)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 5)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 6)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 7)                                                               \
    BLOCK_KERNELS(T, Tet, tet, 8)

PRECISION(f32)
PRECISION(f64)
#endif  // HDG_EMULATION

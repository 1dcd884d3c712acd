// The condensation in the THREAD and BLOCK designs, for triangles and tetrahedra
// (element_common.cuh: cell traits and layouts; condense_bordered.cu: the bordered design).
// Loaded by src/element_kernels.rs; src/design.rs chooses the design, the block size and the
// dynamic shared memory of every launch.
//
// THREAD design (one thread per element, scratch in local memory): hdg-backend-cpu's
// condense_element (condense.rs; dense.rs: the Cholesky and triangular solves, here
// dense_thread.cuh) in the same order of operations and with the non-fusing intrinsics, so it
// gives the CPU backend's numbers to the bit. Launched with any block size, one thread per
// cell (threads beyond n_cells return).
//
// BLOCK design (one thread block per element, a persistent grid: block b handles cells b,
// b + gridDim.x, ...): S (packed lower triangle, column-major: L(i, j) at
// j N - j (j - 1) / 2 + i - j) and the n x (nl + 1) panel W = [P | F] (row-major, leading
// dimension nl + 1) in dynamic shared memory (variant "global": W in a global scratch of
// n (nl + 1) values per block, for elements whose panel does not fit);
//   1. S, P, F formed from the tables (parallel over entries);
//   2. right-looking Cholesky S = L L^T, one barrier per column (dense_block.cuh);
//   3. W = L^-1 [P | F]: one thread per right-hand-side column, rows in register blocks of RB
//      (no barrier);
//   4. K_e = A - W^T W and b_e = W^T w0: parallel over the entries of the upper triangle (A
//      formed on the fly from the tables), each thread RA rows of one column; written to both
//      triangles, so K_e is exactly symmetric;
//   5. [Z | u0] = L^-T W: one thread per column again, written out by its thread.
// Free to fuse multiply-adds and to sum in its own order: it agrees with the CPU to rounding
// (1e-11 relative in f64 in the tests), not to the bit. Checks that it got at least the
// dynamic shared memory its layout needs (else info[0] = -1 and it returns).
//
// Kernel names (src/element_kernels.rs: the scheme): condense_thread_{f32,f64}_{tri,tet}{K},
// condense_block_..., condense_block_global_...; the orders compiled are those of
// src/element_instances.rs. Also here: gather_elements_{f32,f64}, which copies a few elements
// of the condensation's outputs out of their sector-blocked layout.
//
// tools/emulate_kernels.cpp runs these kernels on the host (a thread per CUDA thread, a
// barrier per __syncthreads) and compares the designs: the index arithmetic and the barrier
// structure can be checked without a GPU.
#include "dense_block.cuh"
#include "dense_thread.cuh"

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

// Bytes of dynamic shared memory of the block condensation, its layout: L (n (n + 1) / 2),
// dinv (n), and with SHARED_W the panel W (n (nl + 1)). The instantiations below check it at
// compile time against src/element_instances.rs (condense_block_shared_values), with which
// src/design.rs launches it.
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
            report_failure(e, bad, cf.fail_value, info, pivot_value);
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
// Instantiations: CELL::n(K), CELL::nf(K) for every order of src/element_instances.rs (the
// thread design of tetrahedra up to its own highest order).
#include "element_instances.cuh"

#define CONDENSE_THREAD(T, CELL, NAME, K)                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        condense_thread_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out, T* z_out,      \
                                        T* u0_out, int* info, T* pv) {                          \
        condense_thread<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, k_out, b_out, z_out, u0_out,  \
                                                          info, pv);                           \
    }

#define CONDENSE_BLOCK(T, CELL, NAME, K)                                                        \
    static_assert(condense_block_shared_bytes<T, CELL::n(K), CELL::NFACES * CELL::nf(K), true>() \
                          == sizeof(T) * BLOCK_SHARED_VALUES[CELL::DIM - 2][K][0] &&           \
                      condense_block_shared_bytes<T, CELL::n(K), CELL::NFACES * CELL::nf(K),   \
                                                  false>() ==                                  \
                          sizeof(T) * BLOCK_SHARED_VALUES[CELL::DIM - 2][K][1],                \
                  "condense.cu's shared memory is not src/element_instances.rs's");            \
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
    }

#define CONDENSE_KERNELS(T)                                                                     \
    FOR_EACH_ELEMENT_ORDER(CONDENSE_THREAD, T, Tri, tri)                                        \
    FOR_EACH_THREAD_TETRAHEDRON_ORDER(CONDENSE_THREAD, T, Tet, tet)                             \
    FOR_EACH_ELEMENT_ORDER(CONDENSE_BLOCK, T, Tri, tri)                                         \
    FOR_EACH_ELEMENT_ORDER(CONDENSE_BLOCK, T, Tet, tet)

CONDENSE_KERNELS(f32)
CONDENSE_KERNELS(f64)
#endif  // HDG_EMULATION

// The recovery of u_h and q_h in the THREAD and BLOCK designs, for triangles and tetrahedra
// (element_common.cuh: cell traits and layouts). Reads the condensation's Z and u0
// (condensed_layout.cuh) and the trace solution. Loaded by src/element_kernels.rs;
// src/design.rs chooses the design and the launch.
//
// THREAD design: hdg-backend-cpu's recover_element (local.rs) operation for operation, one
// thread per element (the CPU's numbers to the bit). BLOCK design (one thread block per
// element, a persistent grid): Lambda and U in shared memory; U = u0 + Z Lambda parallel over
// i, Q parallel over (r, j); agrees with the CPU to rounding.
//
// Kernel names (src/element_kernels.rs: the scheme): recover_thread_{f32,f64}_{tri,tet}{K},
// recover_block_..., for every order of src/element_instances.rs.
#include "block_common.cuh"

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

// Bytes of dynamic shared memory of the block recovery, its layout: Lambda (nl) and U (n)
// (checked at compile time below against src/element_instances.rs's
// recover_block_shared_values, with which src/design.rs launches it).
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

#ifndef HDG_EMULATION  // the host emulation instantiates what it checks itself
// ---------------------------------------------------------------------------------------------
// Instantiations: CELL::n(K), CELL::nf(K) for every order of src/element_instances.rs.
#include "element_instances.cuh"

#define RECOVER_THREAD(T, CELL, NAME, K)                                                        \
    extern "C" __global__ void __launch_bounds__(256) recover_thread_##T##_##NAME##K(          \
        Tables tb, Cells c, const unsigned* fi, const T* trace, const T* dir, const T* z,      \
        const T* u0, T* u, T* q) {                                                              \
        recover_thread<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, fi, trace, dir, z, u0, u, q);  \
    }

#define RECOVER_BLOCK(T, CELL, NAME, K)                                                         \
    static_assert(recover_block_shared_bytes<T, CELL::n(K), CELL::NFACES * CELL::nf(K)>() ==   \
                      sizeof(T) * BLOCK_SHARED_VALUES[CELL::DIM - 2][K][2],                    \
                  "recover.cu's shared memory is not src/element_instances.rs's");             \
    extern "C" __global__ void __launch_bounds__(256) recover_block_##T##_##NAME##K(           \
        Tables tb, Cells c, const unsigned* fi, const T* trace, const T* dir, const T* z,      \
        const T* u0, T* u, T* q, int* info) {                                                   \
        recover_block<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, fi, trace, dir, z, u0, u, q,    \
                                                        info);                                  \
    }

#define RECOVER_KERNELS(T)                                                                      \
    FOR_EACH_ELEMENT_ORDER(RECOVER_THREAD, T, Tri, tri)                                         \
    FOR_EACH_ELEMENT_ORDER(RECOVER_THREAD, T, Tet, tet)                                         \
    FOR_EACH_ELEMENT_ORDER(RECOVER_BLOCK, T, Tri, tri)                                          \
    FOR_EACH_ELEMENT_ORDER(RECOVER_BLOCK, T, Tet, tet)

RECOVER_KERNELS(f32)
RECOVER_KERNELS(f64)
#endif  // HDG_EMULATION

// What the block-design kernels share (condense.cu, recover.cu, postprocess.cu: the block
// designs; condense_bordered.cu: the bordered condensation): packed triangle indexing, the
// shared-memory check of a launch, and the per-element scalars of the condensation (and of the
// recovery and postprocessing). Every block kernel is called by all threads of its block.
#pragma once
#include "element_common.cuh"

// Offset of column j of a packed column-major lower triangle of order R: L(i, j) is at
// col_start(R, j) + i - j.
__device__ __forceinline__ int col_start(int r, int j) { return j * r - j * (j - 1) / 2; }

// (row, column) of entry t of a row-major packed lower triangle: t = row (row + 1) / 2 + col,
// col <= row.
__device__ __forceinline__ void packed_row_col(int t, int& row, int& col) {
    int r = (int)((sqrtf(8.0f * (float)t + 1.0f) - 1.0f) * 0.5f);
    while (r * (r + 1) / 2 > t) --r;
    while ((r + 1) * (r + 2) / 2 <= t) ++r;
    row = r;
    col = t - r * (r + 1) / 2;
}

// Checks the dynamic shared memory of the launch; on a mismatch flags info[0] = -1.
__device__ __forceinline__ bool shared_memory_ok(u64 needed_bytes, int* info) {
    unsigned got;
#ifdef HDG_EMULATION
    got = hdg_emulated_dynamic_smem_size();
#else
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(got));
#endif
    if ((u64)got < needed_bytes) {
        if (threadIdx.x == 0 && blockIdx.x == 0) info[0] = -1;
        return false;
    }
    return true;
}

// Flags element e as failed (info[e] = bad, the pivot in pivot_value[e], written by thread 0)
// and waits for the block: the caller then moves on to its next element. Called by all threads.
template <typename T>
__device__ __forceinline__ void report_failure(u64 e, int bad, T value, int* info, T* pivot_value) {
    if (threadIdx.x == 0) {
        info[e] = bad;
        pivot_value[e] = value;
    }
    __syncthreads();
}

// Per-element scalars of the block condensation (one copy in shared memory).
template <class C, typename T>
struct CondenseCoefficients {
    T coef_s[C::DIM * C::DIM];       // kappa det B_st
    T coef_face[C::NFACES];          // tau_f |f|
    T mass;                          // c det
    T coef_p[C::NFACES][C::DIM];     // kappa |f| (J^-1 n_f)_s
    T coef_a[C::NFACES][C::NFACES];  // kappa / det (n_f . n_g) |f| |g|
    int orient[C::NFACES];
    T fail_value;

    __device__ void load(const Cells& c, u64 e) {
        constexpr int D = C::DIM;
        constexpr int F = C::NFACES;
        const u64 nc = c.n_cells;
        Geometry<C, T> g;
        g.load(ptr<T>(c.geometry), nc, e);
        const T kappa = ptr<T>(c.kappa)[e];
        const T reaction = ptr<T>(c.reaction)[e];
        T b[D * D];
        metric<D>(g.jinv, b);
        for (int v = 0; v < D * D; ++v) coef_s[v] = kappa * g.det * b[v];
        for (int f = 0; f < F; ++f) {
            orient[f] = ptr<unsigned char>(c.orientations)[f * nc + e];
            coef_face[f] = ptr<T>(c.tau)[f * nc + e] * g.fj[f];
            for (int s = 0; s < D; ++s)
                coef_p[f][s] = kappa * g.fj[f] * dot_dim<D>(g.jinv + s * D, g.nrm + f * D);
            for (int h = 0; h < F; ++h)
                coef_a[f][h] =
                    kappa / g.det * dot_dim<D>(g.nrm + f * D, g.nrm + h * D) * g.fj[f] * g.fj[h];
        }
        mass = reaction * g.det;
        fail_value = T(0);
    }

    // The entries of the element's matrices, as both block condensations form them (order of
    // operations and fused multiply-adds included, so the two designs see the same matrices).
    // S(i, j) = c det delta_ij + sum_st coef_s[st] D_st(j, i) + sum_f coef_face[f] M_f(j, i):
    // S is symmetric, and (j, i) reads the tables consecutively for consecutive i.
    template <int N>
    __device__ T volume(const Tables& tb, int i, int j) const {
        const T* dprod = ptr<T>(tb.derivative_products);
        const T* fmass = ptr<T>(tb.face_mass);
        const int v = j * N + i;
        T s = (i == j) ? mass : T(0);
#pragma unroll
        for (int st = 0; st < C::DIM * C::DIM; ++st) s = fmad(coef_s[st], dprod[st * N * N + v], s);
#pragma unroll
        for (int f = 0; f < C::NFACES; ++f) s = fmad(coef_face[f], fmass[f * N * N + v], s);
        return s;
    }
    // P(i, col), col = f NF + m: tau_f |f| G_f(i, m) + sum_s coef_p[f][s] (D_s G_f)(i, m), with
    // the face's orientation.
    template <int N, int NF>
    __device__ T panel(const Tables& tb, int i, int col) const {
        constexpr int F = C::NFACES;
        constexpr int NO = C::NORIENT;
        const T* ftrace = ptr<T>(tb.face_trace);
        const T* dtrace = ptr<T>(tb.derivative_trace);
        const int f = col / NF;
        const int m = col - f * NF;
        const int o = orient[f];
        const int at = i * NF + m;
        T v = coef_face[f] * ftrace[(f * NO + o) * N * NF + at];
#pragma unroll
        for (int s = 0; s < C::DIM; ++s)
            v = fmad(coef_p[f][s], dtrace[((s * F + f) * NO + o) * N * NF + at], v);
        return v;
    }
    // A(a, b), a = f NF + m, b = h NF + l: coef_a[f][h] (G_f^T G_h)(m, l) + tau_f |f| delta_ab.
    template <int NF>
    __device__ T trace(const Tables& tb, int a, int b) const {
        constexpr int F = C::NFACES;
        constexpr int NO = C::NORIENT;
        const int f = a / NF, m = a - f * NF;
        const int h = b / NF, l = b - h * NF;
        const T* gtg = ptr<T>(tb.trace_products) +
                       (((f * NO + orient[f]) * F + h) * NO + orient[h]) * NF * NF;
        T v = coef_a[f][h] * gtg[m * NF + l];
        if (a == b) v += coef_face[f];
        return v;
    }
};

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

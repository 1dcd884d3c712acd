// What the block-design kernels share (kernels/element_kernels.cu: the block condensation,
// recovery and postprocessing; kernels/condense_bordered.cu: the bordered condensation): packed
// triangle indexing, the shared-memory check of a launch, and the per-element scalars of the
// condensation. Every block kernel is called by all threads of its block.
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
};

// The BLOCK design's cooperative dense kernel: the right-looking Cholesky factorisation of a
// packed column-major lower triangle in shared memory (block_common.cuh: the packed indexing),
// called by all threads of the block with the same arguments (its barriers must be reached by
// all). Used by the block condensation (condense.cu) and postprocessing (postprocess.cu).
#pragma once
#include "block_common.cuh"

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

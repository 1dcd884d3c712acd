// Coefficients that vary inside cells (hdg_core::coefficients): kappa^-1 and c given at the
// points of the coefficient rule, so the element matrices are weighted mass matrices formed by
// quadrature (hdg-backend-cpu's weighted.rs, whose documentation has the formulas):
//
//   M_k = det sum_q w_q kappa^-1(x_q) (x) phi(x_q) phi(x_q)^T   (n x n, or dn x dn for a tensor)
//   X = L^-1 [B | C]  (M_k = L L^T; B = D^T stacked over r, C = G_r stacked over r)
//   S = M_c + sum_f tau_f |f| E^_f + X_B^T X_B,  P = X_B^T X_C + tau G,  A = X_C^T X_C + tau H
//
// and then the condensation of condense.cu (K_e = A - W^T W, b_e, Z, u0 with W = L_S^-1 [P | F]).
//
// One design, BLOCK (one thread block per element, a persistent grid): every matrix in a global
// scratch of weighted_scratch_values(...) values per block (src/element_instances.rs; the launch
// passes the size it allocated and each kernel checks its own need, else info[0] = -1); entries
// formed in parallel, right-looking Cholesky with three barriers per column, triangular solves one
// thread per right-hand-side column. Written for clarity first: the constant-coefficient kernels
// are the tuned path, this one is measured against them in coefficient-bench (BENCHMARKS.md,
// section 'Meshes, coefficients and boundary costs').
//
// Kernels: condense_weighted_{f32,f64}_{tri,tet}{K} (the condensation) and
// weighted_flux_{f32,f64}_{tri,tet}{K} (after recover.cu: Q = M_k^-1 (B U - C Lambda) over
// the recovery's Q, and the L2 projection of kappa^-1 q_h that the postprocessing reads in
// place of q_h, with kappa = 1).
#include "block_common.cuh"

// Device addresses of the coefficients at points, passed by value.
struct Weighted {
    u64 basis;          // [q][i], the order-k basis at the coefficient points
    u64 weights;        // [q], the rule's weights
    u64 inverse_kappa;  // [cell][q][component]
    u64 reaction;       // [cell][q]
    int points;         // per cell
    int components;     // of kappa^-1 per point: 1 or DIM * DIM
    u64 scratch_values; // per block, as allocated
};

// Values of global scratch the condensation uses per block (src/element_instances.rs:
// weighted_scratch_values, which the launch allocates, covers both kernels): the flux mass
// matrix (dn)^2, the panel dn (n + nl), S n^2, W = [P | F] n (nl + 1), A nl^2.
template <int D, int N, int NL>
__host__ __device__ constexpr u64 condense_weighted_values() {
    return (u64)(D * N) * (D * N) + (u64)(D * N) * (N + NL) + (u64)N * N + (u64)N * (NL + 1) +
           (u64)NL * NL;
}

// ... and the flux recovery: mass matrix, panel, right-hand side dn, values
// max(n + nl, dim points).
template <int D, int N, int NL>
__device__ u64 weighted_flux_values(int points) {
    const u64 values = N + NL > D * points ? N + NL : D * points;
    return (u64)(D * N) * (D * N) + (u64)(D * N) * (N + NL) + D * N + values;
}

// Right-looking Cholesky of the m x m row-major matrix a (leading dimension m) by the whole
// block: L in the lower triangle. Returns 0, or the failing pivot + 1 (its value in *fail).
template <typename T>
__device__ int block_cholesky_global(int m, T* a, T* fail, int* shared_bad) {
    const int tid = threadIdx.x, nt = blockDim.x;
    for (int j = 0; j < m; ++j) {
        if (tid == 0) {
            const T d = a[(u64)j * m + j];
            if (!(d > T(0))) {
                *shared_bad = j + 1;
                *fail = d;
            } else {
                a[(u64)j * m + j] = root(d);
            }
        }
        __syncthreads();
        if (*shared_bad) return *shared_bad;
        const T inv = T(1) / a[(u64)j * m + j];
        for (int i = j + 1 + tid; i < m; i += nt) a[(u64)i * m + j] *= inv;
        __syncthreads();
        const int rest = m - j - 1;
        for (int t = tid; t < rest * rest; t += nt) {
            const int i = j + 1 + t / rest, k = j + 1 + t % rest;
            if (k <= i)
                a[(u64)i * m + k] = fmad(-a[(u64)i * m + j], a[(u64)k * m + j], a[(u64)i * m + k]);
        }
        __syncthreads();
    }
    return 0;
}

// Column `col` of the rows x cols row-major panel b (leading dimension ld) := L^-1 column, L
// the m x m factor (rows a multiple of m: the same L for each block of m rows). One thread per
// column: the rows of L are read by every thread at once (broadcasts), the column's entries
// by consecutive threads at consecutive addresses. (A right-looking solve, parallel over the
// trailing entries with a barrier per row, measured slower.)
template <typename T>
__device__ void forward_column(int m, const T* l, int rows, T* b, int ld, int col) {
    for (int r0 = 0; r0 < rows; r0 += m) {
        for (int i = 0; i < m; ++i) {
            T s = b[(u64)(r0 + i) * ld + col];
            for (int k = 0; k < i; ++k)
                s = fmad(-l[(u64)i * m + k], b[(u64)(r0 + k) * ld + col], s);
            b[(u64)(r0 + i) * ld + col] = s / l[(u64)i * m + i];
        }
    }
}

// The same with L^-T (backward).
template <typename T>
__device__ void backward_column(int m, const T* l, int rows, T* b, int ld, int col) {
    for (int r0 = 0; r0 < rows; r0 += m) {
        for (int i = m - 1; i >= 0; --i) {
            T s = b[(u64)(r0 + i) * ld + col];
            for (int k = i + 1; k < m; ++k)
                s = fmad(-l[(u64)k * m + i], b[(u64)(r0 + k) * ld + col], s);
            b[(u64)(r0 + i) * ld + col] = s / l[(u64)i * m + i];
        }
    }
}

// The flux mass matrix M_k of element e into `mass` (m x m, m = N or D N) and the panel
// [B | C] (D N x (N + NL)) into `panel`; returns m. All threads; ends with a barrier.
template <class C, typename T, int N, int NF>
__device__ int form_flux_mass_and_panel(const Tables& tb, const Weighted& wt, u64 e,
                                        const Geometry<C, T>& g, const int* o, T* mass,
                                        T* panel) {
    constexpr int D = C::DIM, F = C::NFACES, NO = C::NORIENT, NL = F * NF, LDX = N + NL;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int comps = wt.components;
    const int m = comps == 1 ? N : D * N;
    const T* phi = ptr<T>(wt.basis);
    const T* w = ptr<T>(wt.weights);
    const T* kinv = ptr<T>(wt.inverse_kappa) + e * (u64)wt.points * comps;
    // Entry (i, j) of every (r, s) block in one pass over the points (the basis values read
    // once for all D^2 components of a tensor).
    for (int t = tid; t < N * N; t += nt) {
        const int i = t / N, j = t - i * N;
        T acc[D * D];
        for (int v = 0; v < comps; ++v) acc[v] = T(0);
        for (int q = 0; q < wt.points; ++q) {
            const T wpp = w[q] * phi[q * N + i] * phi[q * N + j];
            for (int v = 0; v < comps; ++v) acc[v] = fmad(wpp, kinv[q * comps + v], acc[v]);
        }
        if (comps == 1) {
            mass[t] = g.det * acc[0];
        } else {
            for (int r = 0; r < D; ++r)
                for (int s = 0; s < D; ++s)
                    mass[(u64)(r * N + i) * m + s * N + j] = g.det * acc[r * D + s];
        }
    }
    const T* deriv = ptr<T>(tb.derivative);
    const T* ftrace = ptr<T>(tb.face_trace);
    for (int t = tid; t < D * N * LDX; t += nt) {
        const int row = t / LDX, col = t - row * LDX;
        const int r = row / N, i = row - r * N;
        T v;
        if (col < N) {
            v = T(0);  // det sum_s (J^-1)_sr D^_s[col][i]
            for (int s = 0; s < D; ++s) v = fmad(g.jinv[s * D + r], deriv[(s * N + col) * N + i], v);
            v *= g.det;
        } else {
            const int f = (col - N) / NF, mm = col - N - f * NF;
            v = g.nrm[f * D + r] * g.fj[f] * ftrace[((f * NO + o[f]) * N + i) * NF + mm];
        }
        panel[t] = v;
    }
    __syncthreads();
    return m;
}

// Thread 0: the element's geometry and face orientations into shared memory and the failure
// flag cleared (the caller's barrier publishes them).
template <class C, typename T>
__device__ void load_element(const Cells& c, u64 e, Geometry<C, T>& g, int* o, int* bad) {
    if (threadIdx.x == 0) {
        const u64 nc = c.n_cells;
        g.load(ptr<T>(c.geometry), nc, e);
        for (int f = 0; f < C::NFACES; ++f) o[f] = ptr<unsigned char>(c.orientations)[f * nc + e];
        *bad = 0;
    }
}

template <class C, typename T, int N, int NF>
__device__ void condense_weighted(const Tables& tb, const Cells& c, const Weighted wt,
                                  T* __restrict__ k_out, T* __restrict__ b_out,
                                  T* __restrict__ z_out, T* __restrict__ u0_out,
                                  int* __restrict__ info, T* __restrict__ pivot_value,
                                  T* __restrict__ scratch) {
    constexpr int D = C::DIM, F = C::NFACES, NO = C::NORIENT, NL = F * NF;
    constexpr int LDX = N + NL, LDW = NL + 1;
    if (wt.scratch_values < condense_weighted_values<D, N, NL>()) {
        if (threadIdx.x == 0 && blockIdx.x == 0) info[0] = -1;
        return;
    }
    T* base = scratch + (u64)blockIdx.x * wt.scratch_values;
    T* mass = base;
    T* panel = mass + (u64)(D * N) * (D * N);
    T* s_mat = panel + (u64)(D * N) * LDX;
    T* w_mat = s_mat + N * N;
    T* a_mat = w_mat + N * LDW;
    __shared__ Geometry<C, T> g;
    __shared__ int o[F];
    __shared__ T tau_f[F];
    __shared__ int bad;
    __shared__ T fail;
    const int tid = threadIdx.x, nt = blockDim.x;
    const u64 nc = c.n_cells;
    const T* fk = ptr<T>(c.load);
    const T* phi = ptr<T>(wt.basis);
    const T* w = ptr<T>(wt.weights);
    const T* fmass = ptr<T>(tb.face_mass);
    const T* ftrace = ptr<T>(tb.face_trace);

    for (u64 e = blockIdx.x; e < nc; e += gridDim.x) {
        load_element<C, T>(c, e, g, o, &bad);
        if (tid == 0)
            for (int f = 0; f < F; ++f) tau_f[f] = ptr<T>(c.tau)[f * nc + e] * g.fj[f];
        __syncthreads();
        const int m = form_flux_mass_and_panel<C, T, N, NF>(tb, wt, e, g, o, mass, panel);
        // S starts as M_c + sum_f tau_f |f| E^_f; F into the last column of W.
        const T* creac = ptr<T>(wt.reaction) + e * (u64)wt.points;
        for (int t = tid; t < N * N; t += nt) {
            const int i = t / N, j = t - i * N;
            T acc = T(0);
            for (int q = 0; q < wt.points; ++q)
                acc = fmad(w[q] * creac[q], phi[q * N + i] * phi[q * N + j], acc);
            acc *= g.det;
            for (int f = 0; f < F; ++f) acc = fmad(tau_f[f], fmass[f * N * N + t], acc);
            s_mat[t] = acc;
        }
        for (int i = tid; i < N; i += nt) w_mat[i * LDW + NL] = fk[(u64)i * nc + e];

        int failed = block_cholesky_global<T>(m, mass, &fail, &bad);
        if (failed) {
            report_failure(e, N + failed, fail, info, pivot_value);
            continue;
        }
        for (int col = tid; col < LDX; col += nt) forward_column<T>(m, mass, D * N, panel, LDX, col);
        __syncthreads();
        // X^T X into S, P (the first NL columns of W) and A, with the tau terms.
        for (int t = tid; t < LDX * LDX; t += nt) {
            const int a = t / LDX, b = t - a * LDX;
            if (b < a || (a >= N && b < N)) continue;
            T acc = T(0);
            for (int row = 0; row < D * N; ++row)
                acc = fmad(panel[(u64)row * LDX + a], panel[(u64)row * LDX + b], acc);
            if (b < N) {
                s_mat[a * N + b] += acc;
                if (a != b) s_mat[b * N + a] += acc;
            } else if (a < N) {
                const int f = (b - N) / NF, mm = b - N - f * NF;
                w_mat[a * LDW + b - N] =
                    fmad(tau_f[f], ftrace[((f * NO + o[f]) * N + a) * NF + mm], acc);
            } else {
                const int fa = (a - N) / NF;
                const T v = a == b ? acc + tau_f[fa] : acc;
                a_mat[(a - N) * NL + b - N] = v;
                a_mat[(b - N) * NL + a - N] = v;
            }
        }
        __syncthreads();
        failed = block_cholesky_global<T>(N, s_mat, &fail, &bad);
        if (failed) {
            report_failure(e, failed, fail, info, pivot_value);
            continue;
        }
        for (int col = tid; col < LDW; col += nt) forward_column<T>(N, s_mat, N, w_mat, LDW, col);
        __syncthreads();
        // K_e = A - W^T W (both triangles from the upper one) and b_e = W^T w0.
        for (int t = tid; t < NL * LDW; t += nt) {
            const int a = t / LDW, b = t - a * LDW;
            if (b < a) continue;
            T acc = T(0);
            for (int k = 0; k < N; ++k) acc = fmad(w_mat[k * LDW + a], w_mat[k * LDW + b], acc);
            if (b == NL) {
                b_out[condensed_at<T>(NL, a, e)] = acc;
            } else {
                const T v = a_mat[a * NL + b] - acc;
                k_out[condensed_at<T>(NL * NL, a * NL + b, e)] = v;
                if (a != b) k_out[condensed_at<T>(NL * NL, b * NL + a, e)] = v;
            }
        }
        __syncthreads();
        // [Z | u0] = L^-T W, each thread its column, written out.
        for (int col = tid; col < LDW; col += nt) {
            backward_column<T>(N, s_mat, N, w_mat, LDW, col);
            if (col < NL) {
                for (int i = 0; i < N; ++i)
                    z_out[condensed_at<T>(N * NL, i * NL + col, e)] = w_mat[i * LDW + col];
            } else {
                for (int i = 0; i < N; ++i) u0_out[condensed_at<T>(N, i, e)] = w_mat[i * LDW + col];
            }
        }
        if (tid == 0) info[e] = 0;
        __syncthreads();
    }
}

// After recover.cu: Q = M_k^-1 (B U - C Lambda) into q (over the recovery's Q, which assumed
// kappa constant per cell), and the L2 projection of kappa^-1 q_h into `projected` (same
// layout). A pivot that fails here (it did not in the condensation, on the same matrix)
// leaves NaN.
template <class C, typename T, int N, int NF>
__device__ void weighted_flux(const Tables& tb, const Cells& c, const Weighted wt,
                              const unsigned* __restrict__ free_index, const T* __restrict__ trace,
                              const T* __restrict__ dirichlet, const T* __restrict__ u,
                              T* __restrict__ q, T* __restrict__ projected, int* __restrict__ info,
                              T* __restrict__ scratch) {
    constexpr int D = C::DIM, F = C::NFACES, NL = F * NF, LDX = N + NL;
    if (wt.scratch_values < weighted_flux_values<D, N, NL>(wt.points)) {
        if (threadIdx.x == 0 && blockIdx.x == 0) info[0] = -1;
        return;
    }
    T* base = scratch + (u64)blockIdx.x * wt.scratch_values;
    T* mass = base;
    T* panel = mass + (u64)(D * N) * (D * N);
    T* y = panel + (u64)(D * N) * LDX;  // D N values: the right-hand side, then Q
    T* values = y + D * N;              // [U | Lambda], then q_h at the points (D x points)
    __shared__ Geometry<C, T> g;
    __shared__ int o[F];
    __shared__ int bad;
    __shared__ T fail;
    const int tid = threadIdx.x, nt = blockDim.x;
    const u64 nc = c.n_cells;
    const unsigned* faces = ptr<unsigned>(c.faces);
    const T* phi = ptr<T>(wt.basis);
    const T* w = ptr<T>(wt.weights);
    for (u64 e = blockIdx.x; e < nc; e += gridDim.x) {
        load_element<C, T>(c, e, g, o, &bad);
        for (int t = tid; t < LDX; t += nt) {
            if (t < N) {
                values[t] = u[(u64)t * nc + e];
            } else {
                const int f = (t - N) / NF, mm = t - N - f * NF;
                const unsigned face = faces[f * nc + e];
                const unsigned free = free_index[face];
                values[t] = free == NONE_INDEX ? dirichlet[(u64)face * NF + mm]
                                               : trace[(u64)free * NF + mm];
            }
        }
        __syncthreads();
        const int m = form_flux_mass_and_panel<C, T, N, NF>(tb, wt, e, g, o, mass, panel);
        for (int row = tid; row < D * N; row += nt) {
            T acc = T(0);
            for (int col = 0; col < N; ++col) acc = fmad(panel[(u64)row * LDX + col], values[col], acc);
            for (int col = N; col < LDX; ++col)
                acc = fmad(-panel[(u64)row * LDX + col], values[col], acc);
            y[row] = acc;
        }
        const int failed = block_cholesky_global<T>(m, mass, &fail, &bad);
        // One solve per block of m rows (D for a scalar kappa, 1 for a tensor).
        for (int b = tid; b < D * N / m; b += nt) {
            if (failed) {
                for (int i = 0; i < m; ++i) y[b * m + i] = T(nan(""));
            } else {
                forward_column<T>(m, mass, m, y + b * m, 1, 0);
                backward_column<T>(m, mass, m, y + b * m, 1, 0);
            }
        }
        __syncthreads();
        for (int t = tid; t < D * N; t += nt) q[(u64)t * nc + e] = y[t];
        // q_h at the points, then sum_q w_q phi_i (kappa^-1 q_h)(x_q).
        const int comps = wt.components;
        const T* kinv = ptr<T>(wt.inverse_kappa) + e * (u64)wt.points * comps;
        for (int t = tid; t < D * wt.points; t += nt) {
            const int r = t / wt.points, qp = t - r * wt.points;
            T acc = T(0);
            for (int j = 0; j < N; ++j) acc = fmad(phi[qp * N + j], y[r * N + j], acc);
            values[t] = acc;
        }
        __syncthreads();
        for (int t = tid; t < D * N; t += nt) {
            const int r = t / N, i = t - r * N;
            T acc = T(0);
            for (int qp = 0; qp < wt.points; ++qp) {
                T kq;
                if (comps == 1) {
                    kq = kinv[qp] * values[r * wt.points + qp];
                } else {
                    kq = T(0);
                    for (int s = 0; s < D; ++s)
                        kq = fmad(kinv[qp * comps + r * D + s], values[s * wt.points + qp], kq);
                }
                acc = fmad(w[qp] * kq, phi[qp * N + i], acc);
            }
            projected[(u64)t * nc + e] = acc;
        }
        __syncthreads();
    }
}

#ifndef HDG_EMULATION
#include "element_instances.cuh"

#define WEIGHTED_KERNELS_FOR(T, CELL, NAME, K)                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        condense_weighted_##T##_##NAME##K(Tables tb, Cells c, Weighted wt, T* k_out, T* b_out, \
                                          T* z_out, T* u0_out, int* info, T* pv, T* scratch) {  \
        condense_weighted<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, wt, k_out, b_out, z_out,     \
                                                            u0_out, info, pv, scratch);         \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) weighted_flux_##T##_##NAME##K(            \
        Tables tb, Cells c, Weighted wt, const unsigned* free_index, const T* trace,           \
        const T* dirichlet, const T* u, T* q, T* projected, int* info, T* scratch) {            \
        weighted_flux<CELL, T, CELL::n(K), CELL::nf(K)>(tb, c, wt, free_index, trace,           \
                                                        dirichlet, u, q, projected, info,       \
                                                        scratch);                               \
    }

#define WEIGHTED_KERNELS(T)                                        \
    FOR_EACH_ELEMENT_ORDER(WEIGHTED_KERNELS_FOR, T, Tri, tri)      \
    FOR_EACH_ELEMENT_ORDER(WEIGHTED_KERNELS_FOR, T, Tet, tet)

WEIGHTED_KERNELS(f32)
WEIGHTED_KERNELS(f64)
#endif  // HDG_EMULATION

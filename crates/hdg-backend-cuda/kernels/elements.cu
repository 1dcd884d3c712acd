// Element stages of the CUDA backend: condensation, assembly into the device DBF matrix,
// recovery and postprocessing (triangles, orders k = 1..=6).
//
// Every kernel mirrors its CPU counterpart in hdg-backend-cpu operation for operation, in the
// same order (condense.rs: condense_element; dbf.rs: assemble; local.rs: recover_element,
// postprocess_element; dense.rs: the Cholesky and triangular solves). Products and sums go
// through the round-to-nearest intrinsics (__dmul_rn, __dadd_rn, ...), which nvcc never fuses
// into an FMA; divisions and square roots are IEEE (no fast math). With the same inputs the
// results are therefore the CPU backend's to the bit (the CPU code never contracts either).
//
// One thread per element (per block row for the assembly), scratch in local memory: the first,
// simple version. Kernel names: NAME_{f32,f64}_k{K} (assembly too: dbf_assemble_{f32,f64}_k{K}, n_f = K + 1).
//
// Layouts (element-fastest: field f of cell e at [f * n_cells + e], so that a warp of
// consecutive cells reads and writes coalesced):
//   geometry     [g * n_cells + e], g < 14: det, J^-1 (4, [s*2 + r]), face Jacobians (3),
//                normals (6, [f*2 + r]) - GeometryLayout of a triangle
//   orientations [f * n_cells + e] (u8), faces [f * n_cells + e] (global face, u32)
//   kappa, reaction [e]; tau [f * n_cells + e]; load F_K [i * n_cells + e]
//   K_e [(a * NL + b) * n_cells + e]; b_e [a * n_cells + e]; Z [(i * NL + a) * n_cells + e];
//   u0 [i * n_cells + e]; u [i * n_cells + e]; q [(r * N + i) * n_cells + e];
//   u* [j * n_cells + e]; info [e] (0, or the failing pivot + 1), pivot value [e]
// Tables: exactly hdg_core::ElementTables' arrays (row-major), one device buffer each.

typedef unsigned long long u64;
typedef float f32;
typedef double f64;

#define NONE_INDEX 0xffffffffu

// Triangles: dimension, faces, orientations, geometry record offsets.
#define DIM 2
#define NFACES 3
#define NORIENT 2
#define GEO_DET 0
#define GEO_JINV 1
#define GEO_FJ 5
#define GEO_NRM 8

__device__ __forceinline__ f64 mul(f64 a, f64 b) { return __dmul_rn(a, b); }
__device__ __forceinline__ f32 mul(f32 a, f32 b) { return __fmul_rn(a, b); }
__device__ __forceinline__ f64 add(f64 a, f64 b) { return __dadd_rn(a, b); }
__device__ __forceinline__ f32 add(f32 a, f32 b) { return __fadd_rn(a, b); }
__device__ __forceinline__ f64 sub(f64 a, f64 b) { return __dsub_rn(a, b); }
__device__ __forceinline__ f32 sub(f32 a, f32 b) { return __fsub_rn(a, b); }
__device__ __forceinline__ f64 root(f64 a) { return sqrt(a); }
__device__ __forceinline__ f32 root(f32 a) { return sqrtf(a); }

// acc + a * b, never fused.
template <typename T>
__device__ __forceinline__ T madd(T acc, T a, T b) {
    return add(acc, mul(a, b));
}
// acc - a * b, never fused.
template <typename T>
__device__ __forceinline__ T msub(T acc, T a, T b) {
    return sub(acc, mul(a, b));
}

// Device addresses of the element tables (ElementTables' arrays), passed by value.
struct Tables {
    u64 derivative;           // [s][i][j], n x n
    u64 derivative_products;  // [s*d+t][i][j]
    u64 face_mass;            // [f][i][j]
    u64 face_trace;           // [f][o][i][m], n x nf
    u64 derivative_trace;     // [s][f][o][i][m]
    u64 trace_products;       // [f][o][g][p][m][l], nf x nf
    u64 post_stiffness;       // [s*d+t][i][j], n' x n'
    u64 post_derivative;      // [s][l][j], n x n'
};

// Device addresses of the per-cell data (layouts at the top), passed by value.
struct Cells {
    u64 n_cells;
    u64 geometry;
    u64 orientations;
    u64 faces;
    u64 kappa;
    u64 reaction;
    u64 tau;
    u64 load;
};

// Topology planes of the assembly ([side * n_rows + row], [a * n_rows + row]).
struct AssemblyTopology {
    u64 row_cell;    // u32 [side][row]
    u64 row_local;   // u8 [side][row]
    u64 slot_cell;   // u32 [a][row]
    u64 slot_row;    // u8 [a][row]: local face of the row's face in slot_cell
    u64 slot_col;    // u8 [a][row]: local face of the column's face
    u64 neighbours;  // u32 [a][row]
    u64 slot_face;   // u32 [a][row]
};

template <typename T>
__device__ __forceinline__ const T* ptr(u64 address) {
    return reinterpret_cast<const T*>(address);
}

// The cell's geometry record, read from the element-fastest planes.
template <typename T>
struct Geometry {
    T det;
    T jinv[4];
    T fj[3];
    T nrm[6];
    __device__ void load(const T* __restrict__ g, u64 nc, u64 e) {
        det = g[GEO_DET * nc + e];
        for (int v = 0; v < 4; ++v) jinv[v] = g[(GEO_JINV + v) * nc + e];
        for (int v = 0; v < 3; ++v) fj[v] = g[(GEO_FJ + v) * nc + e];
        for (int v = 0; v < 6; ++v) nrm[v] = g[(GEO_NRM + v) * nc + e];
    }
};

// B_st = sum_r (J^-1)_sr (J^-1)_tr (condense::metric).
template <typename T>
__device__ void metric(const T* jinv, T* b) {
    for (int s = 0; s < DIM; ++s)
        for (int t = 0; t < DIM; ++t)
            b[s * DIM + t] = add(mul(jinv[s * DIM], jinv[t * DIM]),
                                 mul(jinv[s * DIM + 1], jinv[t * DIM + 1]));
}

// dense::cholesky; returns -1 on success, else the failing pivot (its value in *value).
template <typename T, int N>
__device__ int cholesky(T* a, T* value) {
#pragma unroll 1
    for (int j = 0; j < N; ++j) {
        T d = a[j * N + j];
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
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lik, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
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
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lki, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
        for (int c = 0; c < M; ++c) b[i * M + c] = mul(b[i * M + c], inv);
    }
}

// ---------------------------------------------------------------------------------------------
// Condensation (condense_element).

template <typename T, int N, int NF>
__device__ void condense(const Tables& tb, const Cells& c, T* __restrict__ k_out,
                         T* __restrict__ b_out, T* __restrict__ z_out, T* __restrict__ u0_out,
                         int* __restrict__ info, T* __restrict__ pivot_value) {
    constexpr int NL = NFACES * NF;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;

    Geometry<T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const unsigned char* orient = ptr<unsigned char>(c.orientations);
    int o[NFACES];
    T tau[NFACES];
    for (int f = 0; f < NFACES; ++f) {
        o[f] = orient[f * nc + e];
        tau[f] = ptr<T>(c.tau)[f * nc + e];
    }
    const T kappa = ptr<T>(c.kappa)[e];
    const T reaction = ptr<T>(c.reaction)[e];
    T b[DIM * DIM];
    metric(g.jinv, b);

    T s_mat[N * N];
    T p[N * NL];
    T a[NL * NL];
    T load[N];

    // S
    for (int v = 0; v < N * N; ++v) s_mat[v] = T(0);
    const T* dprod = ptr<T>(tb.derivative_products);
    for (int sd = 0; sd < DIM; ++sd)
        for (int td = 0; td < DIM; ++td) {
            T coef = mul(mul(kappa, g.det), b[sd * DIM + td]);
            const T* dp = dprod + (sd * DIM + td) * N * N;
#pragma unroll 4
            for (int v = 0; v < N * N; ++v) s_mat[v] = madd(s_mat[v], coef, dp[v]);
        }
    const T* fmass = ptr<T>(tb.face_mass);
    for (int f = 0; f < NFACES; ++f) {
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
    for (int f = 0; f < NFACES; ++f) {
        T coef_s[DIM];
        for (int sd = 0; sd < DIM; ++sd) {
            T jn = add(mul(g.jinv[sd * DIM], g.nrm[f * DIM]),
                       mul(g.jinv[sd * DIM + 1], g.nrm[f * DIM + 1]));
            coef_s[sd] = mul(mul(kappa, g.fj[f]), jn);
        }
        T tau_f = mul(tau[f], g.fj[f]);
        const T* gt = ftrace + (f * NORIENT + o[f]) * N * NF;
#pragma unroll 1
        for (int i = 0; i < N; ++i)
            for (int m = 0; m < NF; ++m) {
                T v = mul(tau_f, gt[i * NF + m]);
                for (int sd = 0; sd < DIM; ++sd) {
                    const T* dt = dtrace + ((sd * NFACES + f) * NORIENT + o[f]) * N * NF;
                    v = madd(v, coef_s[sd], dt[i * NF + m]);
                }
                p[i * NL + f * NF + m] = v;
            }
    }

    // A
    const T* tprod = ptr<T>(tb.trace_products);
    for (int f = 0; f < NFACES; ++f) {
        for (int gf = 0; gf < NFACES; ++gf) {
            T nn = add(mul(g.nrm[f * DIM], g.nrm[gf * DIM]),
                       mul(g.nrm[f * DIM + 1], g.nrm[gf * DIM + 1]));
            T coef = mul(mul(mul(kappa / g.det, nn), g.fj[f]), g.fj[gf]);
            const T* gtg =
                tprod + (((f * NORIENT + o[f]) * NFACES + gf) * NORIENT + o[gf]) * NF * NF;
            for (int m = 0; m < NF; ++m)
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
            for (int j = i; j < NL; ++j) a[i * NL + j] = msub(a[i * NL + j], wi, p[k * NL + j]);
        }
    for (int i = 0; i < NL; ++i)
        for (int j = 0; j < i; ++j) a[i * NL + j] = a[j * NL + i];
    forward<T, N, 1>(s_mat, load);  // w0 = L^-1 F
    // b_e = W^T w0
    for (int j = 0; j < NL; ++j) {
        T y = T(0);
        for (int k = 0; k < N; ++k) y = madd(y, p[k * NL + j], load[k]);
        b_out[j * nc + e] = y;
    }
    backward<T, N, NL>(s_mat, p);  // Z = L^-T W
    backward<T, N, 1>(s_mat, load);  // u0 = L^-T w0

    for (int v = 0; v < NL * NL; ++v) k_out[v * nc + e] = a[v];
    for (int v = 0; v < N * NL; ++v) z_out[v * nc + e] = p[v];
    for (int i = 0; i < N; ++i) u0_out[i * nc + e] = load[i];
}

// ---------------------------------------------------------------------------------------------
// Recovery (recover_element): U = u0 + Z Lambda, Q_r.

template <typename T, int N, int NF>
__device__ void recover(const Tables& tb, const Cells& c, const unsigned* __restrict__ free_index,
                        const T* __restrict__ trace, const T* __restrict__ dirichlet,
                        const T* __restrict__ z, const T* __restrict__ u0, T* __restrict__ u_out,
                        T* __restrict__ q_out) {
    constexpr int NL = NFACES * NF;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;
    Geometry<T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const unsigned char* orient = ptr<unsigned char>(c.orientations);
    const unsigned* faces = ptr<unsigned>(c.faces);
    const T kappa = ptr<T>(c.kappa)[e];

    T lambda[NL];
    int o[NFACES];
    for (int f = 0; f < NFACES; ++f) {
        o[f] = orient[f * nc + e];
        const u64 face = faces[f * nc + e];
        const unsigned free = free_index[face];
        const T* src = free == NONE_INDEX ? dirichlet + face * NF : trace + (u64)free * NF;
        for (int m = 0; m < NF; ++m) lambda[f * NF + m] = src[m];
    }
    T u[N];
#pragma unroll 1
    for (int i = 0; i < N; ++i) {
        T s = T(0);
        for (int j = 0; j < NL; ++j) s = madd(s, z[(u64)(i * NL + j) * nc + e], lambda[j]);
        u[i] = add(u0[i * nc + e], s);
        u_out[i * nc + e] = u[i];
    }
    const T scale = kappa / g.det;
    const T* deriv = ptr<T>(tb.derivative);
    const T* ftrace = ptr<T>(tb.face_trace);
    for (int r = 0; r < DIM; ++r) {
        T qr[N];
        for (int j = 0; j < N; ++j) qr[j] = T(0);
        for (int s = 0; s < DIM; ++s) {
            T coef = mul(g.det, g.jinv[s * DIM + r]);
            const T* dmat = deriv + s * N * N;
#pragma unroll 1
            for (int i = 0; i < N; ++i) {
                T ci = mul(coef, u[i]);
                for (int j = 0; j < N; ++j) qr[j] = madd(qr[j], ci, dmat[i * N + j]);
            }
        }
        for (int f = 0; f < NFACES; ++f) {
            T coef = mul(-g.nrm[f * DIM + r], g.fj[f]);
            const T* gt = ftrace + (f * NORIENT + o[f]) * N * NF;
            for (int i = 0; i < N; ++i) {
                T s = T(0);
                for (int m = 0; m < NF; ++m) s = madd(s, gt[i * NF + m], lambda[f * NF + m]);
                qr[i] = madd(qr[i], coef, s);
            }
        }
        for (int j = 0; j < N; ++j) q_out[(u64)(r * N + j) * nc + e] = mul(qr[j], scale);
    }
}

// ---------------------------------------------------------------------------------------------
// Postprocessing (postprocess_element): u* in P_{k+1}, NP = n'.

template <typename T, int N, int NP>
__device__ void postprocess(const Tables& tb, const Cells& c, const T* __restrict__ u,
                            const T* __restrict__ q, T* __restrict__ u_star,
                            int* __restrict__ info, T* __restrict__ pivot_value) {
    constexpr int M = NP - 1;
    const u64 nc = c.n_cells;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nc) return;
    Geometry<T> g;
    g.load(ptr<T>(c.geometry), nc, e);
    const T kappa = ptr<T>(c.kappa)[e];
    T b[DIM * DIM];
    metric(g.jinv, b);

    T a[M * M];
    T rhs[M];
    for (int v = 0; v < M * M; ++v) a[v] = T(0);
    const T* stiff = ptr<T>(tb.post_stiffness);
    for (int s = 0; s < DIM; ++s)
        for (int t = 0; t < DIM; ++t) {
            T coef = mul(g.det, b[s * DIM + t]);
            const T* k = stiff + (s * DIM + t) * NP * NP;
#pragma unroll 1
            for (int i = 0; i < M; ++i)
                for (int j = 0; j < M; ++j)
                    a[i * M + j] = madd(a[i * M + j], coef, k[(i + 1) * NP + j + 1]);
        }
    for (int j = 0; j < M; ++j) rhs[j] = T(0);
    const T* pderiv = ptr<T>(tb.post_derivative);
    for (int r = 0; r < DIM; ++r)
        for (int s = 0; s < DIM; ++s) {
            T coef = mul(-g.det, g.jinv[s * DIM + r]) / kappa;
            const T* dp = pderiv + s * N * NP;
#pragma unroll 1
            for (int l = 0; l < N; ++l) {
                T cl = mul(coef, q[(u64)(r * N + l) * nc + e]);
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
}

// ---------------------------------------------------------------------------------------------
// Assembly (dbf::assemble): one thread per block row, writing the DeviceDbf layout
// values[(a * NF * NF + m * NF + l) * pitch + row], columns[a * pitch + row], rhs[row * NF + m].

template <typename T, int NF>
__device__ void assemble(u64 n_rows, u64 pitch, unsigned slots, u64 n_cells,
                         const AssemblyTopology& t, const T* __restrict__ k,
                         const T* __restrict__ b, const T* __restrict__ dirichlet,
                         T* __restrict__ values, unsigned* __restrict__ columns,
                         T* __restrict__ rhs) {
    constexpr int NL = NFACES * NF;
    constexpr int BSZ = NF * NF;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    // K_e entry (i*NF + m, j*NF + l) of `cell`.
    auto element = [&](u64 cell, int i, int j, int m, int l) {
        return k[(u64)((i * NF + m) * NL + j * NF + l) * n_cells + cell];
    };
    T acc[NF];
    T block[BSZ];
    for (int m = 0; m < NF; ++m) acc[m] = T(0);
    for (int v = 0; v < BSZ; ++v) block[v] = T(0);
    for (int side = 0; side < 2; ++side) {
        const unsigned cell = ptr<unsigned>(t.row_cell)[side * n_rows + row];
        if (cell == NONE_INDEX) continue;
        const int i = ptr<unsigned char>(t.row_local)[side * n_rows + row];
        for (int m = 0; m < NF; ++m) {
            acc[m] = add(acc[m], b[(u64)(i * NF + m) * n_cells + cell]);
            for (int l = 0; l < NF; ++l)
                block[m * NF + l] = add(block[m * NF + l], element(cell, i, i, m, l));
        }
    }
    for (int v = 0; v < BSZ; ++v) values[(u64)v * pitch + row] = block[v];
    columns[row] = (unsigned)row;
    for (unsigned a = 1; a < slots; ++a) {
        const u64 s = (u64)a * n_rows + row;
        const unsigned cell = ptr<unsigned>(t.slot_cell)[s];
        const unsigned nbr = ptr<unsigned>(t.neighbours)[s];
        for (int v = 0; v < BSZ; ++v) block[v] = T(0);
        if (cell != NONE_INDEX) {
            const int i = ptr<unsigned char>(t.slot_row)[s];
            const int j = ptr<unsigned char>(t.slot_col)[s];
            if (nbr == NONE_INDEX) {
                const u64 face = ptr<unsigned>(t.slot_face)[s];
                const T* lambda_d = dirichlet + face * NF;
                for (int m = 0; m < NF; ++m)
                    for (int l = 0; l < NF; ++l)
                        acc[m] = msub(acc[m], element(cell, i, j, m, l), lambda_d[l]);
            } else {
                for (int m = 0; m < NF; ++m)
                    for (int l = 0; l < NF; ++l) block[m * NF + l] = element(cell, i, j, m, l);
            }
        }
        for (int v = 0; v < BSZ; ++v) values[((u64)a * BSZ + v) * pitch + row] = block[v];
        columns[(u64)a * pitch + row] = nbr == NONE_INDEX ? (unsigned)row : nbr;
    }
    for (int m = 0; m < NF; ++m) rhs[row * NF + m] = acc[m];
}

// ---------------------------------------------------------------------------------------------
// Instantiations: k = 1..=6 (n = (k+1)(k+2)/2, nf = k+1, n' = (k+2)(k+3)/2).

#define ELEMENT_KERNELS(T, K)                                                                  \
    extern "C" __global__ void condense_##T##_k##K(Tables tb, Cells c, T* k_out, T* b_out,     \
                                                   T* z_out, T* u0_out, int* info, T* pv) {    \
        condense<T, ((K) + 1) * ((K) + 2) / 2, (K) + 1>(tb, c, k_out, b_out, z_out, u0_out,    \
                                                         info, pv);                           \
    }                                                                                          \
    extern "C" __global__ void recover_##T##_k##K(Tables tb, Cells c, const unsigned* fi,      \
                                                  const T* trace, const T* dir, const T* z,    \
                                                  const T* u0, T* u, T* q) {                   \
        recover<T, ((K) + 1) * ((K) + 2) / 2, (K) + 1>(tb, c, fi, trace, dir, z, u0, u, q);    \
    }                                                                                          \
    extern "C" __global__ void postprocess_##T##_k##K(Tables tb, Cells c, const T* u,          \
                                                      const T* q, T* us, int* info, T* pv) {   \
        postprocess<T, ((K) + 1) * ((K) + 2) / 2, ((K) + 2) * ((K) + 3) / 2>(tb, c, u, q, us,  \
                                                                             info, pv);       \
    }                                                                                          \
    extern "C" __global__ void dbf_assemble_##T##_k##K(                                         \
        u64 n_rows, u64 pitch, unsigned slots, u64 n_cells, AssemblyTopology t, const T* k,    \
        const T* b, const T* dir, T* values, unsigned* columns, T* rhs) {                      \
        assemble<T, (K) + 1>(n_rows, pitch, slots, n_cells, t, k, b, dir, values, columns,     \
                             rhs);                                                             \
    }

#define ALL_ORDERS(T)                                                                          \
    ELEMENT_KERNELS(T, 1)                                                                      \
    ELEMENT_KERNELS(T, 2)                                                                      \
    ELEMENT_KERNELS(T, 3)                                                                      \
    ELEMENT_KERNELS(T, 4)                                                                      \
    ELEMENT_KERNELS(T, 5)                                                                      \
    ELEMENT_KERNELS(T, 6)

ALL_ORDERS(f32)
ALL_ORDERS(f64)

// What every element kernel shares (assemble.cu, condense.cu, condense_bordered.cu, recover.cu,
// postprocess.cu, geometry.cu, manufactured.cu): scalar helpers, the device structs of the
// reference tables and the per-cell arrays, and the cell traits.
//
// Cell traits (struct Tri, struct Tet): dimension, faces, face orientations, the offsets of the
// geometry record (hdg_core::geometry::GeometryLayout: det, J^-1 [s*DIM + r], face Jacobians,
// normals [f*DIM + r]) and the sizes n(k), n_f(k). Every kernel is a template on one of them:
//
//   cell  DIM  NFACES  NORIENT  GEO_SIZE              n(k)                  n_f(k)
//   Tri   2    3       2        1 + 4 + 3 + 6 = 14    (k+1)(k+2)/2          k+1
//   Tet   3    4       6        1 + 9 + 4 + 12 = 26   (k+1)(k+2)(k+3)/6     (k+1)(k+2)/2
//
// Layouts of the per-cell arrays (element-fastest: field f of cell e at [f * n_cells + e], so a
// warp of consecutive cells reads and writes coalesced; NL = NFACES * NF):
//   geometry     [g * n_cells + e], g < GEO_SIZE
//   orientations [f * n_cells + e] (u8), faces [f * n_cells + e] (global face, u32)
//   kappa, reaction [e]; tau [f * n_cells + e]; load F_K [i * n_cells + e]
//   u [i * n_cells + e]; q [(r * N + i) * n_cells + e];
//   u* [j * n_cells + e]; info [e] (0: fine, p + 1: pivot p failed, -1: launch configuration
//   error), pivot value [e]
// The condensation's outputs, sector-blocked (condensed_at below): K_e (planes NL * NL, value
// a * NL + b), b_e (NL, a), Z (N * NL, i * NL + a), u0 (N, i).
// Tables: exactly hdg_core::ElementTables' arrays (row-major), one device buffer each, with
// n_orientations = NORIENT: face_trace [f][o][i][m], derivative_trace [s][f][o][i][m],
// trace_products [f][o][g][p][m][l].
#pragma once

// The dynamic shared memory of a block kernel (a host emulation of the kernels, used to check
// their index arithmetic without a GPU, defines it otherwise).
#ifndef HDG_DYNAMIC_SHARED
#define HDG_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

#include "common.cuh"

#include "condensed_layout.cuh"

// Round-to-nearest intrinsics: nvcc never fuses them into an FMA, so a kernel written with
// them performs exactly the CPU backend's operations (the CPU code never contracts either).
__device__ __forceinline__ f64 mul(f64 a, f64 b) { return __dmul_rn(a, b); }
__device__ __forceinline__ f32 mul(f32 a, f32 b) { return __fmul_rn(a, b); }
__device__ __forceinline__ f64 add(f64 a, f64 b) { return __dadd_rn(a, b); }
__device__ __forceinline__ f32 add(f32 a, f32 b) { return __fadd_rn(a, b); }
__device__ __forceinline__ f64 sub(f64 a, f64 b) { return __dsub_rn(a, b); }
__device__ __forceinline__ f32 sub(f32 a, f32 b) { return __fsub_rn(a, b); }
__device__ __forceinline__ f64 root(f64 a) { return sqrt(a); }
__device__ __forceinline__ f32 root(f32 a) { return sqrtf(a); }
// a * b + c with one rounding (the block design: no bitwise agreement with the CPU asked).
__device__ __forceinline__ f64 fmad(f64 a, f64 b, f64 c) { return fma(a, b, c); }
__device__ __forceinline__ f32 fmad(f32 a, f32 b, f32 c) { return fmaf(a, b, c); }

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

// Triangles.
struct Tri {
    static constexpr int DIM = 2;
    static constexpr int NFACES = 3;
    static constexpr int NORIENT = 2;
    static constexpr int GEO_DET = 0;
    static constexpr int GEO_JINV = 1;
    static constexpr int GEO_FJ = GEO_JINV + DIM * DIM;
    static constexpr int GEO_NRM = GEO_FJ + NFACES;
    static constexpr int GEO_SIZE = GEO_NRM + NFACES * DIM;
    __host__ __device__ static constexpr int n(int k) { return (k + 1) * (k + 2) / 2; }
    __host__ __device__ static constexpr int nf(int k) { return k + 1; }
};

// Tetrahedra.
struct Tet {
    static constexpr int DIM = 3;
    static constexpr int NFACES = 4;
    static constexpr int NORIENT = 6;
    static constexpr int GEO_DET = 0;
    static constexpr int GEO_JINV = 1;
    static constexpr int GEO_FJ = GEO_JINV + DIM * DIM;
    static constexpr int GEO_NRM = GEO_FJ + NFACES;
    static constexpr int GEO_SIZE = GEO_NRM + NFACES * DIM;
    __host__ __device__ static constexpr int n(int k) { return (k + 1) * (k + 2) * (k + 3) / 6; }
    __host__ __device__ static constexpr int nf(int k) { return (k + 1) * (k + 2) / 2; }
};

static_assert(Tri::GEO_SIZE == 14, "triangle geometry record");
static_assert(Tet::GEO_SIZE == 26, "tetrahedron geometry record");

// The cell's geometry record, read from the element-fastest planes.
template <class C, typename T>
struct Geometry {
    T det;
    T jinv[C::DIM * C::DIM];
    T fj[C::NFACES];
    T nrm[C::NFACES * C::DIM];
    __device__ void load(const T* __restrict__ g, u64 nc, u64 e) {
        det = g[C::GEO_DET * nc + e];
        for (int v = 0; v < C::DIM * C::DIM; ++v) jinv[v] = g[(C::GEO_JINV + v) * nc + e];
        for (int v = 0; v < C::NFACES; ++v) fj[v] = g[(C::GEO_FJ + v) * nc + e];
        for (int v = 0; v < C::NFACES * C::DIM; ++v) nrm[v] = g[(C::GEO_NRM + v) * nc + e];
    }
};

// sum_r x[r] y[r] over r < DIM, summed left to right as the CPU's iterator sum does
// ((x0 y0 + x1 y1) + x2 y2), never fused.
template <int DIM, typename T>
__device__ __forceinline__ T dot_dim(const T* x, const T* y) {
    T s = mul(x[0], y[0]);
#pragma unroll
    for (int r = 1; r < DIM; ++r) s = add(s, mul(x[r], y[r]));
    return s;
}

// B_st = sum_r (J^-1)_sr (J^-1)_tr (condense::metric).
template <int DIM, typename T>
__device__ void metric(const T* jinv, T* b) {
#pragma unroll
    for (int s = 0; s < DIM; ++s)
#pragma unroll
        for (int t = 0; t < DIM; ++t) b[s * DIM + t] = dot_dim<DIM>(jinv + s * DIM, jinv + t * DIM);
}

// The cell's vertex coordinates ((DIM + 1) x DIM, [i * DIM + r]) from the mesh vertices
// ([v * DIM + r], f64) and the element-fastest cell-vertex table ([i * n_cells + e], u32).
template <int DIM>
__device__ __forceinline__ void cell_coordinates(u64 nc, u64 e, const f64* __restrict__ vertices,
                                                 const unsigned* __restrict__ cell_vertices,
                                                 f64* v) {
#pragma unroll
    for (int i = 0; i <= DIM; ++i) {
        const u64 id = cell_vertices[i * nc + e];
#pragma unroll
        for (int r = 0; r < DIM; ++r) v[i * DIM + r] = vertices[id * DIM + r];
    }
}


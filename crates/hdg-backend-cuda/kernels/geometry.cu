// The setup on the device: the geometry factors of every cell, and the element-fastest
// transposes of per-cell and per-row tables uploaded in their host (row-major) layout.
//
// cell_geometry mirrors hdg_core::geometry::cell_geometry operation for operation (the same
// products, sums and IEEE divisions and square roots, in the same order, never fused: the
// non-fusing helpers of element_common.cuh), in f64, rounded to T at the end as
// T::from_f64_lossy does: the CPU backend's geometry to the bit, which the thread design's
// bitwise tests of K_e rely on. Record layout (GeometryLayout, element-fastest
// [g * n_cells + e]): det, J^-1 [s * DIM + r], face Jacobians |F_f| / |F^|, outward unit normals
// [f * DIM + r].
#include "element_common.cuh"

// det and inverse of the 2x2 or 3x3 matrix a (geometry.rs: invert).
template <int DIM>
__device__ f64 invert(const f64 (&a)[DIM][DIM], f64 (&inv)[DIM][DIM]) {
    if (DIM == 2) {
        const f64 det = sub(mul(a[0][0], a[1][1]), mul(a[0][1], a[1][0]));
        inv[0][0] = a[1][1] / det;
        inv[0][1] = -a[0][1] / det;
        inv[1][0] = -a[1][0] / det;
        inv[1][1] = a[0][0] / det;
        return det;
    }
    const int L = DIM - 1;  // 2: the indices below only exist for DIM = 3
    const f64 det = add(sub(mul(a[0][0], sub(mul(a[1][1], a[L][L]), mul(a[1][L], a[L][1]))),
                            mul(a[0][1], sub(mul(a[1][0], a[L][L]), mul(a[1][L], a[L][0])))),
                        mul(a[0][L], sub(mul(a[1][0], a[L][1]), mul(a[1][1], a[L][0]))));
#pragma unroll
    for (int i = 0; i < DIM; ++i)
#pragma unroll
        for (int j = 0; j < DIM; ++j) {
            // Cofactor transpose: inv[i][j] = C[j][i] / det.
            const int r0 = (j + 1) % DIM, r1 = (j + 2) % DIM;
            const int c0 = (i + 1) % DIM, c1 = (i + 2) % DIM;
            inv[i][j] = sub(mul(a[r0][c0], a[r1][c1]), mul(a[r0][c1], a[r1][c0])) / det;
        }
    return det;
}

template <class C, typename T>
__device__ void cell_geometry(u64 nc, const f64* __restrict__ vertices,
                              const unsigned* __restrict__ cell_vertices, f64 face_measure,
                              T* __restrict__ geometry) {
    constexpr int D = C::DIM;
    const f64 reference_measure = D == 2 ? 2.0 : 4.0 / 3.0;
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < nc;
         e += (u64)gridDim.x * blockDim.x) {
        f64 v[(D + 1) * D];
        cell_coordinates<D>(nc, e, vertices, cell_vertices, v);
        f64 jac[D][D], inv[D][D];
#pragma unroll
        for (int s = 0; s < D; ++s)
#pragma unroll
            for (int r = 0; r < D; ++r) jac[r][s] = mul(0.5, sub(v[(s + 1) * D + r], v[r]));
        const f64 det = invert<D>(jac, inv);
        geometry[C::GEO_DET * nc + e] = (T)det;
#pragma unroll
        for (int s = 0; s < D; ++s)
#pragma unroll
            for (int r = 0; r < D; ++r) geometry[(C::GEO_JINV + s * D + r) * nc + e] = (T)inv[s][r];
        // Barycentric gradients: grad lambda_{s+1} = row s of J^-1 / 2, grad lambda_0 = minus
        // their sum; face f is opposite vertex f.
        f64 grad[D + 1][D];
#pragma unroll
        for (int r = 0; r < D; ++r) grad[0][r] = 0.0;
#pragma unroll
        for (int s = 0; s < D; ++s)
#pragma unroll
            for (int r = 0; r < D; ++r) {
                grad[s + 1][r] = mul(0.5, inv[s][r]);
                grad[0][r] = sub(grad[0][r], mul(0.5, inv[s][r]));
            }
        const f64 volume = mul(det, reference_measure);
#pragma unroll
        for (int f = 0; f < C::NFACES; ++f) {
            f64 sq = mul(grad[f][0], grad[f][0]);
#pragma unroll
            for (int r = 1; r < D; ++r) sq = add(sq, mul(grad[f][r], grad[f][r]));
            const f64 norm = sqrt(sq);
            const f64 area = mul(mul((f64)D, volume), norm);
            geometry[(C::GEO_FJ + f) * nc + e] = (T)(area / face_measure);
#pragma unroll
            for (int r = 0; r < D; ++r)
                geometry[(C::GEO_NRM + f * D + r) * nc + e] = (T)(-grad[f][r] / norm);
        }
    }
}

// dst[j * n + e] = src[e * per + first + j * step] for e < n, j < count: planes of a row-major
// table (per entries per row), one plane per selected column.
template <typename T>
__device__ void to_element_fastest(u64 n, unsigned per, unsigned first, unsigned step,
                                   unsigned count, const T* __restrict__ src,
                                   T* __restrict__ dst) {
    const u64 total = n * count;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 j = i / n, e = i - j * n;
        dst[i] = src[e * per + first + j * step];
    }
}

#define GEOMETRY(CELL, D, T)                                                                  \
    extern "C" __global__ void cell_geometry_d##D##_##T(u64 nc, const f64* vertices,          \
                                                        const unsigned* cell_vertices,        \
                                                        f64 face_measure, T* geometry) {      \
        cell_geometry<CELL, T>(nc, vertices, cell_vertices, face_measure, geometry);          \
    }
GEOMETRY(Tri, 2, f32)
GEOMETRY(Tri, 2, f64)
GEOMETRY(Tet, 3, f32)
GEOMETRY(Tet, 3, f64)

#define TRANSPOSE(T, NAME)                                                                    \
    extern "C" __global__ void to_element_fastest_##NAME(u64 n, unsigned per, unsigned first, \
                                                         unsigned step, unsigned count,       \
                                                         const T* src, T* dst) {              \
        to_element_fastest<T>(n, per, first, step, count, src, dst);                          \
    }
TRANSPOSE(unsigned char, u8)
TRANSPOSE(unsigned, u32)
TRANSPOSE(f32, f32)
TRANSPOSE(f64, f64)

// The assembly's slot planes of every free row ([a * n_rows + row]), as
// hdg_core::TraceTopology::with_dirichlet lays them out: slot 0 is the row's own face, then
// each side's cell gives its other faces in local order (slots 1.. for side 0, fpc.. for side
// 1); padding (a missing second cell) is NONE_INDEX with local faces 0. Read from the row
// planes (row_cell, row_local: [side * n_rows + row]), the cells' global faces
// ([j * n_cells + c]) and the free index of every face: a few bytes a row cross the bus
// instead of the five slot planes.
extern "C" __global__ void topology_slots(u64 n_rows, u64 n_cells, unsigned fpc,
                                          const unsigned* __restrict__ row_cell,
                                          const unsigned char* __restrict__ row_local,
                                          const unsigned* __restrict__ cell_faces,
                                          const unsigned* __restrict__ free_index,
                                          unsigned* __restrict__ slot_cell,
                                          unsigned char* __restrict__ slot_row,
                                          unsigned char* __restrict__ slot_col,
                                          unsigned* __restrict__ neighbours,
                                          unsigned* __restrict__ slot_face) {
    const unsigned slots = 1 + 2 * (fpc - 1);
    for (u64 row = blockIdx.x * (u64)blockDim.x + threadIdx.x; row < n_rows;
         row += (u64)gridDim.x * blockDim.x) {
        for (unsigned a = 0; a < slots; ++a) {
            const u64 at = a * n_rows + row;
            slot_cell[at] = NONE_INDEX;
            slot_row[at] = 0;
            slot_col[at] = 0;
            neighbours[at] = NONE_INDEX;
            slot_face[at] = NONE_INDEX;
        }
        neighbours[row] = (unsigned)row;
        slot_face[row] = cell_faces[(u64)row_local[row] * n_cells + row_cell[row]];
        for (unsigned side = 0; side < 2; ++side) {
            const unsigned cell = row_cell[side * n_rows + row];
            if (cell == NONE_INDEX) continue;
            const unsigned char local = row_local[side * n_rows + row];
            unsigned a = 1 + side * (fpc - 1);
            for (unsigned j = 0; j < fpc; ++j) {
                if (j == local) continue;
                const unsigned other = cell_faces[(u64)j * n_cells + cell];
                const u64 at = a * n_rows + row;
                neighbours[at] = free_index[other];
                slot_face[at] = other;
                slot_cell[at] = cell;
                slot_row[at] = local;
                slot_col[at] = (unsigned char)j;
                ++a;
            }
        }
    }
}

// out[faces[i] * nf + m] = values[i * nf + m] for the listed faces, the rest of out untouched:
// the Dirichlet data of the boundary faces into the per-face table that assembly and recovery
// read (the table is mostly zeros: only the listed faces cross the bus).
template <typename T>
__device__ void scatter_faces(u64 count, unsigned nf, const unsigned* __restrict__ faces,
                              const T* __restrict__ values, T* __restrict__ out) {
    const u64 total = count * nf;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < total;
         i += (u64)gridDim.x * blockDim.x) {
        const u64 f = i / nf, m = i - f * nf;
        out[(u64)faces[f] * nf + m] = values[i];
    }
}

#define SCATTER_FACES(T)                                                                      \
    extern "C" __global__ void scatter_faces_##T(u64 count, unsigned nf,                      \
                                                 const unsigned* faces, const T* values,      \
                                                 T* out) {                                    \
        scatter_faces<T>(count, nf, faces, values, out);                                      \
    }
SCATTER_FACES(f32)
SCATTER_FACES(f64)

// The matrix-free trace operator of the CUDA backend (src/operator/matrix_free.rs): y = A x from the
// element trace matrices K_e, without ever assembling the global trace matrix (as the Exasim
// GPU HDG code does). Triangles (FACES = 3, n_f = 1..=11) and tetrahedra (FACES = 4,
// n_f = 3, 6, 10, 15, 21, 28: k = 1..=6).
//
// Layouts (element-fastest, planes of `pitch` = n_cells rounded up to 32 entries, so that every
// plane starts 128-byte aligned and a warp of 32 consecutive cells reads and writes one
// coalesced segment per plane; the padding cells hold zeros / NONE and are never used):
//   packed K_e  packed[p * pitch + e], p = packed_index(NL, a, b) for a <= b (upper triangle,
//               row by row: (0,0) (0,1) .. (0,NL-1) (1,1) .. (NL-1,NL-1)); NL (NL+1) / 2 planes
//   cell rows   cell_rows[f * pitch + e] (f < FACES) = free row (block row of the trace system) of local
//               face f of cell e, NONE for a Dirichlet face
//   y_e         ye[(f * pitch + e) * n_f + m]: entry a = f n_f + m (a < NL = FACES n_f) of the
//               per-element product,
//               one plane per local face f with each cell's n_f values contiguous, so that the
//               face gather reads a face's n_f values in one piece (the element kernel's n_f
//               stores per face together cover whole segments, which L2 merges)
//   row cells   row_cell[side * n_rows + r] (NONE: no second cell), row_local[side * n_rows + r]
//               (the topology planes of the assembly, see elements.rs)
//   x, y        x[r * n_f + m] (the trace vector, as everywhere)
//
// y = A x is two kernels, no atomics, the same sums in the same order on every run:
//   mf_element_apply: one thread per cell: gathers x_e (zero on Dirichlet faces: A is the
//     free-free block, exactly as the DBF assembly leaves Dirichlet columns out of the matrix),
//     y_e = K_e x_e with the packed symmetric K_e (each stored entry read once), writes y_e;
//   mf_face_gather: one thread per output entry (r, m): y[r n_f + m] = (0 + y_e0) + y_e1 over
//     the row's one or two cells, side 0 first.

#include "common.cuh"
#include "condensed_layout.cuh"

// Position of entry (a, b), a <= b, in the packed upper triangle of an nl x nl matrix.
__host__ __device__ __forceinline__ unsigned packed_index(unsigned nl, unsigned a, unsigned b) {
    return a * nl - a * (a - 1) / 2 + (b - a);
}

// The same for any (a, b): the symmetric partner when a > b.
__device__ __forceinline__ unsigned packed_symmetric(unsigned nl, unsigned a, unsigned b) {
    return a <= b ? packed_index(nl, a, b) : packed_index(nl, b, a);
}

// Round-to-nearest operations that nvcc never contracts into an FMA (as assemble.cu), so the
// right-hand side below is the DBF assembly's to the bit.
__device__ __forceinline__ f64 mul(f64 a, f64 b) { return __dmul_rn(a, b); }
__device__ __forceinline__ f32 mul(f32 a, f32 b) { return __fmul_rn(a, b); }
__device__ __forceinline__ f64 add(f64 a, f64 b) { return __dadd_rn(a, b); }
__device__ __forceinline__ f32 add(f32 a, f32 b) { return __fadd_rn(a, b); }
__device__ __forceinline__ f64 sub(f64 a, f64 b) { return __dsub_rn(a, b); }
__device__ __forceinline__ f32 sub(f32 a, f32 b) { return __fsub_rn(a, b); }

// ---------------------------------------------------------------------------------------------
// Setup: pack K_e (the condensation's full sector-blocked layout, value a * nl + b) into the upper
// triangle, and mark every cell face Dirichlet (NONE) before mf_cell_rows fills the free ones.
// One thread per cell of the padded range [0, pitch): padding cells get zeros and NONE.

template <typename T>
__device__ void pack(u64 n_cells, u64 pitch, unsigned faces, unsigned nl,
                     const T* __restrict__ k, T* __restrict__ packed,
                     unsigned* __restrict__ cell_rows) {
    GRID_STRIDE(e, pitch) {
        const bool real = e < n_cells;
        u64 p = 0;
        for (unsigned a = 0; a < nl; ++a)
            for (unsigned b = a; b < nl; ++b, ++p)
                packed[p * pitch + e] = real ? k[condensed_at<T>((u64)nl * nl, (u64)a * nl + b, e)] : T(0);
        for (unsigned f = 0; f < faces; ++f) cell_rows[(u64)f * pitch + e] = NONE_INDEX;
    }
}

// cell_rows[local * pitch + cell] = row for each (row, side) with a cell: every free face of a
// cell is the face of exactly one row, so every entry is written at most once (no race).
extern "C" __global__ void mf_cell_rows(u64 n_rows, u64 pitch, const unsigned* __restrict__ row_cell,
                                        const unsigned char* __restrict__ row_local,
                                        unsigned* __restrict__ cell_rows) {
    GRID_STRIDE(t, 2 * n_rows) {
        const unsigned cell = row_cell[t];
        if (cell != NONE_INDEX) cell_rows[(u64)row_local[t] * pitch + cell] = (unsigned)(t % n_rows);
    }
}

// ---------------------------------------------------------------------------------------------
// y = A x.

template <typename T, int NFACES, int NF>
__device__ void element_apply(u64 n_cells, u64 pitch, const T* __restrict__ packed,
                              const unsigned* __restrict__ cell_rows, const T* __restrict__ x,
                              T* __restrict__ ye) {
    constexpr int NL = NFACES * NF;
    const u64 e = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n_cells) return;
    T xl[NL];
    T yl[NL];
#pragma unroll
    for (int f = 0; f < NFACES; ++f) {
        const unsigned r = __ldg(cell_rows + (u64)f * pitch + e);
#pragma unroll
        for (int m = 0; m < NF; ++m)
            xl[f * NF + m] = r == NONE_INDEX ? T(0) : __ldg(x + (u64)r * NF + m);
    }
#pragma unroll
    for (int a = 0; a < NL; ++a) yl[a] = T(0);
    const T* __restrict__ kp = packed + e;
    // Row a of the upper triangle: its diagonal entry, then (a, b) for b > a, which is also
    // entry (b, a): each stored value is loaded once and used twice.
#pragma unroll
    for (int a = 0; a < NL; ++a) {
        const int row = a * NL - a * (a - 1) / 2;
        T acc = yl[a] + __ldg(kp + (u64)row * pitch) * xl[a];
#pragma unroll
        for (int b = a + 1; b < NL; ++b) {
            const T v = __ldg(kp + (u64)(row + b - a) * pitch);
            acc += v * xl[b];
            yl[b] += v * xl[a];
        }
        yl[a] = acc;
    }
#pragma unroll
    for (int f = 0; f < NFACES; ++f)
#pragma unroll
        for (int m = 0; m < NF; ++m) ye[((u64)f * pitch + e) * NF + m] = yl[f * NF + m];
}

template <typename T, int NF>
__device__ void face_gather(u64 n_rows, u64 pitch, const unsigned* __restrict__ row_cell,
                            const unsigned char* __restrict__ row_local,
                            const T* __restrict__ ye, T* __restrict__ y) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows * NF) return;
    const u64 row = t / NF;
    const unsigned m = (unsigned)(t - row * NF);
    T s = T(0);
#pragma unroll
    for (int side = 0; side < 2; ++side) {
        const unsigned cell = __ldg(row_cell + side * n_rows + row);
        if (cell != NONE_INDEX) {
            const unsigned l = __ldg(row_local + side * n_rows + row);
            s = s + __ldg(ye + ((u64)l * pitch + cell) * NF + m);
        }
    }
    y[t] = s;
}

// ---------------------------------------------------------------------------------------------
// Diagonal and diagonal blocks: entry (i, j) of row r's diagonal block is the sum, side 0 first,
// of entry (l n_f + i, l n_f + j) of its cells' K_e (l: the face's local index in the cell), as
// the DBF assembly sums slot 0. Output in the host order: out[r * per + (i * n_f + j)] for the
// blocks (per = n_f^2), out[r * n_f + i] for the diagonal (per = n_f, j = i).

template <typename T>
__device__ void diagonal_blocks(u64 n_rows, u64 pitch, unsigned faces, unsigned nf,
                                unsigned only_diagonal,
                                const unsigned* __restrict__ row_cell,
                                const unsigned char* __restrict__ row_local,
                                const T* __restrict__ packed, T* __restrict__ out) {
    const unsigned nl = faces * nf;
    const u64 per = only_diagonal ? nf : (u64)nf * nf;
    GRID_STRIDE(t, n_rows * per) {
        const u64 row = t / per;
        const unsigned v = (unsigned)(t - row * per);
        const unsigned i = only_diagonal ? v : v / nf;
        const unsigned j = only_diagonal ? v : v % nf;
        T s = T(0);
        for (int side = 0; side < 2; ++side) {
            const unsigned cell = row_cell[side * n_rows + row];
            if (cell == NONE_INDEX) continue;
            const unsigned l = row_local[side * n_rows + row];
            s = add(s, packed[(u64)packed_symmetric(nl, l * nf + i, l * nf + j) * pitch + cell]);
        }
        out[t] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// The right-hand side, exactly as the DBF assembly computes it (assemble.cu): the
// gathered b_e, minus the Dirichlet columns, in the same operations and order (so the same bits).
// Reads the condensation's full K_e (value a * NL + b) and b_e (value a), sector-blocked.

// Topology planes of the assembly (the layout of `AssemblyTopology` in element_common.cuh).
struct RhsTopology {
    u64 row_cell;    // u32 [side][row]
    u64 row_local;   // u8 [side][row]
    u64 slot_cell;   // u32 [a][row]
    u64 slot_row;    // u8 [a][row]
    u64 slot_col;    // u8 [a][row]
    u64 neighbours;  // u32 [a][row]
    u64 slot_face;   // u32 [a][row]
};

template <typename T>
__device__ __forceinline__ const T* ptr(u64 address) {
    return reinterpret_cast<const T*>(address);
}

template <typename T, int NFACES, int NF>
__device__ void rhs(u64 n_rows, unsigned slots, u64 n_cells, const RhsTopology& t,
                    const T* __restrict__ k, const T* __restrict__ b,
                    const T* __restrict__ dirichlet, T* __restrict__ out) {
    constexpr int NL = NFACES * NF;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    T acc[NF];
    for (int m = 0; m < NF; ++m) acc[m] = T(0);
    for (int side = 0; side < 2; ++side) {
        const unsigned cell = ptr<unsigned>(t.row_cell)[side * n_rows + row];
        if (cell == NONE_INDEX) continue;
        const int i = ptr<unsigned char>(t.row_local)[side * n_rows + row];
        for (int m = 0; m < NF; ++m) acc[m] = add(acc[m], b[condensed_at<T>(NL, i * NF + m, cell)]);
    }
    for (unsigned a = 1; a < slots; ++a) {
        const u64 s = (u64)a * n_rows + row;
        const unsigned cell = ptr<unsigned>(t.slot_cell)[s];
        const unsigned nbr = ptr<unsigned>(t.neighbours)[s];
        if (cell == NONE_INDEX || nbr != NONE_INDEX) continue;
        const int i = ptr<unsigned char>(t.slot_row)[s];
        const int j = ptr<unsigned char>(t.slot_col)[s];
        const T* lambda_d = dirichlet + (u64)ptr<unsigned>(t.slot_face)[s] * NF;
        for (int m = 0; m < NF; ++m)
            for (int l = 0; l < NF; ++l)
                acc[m] = sub(acc[m], mul(k[condensed_at<T>(NL * NL, (i * NF + m) * NL + j * NF + l, cell)],
                                         lambda_d[l]));
    }
    for (int m = 0; m < NF; ++m) out[row * NF + m] = acc[m];
}

// ---------------------------------------------------------------------------------------------
// Instantiations: NAME_{f32,f64}; per block size NAME_{f32,f64}_nf{NF} (face gather); per cell
// and block size NAME_{f32,f64}_nf{NF} (triangles) and NAME_{f32,f64}_nf{NF}_tet (tetrahedra).

#define MF_ANY(T)                                                                              \
    extern "C" __global__ void mf_pack_##T(u64 n_cells, u64 pitch, unsigned faces,            \
                                           unsigned nl, const T* k, T* packed,                 \
                                           unsigned* cell_rows) {                              \
        pack<T>(n_cells, pitch, faces, nl, k, packed, cell_rows);                              \
    }                                                                                          \
    extern "C" __global__ void mf_diagonal_blocks_##T(                                         \
        u64 n_rows, u64 pitch, unsigned faces, unsigned nf, unsigned only_diagonal,            \
        const unsigned* row_cell, const unsigned char* row_local, const T* packed, T* out) {   \
        diagonal_blocks<T>(n_rows, pitch, faces, nf, only_diagonal, row_cell, row_local,      \
                           packed, out);                                                       \
    }

#define MF_GATHER(T, NF)                                                                       \
    extern "C" __global__ void mf_face_gather_##T##_nf##NF(u64 n_rows, u64 pitch,             \
                                                           const unsigned* row_cell,           \
                                                           const unsigned char* row_local,     \
                                                           const T* ye, T* y) {                \
        face_gather<T, NF>(n_rows, pitch, row_cell, row_local, ye, y);                         \
    }

#define MF_CELL(T, FACES, NF, SUFFIX)                                                          \
    extern "C" __global__ void __launch_bounds__(256) mf_element_apply_##T##_nf##NF##SUFFIX(   \
        u64 n_cells, u64 pitch, const T* packed, const unsigned* cell_rows, const T* x,       \
        T* ye) {                                                                               \
        element_apply<T, FACES, NF>(n_cells, pitch, packed, cell_rows, x, ye);                 \
    }                                                                                          \
    extern "C" __global__ void mf_rhs_##T##_nf##NF##SUFFIX(                                    \
        u64 n_rows, unsigned slots, u64 n_cells, RhsTopology t, const T* k, const T* b,        \
        const T* dirichlet, T* out) {                                                          \
        rhs<T, FACES, NF>(n_rows, slots, n_cells, t, k, b, dirichlet, out);                    \
    }

#define MF_TRI(T, NF) MF_GATHER(T, NF) MF_CELL(T, 3, NF, _tri)

#define MF_ALL(T)                                                                              \
    MF_ANY(T)                                                                                  \
    MF_TRI(T, 1)                                                                               \
    MF_TRI(T, 2)                                                                               \
    MF_TRI(T, 3)                                                                               \
    MF_TRI(T, 4)                                                                               \
    MF_TRI(T, 5)                                                                               \
    MF_TRI(T, 6)                                                                               \
    MF_TRI(T, 7)                                                                               \
    MF_TRI(T, 8)                                                                               \
    MF_TRI(T, 9)                                                                               \
    MF_TRI(T, 10)                                                                              \
    MF_TRI(T, 11)                                                                              \
    MF_CELL(T, 4, 3, _tet)                                                                     \
    MF_CELL(T, 4, 6, _tet)                                                                     \
    MF_CELL(T, 4, 10, _tet)                                                                    \
    MF_GATHER(T, 15) MF_CELL(T, 4, 15, _tet)                                                   \
    MF_GATHER(T, 21) MF_CELL(T, 4, 21, _tet)                                                   \
    MF_GATHER(T, 28) MF_CELL(T, 4, 28, _tet)

MF_ALL(f32)
MF_ALL(f64)

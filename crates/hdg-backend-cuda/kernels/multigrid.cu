// Kernels of the multigrid preconditioner (hdg_linalg::Multigrid) on the device: the product
// of its CSR matrices (vertex levels, prolongators, the dense direct level), the face-by-face
// transfer E between the trace space and the vertex space (hdg_core::auxiliary), and the
// Galerkin operator E^T A E: the projection of the DBF blocks and the vertex rows' gather.
//
// Every kernel sums in the order the CPU backend does (hdg_backend_cpu::multigrid,
// DbfMatrix::project_blocks), so both give the same numbers up to the order of the CSR
// partial sums. No atomics: every output has one writer, and results do not depend on timing.

#include "common.cuh"

// y = A x, TPR consecutive threads per row (TPR divides 32): each takes every TPR-th entry of
// the row, then a shuffle within the group sums the partials and its first thread writes.
// Rows are consecutive across a warp, so the column and value loads of a group are contiguous.
template <typename T, int TPR>
__device__ void csr_spmv(unsigned n_rows, const unsigned* __restrict__ row_start,
                         const unsigned* __restrict__ columns, const T* __restrict__ values,
                         const T* __restrict__ x, T* __restrict__ y) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 row = t / TPR;
    const unsigned lane = (unsigned)(t % TPR);
    // The group's lanes within the warp: whole groups leave together (rows past the end), so
    // the shuffles below only ever involve live lanes.
    const unsigned group = (TPR == 32) ? 0xffffffffu
                                       : (((1u << TPR) - 1u) << ((threadIdx.x % 32) / TPR * TPR));
    if (row >= n_rows) return;
    T sum = T(0);
    for (unsigned p = row_start[row] + lane; p < row_start[row + 1]; p += TPR)
        sum += values[p] * x[columns[p]];
#pragma unroll
    for (int offset = TPR / 2; offset > 0; offset /= 2)
        sum += __shfl_down_sync(group, sum, offset, TPR);
    if (lane == 0) y[row] = sum;
}

// trace[row * n_f + m] += sum_i E^[m][i] coarse[v_i], m < d: one thread per (row, m).
template <typename T>
__device__ void face_prolong_add(unsigned n_rows, unsigned n_f, unsigned d,
                                 const T* __restrict__ transfer,
                                 const unsigned* __restrict__ row_vertices,
                                 const T* __restrict__ coarse, T* __restrict__ trace) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (u64)n_rows * d) return;
    const unsigned row = (unsigned)(t / d), m = (unsigned)(t % d);
    T sum = T(0);
    for (unsigned i = 0; i < d; ++i) {
        const unsigned v = row_vertices[row * d + i];
        if (v != NONE_INDEX) sum += transfer[m * d + i] * coarse[v];
    }
    trace[(u64)row * n_f + m] += sum;
}

// coarse[v] = sum over the faces using v of sum_m E^[m][i] trace[row * n_f + m]: one thread per
// coarse unknown, gathering through the incidence (entries row * d + i).
template <typename T>
__device__ void face_restrict(unsigned n_coarse, unsigned n_f, unsigned d,
                              const T* __restrict__ transfer, const unsigned* __restrict__ start,
                              const unsigned* __restrict__ entries, const T* __restrict__ trace,
                              T* __restrict__ coarse) {
    const u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n_coarse) return;
    T sum = T(0);
    for (unsigned p = start[v]; p < start[v + 1]; ++p) {
        const unsigned row = entries[p] / d, i = entries[p] % d;
        T face = T(0);
        for (unsigned m = 0; m < d; ++m) face += transfer[m * d + i] * trace[(u64)row * n_f + m];
        sum += face;
    }
    coarse[v] = sum;
}

// The largest projection basis: rows and columns (d <= 3).
#define MAX_BASIS 3

// out[((row * slots) + a) * m * m + i * m + j] = (B^T A_{row,a} B)[i][j] in f64, B the first
// `rows` rows of an n_f x m basis (the rest zero), A_{row,a} read from the DBF planes
// (kernels/dbf.cu's layout); zero for inactive slots. One thread per (slot, row), rows
// fastest: the plane reads coalesce.
template <typename T>
__device__ void dbf_project_blocks(unsigned n_rows, unsigned pitch, unsigned n_f, unsigned slots,
                                   unsigned rows, unsigned m, const f64* __restrict__ basis,
                                   const T* __restrict__ values,
                                   const unsigned* __restrict__ columns, f64* __restrict__ out) {
    const u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (u64)n_rows * slots) return;
    const unsigned a = (unsigned)(t / n_rows), row = (unsigned)(t % n_rows);
    f64* target = out + ((u64)row * slots + a) * m * m;
    const bool active = a == 0 || columns[(u64)a * pitch + row] != row;
    f64 ab[MAX_BASIS * MAX_BASIS];
    for (unsigned r = 0; r < rows; ++r)
        for (unsigned j = 0; j < m; ++j) {
            f64 s = 0.0;
            for (unsigned l = 0; l < rows; ++l)
                s += (f64)values[((u64)a * n_f * n_f + r * n_f + l) * pitch + row] * basis[l * m + j];
            ab[r * m + j] = s;
        }
    for (unsigned i = 0; i < m; ++i)
        for (unsigned j = 0; j < m; ++j) {
            f64 s = 0.0;
            for (unsigned r = 0; r < rows; ++r) s += basis[r * m + i] * ab[r * m + j];
            target[i * m + j] = active ? s : 0.0;
        }
}

// Columns a row of the vertex operator may have here (the vertex's neighbours through its
// faces' cells, split unknowns counted apiece: about 7 on a 2D mesh, 15 to 40 in 3D).
#define MAX_VERTEX_COLUMNS 128

// The vertex level's operator A_1 = E^T A E (hdg_core::auxiliary::vertex_operator) from the
// projected blocks (dbf_project_blocks with the basis E^, m = d): one thread per coarse unknown
// v, gathering through the incidence. Row v adds block[i][j] of every face row that uses v (as
// its vertex i) and every active slot a of that row into column w, the coarse unknown of
// vertex j of the slot's face: the host's loops in the host's order, so the same sums to the
// bit. Pass 1 (values == nullptr) writes the row's number of columns to count[v]
// (NONE_INDEX if it has more than MAX_VERTEX_COLUMNS: the caller then assembles on the host); pass 2 writes
// the row at row_start[v], columns ascending.
__device__ void vertex_operator_rows(unsigned n_coarse, unsigned d, unsigned slots,
                                     unsigned pitch, const unsigned* __restrict__ start,
                                     const unsigned* __restrict__ entries,
                                     const unsigned* __restrict__ row_vertices,
                                     const unsigned* __restrict__ dbf_columns,
                                     const f64* __restrict__ projected,
                                     unsigned* __restrict__ count,
                                     const unsigned* __restrict__ row_start,
                                     unsigned* __restrict__ columns, f64* __restrict__ values) {
    const u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n_coarse) return;
    unsigned cols[MAX_VERTEX_COLUMNS];
    f64 sums[MAX_VERTEX_COLUMNS];
    unsigned n = 0;
    for (unsigned p = start[v]; p < start[v + 1]; ++p) {
        const unsigned row = entries[p] / d, i = entries[p] % d;
        for (unsigned a = 0; a < slots; ++a) {
            // Slot 0 is the row's own face; an inactive slot holds the row itself.
            const unsigned column_row = a == 0 ? row : dbf_columns[(u64)a * pitch + row];
            if (a != 0 && column_row == row) continue;
            const f64* block = projected + ((u64)row * slots + a) * d * d;
            for (unsigned j = 0; j < d; ++j) {
                const unsigned w = row_vertices[(u64)column_row * d + j];
                if (w == NONE_INDEX) continue;
                unsigned k = 0;
                while (k < n && cols[k] != w) ++k;
                if (k == n) {
                    if (n == MAX_VERTEX_COLUMNS) {
                        if (values == nullptr) count[v] = NONE_INDEX;
                        return;
                    }
                    cols[n] = w;
                    sums[n] = 0.0;
                    ++n;
                }
                sums[k] += block[i * d + j];
            }
        }
    }
    if (values == nullptr) {
        count[v] = n;
        return;
    }
    // Columns ascending (insertion sort: a row holds a few dozen).
    for (unsigned k = 1; k < n; ++k) {
        const unsigned c = cols[k];
        const f64 x = sums[k];
        unsigned m = k;
        for (; m > 0 && cols[m - 1] > c; --m) {
            cols[m] = cols[m - 1];
            sums[m] = sums[m - 1];
        }
        cols[m] = c;
        sums[m] = x;
    }
    const unsigned first = row_start[v];
    for (unsigned k = 0; k < n; ++k) {
        columns[first + k] = cols[k];
        values[first + k] = sums[k];
    }
}

extern "C" __global__ void vertex_operator_count(unsigned n_coarse, unsigned d, unsigned slots,
                                                 unsigned pitch, const unsigned* start,
                                                 const unsigned* entries,
                                                 const unsigned* row_vertices,
                                                 const unsigned* dbf_columns,
                                                 const f64* projected, unsigned* count) {
    vertex_operator_rows(n_coarse, d, slots, pitch, start, entries, row_vertices, dbf_columns,
                         projected, count, nullptr, nullptr, nullptr);
}

extern "C" __global__ void vertex_operator_fill(unsigned n_coarse, unsigned d, unsigned slots,
                                                unsigned pitch, const unsigned* start,
                                                const unsigned* entries,
                                                const unsigned* row_vertices,
                                                const unsigned* dbf_columns,
                                                const f64* projected, const unsigned* row_start,
                                                unsigned* columns, f64* values) {
    vertex_operator_rows(n_coarse, d, slots, pitch, start, entries, row_vertices, dbf_columns,
                         projected, nullptr, row_start, columns, values);
}

#define MULTIGRID(T)                                                                           \
    extern "C" __global__ void csr_spmv_##T##_4(unsigned n, const unsigned* s,                \
                                                const unsigned* c, const T* v, const T* x,     \
                                                T* y) {                                        \
        csr_spmv<T, 4>(n, s, c, v, x, y);                                                      \
    }                                                                                          \
    extern "C" __global__ void csr_spmv_##T##_32(unsigned n, const unsigned* s,               \
                                                 const unsigned* c, const T* v, const T* x,    \
                                                 T* y) {                                       \
        csr_spmv<T, 32>(n, s, c, v, x, y);                                                     \
    }                                                                                          \
    extern "C" __global__ void face_prolong_add_##T(unsigned n_rows, unsigned n_f, unsigned d, \
                                                    const T* e, const unsigned* rv,            \
                                                    const T* coarse, T* trace) {               \
        face_prolong_add<T>(n_rows, n_f, d, e, rv, coarse, trace);                             \
    }                                                                                          \
    extern "C" __global__ void face_restrict_##T(unsigned n_coarse, unsigned n_f, unsigned d,  \
                                                 const T* e, const unsigned* start,            \
                                                 const unsigned* entries, const T* trace,      \
                                                 T* coarse) {                                  \
        face_restrict<T>(n_coarse, n_f, d, e, start, entries, trace, coarse);                  \
    }                                                                                          \
    extern "C" __global__ void dbf_project_blocks_##T(                                         \
        unsigned n_rows, unsigned pitch, unsigned n_f, unsigned slots, unsigned rows,          \
        unsigned m, const f64* basis, const T* values, const unsigned* columns, f64* out) {    \
        dbf_project_blocks<T>(n_rows, pitch, n_f, slots, rows, m, basis, values, columns,      \
                              out);                                                            \
    }

MULTIGRID(f32)
MULTIGRID(f64)

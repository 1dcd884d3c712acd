// Kernels of the multigrid preconditioner (hdg_linalg::Multigrid) on the device: the product
// of its CSR matrices (vertex levels, prolongators, the dense direct level), the face-by-face
// transfer E between the trace space and the vertex space (hdg_core::auxiliary), the Galerkin
// operator E^T A E (the projection of the DBF blocks and the vertex rows' gather), and the
// products of smoothed aggregation (prolongator, transpose, sparse products).
//
// Every kernel sums in the order the host does (hdg_backend_cpu::multigrid,
// DbfMatrix::project_blocks, hdg_linalg::multigrid's sparse products), so both give the same
// numbers up to the order of the CSR SpMV's partial sums; the setup's matrices are the host's to
// the bit. Every output has one writer, and no result depends on timing (the transpose's
// atomics only count, or pick places that a sort then orders).

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

// Columns one thread's row accumulator holds: a row of the vertex operator (the vertex's
// neighbours through its faces' cells, split unknowns counted apiece: about 7 on a 2D mesh, 15
// to 40 in 3D) or of a smoothed-aggregation product. A row with more sends its whole matrix to
// the host's assembly.
#define MAX_ROW_COLUMNS 128

// One sparse row in the making, one thread's (hdg_core::sparse_rows::Accumulator): columns in
// the order first seen, each sum in the order its terms arrive, from 0.0; so a row assembled
// in the host's loop order has the host's sums to the bit. Columns ascending once sorted.
// Products are passed as __dmul_rn: a plain a * b would be fused with the accumulator's add
// into a multiply-add, which the host never does.
struct RowAccumulator {
    unsigned n;
    unsigned cols[MAX_ROW_COLUMNS];
    f64 sums[MAX_ROW_COLUMNS];

    __device__ RowAccumulator() : n(0) {}

    // sums[c] += x; false when a new column finds the accumulator full.
    __device__ bool add(unsigned c, f64 x) {
        unsigned k = 0;
        while (k < n && cols[k] != c) ++k;
        if (k == n) {
            if (n == MAX_ROW_COLUMNS) return false;
            cols[n] = c;
            sums[n] = 0.0;
            ++n;
        }
        sums[k] += x;
        return true;
    }

    // Columns ascending (insertion sort: a row holds a few dozen).
    __device__ void sort() {
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
    }

    // Pass 1 of a two-pass assembly (values == nullptr): count[row] = the row's length, or
    // NONE_INDEX when it overflowed. Pass 2: the row sorted at row_start[row].
    __device__ void finish(u64 row, bool overflowed, unsigned* __restrict__ count,
                           const unsigned* __restrict__ row_start, unsigned* __restrict__ columns,
                           f64* __restrict__ values) {
        if (values == nullptr) {
            count[row] = overflowed ? NONE_INDEX : n;
            return;
        }
        if (overflowed) return;
        sort();
        const unsigned first = row_start[row];
        for (unsigned k = 0; k < n; ++k) {
            columns[first + k] = cols[k];
            values[first + k] = sums[k];
        }
    }
};

// The vertex level's operator A_1 = E^T A E (hdg_core::auxiliary::vertex_operator) from the
// projected blocks (dbf_project_blocks with the basis E^, m = d): one thread per coarse unknown
// v, gathering through the incidence. Row v adds block[i][j] of every face row that uses v (as
// its vertex i) and every active slot a of that row into column w, the coarse unknown of
// vertex j of the slot's face: the host's loops in the host's order, so the same sums to the
// bit. Two passes (RowAccumulator::finish).
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
    RowAccumulator row_sums;
    bool fits = true;
    for (unsigned p = start[v]; fits && p < start[v + 1]; ++p) {
        const unsigned row = entries[p] / d, i = entries[p] % d;
        for (unsigned a = 0; fits && a < slots; ++a) {
            // Slot 0 is the row's own face; an inactive slot holds the row itself.
            const unsigned column_row = a == 0 ? row : dbf_columns[(u64)a * pitch + row];
            if (a != 0 && column_row == row) continue;
            const f64* block = projected + ((u64)row * slots + a) * d * d;
            for (unsigned j = 0; fits && j < d; ++j) {
                const unsigned w = row_vertices[(u64)column_row * d + j];
                if (w != NONE_INDEX) fits = row_sums.add(w, block[i * d + j]);
            }
        }
    }
    row_sums.finish(v, !fits, count, row_start, columns, values);
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

// The smoothed prolongator of aggregation (hdg_linalg::multigrid::aggregation::
// smooth_prolongator), P = (I - c D^-1 A) T with T[i][agg(i)] = tentative[i]: row i is
// sum_k a_ik T[k] (A's entries in order), times -c / a_ii, plus T's row i: the host's
// operations in the host's order. One thread per row, two passes (RowAccumulator::finish).
__device__ void smoothed_prolongator_rows(unsigned n, const unsigned* __restrict__ a_start,
                                          const unsigned* __restrict__ a_columns,
                                          const f64* __restrict__ a_values,
                                          const unsigned* __restrict__ aggregates,
                                          const f64* __restrict__ tentative, f64 omega_over_rho,
                                          unsigned* __restrict__ count,
                                          const unsigned* __restrict__ row_start,
                                          unsigned* __restrict__ columns,
                                          f64* __restrict__ values) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    RowAccumulator row;
    bool fits = true;
    f64 diagonal = 0.0;
    for (unsigned p = a_start[i]; fits && p < a_start[i + 1]; ++p) {
        const unsigned k = a_columns[p];
        if (k == i) diagonal = a_values[p];
        fits = row.add(aggregates[k], __dmul_rn(a_values[p], tentative[k]));
    }
    const f64 factor = -omega_over_rho / diagonal;
    for (unsigned m = 0; m < row.n; ++m) row.sums[m] *= factor;
    if (fits) fits = row.add(aggregates[i], tentative[i]);
    row.finish(i, !fits, count, row_start, columns, values);
}

extern "C" __global__ void smoothed_prolongator_count(unsigned n, const unsigned* a_start,
                                                      const unsigned* a_columns,
                                                      const f64* a_values,
                                                      const unsigned* aggregates,
                                                      const f64* tentative, f64 omega_over_rho,
                                                      unsigned* count) {
    smoothed_prolongator_rows(n, a_start, a_columns, a_values, aggregates, tentative,
                              omega_over_rho, count, nullptr, nullptr, nullptr);
}

extern "C" __global__ void smoothed_prolongator_fill(unsigned n, const unsigned* a_start,
                                                     const unsigned* a_columns,
                                                     const f64* a_values,
                                                     const unsigned* aggregates,
                                                     const f64* tentative, f64 omega_over_rho,
                                                     const unsigned* row_start,
                                                     unsigned* columns, f64* values) {
    smoothed_prolongator_rows(n, a_start, a_columns, a_values, aggregates, tentative,
                              omega_over_rho, nullptr, row_start, columns, values);
}

// C = A B (hdg_linalg::multigrid::sparse::multiply): row i of C adds a_ik b_kj over A's row i
// and B's row k, in that order. One thread per row, two passes (RowAccumulator::finish).
__device__ void sparse_product_rows(unsigned n, const unsigned* __restrict__ a_start,
                                    const unsigned* __restrict__ a_columns,
                                    const f64* __restrict__ a_values,
                                    const unsigned* __restrict__ b_start,
                                    const unsigned* __restrict__ b_columns,
                                    const f64* __restrict__ b_values,
                                    unsigned* __restrict__ count,
                                    const unsigned* __restrict__ row_start,
                                    unsigned* __restrict__ columns, f64* __restrict__ values) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    RowAccumulator row;
    bool fits = true;
    for (unsigned p = a_start[i]; fits && p < a_start[i + 1]; ++p) {
        const unsigned k = a_columns[p];
        const f64 a_ik = a_values[p];
        for (unsigned q = b_start[k]; fits && q < b_start[k + 1]; ++q)
            fits = row.add(b_columns[q], __dmul_rn(a_ik, b_values[q]));
    }
    row.finish(i, !fits, count, row_start, columns, values);
}

extern "C" __global__ void sparse_product_count(unsigned n, const unsigned* a_start,
                                                const unsigned* a_columns, const f64* a_values,
                                                const unsigned* b_start,
                                                const unsigned* b_columns, const f64* b_values,
                                                unsigned* count) {
    sparse_product_rows(n, a_start, a_columns, a_values, b_start, b_columns, b_values, count,
                        nullptr, nullptr, nullptr);
}

extern "C" __global__ void sparse_product_fill(unsigned n, const unsigned* a_start,
                                               const unsigned* a_columns, const f64* a_values,
                                               const unsigned* b_start,
                                               const unsigned* b_columns, const f64* b_values,
                                               const unsigned* row_start, unsigned* columns,
                                               f64* values) {
    sparse_product_rows(n, a_start, a_columns, a_values, b_start, b_columns, b_values, nullptr,
                        row_start, columns, values);
}

// The transpose (hdg_linalg::multigrid::sparse::transpose), pass 1: count[j] = entries of
// column j (atomics: only the totals are kept).
extern "C" __global__ void transpose_count(unsigned n, const unsigned* __restrict__ start,
                                           const unsigned* __restrict__ columns,
                                           unsigned* __restrict__ count) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned p = start[i]; p < start[i + 1]; ++p) atomicAdd(&count[columns[p]], 1u);
}

// Pass 2: row i's entries go to their columns' rows at the next free place (next[j] starts at
// the row start of j); the order within a row of the transpose depends on timing until
// transpose_sort puts it in row order.
extern "C" __global__ void transpose_scatter(unsigned n, const unsigned* __restrict__ start,
                                             const unsigned* __restrict__ columns,
                                             const f64* __restrict__ values,
                                             unsigned* __restrict__ next,
                                             unsigned* __restrict__ t_columns,
                                             f64* __restrict__ t_values) {
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (unsigned p = start[i]; p < start[i + 1]; ++p) {
        const unsigned slot = atomicAdd(&next[columns[p]], 1u);
        t_columns[slot] = (unsigned)i;
        t_values[slot] = values[p];
    }
}

// Pass 3: each row of the transpose sorted by column (a matrix row has each column once), so
// the result is the host's counting sort: independent of timing. One thread per row.
extern "C" __global__ void transpose_sort(unsigned n, const unsigned* __restrict__ start,
                                          unsigned* __restrict__ columns,
                                          f64* __restrict__ values) {
    const u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const unsigned first = start[j], last = start[j + 1];
    for (unsigned k = first + 1; k < last; ++k) {
        const unsigned c = columns[k];
        const f64 x = values[k];
        unsigned m = k;
        for (; m > first && columns[m - 1] > c; --m) {
            columns[m] = columns[m - 1];
            values[m] = values[m - 1];
        }
        columns[m] = c;
        values[m] = x;
    }
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
    extern "C" __global__ void values_from_f64_##T(u64 n, const f64* x, T* y) {              \
        const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;                              \
        if (i < n) y[i] = (T)x[i];                                                             \
    }                                                                                          \
    extern "C" __global__ void dbf_project_blocks_##T(                                         \
        unsigned n_rows, unsigned pitch, unsigned n_f, unsigned slots, unsigned rows,          \
        unsigned m, const f64* basis, const T* values, const unsigned* columns, f64* out) {    \
        dbf_project_blocks<T>(n_rows, pitch, n_f, slots, rows, m, basis, values, columns,      \
                              out);                                                            \
    }

MULTIGRID(f32)
MULTIGRID(f64)

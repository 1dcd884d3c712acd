// The DBF trace matrix's kernels of the CUDA backend (src/operator/dbf.rs): the SpMV in three variants and
// the extraction of the diagonal and the diagonal blocks. Compiled by build.rs (no fast math),
// each a template instantiated for float and double and each block size of block_sizes.cuh
// under an `extern "C"` name: dbf_spmv_f64_nf3, dbf_spmv_row_f32_nf4_s5, ...

#include "block_sizes.cuh"
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// The DBF trace matrix on the device, element-fastest ("row-fastest") layout:
//   value (a, i, j) of block row r at vals[(a * NF * NF + i * NF + j) * pitch + r],
//   block column of slot a of row r at cols[a * pitch + r],
// pitch = n_rows rounded up to a multiple of 32 (every plane starts 128-byte aligned; the
// padding rows are never read).
// y = A x with one thread per output entry (row, i): thread t -> i = t / n_rows,
// row = t % n_rows, so a warp shares i and reads 32 consecutive rows of every (a, i, j) plane
// and of every column plane: coalesced. The x gather x[c * NF + j] is the only indirection.
// Inactive slots (padding, Dirichlet) hold a zero block and point at their own row.

template <typename T, int NF>
__device__ void dbf_spmv(unsigned n_rows, unsigned pitch, unsigned slots,
                         const T* __restrict__ vals,
                         const unsigned* __restrict__ cols, const T* __restrict__ x,
                         T* __restrict__ y) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows * (unsigned)NF) return;
    unsigned i = t / n_rows;
    unsigned row = t - i * n_rows;
    const u64 plane = pitch;
    T sum = T(0);
    for (unsigned a = 0; a < slots; ++a) {
        const u64 c = __ldg(cols + (u64)a * plane + row);
        const T* __restrict__ v = vals + ((u64)a * NF * NF + (u64)i * NF) * plane + row;
        const T* __restrict__ xc = x + c * NF;
        T s = T(0);
#pragma unroll
        for (int j = 0; j < NF; ++j) s += __ldg(v + (u64)j * plane) * __ldg(xc + j);
        sum += s;
    }
    y[(u64)row * NF + i] = sum;
}

#define SPMV(T, NF)                                                                            \
    extern "C" __global__ void dbf_spmv_##T##_nf##NF(unsigned n_rows, unsigned pitch,         \
                                                     unsigned slots, const T* vals,            \
                                                     const unsigned* cols, const T* x, T* y) { \
        dbf_spmv<T, NF>(n_rows, pitch, slots, vals, cols, x, y);                               \
    }

// Two variants with the slots per row known at compile time (5: triangles, 7: tetrahedra), so
// that every load of a row is issued before the first use:
// - "entry": one thread per output entry (row, i), as above, slots unrolled;
// - "row": one thread per block row computing its n_f outputs: the column table and x are read
//   once per row instead of once per entry; the value planes are read coalesced as before.
template <typename T, int NF, int SLOTS>
__device__ void dbf_spmv_entry(unsigned n_rows, unsigned pitch, const T* __restrict__ vals,
                               const unsigned* __restrict__ cols, const T* __restrict__ x,
                               T* __restrict__ y) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows * (unsigned)NF) return;
    unsigned i = t / n_rows;
    unsigned row = t - i * n_rows;
    const u64 plane = pitch;
    T partial[SLOTS];
#pragma unroll
    for (int a = 0; a < SLOTS; ++a) {
        const u64 c = __ldg(cols + (u64)a * plane + row);
        const T* __restrict__ v = vals + ((u64)a * NF * NF + (u64)i * NF) * plane + row;
        const T* __restrict__ xc = x + c * NF;
        T s = T(0);
#pragma unroll
        for (int j = 0; j < NF; ++j) s += __ldg(v + (u64)j * plane) * __ldg(xc + j);
        partial[a] = s;
    }
    T sum = T(0);
#pragma unroll
    for (int a = 0; a < SLOTS; ++a) sum += partial[a];
    y[(u64)row * NF + i] = sum;
}

template <typename T, int NF, int SLOTS>
__device__ void dbf_spmv_row(unsigned n_rows, unsigned pitch, const T* __restrict__ vals,
                             const unsigned* __restrict__ cols, const T* __restrict__ x,
                             T* __restrict__ y) {
    unsigned row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    const u64 plane = pitch;
    T acc[NF];
#pragma unroll
    for (int i = 0; i < NF; ++i) acc[i] = T(0);
#pragma unroll
    for (int a = 0; a < SLOTS; ++a) {
        const u64 c = __ldg(cols + (u64)a * plane + row);
        T xc[NF];
#pragma unroll
        for (int j = 0; j < NF; ++j) xc[j] = __ldg(x + c * NF + j);
        const T* __restrict__ v = vals + (u64)a * NF * NF * plane + row;
#pragma unroll
        for (int i = 0; i < NF; ++i)
#pragma unroll
            for (int j = 0; j < NF; ++j) acc[i] += __ldg(v + (u64)(i * NF + j) * plane) * xc[j];
    }
#pragma unroll
    for (int i = 0; i < NF; ++i) y[(u64)row * NF + i] = acc[i];
}

#define SPMV_FIXED(T, NF, S)                                                                   \
    extern "C" __global__ void dbf_spmv_entry_##T##_nf##NF##_s##S(                             \
        unsigned n_rows, unsigned pitch, const T* vals, const unsigned* cols, const T* x,      \
        T* y) {                                                                                \
        dbf_spmv_entry<T, NF, S>(n_rows, pitch, vals, cols, x, y);                             \
    }                                                                                          \
    extern "C" __global__ void dbf_spmv_row_##T##_nf##NF##_s##S(                               \
        unsigned n_rows, unsigned pitch, const T* vals, const unsigned* cols, const T* x,      \
        T* y) {                                                                                \
        dbf_spmv_row<T, NF, S>(n_rows, pitch, vals, cols, x, y);                               \
    }

// Every block size of block_sizes.cuh (generated by build.rs from src/block_sizes.rs): the
// run-time slot loop and both fixed slot counts; the face blocks of tetrahedra beyond k = 3
// (7 slots only): the loop and 7 slots.
#define SPMV_ALL(T, B) SPMV(T, B) SPMV_FIXED(T, B, 5) SPMV_FIXED(T, B, 7)
#define SPMV_TETRAHEDRON(T, B) SPMV(T, B) SPMV_FIXED(T, B, 7)
FOR_EACH_BLOCK_SIZE(SPMV_ALL, f32)
FOR_EACH_BLOCK_SIZE(SPMV_ALL, f64)
FOR_EACH_TETRAHEDRON_BLOCK_SIZE(SPMV_TETRAHEDRON, f32)
FOR_EACH_TETRAHEDRON_BLOCK_SIZE(SPMV_TETRAHEDRON, f64)

// The diagonal, out[r * nf + m] = A(r, m; r, m), and the diagonal blocks (slot 0),
// out[(r * nf + i) * nf + j], in the host (row-major per block row) order.
template <typename T>
__device__ void dbf_diagonal(u64 n_rows, u64 pitch, unsigned nf, const T* __restrict__ vals,
                             T* __restrict__ out) {
    GRID_STRIDE(t, n_rows * nf) {
        u64 row = t / nf, m = t % nf;
        out[t] = vals[(m * nf + m) * pitch + row];
    }
}

template <typename T>
__device__ void dbf_diagonal_blocks(u64 n_rows, u64 pitch, unsigned nf,
                                    const T* __restrict__ vals, T* __restrict__ out) {
    const u64 bsz = (u64)nf * nf;
    GRID_STRIDE(t, n_rows * bsz) {
        u64 row = t / bsz, e = t % bsz;
        out[t] = vals[e * pitch + row];
    }
}

// Neumann and Robin faces (hdg_core::boundary): diagonal[k] times the identity (alpha H_F) on
// the own block (slot 0) of row rows[k], and <g, mu>_F into its right-hand side. One thread per
// face; the rows are distinct, so no two threads write one entry.
template <typename T>
__device__ void dbf_add_boundary_terms(u64 n_terms, u64 pitch, unsigned nf,
                                       const unsigned* __restrict__ rows,
                                       const T* __restrict__ diagonal,
                                       const T* __restrict__ load, T* vals, T* rhs) {
    GRID_STRIDE(k, n_terms) {
        const u64 row = rows[k];
        for (unsigned m = 0; m < nf; ++m) {
            vals[(u64)(m * nf + m) * pitch + row] += diagonal[k];
            rhs[row * nf + m] += load[k * nf + m];
        }
    }
}

#define DBF_DIAG(T)                                                                            \
    extern "C" __global__ void dbf_diagonal_##T(u64 n_rows, u64 pitch, unsigned nf,           \
                                                const T* vals, T* out) {                       \
        dbf_diagonal<T>(n_rows, pitch, nf, vals, out);                                         \
    }                                                                                          \
    extern "C" __global__ void dbf_diagonal_blocks_##T(u64 n_rows, u64 pitch, unsigned nf,    \
                                                       const T* vals, T* out) {                \
        dbf_diagonal_blocks<T>(n_rows, pitch, nf, vals, out);                                  \
    }                                                                                          \
    extern "C" __global__ void dbf_add_boundary_terms_##T(                                     \
        u64 n_terms, u64 pitch, unsigned nf, const unsigned* rows, const T* diagonal,          \
        const T* load, T* vals, T* rhs) {                                                      \
        dbf_add_boundary_terms<T>(n_terms, pitch, nf, rows, diagonal, load, vals, rhs);        \
    }
DBF_DIAG(f32)
DBF_DIAG(f64)

// The DBF assembly of the CUDA backend (src/operator/dbf.rs: the matrix it fills), for triangles and tetrahedra,
// orders k = 1..=8: one thread per block row, writing the DeviceDbf layout directly.
//
// The condensation, recovery and postprocessing kernels are in condense.cu,
// condense_bordered.cu, recover.cu and postprocess.cu (loaded by src/element_kernels.rs with
// their own launch configurations); this file is loaded by device.rs with the other
// fixed-configuration kernels (256 threads, no dynamic shared memory). Kernel names:
// dbf_assemble_{f32,f64}_{tri,tet}{K} (src/element_kernels.rs: the scheme).
//
// The kernel mirrors dbf::assemble operation for operation, in the same order (slot 0: side 0
// then side 1 added to zero; the right-hand side: b_e of side 0, of side 1, then the Dirichlet
// columns slot by slot), with the non-fusing intrinsics of element_common.cuh: with the CPU's
// K_e and b_e it gives the CPU backend's matrix and right-hand side to the bit.
//
// Kernel names: dbf_assemble_{f32,f64}_k{K} (triangles, n_f = K + 1, 5 slots) and
// dbf_assemble_{f32,f64}_k{K}_tet (tetrahedra, n_f = (K+1)(K+2)/2, 7 slots). Layouts in
// element_common.cuh (K_e, b_e) and src/operator/dbf.rs (values, columns).
#include "element_common.cuh"

// values[(a * NF * NF + m * NF + l) * pitch + row], columns[a * pitch + row],
// rhs[row * NF + m]. No per-thread arrays of block size: every entry is written as it is
// formed (n_f reaches 45 for tetrahedra at k = 8).
template <class C, typename T, int NF>
__device__ void assemble(u64 n_rows, u64 pitch, unsigned slots, u64 n_cells,
                         const AssemblyTopology& t, const T* __restrict__ k,
                         const T* __restrict__ b, const T* __restrict__ dirichlet,
                         T* __restrict__ values, unsigned* __restrict__ columns,
                         T* __restrict__ rhs) {
    constexpr int NL = C::NFACES * NF;
    constexpr int BSZ = NF * NF;
    constexpr int MAX_SLOTS = 2 * C::NFACES - 1;
    const u64 row = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n_rows) return;
    // K_e entry (i*NF + m, j*NF + l) of `cell`.
    auto element = [&](u64 cell, int i, int j, int m, int l) {
        return k[condensed_at<T>(NL * NL, (i * NF + m) * NL + j * NF + l, cell)];
    };
    const unsigned* row_cell = ptr<unsigned>(t.row_cell);
    const unsigned char* row_local = ptr<unsigned char>(t.row_local);
    const unsigned cell0 = row_cell[row];
    const unsigned cell1 = row_cell[n_rows + row];
    const int i0 = row_local[row];
    const int i1 = row_local[n_rows + row];

    // The slots' topology, in registers (MAX_SLOTS is a compile-time bound: unrolled loops).
    unsigned scell[MAX_SLOTS], snbr[MAX_SLOTS], sface[MAX_SLOTS];
    int si[MAX_SLOTS], sj[MAX_SLOTS];
#pragma unroll
    for (int a = 1; a < MAX_SLOTS; ++a) {
        scell[a] = NONE_INDEX;
        snbr[a] = NONE_INDEX;
        sface[a] = NONE_INDEX;
        si[a] = 0;
        sj[a] = 0;
        if (a < (int)slots) {
            const u64 s = (u64)a * n_rows + row;
            scell[a] = ptr<unsigned>(t.slot_cell)[s];
            snbr[a] = ptr<unsigned>(t.neighbours)[s];
            sface[a] = ptr<unsigned>(t.slot_face)[s];
            si[a] = ptr<unsigned char>(t.slot_row)[s];
            sj[a] = ptr<unsigned char>(t.slot_col)[s];
        }
    }

    // Slot 0: the sum of both cells' diagonal blocks (0 + side 0 + side 1, as the CPU adds).
#pragma unroll 1
    for (int m = 0; m < NF; ++m)
#pragma unroll 4
        for (int l = 0; l < NF; ++l) {
            T s = T(0);
            if (cell0 != NONE_INDEX) s = add(s, element(cell0, i0, i0, m, l));
            if (cell1 != NONE_INDEX) s = add(s, element(cell1, i1, i1, m, l));
            values[(u64)(m * NF + l) * pitch + row] = s;
        }
    columns[row] = (unsigned)row;

    // Slots 1..: a copy of the element block (free column), zeros otherwise.
#pragma unroll
    for (int a = 1; a < MAX_SLOTS; ++a) {
        if (a >= (int)slots) break;
        const bool copy = scell[a] != NONE_INDEX && snbr[a] != NONE_INDEX;
#pragma unroll 1
        for (int m = 0; m < NF; ++m)
#pragma unroll 4
            for (int l = 0; l < NF; ++l)
                values[((u64)a * BSZ + m * NF + l) * pitch + row] =
                    copy ? element(scell[a], si[a], sj[a], m, l) : T(0);
        columns[(u64)a * pitch + row] = snbr[a] == NONE_INDEX ? (unsigned)row : snbr[a];
    }

    // Right-hand side: b_e of both cells, minus the Dirichlet columns K_ID Lambda_D.
#pragma unroll 1
    for (int m = 0; m < NF; ++m) {
        T acc = T(0);
        if (cell0 != NONE_INDEX) acc = add(acc, b[condensed_at<T>(NL, i0 * NF + m, cell0)]);
        if (cell1 != NONE_INDEX) acc = add(acc, b[condensed_at<T>(NL, i1 * NF + m, cell1)]);
#pragma unroll
        for (int a = 1; a < MAX_SLOTS; ++a) {
            if (a >= (int)slots) break;
            if (scell[a] != NONE_INDEX && snbr[a] == NONE_INDEX) {
                const T* lambda_d = dirichlet + (u64)sface[a] * NF;
#pragma unroll 4
                for (int l = 0; l < NF; ++l)
                    acc = msub(acc, element(scell[a], si[a], sj[a], m, l), lambda_d[l]);
            }
        }
        rhs[row * NF + m] = acc;
    }
}

#ifndef HDG_EMULATION  // the host emulation instantiates what it checks itself
// Instantiations: n_f = CELL::nf(K) for every order of src/element_instances.rs.
#include "element_instances.cuh"

#define ASSEMBLY_KERNEL(T, CELL, NAME, K)                                                       \
    extern "C" __global__ void dbf_assemble_##T##_##NAME##K(                                    \
        u64 n_rows, u64 pitch, unsigned slots, u64 n_cells, AssemblyTopology t, const T* k,    \
        const T* b, const T* dir, T* values, unsigned* columns, T* rhs) {                      \
        assemble<CELL, T, CELL::nf(K)>(n_rows, pitch, slots, n_cells, t, k, b, dir, values,    \
                                       columns, rhs);                                          \
    }

FOR_EACH_ELEMENT_ORDER(ASSEMBLY_KERNEL, f32, Tri, tri)
FOR_EACH_ELEMENT_ORDER(ASSEMBLY_KERNEL, f64, Tri, tri)
FOR_EACH_ELEMENT_ORDER(ASSEMBLY_KERNEL, f32, Tet, tet)
FOR_EACH_ELEMENT_ORDER(ASSEMBLY_KERNEL, f64, Tet, tet)
#endif  // HDG_EMULATION

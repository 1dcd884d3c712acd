// The layout of the condensation's outputs (K_e, b_e, Z, u0), shared by the kernels that
// write them (condense.cu, condense_bordered.cu) and those that read them (recover.cu,
// assemble.cu, matrix_free.cu); src/stages/layout.rs reads it back on the host.
#pragma once

// Where value v (of `planes` per cell) of cell e lies in a sector-blocked array: the cells come
// in blocks of one 32-byte sector's worth (SB = 4 in f64, 8 in f32), each block's values
// element-fastest, value after value: [((e / SB) planes + v) SB + e % SB]; arrays hold
// ceil(n_cells / SB) SB cells. Consecutive cells still fill whole sectors, as in plain
// element-fastest planes, but the values of one cell lie within planes x 32 bytes instead of
// planes x 4 n_cells (f64): a warp writing 32 values of one cell (the block designs of the
// condensation, one element per thread block) touches 8 cache lines instead of 32
// (benchmarks/history/cuda-element-kernels.md, section 'Batched condensation ... against
// PyTorch: sector-blocked outputs'). The staged
// outputs of a block of cells are one contiguous range.
template <typename T>
__host__ __device__ __forceinline__ unsigned long long condensed_at(unsigned long long planes,
                                                                   unsigned long long v,
                                                                   unsigned long long e) {
    constexpr unsigned long long SB = 32 / sizeof(T);
    return ((e / SB) * planes + v) * SB + e % SB;
}

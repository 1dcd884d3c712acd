// What every kernel file shares: the scalar type names, the "no index" marker, and the
// grid-stride loop.
#pragma once

typedef unsigned long long u64;
typedef float f32;
typedef double f64;

// hdg_core::NONE (u32::MAX): no cell, no free face, a Dirichlet vertex.
#define NONE_INDEX 0xffffffffu

// Every elementwise kernel loops grid-stride, so that any grid size is correct.
#define GRID_STRIDE(i, n)                                                   \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);       \
         i += (u64)blockDim.x * gridDim.x)

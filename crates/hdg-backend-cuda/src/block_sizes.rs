//! The block sizes n_f with compiled DBF SpMV and block-solve kernels: the one source for the
//! Rust side ([`crate::design::kernels_exist`]) and for the kernels, whose instantiation lists
//! `build.rs` generates from this file (`block_sizes.cuh`, included by `kernels/dbf.cu` and
//! `kernels/vector.cu`).

/// Largest block size with compiled DBF SpMV and block-solve kernels (order k = 10 in 2D:
/// n_f = k + 1); every size from 1 up to it has them.
pub const MAX_BLOCK_SIZE: usize = 11;

/// Block sizes beyond [`MAX_BLOCK_SIZE`] with compiled kernels: the triangular faces of
/// tetrahedra at k = 4..=8 (`n_f = (k+1)(k+2)/2`), 7 slots only.
pub const TETRAHEDRON_BLOCK_SIZES: [usize; 5] = [15, 21, 28, 36, 45];

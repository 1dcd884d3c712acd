//! The pipeline's stages on the device, one module each ([`prepare`], [`condense`],
//! [`assemble`], [`recover`], [`postprocess`]; the element-data [`layout`] conversions and the
//! [`launch`] plumbing they share), registered here as [`LocalSolver`], [`Assembler`],
//! [`Postprocessor`] and [`Backend`] for [`CudaBackend`] (f32 and f64), so that
//! `hdg_core::pipeline::solve` runs the whole HDG pipeline on the GPU.
//!
//! Triangles and tetrahedra, orders k = 1..=[`crate::MAX_ELEMENT_ORDER`] (8), f32 and f64. The
//! kernels are templates on a cell-traits struct (`kernels/element_common.cuh`: dimension,
//! faces, face orientations, geometry record) instantiated per (cell type, order, precision).
//!
//! Condensation, recovery and postprocessing each come in two designs ([`crate::design`]):
//! one thread per element with its scratch in local memory (the CPU backend's kernels
//! operation for operation, so the CPU's numbers to the bit), and one thread block per element
//! with the matrices in shared memory (cooperative Cholesky and solves; for large elements,
//! up to n = 165, nl = 180, n' = 220 for tetrahedra at k = 8). Which design runs is chosen per
//! (cell type, order, precision) by [`crate::design::condensation_design`] and its siblings,
//! from measurements (`condense-bench`), and can be forced per stage with
//! [`DevicePrepared::set_design`] or [`crate::CudaSettings::design`]. Prepare checks once
//! that the (cell type, order) has kernels; every later stage checks only that it was given
//! its discretization's prepared data. The kernels are in one file per stage
//! (`kernels/condense.cu`, `condense_bordered.cu`, `recover.cu`, `postprocess.cu`; their
//! module and naming scheme: `element_kernels.rs`; the orders compiled: `element_instances.rs`);
//! the assembly (`kernels/assemble.cu`, one thread per block row, 5 slots for triangles, 7 for
//! tetrahedra) fills the same DBF matrix as the CPU's assembly, to the bit. Where kappa or c
//! varies inside cells ([`weighted`]: `kernels/weighted.cu`), one block kernel forms the
//! weighted element matrices by quadrature and condenses them in place of the designs, and
//! one more kernel after the recovery recovers q_h through the weighted mass matrix.
//!
//! # Device layouts (element-fastest)
//!
//! Per-cell data is stored element-fastest: field `f` of cell `e` at `[f * n_cells + e]`, so
//! the 32 threads of a warp (32 consecutive cells) read and write every field coalesced.
//!
//! | array | index |
//! | --- | --- |
//! | geometry (record of [`hdg_core::geometry::GeometryLayout`]: 14 fields for a triangle, 26 for a tetrahedron) | `[g * n_cells + e]` |
//! | orientations (u8), global faces (u32), tau | `[f * n_cells + e]`, local face f |
//! | kappa, reaction | `[e]` |
//! | element load F_K | `[i * n_cells + e]` |
//! | K_e (nl x nl) | sector-blocked, value `a * nl + b` (below) |
//! | b_e | sector-blocked, value `a` |
//! | Z = S^-1 P (n x nl) | sector-blocked, value `i * nl + a` |
//! | u0 | sector-blocked, value `i` |
//! | u_h | `[i * n_cells + e]` |
//! | q_h | `[(r * n + i) * n_cells + e]` |
//! | u* | `[j * n_cells + e]` |
//!
//! The condensation's outputs are *sector-blocked* (`kernels/condensed_layout.cuh`): the cells come
//! in blocks of one 32-byte sector's worth, `SB` = 4 in f64 and 8 in f32, and value `v` (of
//! `planes` per cell) of cell `e` is at `[((e / SB) * planes + v) * SB + e % SB]`, in arrays of
//! [`layout::condensed_cells`] cells. A warp of consecutive cells still reads and writes whole
//! sectors, and a thread block writing one element's values (the block designs of the condensation)
//! touches a quarter of the cache lines that element-fastest planes cost it: the bordered
//! condensation of tetrahedra at k = 6 in f64 gains most
//! (benchmarks/history/cuda-element-kernels.md, section 'Batched condensation ... against PyTorch:
//! sector-blocked outputs').
//!
//! Both designs keep these layouts, so every stage reads what either design of the previous
//! stage wrote. The reference tables are uploaded as they are in [`hdg_core::ElementTables`]
//! (one buffer per array, with 2 face orientations for triangles and 6 for tetrahedra): in
//! the thread design every thread of a warp reads the same entry (a broadcast), in the block
//! design the threads of a block read consecutive entries. The assembly writes the
//! [`crate::DeviceDbf`] layout directly (its module documentation) and the right-hand side.
//!
//! # Setup, and what stays on the host
//!
//! [`LocalSolver::prepare`] uploads the mesh (vertices and the cell-vertex table) and computes
//! the geometric factors on the device (`crate::geometry`: `hdg_core::geometry::cell_geometry`
//! to the bit); the face tables and the assembly's topology go up in their host layout and are
//! transposed into planes on the device. Two steps evaluate the problem's functions: the
//! element loads F_K (`(f, phi_i)_K`) and the error norms. For a manufactured source and exact
//! solution (`hdg_core::Source::Manufactured`, `hdg_core::ExactSolution::Manufactured`) both
//! run on the device (`crate::manufactured`: device code generated from the solutions'
//! description). For closures they run on the host (Rayon over cells): the loads in
//! [`LocalSolver::prepare`] by `hdg_core::load`, as the CPU's condensation computes them, then
//! uploaded, and [`Postprocessor::error_norms`] downloads u_h, q_h and u* and calls
//! `hdg_core::error_norms`.

pub mod assemble;
pub mod condense;
pub mod launch;
pub mod layout;
pub mod postprocess;
pub mod prepare;
pub mod recover;
pub mod weighted;

use hdg_core::{
    Assembler, Backend, Discretization, ErrorNorms, ExactSolution, HostCondensed, HostFields,
    LocalSolver, Postprocessor, Result,
};

use crate::device::{CudaBackend, DeviceReal};
use crate::operator::DeviceTraceOperator;
use crate::vector::DeviceVector;
use condense::DeviceCondensed;
use postprocess::DevicePostprocessed;
use prepare::DevicePrepared;
use recover::DeviceFields;

impl<T: DeviceReal> LocalSolver<T> for CudaBackend {
    type Prepared = DevicePrepared<T>;
    type Condensed = DeviceCondensed<T>;
    type LocalFields = DeviceFields<T>;

    fn prepare(&self, disc: &Discretization<'_, T>) -> Result<DevicePrepared<T>> {
        prepare::prepare(self, disc)
    }

    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceCondensed<T>> {
        condense::condense(self, disc, prep)
    }

    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
        trace: &DeviceVector<T>,
    ) -> Result<DeviceFields<T>> {
        recover::recover(self, disc, prep, condensed, trace)
    }

    fn condensed_to_host(&self, condensed: &DeviceCondensed<T>) -> Result<HostCondensed<T>> {
        condensed.to_host()
    }

    fn fields_to_host(&self, fields: &DeviceFields<T>) -> Result<HostFields<T>> {
        recover::fields_to_host(self, fields)
    }
}

impl<T: DeviceReal> Assembler<T> for CudaBackend {
    type Operator = DeviceTraceOperator<T>;

    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
    ) -> Result<(DeviceTraceOperator<T>, DeviceVector<T>)> {
        assemble::assemble(self, disc, prep, condensed)
    }

    /// The DBF matrix holds its own copy of every entry: K_e and b_e go (the recovery reads Z
    /// and u0 alone). The matrix-free operator reads them in every product: kept.
    fn release_assembly_inputs(
        &self,
        condensed: &mut DeviceCondensed<T>,
        operator: &DeviceTraceOperator<T>,
    ) {
        if operator.as_dbf().is_some() {
            condensed.release_trace_matrices();
        }
    }
}

impl<T: DeviceReal> Postprocessor<T> for CudaBackend {
    type Postprocessed = DevicePostprocessed<T>;

    fn postprocess(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
    ) -> Result<DevicePostprocessed<T>> {
        postprocess::postprocess(self, disc, prep, fields)
    }

    fn postprocessed_to_host(&self, post: &DevicePostprocessed<T>) -> Result<Vec<T>> {
        post.to_host()
    }

    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        post: &DevicePostprocessed<T>,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms> {
        postprocess::error_norms(self, disc, prep, fields, post, exact).map(|(norms, _)| norms)
    }

    fn squared_errors_of_first(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        post: &DevicePostprocessed<T>,
        exact: &ExactSolution,
        cells: usize,
    ) -> Result<[f64; 3]> {
        postprocess::squared_errors_of_first(self, disc, prep, fields, post, exact, cells)
    }
}

impl<T: DeviceReal> Backend<T> for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn describe(&self) -> String {
        format!("CUDA, {}", self.gpu.description)
    }
}

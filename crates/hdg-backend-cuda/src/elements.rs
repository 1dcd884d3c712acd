//! The element stages on the device: [`LocalSolver`], [`Assembler`], [`Postprocessor`] and
//! [`Backend`] for [`CudaBackend`] (f32 and f64), so that `hdg_core::pipeline::solve` runs the
//! whole HDG pipeline on the GPU.
//!
//! Triangles and tetrahedra, orders k = 1..=[`MAX_ELEMENT_ORDER`] (8), f32 and f64. The
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
//! [`DevicePrepared::set_design`] or the environment variable `HDG_CUDA_DESIGN`. Those kernels
//! are in `kernels/element_kernels.cu` (own module and launch configurations:
//! `element_kernels.rs`); the assembly (`kernels/elements.cu`, one thread per block row, 5
//! slots for triangles, 7 for tetrahedra) mirrors `dbf::assemble` to the bit.
//!
//! # Device layouts (element-fastest)
//!
//! Per-cell data is stored element-fastest: field `f` of cell `e` at `[f * n_cells + e]`, so
//! the 32 threads of a warp (32 consecutive cells) read and write every field coalesced.
//!
//! | array | index |
//! | --- | --- |
//! | geometry (record of [`GeometryLayout`]: 14 fields for a triangle, 26 for a tetrahedron) | `[g * n_cells + e]` |
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
//! The condensation's outputs are *sector-blocked* (`kernels/condensed_layout.cuh`): the cells
//! come in blocks of one 32-byte sector's worth, `SB` = 4 in f64 and 8 in f32, and value `v`
//! (of `planes` per cell) of cell `e` is at `[((e / SB) * planes + v) * SB + e % SB]`, in
//! arrays of [`condensed_cells`] cells. A warp of consecutive cells still reads and writes
//! whole sectors, and a thread block writing one element's values (the block designs of the
//! condensation) touches a quarter of the cache lines that element-fastest planes cost it:
//! 1.24x for the bordered condensation of tetrahedra at k = 6 in f64 (BENCHMARKS.md).
//!
//! Both designs keep these layouts, so every stage reads what either design of the previous
//! stage wrote. The reference tables are uploaded as they are in [`hdg_core::ElementTables`]
//! (one buffer per array, with 2 face orientations for triangles and 6 for tetrahedra): in
//! the thread design every thread of a warp reads the same entry (a broadcast), in the block
//! design the threads of a block read consecutive entries. The assembly writes the
//! [`DeviceDbf`] layout directly (its module documentation) and the right-hand side.
//!
//! # Setup, and what stays on the host
//!
//! [`LocalSolver::prepare`] uploads the mesh (vertices and the cell-vertex table) and computes
//! the geometric factors on the device ([`crate::geometry`]: `hdg_core::geometry::cell_geometry`
//! to the bit); the face tables and the assembly's topology go up in their host layout and are
//! transposed into planes on the device. Two steps need the problem's closures: the element
//! loads F_K (`(f, phi_i)_K`) and the error norms. For a problem built by
//! `Problem::manufactured` both run on the device ([`crate::manufactured`]: the kernels
//! evaluate f, u and grad u themselves, after a check against the closures at sample points).
//! For any other problem they run on the host (Rayon over cells): the loads in
//! [`LocalSolver::prepare`] by `hdg_core::load`, as the CPU's condensation computes them, then
//! uploaded, and [`Postprocessor::error_norms`] downloads u_h, q_h and u* and calls
//! `hdg_core::error_norms`.
use std::sync::Arc;

use cust::memory::{DeviceBuffer, DeviceCopy};
use hdg_core::error_norms;
use hdg_core::geometry::{mesh_geometry, GeometryLayout};
use hdg_core::load::element_load;
use hdg_core::{
    Assembler, Backend, CellType, CoreError, Discretization, ErrorNorms, ExactSolution, HostFields,
    LocalSolver, Postprocessor, Result,
};
use rayon::prelude::*;

use crate::dbf::DeviceDbf;
use crate::design::{
    block_threads, compiled, default_design, fallback, global_scratch_per_block, kernel_name,
    shared_bytes, Design, Precision, Stage,
};
use crate::device::{address, arg, grid, CudaBackend, DeviceReal, THREADS};
use crate::element_kernels::ElementKernels;
use crate::geometry::{upload_planes, Columns, DeviceMesh};
use crate::manufactured::DeviceManufactured;
use crate::matrix_free::{CondensedParts, MatrixFreeOperator};
use crate::operator::DeviceTraceOperator;
use crate::vector::{uninitialized, DeviceVector};
use crate::TraceOperatorKind;

pub use crate::design::MAX_ELEMENT_ORDER;

/// Addresses of the reference tables (`struct Tables` in element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
struct TableAddresses {
    derivative: u64,
    derivative_products: u64,
    face_mass: u64,
    face_trace: u64,
    derivative_trace: u64,
    trace_products: u64,
    post_stiffness: u64,
    post_derivative: u64,
}

// SAFETY: plain old data (device addresses as integers).
unsafe impl DeviceCopy for TableAddresses {}

/// Addresses of the per-cell arrays (`struct Cells` in element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
struct CellAddresses {
    n_cells: u64,
    geometry: u64,
    orientations: u64,
    faces: u64,
    kappa: u64,
    reaction: u64,
    tau: u64,
    load: u64,
}

// SAFETY: plain old data (device addresses and a count).
unsafe impl DeviceCopy for CellAddresses {}

/// Addresses of the assembly's topology planes (`struct AssemblyTopology` in
/// element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
struct TopologyAddresses {
    row_cell: u64,
    row_local: u64,
    slot_cell: u64,
    slot_row: u64,
    slot_col: u64,
    neighbours: u64,
    slot_face: u64,
}

// SAFETY: plain old data (device addresses).
unsafe impl DeviceCopy for TopologyAddresses {}

/// The reference tables on the device.
struct DeviceTables<T: DeviceCopy> {
    derivative: DeviceBuffer<T>,
    derivative_products: DeviceBuffer<T>,
    face_mass: DeviceBuffer<T>,
    face_trace: DeviceBuffer<T>,
    derivative_trace: DeviceBuffer<T>,
    trace_products: DeviceBuffer<T>,
    post_stiffness: DeviceBuffer<T>,
    post_derivative: DeviceBuffer<T>,
}

impl<T: DeviceCopy> DeviceTables<T> {
    fn addresses(&self) -> TableAddresses {
        TableAddresses {
            derivative: address(&self.derivative),
            derivative_products: address(&self.derivative_products),
            face_mass: address(&self.face_mass),
            face_trace: address(&self.face_trace),
            derivative_trace: address(&self.derivative_trace),
            trace_products: address(&self.trace_products),
            post_stiffness: address(&self.post_stiffness),
            post_derivative: address(&self.post_derivative),
        }
    }
}

/// The trace topology and Dirichlet data on the device (what assembly and recovery read).
/// Shared between the prepared data and the condensed data ([`Assembler::assemble`] gets only
/// the latter).
struct DeviceTopology<T: DeviceCopy> {
    n_rows: usize,
    slots: usize,
    n_active_blocks: usize,
    /// Free index of each global face (u32, [`NONE`] for Dirichlet faces).
    free_index: DeviceBuffer<u32>,
    /// Projected Dirichlet data per global face, `[face * n_f + m]`.
    dirichlet: DeviceBuffer<T>,
    /// `[side * n_rows + row]`.
    row_cell: DeviceBuffer<u32>,
    row_local: DeviceBuffer<u8>,
    /// `[a * n_rows + row]`.
    slot_cell: DeviceBuffer<u32>,
    slot_row: DeviceBuffer<u8>,
    slot_col: DeviceBuffer<u8>,
    neighbours: DeviceBuffer<u32>,
    slot_face: DeviceBuffer<u32>,
    /// Last: the buffers are freed while the context lives.
    _backend: CudaBackend,
}

impl<T: DeviceCopy> DeviceTopology<T> {
    fn addresses(&self) -> TopologyAddresses {
        TopologyAddresses {
            row_cell: address(&self.row_cell),
            row_local: address(&self.row_local),
            slot_cell: address(&self.slot_cell),
            slot_row: address(&self.slot_row),
            slot_col: address(&self.slot_col),
            neighbours: address(&self.neighbours),
            slot_face: address(&self.slot_face),
        }
    }
}

/// Discretization data on the device (layouts in the module documentation).
pub struct DevicePrepared<T: DeviceReal> {
    n_cells: usize,
    tables: DeviceTables<T>,
    geometry: DeviceBuffer<T>,
    orientations: DeviceBuffer<u8>,
    faces: DeviceBuffer<u32>,
    kappa: DeviceBuffer<T>,
    reaction: DeviceBuffer<T>,
    tau: DeviceBuffer<T>,
    /// F_K (from the device's manufactured fields, or the source closure on the host).
    load: DeviceBuffer<T>,
    /// The manufactured problem's description on the device, when the problem has one: the
    /// loads came from it if it agreed with the source closure, and the error norms use it if
    /// it agrees with the exact solution they are asked for.
    manufactured: Option<DeviceManufactured>,
    loads_on_device: bool,
    topology: Arc<DeviceTopology<T>>,
    /// The mesh on the device (the geometry kernel and the manufactured problems read it).
    mesh: DeviceMesh,
    cell_type: CellType,
    order: usize,
    /// The condensation, recovery and postprocessing kernels (both designs).
    kernels: Arc<ElementKernels>,
    /// Forced designs per [`Stage`] (None: the dispatch of [`crate::design`]).
    designs: [Option<Design>; 3],
    /// At most this many blocks per block-design launch (None: as many as are resident).
    grid_limit: Option<usize>,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl<T: DeviceReal> DevicePrepared<T> {
    /// Forces the design of `stage` (None: back to the dispatch of [`crate::design`]). A design
    /// that is not compiled for this cell type and order makes the stage fail with an error.
    pub fn set_design(&mut self, stage: Stage, design: Option<Design>) {
        self.designs[stage.index()] = design;
    }

    /// The design that runs `stage`: the forced one if any, else the dispatch of
    /// [`crate::design`]; a block condensation whose panel does not fit the device's shared
    /// memory (or a bordered one) runs as [`Design::BlockGlobal`] ([`crate::design::fallback`]).
    pub fn design(&self, stage: Stage) -> Result<Design> {
        let (cell, k, p) = (self.cell_type, self.order, precision::<T>());
        let wanted =
            self.designs[stage.index()].unwrap_or_else(|| default_design(stage, cell, k, p));
        if !matches!(wanted, Design::BlockShared | Design::Bordered) || stage != Stage::Condense {
            return Ok(wanted);
        }
        let max = self.kernels.max_dynamic_shared(&kernel_name(stage, wanted, cell, k, p))?;
        Ok(fallback(stage, wanted, cell, k, p, max))
    }

    /// Limits the grid of the block designs to `blocks` blocks (None: as many blocks as the
    /// device holds at once, the default). With fewer blocks than cells every block condenses
    /// several elements in turn: tests use it to exercise that loop on small meshes.
    pub fn set_grid_limit(&mut self, blocks: Option<usize>) {
        self.grid_limit = blocks.map(|b| b.max(1));
    }

    /// Whether the element loads were computed on the device from the problem's
    /// [`hdg_core::ManufacturedSpec`] (false: from the source closure on the host).
    pub fn loads_on_device(&self) -> bool {
        self.loads_on_device
    }

    /// Which image of the element kernels was loaded ("sm_90 SASS" or "compute_75 PTX").
    pub fn kernel_image(&self) -> &'static str {
        self.kernels.image()
    }

    /// The launch of `stage` in `design` for this discretization (errors: a design that is not
    /// compiled for this cell type and order, or whose shared memory the device cannot give).
    fn launch_for(&self, stage: Stage, design: Design) -> Result<StageLaunch> {
        let (cell, k, p) = (self.cell_type, self.order, precision::<T>());
        if !compiled(stage, cell, k, design) {
            return Err(CoreError::Backend(format!(
                "CUDA {stage}: the {design} design is not compiled for {cell:?} at k = {k} \
                 (see hdg_backend_cuda::design)"
            )));
        }
        let name = kernel_name(stage, design, cell, k, p);
        if design == Design::Thread {
            return Ok(StageLaunch {
                name,
                grid: grid(self.n_cells.max(1))?,
                threads: THREADS,
                shared: 0,
                scratch: 0,
            });
        }
        // The kernel's own launch bound: a kernel image built with other bounds than
        // design::max_threads assumes (HDG_CUDA_KERNEL_DIR) is an error here, not a failed launch.
        let most = self.kernels.max_block_threads(&name)?;
        let threads = match (stage, condense_threads_override()) {
            (Stage::Condense, Some(t)) => t.min(most),
            _ => block_threads(stage, design, cell, k, p),
        };
        if threads > most {
            return Err(CoreError::Backend(format!(
                "CUDA {stage} ({design} design, {cell:?}, k = {k}, {}): {threads} threads per \
                 block, but kernel {name} was built for at most {most}",
                p.name()
            )));
        }
        let shared = shared_bytes(stage, design, cell, k, p);
        let max = self.kernels.max_dynamic_shared(&name)?;
        if shared > max {
            return Err(CoreError::Backend(format!(
                "CUDA {stage} ({design} design, {cell:?}, k = {k}, {}): needs {shared} bytes of \
                 shared memory per block, the device allows {max}",
                p.name()
            )));
        }
        let mut per_sm = self.kernels.blocks_per_sm(&name, threads, shared)? as usize;
        if let Some(cap) = condense_blocks_override().filter(|_| stage == Stage::Condense) {
            per_sm = per_sm.min(cap);
        }
        let resident = per_sm * self.kernels.sms() as usize;
        let blocks = self.n_cells.min(resident).min(self.grid_limit.unwrap_or(usize::MAX)).max(1);
        Ok(StageLaunch {
            name,
            grid: u32::try_from(blocks).map_err(|_| CoreError::Backend("grid too large".into()))?,
            threads,
            shared,
            scratch: blocks * global_scratch_per_block(stage, design, cell, k, p),
        })
    }

    fn cells(&self) -> CellAddresses {
        CellAddresses {
            n_cells: self.n_cells as u64,
            geometry: address(&self.geometry),
            orientations: address(&self.orientations),
            faces: address(&self.faces),
            kappa: address(&self.kappa),
            reaction: address(&self.reaction),
            tau: address(&self.tau),
            load: address(&self.load),
        }
    }

    /// Cells.
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }

    /// The element loads F_K, element-contiguous (`[e * n + i]`), as uploaded.
    pub fn loads_to_host(&self) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(&self.load)?;
        Ok(to_element_contiguous(&v, self.n_cells))
    }
}

/// One launch of an element stage: kernel, grid, block, dynamic shared memory, and the values
/// of global scratch it needs (the block condensation's global panel).
struct StageLaunch {
    name: String,
    grid: u32,
    threads: u32,
    shared: usize,
    scratch: usize,
}

/// The [`Precision`] of T.
fn precision<T: DeviceReal>() -> Precision {
    Precision::from_suffix(T::SUFFIX)
}

/// Which array of a condensation [`DeviceCondensed::gather_to_host`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CondensedArray {
    /// K_e (nl x nl per element).
    TraceMatrices,
    /// b_e (nl).
    TraceLoads,
    /// Z = S^-1 P (n x nl).
    RecoveryOperator,
    /// u0 = S^-1 F (n).
    RecoveryLoad,
}

/// Condensed element data on the device (layouts in the module documentation).
pub struct DeviceCondensed<T: DeviceReal> {
    n_cells: usize,
    /// K_e, sector-blocked (module documentation), value `a * nl + b`.
    trace_matrices: DeviceBuffer<T>,
    /// b_e, sector-blocked, value `a`.
    trace_loads: DeviceBuffer<T>,
    /// Z, sector-blocked, value `i * nl + a`.
    recovery_operator: DeviceBuffer<T>,
    /// u0, sector-blocked, value `i`.
    recovery_load: DeviceBuffer<T>,
    topology: Arc<DeviceTopology<T>>,
    /// Per element: 0, or the failing pivot + 1 (-1 at element 0: a launch configuration error).
    info: DeviceBuffer<i32>,
    /// The failing pivot's value per element.
    pivots: DeviceBuffer<T>,
    /// The global panel of [`Design::BlockGlobal`] (grown on demand, kept for relaunches).
    scratch: Option<DeviceBuffer<T>>,
    kernels: Arc<ElementKernels>,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl<T: DeviceReal> DeviceCondensed<T> {
    /// What the matrix-free operator reads (`crate::matrix_free`): K_e, b_e, the Dirichlet
    /// data and the topology planes, in their device layouts.
    pub(crate) fn matrix_free_parts(&self) -> CondensedParts<'_, T> {
        let t = &*self.topology;
        CondensedParts {
            n_cells: self.n_cells,
            n_rows: t.n_rows,
            slots: t.slots,
            n_active_blocks: t.n_active_blocks,
            trace_matrices: &self.trace_matrices,
            trace_loads: &self.trace_loads,
            dirichlet: &t.dirichlet,
            row_cell: &t.row_cell,
            row_local: &t.row_local,
            slot_cell: &t.slot_cell,
            slot_row: &t.slot_row,
            slot_col: &t.slot_col,
            neighbours: &t.neighbours,
            slot_face: &t.slot_face,
        }
    }

    fn download(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(buffer)?;
        Ok(condensed_to_element_contiguous(&v, self.n_cells))
    }

    /// K_e of every element, element-contiguous as the CPU backend stores them
    /// (`[e * nl * nl + a * nl + b]`).
    pub fn trace_matrices_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.trace_matrices)
    }

    /// b_e of every element, element-contiguous (`[e * nl + a]`).
    pub fn trace_loads_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.trace_loads)
    }

    /// Z of every element, element-contiguous (`[e * n * nl + i * nl + a]`).
    pub fn recovery_operator_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.recovery_operator)
    }

    /// u0 of every element, element-contiguous (`[e * n + i]`).
    pub fn recovery_load_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.recovery_load)
    }

    /// Cells.
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }

    /// Fills K_e, b_e, Z and u0 with NaN (every bit set), so that an entry a kernel fails to
    /// write cannot pass for the result of an earlier run in the same memory (tests and
    /// benchmarks poison outputs before [`CudaBackend::condense_with`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        poison(
            &backend,
            [
                &mut self.trace_matrices,
                &mut self.trace_loads,
                &mut self.recovery_operator,
                &mut self.recovery_load,
            ],
        )
    }

    /// Elements `first..first + count` of one array, element-contiguous (a gather on the
    /// device: the whole arrays need not come back, which matters at tens of GB).
    pub fn gather_to_host(
        &self,
        array: CondensedArray,
        first: usize,
        count: usize,
    ) -> Result<Vec<T>> {
        let buffer = match array {
            CondensedArray::TraceMatrices => &self.trace_matrices,
            CondensedArray::TraceLoads => &self.trace_loads,
            CondensedArray::RecoveryOperator => &self.recovery_operator,
            CondensedArray::RecoveryLoad => &self.recovery_load,
        };
        if first + count > self.n_cells {
            return Err(CoreError::InvalidParameter {
                name: "element range",
                reason: format!("{first}..{} of {} cells", first + count, self.n_cells),
            });
        }
        let per = buffer.len() / condensed_cells::<T>(self.n_cells).max(1);
        let total = per * count;
        if total == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the gather below writes all `total` entries.
        let out = unsafe { uninitialized::<T>(&self.backend, total)? };
        let (src, dst) = (address(buffer), address(&out));
        let (per_u, first_u, count_u) = (per as u64, first as u64, count as u64);
        let name = format!("gather_elements_{}", T::SUFFIX);
        // SAFETY: gather_elements_T(const T* src, u64 per, u64 first, u64 count, T* out): src
        // holds per values of condensed_cells(n_cells) cells (sector-blocked),
        // first + count <= n_cells (checked), out per * count entries; one thread per output
        // entry.
        unsafe {
            self.kernels.launch(
                &name,
                grid(total)?,
                THREADS,
                0,
                &[arg(&src), arg(&per_u), arg(&first_u), arg(&count_u), arg(&dst)],
            )?
        };
        self.backend.gpu.download(&out)
    }
}

/// Recovered u_h and q_h on the device: u `[i * n_cells + e]`, q `[(r * n + i) * n_cells + e]`.
pub struct DeviceFields<T: DeviceReal> {
    n_cells: usize,
    u: DeviceBuffer<T>,
    q: DeviceBuffer<T>,
    /// One flag: -1 if a block recovery got less shared memory than its layout needs.
    info: DeviceBuffer<i32>,
    /// Last: the buffers are freed while the context lives.
    _backend: CudaBackend,
}

/// The postprocessed u* on the device, `[j * n_cells + e]`.
pub struct DevicePostprocessed<T: DeviceReal> {
    n_cells: usize,
    u_star: DeviceBuffer<T>,
    /// Per element: 0, or the failing pivot + 1 (-1 at element 0: a launch configuration error).
    info: DeviceBuffer<i32>,
    pivots: DeviceBuffer<T>,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl<T: DeviceReal> DevicePostprocessed<T> {
    /// u*, element-contiguous (`[e * n' + j]`, the CPU backend's layout).
    pub fn to_host(&self) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(&self.u_star)?;
        Ok(to_element_contiguous(&v, self.n_cells))
    }
}

/// Fills the buffers with NaN (every bit set), in stream order.
fn poison<T: DeviceReal, const B: usize>(
    backend: &CudaBackend,
    buffers: [&mut DeviceBuffer<T>; B],
) -> Result<()> {
    backend.gpu.bind()?;
    for buffer in buffers {
        // SAFETY: a memset on the backend's stream of a live buffer of this context: ordered
        // after the work queued before it and before the work queued after it; all bits set
        // is a valid f32 or f64 (a NaN).
        unsafe { buffer.set_8_async(0xff, &backend.gpu.stream) }
            .map_err(|e| crate::device::cuda_error("cannot poison device memory", e))?;
    }
    Ok(())
}

impl<T: DeviceReal> DeviceFields<T> {
    /// Fills u_h and q_h with NaN (see [`DeviceCondensed::poison`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self._backend.clone();
        poison(&backend, [&mut self.u, &mut self.q])
    }

    /// Cells.
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }
}

impl<T: DeviceReal> DevicePostprocessed<T> {
    /// Fills u* with NaN (see [`DeviceCondensed::poison`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        poison(&backend, [&mut self.u_star])
    }
}

/// `out[f * n_cells + e] = data[e * per + f]` (per = data.len() / n_cells).
fn to_element_fastest<T: Copy + Default + Send + Sync>(data: &[T], n_cells: usize) -> Vec<T> {
    if n_cells == 0 {
        return Vec::new();
    }
    let per = data.len() / n_cells;
    let mut out = vec![T::default(); data.len()];
    out.par_chunks_mut(n_cells).enumerate().for_each(|(f, plane)| {
        for (e, v) in plane.iter_mut().enumerate() {
            *v = data[e * per + f];
        }
    });
    out
}

/// Cells per block of the condensation's sector-blocked arrays: one 32-byte sector's worth of T
/// (`kernels/condensed_layout.cuh`).
fn condensed_block<T>() -> usize {
    32 / std::mem::size_of::<T>()
}

/// Cells the sector-blocked arrays of the condensation hold (module documentation): `n_cells`
/// rounded up to whole blocks ([`condensed_block`]).
pub fn condensed_cells<T>(n_cells: usize) -> usize {
    n_cells.div_ceil(condensed_block::<T>()) * condensed_block::<T>()
}

/// A blocked array (`cells` cells, a multiple of `block`, in blocks of `block` cells, each
/// block's values element-fastest: value v of cell e at `[((e / block) planes + v) block +
/// e % block]`, planes = data.len() / cells) to element-contiguous `[e * planes + v]` for the
/// first `n_cells` cells.
fn blocked_to_element_contiguous<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
    cells: usize,
    block: usize,
) -> Vec<T> {
    if cells == 0 {
        return Vec::new();
    }
    let planes = data.len() / cells;
    let mut out = vec![T::default(); n_cells * planes];
    out.par_chunks_mut(planes.max(1)).enumerate().for_each(|(e, record)| {
        let base = (e / block) * planes * block + e % block;
        for (v, x) in record.iter_mut().enumerate() {
            *x = data[base + v * block];
        }
    });
    out
}

/// A sector-blocked array of the condensation (`data.len()` = planes x [`condensed_cells`])
/// to element-contiguous `[e * planes + v]`, `n_cells` cells.
fn condensed_to_element_contiguous<T: Copy + Default + Send + Sync>(
    data: &[T],
    n_cells: usize,
) -> Vec<T> {
    blocked_to_element_contiguous(
        data,
        n_cells,
        condensed_cells::<T>(n_cells),
        condensed_block::<T>(),
    )
}

/// The inverse of [`to_element_fastest`]: element-fastest planes are one block of all the
/// cells.
fn to_element_contiguous<T: Copy + Default + Send + Sync>(data: &[T], n_cells: usize) -> Vec<T> {
    blocked_to_element_contiguous(data, n_cells, n_cells, n_cells)
}

/// The kernel-name part of an order: the order for triangles (`dbf_assemble_f64_k3`), the
/// order and `_tet` for tetrahedra (`dbf_assemble_f64_k3_tet`); see `kernels/elements.cu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelOrder {
    cell: CellType,
    k: usize,
}

impl std::fmt::Display for KernelOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cell {
            CellType::Triangle => write!(f, "{}", self.k),
            CellType::Tetrahedron => write!(f, "{}_tet", self.k),
        }
    }
}

/// The order, if the element kernels exist for it (triangles and tetrahedra, k <= 8), as the
/// assembly kernel's name wants it.
fn kernel_order<T: DeviceReal>(disc: &Discretization<'_, T>) -> Result<KernelOrder> {
    if disc.order == 0 || disc.order > MAX_ELEMENT_ORDER {
        return Err(CoreError::Backend(format!(
            "the CUDA element kernels support k = 1..={MAX_ELEMENT_ORDER} (k <= \
             {MAX_ELEMENT_ORDER}), not k = {}",
            disc.order
        )));
    }
    Ok(KernelOrder { cell: disc.mesh.cell_type(), k: disc.order })
}

/// The error of the first element whose `info` flag is set (0 = fine, else pivot + 1; -1: the
/// kernel got less dynamic shared memory than its layout needs).
fn first_failure<T: DeviceReal>(
    backend: &CudaBackend,
    info: &DeviceBuffer<i32>,
    values: &DeviceBuffer<T>,
) -> Result<()> {
    let flags = backend.gpu.download(info)?;
    if let Some(element) = flags.iter().position(|&v| v != 0) {
        if flags[element] < 0 {
            return Err(launch_configuration_error());
        }
        let values = backend.gpu.download(values)?;
        return Err(CoreError::NotPositiveDefinite {
            element,
            pivot: (flags[element] - 1) as usize,
            value: values[element].as_f64(),
        });
    }
    Ok(())
}

/// The error of a block kernel that found less dynamic shared memory than its layout needs.
fn launch_configuration_error() -> CoreError {
    CoreError::Backend(
        "an element kernel got less dynamic shared memory than its layout needs (the sizes of \
         design.rs and element_kernels.cu disagree)"
            .into(),
    )
}

impl<T: DeviceReal> LocalSolver<T> for CudaBackend {
    type Prepared = DevicePrepared<T>;
    type Condensed = DeviceCondensed<T>;
    type LocalFields = DeviceFields<T>;

    fn prepare(&self, disc: &Discretization<'_, T>) -> Result<DevicePrepared<T>> {
        let mesh = disc.mesh;
        let cell_type = mesh.cell_type();
        let t = &disc.tables;
        let layout = GeometryLayout::new(cell_type);
        let (d, vpc, fpc) = (mesh.dim(), cell_type.vertices_per_cell(), cell_type.faces_per_cell());
        let n_cells = mesh.n_cells();
        if n_cells > u32::MAX as usize || mesh.n_faces() >= u32::MAX as usize {
            return Err(CoreError::InvalidParameter {
                name: "mesh size",
                reason: format!("{n_cells} cells: too many for 32-bit indices"),
            });
        }

        let mut clock = PhaseClock::from_environment("prepare");
        let gpu = &self.gpu;
        // The mesh, and the geometry computed from it on the device (the CPU's to the bit).
        let device_mesh = DeviceMesh::upload(self, mesh)?;
        let geometry = device_mesh.geometry::<T>(layout.stride(), t.face_parameter_measure)?;
        clock.lap("mesh upload and device geometry");

        let mut orientations = vec![0u8; n_cells * fpc];
        let mut faces = vec![0u32; n_cells * fpc];
        orientations.par_chunks_mut(fpc).zip(faces.par_chunks_mut(fpc)).enumerate().for_each(
            |(c, (o, f))| {
                o.copy_from_slice(mesh.cell_face_orientations(c));
                for (slot, &face) in f.iter_mut().zip(mesh.cell_faces(c)) {
                    *slot = face as u32;
                }
            },
        );
        let orientations = upload_planes(self, &orientations, n_cells, Columns::all(fpc))?;
        let faces = upload_planes(self, &faces, n_cells, Columns::all(fpc))?;
        clock.lap("face tables");

        // Element loads F_K: on the device for a manufactured problem whose description the
        // device evaluates as the source closure does, else on the host from the closure.
        let manufactured = match &disc.problem.manufactured {
            Some(spec) => DeviceManufactured::new(self, spec, mesh)?,
            None => None,
        };
        let device_loads = match &manufactured {
            Some(m) if m.source_agrees(&disc.problem.source)? => {
                Some(m.loads(&device_mesh, t, &geometry)?)
            }
            _ => None,
        };
        let loads_on_device = device_loads.is_some();
        let load = match device_loads {
            Some(load) => load,
            None => {
                let (cell_vertices, host_geometry) =
                    mesh_geometry::<T>(mesh, t.face_parameter_measure);
                let n = t.n;
                let mut load = vec![T::zero(); n_cells * n];
                let source = disc.problem.source.as_ref();
                load.par_chunks_mut(n.max(1)).enumerate().with_min_len(64).for_each_init(
                    || vec![0.0; d],
                    |point, (e, out)| {
                        let det = host_geometry[e * layout.stride() + layout.det()];
                        let vertices = &cell_vertices[e * vpc * d..(e + 1) * vpc * d];
                        element_load(t, vertices, det, source, point, out);
                    },
                );
                gpu.upload(&to_element_fastest(&load, n_cells))?
            }
        };
        clock.lap(if loads_on_device { "loads (device)" } else { "loads (host)" });

        // Topology planes for the assembly, transposed on the device from the host layout.
        let topo = &disc.topology;
        let (n_rows, slots) = (topo.n_rows(), topo.slots);
        let slot_local: &[u8] = cust::memory::bytemuck::cast_slice(&topo.slot_local);
        let topology = DeviceTopology {
            n_rows,
            slots,
            n_active_blocks: topo.n_stored_blocks(),
            free_index: gpu.upload(&topo.free_index)?,
            dirichlet: gpu.upload(&disc.dirichlet_values)?,
            row_cell: upload_planes(
                self,
                cust::memory::bytemuck::cast_slice(&topo.row_cells),
                n_rows,
                Columns::all(2),
            )?,
            row_local: upload_planes(
                self,
                cust::memory::bytemuck::cast_slice(&topo.row_local_face),
                n_rows,
                Columns::all(2),
            )?,
            slot_cell: upload_planes(self, &topo.slot_cell, n_rows, Columns::all(slots))?,
            slot_row: upload_planes(
                self,
                slot_local,
                n_rows,
                Columns { per: 2 * slots, first: 0, step: 2, count: slots },
            )?,
            slot_col: upload_planes(
                self,
                slot_local,
                n_rows,
                Columns { per: 2 * slots, first: 1, step: 2, count: slots },
            )?,
            neighbours: upload_planes(self, &topo.neighbours, n_rows, Columns::all(slots))?,
            slot_face: upload_planes(self, &topo.slot_faces, n_rows, Columns::all(slots))?,
            _backend: self.clone(),
        };
        let tables = DeviceTables {
            derivative: gpu.upload(&t.derivative)?,
            derivative_products: gpu.upload(&t.derivative_products)?,
            face_mass: gpu.upload(&t.face_mass)?,
            face_trace: gpu.upload(&t.face_trace)?,
            derivative_trace: gpu.upload(&t.derivative_trace)?,
            trace_products: gpu.upload(&t.trace_products)?,
            post_stiffness: gpu.upload(&t.post_stiffness)?,
            post_derivative: gpu.upload(&t.post_derivative)?,
        };
        let prepared = DevicePrepared {
            n_cells,
            tables,
            geometry,
            orientations,
            faces,
            kappa: gpu.upload(&disc.kappa)?,
            reaction: gpu.upload(&disc.reaction)?,
            tau: gpu.upload(&to_element_fastest(&disc.tau, n_cells))?,
            load,
            manufactured,
            loads_on_device,
            topology: Arc::new(topology),
            mesh: device_mesh,
            cell_type,
            order: disc.order,
            kernels: Arc::new(ElementKernels::load(self)?),
            designs: designs_from_environment(cell_type, disc.order)?,
            grid_limit: None,
            backend: self.clone(),
        };
        clock.lap("topology, tables and per-cell uploads, kernel module");
        clock.report();
        Ok(prepared)
    }

    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceCondensed<T>> {
        let mut out = self.allocate_condensed(disc, prep)?;
        self.condense_with(disc, prep, prep.design(Stage::Condense)?, &mut out)?;
        first_failure(self, &out.info, &out.pivots)?;
        out.scratch = None;
        Ok(out)
    }

    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
        trace: &DeviceVector<T>,
    ) -> Result<DeviceFields<T>> {
        let mut fields = self.allocate_fields(disc, prep)?;
        self.recover_with(disc, prep, condensed, trace, prep.design(Stage::Recover)?, &mut fields)?;
        self.check_recovered(&fields)?;
        Ok(fields)
    }

    fn fields_to_host(&self, fields: &DeviceFields<T>) -> Result<HostFields<T>> {
        let u = self.gpu.download(&fields.u)?;
        let q = self.gpu.download(&fields.q)?;
        Ok(HostFields {
            u: to_element_contiguous(&u, fields.n_cells),
            q: to_element_contiguous(&q, fields.n_cells),
        })
    }
}

/// Builds the operator of the backend's [`TraceOperatorKind`]: the DBF matrix (assembly kernel
/// below) or the matrix-free operator ([`MatrixFreeOperator`], from K_e on the device).
impl<T: DeviceReal> Assembler<T> for CudaBackend {
    type Operator = DeviceTraceOperator<T>;

    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        condensed: &DeviceCondensed<T>,
    ) -> Result<(DeviceTraceOperator<T>, DeviceVector<T>)> {
        let k = kernel_order(disc)?;
        if self.trace_operator() == TraceOperatorKind::MatrixFree {
            let parts = condensed.matrix_free_parts();
            let (operator, rhs) = MatrixFreeOperator::assemble(self, disc.tables.n_f, &parts)?;
            return Ok((DeviceTraceOperator::MatrixFree(operator), rhs));
        }
        let nf = disc.tables.n_f;
        let topo = &condensed.topology;
        let (n_rows, slots) = (topo.n_rows, topo.slots);
        let pitch = DeviceDbf::<T>::pitch_for(n_rows);
        // Zeros: the padding rows of every plane stay zero; the kernel writes every real row.
        let values = self.gpu.zeros::<T>(slots * nf * nf * pitch)?;
        let columns = self.gpu.zeros::<u32>(slots * pitch)?;
        // SAFETY: the kernel writes all n_rows * nf entries.
        let rhs = unsafe { uninitialized::<T>(self, n_rows * nf)? };
        if n_rows > 0 {
            let (nr, p, s, nc) =
                (n_rows as u64, pitch as u64, slots as u32, condensed.n_cells as u64);
            let tp = topo.addresses();
            let (kp, bp, dp, vp, cp, rp) = (
                address(&condensed.trace_matrices),
                address(&condensed.trace_loads),
                address(&topo.dirichlet),
                address(&values),
                address(&columns),
                address(&rhs),
            );
            let kernel = format!("dbf_assemble_{}_k{k}", T::SUFFIX);
            // SAFETY: dbf_assemble_T_kK(u64 n_rows, u64 pitch, unsigned slots, u64 n_cells,
            // AssemblyTopology, const T* k, const T* b, const T* dirichlet, T* values,
            // unsigned* columns, T* rhs): the topology planes hold slots (resp. 2) * n_rows
            // entries, every cell index < n_cells and local face < 3, every slot face a mesh
            // face (dirichlet has n_faces * nf entries); values and columns the DBF planes of
            // `pitch` >= n_rows; rhs n_rows * nf; one thread per block row.
            unsafe {
                self.gpu.launch(
                    &kernel,
                    grid(n_rows)?,
                    &[
                        arg(&nr),
                        arg(&p),
                        arg(&s),
                        arg(&nc),
                        arg(&tp),
                        arg(&kp),
                        arg(&bp),
                        arg(&dp),
                        arg(&vp),
                        arg(&cp),
                        arg(&rp),
                    ],
                )?
            };
        }
        let operator = DeviceDbf::from_device_parts(
            self,
            n_rows,
            nf,
            slots,
            values,
            columns,
            topo.n_active_blocks,
        )?;
        Ok((DeviceTraceOperator::Dbf(operator), DeviceVector { buffer: rhs }))
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
        let mut post = self.allocate_postprocessed(disc, prep)?;
        self.postprocess_with(disc, prep, fields, prep.design(Stage::Postprocess)?, &mut post)?;
        first_failure(self, &post.info, &post.pivots)?;
        Ok(post)
    }

    /// On the device for a manufactured problem whose description agrees with `exact`
    /// ([`crate::manufactured`]); otherwise downloads u_h, q_h and u* and computes the norms on
    /// the host with `hdg_core::error_norms` and the closures.
    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        post: &DevicePostprocessed<T>,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms> {
        let t = &disc.tables;
        let mut clock = PhaseClock::from_environment("error norms");
        if let Some(m) = &prep.manufactured {
            if m.exact_agrees(exact)? {
                let sums = m.squared_errors(
                    &prep.mesh,
                    t,
                    &prep.geometry,
                    &prep.kappa,
                    &fields.u,
                    &fields.q,
                    &post.u_star,
                )?;
                clock.lap("device");
                clock.report();
                return Ok(ErrorNorms {
                    u: sums[0].sqrt(),
                    q: sums[1].sqrt(),
                    u_star: sums[2].sqrt(),
                });
            }
        }
        let host = LocalSolver::<T>::fields_to_host(self, fields)?;
        let u_star = post.to_host()?;
        let (cell_vertices, host_geometry) =
            mesh_geometry::<T>(disc.mesh, t.face_parameter_measure);
        let norms =
            error_norms::error_norms(disc, &host_geometry, &cell_vertices, &host, &u_star, exact);
        clock.lap("host (download and closures)");
        clock.report();
        Ok(norms)
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

/// Threads per block of the block condensation forced by the environment variable
/// `HDG_CUDA_CONDENSE_THREADS` (32..=1024, a multiple of 32; capped at the loaded kernel's
/// own launch bound, so that kernels built with other bounds, `HDG_CUDA_KERNEL_DIR`, can be
/// swept too), for sweeps with condense-bench; None (the size of [`block_threads`]) when
/// unset or invalid. The kernels take any block size.
fn condense_threads_override() -> Option<u32> {
    let t: u32 = std::env::var("HDG_CUDA_CONDENSE_THREADS").ok()?.trim().parse().ok()?;
    ((32..=1024).contains(&t) && t.is_multiple_of(32)).then_some(t)
}

/// At most this many resident blocks per multiprocessor for the block condensations, from the
/// environment variable `HDG_CUDA_CONDENSE_BLOCKS_PER_SM` (a positive integer), for sweeps
/// with condense-bench: fewer elements in flight write their K_e and Z into fewer L2 lines at
/// a time. None (as many as fit) when unset or invalid.
fn condense_blocks_override() -> Option<usize> {
    let b: usize = std::env::var("HDG_CUDA_CONDENSE_BLOCKS_PER_SM").ok()?.trim().parse().ok()?;
    (b >= 1).then_some(b)
}

/// Wall-clock phases of a host function, printed to standard error when the environment
/// variable `HDG_CUDA_PROFILE` is set (what `gpu-bench.sh e2e2d` uses to split the setup and
/// postprocessing stages); silent and nearly free otherwise.
struct PhaseClock {
    what: &'static str,
    enabled: bool,
    last: std::time::Instant,
    phases: Vec<(&'static str, f64)>,
}

impl PhaseClock {
    fn from_environment(what: &'static str) -> Self {
        let enabled = std::env::var_os("HDG_CUDA_PROFILE").is_some();
        PhaseClock { what, enabled, last: std::time::Instant::now(), phases: Vec::new() }
    }

    /// Ends the current phase. Uploads are synchronous and the device loads synchronise, so a
    /// phase includes its device work.
    fn lap(&mut self, phase: &'static str) {
        if self.enabled {
            let now = std::time::Instant::now();
            self.phases.push((phase, (now - self.last).as_secs_f64()));
            self.last = now;
        }
    }

    fn report(&self) {
        if self.enabled {
            let phases: Vec<String> =
                self.phases.iter().map(|(p, s)| format!("{p} {s:.4} s")).collect();
            eprintln!("[hdg-cuda profile] {}: {}", self.what, phases.join(", "));
        }
    }
}

/// The designs forced on a new discretization, per stage: the design of
/// [`crate::design::with_design`] on this thread, else that of the environment variable
/// `HDG_CUDA_DESIGN` (`thread`, `block`, `block-global`), where it is compiled for this cell
/// type and order (`block-global` means `block` for recovery and postprocessing); the
/// dispatch elsewhere, and everywhere when neither is set.
fn designs_from_environment(cell: CellType, k: usize) -> Result<[Option<Design>; 3]> {
    let mut designs = [None; 3];
    let design = match crate::design::forced_design() {
        Some(d) => d,
        None => {
            let value = std::env::var("HDG_CUDA_DESIGN").unwrap_or_default();
            if value.trim().is_empty() {
                return Ok(designs);
            }
            value
                .trim()
                .parse()
                .map_err(|reason| CoreError::InvalidParameter { name: "HDG_CUDA_DESIGN", reason })?
        }
    };
    for stage in Stage::ALL {
        let d = match (stage, design) {
            (Stage::Recover | Stage::Postprocess, Design::BlockGlobal) => Design::BlockShared,
            _ => design,
        };
        if compiled(stage, cell, k, d) {
            designs[stage.index()] = Some(d);
        }
    }
    Ok(designs)
}

/// Each stage in a chosen design into outputs allocated beforehand: what the trait methods
/// run (with the dispatched design), and what benchmarks time (launches only: no allocation,
/// no synchronisation, no check).
impl CudaBackend {
    /// Outputs of a condensation (uninitialised until [`CudaBackend::condense_with`] runs).
    pub fn allocate_condensed<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceCondensed<T>> {
        kernel_order(disc)?;
        let t = &disc.tables;
        let (n, nl, n_cells) = (t.n, t.n_local_trace(), prep.n_cells);
        let cells = condensed_cells::<T>(n_cells);
        // SAFETY (all four): every condensation kernel writes every entry of every element
        // before anything reads them, or flags the element, and then condense returns an error;
        // the padding cells of the last block are never read.
        let trace_matrices = unsafe { uninitialized::<T>(self, cells * nl * nl)? };
        let trace_loads = unsafe { uninitialized::<T>(self, cells * nl)? };
        let recovery_operator = unsafe { uninitialized::<T>(self, cells * n * nl)? };
        let recovery_load = unsafe { uninitialized::<T>(self, cells * n)? };
        Ok(DeviceCondensed {
            n_cells,
            trace_matrices,
            trace_loads,
            recovery_operator,
            recovery_load,
            topology: prep.topology.clone(),
            info: self.gpu.zeros::<i32>(n_cells.max(1))?,
            pivots: self.gpu.zeros::<T>(n_cells.max(1))?,
            scratch: None,
            kernels: prep.kernels.clone(),
            backend: self.clone(),
        })
    }

    /// Queues the condensation in `design` into `out` (from [`CudaBackend::allocate_condensed`]
    /// for the same discretization). Failed pivots are flagged in `out`, not reported: see
    /// [`CudaBackend::check_condensed`].
    pub fn condense_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        design: Design,
        out: &mut DeviceCondensed<T>,
    ) -> Result<()> {
        kernel_order(disc)?;
        let n_cells = prep.n_cells;
        if out.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "condensed outputs",
                reason: format!("{} cells, the discretization has {n_cells}", out.n_cells),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        let launch = prep.launch_for(Stage::Condense, design)?;
        if out.scratch.as_ref().map_or(0, |b| b.len()) < launch.scratch {
            out.scratch = None;
            // SAFETY: scratch of the block condensation: written before read, per block.
            out.scratch = Some(unsafe { uninitialized::<T>(self, launch.scratch)? });
        }
        let (tb, cells) = (prep.tables.addresses(), prep.cells());
        let (kp, bp, zp, up, ip, pp) = (
            address(&out.trace_matrices),
            address(&out.trace_loads),
            address(&out.recovery_operator),
            address(&out.recovery_load),
            address(&out.info),
            address(&out.pivots),
        );
        let sp = out.scratch.as_ref().map_or(0, |b| address(b));
        let mut args =
            vec![arg(&tb), arg(&cells), arg(&kp), arg(&bp), arg(&zp), arg(&up), arg(&ip), arg(&pp)];
        if design.is_block() {
            args.push(arg(&sp));
        }
        // SAFETY: condense_{thread,block,block_global}_T_{tri,tet}K(Tables, Cells, T* k,
        // T* b, T* z, T* u0, int* info, T* pv[, T* scratch]): the tables are the uploaded
        // ElementTables of this cell type and order (the kernel's N, NF, faces and
        // orientations: the name carries cell type and order), the cell arrays hold n_cells
        // records in the documented layouts, the outputs condensed_cells(n_cells) * (nl^2, nl,
        // n nl, n) and n_cells * (1, 1) entries (allocated for this discretization, n_cells
        // checked above); the thread design runs one thread per cell (threads beyond n_cells
        // return), the block designs a grid-stride loop over cells with the block size and
        // dynamic shared memory of design.rs (checked by the kernel) and, for block_global,
        // `launch.scratch` = grid * n (nl + 1) values of scratch (allocated above).
        unsafe {
            prep.kernels.launch(&launch.name, launch.grid, launch.threads, launch.shared, &args)
        }
    }

    /// The error of the first element whose condensation failed (not positive definite), if
    /// any (waits for the stream).
    pub fn check_condensed<T: DeviceReal>(&self, out: &DeviceCondensed<T>) -> Result<()> {
        first_failure(self, &out.info, &out.pivots)
    }

    /// Outputs of a recovery (uninitialised until [`CudaBackend::recover_with`] runs).
    pub fn allocate_fields<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceFields<T>> {
        let t = &disc.tables;
        let (n, d, n_cells) = (t.n, t.dim, prep.n_cells);
        // SAFETY: every recovery kernel writes every entry of u and q.
        let u = unsafe { uninitialized::<T>(self, n_cells * n)? };
        let q = unsafe { uninitialized::<T>(self, n_cells * d * n)? };
        Ok(DeviceFields { n_cells, u, q, info: self.gpu.zeros::<i32>(1)?, _backend: self.clone() })
    }

    /// Queues the recovery in `design` into `fields` (from [`CudaBackend::allocate_fields`]).
    pub fn recover_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
        trace: &DeviceVector<T>,
        design: Design,
        fields: &mut DeviceFields<T>,
    ) -> Result<()> {
        kernel_order(disc)?;
        let n_cells = prep.n_cells;
        if trace.len() != disc.trace_dofs() {
            return Err(CoreError::InvalidParameter {
                name: "vector length",
                reason: format!(
                    "recover: {} trace unknowns expected, got {}",
                    disc.trace_dofs(),
                    trace.len()
                ),
            });
        }
        if condensed.n_cells != n_cells || fields.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "recovery inputs",
                reason: format!(
                    "{} condensed cells and {} field cells for {n_cells} cells",
                    condensed.n_cells, fields.n_cells
                ),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        let launch = prep.launch_for(Stage::Recover, design)?;
        let (tb, cells) = (prep.tables.addresses(), prep.cells());
        let topo = &condensed.topology;
        let (fi, tr, dir, zp, u0p, up, qp, ip) = (
            address(&topo.free_index),
            trace.address(),
            address(&topo.dirichlet),
            address(&condensed.recovery_operator),
            address(&condensed.recovery_load),
            address(&fields.u),
            address(&fields.q),
            address(&fields.info),
        );
        let mut args = vec![
            arg(&tb),
            arg(&cells),
            arg(&fi),
            arg(&tr),
            arg(&dir),
            arg(&zp),
            arg(&u0p),
            arg(&up),
            arg(&qp),
        ];
        if design.is_block() {
            args.push(arg(&ip));
        }
        // SAFETY: recover_{thread,block}_T_{tri,tet}K(Tables, Cells, const unsigned*
        // free_index, const T* trace, const T* dirichlet, const T* z, const T* u0, T* u, T* q
        // [, int* info]): free_index has one entry per global face (every faces[] entry is a
        // face of the mesh), a free index is < n_rows and trace has n_rows * nf entries
        // (checked above), dirichlet n_faces * nf; z, u0 of a condensation of these n_cells
        // cells; u, q n_cells * (n, d n) (checked above); info one entry. Launch sizes as in
        // condense_with.
        unsafe {
            prep.kernels.launch(&launch.name, launch.grid, launch.threads, launch.shared, &args)
        }
    }

    /// The error of a recovery whose block kernel got too little shared memory, if so (waits).
    pub fn check_recovered<T: DeviceReal>(&self, fields: &DeviceFields<T>) -> Result<()> {
        if self.gpu.download(&fields.info)?[0] != 0 {
            return Err(launch_configuration_error());
        }
        Ok(())
    }

    /// Outputs of a postprocessing (uninitialised until [`CudaBackend::postprocess_with`]).
    pub fn allocate_postprocessed<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DevicePostprocessed<T>> {
        let (np, n_cells) = (disc.tables.n_post, prep.n_cells);
        // SAFETY: every postprocessing kernel writes every entry, or flags the element (then
        // postprocess returns an error).
        let u_star = unsafe { uninitialized::<T>(self, n_cells * np)? };
        Ok(DevicePostprocessed {
            n_cells,
            u_star,
            info: self.gpu.zeros::<i32>(n_cells.max(1))?,
            pivots: self.gpu.zeros::<T>(n_cells.max(1))?,
            backend: self.clone(),
        })
    }

    /// Queues the postprocessing in `design` into `post` (from
    /// [`CudaBackend::allocate_postprocessed`]); failed pivots are flagged in `post`.
    pub fn postprocess_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        design: Design,
        post: &mut DevicePostprocessed<T>,
    ) -> Result<()> {
        kernel_order(disc)?;
        let n_cells = prep.n_cells;
        if fields.n_cells != n_cells || post.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "postprocessing inputs",
                reason: format!(
                    "{} field cells and {} output cells for {n_cells} cells",
                    fields.n_cells, post.n_cells
                ),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        let launch = prep.launch_for(Stage::Postprocess, design)?;
        let (tb, cells) = (prep.tables.addresses(), prep.cells());
        let (up, qp, sp, ip, pp) = (
            address(&fields.u),
            address(&fields.q),
            address(&post.u_star),
            address(&post.info),
            address(&post.pivots),
        );
        // SAFETY: postprocess_{thread,block}_T_{tri,tet}K(Tables, Cells, const T* u,
        // const T* q, T* u_star, int* info, T* pv): u and q of n_cells cells (n, d n per
        // cell), u_star n_cells * n', info and pv n_cells (checked above); launch sizes as in
        // condense_with.
        unsafe {
            prep.kernels.launch(
                &launch.name,
                launch.grid,
                launch.threads,
                launch.shared,
                &[arg(&tb), arg(&cells), arg(&up), arg(&qp), arg(&sp), arg(&ip), arg(&pp)],
            )
        }
    }

    /// The error of the first element whose postprocessing failed, if any (waits).
    pub fn check_postprocessed<T: DeviceReal>(&self, post: &DevicePostprocessed<T>) -> Result<()> {
        first_failure(self, &post.info, &post.pivots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sector-blocked layout written out by hand: 5 cells of 3 values in f64 (blocks of 4
    /// cells: the second block holds cell 4 and three padding cells), 9 cells in f32 (blocks
    /// of 8).
    #[test]
    fn condensed_layout_reads_back_element_contiguous() {
        assert_eq!(condensed_cells::<f64>(5), 8);
        assert_eq!(condensed_cells::<f32>(9), 16);
        assert_eq!(condensed_cells::<f64>(0), 0);
        // Cell e, value v as 10 e + v; padding -1.
        let f64_blocked: Vec<f64> = vec![
            0.0, 10.0, 20.0, 30.0, 1.0, 11.0, 21.0, 31.0, 2.0, 12.0, 22.0, 32.0, // cells 0..4
            40.0, -1.0, -1.0, -1.0, 41.0, -1.0, -1.0, -1.0, 42.0, -1.0, -1.0, -1.0, // cell 4
        ];
        let expected: Vec<f64> =
            (0..5).flat_map(|e| (0..3).map(move |v| (10 * e + v) as f64)).collect();
        assert_eq!(condensed_to_element_contiguous(&f64_blocked, 5), expected);
        let mut f32_blocked = vec![-1.0f32; 16 * 2];
        for e in 0..9 {
            for v in 0..2 {
                f32_blocked[(e / 8) * 16 + v * 8 + e % 8] = (10 * e + v) as f32;
            }
        }
        let expected: Vec<f32> =
            (0..9).flat_map(|e| (0..2).map(move |v| (10 * e + v) as f32)).collect();
        assert_eq!(condensed_to_element_contiguous(&f32_blocked, 9), expected);
        // Element-fastest planes (one block of all the cells), and back.
        let fastest = vec![0.0, 10.0, 20.0, 1.0, 11.0, 21.0];
        let contiguous = vec![0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
        assert_eq!(to_element_contiguous(&fastest, 3), contiguous);
        assert_eq!(to_element_fastest(&contiguous, 3), fastest);
        assert!(to_element_contiguous::<f64>(&[], 0).is_empty());
    }
}

//! Prepare: the discretization on the device (mesh, geometry, tables, per-cell data, the
//! assembly's topology, the element loads), and the launch of each element stage.
use std::sync::Arc;

use cust::memory::{DeviceBuffer, DeviceCopy};
use hdg_core::coefficients::PointCoefficients;
use hdg_core::geometry::{mesh_geometry, GeometryLayout};
use hdg_core::load::element_load;
use hdg_core::{CellType, CoreError, Discretization, Result};
use rayon::prelude::*;

use crate::design::{
    block_threads, compiled, default_design, fallback, global_scratch_per_block, kernel_name,
    shared_bytes, Design, ElementStage, Precision, MAX_ELEMENT_ORDER,
};
use crate::device::{
    address, arg, check_device_memory, elementwise_blocks, grid, CudaBackend, DeviceReal, THREADS,
};
use crate::element_instances::weighted_scratch_values;
use crate::element_kernels::ElementKernels;
use crate::geometry::{upload_planes, Columns, DeviceMesh};
use crate::manufactured::DeviceSource;
use crate::stages::launch::PhaseClock;
use crate::stages::layout::{to_element_contiguous, to_element_fastest};
use crate::vector::uninitialized;
use crate::TraceOperatorKind;

/// Addresses of the reference tables (`struct Tables` in element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct TableAddresses {
    pub(crate) derivative: u64,
    pub(crate) derivative_products: u64,
    pub(crate) face_mass: u64,
    pub(crate) face_trace: u64,
    pub(crate) derivative_trace: u64,
    pub(crate) trace_products: u64,
    pub(crate) post_stiffness: u64,
    pub(crate) post_derivative: u64,
}

// SAFETY: plain old data (device addresses as integers).
unsafe impl DeviceCopy for TableAddresses {}

/// Addresses of the per-cell arrays (`struct Cells` in element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CellAddresses {
    pub(crate) n_cells: u64,
    pub(crate) geometry: u64,
    pub(crate) orientations: u64,
    pub(crate) faces: u64,
    pub(crate) kappa: u64,
    pub(crate) reaction: u64,
    pub(crate) tau: u64,
    pub(crate) load: u64,
}

// SAFETY: plain old data (device addresses and a count).
unsafe impl DeviceCopy for CellAddresses {}

/// Addresses of the assembly's topology planes (`struct AssemblyTopology` in
/// element_common.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct TopologyAddresses {
    pub(crate) row_cell: u64,
    pub(crate) row_local: u64,
    pub(crate) slot_cell: u64,
    pub(crate) slot_row: u64,
    pub(crate) slot_col: u64,
    pub(crate) neighbours: u64,
    pub(crate) slot_face: u64,
}

// SAFETY: plain old data (device addresses).
unsafe impl DeviceCopy for TopologyAddresses {}

/// The reference tables on the device.
pub(crate) struct DeviceTables<T: DeviceCopy> {
    pub(crate) derivative: DeviceBuffer<T>,
    pub(crate) derivative_products: DeviceBuffer<T>,
    pub(crate) face_mass: DeviceBuffer<T>,
    pub(crate) face_trace: DeviceBuffer<T>,
    pub(crate) derivative_trace: DeviceBuffer<T>,
    pub(crate) trace_products: DeviceBuffer<T>,
    pub(crate) post_stiffness: DeviceBuffer<T>,
    pub(crate) post_derivative: DeviceBuffer<T>,
}

impl<T: DeviceCopy> DeviceTables<T> {
    pub(crate) fn addresses(&self) -> TableAddresses {
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
pub(crate) struct DeviceTopology<T: DeviceCopy> {
    pub(crate) n_rows: usize,
    pub(crate) slots: usize,
    pub(crate) n_active_blocks: usize,
    /// Free index of each global face (u32, [`NONE`] for Dirichlet faces).
    pub(crate) free_index: DeviceBuffer<u32>,
    /// Projected Dirichlet data per global face, `[face * n_f + m]`.
    pub(crate) dirichlet: DeviceBuffer<T>,
    /// `[side * n_rows + row]`.
    pub(crate) row_cell: DeviceBuffer<u32>,
    pub(crate) row_local: DeviceBuffer<u8>,
    /// `[a * n_rows + row]`.
    pub(crate) slot_cell: DeviceBuffer<u32>,
    pub(crate) slot_row: DeviceBuffer<u8>,
    pub(crate) slot_col: DeviceBuffer<u8>,
    pub(crate) neighbours: DeviceBuffer<u32>,
    pub(crate) slot_face: DeviceBuffer<u32>,
    /// Last: the buffers are freed while the context lives.
    _backend: CudaBackend,
}

impl<T: DeviceCopy> DeviceTopology<T> {
    pub(crate) fn addresses(&self) -> TopologyAddresses {
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
    pub(crate) n_cells: usize,
    pub(crate) tables: DeviceTables<T>,
    pub(crate) geometry: DeviceBuffer<T>,
    pub(crate) orientations: DeviceBuffer<u8>,
    pub(crate) faces: DeviceBuffer<u32>,
    pub(crate) kappa: DeviceBuffer<T>,
    pub(crate) reaction: DeviceBuffer<T>,
    pub(crate) tau: DeviceBuffer<T>,
    /// kappa^-1 and c at quadrature points, where they vary inside cells
    /// ([`DeviceWeighted`], read by [`crate::stages::weighted`]).
    pub(crate) weighted: Option<DeviceWeighted<T>>,
    /// F_K (from a manufactured source on the device, or from the source on the host).
    pub(crate) load: DeviceBuffer<T>,
    pub(crate) loads_on_device: bool,
    pub(crate) topology: Arc<DeviceTopology<T>>,
    /// The mesh on the device (the geometry kernel and the manufactured problems read it).
    pub(crate) mesh: DeviceMesh,
    /// The (cell type, order) these data are for: checked at prepare to have kernels, and by
    /// every stage to be the discretization's.
    pub(crate) kernel_order: KernelOrder,
    /// The condensation, recovery and postprocessing kernels (both designs).
    pub(crate) kernels: Arc<ElementKernels>,
    /// Forced designs per [`ElementStage`] (None: the dispatch of [`crate::design`]).
    pub(crate) designs: [Option<Design>; 3],
    /// At most this many blocks per block-design launch (None: as many as are resident).
    pub(crate) grid_limit: Option<usize>,
    /// Last: the buffers are freed while the context lives.
    pub(crate) backend: CudaBackend,
}

impl<T: DeviceReal> DevicePrepared<T> {
    /// Forces the design of `stage` (None: back to the dispatch of [`crate::design`]). A design
    /// that is not compiled for this cell type and order makes the stage fail with an error.
    pub fn set_design(&mut self, stage: ElementStage, design: Option<Design>) {
        self.designs[stage.index()] = design;
    }

    /// The design that runs `stage`: the forced one if any, else the dispatch of
    /// [`crate::design`]; a block condensation whose panel does not fit the device's shared
    /// memory (or a bordered one) runs as [`Design::BlockGlobal`] ([`crate::design::fallback`]).
    pub fn design(&self, stage: ElementStage) -> Result<Design> {
        let (cell, k, p) = (self.kernel_order.cell, self.kernel_order.k, precision::<T>());
        let wanted =
            self.designs[stage.index()].unwrap_or_else(|| default_design(stage, cell, k, p));
        if !matches!(wanted, Design::BlockShared | Design::Bordered)
            || stage != ElementStage::Condense
        {
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
    /// [`hdg_core::Source::Manufactured`] (false: from the source on the host).
    pub fn loads_on_device(&self) -> bool {
        self.loads_on_device
    }

    /// Which image of the element kernels was loaded ("sm_90 SASS" or "compute_75 PTX").
    pub fn kernel_image(&self) -> &'static str {
        self.kernels.image()
    }

    /// The launch of `stage` in `design` for this discretization (errors: a design that is not
    /// compiled for this cell type and order, or whose shared memory the device cannot give).
    pub(crate) fn launch_for(&self, stage: ElementStage, design: Design) -> Result<StageLaunch> {
        let (cell, k, p) = (self.kernel_order.cell, self.kernel_order.k, precision::<T>());
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
        // design::max_threads assumes (`CudaSettings::kernel_dir`) is an error here, not a failed launch.
        let most = self.kernels.max_block_threads(&name)?;
        let settings = self.backend.settings();
        let threads = match (stage, settings.condense_threads) {
            (ElementStage::Condense, Some(t)) => t.min(most),
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
        if let Some(cap) =
            settings.condense_blocks_per_sm.filter(|_| stage == ElementStage::Condense)
        {
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

    pub(crate) fn cells(&self) -> CellAddresses {
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

    /// The order and cell type these data were prepared for, if they are `disc`'s: a stage
    /// given another discretization's prepared data returns this error instead of reading
    /// arrays of the wrong sizes.
    pub(crate) fn kernel_order_of(&self, disc: &Discretization<'_, T>) -> Result<KernelOrder> {
        let ours = self.kernel_order;
        if (disc.mesh.cell_type(), disc.order, disc.mesh.n_cells())
            != (ours.cell, ours.k, self.n_cells)
        {
            return Err(CoreError::InvalidParameter {
                name: "prepared data",
                reason: format!(
                    "prepared for {} cells at {ours}, the discretization has {} cells at {}",
                    self.n_cells,
                    disc.mesh.n_cells(),
                    KernelOrder { cell: disc.mesh.cell_type(), k: disc.order }
                ),
            });
        }
        Ok(ours)
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

/// Addresses and sizes of the coefficients at points (`struct Weighted` in
/// `kernels/weighted.cu`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct WeightedAddresses {
    basis: u64,
    weights: u64,
    inverse_kappa: u64,
    reaction: u64,
    points: i32,
    components: i32,
    scratch_values: u64,
}

// SAFETY: plain old data (device addresses as integers and two counts).
unsafe impl DeviceCopy for WeightedAddresses {}

/// The coefficients at points on the device.
pub(crate) struct DeviceWeighted<T: DeviceReal> {
    basis: DeviceBuffer<T>,
    weights: DeviceBuffer<T>,
    inverse_kappa: DeviceBuffer<T>,
    reaction: DeviceBuffer<T>,
    points: usize,
    components: usize,
    /// kappa = 1 per cell: what the postprocessing reads with the projected kappa^-1 q_h.
    pub(crate) ones: DeviceBuffer<T>,
    /// Values of scratch per block.
    pub(crate) scratch_values: usize,
}

impl<T: DeviceReal> DeviceWeighted<T> {
    /// Uploads `points` (of `disc`) and the coefficient rule of its tables.
    pub(crate) fn upload(
        backend: &CudaBackend,
        disc: &Discretization<'_, T>,
        points: &PointCoefficients<T>,
    ) -> Result<Self> {
        let t = &disc.tables;
        let weights: Vec<T> =
            t.coefficient_rule.weights.iter().map(|&w| T::from_f64_lossy(w)).collect();
        let gpu = &backend.gpu;
        Ok(DeviceWeighted {
            basis: gpu.upload(&t.coefficient_basis)?,
            weights: gpu.upload(&weights)?,
            inverse_kappa: gpu.upload(&points.inverse_kappa)?,
            reaction: gpu.upload(&points.reaction)?,
            points: points.points,
            components: points.kappa_components,
            ones: gpu.upload(&vec![T::one(); disc.mesh.n_cells()])?,
            scratch_values: weighted_scratch_values(t.dim, t.n, t.n_local_trace(), points.points),
        })
    }

    pub(crate) fn addresses(&self) -> WeightedAddresses {
        WeightedAddresses {
            basis: address(&self.basis),
            weights: address(&self.weights),
            inverse_kappa: address(&self.inverse_kappa),
            reaction: address(&self.reaction),
            points: self.points as i32,
            components: self.components as i32,
            scratch_values: self.scratch_values as u64,
        }
    }
}

/// One launch of an element stage: kernel, grid, block, dynamic shared memory, and the values
/// of global scratch it needs (the block condensation's global panel).
pub(crate) struct StageLaunch {
    pub(crate) name: String,
    pub(crate) grid: u32,
    pub(crate) threads: u32,
    pub(crate) shared: usize,
    pub(crate) scratch: usize,
}

/// The [`Precision`] of T.
pub(crate) fn precision<T: DeviceReal>() -> Precision {
    Precision::of::<T>()
}

/// The kernel-name part of a cell type and order, `{cell}{k}` (`dbf_assemble_f64_tri3`,
/// `dbf_assemble_f64_tet3`; `crate::element_kernels` has the naming scheme).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KernelOrder {
    pub(crate) cell: CellType,
    pub(crate) k: usize,
}

impl std::fmt::Display for KernelOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", crate::design::cell_name(self.cell), self.k)
    }
}

/// The capability check of [`prepare`]: the order, if the element kernels exist for it
/// (triangles and tetrahedra, k <= 8, both precisions), as the kernels' names want it.
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

/// The designs forced on a new discretization, per stage, by [`CudaSettings::design`]
/// (`crate::settings`): that design where it is compiled for this cell type and order
/// (`block-global` means `block` for recovery and postprocessing), the dispatch elsewhere.
pub(crate) fn forced_designs(
    forced: Option<Design>,
    cell: CellType,
    k: usize,
) -> [Option<Design>; 3] {
    let mut designs = [None; 3];
    let Some(design) = forced else { return designs };
    for stage in ElementStage::ALL {
        let d = match (stage, design) {
            (ElementStage::Recover | ElementStage::Postprocess, Design::BlockGlobal) => {
                Design::BlockShared
            }
            _ => design,
        };
        if compiled(stage, cell, k, d) {
            designs[stage.index()] = Some(d);
        }
    }
    designs
}

/// The Dirichlet data per global face (`[face * n_f + m]`, zero off the Dirichlet faces) on
/// the device: zeros, and the Dirichlet faces' values scattered into them (kernel
/// `scatter_faces`), so that only the boundary's values cross the bus.
fn dirichlet_table<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
) -> Result<DeviceBuffer<T>> {
    let n_f = disc.tables.n_f;
    let topo = &disc.topology;
    let faces: Vec<u32> = (0..topo.n_faces as u32)
        .into_par_iter()
        .filter(|&f| topo.is_dirichlet(f as usize))
        .collect();
    let values: Vec<T> = faces
        .par_iter()
        .flat_map_iter(|&f| disc.dirichlet_values[f as usize * n_f..][..n_f].iter().copied())
        .collect();
    let gpu = &backend.gpu;
    let table = gpu.zeros::<T>(topo.n_faces * n_f)?;
    if !values.is_empty() {
        let (faces_device, values_device) = (gpu.upload(&faces)?, gpu.upload(&values)?);
        let (count, nf) = (faces.len() as u64, n_f as u32);
        let (fp, vp, tp) = (address(&faces_device), address(&values_device), address(&table));
        let kernel = format!("scatter_faces_{}", T::SUFFIX);
        // SAFETY: scatter_faces_T(u64 count, unsigned nf, const unsigned* faces, const T*
        // values, T* out): count faces (each < n_faces) and count * nf values, out of n_faces
        // * nf entries; grid-stride.
        unsafe {
            gpu.launch(
                &kernel,
                elementwise_blocks(values.len()),
                &[arg(&count), arg(&nf), arg(&fp), arg(&vp), arg(&tp)],
            )?
        };
        // The uploads are freed on return: the kernel must have read them.
        gpu.synchronize()?;
    }
    Ok(table)
}

/// The slot planes of `topology` from its row planes and the cells' global faces (`faces`,
/// `[j * n_cells + c]`), as `TraceTopology` lays them out (kernel `topology_slots`).
fn derive_slots<T: DeviceCopy>(
    backend: &CudaBackend,
    topology: &DeviceTopology<T>,
    faces: &DeviceBuffer<u32>,
    n_cells: usize,
    fpc: usize,
) -> Result<()> {
    let n_rows = topology.n_rows;
    if n_rows == 0 {
        return Ok(());
    }
    debug_assert_eq!(topology.slots, 1 + 2 * (fpc - 1));
    let (nr, nc, fpc32) = (n_rows as u64, n_cells as u64, fpc as u32);
    let a = topology.addresses();
    let (rc, rl, cf, fi) = (
        address(&topology.row_cell),
        address(&topology.row_local),
        address(faces),
        address(&topology.free_index),
    );
    // SAFETY: topology_slots(u64 n_rows, u64 n_cells, unsigned fpc, const unsigned* row_cell,
    // const u8* row_local, const unsigned* cell_faces, const unsigned* free_index, then the
    // outputs slot_cell, slot_row, slot_col, neighbours, slot_face): the row planes hold 2 *
    // n_rows entries (cells < n_cells or NONE, local faces < fpc), the face planes fpc *
    // n_cells (faces < free_index.len()), every output slots * n_rows with slots = 1 + 2 (fpc
    // - 1); a thread per row, grid-stride.
    unsafe {
        backend.gpu.launch(
            "topology_slots",
            grid(n_rows)?,
            &[
                arg(&nr),
                arg(&nc),
                arg(&fpc32),
                arg(&rc),
                arg(&rl),
                arg(&cf),
                arg(&fi),
                arg(&a.slot_cell),
                arg(&a.slot_row),
                arg(&a.slot_col),
                arg(&a.neighbours),
                arg(&a.slot_face),
            ],
        )
    }
}

pub(crate) fn prepare<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
) -> Result<DevicePrepared<T>> {
    // The capability check, once: every later stage runs what prepare accepted.
    let kernel_order = kernel_order(disc)?;
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

    let mut clock = PhaseClock::new("prepare", backend.settings().profile);
    let gpu = &backend.gpu;
    gpu.bind()?;
    let estimate = match backend.trace_operator() {
        TraceOperatorKind::Dbf => hdg_core::resources::pipeline_bytes,
        TraceOperatorKind::MatrixFree => hdg_core::resources::matrix_free_bytes,
    };
    check_device_memory(
        format!("{n_cells} cells at order {} in {} on the GPU", disc.order, T::NAME),
        estimate(cell_type, n_cells as u64, disc.order, std::mem::size_of::<T>() as u64),
    )?;
    // The mesh, and the geometry computed from it on the device (the CPU's to the bit).
    let device_mesh = DeviceMesh::upload(backend, mesh)?;
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
    let orientations = upload_planes(backend, &orientations, n_cells, Columns::all(fpc))?;
    let faces = upload_planes(backend, &faces, n_cells, Columns::all(fpc))?;
    clock.lap("face tables");

    // Element loads F_K: on the device for a manufactured source, else on the host.
    let device_loads = match DeviceSource::of(&disc.problem.source) {
        Some(source) => Some(source.loads(backend, &device_mesh, t, &geometry)?),
        None => None,
    };
    let loads_on_device = device_loads.is_some();
    let load = match device_loads {
        Some(load) => load,
        None => {
            let (cell_vertices, host_geometry) = mesh_geometry::<T>(mesh, t.face_parameter_measure);
            let n = t.n;
            let mut load = vec![T::zero(); n_cells * n];
            let source = &disc.problem.source;
            hdg_core::user_code::run_user("the source f (in the element loads)", || {
                let capture = hdg_core::user_code::Capture::current();
                load.par_chunks_mut(n.max(1)).enumerate().with_min_len(64).for_each_init(
                    || vec![0.0; d],
                    |point, (e, out)| {
                        let det = host_geometry[e * layout.stride() + layout.det()];
                        let vertices = &cell_vertices[e * vpc * d..(e + 1) * vpc * d];
                        capture.within(|| element_load(t, vertices, det, source, point, out));
                    },
                )
            })?;
            if let Some(i) = load.iter().position(|v| !v.is_finite()) {
                return Err(hdg_core::user_code::not_finite(
                    "the element load (f, phi_i) of the source f",
                    load[i].as_f64(),
                    format!("on cell {}", i / n.max(1)),
                ));
            }
            gpu.upload(&to_element_fastest(&load, n_cells))?
        }
    };
    clock.lap(if loads_on_device { "loads (device)" } else { "loads (host)" });

    // Topology planes for the assembly: the row planes transposed on the device from the host
    // layout, the slot planes derived from them on the device (`topology_slots`).
    let topo = &disc.topology;
    let (n_rows, slots) = (topo.n_rows(), topo.slots);
    let row_cell = upload_planes(
        backend,
        cust::memory::bytemuck::cast_slice(&topo.row_cells),
        n_rows,
        Columns::all(2),
    )?;
    let row_local = upload_planes(
        backend,
        cust::memory::bytemuck::cast_slice(&topo.row_local_face),
        n_rows,
        Columns::all(2),
    )?;
    let free_index = gpu.upload(&topo.free_index)?;
    let plane = n_rows * slots;
    // SAFETY: derive_slots (below) writes every entry of the slot planes.
    let (slot_cell, slot_row, slot_col, neighbours, slot_face) = unsafe {
        (
            uninitialized::<u32>(backend, plane)?,
            uninitialized::<u8>(backend, plane)?,
            uninitialized::<u8>(backend, plane)?,
            uninitialized::<u32>(backend, plane)?,
            uninitialized::<u32>(backend, plane)?,
        )
    };
    let topology = DeviceTopology {
        n_rows,
        slots,
        n_active_blocks: topo.n_stored_blocks(),
        free_index,
        dirichlet: dirichlet_table(backend, disc)?,
        row_cell,
        row_local,
        slot_cell,
        slot_row,
        slot_col,
        neighbours,
        slot_face,
        _backend: backend.clone(),
    };
    derive_slots(backend, &topology, &faces, n_cells, fpc)?;
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
    clock.lap("topology and tables");
    let kernels = Arc::new(ElementKernels::load(backend)?);
    clock.lap("element kernel modules");
    let prepared = DevicePrepared {
        n_cells,
        tables,
        geometry,
        orientations,
        faces,
        // Constant coefficients (one value in every cell) are filled on the device.
        kappa: gpu.upload_or_fill(&disc.kappa, |_| None)?,
        reaction: gpu.upload_or_fill(&disc.reaction, |_| None)?,
        tau: gpu.upload_or_fill(&disc.tau, |tau| Some(to_element_fastest(tau, n_cells)))?,
        weighted: match &disc.point_coefficients {
            Some(points) => Some(DeviceWeighted::upload(backend, disc, points)?),
            None => None,
        },
        load,
        loads_on_device,
        topology: Arc::new(topology),
        mesh: device_mesh,
        kernel_order,
        kernels,
        designs: forced_designs(backend.settings().design, cell_type, kernel_order.k),
        grid_limit: None,
        backend: backend.clone(),
    };
    clock.lap("per-cell uploads");
    clock.report();
    Ok(prepared)
}

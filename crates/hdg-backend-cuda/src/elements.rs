//! The element stages on the device: [`LocalSolver`], [`Assembler`], [`Postprocessor`] and
//! [`Backend`] for [`CudaBackend`] (f32 and f64), so that `hdg_core::pipeline::solve` runs the
//! whole HDG pipeline on the GPU.
//!
//! The kernels (`kernels/elements.cu`) mirror the CPU backend kernel for kernel
//! (`hdg_backend_cpu::condense::condense_element`, `dbf::assemble`, `local::recover_element`,
//! `local::postprocess_element`), in the same order of operations and without fused
//! multiply-adds, so they give the CPU backend's numbers. This first version runs one thread
//! per element (per block row for the assembly) with its scratch in local memory, for
//! triangles and orders k = 1..=6.
//!
//! # Device layouts (element-fastest)
//!
//! Per-cell data is stored element-fastest: field `f` of cell `e` at `[f * n_cells + e]`, so
//! the 32 threads of a warp (32 consecutive cells) read and write every field coalesced.
//!
//! | array | index |
//! | --- | --- |
//! | geometry (record of [`GeometryLayout`], 14 fields for a triangle) | `[g * n_cells + e]` |
//! | orientations (u8), global faces (u32), tau | `[f * n_cells + e]`, local face f |
//! | kappa, reaction | `[e]` |
//! | element load F_K | `[i * n_cells + e]` |
//! | K_e (nl x nl) | `[(a * nl + b) * n_cells + e]` |
//! | b_e | `[a * n_cells + e]` |
//! | Z = S^-1 P (n x nl) | `[(i * nl + a) * n_cells + e]` |
//! | u0, u_h | `[i * n_cells + e]` |
//! | q_h | `[(r * n + i) * n_cells + e]` |
//! | u* | `[j * n_cells + e]` |
//!
//! The reference tables are uploaded as they are in [`hdg_core::ElementTables`] (one buffer
//! per array); every thread of a warp reads the same entry, a broadcast. The assembly writes
//! the [`DeviceDbf`] layout directly (its module documentation) and the right-hand side.
//!
//! # Host steps (first version)
//!
//! Two steps need closures of the problem, which cannot run on the device, and run on the
//! host (Rayon over cells): the element loads F_K (`(f, phi_i)_K`, evaluated in
//! [`LocalSolver::prepare`] exactly as `condense_element` does, then uploaded) and the error
//! norms ([`Postprocessor::error_norms`] downloads u_h, q_h and u* and calls
//! `hdg_backend_cpu::local::element_errors`). The geometric factors are computed on the host
//! too (`hdg_core::geometry::cell_geometry`, O(cells)) and uploaded.
use std::sync::Arc;

use cust::memory::{DeviceBuffer, DeviceCopy};
use hdg_backend_cpu::condense::map_point;
use hdg_backend_cpu::local::element_errors;
use hdg_core::geometry::{cell_geometry, GeometryLayout};
use hdg_core::{
    Assembler, Backend, CellType, CoreError, Discretization, ErrorNorms, ExactSolution, HostFields,
    LocalSolver, Postprocessor, Result, NONE,
};
use rayon::prelude::*;

use crate::dbf::DeviceDbf;
use crate::device::{address, arg, CudaBackend, DeviceReal, THREADS};
use crate::vector::{uninitialized, DeviceVector};

/// Highest order the element kernels are compiled for.
pub const MAX_ELEMENT_ORDER: usize = 6;

/// Addresses of the reference tables (`struct Tables` in elements.cu).
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

/// Addresses of the per-cell arrays (`struct Cells` in elements.cu).
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

/// Addresses of the assembly's topology planes (`struct AssemblyTopology` in elements.cu).
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
    /// F_K, evaluated on the host (first version).
    load: DeviceBuffer<T>,
    topology: Arc<DeviceTopology<T>>,
    /// Host geometry records (element-contiguous) and vertices, for the host error norms.
    host_geometry: Vec<T>,
    cell_vertices: Vec<f64>,
    layout: GeometryLayout,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl<T: DeviceReal> DevicePrepared<T> {
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

/// Condensed element data on the device (layouts in the module documentation).
pub struct DeviceCondensed<T: DeviceReal> {
    n_cells: usize,
    /// K_e, `[(a * nl + b) * n_cells + e]`.
    trace_matrices: DeviceBuffer<T>,
    /// b_e, `[a * n_cells + e]`.
    trace_loads: DeviceBuffer<T>,
    /// Z, `[(i * nl + a) * n_cells + e]`.
    recovery_operator: DeviceBuffer<T>,
    /// u0, `[i * n_cells + e]`.
    recovery_load: DeviceBuffer<T>,
    topology: Arc<DeviceTopology<T>>,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl<T: DeviceReal> DeviceCondensed<T> {
    fn download(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(buffer)?;
        Ok(to_element_contiguous(&v, self.n_cells))
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
}

/// Recovered u_h and q_h on the device: u `[i * n_cells + e]`, q `[(r * n + i) * n_cells + e]`.
pub struct DeviceFields<T: DeviceReal> {
    n_cells: usize,
    u: DeviceBuffer<T>,
    q: DeviceBuffer<T>,
    /// Last: the buffers are freed while the context lives.
    _backend: CudaBackend,
}

/// The postprocessed u* on the device, `[j * n_cells + e]`.
pub struct DevicePostprocessed<T: DeviceReal> {
    n_cells: usize,
    u_star: DeviceBuffer<T>,
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

/// The inverse of [`to_element_fastest`].
fn to_element_contiguous<T: Copy + Default + Send + Sync>(data: &[T], n_cells: usize) -> Vec<T> {
    if n_cells == 0 {
        return Vec::new();
    }
    let per = data.len() / n_cells;
    let mut out = vec![T::default(); data.len()];
    out.par_chunks_mut(per.max(1)).enumerate().for_each(|(e, record)| {
        for (f, v) in record.iter_mut().enumerate() {
            *v = data[f * n_cells + e];
        }
    });
    out
}

/// The order, if the element kernels exist for it (triangles, k <= 6).
fn kernel_order<T: DeviceReal>(disc: &Discretization<'_, T>) -> Result<usize> {
    if disc.mesh.cell_type() != CellType::Triangle {
        return Err(CoreError::Backend(
            "CUDA element kernels support triangles only in this version".into(),
        ));
    }
    if disc.order > MAX_ELEMENT_ORDER {
        return Err(CoreError::Backend("CUDA condensation supports k <= 6 in this version".into()));
    }
    Ok(disc.order)
}

/// Blocks of [`THREADS`] for one thread per item (items >= 1).
fn grid(items: usize) -> Result<u32> {
    u32::try_from(items.div_ceil(THREADS as usize)).map_err(|_| CoreError::InvalidParameter {
        name: "mesh size",
        reason: format!("{items} items: too many for one launch"),
    })
}

/// The error of the first element whose `info` flag is set (0 = fine, else pivot + 1).
fn first_failure<T: DeviceReal>(
    backend: &CudaBackend,
    info: &DeviceBuffer<i32>,
    values: &DeviceBuffer<T>,
) -> Result<()> {
    let flags = backend.gpu.download(info)?;
    if let Some(element) = flags.iter().position(|&v| v != 0) {
        let values = backend.gpu.download(values)?;
        return Err(CoreError::NotPositiveDefinite {
            element,
            pivot: (flags[element] - 1) as usize,
            value: values[element].as_f64(),
        });
    }
    Ok(())
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

        // Geometry, exactly as the CPU backend computes it (host, O(cells)).
        let mut cell_vertices = vec![0.0; n_cells * vpc * d];
        cell_vertices.par_chunks_mut(vpc * d).enumerate().for_each(|(c, out)| {
            for (i, &v) in mesh.cell_vertices(c).iter().enumerate() {
                out[i * d..(i + 1) * d].copy_from_slice(mesh.vertex(v));
            }
        });
        let mut host_geometry = vec![T::zero(); n_cells * layout.stride()];
        let face_measure = t.face_parameter_measure;
        host_geometry
            .par_chunks_mut(layout.stride())
            .zip(cell_vertices.par_chunks(vpc * d))
            .for_each(|(g, v)| cell_geometry(cell_type, v, face_measure, g));

        // Element loads F_K on the host (the source is a host closure): as condense_element.
        let n = t.n;
        let mut load = vec![T::zero(); n_cells * n];
        let source = disc.problem.source.as_ref();
        let rule = &t.load_rule;
        load.par_chunks_mut(n.max(1)).enumerate().with_min_len(64).for_each_init(
            || vec![0.0; d],
            |point, (e, out)| {
                let det = host_geometry[e * layout.stride() + layout.det()];
                let vertices = &cell_vertices[e * vpc * d..(e + 1) * vpc * d];
                for q in 0..rule.n_points() {
                    map_point(d, vertices, rule.point(q), point);
                    let fq = T::from_f64_lossy(rule.weights[q] * source(point)) * det;
                    for (li, &phi) in out.iter_mut().zip(&t.load_basis[q * n..(q + 1) * n]) {
                        *li += fq * phi;
                    }
                }
            },
        );

        let mut orientations = vec![0u8; n_cells * fpc];
        let mut faces = vec![0u32; n_cells * fpc];
        for c in 0..n_cells {
            orientations[c * fpc..(c + 1) * fpc].copy_from_slice(mesh.cell_face_orientations(c));
            for (f, &face) in mesh.cell_faces(c).iter().enumerate() {
                faces[c * fpc + f] = face as u32;
            }
        }

        // Topology planes for the assembly.
        let topo = &disc.topology;
        let (n_rows, slots) = (topo.n_rows(), topo.slots);
        let mut row_cell = vec![NONE; 2 * n_rows];
        let mut row_local = vec![0u8; 2 * n_rows];
        for row in 0..n_rows {
            for side in 0..2 {
                row_cell[side * n_rows + row] = topo.row_cells[row][side];
                row_local[side * n_rows + row] = topo.row_local_face[row][side];
            }
        }
        let plane = |get: &dyn Fn(usize) -> u32| -> Vec<u32> {
            let mut out = vec![0u32; slots * n_rows];
            for row in 0..n_rows {
                for a in 0..slots {
                    out[a * n_rows + row] = get(row * slots + a);
                }
            }
            out
        };
        let slot_cell = plane(&|s| topo.slot_cell[s]);
        let neighbours = plane(&|s| topo.neighbours[s]);
        let slot_face = plane(&|s| topo.slot_faces[s]);
        let slot_row: Vec<u8> =
            plane(&|s| topo.slot_local[s][0] as u32).into_iter().map(|v| v as u8).collect();
        let slot_col: Vec<u8> =
            plane(&|s| topo.slot_local[s][1] as u32).into_iter().map(|v| v as u8).collect();

        let gpu = &self.gpu;
        let topology = DeviceTopology {
            n_rows,
            slots,
            n_active_blocks: topo.n_stored_blocks(),
            free_index: gpu.upload(&topo.free_index)?,
            dirichlet: gpu.upload(&disc.dirichlet_values)?,
            row_cell: gpu.upload(&row_cell)?,
            row_local: gpu.upload(&row_local)?,
            slot_cell: gpu.upload(&slot_cell)?,
            slot_row: gpu.upload(&slot_row)?,
            slot_col: gpu.upload(&slot_col)?,
            neighbours: gpu.upload(&neighbours)?,
            slot_face: gpu.upload(&slot_face)?,
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
        Ok(DevicePrepared {
            n_cells,
            tables,
            geometry: gpu.upload(&to_element_fastest(&host_geometry, n_cells))?,
            orientations: gpu.upload(&to_element_fastest(&orientations, n_cells))?,
            faces: gpu.upload(&to_element_fastest(&faces, n_cells))?,
            kappa: gpu.upload(&disc.kappa)?,
            reaction: gpu.upload(&disc.reaction)?,
            tau: gpu.upload(&to_element_fastest(&disc.tau, n_cells))?,
            load: gpu.upload(&to_element_fastest(&load, n_cells))?,
            topology: Arc::new(topology),
            host_geometry,
            cell_vertices,
            layout,
            backend: self.clone(),
        })
    }

    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceCondensed<T>> {
        let k = kernel_order(disc)?;
        let t = &disc.tables;
        let (n, nl, n_cells) = (t.n, t.n_local_trace(), prep.n_cells);
        // SAFETY (all four): the kernel writes every entry of every element before anything
        // reads them, or flags the element, and then condense returns an error.
        let trace_matrices = unsafe { uninitialized::<T>(self, n_cells * nl * nl)? };
        let trace_loads = unsafe { uninitialized::<T>(self, n_cells * nl)? };
        let recovery_operator = unsafe { uninitialized::<T>(self, n_cells * n * nl)? };
        let recovery_load = unsafe { uninitialized::<T>(self, n_cells * n)? };
        let info = self.gpu.zeros::<i32>(n_cells)?;
        let pivots = self.gpu.zeros::<T>(n_cells)?;
        if n_cells > 0 {
            let (tb, cells) = (prep.tables.addresses(), prep.cells());
            let (kp, bp, zp, up, ip, pp) = (
                address(&trace_matrices),
                address(&trace_loads),
                address(&recovery_operator),
                address(&recovery_load),
                address(&info),
                address(&pivots),
            );
            let kernel = format!("condense_{}_k{k}", T::SUFFIX);
            // SAFETY: condense_T_kK(Tables, Cells, T* k, T* b, T* z, T* u0, int* info, T* pv):
            // the tables are the uploaded ElementTables of this order (n, nf = k + 1, 3 faces,
            // 2 orientations: triangles checked by kernel_order), the cell arrays hold n_cells
            // records in the documented layouts, the outputs n_cells * (nl^2, nl, n nl, n, 1, 1)
            // entries; one thread per cell (threads beyond n_cells return).
            unsafe {
                self.gpu.launch(
                    &kernel,
                    grid(n_cells)?,
                    &[
                        arg(&tb),
                        arg(&cells),
                        arg(&kp),
                        arg(&bp),
                        arg(&zp),
                        arg(&up),
                        arg(&ip),
                        arg(&pp),
                    ],
                )?
            };
        }
        first_failure(self, &info, &pivots)?;
        Ok(DeviceCondensed {
            n_cells,
            trace_matrices,
            trace_loads,
            recovery_operator,
            recovery_load,
            topology: prep.topology.clone(),
            backend: self.clone(),
        })
    }

    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
        trace: &DeviceVector<T>,
    ) -> Result<DeviceFields<T>> {
        let k = kernel_order(disc)?;
        let t = &disc.tables;
        let (n, d, n_cells) = (t.n, t.dim, prep.n_cells);
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
        // SAFETY: the kernel writes every entry of u and q (one thread per cell).
        let u = unsafe { uninitialized::<T>(self, n_cells * n)? };
        let q = unsafe { uninitialized::<T>(self, n_cells * d * n)? };
        if n_cells > 0 {
            let (tb, cells) = (prep.tables.addresses(), prep.cells());
            let topo = &condensed.topology;
            let (fi, tr, dir, zp, u0p, up, qp) = (
                address(&topo.free_index),
                trace.address(),
                address(&topo.dirichlet),
                address(&condensed.recovery_operator),
                address(&condensed.recovery_load),
                address(&u),
                address(&q),
            );
            let kernel = format!("recover_{}_k{k}", T::SUFFIX);
            // SAFETY: recover_T_kK(Tables, Cells, const unsigned* free_index, const T* trace,
            // const T* dirichlet, const T* z, const T* u0, T* u, T* q): free_index has one
            // entry per global face (every faces[] entry is a face of the mesh), a free index is
            // < n_rows and trace has n_rows * nf entries (checked above), dirichlet
            // n_faces * nf; z, u0 of this condensation (n_cells cells); u, q n_cells * (n, d n).
            unsafe {
                self.gpu.launch(
                    &kernel,
                    grid(n_cells)?,
                    &[
                        arg(&tb),
                        arg(&cells),
                        arg(&fi),
                        arg(&tr),
                        arg(&dir),
                        arg(&zp),
                        arg(&u0p),
                        arg(&up),
                        arg(&qp),
                    ],
                )?
            };
        }
        Ok(DeviceFields { n_cells, u, q, _backend: self.clone() })
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

impl<T: DeviceReal> Assembler<T> for CudaBackend {
    type Operator = DeviceDbf<T>;

    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        condensed: &DeviceCondensed<T>,
    ) -> Result<(DeviceDbf<T>, DeviceVector<T>)> {
        let k = kernel_order(disc)?;
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
        Ok((operator, DeviceVector { buffer: rhs }))
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
        let k = kernel_order(disc)?;
        let (np, n_cells) = (disc.tables.n_post, prep.n_cells);
        // SAFETY: the kernel writes every entry, or flags the element (then an error returns).
        let u_star = unsafe { uninitialized::<T>(self, n_cells * np)? };
        let info = self.gpu.zeros::<i32>(n_cells)?;
        let pivots = self.gpu.zeros::<T>(n_cells)?;
        if n_cells > 0 {
            let (tb, cells) = (prep.tables.addresses(), prep.cells());
            let (up, qp, sp, ip, pp) = (
                address(&fields.u),
                address(&fields.q),
                address(&u_star),
                address(&info),
                address(&pivots),
            );
            let kernel = format!("postprocess_{}_k{k}", T::SUFFIX);
            // SAFETY: postprocess_T_kK(Tables, Cells, const T* u, const T* q, T* u_star,
            // int* info, T* pv): u and q of n_cells cells (n, d n per cell), u_star n_cells * n',
            // info and pv n_cells; one thread per cell.
            unsafe {
                self.gpu.launch(
                    &kernel,
                    grid(n_cells)?,
                    &[arg(&tb), arg(&cells), arg(&up), arg(&qp), arg(&sp), arg(&ip), arg(&pp)],
                )?
            };
        }
        first_failure(self, &info, &pivots)?;
        Ok(DevicePostprocessed { n_cells, u_star, backend: self.clone() })
    }

    /// First version: downloads u_h, q_h and u* and computes the norms on the host with
    /// `hdg_backend_cpu::local::element_errors` (the exact solution is a host closure).
    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        post: &DevicePostprocessed<T>,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms> {
        let t = &disc.tables;
        let (n, d, np) = (t.n, t.dim, t.n_post);
        let stride = prep.layout.stride();
        let n_cells = prep.n_cells;
        let host = LocalSolver::<T>::fields_to_host(self, fields)?;
        let u_star = post.to_host()?;
        let vsz = prep.cell_vertices.len() / n_cells.max(1);
        let sums = (0..n_cells)
            .into_par_iter()
            .with_min_len(64)
            .map(|e| {
                element_errors(
                    t,
                    &prep.host_geometry[e * stride..(e + 1) * stride],
                    &prep.cell_vertices[e * vsz..(e + 1) * vsz],
                    disc.kappa[e].as_f64(),
                    &host.u[e * n..(e + 1) * n],
                    &host.q[e * d * n..(e + 1) * d * n],
                    &u_star[e * np..(e + 1) * np],
                    exact.u.as_ref(),
                    exact.grad_u.as_ref(),
                )
            })
            .reduce(|| [0.0; 3], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2]]);
        Ok(ErrorNorms { u: sums[0].sqrt(), q: sums[1].sqrt(), u_star: sums[2].sqrt() })
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

//! The mesh on the device and the setup kernels (`kernels/geometry.cu`): the geometry factors
//! of every cell, computed where the element kernels read them, and element-fastest planes of
//! host tables transposed on the device.
//!
//! What crosses the bus is the mesh itself (vertex coordinates, 16 bytes per vertex in 2D, and
//! the cell-vertex table, 12 bytes per triangle) instead of the geometry records (14 values per
//! triangle, 26 per tetrahedron). Host tables (face orientations, global faces, the assembly's
//! rows) are uploaded in their row-major host layout and transposed into element-fastest
//! planes by one kernel, instead of being transposed by the host first; the assembly's slot
//! planes are derived on the device from its rows and the cells' faces (`topology_slots`).
use cust::memory::{bytemuck::Pod, DeviceBuffer, DeviceCopy};
use hdg_core::{CoreError, Result};
use hdg_mesh::Mesh;
use rayon::prelude::*;

use crate::device::{address, arg, elementwise_blocks, grid, CudaBackend, DeviceReal};
use crate::vector::uninitialized;

/// The mesh's vertices and cell-vertex table on the device.
pub(crate) struct DeviceMesh {
    pub dim: usize,
    pub n_cells: usize,
    /// `[v * dim + r]`.
    pub vertices: DeviceBuffer<f64>,
    /// Element-fastest: vertex i of cell e at `[i * n_cells + e]`.
    pub cell_vertices: DeviceBuffer<u32>,
    /// Last: the buffers are freed while the context lives.
    backend: CudaBackend,
}

impl DeviceMesh {
    /// Uploads `mesh` (32-bit vertex indices).
    pub(crate) fn upload(backend: &CudaBackend, mesh: &Mesh) -> Result<Self> {
        let n_cells = mesh.n_cells();
        let vpc = mesh.cell_type().vertices_per_cell();
        if mesh.n_vertices() > u32::MAX as usize {
            return Err(CoreError::InvalidParameter {
                name: "mesh size",
                reason: format!("{} vertices: too many for 32-bit indices", mesh.n_vertices()),
            });
        }
        let mut cell_vertices = vec![0u32; vpc * n_cells];
        for (i, plane) in cell_vertices.chunks_mut(n_cells.max(1)).enumerate() {
            plane
                .par_iter_mut()
                .enumerate()
                .with_min_len(1 << 12)
                .for_each(|(c, v)| *v = mesh.cell_vertices(c)[i] as u32);
        }
        let gpu = &backend.gpu;
        Ok(DeviceMesh {
            dim: mesh.dim(),
            n_cells,
            vertices: gpu.upload(mesh.vertices())?,
            cell_vertices: gpu.upload(&cell_vertices)?,
            backend: backend.clone(),
        })
    }

    /// The geometry records of every cell, element-fastest (`[g * n_cells + e]`), as
    /// `hdg_core::geometry::cell_geometry` computes them, to the bit.
    pub(crate) fn geometry<T: DeviceReal>(
        &self,
        stride: usize,
        face_parameter_measure: f64,
    ) -> Result<DeviceBuffer<T>> {
        let nc = self.n_cells;
        // SAFETY: the kernel writes all stride * n_cells entries.
        let geometry = unsafe { uninitialized::<T>(&self.backend, stride * nc)? };
        if nc > 0 {
            let (nc64, vp, cp, gp) = (
                nc as u64,
                address(&self.vertices),
                address(&self.cell_vertices),
                address(&geometry),
            );
            let kernel = format!("cell_geometry_d{}_{}", self.dim, T::SUFFIX);
            // SAFETY: cell_geometry_dD_T(u64 nc, const f64* vertices, const unsigned*
            // cell_vertices, f64 face_measure, T* geometry): the mesh's vertices and its
            // (D + 1) * nc vertex table (indices < n_vertices), geometry stride * nc entries
            // (stride = the record size of the D-dimensional cell); one thread per cell.
            unsafe {
                self.backend.gpu.launch(
                    &kernel,
                    grid(nc)?,
                    &[arg(&nc64), arg(&vp), arg(&cp), arg(&face_parameter_measure), arg(&gp)],
                )?
            };
        }
        Ok(geometry)
    }
}

/// A type the transpose kernels exist for.
pub(crate) trait PlaneValue: DeviceCopy + Pod + Default + Clone {
    /// Suffix of the kernel name.
    const NAME: &'static str;
}

impl PlaneValue for u8 {
    const NAME: &'static str = "u8";
}
impl PlaneValue for u32 {
    const NAME: &'static str = "u32";
}
impl PlaneValue for f32 {
    const NAME: &'static str = "f32";
}
impl PlaneValue for f64 {
    const NAME: &'static str = "f64";
}

/// Which columns of a row-major table (`per` values per row) become planes: columns `first`,
/// `first + step`, ... (`count` of them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Columns {
    pub per: usize,
    pub first: usize,
    pub step: usize,
    pub count: usize,
}

impl Columns {
    /// Every column of a table of `per` values per row.
    pub(crate) fn all(per: usize) -> Self {
        Columns { per, first: 0, step: 1, count: per }
    }
}

/// Uploads a row-major table of `n` rows and returns the planes of the chosen columns,
/// element-fastest: `out[j * n + e] = table[e * per + first + j * step]`.
pub(crate) fn upload_planes<T: PlaneValue>(
    backend: &CudaBackend,
    table: &[T],
    n: usize,
    columns: Columns,
) -> Result<DeviceBuffer<T>> {
    let Columns { per, first, step, count } = columns;
    debug_assert!(count == 0 || first + (count - 1) * step < per);
    debug_assert_eq!(table.len(), n * per);
    let gpu = &backend.gpu;
    let src = gpu.upload(table)?;
    // SAFETY: the kernel writes all n * count entries.
    let dst = unsafe { uninitialized::<T>(backend, n * count)? };
    if n * count > 0 {
        let (n64, per32, first32, step32, count32) =
            (n as u64, per as u32, first as u32, step as u32, count as u32);
        let (sp, dp) = (address(&src), address(&dst));
        let kernel = format!("to_element_fastest_{}", T::NAME);
        // SAFETY: to_element_fastest_T(u64 n, unsigned per, unsigned first, unsigned step,
        // unsigned count, const T* src, T* dst): src holds n * per values, every column read
        // (first + j step, j < count) is < per, dst holds n * count; grid-stride.
        unsafe {
            gpu.launch(
                &kernel,
                elementwise_blocks(n * count),
                &[
                    arg(&n64),
                    arg(&per32),
                    arg(&first32),
                    arg(&step32),
                    arg(&count32),
                    arg(&sp),
                    arg(&dp),
                ],
            )?
        };
        // `src` is freed on return: the kernel must have read it.
        gpu.synchronize()?;
    }
    Ok(dst)
}

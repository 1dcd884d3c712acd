//! Prepare: what the element kernels read, per cell, in the layout they read it (one record
//! per cell, element-contiguous: a task works on whole cells), and the inputs of one element.
use hdg_core::geometry::{mesh_geometry, GeometryLayout};
use hdg_core::{Discretization, Real, Result};
use rayon::prelude::*;

/// Discretization data of the CPU backend.
pub struct CpuPrepared<T> {
    /// Geometry records, `layout.stride()` values per cell.
    pub geometry: Vec<T>,
    /// Record layout.
    pub layout: GeometryLayout,
    /// Vertex coordinates per cell (`[c][v][r]`), so that a kernel reads one contiguous record.
    pub cell_vertices: Vec<f64>,
    /// Face orientation codes per cell.
    pub orientations: Vec<u8>,
}

impl<T: Real> CpuPrepared<T> {
    /// What the element kernels read of element `e`.
    pub fn element_input<'a>(
        &'a self,
        disc: &'a Discretization<'_, T>,
        e: usize,
    ) -> ElementInput<'a, T> {
        let (fpc, stride) = (disc.tables.n_faces, self.layout.stride());
        let vsz = self.cell_vertices.len() / disc.mesh.n_cells().max(1);
        ElementInput {
            geometry: &self.geometry[e * stride..(e + 1) * stride],
            vertices: &self.cell_vertices[e * vsz..(e + 1) * vsz],
            orientations: &self.orientations[e * fpc..(e + 1) * fpc],
            kappa: disc.kappa[e],
            reaction: disc.reaction[e],
            tau: &disc.tau[e * fpc..(e + 1) * fpc],
            points: element_points(disc, e),
        }
    }
}

/// Inputs of one element's condensation.
pub struct ElementInput<'a, T> {
    /// Geometry record (see [`GeometryLayout`]).
    pub geometry: &'a [T],
    /// Vertex coordinates, vertex-major.
    pub vertices: &'a [f64],
    /// Orientation code of each local face.
    pub orientations: &'a [u8],
    /// kappa (where it is constant in the element).
    pub kappa: T,
    /// c (where it is constant in the element).
    pub reaction: T,
    /// tau of each local face.
    pub tau: &'a [T],
    /// kappa^-1 and c at quadrature points, where they vary inside the element (then `kappa`
    /// and `reaction` are not read).
    pub points: Option<ElementPoints<'a, T>>,
}

/// kappa^-1 and c at the coefficient points of one element.
#[derive(Clone, Copy)]
pub struct ElementPoints<'a, T> {
    /// kappa^-1 per point: `[q]` (scalar) or `[q][r * d + s]` (tensor).
    pub inverse_kappa: &'a [T],
    /// c per point.
    pub reaction: &'a [T],
    /// Whether kappa^-1 is a tensor.
    pub tensor: bool,
}

/// kappa^-1 and c at the coefficient points of element `e`, where they vary inside cells.
pub(crate) fn element_points<'a, T: Real>(
    disc: &'a Discretization<'_, T>,
    e: usize,
) -> Option<ElementPoints<'a, T>> {
    disc.point_coefficients.as_ref().map(|pc| ElementPoints {
        inverse_kappa: pc.inverse_kappa_of(e),
        reaction: pc.reaction_of(e),
        tensor: pc.is_tensor(),
    })
}

/// Uploads nothing (the host is the device): the geometric factors per cell, the cells' vertex
/// coordinates and face orientations, after checking that the whole pipeline fits in memory.
pub(crate) fn prepare<T: Real>(disc: &Discretization<'_, T>) -> Result<CpuPrepared<T>> {
    let mesh = disc.mesh;
    let estimate = hdg_core::resources::pipeline_bytes(
        mesh.cell_type(),
        mesh.n_cells() as u64,
        disc.order,
        std::mem::size_of::<T>() as u64,
    );
    hdg_core::resources::check_host_memory(
        &format!("{} cells at order {} in {} on the CPU", mesh.n_cells(), disc.order, T::NAME),
        estimate,
    )?;
    let layout = GeometryLayout::new(mesh.cell_type());
    let fpc = mesh.cell_type().faces_per_cell();
    let (cell_vertices, geometry) = mesh_geometry(mesh, disc.tables.face_parameter_measure);
    let mut orientations = vec![0u8; mesh.n_cells() * fpc];
    orientations.par_chunks_mut(fpc).enumerate().for_each(|(c, o)| {
        o.copy_from_slice(mesh.cell_face_orientations(c));
    });
    Ok(CpuPrepared { geometry, layout, cell_vertices, orientations })
}

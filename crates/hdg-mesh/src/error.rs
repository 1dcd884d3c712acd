//! Mesh errors: each names the offending cell, face or vertex.
use thiserror::Error;

use crate::conformity::NonConformity;

/// ", and N more cells: [...]" of a [`MeshError::NonPositiveMeasure`].
fn more_measures(total: usize, more: &[usize]) -> String {
    if total <= 1 {
        return String::new();
    }
    let listed = if more.len() + 1 < total { ", ..." } else { "" };
    format!("; {total} such cells in all: also {more:?}{listed}")
}

/// The offending vertices of a [`MeshError::NonConforming`], one per line.
fn list(shown: &[NonConformity], total: usize) -> String {
    let mut s: String = shown.iter().map(|n| format!("\n  {n}")).collect();
    if total > shown.len() {
        s += &format!("\n  ... and {} more", total - shown.len());
    }
    s
}

/// What can be wrong with a mesh or with the parameters of a mesh generator.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum MeshError {
    /// Degenerate cells (measure near zero; area in 2D, volume in 3D): the first with its
    /// measure and vertices, how many in all, and the next few of them.
    #[error("cell {cell} has non-positive measure {measure:e} (vertices {vertices:?}){}; cells must not be degenerate", more_measures(*total, more_cells))]
    NonPositiveMeasure {
        cell: usize,
        measure: f64,
        vertices: Vec<usize>,
        total: usize,
        more_cells: Vec<usize>,
    },
    /// A face shared by three or more cells.
    #[error("face with vertices {vertices:?} is shared by {} cells {cells:?}; the mesh is not manifold", cells.len())]
    NonManifoldFace { vertices: Vec<usize>, cells: Vec<usize> },
    /// A cell that refers to a vertex that does not exist.
    #[error("cell {cell} refers to vertex {vertex}, but the mesh has only {n_vertices} vertices")]
    VertexOutOfRange { cell: usize, vertex: usize, n_vertices: usize },
    /// A cell that uses the same vertex twice.
    #[error("cell {cell} uses vertex {vertex} more than once")]
    RepeatedVertex { cell: usize, vertex: usize },
    /// A vertex with a NaN or infinite coordinate.
    #[error("vertex {vertex} has a non-finite coordinate")]
    NonFiniteCoordinate { vertex: usize },
    /// An input array whose length is not a multiple of what it holds.
    #[error("{what} has length {len}, which is not a multiple of {multiple}")]
    BadArrayLength { what: &'static str, len: usize, multiple: usize },
    /// Cells that do not meet face to face: a hanging node or a duplicated vertex (an internal
    /// crack). `shown` lists the first [`crate::conformity::MAX_REPORTED`] of `total`.
    #[error("the mesh is not conforming: {total} boundary vertices lie on faces they do not belong to{}", list(shown, *total))]
    NonConforming { total: usize, shown: Vec<NonConformity> },
    /// A mesh file that cannot be read, is malformed, or holds what the library does not
    /// support (the message says which).
    #[error("mesh file: {0}")]
    File(String),
    /// A mesh with no cells.
    #[error("the mesh has no cells")]
    Empty,
    /// A point given to a mesh of another dimension (a point locator, a solution's
    /// evaluation): `[x, y, z]` on a triangle mesh is a mistake, not a point outside it.
    #[error("the point {point:?} has {} coordinates, but the mesh is {dim}D", point.len())]
    PointDimension { point: Vec<f64>, dim: usize },
    /// A point with a NaN or infinite coordinate.
    #[error("the point {point:?} has a coordinate that is not finite")]
    NonFinitePoint { point: Vec<f64> },
    /// A generator or transformation parameter out of range.
    #[error("invalid mesh parameter: {0}")]
    InvalidParameter(String),
    /// The graph partitioner (METIS) failed on valid input: out of memory, or an internal error.
    #[error("mesh partitioning failed: {0}")]
    Partitioner(String),
}

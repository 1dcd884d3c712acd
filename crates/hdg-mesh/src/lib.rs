//! Simplicial meshes for HDG: vertices, cells, faces with their canonical orientation, boundary tags.
//!
//! - [`Mesh`]: a validated conforming mesh with its faces, built by [`Mesh::new`] (hanging
//!   nodes and cracks refused: [`conformity`]);
//! - [`gmsh::read`]: Gmsh `.msh` 4.1 files with their physical groups;
//! - [`rectangle`], [`unit_square`]: structured triangulations; [`box_mesh`], [`unit_cube`]:
//!   structured tetrahedral meshes (Kuhn split); [`perturb`]: random interior vertex moves that
//!   keep every cell valid;
//! - [`PointLocator`]: the cell that holds a point;
//! - [`Partition`]: the cells of each MPI rank (contiguous blocks, or METIS with feature
//!   `metis`); [`MeshPart`]: one rank's cells, and the ghost cells of its faces, as a
//!   self-contained mesh with maps to the global numbering.
mod build;
mod cell;
pub mod conformity;
mod error;
pub mod generate;
pub mod gmsh;
pub mod locate;
mod mesh;
pub mod part;
pub mod partition;
pub use cell::CellType;
pub use error::MeshError;
pub use generate::{
    box_mesh, perturb, rectangle, unit_cube, unit_square, Diagonal, TAG_BOTTOM, TAG_LEFT,
    TAG_RIGHT, TAG_TOP, TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1,
};
pub use locate::{Located, PointLocator};
pub use mesh::{Mesh, NO_CELL};
pub use part::{MeshPart, INTERFACE_TAG};
pub use partition::Partition;

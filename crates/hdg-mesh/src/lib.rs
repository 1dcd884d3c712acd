//! Simplicial meshes for HDG: vertices, cells, faces with their canonical orientation, boundary tags.
mod cell;
mod error;
pub use cell::CellType;
pub use error::MeshError;

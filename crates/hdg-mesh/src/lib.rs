//! Simplicial meshes for HDG: vertices, cells, faces with their canonical orientation, boundary tags.
//!
//! - [`Mesh`]: a validated conforming mesh with its faces, built by [`Mesh::new`];
//! - [`rectangle`], [`unit_square`]: structured triangulations; [`perturb`]: random interior
//!   vertex moves that keep every cell valid.
mod cell;
mod error;
pub mod generate;
mod mesh;
pub use cell::CellType;
pub use error::MeshError;
pub use generate::{
    perturb, rectangle, unit_square, Diagonal, TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP,
};
pub use mesh::{Mesh, NO_CELL};

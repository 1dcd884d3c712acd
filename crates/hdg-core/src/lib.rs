//! Core of the HDG library.
pub mod error;
pub mod reference;
pub use error::{CoreError, Result};
pub use hdg_mesh::CellType;

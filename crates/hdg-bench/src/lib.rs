//! The lab beside the product: benchmarks that reach into the backends (stage by stage, kernel
//! by kernel) and compare them with baselines measured in the same run. The `hdg` program and
//! the library do not depend on this crate. The figures live in `BENCHMARKS.md`, one section per
//! capability, and its history in `benchmarks/history/`.
pub mod operators;
pub mod stages;

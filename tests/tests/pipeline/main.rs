//! The whole pipeline, each test written once and run for every backend ([`tests::per_backend!`]:
//! `name::cpu` always, `name::cuda` with `--ignored` on a GPU machine).
//!
//! - `exactness`: polynomials of degree k are reproduced to round-off (triangles);
//! - `boundary`: Neumann and Robin faces (exactness, rates, refusals);
//! - `convergence`: observed rates k+1 (u, q) and k+2 (u*) on triangles;
//! - `tetrahedra`: exactness, rates and the six face orientations on tetrahedra;
//! - `coefficients`: kappa(x), an anisotropic tensor, c(x), tau options;
//! - `regions`: kappa per region (a jump across an interface reproduced exactly);
//! - `mesh_files`: rates on the Gmsh meshes shipped under `examples/meshes/`;
//! - `structure`: local conservation, a symmetric trace matrix, single-valued fluxes;
//! - `invariance`: precision and numbering change the answer only by round-off;
//! - `bad_input`: bad input gives a typed error, never a panic.
mod bad_input;
mod boundary;
mod coefficients;
mod convergence;
mod exactness;
mod invariance;
mod mesh_files;
mod regions;
mod structure;
mod tetrahedra;

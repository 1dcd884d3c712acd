//! A mesh file with regions and boundary parts: the plate with a hole of `examples/meshes`
//! (physical groups: curves `outer` = 1 and `hole` = 2, surfaces `plate` = 3 and `ring` = 4).
//! kappa is 1 on the plate and 10 on the ring around the hole; heat enters through the hole
//! (Neumann, kappa grad u . n = 1 with n pointing out of the domain, into the hole) and leaves
//! through the outer sides (u = 0). Prints the outward flux of q = -kappa grad u through each
//! boundary part: -(length of the hole) through the hole, and the opposite through the outer
//! sides, since f = 0 (the method conserves this flux).
//!
//! Run with `cargo run --release -p hdg --example gmsh_regions`.
use std::collections::BTreeMap;
use std::path::Path;

use hdg::functionals::{boundary_flux, integral_over, Boundary, Field};
use hdg::{gmsh, Coefficient, Problem, Solver};

fn main() -> Result<(), hdg::Error> {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meshes/plate-with-hole-1.msh");
    let read = gmsh::read(&file)?;
    let (outer, hole) = (read.groups.boundary_tag("outer")?, read.groups.boundary_tag("hole")?);
    let (plate, ring) = (read.groups.region("plate")?, read.groups.region("ring")?);
    println!(
        "{}: {} cells, boundary faces per tag {:?}",
        file.file_name().unwrap_or_default().to_string_lossy(),
        read.mesh.n_cells(),
        read.mesh.boundary_tag_counts()
    );

    let kappa = Coefficient::per_region(
        "kappa",
        &read.cell_regions,
        &BTreeMap::from([(plate, 1.0), (ring, 10.0)]),
    )?;
    let problem = Problem::builder().kappa(kappa).neumann(hole, |_x, _n| 1.0).build();
    let regions = read.cell_regions.clone();
    let solution = Solver::new(read.mesh, problem).order(2).solve()?;

    let through_hole = boundary_flux(&solution, Boundary::Tag(hole))?;
    let through_outer = boundary_flux(&solution, Boundary::Tag(outer))?;
    println!("outward flux of q through the hole:  {through_hole:+.6}");
    println!("outward flux of q through the sides: {through_outer:+.6}");
    println!("sum (the integral of f = 0):         {:+.2e}", through_hole + through_outer);
    let on_ring = integral_over(&solution, Field::U, |c| regions[c] == ring);
    println!("integral of u_h over the ring:       {on_ring:.6}");
    Ok(())
}

//! Numbers computed from a [`Solution`]: integrals of u_h or u* over the domain or part of it,
//! the flux through boundary faces, the least and greatest values.
//!
//! Each is a quadrature with the reference element's rules, the fields evaluated through
//! [`Solution::tabulate`] and [`Solution::evaluate_tabulated`] (what point evaluation uses), the
//! trace through [`Solution::trace_at`]. Sums run over fixed chunks of cells or faces in
//! order, so a result has the same bits on every run and thread count.
//!
//! Signs (`docs/formulation.md`): the method's flux is q = -kappa grad u, and
//! [`boundary_flux`] is the outward flux of the numerical flux, the integral of
//! `qhat . n = q_h . n + tau (u_h - uhat_h)` over the faces. That is the flux the method
//! conserves: on every cell the integral of `qhat . n` over its boundary equals that of
//! `f - c u_h` over it, so for Poisson the flux over the whole boundary is the integral of f
//! (to the solver's tolerance), and on a Neumann face `kappa grad u . n = g` it is `-g`.
use rayon::prelude::*;

use crate::{Error, Solution};
use hdg_core::CoreError;

/// Cells (or faces) per chunk of a deterministic sum.
const PER_CHUNK: usize = 256;

/// Which volume field a functional reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// u_h, of order k.
    U,
    /// u*, the postprocessed solution of order k + 1.
    UStar,
}

impl Field {
    fn of(self, value: &hdg_core::PointValue) -> f64 {
        match self {
            Field::U => value.u,
            Field::UStar => value.u_star,
        }
    }
}

/// The boundary faces a flux is taken over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// Every boundary face.
    All,
    /// The faces of one boundary tag.
    Tag(u32),
}

/// The least or greatest value of a field and where it is taken.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extremum {
    /// The value.
    pub value: f64,
    /// The point (`dim` coordinates used).
    pub at: [f64; 3],
    /// The cell the value was evaluated in.
    pub cell: usize,
}

/// [`extrema`]: the least and greatest values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extrema {
    /// The least value.
    pub min: Extremum,
    /// The greatest value.
    pub max: Extremum,
}

/// The quadrature degree of the volume rule: exact for u* (degree k + 1) times an affine
/// weight, and enough points per cell to sample a field for [`extrema`].
fn volume_degree(order: usize) -> usize {
    2 * order + 2
}

/// Fixed chunks summed in order, then the chunks' sums in order.
fn deterministic_sum(n: usize, term: impl Fn(usize) -> f64 + Sync) -> f64 {
    let chunks: Vec<f64> = (0..n.div_ceil(PER_CHUNK))
        .into_par_iter()
        .map(|chunk| (chunk * PER_CHUNK..n.min((chunk + 1) * PER_CHUNK)).map(&term).sum())
        .collect();
    chunks.iter().sum()
}

/// The integral of `field` over the domain.
///
/// ```
/// # use hdg::{functionals::{integral, Field}, generate, mesh::Diagonal, Problem, Solver};
/// let mesh = generate::unit_square(4, Diagonal::Right)?;
/// // u = x y on the unit square: order 2 reproduces it, its integral is 1/4.
/// let problem = Problem::builder().dirichlet(|x| x[0] * x[1]).build();
/// let solution = Solver::new(mesh, problem).order(2).solve()?;
/// assert!((integral(&solution, Field::U) - 0.25).abs() < 1e-10);
/// # Ok::<(), hdg::Error>(())
/// ```
pub fn integral(solution: &Solution, field: Field) -> f64 {
    integral_over(solution, field, |_| true)
}

/// The integral of `field` over the cells `c` with `cells(c)` true: a region, for instance
/// `|c| regions[c] == 2` with the cell regions of a Gmsh file
/// ([`crate::gmsh::GmshMesh::cell_regions`]).
pub fn integral_over(
    solution: &Solution,
    field: Field,
    cells: impl Fn(usize) -> bool + Sync,
) -> f64 {
    let (mesh, element) = (solution.mesh(), solution.element());
    let rule = element.cell_quadrature(volume_degree(solution.order()));
    let table = solution.tabulate(&rule.points);
    let reference = element.reference_measure();
    deterministic_sum(mesh.n_cells(), |c| {
        if !cells(c) {
            return 0.0;
        }
        let det = mesh.cell_measure(c) / reference;
        let sum: f64 = (0..rule.n_points())
            .map(|p| rule.weights[p] * field.of(&solution.evaluate_tabulated(c, &table, p)))
            .sum();
        det * sum
    })
}

/// The integral of `field` over the cells of region `region`, `regions` giving each cell's
/// region (a Gmsh file's [`crate::gmsh::GmshMesh::cell_regions`]).
///
/// # Errors
/// [`Error::Core`] if `regions` does not have one entry per cell, or no cell is in `region`.
pub fn region_integral(
    solution: &Solution,
    field: Field,
    regions: &[u32],
    region: u32,
) -> Result<f64, Error> {
    let n_cells = solution.mesh().n_cells();
    let refuse =
        |reason: String| Error::Core(CoreError::InvalidParameter { name: "region", reason });
    if regions.len() != n_cells {
        return Err(refuse(format!("{} regions given for {n_cells} cells", regions.len())));
    }
    if !regions.contains(&region) {
        let mut known = regions.to_vec();
        known.sort_unstable();
        known.dedup();
        return Err(refuse(format!("no cell is in region {region} (the regions: {known:?})")));
    }
    Ok(integral_over(solution, field, |c| regions[c] == region))
}

/// The outward flux `int qhat_h . n` over the boundary faces of `boundary`, with
/// `qhat_h . n = q_h . n + tau (u_h - uhat_h)` and q = -kappa grad u (module docs for the
/// sign and why this flux).
///
/// # Errors
/// [`Error::Core`] for a tag that no boundary face has (naming the mesh's tags), or where the
/// problem's tau cannot be formed again on the solution's mesh (the errors of a solve's setup).
pub fn boundary_flux(solution: &Solution, boundary: Boundary) -> Result<f64, Error> {
    let mesh = solution.mesh();
    if let Boundary::Tag(tag) = boundary {
        let tags: Vec<u32> = mesh.boundary_tag_counts().into_iter().map(|(t, _)| t).collect();
        if !tags.contains(&tag) {
            return Err(Error::Core(CoreError::InvalidParameter {
                name: "boundary tag",
                reason: format!("the mesh has no boundary tag {tag} (its tags: {tags:?})"),
            }));
        }
    }
    let faces: Vec<usize> = (0..mesh.n_faces())
        .filter(|&f| {
            mesh.is_boundary_face(f)
                && match boundary {
                    Boundary::All => true,
                    Boundary::Tag(tag) => mesh.boundary_tag(f) == tag,
                }
        })
        .collect();
    // tau per (cell, local face), as the solve formed it.
    let setup = hdg_core::Discretization::<f64>::new(mesh, solution.problem(), solution.order())?;
    let element = solution.element();
    let (d, fpc) = (mesh.dim(), mesh.cell_type().faces_per_cell());
    let rule = element.face_quadrature(volume_degree(solution.order()));
    let parameter_measure: f64 = rule.weights.iter().sum();
    // The face rule's points in the reference cell, one table per local face.
    let tables: Vec<hdg_core::solution::Tabulated> = (0..fpc)
        .map(|l| {
            let mut xi = vec![0.0; rule.n_points() * d];
            for (p, xi) in xi.chunks_exact_mut(d).enumerate() {
                element.face_point(l, rule.point(p), xi);
            }
            solution.tabulate(&xi)
        })
        .collect();
    Ok(deterministic_sum(faces.len(), |i| {
        let f = faces[i];
        let (c, l) = (mesh.face_cells(f)[0], mesh.face_local_index(f)[0] as usize);
        let orientation = mesh.cell_face_orientations(c)[l] as usize;
        let normal = hdg_core::boundary::outward_normal(mesh, f);
        let tau = setup.tau[c * fpc + l];
        let scale = mesh.face_measure(f) / parameter_measure;
        let mut canonical = [0.0; 2];
        let sum: f64 = (0..rule.n_points())
            .map(|p| {
                let value = solution.evaluate_tabulated(c, &tables[l], p);
                element.to_canonical(orientation, rule.point(p), &mut canonical[..d - 1]);
                let trace = solution.trace_at(f, &canonical[..d - 1]);
                let q_n: f64 = (0..d).map(|r| value.q[r] * normal[r]).sum();
                rule.weights[p] * (q_n + tau * (value.u - trace))
            })
            .sum();
        scale * sum
    }))
}

/// The least and greatest values of `field`, sampled at the points of the volume rule of
/// degree 2k + 2 (the one [`integral`] uses) and at the vertices of every cell: a sample, not
/// the exact extrema of the piecewise polynomial, which may lie between the points (the
/// vertices are included because extrema of smooth solutions are often on the boundary).
pub fn extrema(solution: &Solution, field: Field) -> Extrema {
    let (mesh, element) = (solution.mesh(), solution.element());
    let d = mesh.dim();
    let rule = element.cell_quadrature(volume_degree(solution.order()));
    let mut xi = rule.points.clone();
    xi.extend_from_slice(element.vertices());
    let table = solution.tabulate(&xi);
    let at = |c: usize, p: usize| -> Extremum {
        let value = field.of(&solution.evaluate_tabulated(c, &table, p));
        let mut x = [0.0; 3];
        let mut lambda = [0.0; 4];
        // The point from its reference coordinates: x = v_0 + sum_s (v_{s+1} - v_0) (xi_s + 1) / 2.
        let xi = &xi[p * d..(p + 1) * d];
        lambda[0] = 1.0 - xi.iter().map(|s| (s + 1.0) / 2.0).sum::<f64>();
        for s in 0..d {
            lambda[s + 1] = (xi[s] + 1.0) / 2.0;
        }
        for (i, &v) in mesh.cell_vertices(c).iter().enumerate() {
            for r in 0..d {
                x[r] += lambda[i] * mesh.vertex(v)[r];
            }
        }
        Extremum { value, at: x, cell: c }
    };
    let first = at(0, 0);
    let (min, max) = (0..mesh.n_cells())
        .into_par_iter()
        .map(|c| {
            (0..table.n_points()).fold((first, first), |(lo, hi), p| {
                let e = at(c, p);
                (if e.value < lo.value { e } else { lo }, if e.value > hi.value { e } else { hi })
            })
        })
        .reduce(
            || (first, first),
            // Ties go to the lower cell, so the answer does not depend on the thread count.
            |(lo_a, hi_a), (lo_b, hi_b)| {
                let lower = |a: Extremum, b: Extremum| {
                    if b.value < a.value || (b.value == a.value && b.cell < a.cell) {
                        b
                    } else {
                        a
                    }
                };
                let higher = |a: Extremum, b: Extremum| {
                    if b.value > a.value || (b.value == a.value && b.cell < a.cell) {
                        b
                    } else {
                        a
                    }
                };
                (lower(lo_a, lo_b), higher(hi_a, hi_b))
            },
        );
    Extrema { min, max }
}

//! Boundary conditions per tag: which faces are Dirichlet, and what Neumann and Robin faces add
//! to the trace system (`docs/formulation.md`, section 'Boundary conditions in the trace
//! system'):
//!
//! ```text
//! (sum_K K_e + alpha H_F) Lambda = sum_K b_e + <g, mu>_F      on a Neumann (alpha = 0) or Robin face
//! ```
//!
//! Dirichlet faces are eliminated (their traces are the projection of g_D); Neumann and Robin
//! faces keep their trace unknowns, as interior faces do, with one cell instead of two. The
//! trace basis is orthonormal on the face's parameter domain, so H_F = (|F| / |F^|) I and
//! alpha H_F adds a multiple of the identity to the face's diagonal block: the matrix stays
//! symmetric, and positive definite where alpha > 0.
//!
//! These terms are computed once here, on the host (one pass over the boundary faces), and
//! every backend adds them to its assembled matrix and right-hand side.
use rayon::prelude::*;

use crate::reference::face_parameter_barycentric;
use crate::{BoundaryCondition, CoreError, Problem, Real, ReferenceElement, Result, TraceTopology};
use hdg_mesh::{Mesh, INTERFACE_TAG};

/// The Neumann and Robin faces' share of the trace system.
#[derive(Clone, Debug, Default)]
pub struct BoundaryTerms<T> {
    /// The block rows (free indices) of the Neumann and Robin faces.
    pub rows: Vec<u32>,
    /// alpha |F| / |F^| for each of `rows` (0 on Neumann faces): alpha H_F is this times the
    /// identity.
    pub diagonal: Vec<T>,
    /// `<g, mu_m>_F` for each of `rows`, n_f entries each.
    pub load: Vec<T>,
}

impl<T: Real> BoundaryTerms<T> {
    /// Whether there is nothing to add (every boundary face is Dirichlet).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds the terms to a right-hand side of `n_f` entries per block row, and `diagonal` to
    /// the diagonal of each row's own block through `add_to_diagonal(row, value)`.
    pub fn add_to(&self, n_f: usize, rhs: &mut [T], mut add_to_diagonal: impl FnMut(usize, T)) {
        for (k, &row) in self.rows.iter().enumerate() {
            let row = row as usize;
            for m in 0..n_f {
                rhs[row * n_f + m] += self.load[k * n_f + m];
            }
            if self.diagonal[k] != T::zero() {
                add_to_diagonal(row, self.diagonal[k]);
            }
        }
    }
}

/// Whether face `f` is on the domain's boundary: a boundary face of `mesh` that is not the
/// interface of a part with another part (a mesh part's [`INTERFACE_TAG`] faces are interior
/// to the whole mesh: unknowns with no boundary condition).
pub fn on_domain_boundary(mesh: &Mesh, f: usize) -> bool {
    mesh.is_boundary_face(f) && mesh.boundary_tag(f) != INTERFACE_TAG
}

/// Which faces are Dirichlet: the boundary faces whose tag has no other condition.
pub fn dirichlet_faces(mesh: &Mesh, problem: &Problem) -> Vec<bool> {
    (0..mesh.n_faces())
        .into_par_iter()
        .map(|f| {
            on_domain_boundary(mesh, f)
                && matches!(problem.condition(mesh.boundary_tag(f)), BoundaryCondition::Dirichlet)
        })
        .collect()
}

/// Whether something fixes the constant that a pure Neumann problem leaves free, as far as the
/// mesh and the problem tell without evaluating coefficients: a Dirichlet or Robin face, or c
/// given as a number (or one per cell) that is positive somewhere.
pub fn constant_fixed(mesh: &Mesh, problem: &Problem) -> bool {
    let reaction = match &problem.reaction {
        crate::Coefficient::Constant(c) => *c > 0.0,
        crate::Coefficient::PerCell(v) => v.iter().any(|&c| c > 0.0),
        _ => false,
    };
    reaction
        || (0..mesh.n_faces()).into_par_iter().any(|f| {
            on_domain_boundary(mesh, f)
                && !matches!(
                    problem.condition(mesh.boundary_tag(f)),
                    BoundaryCondition::Neumann { .. }
                )
        })
}

/// Whether the solution is fixed only up to a constant: no Dirichlet face, no Robin face and
/// c = 0 everywhere (`any_reaction`: whether c > 0 on some cell). Such a problem is refused
/// unless [`Problem::mean_zero`] asks for mean(u_h) = 0; then the trace matrix is singular
/// with the constants as its null space, and the pipeline solves it in their complement.
///
/// # Errors
/// [`CoreError::InvalidParameter`] for the constant left free without `mean_zero`.
pub fn constant_left_free(
    mesh: &Mesh,
    problem: &Problem,
    topology: &TraceTopology,
    any_reaction: bool,
) -> Result<bool> {
    let any_dirichlet = (0..mesh.n_faces()).any(|f| topology.is_dirichlet(f));
    let any_robin = (0..mesh.n_faces()).any(|f| {
        on_domain_boundary(mesh, f)
            && matches!(problem.condition(mesh.boundary_tag(f)), BoundaryCondition::Robin { .. })
    });
    constant_free_unless(problem, any_dirichlet || any_robin || any_reaction)
}

/// [`constant_left_free`] once it is known whether something fixes the constant (`fixed`: a
/// Dirichlet or Robin face, or c > 0 somewhere).
///
/// # Errors
/// As [`constant_left_free`].
pub fn constant_free_unless(problem: &Problem, fixed: bool) -> Result<bool> {
    if fixed {
        Ok(false)
    } else if problem.mean_zero {
        Ok(true)
    } else {
        Err(CoreError::InvalidParameter {
            name: "boundary conditions",
            reason: "no Dirichlet or Robin face and c = 0: the solution is fixed only up to a \
                     constant (pure Neumann); give one boundary part Dirichlet or Robin data, \
                     or c > 0, or ask for mean(u) = 0 (Problem::mean_zero)"
                .into(),
        })
    }
}

/// "on face f (boundary tag t, centroid [..])": where a value of boundary data is, for messages.
pub fn face_place(mesh: &Mesh, f: usize) -> String {
    let fv = mesh.face_vertices(f);
    let d = mesh.dim();
    let centroid: Vec<f64> = (0..d)
        .map(|r| fv.iter().map(|&v| mesh.vertex(v)[r]).sum::<f64>() / fv.len() as f64)
        .collect();
    let tag = if mesh.is_boundary_face(f) {
        format!("boundary tag {}, ", mesh.boundary_tag(f))
    } else {
        String::new()
    };
    format!("on face {f} ({tag}centroid {centroid:?})")
}

/// The outward unit normal of boundary face `f` (away from its one cell).
pub fn outward_normal(mesh: &Mesh, f: usize) -> [f64; 3] {
    let d = mesh.dim();
    let fv = mesh.face_vertices(f);
    let p = |i: usize| mesh.vertex(fv[i]);
    let mut n = [0.0; 3];
    if d == 2 {
        let t = [p(1)[0] - p(0)[0], p(1)[1] - p(0)[1]];
        n[0] = t[1];
        n[1] = -t[0];
    } else {
        let a: Vec<f64> = (0..3).map(|r| p(1)[r] - p(0)[r]).collect();
        let b: Vec<f64> = (0..3).map(|r| p(2)[r] - p(0)[r]).collect();
        n = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
    }
    // Orient away from the cell: compare with the direction from the cell's centroid.
    let cell = mesh.face_cells(f)[0];
    let cv = mesh.cell_vertices(cell);
    let mut away = 0.0;
    for r in 0..d {
        let cell_centroid: f64 =
            cv.iter().map(|&v| mesh.vertex(v)[r]).sum::<f64>() / cv.len() as f64;
        away += n[r] * (p(0)[r] - cell_centroid);
    }
    let norm = n.iter().map(|x| x * x).sum::<f64>().sqrt();
    let sign = if away < 0.0 { -1.0 } else { 1.0 };
    n.map(|x| sign * x / norm)
}

/// Integrals `int_{F^} g mu_m` over a face's parameter domain (in its canonical
/// parametrisation), by a rule of degree 2k + 6: the barycentric coordinates and trace basis
/// at the rule's points are the same on every face, computed once. Both the Dirichlet
/// projection and the Neumann and Robin loads are such integrals.
pub(crate) struct FaceIntegrator {
    rule: crate::reference::QuadratureRule,
    /// Barycentric coordinates of each point and the trace basis there.
    points: Vec<([f64; 3], Vec<f64>)>,
    n_f: usize,
}

impl FaceIntegrator {
    pub(crate) fn new(mesh: &Mesh, element: &dyn ReferenceElement) -> Self {
        let n_f = element.n_face();
        let vpf = mesh.cell_type().vertices_per_face();
        let rule = element.face_quadrature(2 * element.order() + 6);
        let points = (0..rule.n_points())
            .map(|q| {
                let s = rule.point(q);
                let mut lambda = [0.0; 3];
                face_parameter_barycentric(s, &mut lambda[..vpf]);
                let mut mu = vec![0.0; n_f];
                element.eval_trace_basis(s, &mut mu);
                (lambda, mu)
            })
            .collect();
        FaceIntegrator { rule, points, n_f }
    }

    /// |F^|, the parameter domain's measure: H_F = (|F| / |F^|) I.
    pub(crate) fn reference_measure(&self) -> f64 {
        self.rule.weights.iter().sum()
    }

    /// `int_{F^} g(x) mu_m` on face `f`, for m = 0..n_f (the sums as on one thread).
    pub(crate) fn integrate(&self, mesh: &Mesh, f: usize, g: impl Fn(&[f64]) -> f64) -> Vec<f64> {
        let d = mesh.dim();
        let verts = mesh.face_vertices(f);
        let mut acc = vec![0.0; self.n_f];
        for (q, (lambda, mu)) in self.points.iter().enumerate() {
            let mut x = [0.0; 3];
            for (i, &v) in verts.iter().enumerate() {
                for r in 0..d {
                    x[r] += lambda[i] * mesh.vertex(v)[r];
                }
            }
            let g = g(&x[..d]);
            for m in 0..self.n_f {
                acc[m] += self.rule.weights[q] * g * mu[m];
            }
        }
        acc
    }
}

/// The Neumann and Robin terms (module docs), by quadrature of degree 2k + 6 on each face.
pub fn boundary_terms<T: Real>(
    mesh: &Mesh,
    element: &dyn ReferenceElement,
    topology: &TraceTopology,
    problem: &Problem,
) -> Result<BoundaryTerms<T>> {
    if problem.boundary.values().all(|c| matches!(c, BoundaryCondition::Dirichlet)) {
        return Ok(BoundaryTerms::default());
    }
    let n_f = element.n_face();
    let faces: Vec<usize> = (0..mesh.n_faces())
        .into_par_iter()
        .filter(|&f| on_domain_boundary(mesh, f) && !topology.is_dirichlet(f))
        .collect();
    if faces.is_empty() {
        return Ok(BoundaryTerms::default());
    }
    let integrator = FaceIntegrator::new(mesh, element);
    let reference_measure = integrator.reference_measure();
    let capture = crate::user_code::Capture::current();
    let per_face: Vec<(T, Vec<T>)> = faces
        .par_iter()
        .map(|&f| {
            let scale = mesh.face_measure(f) / reference_measure;
            let normal = outward_normal(mesh, f);
            let (alpha, data) = match problem.condition(mesh.boundary_tag(f)) {
                BoundaryCondition::Neumann { data } => (0.0, data),
                BoundaryCondition::Robin { alpha, data } => (*alpha, data),
                BoundaryCondition::Dirichlet => unreachable!("Dirichlet faces are not free"),
            };
            let load =
                capture.within(|| integrator.integrate(mesh, f, |x| data(x, &normal[..x.len()])));
            (
                T::from_f64_lossy(alpha * scale),
                load.into_iter().map(|v| T::from_f64_lossy(v * scale)).collect(),
            )
        })
        .collect();
    let mut terms = BoundaryTerms {
        rows: faces.iter().map(|&f| topology.free_index[f]).collect(),
        diagonal: Vec::with_capacity(faces.len()),
        load: Vec::with_capacity(faces.len() * n_f),
    };
    for (diagonal, load) in per_face {
        terms.diagonal.push(diagonal);
        terms.load.extend(load);
    }
    if let Some(i) = terms.load.iter().position(|v| !v.is_finite()) {
        let f = faces[i / n_f];
        let what = format!("the {} data", problem.condition(mesh.boundary_tag(f)).name());
        return Err(crate::user_code::not_finite(
            &what,
            terms.load[i].as_f64(),
            face_place(mesh, f),
        ));
    }
    Ok(terms)
}

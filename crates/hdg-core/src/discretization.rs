//! Host-side setup shared by every backend: reference element, tables, trace topology,
//! per-cell coefficients and the Dirichlet data (L2 projection onto the trace space).
use hdg_mesh::Mesh;
use rayon::prelude::*;

use crate::boundary::BoundaryTerms;
use crate::coefficients::PointCoefficients;
use crate::error::{CoreError, Result};
use crate::problem::{Problem, Tau};
use crate::real::Real;
use crate::reference::{reference_element, ReferenceElement};
use crate::tables::ElementTables;
use crate::topology::TraceTopology;
use crate::user_code::{not_finite, run_user};

/// Lowest supported polynomial order.
pub const MIN_ORDER: usize = 1;
/// Highest supported polynomial order.
pub const MAX_ORDER: usize = 10;

/// Everything about one problem on one mesh at one order that does not depend on the backend.
pub struct Discretization<'a, T: Real> {
    /// The mesh.
    pub mesh: &'a Mesh,
    /// The problem.
    pub problem: &'a Problem,
    /// Polynomial order k.
    pub order: usize,
    /// The order-k reference element.
    pub element: Box<dyn ReferenceElement>,
    /// Constant matrices for the kernels.
    pub tables: ElementTables<T>,
    /// Unknown numbering and DBF structure.
    pub topology: TraceTopology,
    /// kappa per cell (where kappa varies inside cells: its cell mean, see
    /// [`crate::coefficients`]).
    pub kappa: Vec<T>,
    /// c per cell (where c varies inside cells: its cell mean).
    pub reaction: Vec<T>,
    /// kappa^-1 and c at quadrature points, when kappa or c is a function of x: the element
    /// kernels then form weighted mass matrices instead of scaling reference ones.
    pub point_coefficients: Option<PointCoefficients<T>>,
    /// tau per (cell, local face): `[c * faces_per_cell + f]`.
    pub tau: Vec<T>,
    /// Trace values on every face, by global face (`[f * n_f + m]`): the L2 projection of the
    /// Dirichlet data on Dirichlet faces, zero elsewhere.
    pub dirichlet_values: Vec<T>,
    /// What the Neumann and Robin faces add to the trace system.
    pub boundary_terms: BoundaryTerms<T>,
    /// Whether the trace matrix has the constants as its null space (pure Neumann, c = 0,
    /// with [`Problem::mean_zero`]): the pipeline then solves in their complement and shifts
    /// u_h to mean zero.
    pub constant_null_space: bool,
}

impl<'a, T: Real> Discretization<'a, T> {
    /// Validates the inputs and builds the setup.
    pub fn new(mesh: &'a Mesh, problem: &'a Problem, order: usize) -> Result<Self> {
        Self::build(mesh, problem, order, Whole::Mesh)
    }

    /// The setup of one rank's part of a distributed run: `mesh` is the part (its
    /// [`hdg_mesh::INTERFACE_TAG`] faces are unknowns without a boundary condition) and
    /// `problem` the problem restricted to its cells ([`Problem::restricted_to`]). What only
    /// the whole mesh can tell was checked on it before: the boundary tags a condition names
    /// (a part may lack some) and whether the constant is left free (a part may have no
    /// Dirichlet face); a part never has the constants as its null space.
    pub fn for_part(mesh: &'a Mesh, problem: &'a Problem, order: usize) -> Result<Self> {
        Self::build(mesh, problem, order, Whole::Part)
    }

    fn build(mesh: &'a Mesh, problem: &'a Problem, order: usize, whole: Whole) -> Result<Self> {
        if !(MIN_ORDER..=MAX_ORDER).contains(&order) {
            return Err(CoreError::InvalidOrder { order, min: MIN_ORDER, max: MAX_ORDER });
        }
        match whole {
            Whole::Mesh => problem.validate_on(mesh)?,
            Whole::Part => problem.validate(mesh.n_cells())?,
        }
        let element = reference_element(mesh.cell_type(), order)?;
        let post_element = reference_element(mesh.cell_type(), order + 1)?;
        let load_degree = match problem.source.degree() {
            Some(d) => order + d,
            None => 2 * order + 4,
        };
        let tables = ElementTables::new(element.as_ref(), post_element.as_ref(), load_degree);
        let topology =
            TraceTopology::with_dirichlet(mesh, &crate::boundary::dirichlet_faces(mesh, problem));
        let coefficients = run_user("kappa or c (a function of x)", || {
            crate::coefficients::evaluate(mesh, problem, &tables)
        })??;
        let any_reaction = coefficients.reaction.par_iter().any(|&c| c > 0.0);
        let constant_null_space = match whole {
            Whole::Mesh => {
                crate::boundary::constant_left_free(mesh, problem, &topology, any_reaction)?
            }
            Whole::Part => false,
        };
        let fpc = mesh.cell_type().faces_per_cell();
        let n_cells = mesh.n_cells();
        let tau = stabilization(mesh, &problem.tau, &coefficients.kappa);
        let lossy = |v: Vec<f64>| -> Vec<T> { v.into_iter().map(T::from_f64_lossy).collect() };
        let (kappa, reaction) = (lossy(coefficients.kappa), lossy(coefficients.reaction));
        debug_assert_eq!(tau.len(), n_cells * fpc);
        let dirichlet_values = run_user("the Dirichlet data g_D", || {
            project_dirichlet(mesh, element.as_ref(), &topology, problem)
        })??;
        let boundary_terms = run_user("the Neumann or Robin data", || {
            crate::boundary::boundary_terms(mesh, element.as_ref(), &topology, problem)
        })??;
        Ok(Discretization {
            mesh,
            problem,
            order,
            element,
            tables,
            topology,
            kappa,
            reaction,
            point_coefficients: coefficients.at_points,
            tau,
            dirichlet_values,
            boundary_terms,
            constant_null_space,
        })
    }

    /// Trace unknowns of the global system (free faces x n_f).
    pub fn trace_dofs(&self) -> usize {
        self.topology.n_rows() * self.tables.n_f
    }

    /// The trace of the constant function 1 (`[row * n_f + m]`): the null vector of the trace
    /// matrix when [`Discretization::constant_null_space`]. The trace basis is orthonormal on
    /// the face parameter domain, mu_0 = 1 / sqrt(|F^|), so 1 = sqrt(|F^|) mu_0 on every face.
    pub fn constant_trace(&self) -> Vec<T> {
        let n_f = self.tables.n_f;
        let mut z = vec![T::zero(); self.trace_dofs()];
        let one = T::from_f64_lossy(self.tables.face_parameter_measure.sqrt());
        z.iter_mut().step_by(n_f).for_each(|v| *v = one);
        z
    }

    /// The mean of u_h over the mesh, from its coefficients (`[c * n + i]`): phi_0 is the
    /// constant 1 / sqrt(|K^|) and the others have mean zero, so (u_h, 1)_K =
    /// |K| U_0 / sqrt(|K^|).
    pub fn mean_of(&self, u: &[T]) -> f64 {
        let (integral, measure) = self.integral_of(u, 0..self.mesh.n_cells());
        integral / measure
    }

    /// (u_h, 1) over the cells `cells` and their measure (see [`Self::mean_of`]): a rank's
    /// owned cells in a distributed run.
    pub fn integral_of(&self, u: &[T], cells: std::ops::Range<usize>) -> (f64, f64) {
        let (mesh, n) = (self.mesh, self.tables.n);
        let scale = 1.0 / self.tables.reference_measure.sqrt();
        let (mut integral, mut measure) = (0.0, 0.0);
        for c in cells {
            let volume = mesh.cell_measure(c);
            integral += volume * scale * u[c * n].as_f64();
            measure += volume;
        }
        (integral, measure)
    }
}

/// Whether a discretization is of the whole mesh or of a rank's part of it.
#[derive(Clone, Copy)]
enum Whole {
    Mesh,
    Part,
}

/// tau per (cell, local face) from the problem's rule (validated by `Problem::validate`).
fn stabilization<T: Real>(mesh: &Mesh, tau: &Tau, kappa: &[f64]) -> Vec<T> {
    let fpc = mesh.cell_type().faces_per_cell();
    let n_cells = mesh.n_cells();
    match tau {
        Tau::Constant(v) => crate::topology::filled(T::from_f64_lossy(*v), n_cells * fpc),
        Tau::PerFace(v) => v.iter().map(|&t| T::from_f64_lossy(t)).collect(),
        Tau::KappaOverH { scale } => (0..n_cells * fpc)
            .into_par_iter()
            .map(|i| {
                let c = i / fpc;
                T::from_f64_lossy(scale * kappa[c] / longest_edge(mesh, c))
            })
            .collect(),
    }
}

/// The longest edge of cell `c` (its diameter: the cell is a simplex).
fn longest_edge(mesh: &Mesh, c: usize) -> f64 {
    let cv = mesh.cell_vertices(c);
    let mut h = 0.0f64;
    for (a, &va) in cv.iter().enumerate() {
        for &vb in &cv[a + 1..] {
            let (pa, pb) = (mesh.vertex(va), mesh.vertex(vb));
            h = h.max(pa.iter().zip(pb).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt());
        }
    }
    h
}

/// Lambda = H^{-1} <g_D, mu> on every Dirichlet face. The trace basis is orthonormal on the
/// parameter domain (H^ = I) and H_F = (|F| / |F^|) H^, so Lambda_m is the parameter-domain
/// integral of g_D mu_m in the face's canonical parametrisation.
fn project_dirichlet<T: Real>(
    mesh: &Mesh,
    element: &dyn ReferenceElement,
    topology: &TraceTopology,
    problem: &Problem,
) -> Result<Vec<T>> {
    let n_f = element.n_face();
    let integrator = crate::boundary::FaceIntegrator::new(mesh, element);
    let mut values = vec![T::zero(); mesh.n_faces() * n_f];
    let capture = crate::user_code::Capture::current();
    values.par_chunks_mut(n_f).enumerate().filter(|(f, _)| topology.is_dirichlet(*f)).for_each(
        |(f, face_values)| {
            let g = problem.dirichlet_on(mesh.boundary_tag(f));
            let acc = capture.within(|| integrator.integrate(mesh, f, |x| g(x)));
            for m in 0..n_f {
                face_values[m] = T::from_f64_lossy(acc[m]);
            }
        },
    );
    // Only the Dirichlet faces' values are written (and read by the stages): the others stay
    // zero pages, never touched here.
    let bad = values
        .par_chunks(n_f)
        .enumerate()
        .filter(|(f, _)| topology.is_dirichlet(*f))
        .find_map_first(|(f, face)| face.iter().find(|v| !v.is_finite()).map(|v| (f, *v)));
    match bad {
        Some((f, value)) => Err(not_finite(
            "the Dirichlet data g_D (its projection)",
            value.as_f64(),
            crate::boundary::face_place(mesh, f),
        )),
        None => Ok(values),
    }
}

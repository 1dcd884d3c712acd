//! A computed solution on the host, in `f64`: u_h, q_h and u* cell by cell, the trace on
//! every face, the run's report, and what a user does with them: evaluate at points (with a
//! point locator), walk cells and faces, measure errors against any function.
//!
//! Layouts (the backends' host copies, kept): `u[c * n + i]`, `q[(c * d + r) * n + i]`,
//! `u_star[c * n_post + i]` in the volume bases of order k (u, q) and k + 1 (u*) of the
//! reference cell ([`ReferenceElement::eval_basis`]); `trace[f * n_f + m]` in the trace basis
//! of each face's canonical parametrisation: the point with face parameter `s` is
//! `sum_i lambda_i(s) x_{face_vertices(f)[i]}` ([`crate::reference::face_parameter_barycentric`]).
use std::sync::{Arc, OnceLock};

use hdg_mesh::{Mesh, PointLocator};
use rayon::prelude::*;

use crate::backend::{ErrorNorms, HostFields};
use crate::discretization::Discretization;
use crate::error::Result;
use crate::geometry::mesh_geometry;
use crate::pipeline::PipelineReport;
use crate::problem::{ExactSolution, Problem};
use crate::reference::{reference_element, ReferenceElement};
use crate::user_code::run_user;

/// The fields at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointValue {
    /// The cell the point was evaluated in.
    pub cell: usize,
    /// u_h
    pub u: f64,
    /// q_h (the first `dim` entries), the approximation of q = -kappa grad u.
    pub q: [f64; 3],
    /// u*, the postprocessed solution (order k + 1).
    pub u_star: f64,
}

/// The volume bases of a [`Solution`] at fixed reference points ([`Solution::tabulate`]).
#[derive(Clone, Debug)]
pub struct Tabulated {
    points: usize,
    /// u_h and q_h's basis (order k), `[p * n + i]`.
    phi: Vec<f64>,
    /// u*'s basis (order k + 1), `[p * n_post + i]`.
    phi_post: Vec<f64>,
}

impl Tabulated {
    /// The number of points.
    pub fn n_points(&self) -> usize {
        self.points
    }
}

/// One cell of a [`Solution`]: its vertices and coefficients.
#[derive(Clone, Copy, Debug)]
pub struct CellView<'a> {
    /// Cell number.
    pub index: usize,
    /// Global vertex numbers, in the cell's local order.
    pub vertices: &'a [usize],
    /// u_h coefficients (`n`).
    pub u: &'a [f64],
    /// q_h coefficients, component-major (`[r * n + i]`).
    pub q: &'a [f64],
    /// u* coefficients (`n_post`).
    pub u_star: &'a [f64],
}

/// One face of a [`Solution`]: where it is and the trace on it.
#[derive(Clone, Copy, Debug)]
pub struct FaceView<'a> {
    /// Face number.
    pub index: usize,
    /// Global vertex numbers in the face's canonical order.
    pub vertices: &'a [usize],
    /// The boundary tag, `None` for an interior face.
    pub boundary_tag: Option<u32>,
    /// Trace coefficients (`n_f`), in the canonical parametrisation.
    pub trace: &'a [f64],
}

/// A solution on the host ([module docs](self)). Built by the `hdg` facade's `Solver`, or by
/// [`Solution::from_parts`] from a pipeline's host copies.
pub struct Solution {
    mesh: Arc<Mesh>,
    problem: Problem,
    order: usize,
    element: Box<dyn ReferenceElement>,
    post_element: Box<dyn ReferenceElement>,
    u: Vec<f64>,
    q: Vec<f64>,
    u_star: Vec<f64>,
    trace: Vec<f64>,
    report: PipelineReport,
    locator: OnceLock<PointLocator>,
    /// Whether the mesh is a rank's part of a distributed run ([`Solution::of_part`]).
    part: bool,
}

impl std::fmt::Debug for Solution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Solution")
            .field("cells", &self.mesh.n_cells())
            .field("order", &self.order)
            .field("report", &self.report)
            .finish()
    }
}

fn widen<T: crate::Real>(v: &[T]) -> Vec<f64> {
    v.par_iter().map(|x| x.as_f64()).collect()
}

impl Solution {
    /// A solution from the host copies of a run: `fields` and `u_star` cell by cell, `trace`
    /// on every face ([`crate::PipelineOutput::full_trace`]).
    ///
    /// # Errors
    /// [`crate::CoreError::InvalidParameter`] if a length does not match the mesh and order.
    pub fn from_parts<T: crate::Real>(
        mesh: Arc<Mesh>,
        problem: Problem,
        order: usize,
        fields: &HostFields<T>,
        u_star: &[T],
        trace: &[T],
        report: PipelineReport,
    ) -> Result<Solution> {
        let element = reference_element(mesh.cell_type(), order)?;
        let post_element = reference_element(mesh.cell_type(), order + 1)?;
        let (cells, d) = (mesh.n_cells(), mesh.dim());
        let (n, np, nf) = (element.n_volume(), post_element.n_volume(), element.n_face());
        crate::backend::check_lengths(
            "solution",
            &[cells * n, cells * d * n, cells * np, mesh.n_faces() * nf],
            &[fields.u.len(), fields.q.len(), u_star.len(), trace.len()],
        )?;
        Ok(Solution {
            u: widen(&fields.u),
            q: widen(&fields.q),
            u_star: widen(u_star),
            trace: widen(trace),
            mesh,
            problem,
            order,
            element,
            post_element,
            report,
            locator: OnceLock::new(),
            part: false,
        })
    }

    /// The solution a pipeline run left on `backend`, copied to the host; `None` unless the
    /// run kept the full trace ([`crate::PipelineOptions::full_trace`]).
    ///
    /// # Errors
    /// Those of the backend's copies and of [`Solution::from_parts`].
    pub fn from_output<T: crate::Real, B: crate::Backend<T>>(
        backend: &B,
        mesh: Arc<Mesh>,
        problem: Problem,
        out: &crate::PipelineOutput<T, B>,
    ) -> Result<Option<Solution>> {
        let Some(trace) = &out.full_trace else { return Ok(None) };
        let fields = backend.fields_to_host(&out.fields)?;
        let u_star = backend.postprocessed_to_host(&out.postprocessed)?;
        let order = out.report.order;
        Solution::from_parts(mesh, problem, order, &fields, &u_star, trace, out.report.clone())
            .map(Some)
    }

    /// This solution as one rank's part of a distributed run: its mesh is the part
    /// (`hdg_mesh::MeshPart`), whose interface faces carry no boundary condition and which may
    /// lack boundary tags the problem names; its error quadratures set the part up as the
    /// distributed pipeline does ([`Discretization::for_part`]).
    pub fn of_part(mut self) -> Solution {
        self.part = true;
        self
    }

    /// Whether this is a rank's part of a distributed run ([`Solution::of_part`]).
    pub fn is_part(&self) -> bool {
        self.part
    }

    /// The mesh.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The problem solved.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }

    /// The polynomial order k.
    pub fn order(&self) -> usize {
        self.order
    }

    /// What the run reported: sizes, the trace solve, errors against the problem's exact
    /// solution (if it has one), stage timings.
    pub fn report(&self) -> &PipelineReport {
        &self.report
    }

    /// The reference element of u_h and q_h (order k).
    pub fn element(&self) -> &dyn ReferenceElement {
        self.element.as_ref()
    }

    /// The reference element of u* (order k + 1).
    pub fn post_element(&self) -> &dyn ReferenceElement {
        self.post_element.as_ref()
    }

    /// u_h coefficients, `[c * n + i]`.
    pub fn u(&self) -> &[f64] {
        &self.u
    }

    /// q_h coefficients, `[(c * d + r) * n + i]`.
    pub fn q(&self) -> &[f64] {
        &self.q
    }

    /// u* coefficients, `[c * n_post + i]`.
    pub fn u_star(&self) -> &[f64] {
        &self.u_star
    }

    /// The trace on every face, `[f * n_f + m]` (Dirichlet faces: the projected data).
    pub fn trace(&self) -> &[f64] {
        &self.trace
    }

    /// Cell `c`.
    pub fn cell(&self, c: usize) -> CellView<'_> {
        let (n, np, d) = (self.element.n_volume(), self.post_element.n_volume(), self.mesh.dim());
        CellView {
            index: c,
            vertices: self.mesh.cell_vertices(c),
            u: &self.u[c * n..(c + 1) * n],
            q: &self.q[c * d * n..(c + 1) * d * n],
            u_star: &self.u_star[c * np..(c + 1) * np],
        }
    }

    /// Every cell, in order.
    pub fn cells(&self) -> impl ExactSizeIterator<Item = CellView<'_>> + '_ {
        (0..self.mesh.n_cells()).map(|c| self.cell(c))
    }

    /// Face `f`.
    pub fn face(&self, f: usize) -> FaceView<'_> {
        let nf = self.element.n_face();
        FaceView {
            index: f,
            vertices: self.mesh.face_vertices(f),
            boundary_tag: self.mesh.is_boundary_face(f).then(|| self.mesh.boundary_tag(f)),
            trace: &self.trace[f * nf..(f + 1) * nf],
        }
    }

    /// Every face, in order.
    pub fn faces(&self) -> impl ExactSizeIterator<Item = FaceView<'_>> + '_ {
        (0..self.mesh.n_faces()).map(|f| self.face(f))
    }

    /// The fields in cell `c` at the reference point `xi` (coordinates on the reference
    /// simplex with vertices `(-1,..,-1)` and `(-1,..,-1) + 2 e_s`).
    pub fn evaluate_in_cell(&self, c: usize, xi: &[f64]) -> PointValue {
        let d = self.mesh.dim();
        self.evaluate_tabulated(c, &self.tabulate(&xi[..d]), 0)
    }

    /// The bases of u_h, q_h and u* at the reference points `xi` (`dim` coordinates each,
    /// point-major), for [`Self::evaluate_tabulated`] on any number of cells: what a
    /// quadrature over the cells evaluates the fields with.
    pub fn tabulate(&self, xi: &[f64]) -> Tabulated {
        let d = self.mesh.dim();
        let (n, np) = (self.element.n_volume(), self.post_element.n_volume());
        let points = xi.len() / d;
        let (mut phi, mut phi_post) = (vec![0.0; points * n], vec![0.0; points * np]);
        for (p, xi) in xi.chunks_exact(d).enumerate() {
            self.element.eval_basis(xi, &mut phi[p * n..(p + 1) * n], None);
            self.post_element.eval_basis(xi, &mut phi_post[p * np..(p + 1) * np], None);
        }
        Tabulated { points, phi, phi_post }
    }

    /// The fields in cell `c` at point `p` of `table` ([`Self::tabulate`]).
    ///
    /// # Panics
    /// If `p` is not below `table.n_points()` or `c` below the number of cells.
    pub fn evaluate_tabulated(&self, c: usize, table: &Tabulated, p: usize) -> PointValue {
        let d = self.mesh.dim();
        let (n, np) = (self.element.n_volume(), self.post_element.n_volume());
        let (phi, phi_post) = (&table.phi[p * n..(p + 1) * n], &table.phi_post[p * np..][..np]);
        let cell = self.cell(c);
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();
        let mut q = [0.0; 3];
        for r in 0..d {
            q[r] = dot(phi, &cell.q[r * n..(r + 1) * n]);
        }
        PointValue { cell: c, u: dot(phi, cell.u), q, u_star: dot(phi_post, cell.u_star) }
    }

    fn locator(&self) -> &PointLocator {
        self.locator.get_or_init(|| PointLocator::new(&self.mesh))
    }

    /// The fields at the physical point `x`, or `None` outside the mesh. The fields are
    /// discontinuous between cells: a point on a face takes the values of one of its cells.
    ///
    /// # Errors
    /// [`crate::CoreError::Mesh`] for a point with other than `dim` coordinates (`[x, y, z]`
    /// on a triangle mesh) or a coordinate that is not finite.
    pub fn evaluate(&self, x: &[f64]) -> Result<Option<PointValue>> {
        let found = self.locator().locate(&self.mesh, x)?;
        Ok(found.map(|found| {
            self.evaluate_in_cell(found.cell, &found.reference_point(self.mesh.dim()))
        }))
    }

    /// [`Self::evaluate`] at many points (`dim` coordinates each, point-major), in parallel.
    ///
    /// # Errors
    /// [`crate::CoreError::InvalidParameter`] if `points.len()` is not a multiple of the
    /// dimension; those of [`Self::evaluate`] for the first bad point.
    pub fn evaluate_many(&self, points: &[f64]) -> Result<Vec<Option<PointValue>>> {
        let d = self.mesh.dim();
        crate::backend::whole_blocks("points", points.len(), d)?;
        self.locator();
        points.par_chunks(d).map(|x| self.evaluate(x)).collect()
    }

    /// The trace on face `f` at the canonical face parameter `s` (`dim - 1` coordinates).
    pub fn trace_at(&self, f: usize, s: &[f64]) -> f64 {
        let mut mu = vec![0.0; self.element.n_face()];
        self.element.eval_trace_basis(s, &mut mu);
        mu.iter().zip(self.face(f).trace).map(|(a, b)| a * b).sum()
    }

    /// The L2 errors of u_h, q_h and u* against `exact` (q = -kappa grad u with the
    /// problem's kappa; NaN for an exact solution without gradient).
    ///
    /// # Errors
    /// A panic inside `exact` becomes [`crate::CoreError::InvalidParameter`] naming it.
    pub fn errors(&self, exact: &ExactSolution) -> Result<ErrorNorms> {
        self.with_error_quadrature(exact, crate::error_norms::error_norms)
    }

    /// The squared L2 errors of u_h, q_h and u* on every cell (`[c] = [u, q, u*]`).
    ///
    /// # Errors
    /// As [`Self::errors`].
    pub fn cell_errors(&self, exact: &ExactSolution) -> Result<Vec<[f64; 3]>> {
        self.with_error_quadrature(exact, crate::error_norms::cell_errors)
    }

    /// Runs one of the host error quadratures of [`crate::error_norms`] on this solution:
    /// the problem's tables and coefficients on this mesh and order, the geometry, the fields.
    fn with_error_quadrature<R>(
        &self,
        exact: &ExactSolution,
        quadrature: impl FnOnce(
            &Discretization<'_, f64>,
            &[f64],
            &[f64],
            &HostFields<f64>,
            &[f64],
            &ExactSolution,
        ) -> R,
    ) -> Result<R> {
        let disc = match self.part {
            true => Discretization::<f64>::for_part(&self.mesh, &self.problem, self.order)?,
            false => Discretization::<f64>::new(&self.mesh, &self.problem, self.order)?,
        };
        let (vertices, geometry) =
            mesh_geometry::<f64>(&self.mesh, disc.tables.face_parameter_measure);
        let fields = HostFields { u: self.u.clone(), q: self.q.clone() };
        run_user("the exact solution", || {
            quadrature(&disc, &geometry, &vertices, &fields, &self.u_star, exact)
        })
    }

    /// `||u - u_h||` and `||u - u*||` against any function u (the q entry is NaN).
    ///
    /// # Errors
    /// As [`Self::errors`].
    pub fn errors_against(
        &self,
        u: impl Fn(&[f64]) -> f64 + Send + Sync + 'static,
    ) -> Result<ErrorNorms> {
        self.errors(&ExactSolution::Value { u: Arc::new(u) })
    }
}

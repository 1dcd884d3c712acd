//! The element stages a backend runs: static condensation and recovery ([`LocalSolver`]),
//! assembly of the trace operator ([`Assembler`]) and postprocessing with error norms
//! ([`Postprocessor`]), with the host copies of what they compute.
use crate::discretization::Discretization;
use crate::error::Result;
use crate::problem::ExactSolution;
use crate::real::Real;

use super::{TraceOperator, VectorOps};

/// Stages "local solve" and "recovery": batched static condensation of every element
/// (eliminate q, then u: K_e, b_e and what recovery needs), and recovery of u_h, q_h from the
/// trace solution.
pub trait LocalSolver<T: Real>: VectorOps<T> {
    /// Discretization data resident on the backend (geometric factors, tables, coefficients).
    type Prepared: Send + Sync;
    /// Condensed element data: element trace matrices and loads, and the recovery operators.
    type Condensed: Send + Sync;
    /// Recovered local fields u_h and q_h.
    type LocalFields: Send + Sync;

    /// Uploads what the kernels need and computes the geometric factors.
    fn prepare(&self, disc: &Discretization<'_, T>) -> Result<Self::Prepared>;
    /// Batched condensation of every element.
    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
    ) -> Result<Self::Condensed>;
    /// Batched recovery of u_h and q_h from the free trace values (Dirichlet faces take their
    /// projected data).
    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
        condensed: &Self::Condensed,
        trace: &Self::Vector,
    ) -> Result<Self::LocalFields>;
    /// Host copy of the condensed element data, element-contiguous (for checks and export;
    /// a device backend converts from its own layout).
    fn condensed_to_host(&self, condensed: &Self::Condensed) -> Result<HostCondensed<T>>;
    /// Host copy of the local fields.
    fn fields_to_host(&self, fields: &Self::LocalFields) -> Result<HostFields<T>>;
}

/// Stage "assembly": element trace matrices to the global trace operator and right-hand side.
pub trait Assembler<T: Real>: LocalSolver<T> {
    /// The assembled operator.
    type Operator: TraceOperator<T, Vector = Self::Vector>;
    /// Assembles the operator and the right-hand side (Dirichlet columns moved to it).
    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
        condensed: &Self::Condensed,
    ) -> Result<(Self::Operator, Self::Vector)>;
    /// Frees what of `condensed` only the assembly reads (the element trace matrices), once
    /// `operator` is built and needs it no longer: the solve's setup then reuses that memory
    /// (on the CPU a large share of a run's peak memory; BENCHMARKS.md, section 'Memory').
    /// Recovery must still work afterwards. The default keeps everything.
    fn release_assembly_inputs(&self, condensed: &mut Self::Condensed, operator: &Self::Operator) {
        let _ = (condensed, operator);
    }
}

/// Stage "postprocess": local P_{k+1} reconstruction u*, and error norms.
pub trait Postprocessor<T: Real>: LocalSolver<T> {
    /// Postprocessed field u* (coefficients in the order-(k+1) basis).
    type Postprocessed: Send + Sync;
    /// Batched postprocessing.
    fn postprocess(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
        fields: &Self::LocalFields,
    ) -> Result<Self::Postprocessed>;
    /// Host copy of u*, element-contiguous: `[e * n' + j]`, n' the P_{k+1} basis size.
    fn postprocessed_to_host(&self, post: &Self::Postprocessed) -> Result<Vec<T>>;
    /// L2 errors of u_h, q_h and u* against an exact solution.
    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
        fields: &Self::LocalFields,
        post: &Self::Postprocessed,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms>;
    /// The squared L2 errors of u_h, q_h and u* (the squares of [`Postprocessor::error_norms`]'s
    /// terms) summed over cells `0..cells` only: a distributed run's owned cells, which come
    /// before its ghost cells. The default downloads the fields and sums on the host.
    fn squared_errors_of_first(
        &self,
        disc: &Discretization<'_, T>,
        prep: &Self::Prepared,
        fields: &Self::LocalFields,
        post: &Self::Postprocessed,
        exact: &ExactSolution,
        cells: usize,
    ) -> Result<[f64; 3]> {
        let _ = prep;
        let host_fields = self.fields_to_host(fields)?;
        let u_star = self.postprocessed_to_host(post)?;
        let (cell_vertices, geometry) =
            crate::geometry::mesh_geometry::<T>(disc.mesh, disc.tables.face_parameter_measure);
        let errors = crate::error_norms::cell_errors(
            disc,
            &geometry,
            &cell_vertices,
            &host_fields,
            &u_star,
            exact,
        );
        Ok(crate::error_norms::sum_first(&errors, cells))
    }
}

/// L2 errors of the recovered and postprocessed fields.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorNorms {
    /// ||u - u_h||
    pub u: f64,
    /// ||q - q_h||, q = -kappa grad u
    pub q: f64,
    /// ||u - u*||
    pub u_star: f64,
}

/// Condensed element data on the host, element-contiguous (n: local unknowns of u, nl: trace
/// unknowns of one element's faces).
#[derive(Clone, Debug, Default)]
pub struct HostCondensed<T> {
    /// K_e: `[e * nl * nl + a * nl + b]`.
    pub trace_matrices: Vec<T>,
    /// b_e: `[e * nl + a]`.
    pub trace_loads: Vec<T>,
    /// Z = S^-1 P: `[e * n * nl + i * nl + a]`.
    pub recovery_operator: Vec<T>,
    /// u0 = S^-1 F: `[e * n + i]`.
    pub recovery_load: Vec<T>,
}

impl<T> HostCondensed<T> {
    /// Bytes held for recovery (Z and u0).
    pub fn recovery_bytes(&self) -> usize {
        (self.recovery_operator.len() + self.recovery_load.len()) * std::mem::size_of::<T>()
    }
}

/// Local fields on the host, element-contiguous: `u[e*n + i]`, `q[(e*d + r)*n + i]`.
#[derive(Clone, Debug, Default)]
pub struct HostFields<T> {
    /// u_h coefficients.
    pub u: Vec<T>,
    /// q_h coefficients.
    pub q: Vec<T>,
}

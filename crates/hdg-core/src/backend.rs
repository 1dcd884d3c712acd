//! The stage traits: what a backend must provide to run the HDG pipeline.
//!
//! Each trait is one stage of the formulation (`hdg-formulation.md`). Every backend-resident
//! object is an associated type, so a GPU backend keeps geometry, condensed element data, the
//! trace operator and the Krylov vectors on the device between stages; host round trips happen
//! only where a method says `to_host`. Host-side setup (reference tables, the trace topology,
//! Dirichlet data) is built once in [`crate::Discretization`] and handed to every backend.
use rayon::prelude::*;

use crate::auxiliary::VertexSpace;
use crate::discretization::Discretization;
use crate::error::{CoreError, Result};
use crate::problem::ExactSolution;
use crate::real::Real;
use crate::topology::TraceTopology;

/// Vector storage and the level-1 operations (BLAS-1 and elementwise) every solver is built
/// from: what a new backend implements first. Fusions of them that solvers use are
/// [`FusedOps`], batched dense blocks [`BlockOps`].
///
/// Every operation returns a `Result` because on a device any launch may fail. Scalars (dot
/// products) come back to the host: a solver decides when it needs them.
pub trait VectorOps<T: Real>: Sync {
    /// A vector resident on the backend.
    type Vector: Send + Sync;
    /// A vector of zeros.
    fn zeros(&self, len: usize) -> Result<Self::Vector>;
    /// A copy of host data.
    fn copy_from_host(&self, data: &[T]) -> Result<Self::Vector>;
    /// A host copy.
    fn to_host(&self, v: &Self::Vector) -> Result<Vec<T>>;
    /// Length.
    fn len(&self, v: &Self::Vector) -> usize;
    /// dst = src.
    fn copy(&self, src: &Self::Vector, dst: &mut Self::Vector) -> Result<()>;
    /// y += alpha x.
    fn axpy(&self, alpha: T, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// y = x + beta y.
    fn xpby(&self, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()>;
    /// y = alpha x + beta y.
    fn axpby(&self, alpha: T, x: &Self::Vector, beta: T, y: &mut Self::Vector) -> Result<()>;
    /// x = alpha x.
    fn scale(&self, alpha: T, x: &mut Self::Vector) -> Result<()>;
    /// x . y (one global reduction).
    fn dot(&self, x: &Self::Vector, y: &Self::Vector) -> Result<T>;
    /// y = a .* x (elementwise).
    fn pointwise_mul(&self, a: &Self::Vector, x: &Self::Vector, y: &mut Self::Vector)
        -> Result<()>;
    /// v = 1 ./ v (elementwise).
    fn reciprocal(&self, v: &mut Self::Vector) -> Result<()>;
}

/// Fusions of level-1 operations that Krylov solvers use. Each has a default that composes
/// [`VectorOps`], so a new backend works with `impl FusedOps<T> for MyBackend {}`; a tuned one
/// overrides them to touch memory once, launch one kernel and synchronise once.
pub trait FusedOps<T: Real>: VectorOps<T> {
    /// Several dot products in one global reduction phase: `[x_i . y_i]`.
    fn dot_many(&self, pairs: &[(&Self::Vector, &Self::Vector)]) -> Result<Vec<T>> {
        pairs.iter().map(|(x, y)| self.dot(x, y)).collect()
    }
    /// The CG update: x += alpha p, r -= alpha ap, and returns r . r (one pass, one reduction).
    fn cg_update(
        &self,
        alpha: T,
        p: &Self::Vector,
        ap: &Self::Vector,
        x: &mut Self::Vector,
        r: &mut Self::Vector,
    ) -> Result<T> {
        self.axpy(alpha, p, x)?;
        self.axpy(-alpha, ap, r)?;
        self.dot(r, r)
    }
}

/// Batched small dense SPD blocks, for block Jacobi: `blocks` holds n_blocks dense b x b
/// blocks, row-major, b = `block_size`.
pub trait BlockOps<T: Real>: VectorOps<T> {
    /// Factorises every block in place for [`BlockOps::solve_blocks`]: a Cholesky
    /// factorisation (a block that is not SPD is an error), then each block is replaced by its
    /// inverse, so that a solve is one small matrix-vector product with no division.
    fn factor_blocks(&self, blocks: &mut Self::Vector, block_size: usize) -> Result<()>;
    /// z = blockdiag(B)^-1 r with the inverses of [`BlockOps::factor_blocks`].
    fn solve_blocks(
        &self,
        factors: &Self::Vector,
        block_size: usize,
        r: &Self::Vector,
        z: &mut Self::Vector,
    ) -> Result<()>;
    /// w = blockdiag(B)^-1 r followed by one step of a polynomial recurrence on (p, x)
    /// ([`RecurrenceStep::update`]). The default composes [`BlockOps::solve_blocks`] and the
    /// step's vector operations (w is written); a backend may fuse them into one pass that
    /// never stores w, with the same bits.
    fn solve_blocks_step(
        &self,
        factors: &Self::Vector,
        block_size: usize,
        r: &Self::Vector,
        w: &mut Self::Vector,
        step: RecurrenceStep<T>,
        p: &mut Self::Vector,
        x: &mut Self::Vector,
    ) -> Result<()> {
        self.solve_blocks(factors, block_size, r, w)?;
        step.update(self, w, p, x)
    }
}

/// One step of a polynomial recurrence (Chebyshev's) after w = M^-1 r: a search direction p
/// and an iterate x, both starting at zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RecurrenceStep<T> {
    /// p = w, x = alpha w (p and x are overwritten, whatever they held).
    First {
        /// Step length.
        alpha: T,
    },
    /// p = w + beta p, x += alpha p.
    Next {
        /// Step length.
        alpha: T,
        /// Weight of the previous direction.
        beta: T,
    },
}

impl<T: Real> RecurrenceStep<T> {
    /// The step through level-1 operations: `copy`, `copy`, `scale` for the first, `xpby`,
    /// `axpy` for the others (a fused version must round as these do).
    pub fn update<B: VectorOps<T> + ?Sized>(
        self,
        backend: &B,
        w: &B::Vector,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        match self {
            RecurrenceStep::First { alpha } => {
                backend.copy(w, p)?;
                backend.copy(p, x)?;
                backend.scale(alpha, x)
            }
            RecurrenceStep::Next { alpha, beta } => {
                backend.xpby(w, beta, p)?;
                backend.axpy(alpha, p, x)
            }
        }
    }
}

/// Conversions between the two precisions of one backend, for mixed-precision solvers.
pub trait MixedPrecisionOps: FusedOps<f64> + FusedOps<f32> {
    /// y = x rounded to f32.
    fn demote(
        &self,
        x: &<Self as VectorOps<f64>>::Vector,
        y: &mut <Self as VectorOps<f32>>::Vector,
    ) -> Result<()>;
    /// y += x (x widened to f64).
    fn promote_add(
        &self,
        x: &<Self as VectorOps<f32>>::Vector,
        y: &mut <Self as VectorOps<f64>>::Vector,
    ) -> Result<()>;
    /// y = x widened to f64 (the default clears y, then adds).
    fn promote(
        &self,
        x: &<Self as VectorOps<f32>>::Vector,
        y: &mut <Self as VectorOps<f64>>::Vector,
    ) -> Result<()> {
        VectorOps::<f64>::scale(self, 0.0, y)?;
        self.promote_add(x, y)
    }
}

/// A sparse matrix on the host in compressed sparse row form (values in f64): the export of a
/// trace operator (for direct solvers and checks), and the multigrid's matrices and transfers
/// before they go to a backend ([`MultigridOps::upload_csr`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostCsr {
    /// Rows.
    pub n: usize,
    /// Columns (= `n` for the trace matrix and every operator; transfers are rectangular).
    pub n_cols: usize,
    /// Row pointers, n + 1 entries.
    pub indptr: Vec<usize>,
    /// Column of each entry, sorted within each row.
    pub indices: Vec<usize>,
    /// Value of each entry.
    pub values: Vec<f64>,
}

impl HostCsr {
    /// Checks what a backend relies on when it uploads the matrix: n + 1 row pointers from 0
    /// to nnz, non-decreasing, column indices below `n_cols` (and below 2^32), as many values
    /// as indices.
    pub fn check_structure(&self) -> Result<()> {
        let bad =
            |reason: String| Err(CoreError::InvalidParameter { name: "sparse matrix", reason });
        if self.indptr.len() != self.n + 1 || self.indptr[0] != 0 {
            return bad(format!("{} row pointers for {} rows", self.indptr.len(), self.n));
        }
        if self.indptr.windows(2).any(|w| w[0] > w[1]) || self.indptr[self.n] != self.indices.len()
        {
            return bad("row pointers are not a non-decreasing sequence ending at nnz".into());
        }
        if self.values.len() != self.indices.len() {
            return bad(format!("{} values for {} indices", self.values.len(), self.indices.len()));
        }
        if self.n_cols > u32::MAX as usize || self.indices.par_iter().any(|&c| c >= self.n_cols) {
            return bad(format!("a column index is not below {} columns", self.n_cols));
        }
        Ok(())
    }
}

/// The error of an operation given vectors of the wrong lengths: `expected` and `got` list the
/// lengths in the operation's argument order.
pub fn check_lengths(what: &str, expected: &[usize], got: &[usize]) -> Result<()> {
    if expected == got {
        return Ok(());
    }
    Err(CoreError::InvalidParameter {
        name: "vector length",
        reason: format!("{what}: expected lengths {expected:?}, got {got:?}"),
    })
}

/// The number of whole blocks of `block_len` entries in a vector of `len` entries ([`BlockOps`]),
/// or the error of a vector that is not whole blocks, or of an empty block.
pub fn whole_blocks(what: &str, len: usize, block_len: usize) -> Result<usize> {
    if block_len == 0 || !len.is_multiple_of(block_len) {
        return Err(CoreError::InvalidParameter {
            name: "block size",
            reason: format!("{what}: {len} entries are not whole blocks of {block_len} entries"),
        });
    }
    Ok(len / block_len)
}

/// What [`TraceOperator::smoothing_copy`] gives: an operator on the same vectors.
pub type SmoothingCopy<'a, T, V> = Box<dyn TraceOperator<T, Vector = V> + Send + 'a>;

/// Stage "trace solve": the assembled (or matrix-free) global trace operator, Dirichlet unknowns
/// eliminated, applied to a backend vector.
pub trait TraceOperator<T: Real>: Sync {
    /// The backend vector type it acts on.
    type Vector;
    /// Number of unknowns (rows).
    fn dim(&self) -> usize;
    /// y = A x.
    fn apply(&self, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// Whether [`TraceOperator::apply_update`] is implemented (one pass instead of a product
    /// and a vector update); false by default.
    fn fuses_update(&self) -> bool {
        false
    }
    /// y = b + alpha A x, or y += alpha A x without `b`, in one pass, with the bits of
    /// [`TraceOperator::apply`] into a scratch vector s followed by y = b + alpha s (resp.
    /// y += alpha s). Only where [`TraceOperator::fuses_update`] says so: the default is an
    /// error, and callers that cannot know compose `apply` with vector operations instead.
    fn apply_update(
        &self,
        alpha: T,
        x: &Self::Vector,
        b: Option<&Self::Vector>,
        y: &mut Self::Vector,
    ) -> Result<()> {
        let _ = (alpha, x, b, y);
        Err(CoreError::InvalidParameter {
            name: "trace operator",
            reason: "this operator has no fused product and update (fuses_update is false)".into(),
        })
    }
    /// A copy of the operator for the multigrid's smoothing products only, cheaper to apply
    /// (its entries in fewer bytes), where the backend has one; None (the default) smooths
    /// with the operator itself. Each entry is rounded on its own, so the copy is symmetric
    /// where the operator is: the smoother, and with it the V-cycle, stays symmetric positive
    /// definite (`hdg_linalg::multigrid` says why).
    fn smoothing_copy(&self) -> Result<Option<SmoothingCopy<'_, T, Self::Vector>>> {
        Ok(None)
    }
    /// The diagonal of A (for Jacobi preconditioning).
    fn diagonal(&self) -> Result<Self::Vector>;
    /// Size of the natural diagonal blocks (n_f: one face's unknowns).
    fn block_size(&self) -> usize;
    /// The diagonal blocks, `dim / block_size` dense row-major blocks (for block Jacobi).
    fn diagonal_blocks(&self) -> Result<Self::Vector>;
    /// Gershgorin bounds (lower, upper) on the spectrum, optionally of D^-1 A (`scaled`: the
    /// Jacobi-preconditioned operator, rows scaled by their diagonal entry).
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)>;
    /// The matrix on the host (for direct solvers and checks).
    fn to_host_csr(&self) -> Result<HostCsr>;
    /// Every block of the matrix projected onto a small basis: for block row `row` and slot `a`
    /// (the DBF slots of [`crate::TraceTopology`]), the m x m matrix B^T A_{row,a} B, in f64,
    /// at `[((row * slots) + a) * m * m + i * m + j]`; zero for padding and Dirichlet slots.
    /// B is n_f x m with only its first `rows` rows nonzero, given as those rows (`basis`,
    /// rows x m, row-major), so only the leading rows x rows corner of each block is read.
    /// The multigrid builds its coarse operator (a Galerkin product) from it
    /// ([`crate::auxiliary`]). An operator without stored blocks says so (the default).
    fn project_blocks(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>> {
        let _ = (basis, rows, m);
        Err(CoreError::InvalidParameter {
            name: "trace operator",
            reason: "this operator has no stored blocks to project: the multigrid \
                     preconditioner (pcg-mg) needs the assembled DBF operator; with a \
                     matrix-free operator choose another solver, pcg-block-jacobi say"
                .into(),
        })
    }
    /// The multigrid's vertex-level operator A_1 = E^T A E for the vertex space `space` of the
    /// discretization whose trace topology is `topology`, on the host. The default projects
    /// the blocks ([`TraceOperator::project_blocks`]) and assembles on the host
    /// ([`crate::auxiliary::vertex_operator`]); a backend may assemble on its device instead
    /// (the CUDA DBF does, downloading only A_1).
    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        let d = space.vertices_per_face;
        let projected = self.project_blocks(&space.face_transfer, d, d)?;
        crate::auxiliary::vertex_operator(space, topology, &projected)
    }
    /// The operator as [`std::any::Any`] (a wrapper: the operator inside), where a backend may
    /// recognise its own type ([`MultigridOps::vertex_level`]); None (the default) for the
    /// rest.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// What the multigrid preconditioner (`hdg-linalg`) needs from a backend beyond vector
/// operations: sparse matrices in compressed sparse row form (its coarse levels and their
/// transfers; any shape, values in the working precision), and the face-by-face transfer E
/// between the trace space and the P1 vertex space ([`crate::auxiliary`]).
pub trait MultigridOps<T: Real>: FusedOps<T> + BlockOps<T> {
    /// A CSR matrix resident on the backend.
    type Csr: Send + Sync;
    /// The transfer E of a [`VertexSpace`] resident on the backend.
    type FaceTransfer: Send + Sync;
    /// Uploads a host matrix (values rounded to T).
    fn upload_csr(&self, matrix: &HostCsr) -> Result<Self::Csr>;
    /// y = A x.
    fn csr_apply(&self, matrix: &Self::Csr, x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// Uploads what E needs: the reference block E^, each face's vertices, and the incidence
    /// of vertices in faces.
    fn upload_face_transfer(&self, space: &VertexSpace) -> Result<Self::FaceTransfer>;
    /// trace += E coarse: each face's first d coefficients gain E^ times its vertex values.
    fn prolong_add(
        &self,
        transfer: &Self::FaceTransfer,
        coarse: &Self::Vector,
        trace: &mut Self::Vector,
    ) -> Result<()>;
    /// coarse = E^T trace: each vertex gathers from the faces that contain it.
    fn restrict(
        &self,
        transfer: &Self::FaceTransfer,
        trace: &Self::Vector,
        coarse: &mut Self::Vector,
    ) -> Result<()>;
    /// The vertex level's operator A_1 = E^T A E of `trace` ([`TraceOperator::vertex_operator`])
    /// on the host, and as [`MultigridOps::upload_csr`] would upload it where the backend
    /// formed it itself and keeps it (None, the default: it goes up when the level is made).
    fn vertex_level(
        &self,
        trace: &dyn TraceOperator<T, Vector = Self::Vector>,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<Self::Csr>)> {
        Ok((trace.vertex_operator(space, topology)?, None))
    }
    /// The products of one smoothed-aggregation coarsening, where the backend computes them
    /// itself: from the level's matrix A (`fine` on the host, `fine_on_backend` as uploaded)
    /// and the tentative prolongator T (one entry per row), the prolongator
    /// P = (I - omega_over_rho D^-1 A) T, its transpose and the coarse matrix P^T A P, each
    /// with the operations of `hdg_linalg`'s host coarsening in its order (the same numbers to
    /// the bit). `None` leaves them to that host coarsening: the default, and a backend's
    /// answer where its own would not be faster or a row is beyond its kernels.
    fn coarsen(
        &self,
        fine: &HostCsr,
        fine_on_backend: &Self::Csr,
        tentative: &HostCsr,
        omega_over_rho: f64,
    ) -> Result<Option<Coarsening<Self::Csr>>> {
        let _ = (fine, fine_on_backend, tentative, omega_over_rho);
        Ok(None)
    }
}

/// What [`MultigridOps::coarsen`] gives: the transfers on the backend, the coarse matrix on
/// the host (the next coarsening's aggregation reads it there) and, where the backend made it,
/// on the backend.
pub struct Coarsening<C> {
    /// P, fine x coarse.
    pub prolong: C,
    /// P^T.
    pub restrict: C,
    /// P^T A P.
    pub coarse: HostCsr,
    /// P^T A P as [`MultigridOps::upload_csr`] would have uploaded it, if already there.
    pub coarse_on_backend: Option<C>,
}

/// An operator that can give a copy of itself in f32 on the same backend (mixed precision).
pub trait DemoteOperator<B: VectorOps<f32>>: TraceOperator<f64> {
    /// The f32 operator.
    type Low: TraceOperator<f32, Vector = <B as VectorOps<f32>>::Vector>;
    /// Rounds the operator to f32.
    fn demote(&self) -> Result<Self::Low>;
}

/// A preconditioner: z = M^-1 r, through backend vector operations only.
pub trait Preconditioner<T: Real, B: VectorOps<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// z = M^-1 r.
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()>;
    /// w = M^-1 r, then one step of a polynomial recurrence on (p, x) (what a polynomial
    /// smoother does with each preconditioned residual). The default applies and then updates
    /// ([`RecurrenceStep::update`]); a preconditioner whose backend fuses the two overrides it
    /// (w is then scratch that may stay unwritten).
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        self.apply(backend, r, w)?;
        step.update(backend, w, p, x)
    }
    /// Operator applications one call costs (polynomial preconditioners), for statistics.
    fn operator_applications(&self) -> usize {
        0
    }
    /// Global reductions one call costs, for statistics.
    fn reductions(&self) -> usize {
        0
    }
}

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
    /// (on the CPU at square:512 k = 3, 600 MB of the run's 2.5 GB). Recovery must still work
    /// afterwards. The default keeps everything.
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
}

/// Stage "trace solve": a Krylov method over any trace operator, through vector operations only.
pub trait KrylovSolver<T: Real, B: VectorOps<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// Solves A x = b from the initial guess in `x`.
    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport>;
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized> Preconditioner<T, B> for &P {
    fn name(&self) -> String {
        (**self).name()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        (**self).apply(backend, r, z)
    }
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        (**self).apply_step(backend, r, w, step, p, x)
    }
    fn operator_applications(&self) -> usize {
        (**self).operator_applications()
    }
    fn reductions(&self) -> usize {
        (**self).reductions()
    }
}

impl<T: Real, B: VectorOps<T>, P: Preconditioner<T, B> + ?Sized> Preconditioner<T, B> for Box<P> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        (**self).apply(backend, r, z)
    }
    fn apply_step(
        &self,
        backend: &B,
        r: &B::Vector,
        w: &mut B::Vector,
        step: RecurrenceStep<T>,
        p: &mut B::Vector,
        x: &mut B::Vector,
    ) -> Result<()> {
        (**self).apply_step(backend, r, w, step, p, x)
    }
    fn operator_applications(&self) -> usize {
        (**self).operator_applications()
    }
    fn reductions(&self) -> usize {
        (**self).reductions()
    }
}

/// Stage "trace solve" as the pipeline sees it: a solver of the assembled operator of a
/// backend. Every [`KrylovSolver`] is one (through [`Krylov`]); solvers that need more than the
/// operator's trait methods (a second precision, say) implement this directly.
pub trait TraceSolver<T: Real, B: Assembler<T>> {
    /// Name for reports.
    fn name(&self) -> String;
    /// Solves A x = b from the initial guess in `x`; `disc` is the discretization `operator`
    /// was assembled from (a multigrid preconditioner builds its coarse space from it).
    fn solve(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport>;
    /// The part of the solve's setup that needs `disc` alone ([`SolverPlan`]), as work for
    /// another thread: the pipeline runs it while the backend prepares, condenses and
    /// assembles. None (the default): nothing to do ahead.
    fn plan<'d>(&self, disc: &'d Discretization<'_, T>) -> Option<PlanWork<'d>> {
        let _ = disc;
        None
    }
    /// [`TraceSolver::solve`] with the plan made ahead for the same `disc` (the default
    /// ignores it).
    fn solve_planned(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        plan: Option<SolverPlan>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        let _ = plan;
        self.solve(backend, disc, operator, rhs, x)
    }
}

/// What a trace solver builds from the discretization alone, before the trace operator
/// exists: the multigrid preconditioner's vertex space ([`TraceSolver::plan`]).
pub struct SolverPlan {
    /// The vertex space of `disc`.
    pub vertex_space: VertexSpace,
    /// How its making went, for the solve's report.
    pub notes: Vec<String>,
}

/// The making of a [`SolverPlan`], to run on another thread.
pub type PlanWork<'d> = Box<dyn FnOnce() -> Result<SolverPlan> + Send + 'd>;

/// A Krylov method used as the pipeline's trace solver.
pub struct Krylov<'a, T: Real, B: VectorOps<T>>(pub &'a dyn KrylovSolver<T, B>);

impl<T: Real, B: Assembler<T>> TraceSolver<T, B> for Krylov<'_, T, B> {
    fn name(&self) -> String {
        self.0.name()
    }
    fn solve(
        &self,
        backend: &B,
        _disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        self.0.solve(backend, operator, rhs, x)
    }
}

/// A backend: all stages, and the vector operations the solvers of `hdg-linalg` use.
pub trait Backend<T: Real>: Assembler<T> + Postprocessor<T> + FusedOps<T> + BlockOps<T> {
    /// Short name ("cpu", "cuda").
    fn name(&self) -> &'static str;
    /// One line about the hardware it runs on.
    fn describe(&self) -> String;
}

/// What a Krylov solve did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// Iterations taken.
    pub iterations: usize,
    /// Final relative residual ||b - A x|| / ||b|| (recomputed, not the recurrence's).
    pub relative_residual: f64,
    /// Whether the tolerance was met.
    pub converged: bool,
    /// Relative residual after each iteration (the recurrence's estimate).
    pub residual_history: Vec<f64>,
    /// (iteration, true relative residual) at each periodic true-residual check.
    pub true_residual_checks: Vec<(usize, f64)>,
    /// Operator applications.
    pub operator_applications: usize,
    /// Global reductions (dot products, norms; several dots fused in one phase count once).
    pub reductions: usize,
    /// Extra information a solver reports (eigenvalue bounds used, their cost, restarts, ...).
    pub notes: Vec<String>,
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

//! Sparse Cholesky on the host (faer): the reference solution of the trace system.
//!
//! The operator is exported with [`TraceOperator::to_host_csr`], ordered with faer's approximate
//! minimum degree (AMD) ordering, factorised in f64 (supernodal or simplicial, as faer's
//! symbolic analysis decides) and solved; the solution goes back to the backend in the
//! operator's precision. Only the residual check runs on the backend. Meant for verification
//! and for systems small enough to factor: fill grows like n^1.5 in 2D with AMD.
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, CholeskySymbolicParams, LltRef, SymmetricOrdering,
};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Side};
use hdg_core::{
    Assembler, CoreError, Discretization, HostCsr, Real, Result, SolveReport, TraceOperator,
    TraceSolver, VectorOps,
};

use crate::cg::{rhs_norm, true_residual};

/// Relative asymmetry |a_ij - a_ji| / max|a| above which the matrix is rejected: Cholesky
/// reads one triangle only, so a nonsymmetric matrix would otherwise be silently replaced by
/// its lower triangle's symmetric completion. Assembly rounding stays far below this.
const SYMMETRY_TOLERANCE: f64 = 1e-10;

/// Sparse Cholesky (LL^T) with an AMD fill-reducing ordering, through faer: a [`TraceSolver`]
/// of the pipeline for any backend and precision, and [`DirectCholesky::solve`] for any
/// operator (not an iterative method, so not a `KrylovSolver`).
///
/// The report has `iterations = 0`, `relative_residual` recomputed on the backend with the
/// operator, two operator applications (that check, and nothing else), and notes with the
/// ordering, the nonzeros of A and of the factor L, and the analysis / factorisation / solve
/// times. A matrix that is not symmetric positive definite is a [`CoreError::Solver`].
/// The initial guess in `x` is ignored (overwritten).
#[derive(Clone, Copy, Debug, Default)]
pub struct DirectCholesky;

/// Checks the CSR export: sizes, sorted in-range indices, finite values, symmetry.
fn validate(csr: &HostCsr) -> Result<()> {
    let n = csr.n;
    if csr.indptr.len() != n + 1
        || csr.indptr[0] != 0
        || csr.indptr[n] != csr.indices.len()
        || csr.indices.len() != csr.values.len()
        || csr.indptr.windows(2).any(|w| w[0] > w[1])
    {
        return Err(CoreError::Solver("direct Cholesky: malformed CSR export".into()));
    }
    if csr.values.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::Solver(
            "direct Cholesky: the matrix contains NaN or infinity".into(),
        ));
    }
    let max_abs = csr.values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let row = |i: usize| (&csr.indices[csr.indptr[i]..csr.indptr[i + 1]], csr.indptr[i]);
    for i in 0..n {
        let (cols, start) = row(i);
        if cols.windows(2).any(|w| w[0] >= w[1]) || cols.iter().any(|&j| j >= n) {
            return Err(CoreError::Solver(format!(
                "direct Cholesky: row {i} of the CSR export is not sorted or has a column out of range"
            )));
        }
        for (p, &j) in cols.iter().enumerate() {
            let a_ij = csr.values[start + p];
            let (cols_j, start_j) = row(j);
            let a_ji = cols_j.binary_search(&i).map_or(0.0, |q| csr.values[start_j + q]);
            if (a_ij - a_ji).abs() > SYMMETRY_TOLERANCE * max_abs {
                return Err(CoreError::Solver(format!(
                    "direct Cholesky: the matrix is not symmetric (a[{i}][{j}] = {a_ij:e}, a[{j}][{i}] = {a_ji:e}), so it is not SPD"
                )));
            }
        }
    }
    Ok(())
}

/// Factorises the (symmetric) CSR matrix and solves A x = b in place, in f64. Returns the
/// factor's stored values and timing notes.
fn factor_and_solve(csr: &HostCsr, b: &mut [f64]) -> Result<Vec<String>> {
    let n = csr.n;
    let t0 = Instant::now();
    // A symmetric matrix's CSR arrays are its CSC arrays: no transposition needed.
    let symbolic_a = SymbolicSparseColMatRef::new_checked(n, n, &csr.indptr, None, &csr.indices);
    let a = SparseColMatRef::new(symbolic_a, &csr.values);
    let symbolic = factorize_symbolic_cholesky(
        symbolic_a,
        Side::Lower,
        SymmetricOrdering::Amd,
        CholeskySymbolicParams::default(),
    )
    .map_err(|e| CoreError::Solver(format!("direct Cholesky: symbolic analysis failed: {e:?}")))?;
    let t_analyse = t0.elapsed();

    let t1 = Instant::now();
    let par = faer::get_global_parallelism();
    let mut values = vec![0.0f64; symbolic.len_val()];
    let mut buffer =
        MemBuffer::try_new(symbolic.factorize_numeric_llt_scratch::<f64>(par, Default::default()))
            .map_err(|_| CoreError::Solver("direct Cholesky: out of memory".into()))?;
    symbolic
        .factorize_numeric_llt::<f64>(
            &mut values,
            a,
            Side::Lower,
            LltRegularization::default(),
            par,
            MemStack::new(&mut buffer),
            Default::default(),
        )
        .map_err(|e| {
            CoreError::Solver(format!(
                "direct Cholesky: the matrix is not positive definite (faer: {e:?}; pivot index in the AMD-permuted order)"
            ))
        })?;
    let t_factor = t1.elapsed();

    let t2 = Instant::now();
    let llt = LltRef::<'_, usize, f64>::new(&symbolic, &values);
    let mut buffer = MemBuffer::try_new(symbolic.solve_in_place_scratch::<f64>(1, par))
        .map_err(|_| CoreError::Solver("direct Cholesky: out of memory".into()))?;
    llt.solve_in_place_with_conj(
        Conj::No,
        MatMut::from_column_major_slice_mut(b, n, 1),
        par,
        MemStack::new(&mut buffer),
    );
    let t_solve = t2.elapsed();
    Ok(vec![
        format!(
            "ordering: AMD; nnz(A) = {}, stored factor values = {} ({:.2}x fill over the lower triangle)",
            csr.values.len(),
            values.len(),
            values.len() as f64 / ((csr.values.len() + n) / 2).max(1) as f64
        ),
        format!(
            "time: analysis {:.3} ms, factorisation {:.3} ms, solve {:.3} ms",
            t_analyse.as_secs_f64() * 1e3,
            t_factor.as_secs_f64() * 1e3,
            t_solve.as_secs_f64() * 1e3
        ),
    ])
}

/// Where a direct solve's matrix and vectors meet the host: the operator's own export in one
/// process ([`WholeOperator`]), or the rows of every rank gathered on one of them in a
/// distributed run. The process that holds the matrix factors it; the others take part in the
/// vectors' travel and in [`HostSystem::agree`].
pub trait HostSystem<T: Real, B: VectorOps<T>> {
    /// The matrix, where this process factors it.
    fn matrix(&self) -> Option<&HostCsr>;
    /// `v` on the host, where this process factors.
    ///
    /// # Errors
    /// The backend's copy.
    fn vector_to_host(&self, backend: &B, v: &B::Vector) -> Result<Option<Vec<f64>>>;
    /// The solution (given where this process factored) as this process's vector.
    ///
    /// # Errors
    /// The backend's copy.
    fn vector_from_host(&self, backend: &B, x: Option<&[f64]>) -> Result<B::Vector>;
    /// The factorisation's outcome (its notes) on every process: where it failed on one, the
    /// error on all.
    ///
    /// # Errors
    /// The factorisation's, on any process.
    fn agree(&self, notes: Result<Vec<String>>) -> Result<Vec<String>>;
}

/// The operator's own CSR export: a direct solve in one process.
pub struct WholeOperator(pub HostCsr);

impl<T: Real, B: VectorOps<T>> HostSystem<T, B> for WholeOperator {
    fn matrix(&self) -> Option<&HostCsr> {
        Some(&self.0)
    }

    fn vector_to_host(&self, backend: &B, v: &B::Vector) -> Result<Option<Vec<f64>>> {
        Ok(Some(backend.to_host(v)?.iter().map(|v| v.as_f64()).collect()))
    }

    fn vector_from_host(&self, backend: &B, x: Option<&[f64]>) -> Result<B::Vector> {
        let x: Vec<T> = x.unwrap_or_default().iter().map(|&v| T::from_f64_lossy(v)).collect();
        backend.copy_from_host(&x)
    }

    fn agree(&self, notes: Result<Vec<String>>) -> Result<Vec<String>> {
        notes
    }
}

/// Why a pure Neumann problem (c = 0, the constants its null space) has no direct solve.
pub(crate) const SINGULAR_REFUSAL: &str =
    "the sparse Cholesky factorisation needs a positive definite matrix, and a pure Neumann \
     problem with c = 0 has the constants as its null space: use an iterative solver (pcg-mg, \
     the default, works in their complement)";

impl<T: Real, B: Assembler<T>> TraceSolver<T, B> for DirectCholesky {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn solve(
        &self,
        backend: &B,
        disc: &Discretization<'_, T>,
        operator: &B::Operator,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport> {
        if disc.constant_null_space {
            return Err(CoreError::Solver(SINGULAR_REFUSAL.into()));
        }
        DirectCholesky::solve(backend, operator, rhs, x)
    }
}

impl DirectCholesky {
    /// The name in reports.
    pub const NAME: &'static str = "direct-cholesky";

    /// Solves `operator x = rhs`: the operator's CSR export factored on the host in f64, the
    /// solution copied back to the backend (the type documentation says what the report
    /// holds).
    pub fn solve<T: Real, B: VectorOps<T>>(
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        Self::solve_on(backend, operator, || Ok(WholeOperator(operator.to_host_csr()?)), rhs, x)
    }

    /// [`DirectCholesky::solve`] with the matrix and vectors on the host as `system` says
    /// (made once the right-hand side is known not to be zero): the operator's own export, or
    /// a distributed run's rows gathered on one rank. The residual check runs on the backend
    /// with the operator.
    pub fn solve_on<T: Real, B: VectorOps<T>, S: HostSystem<T, B>>(
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        system: impl FnOnce() -> Result<S>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        let mut report = SolveReport::default();
        let b_norm = rhs_norm(backend, operator, rhs, x, &mut report)?;
        if b_norm == 0.0 {
            backend.scale(T::zero(), x)?;
            report.converged = true;
            return Ok(report);
        }
        let system = system()?;
        let mut b = system.vector_to_host(backend, rhs)?;
        let notes = match (system.matrix(), b.as_mut()) {
            (Some(csr), Some(b)) => factor_checked(csr, b),
            _ => Ok(Vec::new()),
        };
        report.notes = system.agree(notes)?;
        let solution = system.vector_from_host(backend, b.as_deref())?;
        backend.copy(&solution, x)?;
        let mut r = backend.zeros(operator.dim())?;
        report.relative_residual =
            true_residual(backend, operator, rhs, x, &mut r, b_norm, &mut report)?;
        report.true_residual_checks.push((0, report.relative_residual));
        report.converged = report.relative_residual.is_finite();
        Ok(report)
    }
}

/// `csr` checked, factorised and solved for `b` in place; the notes of [`factor_and_solve`].
fn factor_checked(csr: &HostCsr, b: &mut [f64]) -> Result<Vec<String>> {
    if csr.n != b.len() {
        return Err(CoreError::Solver(format!(
            "direct Cholesky: the CSR export has {} rows, the right-hand side {}",
            csr.n,
            b.len()
        )));
    }
    validate(csr)?;
    let notes = factor_and_solve(csr, b)?;
    if b.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::Solver(
            "direct Cholesky: the solution is not finite (singular to working precision)".into(),
        ));
    }
    Ok(notes)
}

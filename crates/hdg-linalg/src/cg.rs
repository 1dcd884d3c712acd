//! Conjugate gradients, plain and Jacobi-preconditioned.
//!
//! The structure (an explicit preconditioner application, counted reductions and operator
//! applications, a recomputed true residual at the end) is the one the later solver suite
//! extends.
use hdg_core::{CoreError, KrylovSolver, Real, Result, SolveReport, TraceOperator, VectorOps};

/// The preconditioner of [`ConjugateGradient`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preconditioning {
    /// None: z = r.
    None,
    /// Jacobi: z = D^{-1} r with D the operator's diagonal.
    Jacobi,
}

/// (Preconditioned) conjugate gradients with a relative-residual stopping test.
#[derive(Clone, Debug)]
pub struct ConjugateGradient {
    /// Stop when ||r|| / ||b|| <= tolerance.
    pub tolerance: f64,
    /// Give up after this many iterations (the report then says not converged).
    pub max_iterations: usize,
    /// Preconditioner.
    pub preconditioning: Preconditioning,
}

impl ConjugateGradient {
    /// CG with the given tolerance, at most `max_iterations` iterations.
    pub fn new(tolerance: f64, max_iterations: usize, preconditioning: Preconditioning) -> Self {
        ConjugateGradient { tolerance, max_iterations, preconditioning }
    }

    fn validate(&self) -> Result<()> {
        if !(self.tolerance.is_finite() && self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(CoreError::InvalidParameter {
                name: "tolerance",
                reason: format!("{} is not in (0, 1)", self.tolerance),
            });
        }
        Ok(())
    }
}

impl<T: Real, B: VectorOps<T>> KrylovSolver<T, B> for ConjugateGradient {
    fn name(&self) -> String {
        match self.preconditioning {
            Preconditioning::None => "cg".into(),
            Preconditioning::Jacobi => "pcg-jacobi".into(),
        }
    }

    fn solve(
        &self,
        backend: &B,
        operator: &dyn TraceOperator<T, Vector = B::Vector>,
        rhs: &B::Vector,
        x: &mut B::Vector,
    ) -> Result<SolveReport> {
        self.validate()?;
        let n = operator.dim();
        if backend.len(rhs) != n || backend.len(x) != n {
            return Err(CoreError::InvalidParameter {
                name: "vector length",
                reason: format!(
                    "operator has {n} rows, rhs {} and x {}",
                    backend.len(rhs),
                    backend.len(x)
                ),
            });
        }
        let mut report = SolveReport::default();
        let b_norm = backend.dot(rhs, rhs)?.as_f64().sqrt();
        report.reductions += 1;
        if !b_norm.is_finite() {
            return Err(CoreError::Solver("the right-hand side contains NaN or infinity".into()));
        }
        let inverse_diagonal = match self.preconditioning {
            Preconditioning::None => None,
            Preconditioning::Jacobi => {
                let mut d = operator.diagonal()?;
                backend.reciprocal(&mut d)?;
                Some(d)
            }
        };
        if b_norm == 0.0 {
            backend.copy(&backend.zeros(n)?, x)?;
            report.converged = true;
            return Ok(report);
        }

        // r = b - A x
        let mut r = backend.zeros(n)?;
        operator.apply(x, &mut r)?;
        report.operator_applications += 1;
        backend.xpby(rhs, -T::one(), &mut r)?;
        let mut z = backend.zeros(n)?;
        let precondition = |r: &B::Vector, z: &mut B::Vector| -> Result<()> {
            match &inverse_diagonal {
                Some(d) => backend.pointwise_mul(d, r, z),
                None => backend.copy(r, z),
            }
        };
        precondition(&r, &mut z)?;
        let mut p = backend.zeros(n)?;
        backend.copy(&z, &mut p)?;
        let mut rz = backend.dot(&r, &z)?;
        report.reductions += 1;
        let mut ap = backend.zeros(n)?;
        let mut residual = backend.dot(&r, &r)?.as_f64().sqrt() / b_norm;
        report.reductions += 1;

        while residual > self.tolerance && report.iterations < self.max_iterations {
            operator.apply(&p, &mut ap)?;
            report.operator_applications += 1;
            let pap = backend.dot(&p, &ap)?;
            report.reductions += 1;
            if pap.is_nan() || pap <= T::zero() {
                return Err(CoreError::Solver(format!(
                    "CG breakdown at iteration {}: p.Ap = {:e} (the operator is not positive definite, or the data has NaN)",
                    report.iterations,
                    pap.as_f64()
                )));
            }
            let alpha = rz / pap;
            backend.axpy(alpha, &p, x)?;
            backend.axpy(-alpha, &ap, &mut r)?;
            report.iterations += 1;
            let rz_new = if inverse_diagonal.is_some() {
                residual = backend.dot(&r, &r)?.as_f64().sqrt() / b_norm;
                precondition(&r, &mut z)?;
                report.reductions += 2;
                backend.dot(&r, &z)?
            } else {
                // Plain CG: r.z is r.r, one reduction gives both the residual and beta.
                report.reductions += 1;
                let rr = backend.dot(&r, &r)?;
                residual = rr.as_f64().sqrt() / b_norm;
                rr
            };
            report.residual_history.push(residual);
            if !residual.is_finite() {
                return Err(CoreError::Solver(format!(
                    "CG diverged at iteration {} (residual is not finite)",
                    report.iterations
                )));
            }
            let beta = rz_new / rz;
            rz = rz_new;
            let source = if inverse_diagonal.is_some() { &z } else { &r };
            backend.xpby(source, beta, &mut p)?;
        }

        // The recurrence's residual drifts from the true one in finite precision: report the
        // true residual.
        operator.apply(x, &mut r)?;
        report.operator_applications += 1;
        backend.xpby(rhs, -T::one(), &mut r)?;
        report.relative_residual = backend.dot(&r, &r)?.as_f64().sqrt() / b_norm;
        report.reductions += 1;
        // Converged means the recurrence met the tolerance. The true residual is reported
        // beside it: in finite precision it stalls near u ||A|| ||x|| / ||b||, which for trace
        // systems on fine meshes (||b|| ~ h^2) lies above tight tolerances; a gap between the
        // two says how much of the requested accuracy the precision allows.
        report.converged = residual <= self.tolerance && report.relative_residual.is_finite();
        Ok(report)
    }
}

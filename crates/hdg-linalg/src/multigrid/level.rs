//! A multigrid level below the trace level: a CSR matrix on the backend as a
//! [`TraceOperator`], so that the smoothers and spectrum estimates of this crate run on it
//! unchanged.
use hdg_core::{CoreError, HostCsr, MultigridOps, Real, Result, TraceOperator};

use rayon::prelude::*;

use super::aggregation::diagonal;

/// A square CSR matrix on the backend, with the host facts its smoother needs (diagonal and
/// Gershgorin bounds, computed once from the host matrix it was uploaded from).
pub(crate) struct CsrOperator<'a, T: Real, B: MultigridOps<T>> {
    backend: &'a B,
    matrix: B::Csr,
    diagonal: Vec<f64>,
    gershgorin: (f64, f64),
    gershgorin_scaled: (f64, f64),
}

impl<'a, T: Real, B: MultigridOps<T>> CsrOperator<'a, T, B> {
    /// `host` (square, positive diagonal) on the backend: `uploaded` where the backend already
    /// holds it, else uploaded here. `owned`: the level is split among processes and `host`
    /// holds this process's rows ([`hdg_core::SplitLevel`]): the other rows count as identity
    /// rows (the Jacobi smoother then leaves their entries, which stay zero, as they are).
    pub(crate) fn new(
        backend: &'a B,
        host: &HostCsr,
        uploaded: Option<B::Csr>,
        owned: Option<&[bool]>,
    ) -> Result<Self> {
        if host.n != host.n_cols {
            return Err(CoreError::InvalidParameter {
                name: "multigrid level",
                reason: format!("a {} x {} matrix is not square", host.n, host.n_cols),
            });
        }
        let mut diagonal = diagonal(host);
        let is_owned = |i: usize| owned.is_none_or(|owned| owned[i]);
        if owned.is_some() {
            diagonal.par_iter_mut().enumerate().filter(|(i, _)| !is_owned(*i)).for_each(
                |(_, d)| {
                    *d = 1.0;
                },
            );
        }
        if let Some(i) = diagonal.iter().position(|&d| !(d > 0.0 && d.is_finite())) {
            return Err(CoreError::Solver(format!(
                "multigrid: coarse level of {} unknowns has diagonal entry {i} = {:e} (the \
                 coarse operator is not positive definite)",
                host.n, diagonal[i]
            )));
        }
        // Per row: the Gershgorin disc's ends, unscaled and scaled by the diagonal (min and max
        // do not depend on the order: the same bounds on every thread count).
        let ends = |i: usize| {
            let radius: f64 = (host.indptr[i]..host.indptr[i + 1])
                .filter(|&p| host.indices[p] != i)
                .map(|p| host.values[p].abs())
                .sum();
            let d = diagonal[i];
            [d - radius, d + radius, 1.0 - radius / d, 1.0 + radius / d]
        };
        let infinite = [f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY];
        let [lo, hi, lo_s, hi_s] = (0..host.n).into_par_iter().map(ends).reduce(
            || infinite,
            |a, b| [a[0].min(b[0]), a[1].max(b[1]), a[2].min(b[2]), a[3].max(b[3])],
        );
        Ok(CsrOperator {
            backend,
            matrix: match uploaded {
                Some(matrix) => matrix,
                None => backend.upload_csr(host)?,
            },
            diagonal,
            gershgorin: (lo, hi),
            gershgorin_scaled: (lo_s, hi_s),
        })
    }
}

impl<T: Real, B: MultigridOps<T>> CsrOperator<'_, T, B> {
    /// The matrix on the backend.
    pub(crate) fn matrix(&self) -> &B::Csr {
        &self.matrix
    }

    /// The level has been coarsened: what only its coarsening read goes
    /// ([`MultigridOps::release_coarsening_values`]).
    pub(crate) fn coarsened(&mut self) -> Result<()> {
        self.backend.release_coarsening_values(&mut self.matrix)
    }
}

impl<T: Real, B: MultigridOps<T>> TraceOperator<T> for CsrOperator<'_, T, B> {
    type Vector = B::Vector;
    fn dim(&self) -> usize {
        self.diagonal.len()
    }
    fn apply(&self, x: &B::Vector, y: &mut B::Vector) -> Result<()> {
        self.backend.csr_apply(&self.matrix, x, y)
    }
    fn diagonal(&self) -> Result<B::Vector> {
        let values: Vec<T> = self.diagonal.par_iter().map(|&d| T::from_f64_lossy(d)).collect();
        self.backend.copy_from_host(&values)
    }
    fn block_size(&self) -> usize {
        1
    }
    fn diagonal_blocks(&self) -> Result<B::Vector> {
        self.diagonal()
    }
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        Ok(if scaled { self.gershgorin_scaled } else { self.gershgorin })
    }
    fn to_host_csr(&self) -> Result<HostCsr> {
        Err(CoreError::InvalidParameter {
            name: "multigrid level",
            reason: "the host copy of a coarse level is not kept".into(),
        })
    }
}

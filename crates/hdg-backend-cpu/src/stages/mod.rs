//! The pipeline's stages on the host, one module each ([`prepare`], [`condense`],
//! [`assemble`], [`recover`], [`postprocess`]; [`weighted`] for coefficients that vary inside
//! cells), registered here as [`LocalSolver`], [`Assembler`], [`Postprocessor`] and [`Backend`]
//! for [`CpuBackend`] (f32 and f64): the same files as the CUDA backend's `stages/`, so that a
//! stage is found at the same path in both.
//!
//! Each stage is a parallel loop over elements (Rayon) around the element kernels of its file.
//! Per-element data is element-contiguous (one element's K_e, b_e, recovery operator
//! Z = S^-1 P and u0 = S^-1 F are one block each), so a task works on whole elements. Where one
//! element's work is a chain of dependent operations (the condensation, the postprocessing's
//! Cholesky), elements go through it four (f64) or eight (f32) at a time as SIMD lanes
//! (`hdg_core::lanes`: the same bits as one at a time).
pub mod assemble;
pub mod condense;
pub mod postprocess;
pub mod prepare;
pub mod recover;
pub mod weighted;

use hdg_core::{
    Assembler, Backend, CoreError, Discretization, ErrorNorms, ExactSolution, HostCondensed,
    HostFields, LocalSolver, Postprocessor, Real, Result,
};

use crate::operator::dbf::DbfMatrix;
use crate::CpuBackend;
use prepare::CpuPrepared;

pub(crate) fn not_spd(element: usize, (pivot, value): (usize, impl Real)) -> CoreError {
    CoreError::NotPositiveDefinite { element, pivot, value: value.as_f64() }
}

impl<T: Real> LocalSolver<T> for CpuBackend {
    type Prepared = CpuPrepared<T>;
    type Condensed = HostCondensed<T>;
    type LocalFields = HostFields<T>;

    fn prepare(&self, disc: &Discretization<'_, T>) -> Result<CpuPrepared<T>> {
        prepare::prepare(disc)
    }

    fn condense(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
    ) -> Result<HostCondensed<T>> {
        condense::condense(disc, prep)
    }

    fn recover(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        condensed: &HostCondensed<T>,
        trace: &Vec<T>,
    ) -> Result<HostFields<T>> {
        recover::recover(disc, prep, condensed, trace)
    }

    fn condensed_to_host(&self, condensed: &HostCondensed<T>) -> Result<HostCondensed<T>> {
        Ok(condensed.clone())
    }

    fn fields_to_host(&self, fields: &HostFields<T>) -> Result<HostFields<T>> {
        Ok(fields.clone())
    }
}

impl<T: Real> Assembler<T> for CpuBackend {
    type Operator = DbfMatrix<T>;

    fn assemble(
        &self,
        disc: &Discretization<'_, T>,
        _prep: &CpuPrepared<T>,
        condensed: &HostCondensed<T>,
    ) -> Result<(DbfMatrix<T>, Vec<T>)> {
        assemble::assemble(disc, condensed)
    }

    /// The DBF matrix holds its own copy of every entry: K_e goes.
    fn release_assembly_inputs(&self, condensed: &mut HostCondensed<T>, _: &DbfMatrix<T>) {
        condensed.trace_matrices = Vec::new();
    }
}

impl<T: Real> Postprocessor<T> for CpuBackend {
    type Postprocessed = Vec<T>;

    fn postprocess(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        fields: &HostFields<T>,
    ) -> Result<Vec<T>> {
        postprocess::postprocess(disc, prep, fields)
    }

    fn postprocessed_to_host(&self, u_star: &Vec<T>) -> Result<Vec<T>> {
        Ok(u_star.clone())
    }

    fn error_norms(
        &self,
        disc: &Discretization<'_, T>,
        prep: &CpuPrepared<T>,
        fields: &HostFields<T>,
        u_star: &Vec<T>,
        exact: &ExactSolution,
    ) -> Result<ErrorNorms> {
        postprocess::error_norms(disc, prep, fields, u_star, exact)
    }
}

impl<T: Real> Backend<T> for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn describe(&self) -> String {
        format!("CPU, {} Rayon threads", rayon::current_num_threads())
    }
}

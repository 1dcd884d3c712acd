//! The trace operator that the CUDA backend's assembly builds: the assembled DBF matrix or the
//! matrix-free operator, chosen by [`CudaBackend::with_trace_operator`], behind one type so the
//! pipeline and every solver run on either unchanged.
//!
//! - `dbf`: the assembled matrix in the dense block format and its SpMV (`kernels/dbf.cu`);
//! - `matrix_free`: the element trace matrices applied face by face (`kernels/matrix_free.cu`).
use hdg_core::{
    CoreError, DemoteOperator, HostCsr, MultigridOperator, Result, TraceOperator, TraceTopology,
    VertexSpace,
};

use crate::device::{CudaBackend, DeviceReal};
use crate::vector::DeviceVector;
use crate::TraceOperatorKind;
use dbf::DeviceDbf;
use matrix_free::MatrixFreeOperator;

pub mod dbf;
pub mod matrix_free;

/// The device trace operator of [`hdg_core::Assembler::assemble`] (`type Operator` of
/// [`CudaBackend`]): every [`TraceOperator`] method dispatches to the kind held.
pub enum DeviceTraceOperator<T: DeviceReal> {
    /// The assembled trace matrix in the dense block format.
    Dbf(DeviceDbf<T>),
    /// The matrix-free operator (element trace matrices, never assembled).
    MatrixFree(MatrixFreeOperator<T>),
}

impl<T: DeviceReal> DeviceTraceOperator<T> {
    /// Which kind this is.
    pub fn kind(&self) -> TraceOperatorKind {
        match self {
            DeviceTraceOperator::Dbf(_) => TraceOperatorKind::Dbf,
            DeviceTraceOperator::MatrixFree(_) => TraceOperatorKind::MatrixFree,
        }
    }

    /// The DBF matrix, if this is one.
    pub fn as_dbf(&self) -> Option<&DeviceDbf<T>> {
        match self {
            DeviceTraceOperator::Dbf(m) => Some(m),
            DeviceTraceOperator::MatrixFree(_) => None,
        }
    }

    /// The DBF matrix, mutably (to choose its SpMV kernel), if this is one.
    pub fn as_dbf_mut(&mut self) -> Option<&mut DeviceDbf<T>> {
        match self {
            DeviceTraceOperator::Dbf(m) => Some(m),
            DeviceTraceOperator::MatrixFree(_) => None,
        }
    }

    /// The matrix-free operator, if this is one.
    pub fn as_matrix_free(&self) -> Option<&MatrixFreeOperator<T>> {
        match self {
            DeviceTraceOperator::Dbf(_) => None,
            DeviceTraceOperator::MatrixFree(m) => Some(m),
        }
    }

    /// Blocks the DBF matrix of this operator stores (not padding, not Dirichlet); the same
    /// number for both kinds.
    pub fn n_active_blocks(&self) -> usize {
        match self {
            DeviceTraceOperator::Dbf(m) => m.n_active_blocks(),
            DeviceTraceOperator::MatrixFree(m) => m.n_active_blocks(),
        }
    }

    /// Bytes one application must move at least ([`DeviceDbf::spmv_bytes`],
    /// [`MatrixFreeOperator::apply_bytes`]).
    pub fn apply_bytes(&self) -> usize {
        match self {
            DeviceTraceOperator::Dbf(m) => m.spmv_bytes(),
            DeviceTraceOperator::MatrixFree(m) => m.apply_bytes(),
        }
    }

    /// Device memory held.
    pub fn memory_bytes(&self) -> usize {
        match self {
            DeviceTraceOperator::Dbf(m) => m.memory_bytes(),
            DeviceTraceOperator::MatrixFree(m) => m.memory_bytes(),
        }
    }
}

impl<T: DeviceReal> From<DeviceDbf<T>> for DeviceTraceOperator<T> {
    fn from(m: DeviceDbf<T>) -> Self {
        DeviceTraceOperator::Dbf(m)
    }
}

impl<T: DeviceReal> From<MatrixFreeOperator<T>> for DeviceTraceOperator<T> {
    fn from(m: MatrixFreeOperator<T>) -> Self {
        DeviceTraceOperator::MatrixFree(m)
    }
}

/// `$call` on the operator held, whichever kind.
macro_rules! dispatch {
    ($self:ident, $op:ident => $call:expr) => {
        match $self {
            DeviceTraceOperator::Dbf($op) => $call,
            DeviceTraceOperator::MatrixFree($op) => $call,
        }
    };
}

impl<T: DeviceReal> TraceOperator<T> for DeviceTraceOperator<T> {
    type Vector = DeviceVector<T>;

    fn dim(&self) -> usize {
        dispatch!(self, m => m.dim())
    }

    fn apply(&self, x: &DeviceVector<T>, y: &mut DeviceVector<T>) -> Result<()> {
        dispatch!(self, m => m.apply(x, y))
    }

    fn diagonal(&self) -> Result<DeviceVector<T>> {
        dispatch!(self, m => m.diagonal())
    }

    fn block_size(&self) -> usize {
        dispatch!(self, m => m.block_size())
    }

    fn diagonal_blocks(&self) -> Result<DeviceVector<T>> {
        dispatch!(self, m => m.diagonal_blocks())
    }

    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        dispatch!(self, m => m.gershgorin_bounds(scaled))
    }

    fn to_host_csr(&self) -> Result<HostCsr> {
        dispatch!(self, m => m.to_host_csr())
    }
}

/// The multigrid is built on the assembled matrix only: the matrix-free operator stores no
/// blocks to project.
impl<T: DeviceReal> MultigridOperator<T, CudaBackend> for DeviceTraceOperator<T> {
    fn project_blocks(&self, basis: &[f64], rows: usize, columns: usize) -> Result<Vec<f64>> {
        match self {
            DeviceTraceOperator::Dbf(m) => m.project_blocks(basis, rows, columns),
            DeviceTraceOperator::MatrixFree(_) => Err(without_blocks()),
        }
    }

    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        match self {
            DeviceTraceOperator::Dbf(m) => m.vertex_operator(space, topology),
            DeviceTraceOperator::MatrixFree(_) => Err(without_blocks()),
        }
    }

    fn vertex_level(
        &self,
        backend: &CudaBackend,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<crate::DeviceCsr<T>>)> {
        match self {
            DeviceTraceOperator::Dbf(m) => m.vertex_level(backend, space, topology),
            DeviceTraceOperator::MatrixFree(_) => Err(without_blocks()),
        }
    }
}

/// Why the multigrid cannot be built on the matrix-free operator.
fn without_blocks() -> CoreError {
    CoreError::InvalidParameter {
        name: "trace operator",
        reason: "the multigrid preconditioner needs the assembled DBF operator (its stored \
                 blocks); the matrix-free operator has none: choose another trace solver \
                 (block-Jacobi CG, say) or the DBF operator"
            .into(),
    }
}

impl DemoteOperator<CudaBackend> for DeviceTraceOperator<f64> {
    type Low = DeviceTraceOperator<f32>;

    /// The same kind of operator in f32.
    fn demote(&self) -> Result<DeviceTraceOperator<f32>> {
        Ok(match self {
            DeviceTraceOperator::Dbf(m) => DeviceTraceOperator::Dbf(m.demote()?),
            DeviceTraceOperator::MatrixFree(m) => DeviceTraceOperator::MatrixFree(m.demote()?),
        })
    }
}

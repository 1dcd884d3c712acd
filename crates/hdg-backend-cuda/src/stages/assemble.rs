//! Assemble: the trace operator from the condensed element data, the DBF matrix by the
//! assembly kernel (one thread per block row) or the matrix-free operator.

use hdg_core::{CoreError, Discretization, Result};

use crate::device::{address, arg, grid, CudaBackend, DeviceReal};
use crate::operator::dbf::DeviceDbf;
use crate::operator::matrix_free::MatrixFreeOperator;
use crate::operator::DeviceTraceOperator;
use crate::stages::condense::DeviceCondensed;
use crate::stages::prepare::DevicePrepared;
use crate::vector::{uninitialized, DeviceVector};
use crate::TraceOperatorKind;

/// Builds the operator of the backend's [`TraceOperatorKind`]: the DBF matrix (assembly kernel
/// `dbf_assemble_*`) or the matrix-free operator ([`MatrixFreeOperator`], from K_e on the device).
pub(crate) fn assemble<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    condensed: &DeviceCondensed<T>,
) -> Result<(DeviceTraceOperator<T>, DeviceVector<T>)> {
    let k = prep.kernel_order_of(disc)?;
    if backend.trace_operator() == TraceOperatorKind::MatrixFree {
        if !disc.boundary_terms.is_empty() {
            return Err(CoreError::InvalidParameter {
                name: "trace operator",
                reason: "the matrix-free operator takes Dirichlet boundaries only; Neumann and \
                         Robin faces need the assembled (dbf) operator"
                    .into(),
            });
        }
        let parts = condensed.matrix_free_parts(&prep.topology);
        let (operator, rhs) = MatrixFreeOperator::assemble(backend, disc.tables.n_f, &parts)?;
        return Ok((DeviceTraceOperator::MatrixFree(operator), rhs));
    }
    let nf = disc.tables.n_f;
    let topo = &prep.topology;
    let (n_rows, slots) = (topo.n_rows, topo.slots);
    let pitch = DeviceDbf::<T>::pitch_for(n_rows);
    // Zeros: the padding rows of every plane stay zero; the kernel writes every real row.
    let values = backend.gpu.zeros::<T>(slots * nf * nf * pitch)?;
    let columns = backend.gpu.zeros::<u32>(slots * pitch)?;
    // SAFETY: the kernel writes all n_rows * nf entries.
    let rhs = unsafe { uninitialized::<T>(backend, n_rows * nf)? };
    if n_rows > 0 {
        let (nr, p, s, nc) = (n_rows as u64, pitch as u64, slots as u32, condensed.n_cells as u64);
        let tp = topo.addresses();
        let (kp, bp, dp, vp, cp, rp) = (
            address(&condensed.trace_matrices),
            address(&condensed.trace_loads),
            address(&topo.dirichlet),
            address(&values),
            address(&columns),
            address(&rhs),
        );
        let kernel = format!("dbf_assemble_{}_{k}", T::SUFFIX);
        // SAFETY: dbf_assemble_T_{tri,tet}K(u64 n_rows, u64 pitch, unsigned slots, u64 n_cells,
        // AssemblyTopology, const T* k, const T* b, const T* dirichlet, T* values,
        // unsigned* columns, T* rhs): the topology planes hold slots (resp. 2) * n_rows
        // entries, every cell index < n_cells and local face < 3, every slot face a mesh
        // face (dirichlet has n_faces * nf entries); values and columns the DBF planes of
        // `pitch` >= n_rows; rhs n_rows * nf; one thread per block row.
        unsafe {
            backend.gpu.launch(
                &kernel,
                grid(n_rows)?,
                &[
                    arg(&nr),
                    arg(&p),
                    arg(&s),
                    arg(&nc),
                    arg(&tp),
                    arg(&kp),
                    arg(&bp),
                    arg(&dp),
                    arg(&vp),
                    arg(&cp),
                    arg(&rp),
                ],
            )?
        };
    }
    let terms = &disc.boundary_terms;
    if !terms.is_empty() {
        let (rows, diagonal, load) = (
            backend.gpu.upload(&terms.rows)?,
            backend.gpu.upload(&terms.diagonal)?,
            backend.gpu.upload(&terms.load)?,
        );
        let (n, p, nf32) = (terms.rows.len() as u64, pitch as u64, nf as u32);
        let (rp, dp, lp, vp, hp) =
            (address(&rows), address(&diagonal), address(&load), address(&values), address(&rhs));
        let kernel = format!("dbf_add_boundary_terms_{}", T::SUFFIX);
        // SAFETY: dbf_add_boundary_terms_T(u64 n_terms, u64 pitch, unsigned nf, const unsigned*
        // rows, const T* diagonal, const T* load, T* vals, T* rhs): rows and diagonal hold
        // n_terms entries, load n_terms * nf; every row < n_rows <= pitch, so the slot-0
        // entries lie in the values planes and rhs holds n_rows * nf; rows are distinct.
        unsafe {
            backend.gpu.launch(
                &kernel,
                grid(terms.rows.len())?,
                &[arg(&n), arg(&p), arg(&nf32), arg(&rp), arg(&dp), arg(&lp), arg(&vp), arg(&hp)],
            )?
        };
    }
    let operator = DeviceDbf::from_device_parts(
        backend,
        n_rows,
        nf,
        slots,
        values,
        columns,
        topo.n_active_blocks,
    )?;
    Ok((DeviceTraceOperator::Dbf(operator), DeviceVector { buffer: rhs }))
}

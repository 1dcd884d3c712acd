//! Assemble: the trace operator from the condensed element data, the DBF matrix by the
//! assembly kernel (one thread per block row) or the matrix-free operator.

use hdg_core::{Discretization, Result};

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

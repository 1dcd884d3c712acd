//! Recover: u_h and q_h from the trace solution and the condensed element data.

use cust::memory::DeviceBuffer;
use hdg_core::{CoreError, Discretization, HostFields, Result};

use crate::design::{Design, ElementStage};
use crate::device::{address, arg, CudaBackend, DeviceReal};
use crate::stages::condense::DeviceCondensed;
use crate::stages::launch::{launch_configuration_error, poison};
use crate::stages::layout::to_element_contiguous;
use crate::stages::prepare::DevicePrepared;
use crate::vector::{uninitialized, DeviceVector};

/// Recovered u_h and q_h on the device: u `[i * n_cells + e]`, q `[(r * n + i) * n_cells + e]`.
pub struct DeviceFields<T: DeviceReal> {
    pub(crate) n_cells: usize,
    pub(crate) u: DeviceBuffer<T>,
    pub(crate) q: DeviceBuffer<T>,
    /// The L2 projection of kappa^-1 q_h, where kappa varies inside cells (what the
    /// postprocessing reads then, with kappa = 1), `[(r * n + i) * n_cells + e]`.
    pub(crate) projected_flux: Option<DeviceBuffer<T>>,
    /// One flag: -1 if a block recovery got less shared memory than its layout needs.
    pub(crate) info: DeviceBuffer<i32>,
    /// Last: the buffers are freed while the context lives.
    pub(crate) backend: CudaBackend,
}

impl<T: DeviceReal> DeviceFields<T> {
    /// Fills u_h and q_h with NaN (see [`DeviceCondensed::poison`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        poison(&backend, [&mut self.u, &mut self.q])
    }

    /// Cells.
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }
}

pub(crate) fn recover<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    condensed: &DeviceCondensed<T>,
    trace: &DeviceVector<T>,
) -> Result<DeviceFields<T>> {
    let mut fields = backend.allocate_fields(disc, prep)?;
    backend.recover_with(
        disc,
        prep,
        condensed,
        trace,
        prep.design(ElementStage::Recover)?,
        &mut fields,
    )?;
    backend.check_recovered(&fields)?;
    Ok(fields)
}

pub(crate) fn fields_to_host<T: DeviceReal>(
    backend: &CudaBackend,
    fields: &DeviceFields<T>,
) -> Result<HostFields<T>> {
    let u = backend.gpu.download(&fields.u)?;
    let q = backend.gpu.download(&fields.q)?;
    Ok(HostFields {
        u: to_element_contiguous(&u, fields.n_cells),
        q: to_element_contiguous(&q, fields.n_cells),
    })
}

impl CudaBackend {
    /// Outputs of a recovery (uninitialised until [`CudaBackend::recover_with`] runs).
    pub fn allocate_fields<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceFields<T>> {
        let t = &disc.tables;
        let (n, d, n_cells) = (t.n, t.dim, prep.n_cells);
        // SAFETY: every recovery kernel writes every entry of u and q.
        let u = unsafe { uninitialized::<T>(self, n_cells * n)? };
        let q = unsafe { uninitialized::<T>(self, n_cells * d * n)? };
        // SAFETY: the weighted flux kernel writes every entry.
        let projected_flux = match prep.weighted {
            Some(_) => Some(unsafe { uninitialized::<T>(self, n_cells * d * n)? }),
            None => None,
        };
        Ok(DeviceFields {
            n_cells,
            u,
            q,
            projected_flux,
            info: self.gpu.zeros::<i32>(1)?,
            backend: self.clone(),
        })
    }

    /// Queues the recovery in `design` into `fields` (from [`CudaBackend::allocate_fields`]).
    pub fn recover_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        condensed: &DeviceCondensed<T>,
        trace: &DeviceVector<T>,
        design: Design,
        fields: &mut DeviceFields<T>,
    ) -> Result<()> {
        prep.kernel_order_of(disc)?;
        let n_cells = prep.n_cells;
        if trace.len() != disc.trace_dofs() {
            return Err(CoreError::InvalidParameter {
                name: "vector length",
                reason: format!(
                    "recover: {} trace unknowns expected, got {}",
                    disc.trace_dofs(),
                    trace.len()
                ),
            });
        }
        if condensed.n_cells != n_cells || fields.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "recovery inputs",
                reason: format!(
                    "{} condensed cells and {} field cells for {n_cells} cells",
                    condensed.n_cells, fields.n_cells
                ),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        let launch = prep.launch_for(ElementStage::Recover, design)?;
        let (tb, cells) = (prep.tables.addresses(), prep.cells());
        let topo = &prep.topology;
        let (fi, tr, dir, zp, u0p, up, qp, ip) = (
            address(&topo.free_index),
            trace.address(),
            address(&topo.dirichlet),
            address(&condensed.recovery_operator),
            address(&condensed.recovery_load),
            address(&fields.u),
            address(&fields.q),
            address(&fields.info),
        );
        let mut args = vec![
            arg(&tb),
            arg(&cells),
            arg(&fi),
            arg(&tr),
            arg(&dir),
            arg(&zp),
            arg(&u0p),
            arg(&up),
            arg(&qp),
        ];
        if design.is_block() {
            args.push(arg(&ip));
        }
        // SAFETY: recover_{thread,block}_T_{tri,tet}K(Tables, Cells, const unsigned*
        // free_index, const T* trace, const T* dirichlet, const T* z, const T* u0, T* u, T* q
        // [, int* info]): free_index has one entry per global face (every faces[] entry is a
        // face of the mesh), a free index is < n_rows and trace has n_rows * nf entries
        // (checked above), dirichlet n_faces * nf; z, u0 of a condensation of these n_cells
        // cells; u, q n_cells * (n, d n) (checked above); info one entry. Launch sizes as in
        // condense_with.
        unsafe {
            prep.kernels.launch(&launch.name, launch.grid, launch.threads, launch.shared, &args)?
        };
        if let (Some(weighted), Some(projected)) = (&prep.weighted, &fields.projected_flux) {
            // Q over the recovery's (which took kappa constant per cell).
            let projected = address(projected);
            crate::stages::weighted::recover_flux(
                self,
                prep,
                weighted,
                [fi, tr, dir, up],
                qp,
                projected,
                ip,
            )?;
        }
        Ok(())
    }

    /// The error of a recovery whose block kernel got too little shared memory, if so (waits).
    pub fn check_recovered<T: DeviceReal>(&self, fields: &DeviceFields<T>) -> Result<()> {
        if self.gpu.download(&fields.info)?[0] != 0 {
            return Err(launch_configuration_error());
        }
        Ok(())
    }
}

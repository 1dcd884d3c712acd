//! Postprocess: the superconvergent u* in P_{k+1}, and the L2 error norms.

use cust::memory::DeviceBuffer;
use hdg_core::error_norms;
use hdg_core::geometry::mesh_geometry;
use hdg_core::{
    CoreError, Discretization, ErrorNorms, ExactSolution, HostFields, LocalSolver, Result,
};

use crate::design::{Design, ElementStage};
use crate::device::{address, arg, CudaBackend, DeviceReal};
use crate::manufactured::{device_solution, PointKernels};
use crate::stages::launch::{first_failure, poison, PhaseClock};
use crate::stages::layout::to_element_contiguous;
use crate::stages::prepare::DevicePrepared;
use crate::stages::recover::DeviceFields;
use crate::vector::uninitialized;

/// The postprocessed u* on the device, `[j * n_cells + e]`.
pub struct DevicePostprocessed<T: DeviceReal> {
    pub(crate) n_cells: usize,
    pub(crate) u_star: DeviceBuffer<T>,
    /// Per element: 0, or the failing pivot + 1 (-1 at element 0: a launch configuration error).
    pub(crate) info: DeviceBuffer<i32>,
    pub(crate) pivots: DeviceBuffer<T>,
    /// Last: the buffers are freed while the context lives.
    pub(crate) backend: CudaBackend,
}

impl<T: DeviceReal> DevicePostprocessed<T> {
    /// u*, element-contiguous (`[e * n' + j]`, the CPU backend's layout).
    pub fn to_host(&self) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(&self.u_star)?;
        Ok(to_element_contiguous(&v, self.n_cells))
    }
}

impl<T: DeviceReal> DevicePostprocessed<T> {
    /// Fills u* with NaN (see [`crate::DeviceCondensed::poison`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        poison(&backend, [&mut self.u_star])
    }
}

pub(crate) fn postprocess<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    fields: &DeviceFields<T>,
) -> Result<DevicePostprocessed<T>> {
    let mut post = backend.allocate_postprocessed(disc, prep)?;
    backend.postprocess_with(
        disc,
        prep,
        fields,
        prep.design(ElementStage::Postprocess)?,
        &mut post,
    )?;
    first_failure(backend, &post.info, &post.pivots)?;
    // The thread designs' matrices live on the stack: the local memory held for them since the
    // recovery (the stage before) is given back.
    backend.gpu.release_local_memory()?;
    Ok(post)
}

/// Where the error norms were computed ([`CudaBackend::error_norms_and_where`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormsComputed {
    /// On the host, from the downloaded fields (an exact solution given as closures, or kappa
    /// varying inside cells).
    OnHost,
    /// On the device, with the fields at the points evaluated by these kernels.
    OnDevice(PointKernels),
}

impl CudaBackend {
    /// The error norms, as `LocalSolver::error_norms` computes them, and where they were
    /// computed (for tests and benchmarks that compare the ways).
    pub fn error_norms_and_where<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        post: &DevicePostprocessed<T>,
        exact: &ExactSolution,
    ) -> Result<(ErrorNorms, NormsComputed)> {
        error_norms(self, disc, prep, fields, post, exact)
    }
}

/// On the device for a manufactured `exact` ([`crate::manufactured`]); otherwise downloads u_h,
/// q_h and u* and computes the norms on the host with `hdg_core::error_norms`.
pub(crate) fn error_norms<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    fields: &DeviceFields<T>,
    post: &DevicePostprocessed<T>,
    exact: &ExactSolution,
) -> Result<(ErrorNorms, NormsComputed)> {
    let norms = |s: [f64; 3]| ErrorNorms { u: s[0].sqrt(), q: s[1].sqrt(), u_star: s[2].sqrt() };
    match squared_errors(backend, disc, prep, fields, post, exact, None)? {
        (Some(sums), computed) => Ok((norms(sums), computed)),
        (None, computed) => {
            let (host, u_star, cell_vertices, geometry) = on_host(backend, disc, fields, post)?;
            let n =
                error_norms::error_norms(disc, &geometry, &cell_vertices, &host, &u_star, exact);
            Ok((n, computed))
        }
    }
}

/// The squared errors summed over cells `0..cells` ([`hdg_core::Postprocessor::squared_errors_of_first`]).
pub(crate) fn squared_errors_of_first<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    fields: &DeviceFields<T>,
    post: &DevicePostprocessed<T>,
    exact: &ExactSolution,
    cells: usize,
) -> Result<[f64; 3]> {
    match squared_errors(backend, disc, prep, fields, post, exact, Some(cells))? {
        (Some(sums), _) => Ok(sums),
        (None, _) => {
            let (host, u_star, cell_vertices, geometry) = on_host(backend, disc, fields, post)?;
            let errors =
                error_norms::cell_errors(disc, &geometry, &cell_vertices, &host, &u_star, exact);
            Ok(hdg_core::error_norms::sum_first(&errors, cells))
        }
    }
}

/// What the host's error norms read: the fields, u*, the cells' vertices and geometry.
type HostInputs<T> = (HostFields<T>, Vec<T>, Vec<f64>, Vec<T>);

fn on_host<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    fields: &DeviceFields<T>,
    post: &DevicePostprocessed<T>,
) -> Result<HostInputs<T>> {
    let host = LocalSolver::<T>::fields_to_host(backend, fields)?;
    let u_star = post.to_host()?;
    let (cell_vertices, geometry) =
        mesh_geometry::<T>(disc.mesh, disc.tables.face_parameter_measure);
    Ok((host, u_star, cell_vertices, geometry))
}

/// The squared errors on the device when it can compute them (a manufactured `exact`, kappa
/// constant in each cell), over cells `0..first` or every cell; None where the host must.
fn squared_errors<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
    fields: &DeviceFields<T>,
    post: &DevicePostprocessed<T>,
    exact: &ExactSolution,
    first: Option<usize>,
) -> Result<(Option<[f64; 3]>, NormsComputed)> {
    let mut clock = PhaseClock::new("error norms", backend.settings().profile);
    // The device's norms take kappa per cell: where it varies inside cells, the host's.
    let device = device_solution(exact).filter(|_| prep.weighted.is_none());
    let Some(solution) = device else { return Ok((None, NormsComputed::OnHost)) };
    let (sums, evaluation) = crate::manufactured::squared_errors(
        backend,
        solution,
        &prep.mesh,
        &disc.tables,
        &prep.geometry,
        &prep.kappa,
        &fields.u,
        &fields.q,
        &post.u_star,
        first,
    )?;
    clock.lap(evaluation.to_string());
    clock.report();
    Ok((Some(sums), NormsComputed::OnDevice(evaluation)))
}

impl CudaBackend {
    /// Outputs of a postprocessing (uninitialised until [`CudaBackend::postprocess_with`]).
    pub fn allocate_postprocessed<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DevicePostprocessed<T>> {
        let (np, n_cells) = (disc.tables.n_post, prep.n_cells);
        // SAFETY: every postprocessing kernel writes every entry, or flags the element (then
        // postprocess returns an error).
        let u_star = unsafe { uninitialized::<T>(self, n_cells * np)? };
        Ok(DevicePostprocessed {
            n_cells,
            u_star,
            info: self.gpu.zeros::<i32>(n_cells.max(1))?,
            pivots: self.gpu.zeros::<T>(n_cells.max(1))?,
            backend: self.clone(),
        })
    }

    /// Queues the postprocessing in `design` into `post` (from
    /// [`CudaBackend::allocate_postprocessed`]); failed pivots are flagged in `post`.
    pub fn postprocess_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        fields: &DeviceFields<T>,
        design: Design,
        post: &mut DevicePostprocessed<T>,
    ) -> Result<()> {
        prep.kernel_order_of(disc)?;
        let n_cells = prep.n_cells;
        if fields.n_cells != n_cells || post.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "postprocessing inputs",
                reason: format!(
                    "{} field cells and {} output cells for {n_cells} cells",
                    fields.n_cells, post.n_cells
                ),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        let launch = prep.launch_for(ElementStage::Postprocess, design)?;
        let (tb, mut cells) = (prep.tables.addresses(), prep.cells());
        // Where kappa varies inside cells: the projected kappa^-1 q_h with kappa = 1.
        let flux = match (&prep.weighted, &fields.projected_flux) {
            (Some(weighted), Some(projected)) => {
                cells.kappa = address(&weighted.ones);
                projected
            }
            _ => &fields.q,
        };
        let (up, qp, sp, ip, pp) = (
            address(&fields.u),
            address(flux),
            address(&post.u_star),
            address(&post.info),
            address(&post.pivots),
        );
        // SAFETY: postprocess_{thread,block}_T_{tri,tet}K(Tables, Cells, const T* u,
        // const T* q, T* u_star, int* info, T* pv): u and q of n_cells cells (n, d n per
        // cell), u_star n_cells * n', info and pv n_cells (checked above); launch sizes as in
        // condense_with.
        unsafe {
            prep.kernels.launch(
                &launch.name,
                launch.grid,
                launch.threads,
                launch.shared,
                &[arg(&tb), arg(&cells), arg(&up), arg(&qp), arg(&sp), arg(&ip), arg(&pp)],
            )
        }
    }

    /// The error of the first element whose postprocessing failed, if any (waits).
    pub fn check_postprocessed<T: DeviceReal>(&self, post: &DevicePostprocessed<T>) -> Result<()> {
        first_failure(self, &post.info, &post.pivots)
    }
}

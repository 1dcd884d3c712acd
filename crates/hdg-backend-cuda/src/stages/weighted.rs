//! Coefficients that vary inside cells on the device (`hdg_core::coefficients`): kappa^-1 and
//! c at the coefficient points uploaded at prepare, the condensation by
//! `condense_weighted_*` in place of the constant-coefficient designs, and after the recovery
//! `weighted_flux_*`, which replaces Q by M_k^-1 (B U - C Lambda) and writes the L2
//! projection of kappa^-1 q_h that the postprocessing reads with kappa = 1
//! (`kernels/weighted.cu`; the formulas in `hdg_backend_cpu::weighted`, which the CPU runs).
use cust::memory::{DeviceBuffer, DeviceCopy};
use hdg_core::coefficients::PointCoefficients;
use hdg_core::{Discretization, Result};

use crate::design::cell_name;
use crate::device::{address, arg, CudaBackend, DeviceReal};
use crate::element_instances::{weighted_scratch_values, MAX_BLOCK_THREADS};
use crate::stages::prepare::DevicePrepared;
use crate::vector::uninitialized;

/// Addresses and sizes of the coefficients at points (`struct Weighted` in
/// `kernels/weighted.cu`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct WeightedAddresses {
    basis: u64,
    weights: u64,
    inverse_kappa: u64,
    reaction: u64,
    points: i32,
    components: i32,
    scratch_values: u64,
}

// SAFETY: plain old data (device addresses as integers and two counts).
unsafe impl DeviceCopy for WeightedAddresses {}

/// The coefficients at points on the device.
pub(crate) struct DeviceWeighted<T: DeviceReal> {
    basis: DeviceBuffer<T>,
    weights: DeviceBuffer<T>,
    inverse_kappa: DeviceBuffer<T>,
    reaction: DeviceBuffer<T>,
    points: usize,
    components: usize,
    /// kappa = 1 per cell: what the postprocessing reads with the projected kappa^-1 q_h.
    pub(crate) ones: DeviceBuffer<T>,
    /// Values of scratch per block.
    scratch_values: usize,
}

impl<T: DeviceReal> DeviceWeighted<T> {
    /// Uploads `points` (of `disc`) and the coefficient rule of its tables.
    pub(crate) fn upload(
        backend: &CudaBackend,
        disc: &Discretization<'_, T>,
        points: &PointCoefficients<T>,
    ) -> Result<Self> {
        let t = &disc.tables;
        let weights: Vec<T> =
            t.coefficient_rule.weights.iter().map(|&w| T::from_f64_lossy(w)).collect();
        let gpu = &backend.gpu;
        Ok(DeviceWeighted {
            basis: gpu.upload(&t.coefficient_basis)?,
            weights: gpu.upload(&weights)?,
            inverse_kappa: gpu.upload(&points.inverse_kappa)?,
            reaction: gpu.upload(&points.reaction)?,
            points: points.points,
            components: points.kappa_components,
            ones: gpu.upload(&vec![T::one(); disc.mesh.n_cells()])?,
            scratch_values: weighted_scratch_values(t.dim, t.n, t.n_local_trace(), points.points),
        })
    }

    fn addresses(&self) -> WeightedAddresses {
        WeightedAddresses {
            basis: address(&self.basis),
            weights: address(&self.weights),
            inverse_kappa: address(&self.inverse_kappa),
            reaction: address(&self.reaction),
            points: self.points as i32,
            components: self.components as i32,
            scratch_values: self.scratch_values as u64,
        }
    }
}

/// `{operation}_{precision}_{cell}{k}` (the scheme of `crate::element_kernels`).
fn kernel_name<T: DeviceReal>(operation: &str, prep: &DevicePrepared<T>) -> String {
    let order = prep.kernel_order;
    format!("{operation}_{}_{}{}", T::SUFFIX, cell_name(order.cell), order.k)
}

/// Blocks per multiprocessor of the weighted kernels: their triangular solves run one thread per
/// column, chains of dependent loads, so they want many resident blocks to hide the latency
/// (8 x 256 threads fill an H100 multiprocessor; the scratch then takes 132 x 8 x 4 MB at
/// the largest element, the tensor tetrahedron at k = 8 in f64).
const BLOCKS_PER_SM: usize = 8;

/// Threads per block of the weighted kernels: the widest loops are over matrix entries.
const THREADS: u32 = MAX_BLOCK_THREADS;

/// Grid and scratch of a weighted launch: [`BLOCKS_PER_SM`] blocks per multiprocessor at most
/// (each block's scratch is (dn)^2 + ... values, megabytes at high order), one per cell at
/// least.
fn grid_and_scratch<T: DeviceReal>(
    backend: &CudaBackend,
    prep: &DevicePrepared<T>,
    weighted: &DeviceWeighted<T>,
) -> Result<(u32, DeviceBuffer<T>)> {
    let grid = (BLOCKS_PER_SM * prep.kernels.sms() as usize).min(prep.n_cells).max(1);
    // SAFETY: every block writes its part of the scratch before reading it.
    let scratch = unsafe { uninitialized::<T>(backend, grid * weighted.scratch_values)? };
    Ok((grid as u32, scratch))
}

/// Launches `{operation}_{precision}_{cell}{k}` of `kernels/weighted.cu` with the arguments
/// (Tables, Cells, Weighted, `middle`..., scratch) on a grid of its own, and waits.
///
/// # Safety
/// `middle` must be the kernel's parameters between `Weighted` and the scratch, each a device
/// address of a buffer of the size the kernel reads or writes for this prepared
/// discretization.
unsafe fn launch<T: DeviceReal>(
    backend: &CudaBackend,
    prep: &DevicePrepared<T>,
    weighted: &DeviceWeighted<T>,
    operation: &str,
    middle: &[u64],
) -> Result<()> {
    let (grid, scratch) = grid_and_scratch(backend, prep, weighted)?;
    let name = kernel_name(operation, prep);
    let (tb, cells, wt, sp) =
        (prep.tables.addresses(), prep.cells(), weighted.addresses(), address(&scratch));
    let mut args = vec![arg(&tb), arg(&cells), arg(&wt)];
    args.extend(middle.iter().map(arg));
    args.push(arg(&sp));
    // SAFETY: the tables and cells of this prepared discretization (the kernel's order and
    // cell type: the name), the coefficients uploaded for it (points x components per cell),
    // scratch of grid x scratch_values values (allocated above; each kernel checks its need
    // against the size passed), the rest as the caller guarantees. The stream is waited for
    // before `scratch` is dropped.
    unsafe { prep.kernels.launch(&name, grid, THREADS, 0, &args)? };
    backend.gpu.synchronize()
}

/// Launches `condense_weighted_*` into the condensation's outputs (`outputs`: the addresses of
/// K_e, b_e, Z, u0, the flags and the pivots, from `DeviceCondensed::addresses`), and waits.
pub(crate) fn condense<T: DeviceReal>(
    backend: &CudaBackend,
    prep: &DevicePrepared<T>,
    weighted: &DeviceWeighted<T>,
    outputs: [u64; 6],
) -> Result<()> {
    // SAFETY: condense_weighted_T_{tri,tet}K(Tables, Cells, Weighted, T* k, T* b, T* z,
    // T* u0, int* info, T* pv, T* scratch): the outputs of condensed_cells(n_cells) cells and
    // info, pv of n_cells entries, allocated by allocate_condensed for these cells.
    unsafe { launch(backend, prep, weighted, "condense_weighted", &outputs) }
}

/// Launches `weighted_flux_*`: Q from U and the trace (`inputs`: free index, trace, Dirichlet
/// data, u), over `q`, and the projected kappa^-1 q_h into `projected`; `info` gets -1 if the
/// scratch was too small. Waits.
pub(crate) fn recover_flux<T: DeviceReal>(
    backend: &CudaBackend,
    prep: &DevicePrepared<T>,
    weighted: &DeviceWeighted<T>,
    inputs: [u64; 4],
    q: u64,
    projected: u64,
    info: u64,
) -> Result<()> {
    let [fi, tr, dir, up] = inputs;
    // SAFETY: weighted_flux_T_{tri,tet}K(Tables, Cells, Weighted, const unsigned* free_index,
    // const T* trace, const T* dirichlet, const T* u, T* q, T* projected, int* info,
    // T* scratch): the first four as recover_with's launch (checked there), q and projected
    // n_cells d n values, info one entry.
    unsafe {
        launch(backend, prep, weighted, "weighted_flux", &[fi, tr, dir, up, q, projected, info])
    }
}

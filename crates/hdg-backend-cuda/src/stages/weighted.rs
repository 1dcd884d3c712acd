//! Coefficients that vary inside cells on the device (`hdg_core::coefficients`): with kappa^-1
//! and c at the coefficient points uploaded at prepare ([`DeviceWeighted`]), the condensation by
//! `condense_weighted_*` in place of the constant-coefficient designs, and after the recovery
//! `weighted_flux_*`, which replaces Q by M_k^-1 (B U - C Lambda) and writes the L2
//! projection of kappa^-1 q_h that the postprocessing reads with kappa = 1
//! (`kernels/weighted.cu`; the formulas in `hdg_backend_cpu::weighted`, which the CPU runs).
use cust::memory::DeviceBuffer;
use hdg_core::Result;

use crate::design::cell_name;
use crate::device::{address, arg, CudaBackend, DeviceReal};
use crate::element_instances::MAX_BLOCK_THREADS;
use crate::stages::prepare::{DevicePrepared, DeviceWeighted};
use crate::vector::uninitialized;

/// `{operation}_{precision}_{cell}{k}` (the scheme of `crate::element_kernels`).
fn kernel_name<T: DeviceReal>(operation: &str, prep: &DevicePrepared<T>) -> String {
    let order = prep.kernel_order;
    format!("{operation}_{}_{}{}", T::SUFFIX, cell_name(order.cell), order.k)
}

/// Blocks per multiprocessor of the weighted kernels: their triangular solves run one thread per
/// column, chains of dependent loads, so they want many resident blocks to hide the latency
/// (8 x 256 threads fill a multiprocessor of 2048 resident threads; on a device of 132
/// multiprocessors the scratch then takes 132 x 8 x 4 MB at the largest element, the tensor
/// tetrahedron at k = 8 in f64).
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

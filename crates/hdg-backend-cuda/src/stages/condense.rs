//! Condense: batched static condensation on the device, K_e, b_e and the recovery data.
use std::sync::Arc;

use cust::memory::DeviceBuffer;
use hdg_core::{CoreError, Discretization, HostCondensed, Result};

use crate::design::{Design, ElementStage};
use crate::device::{address, arg, grid, CudaBackend, DeviceReal, THREADS};
use crate::element_kernels::ElementKernels;
use crate::operator::matrix_free::CondensedParts;
use crate::stages::launch::{first_failure, poison};
use crate::stages::layout::{condensed_cells, condensed_to_element_contiguous};
use crate::stages::prepare::{DevicePrepared, DeviceTopology};
use crate::vector::uninitialized;

/// Which array of a condensation [`DeviceCondensed::gather_to_host`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CondensedArray {
    /// K_e (nl x nl per element).
    TraceMatrices,
    /// b_e (nl).
    TraceLoads,
    /// Z = S^-1 P (n x nl).
    RecoveryOperator,
    /// u0 = S^-1 F (n).
    RecoveryLoad,
}

/// Condensed element data on the device (layouts in the module documentation).
pub struct DeviceCondensed<T: DeviceReal> {
    pub(crate) n_cells: usize,
    /// K_e, sector-blocked (module documentation), value `a * nl + b`.
    pub(crate) trace_matrices: DeviceBuffer<T>,
    /// b_e, sector-blocked, value `a`.
    pub(crate) trace_loads: DeviceBuffer<T>,
    /// Z, sector-blocked, value `i * nl + a`.
    pub(crate) recovery_operator: DeviceBuffer<T>,
    /// u0, sector-blocked, value `i`.
    pub(crate) recovery_load: DeviceBuffer<T>,
    /// Per element: 0, or the failing pivot + 1 (-1 at element 0: a launch configuration error).
    pub(crate) info: DeviceBuffer<i32>,
    /// The failing pivot's value per element.
    pub(crate) pivots: DeviceBuffer<T>,
    /// The global panel of [`Design::BlockGlobal`] (grown on demand, kept for relaunches).
    pub(crate) scratch: Option<DeviceBuffer<T>>,
    pub(crate) kernels: Arc<ElementKernels>,
    /// Last: the buffers are freed while the context lives.
    pub(crate) backend: CudaBackend,
}

impl<T: DeviceReal> DeviceCondensed<T> {
    /// What the matrix-free operator reads (`crate::matrix_free`): K_e, b_e, the Dirichlet
    /// data and the topology planes (of `t`, the prepared topology), in their device layouts.
    pub(crate) fn matrix_free_parts<'a>(
        &'a self,
        t: &'a DeviceTopology<T>,
    ) -> CondensedParts<'a, T> {
        CondensedParts {
            n_cells: self.n_cells,
            n_rows: t.n_rows,
            slots: t.slots,
            n_active_blocks: t.n_active_blocks,
            trace_matrices: &self.trace_matrices,
            trace_loads: &self.trace_loads,
            dirichlet: &t.dirichlet,
            row_cell: &t.row_cell,
            row_local: &t.row_local,
            slot_cell: &t.slot_cell,
            slot_row: &t.slot_row,
            slot_col: &t.slot_col,
            neighbours: &t.neighbours,
            slot_face: &t.slot_face,
        }
    }

    /// Device addresses of K_e, b_e, Z, u0, the flags and the pivots, in the order of every
    /// condensation kernel's output parameters.
    pub(crate) fn addresses(&self) -> [u64; 6] {
        [
            address(&self.trace_matrices),
            address(&self.trace_loads),
            address(&self.recovery_operator),
            address(&self.recovery_load),
            address(&self.info),
            address(&self.pivots),
        ]
    }

    pub(crate) fn download(&self, buffer: &DeviceBuffer<T>) -> Result<Vec<T>> {
        let v = self.backend.gpu.download(buffer)?;
        Ok(condensed_to_element_contiguous(&v, self.n_cells))
    }

    /// K_e of every element, element-contiguous as the CPU backend stores them
    /// (`[e * nl * nl + a * nl + b]`).
    pub fn trace_matrices_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.trace_matrices)
    }

    /// b_e of every element, element-contiguous (`[e * nl + a]`).
    pub fn trace_loads_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.trace_loads)
    }

    /// Z of every element, element-contiguous (`[e * n * nl + i * nl + a]`).
    pub fn recovery_operator_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.recovery_operator)
    }

    /// u0 of every element, element-contiguous (`[e * n + i]`).
    pub fn recovery_load_to_host(&self) -> Result<Vec<T>> {
        self.download(&self.recovery_load)
    }

    /// K_e, b_e, Z and u0 of every element, element-contiguous.
    pub fn to_host(&self) -> Result<HostCondensed<T>> {
        Ok(HostCondensed {
            trace_matrices: self.trace_matrices_to_host()?,
            trace_loads: self.trace_loads_to_host()?,
            recovery_operator: self.recovery_operator_to_host()?,
            recovery_load: self.recovery_load_to_host()?,
        })
    }

    /// Cells.
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }

    /// K_e and b_e freed (empty from now on), once the trace matrix holds its own copy: at 2D
    /// k = 3 they are 208 bytes per trace unknown. The matrix-free operator, which reads them,
    /// refuses a condensation without them.
    pub(crate) fn release_trace_matrices(&mut self) {
        // The assembly's kernels must have read them first; a failed wait keeps them (its
        // error comes back at the stream's next wait).
        if self.backend.gpu.synchronize().is_err() {
            return;
        }
        // SAFETY (both): a buffer of length 0 allocates nothing (cust makes no driver call for
        // it, so it cannot fail) and is never read.
        if let (Ok(matrices), Ok(loads)) =
            unsafe { (DeviceBuffer::uninitialized(0), DeviceBuffer::uninitialized(0)) }
        {
            self.trace_matrices = matrices;
            self.trace_loads = loads;
        }
    }

    /// Fills K_e, b_e, Z and u0 with NaN (every bit set), so that an entry a kernel fails to
    /// write cannot pass for the result of an earlier run in the same memory (tests and
    /// benchmarks poison outputs before [`CudaBackend::condense_with`]).
    pub fn poison(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        poison(
            &backend,
            [
                &mut self.trace_matrices,
                &mut self.trace_loads,
                &mut self.recovery_operator,
                &mut self.recovery_load,
            ],
        )
    }

    /// Elements `first..first + count` of one array, element-contiguous (a gather on the
    /// device: the whole arrays need not come back, which matters at tens of GB).
    pub fn gather_to_host(
        &self,
        array: CondensedArray,
        first: usize,
        count: usize,
    ) -> Result<Vec<T>> {
        let buffer = match array {
            CondensedArray::TraceMatrices => &self.trace_matrices,
            CondensedArray::TraceLoads => &self.trace_loads,
            CondensedArray::RecoveryOperator => &self.recovery_operator,
            CondensedArray::RecoveryLoad => &self.recovery_load,
        };
        if first + count > self.n_cells {
            return Err(CoreError::InvalidParameter {
                name: "element range",
                reason: format!("{first}..{} of {} cells", first + count, self.n_cells),
            });
        }
        let per = buffer.len() / condensed_cells::<T>(self.n_cells).max(1);
        let total = per * count;
        if total == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the gather below writes all `total` entries.
        let out = unsafe { uninitialized::<T>(&self.backend, total)? };
        let (src, dst) = (address(buffer), address(&out));
        let (per_u, first_u, count_u) = (per as u64, first as u64, count as u64);
        let name = format!("gather_elements_{}", T::SUFFIX);
        // SAFETY: gather_elements_T(const T* src, u64 per, u64 first, u64 count, T* out): src
        // holds per values of condensed_cells(n_cells) cells (sector-blocked),
        // first + count <= n_cells (checked), out per * count entries; one thread per output
        // entry.
        unsafe {
            self.kernels.launch(
                &name,
                grid(total)?,
                THREADS,
                0,
                &[arg(&src), arg(&per_u), arg(&first_u), arg(&count_u), arg(&dst)],
            )?
        };
        self.backend.gpu.download(&out)
    }
}

pub(crate) fn condense<T: DeviceReal>(
    backend: &CudaBackend,
    disc: &Discretization<'_, T>,
    prep: &DevicePrepared<T>,
) -> Result<DeviceCondensed<T>> {
    let mut out = backend.allocate_condensed(disc, prep)?;
    backend.condense_with(disc, prep, prep.design(ElementStage::Condense)?, &mut out)?;
    first_failure(backend, &out.info, &out.pivots)?;
    out.scratch = None;
    // The thread design's matrices live on the stack: their local memory is given back.
    backend.gpu.release_local_memory()?;
    Ok(out)
}

impl CudaBackend {
    /// Outputs of a condensation (uninitialised until [`CudaBackend::condense_with`] runs).
    pub fn allocate_condensed<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
    ) -> Result<DeviceCondensed<T>> {
        prep.kernel_order_of(disc)?;
        let t = &disc.tables;
        let (n, nl, n_cells) = (t.n, t.n_local_trace(), prep.n_cells);
        let cells = condensed_cells::<T>(n_cells);
        // SAFETY (all four): every condensation kernel writes every entry of every element
        // before anything reads them, or flags the element, and then condense returns an error;
        // the padding cells of the last block are never read.
        let trace_matrices = unsafe { uninitialized::<T>(self, cells * nl * nl)? };
        let trace_loads = unsafe { uninitialized::<T>(self, cells * nl)? };
        let recovery_operator = unsafe { uninitialized::<T>(self, cells * n * nl)? };
        let recovery_load = unsafe { uninitialized::<T>(self, cells * n)? };
        Ok(DeviceCondensed {
            n_cells,
            trace_matrices,
            trace_loads,
            recovery_operator,
            recovery_load,
            info: self.gpu.zeros::<i32>(n_cells.max(1))?,
            pivots: self.gpu.zeros::<T>(n_cells.max(1))?,
            scratch: None,
            kernels: prep.kernels.clone(),
            backend: self.clone(),
        })
    }

    /// Queues the condensation in `design` into `out` (from [`CudaBackend::allocate_condensed`]
    /// for the same discretization). Failed pivots are flagged in `out`, not reported: see
    /// [`CudaBackend::check_condensed`].
    pub fn condense_with<T: DeviceReal>(
        &self,
        disc: &Discretization<'_, T>,
        prep: &DevicePrepared<T>,
        design: Design,
        out: &mut DeviceCondensed<T>,
    ) -> Result<()> {
        prep.kernel_order_of(disc)?;
        let n_cells = prep.n_cells;
        if out.n_cells != n_cells {
            return Err(CoreError::InvalidParameter {
                name: "condensed outputs",
                reason: format!("{} cells, the discretization has {n_cells}", out.n_cells),
            });
        }
        if n_cells == 0 {
            return Ok(());
        }
        if let Some(weighted) = &prep.weighted {
            // Coefficients at points: the one weighted kernel, whatever the design.
            return crate::stages::weighted::condense(self, prep, weighted, out.addresses());
        }
        let launch = prep.launch_for(ElementStage::Condense, design)?;
        if out.scratch.as_ref().map_or(0, |b| b.len()) < launch.scratch {
            out.scratch = None;
            // SAFETY: scratch of the block condensation: written before read, per block.
            out.scratch = Some(unsafe { uninitialized::<T>(self, launch.scratch)? });
        }
        let (tb, cells) = (prep.tables.addresses(), prep.cells());
        let [kp, bp, zp, up, ip, pp] = out.addresses();
        let sp = out.scratch.as_ref().map_or(0, |b| address(b));
        let mut args =
            vec![arg(&tb), arg(&cells), arg(&kp), arg(&bp), arg(&zp), arg(&up), arg(&ip), arg(&pp)];
        if design.is_block() {
            args.push(arg(&sp));
        }
        // SAFETY: condense_{thread,block,block_global}_T_{tri,tet}K(Tables, Cells, T* k,
        // T* b, T* z, T* u0, int* info, T* pv[, T* scratch]): the tables are the uploaded
        // ElementTables of this cell type and order (the kernel's N, NF, faces and
        // orientations: the name carries cell type and order), the cell arrays hold n_cells
        // records in the documented layouts, the outputs condensed_cells(n_cells) * (nl^2, nl,
        // n nl, n) and n_cells * (1, 1) entries (allocated for this discretization, n_cells
        // checked above); the thread design runs one thread per cell (threads beyond n_cells
        // return), the block designs a grid-stride loop over cells with the block size and
        // dynamic shared memory of design.rs (checked by the kernel) and, for block_global,
        // `launch.scratch` = grid * n (nl + 1) values of scratch (allocated above).
        unsafe {
            prep.kernels.launch(&launch.name, launch.grid, launch.threads, launch.shared, &args)
        }
    }

    /// The error of the first element whose condensation failed (not positive definite), if
    /// any (waits for the stream).
    pub fn check_condensed<T: DeviceReal>(&self, out: &DeviceCondensed<T>) -> Result<()> {
        first_failure(self, &out.info, &out.pivots)
    }
}

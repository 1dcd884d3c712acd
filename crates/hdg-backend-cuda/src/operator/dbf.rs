//! The DBF trace matrix on the device ([`DeviceDbf`]) and its SpMV.
//!
//! # Layout
//!
//! The CPU backend's host matrix stores each block row's `slots` blocks of `n_f x n_f` contiguously
//! (row-major). On the device the same values are stored element-fastest ("row-fastest"), one
//! plane per (slot, entry) with the block rows consecutive inside it:
//!
//! ```text
//! values[(a * n_f * n_f + i * n_f + j) * pitch + r]  = entry (i, j) of block a of block row r
//! columns[a * pitch + r]                             = block column of slot a of block row r
//! pitch = n_rows rounded up to a multiple of 32
//! ```
//!
//! (`pitch` = `n_rows` when that is a multiple of 32; the padding rows hold zeros and are never
//! read; with it every plane starts 128-byte aligned.) The SpMV runs one thread per output entry
//! (row, i), thread `t` -> `i = t / n_rows`, `row = t % n_rows`: the 32 threads of a warp share
//! `i` and handle consecutive rows, so every load of a value plane or a column plane is one
//! coalesced access; the gather `x[column * n_f + j]` is the only indirect load. Inactive slots
//! (padding, Dirichlet) keep the host convention: a zero block whose column is the row itself,
//! so the kernel has no branch.
//!
//! Diagonal and diagonal blocks are extracted by small kernels; the Gershgorin bounds are
//! computed on the host at upload and kept; [`TraceOperator::to_host_csr`] downloads the matrix.
use std::sync::OnceLock;

use cust::memory::{AsyncCopyDestination, DeviceBuffer};
use hdg_core::dbf::{self, stored_column, DbfEntries, DbfShape};
use hdg_core::{
    CoreError, DemoteOperator, HostCsr, MultigridOperator, Real, Result, TraceOperator,
    TraceTopology, VertexSpace,
};
use rayon::prelude::*;

use crate::design::{kernels_exist, MAX_BLOCK_SIZE, TETRAHEDRON_BLOCK_SIZES};
use crate::device::{
    address, arg, cuda_error, elementwise_blocks, CudaBackend, DeviceReal, THREADS,
};
use crate::vector::{demote_buffer, uninitialized, DeviceVector};

/// The SpMV kernel a new matrix starts with: one thread per block row up to n_f = 21, where
/// its n_f accumulators and the gathered n_f entries of x still fit in registers; one thread
/// per output entry beyond (n_f = 28..45, tetrahedra at k >= 6).
fn default_kernel(n_f: usize) -> SpmvKernel {
    if n_f <= 21 {
        SpmvKernel::Row
    } else {
        SpmvKernel::EntryUnrolled
    }
}

/// Rows of a value plane are padded to a multiple of this.
const PITCH_ALIGN: usize = 32;

/// The assembled trace matrix in DBF on the device (layout in the module documentation).
pub struct DeviceDbf<T: DeviceReal> {
    n_rows: usize,
    pitch: usize,
    n_f: usize,
    slots: usize,
    values: DeviceBuffer<T>,
    columns: DeviceBuffer<u32>,
    n_active_blocks: usize,
    /// Gershgorin bounds (unscaled, scaled) of this matrix: computed on the host at upload, or,
    /// for a matrix assembled on the device, on first request (from a download of the matrix).
    bounds: OnceLock<[(f64, f64); 2]>,
    /// Gershgorin bounds of this matrix rounded to f32 (what [`DemoteOperator::demote`] gives),
    /// when known.
    bounds_f32: OnceLock<[(f64, f64); 2]>,
    /// Which SpMV kernel [`TraceOperator::apply`] launches.
    kernel: SpmvKernel,
    /// Last: fields drop in order, and the buffers must be freed while the context lives.
    backend: CudaBackend,
}

/// The SpMV kernels of the DBF matrix (all read the same layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmvKernel {
    /// One thread per output entry, slots in a run-time loop (any slot count).
    Entry,
    /// One thread per output entry, slots unrolled (5 or 7 slots).
    EntryUnrolled,
    /// One thread per block row computing its n_f outputs, slots unrolled (5 or 7 slots).
    Row,
}

/// The error of a block size without compiled DBF kernels ([`kernels_exist`]).
fn check_kernels(n_f: usize, slots: usize) -> Result<()> {
    if kernels_exist(n_f, slots) {
        return Ok(());
    }
    Err(CoreError::InvalidParameter {
        name: "block size",
        reason: format!(
            "the CUDA DBF kernels exist for n_f = 1..={MAX_BLOCK_SIZE} and, with 7 slots, n_f in \
             {TETRAHEDRON_BLOCK_SIZES:?}; not n_f = {n_f} with {slots} slots"
        ),
    })
}

impl<T: DeviceReal> DeviceDbf<T> {
    /// Uploads a DBF matrix held on the host in any layout (reordering it on the host into the
    /// device layout).
    pub fn upload(backend: &CudaBackend, host: &(impl DbfEntries + Sync)) -> Result<Self> {
        let DbfShape { n_rows, n_f, slots } = host.shape();
        check_kernels(n_f, slots)?;
        let pitch = Self::pitch_for(n_rows);
        if pitch * n_f > u32::MAX as usize || slots > u32::MAX as usize {
            return Err(CoreError::InvalidParameter {
                name: "matrix size",
                reason: format!("{n_rows} block rows of {n_f}: too many for 32-bit thread indices"),
            });
        }
        let bsz = n_f * n_f;
        let mut values = vec![T::zero(); slots * bsz * pitch];
        let mut cols = vec![0u32; slots * pitch];
        if n_rows > 0 {
            values.par_chunks_mut(pitch).enumerate().for_each(|(plane, out)| {
                let (a, e) = (plane / bsz, plane % bsz);
                for (r, v) in out[..n_rows].iter_mut().enumerate() {
                    if host.column(r, a).is_some() {
                        *v = T::from_f64_lossy(host.entry(r, a, e / n_f, e % n_f));
                    }
                }
            });
            cols.par_chunks_mut(pitch).enumerate().for_each(|(a, out)| {
                for (r, c) in out[..n_rows].iter_mut().enumerate() {
                    *c = host.column(r, a).unwrap_or(r as u32);
                }
            });
        }
        let n_active_blocks =
            (0..n_rows).map(|r| (0..slots).filter(|&a| host.column(r, a).is_some()).count()).sum();
        let bounds = [dbf::gershgorin_bounds(host, false), dbf::gershgorin_bounds(host, true)];
        let rounded = RoundedToF32(host);
        let bounds_f32 =
            [dbf::gershgorin_bounds(&rounded, false), dbf::gershgorin_bounds(&rounded, true)];
        let values = backend.gpu.upload(&values)?;
        let columns = backend.gpu.upload(&cols)?;
        let mut dbf =
            Self::from_device_parts(backend, n_rows, n_f, slots, values, columns, n_active_blocks)?;
        dbf.bounds = OnceLock::from(bounds);
        dbf.bounds_f32 = OnceLock::from(bounds_f32);
        Ok(dbf)
    }

    /// Wraps a matrix already in the device layout (the module documentation): `values` holds
    /// `slots * n_f * n_f` planes of `pitch` entries, `columns` `slots` planes of `pitch`
    /// entries, `pitch` = [`DeviceDbf::pitch_for`]`(n_rows)`, inactive slots a zero block with
    /// their own row as column. Built by the device assembly; the Gershgorin bounds are
    /// computed on first request.
    pub(crate) fn from_device_parts(
        backend: &CudaBackend,
        n_rows: usize,
        n_f: usize,
        slots: usize,
        values: DeviceBuffer<T>,
        columns: DeviceBuffer<u32>,
        n_active_blocks: usize,
    ) -> Result<Self> {
        let pitch = Self::pitch_for(n_rows);
        check_kernels(n_f, slots)?;
        if values.len() != slots * n_f * n_f * pitch || columns.len() != slots * pitch {
            return Err(CoreError::Backend(format!(
                "DBF parts: {} values and {} columns do not fit {n_rows} rows of {slots} blocks \
                 of {n_f} x {n_f}",
                values.len(),
                columns.len()
            )));
        }
        Ok(DeviceDbf {
            backend: backend.clone(),
            n_rows,
            pitch,
            n_f,
            slots,
            values,
            columns,
            n_active_blocks,
            bounds: OnceLock::new(),
            bounds_f32: OnceLock::new(),
            kernel: default_kernel(n_f),
        })
    }

    /// The plane pitch of a matrix of `n_rows` block rows (n_rows rounded up to 32).
    pub(crate) fn pitch_for(n_rows: usize) -> usize {
        n_rows.div_ceil(PITCH_ALIGN) * PITCH_ALIGN
    }

    /// Gershgorin bounds (unscaled, scaled), computed from a download of the matrix when they
    /// are not known yet.
    fn bounds(&self) -> Result<[(f64, f64); 2]> {
        if let Some(b) = self.bounds.get() {
            return Ok(*b);
        }
        let b = self.on_host(|planes| {
            [dbf::gershgorin_bounds(planes, false), dbf::gershgorin_bounds(planes, true)]
        })?;
        Ok(*self.bounds.get_or_init(|| b))
    }

    /// `read` applied to a download of the matrix.
    fn on_host<R>(&self, read: impl FnOnce(&Planes<'_, T>) -> R) -> Result<R> {
        let values = self.backend.gpu.download(&self.values)?;
        let columns = self.backend.gpu.download(&self.columns)?;
        Ok(read(&Planes {
            n_rows: self.n_rows,
            pitch: self.pitch,
            n_f: self.n_f,
            slots: self.slots,
            values: &values,
            columns: &columns,
        }))
    }

    /// Chooses the SpMV kernel (all compute the same product; the default is the fastest
    /// measured, see BENCHMARKS.md, section 'The DBF SpMV').
    pub fn set_spmv_kernel(&mut self, kernel: SpmvKernel) {
        self.kernel = kernel;
    }

    /// Block rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The plane pitch (n_rows rounded up to 32).
    pub(crate) fn pitch(&self) -> usize {
        self.pitch
    }

    /// The value planes (layout in the module documentation).
    pub(crate) fn values(&self) -> &DeviceBuffer<T> {
        &self.values
    }

    /// The column planes.
    pub(crate) fn columns(&self) -> &DeviceBuffer<u32> {
        &self.columns
    }

    /// The backend the matrix lives on.
    pub(crate) fn backend(&self) -> &CudaBackend {
        &self.backend
    }

    /// Blocks per row.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Stored blocks that the SpMV needs (not padding, not Dirichlet).
    pub fn n_active_blocks(&self) -> usize {
        self.n_active_blocks
    }

    /// Bytes one SpMV must move at least: the active blocks, the column table, x once and y
    /// once (the CPU backend's `DbfMatrix::spmv_bytes` counts the same).
    pub fn spmv_bytes(&self) -> usize {
        let t = std::mem::size_of::<T>();
        let rows = self.n_rows * self.n_f;
        self.n_active_blocks * self.n_f * self.n_f * t + self.n_rows * self.slots * 4 + 2 * rows * t
    }

    /// Device memory held (values and columns, padding included).
    pub fn memory_bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<T>() + self.columns.len() * 4
    }

    fn check(&self, what: &str, v: &DeviceVector<T>) -> Result<()> {
        let n = self.n_rows * self.n_f;
        if v.len() == n {
            Ok(())
        } else {
            Err(CoreError::InvalidParameter {
                name: "vector length",
                reason: format!("{what}: the operator has {n} rows, the vector {}", v.len()),
            })
        }
    }

    /// A kernel that reads the value planes into a new vector of `len` entries
    /// (`dbf_diagonal` or `dbf_diagonal_blocks`).
    fn extract(&self, name: &str, len: usize) -> Result<DeviceVector<T>> {
        // SAFETY: the kernel below writes all `len` entries before anything reads them.
        let out = unsafe { uninitialized::<T>(&self.backend, len)? };
        if len == 0 {
            return Ok(DeviceVector { buffer: out });
        }
        let (n_rows, pitch, nf) = (self.n_rows as u64, self.pitch as u64, self.n_f as u32);
        let (vp, op) = (address(&self.values), address(&out));
        let kernel = format!("{name}_{}", T::SUFFIX);
        // SAFETY: dbf_diagonal[_blocks](u64 n_rows, u64 pitch, unsigned nf, const T* vals,
        // T* out): vals holds slots * nf^2 planes of `pitch` >= n_rows entries, out `len`
        // (= n_rows * nf, resp. n_rows * nf^2) entries.
        unsafe {
            self.backend.gpu.launch(
                &kernel,
                elementwise_blocks(len),
                &[arg(&n_rows), arg(&pitch), arg(&nf), arg(&vp), arg(&op)],
            )?
        };
        Ok(DeviceVector { buffer: out })
    }
}

/// A downloaded device-layout matrix.
struct Planes<'a, T> {
    n_rows: usize,
    pitch: usize,
    n_f: usize,
    slots: usize,
    values: &'a [T],
    columns: &'a [u32],
}

impl<T: Real> DbfEntries for Planes<'_, T> {
    fn shape(&self) -> DbfShape {
        DbfShape { n_rows: self.n_rows, n_f: self.n_f, slots: self.slots }
    }
    fn column(&self, row: usize, a: usize) -> Option<u32> {
        stored_column(row, a, self.columns[a * self.pitch + row])
    }
    fn entry(&self, row: usize, a: usize, i: usize, j: usize) -> f64 {
        self.values[(a * self.n_f * self.n_f + i * self.n_f + j) * self.pitch + row].as_f64()
    }
}

/// A host matrix read with its entries rounded to f32: the matrix that
/// [`DemoteOperator::demote`] leaves on the device, for its Gershgorin bounds.
struct RoundedToF32<'a, M>(&'a M);

impl<M: DbfEntries> DbfEntries for RoundedToF32<'_, M> {
    fn shape(&self) -> DbfShape {
        self.0.shape()
    }
    fn column(&self, row: usize, a: usize) -> Option<u32> {
        self.0.column(row, a)
    }
    fn entry(&self, row: usize, a: usize, i: usize, j: usize) -> f64 {
        self.0.entry(row, a, i, j) as f32 as f64
    }
}

impl<T: DeviceReal> TraceOperator<T> for DeviceDbf<T> {
    type Vector = DeviceVector<T>;

    fn dim(&self) -> usize {
        self.n_rows * self.n_f
    }

    fn apply(&self, x: &DeviceVector<T>, y: &mut DeviceVector<T>) -> Result<()> {
        self.check("apply (x)", x)?;
        self.check("apply (y)", y)?;
        let entries = self.n_rows * self.n_f;
        if entries == 0 {
            return Ok(());
        }
        let (n_rows, pitch, slots) = (self.n_rows as u32, self.pitch as u32, self.slots as u32);
        let (vp, cp, xp, yp) =
            (address(&self.values), address(&self.columns), x.address(), y.address());
        let fixed = matches!(self.slots, 5 | 7);
        let (kernel, threads) = match self.kernel {
            SpmvKernel::EntryUnrolled if fixed => {
                (format!("dbf_spmv_entry_{}_nf{}_s{}", T::SUFFIX, self.n_f, self.slots), entries)
            }
            SpmvKernel::Row if fixed => {
                (format!("dbf_spmv_row_{}_nf{}_s{}", T::SUFFIX, self.n_f, self.slots), self.n_rows)
            }
            _ => (format!("dbf_spmv_{}_nf{}", T::SUFFIX, self.n_f), entries),
        };
        let blocks = threads.div_ceil(THREADS as usize) as u32;
        let args_fixed = [arg(&n_rows), arg(&pitch), arg(&vp), arg(&cp), arg(&xp), arg(&yp)];
        let args_loop =
            [arg(&n_rows), arg(&pitch), arg(&slots), arg(&vp), arg(&cp), arg(&xp), arg(&yp)];
        let args: &[_] =
            if kernel.starts_with("dbf_spmv_entry_") || kernel.starts_with("dbf_spmv_row_") {
                &args_fixed
            } else {
                &args_loop
            };
        // SAFETY: dbf_spmv_T_nfNF(unsigned n_rows, unsigned pitch, unsigned slots,
        // const T* vals, const unsigned* cols, const T* x, T* y) (the _entry_/_row_ variants
        // take the same arguments without `slots`, fixed to 5 or 7 = self.slots, and the row
        // variant one thread per block row): vals and cols hold the
        // uploaded planes (slots * nf^2, resp. slots, planes of `pitch` entries); every column
        // is a block row < n_rows (host invariant), so the gather stays inside x of
        // n_rows * nf entries; y has n_rows * nf entries (both checked above); one thread per
        // entry (blocks * THREADS >= entries, the kernel returns for t >= entries; entries
        // < 2^32 checked at upload). x and y are distinct (&x, &mut y).
        unsafe { self.backend.gpu.launch(&kernel, blocks, args) }
    }

    fn diagonal(&self) -> Result<DeviceVector<T>> {
        self.extract("dbf_diagonal", self.n_rows * self.n_f)
    }

    fn block_size(&self) -> usize {
        self.n_f
    }

    fn diagonal_blocks(&self) -> Result<DeviceVector<T>> {
        self.extract("dbf_diagonal_blocks", self.n_rows * self.n_f * self.n_f)
    }

    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        Ok(self.bounds()?[scaled as usize])
    }

    fn to_host_csr(&self) -> Result<HostCsr> {
        self.on_host(|planes| dbf::to_csr(planes))
    }
}

/// E^T A E gathered on the device, where it stays for the hierarchy (`crate::multigrid`).
impl<T: DeviceReal> MultigridOperator<T, CudaBackend> for DeviceDbf<T> {
    fn project_blocks(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>> {
        self.project(basis, rows, m)
    }

    fn vertex_operator(&self, space: &VertexSpace, topology: &TraceTopology) -> Result<HostCsr> {
        DeviceDbf::vertex_operator(self, space, topology)
    }

    fn vertex_level(
        &self,
        _backend: &CudaBackend,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<crate::DeviceCsr<T>>)> {
        self.device_vertex_level(space, topology)
    }
}

impl DemoteOperator<CudaBackend> for DeviceDbf<f64> {
    type Low = DeviceDbf<f32>;

    /// The matrix rounded to f32 on the device (the column table is copied).
    fn demote(&self) -> Result<DeviceDbf<f32>> {
        // SAFETY: the demote kernel below writes every entry before anything reads it.
        let mut values = unsafe { uninitialized::<f32>(&self.backend, self.values.len())? };
        demote_buffer(&self.backend, &self.values, &mut values)?;
        // SAFETY: filled by the copy below, queued on the stream before any use.
        let mut columns = unsafe { uninitialized::<u32>(&self.backend, self.columns.len())? };
        // SAFETY: device-to-device copy of equal-length live buffers, stream-ordered.
        unsafe { columns.async_copy_from(&self.columns, &self.backend.gpu.stream) }
            .map_err(|e| cuda_error("device-to-device copy failed", e))?;
        Ok(DeviceDbf {
            backend: self.backend.clone(),
            n_rows: self.n_rows,
            pitch: self.pitch,
            n_f: self.n_f,
            slots: self.slots,
            values,
            columns,
            n_active_blocks: self.n_active_blocks,
            // Unknown bounds are computed from the f32 values on request: the same numbers.
            bounds: self.bounds_f32.clone(),
            bounds_f32: self.bounds_f32.clone(),
            kernel: self.kernel,
        })
    }
}

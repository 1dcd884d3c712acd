//! The multigrid preconditioner's backend operations on the device ([`MultigridOps`]):
//! CSR matrices and their product, the face-by-face transfer E between the trace and vertex
//! spaces, the projection of the DBF blocks, and the products of smoothed aggregation (kernels
//! in `kernels/multigrid.cu`).
//!
//! # Layouts
//!
//! - [`DeviceCsr`]: plain CSR with 32-bit row starts and columns. The product runs a group of
//!   threads per row (4, or 32 for rows of 32 entries and more on average: the dense direct
//!   level), rows consecutive across a warp.
//! - The vertex operator E^T A E is gathered on the device into a CSR matrix and downloaded
//!   (the multigrid's aggregation runs on the host).
//! - The products of each smoothed-aggregation coarsening ([`MultigridOps::coarsen`]) run on
//!   the device in f64, a thread per row: P, P^T (a counting transpose whose rows are then
//!   sorted), A P and P^T (A P); each row is accumulated as the host does (columns in first-seen
//!   order, then sorted), so the matrices are the host's to the bit. A row of more columns than
//!   the kernels' accumulator holds (`MAX_ROW_COLUMNS`) sends the level to the host's products.
//! - [`DeviceFaceTransfer`]: E^ (d x d), each free face's d coarse unknowns (`row * d + i`), and
//!   the incidence of coarse unknowns in faces (CSR-like, entries `row * d + i`), as built by
//!   [`VertexSpace`]. Prolongation runs a thread per (face, mode < d) and touches only the first
//!   d coefficients of a face; restriction a thread per coarse unknown.
use cust::memory::DeviceBuffer;
use hdg_core::{
    check_lengths, Coarsening, CoreError, HostCsr, MultigridOps, Result, TraceOperator,
    TraceTopology, VertexSpace,
};
use rayon::prelude::*;

use hdg_core::topology::NONE;

use crate::device::{address, arg, grid, CudaBackend, DeviceReal};
use crate::operator::dbf::DeviceDbf;
use crate::stages::launch::PhaseClock;
use crate::vector::{uninitialized, DeviceVector};

/// Average entries per row from which a CSR row gets a whole warp.
const WARP_ROW_ENTRIES: usize = 32;

/// Levels of fewer rows coarsen on the host: the device's products run a thread per row, and
/// a small level keeps too few threads busy for them to win (3D's second level, say).
/// [`crate::CudaSettings::device_coarsening_rows`] overrides it.
pub(crate) const DEVICE_COARSENING_ROWS: usize = 10_000;

/// Levels of longer rows on average coarsen on the host: a thread's row accumulator searches
/// its columns one by one, and long rows make long searches.
const DEVICE_COARSENING_ROW_LENGTH: usize = 32;

impl CudaBackend {
    /// Whether the device forms the products of a square level of `rows` rows and `nnz`
    /// entries.
    fn coarsens_on_device(&self, rows: usize, nnz: usize) -> bool {
        match self.settings().device_coarsening_rows {
            Some(min_rows) => rows >= min_rows,
            None => rows >= DEVICE_COARSENING_ROWS && nnz <= DEVICE_COARSENING_ROW_LENGTH * rows,
        }
    }
}

/// A CSR matrix on the device (layout in the module documentation).
pub struct DeviceCsr<T: DeviceReal> {
    rows: usize,
    cols: usize,
    row_start: DeviceBuffer<u32>,
    columns: DeviceBuffer<u32>,
    values: DeviceBuffer<T>,
    /// The values in f64, kept on levels that the device coarsens
    /// (`CudaBackend::coarsens_on_device`): its products read them.
    exact: Option<DeviceBuffer<f64>>,
    threads_per_row: u32,
}

/// The transfer E of a [`VertexSpace`] on the device (layout in the module documentation).
pub struct DeviceFaceTransfer<T: DeviceReal> {
    n_rows: usize,
    n_f: usize,
    d: usize,
    n_coarse: usize,
    transfer: DeviceBuffer<T>,
    row_vertices: DeviceBuffer<u32>,
    start: DeviceBuffer<u32>,
    entries: DeviceBuffer<u32>,
}

fn to_u32(what: &str, values: &[usize]) -> Result<Vec<u32>> {
    values
        .par_iter()
        .map(|&v| u32::try_from(v))
        .collect::<std::result::Result<Vec<u32>, _>>()
        .map_err(|_| CoreError::InvalidParameter {
            name: "multigrid size",
            reason: format!("{what}: an index beyond 32 bits"),
        })
}

impl<T: DeviceReal> DeviceCsr<T> {
    /// A host copy (values widened to f64).
    pub fn to_host(&self, backend: &CudaBackend) -> Result<HostCsr> {
        let gpu = &backend.gpu;
        Ok(HostCsr {
            n: self.rows,
            n_cols: self.cols,
            indptr: gpu.download(&self.row_start)?.into_par_iter().map(|p| p as usize).collect(),
            indices: gpu.download(&self.columns)?.into_par_iter().map(|c| c as usize).collect(),
            values: gpu.download(&self.values)?.into_par_iter().map(|v| v.as_f64()).collect(),
        })
    }

    /// The matrix with its f64 values, where it keeps them.
    fn exact_view(&self) -> Option<CsrView> {
        self.exact.as_ref().map(|exact| CsrView {
            rows: self.rows,
            cols: self.cols,
            nnz: self.columns.len(),
            addresses: (address(&self.row_start), address(&self.columns), address(exact)),
        })
    }
}

impl DeviceCsr<f64> {
    fn view(&self) -> CsrView {
        CsrView {
            rows: self.rows,
            cols: self.cols,
            nnz: self.columns.len(),
            addresses: (address(&self.row_start), address(&self.columns), address(&self.values)),
        }
    }
}

/// An f64 CSR matrix on the device as the products' kernels take it: sizes, and the addresses
/// of its row starts, columns and values (buffers its owner keeps alive).
#[derive(Clone, Copy)]
struct CsrView {
    rows: usize,
    cols: usize,
    nnz: usize,
    addresses: (u64, u64, u64),
}

/// Threads per row of the product kernel for a matrix of `rows` rows and `nnz` entries.
fn threads_per_row(rows: usize, nnz: usize) -> u32 {
    if nnz >= WARP_ROW_ENTRIES * rows.max(1) {
        32
    } else {
        4
    }
}

/// Prefix sums of `counts`: `counts.len() + 1` row starts, as the kernels take them.
fn row_starts(counts: &[u32]) -> Result<(Vec<u32>, usize)> {
    let mut starts = Vec::with_capacity(counts.len() + 1);
    let mut sum = 0usize;
    starts.push(0u32);
    for &c in counts {
        sum += c as usize;
        starts.push(u32::try_from(sum).map_err(|_| CoreError::InvalidParameter {
            name: "multigrid size",
            reason: format!("a product of more than {} entries", u32::MAX),
        })?);
    }
    Ok((starts, sum))
}

/// A rows x cols f64 matrix assembled on the device by a two-pass RowAccumulator gather
/// (kernels/multigrid.cu): `kernels.0` writes each row's length (NONE: beyond the accumulator),
/// the host sums them into row starts, `kernels.1` writes the rows. `shared` are the arguments
/// both kernels take before their outputs (`unsigned* count`, then `const unsigned* row_start,
/// unsigned* columns, f64* values`). None when a row overflowed.
///
/// # Safety
/// `shared` must be the leading arguments of both kernels, valid for a launch of one thread
/// per row (rows >= 1), with every column the kernels write below `cols`.
unsafe fn gather_rows(
    backend: &CudaBackend,
    (rows, cols): (usize, usize),
    kernels: (&str, &str),
    shared: &[*mut std::ffi::c_void],
) -> Result<Option<DeviceCsr<f64>>> {
    let gpu = &backend.gpu;
    let count = gpu.zeros::<u32>(rows)?;
    let np = address(&count);
    // SAFETY: the caller's arguments, then count (rows entries): one length per row.
    unsafe { gpu.launch(kernels.0, grid(rows)?, &[shared, &[arg(&np)]].concat())? };
    let counts = gpu.download(&count)?;
    if counts.contains(&NONE) {
        return Ok(None);
    }
    let (row_start, nnz) = row_starts(&counts)?;
    let starts = gpu.upload(&row_start)?;
    // SAFETY: written by the fill kernel below, every entry of every row (the counts of the same
    // gather), before anything reads them.
    let columns = unsafe { uninitialized::<u32>(backend, nnz)? };
    let values = unsafe { uninitialized::<f64>(backend, nnz)? };
    let (op, ip, vp) = (address(&starts), address(&columns), address(&values));
    // SAFETY: the caller's arguments, then row_start (rows + 1 prefix sums of the counts just
    // computed by the same gather), so row r's count[r] entries at row_start[r] lie inside
    // columns and values (nnz each).
    unsafe {
        gpu.launch(kernels.1, grid(rows)?, &[shared, &[arg(&op), arg(&ip), arg(&vp)]].concat())?
    };
    Ok(Some(DeviceCsr {
        rows,
        cols,
        row_start: starts,
        columns,
        values,
        exact: None,
        threads_per_row: threads_per_row(rows, nnz),
    }))
}

/// C = A B on the device in f64 (`sparse_product_*`); None when a row of C is beyond the
/// kernels' accumulator.
fn sparse_product(backend: &CudaBackend, a: CsrView, b: CsrView) -> Result<Option<DeviceCsr<f64>>> {
    if a.cols != b.rows {
        return Err(CoreError::Backend(format!(
            "sparse product of {} x {} and {} x {} matrices",
            a.rows, a.cols, b.rows, b.cols
        )));
    }
    let n = a.rows as u32;
    let ((asp, acp, avp), (bsp, bcp, bvp)) = (a.addresses, b.addresses);
    // SAFETY: sparse_product_count / _fill(unsigned n, const unsigned* a_start,
    // const unsigned* a_columns, const f64* a_values, const unsigned* b_start,
    // const unsigned* b_columns, const f64* b_values, then gather_rows' outputs): two device
    // CSR matrices (structure checked where they were made), A's columns < b.rows (checked
    // above), B's < b.cols; a thread per row of A.
    unsafe {
        gather_rows(
            backend,
            (a.rows, b.cols),
            ("sparse_product_count", "sparse_product_fill"),
            &[arg(&n), arg(&asp), arg(&acp), arg(&avp), arg(&bsp), arg(&bcp), arg(&bvp)],
        )
    }
}

/// A^T on the device in f64 (`transpose_count`, `transpose_scatter`, `transpose_sort`): the
/// host's counting sort, each row's entries in the order of their columns.
fn transpose(backend: &CudaBackend, a: CsrView) -> Result<DeviceCsr<f64>> {
    let gpu = &backend.gpu;
    let (n, (sp, cp, vp)) = (a.rows as u32, a.addresses);
    let count = gpu.zeros::<u32>(a.cols)?;
    let np = address(&count);
    // SAFETY: transpose_count(unsigned n, const unsigned* start, const unsigned* columns,
    // unsigned* count): A's n + 1 row starts and its columns, each < a.cols = count.len(); a
    // thread per row.
    unsafe {
        gpu.launch("transpose_count", grid(a.rows)?, &[arg(&n), arg(&sp), arg(&cp), arg(&np)])?
    };
    let (row_start, nnz) = row_starts(&gpu.download(&count)?)?;
    debug_assert_eq!(nnz, a.nnz);
    let starts = gpu.upload(&row_start)?;
    let next = gpu.upload(&row_start[..a.cols])?;
    // SAFETY: every entry written by the scatter below (the counts above place each of A's
    // nnz entries once) before the sort and anything else reads them.
    let columns = unsafe { uninitialized::<u32>(backend, nnz)? };
    let values = unsafe { uninitialized::<f64>(backend, nnz)? };
    let (xp, tcp, tvp, tsp) =
        (address(&next), address(&columns), address(&values), address(&starts));
    // SAFETY: transpose_scatter(unsigned n, const unsigned* start, const unsigned* columns,
    // const f64* values, unsigned* next, unsigned* t_columns, f64* t_values): A as above; next
    // holds the transpose's row starts (a.cols entries), and row j receives exactly count[j]
    // entries, so every slot is < nnz = t_columns.len() = t_values.len().
    unsafe {
        gpu.launch(
            "transpose_scatter",
            grid(a.rows)?,
            &[arg(&n), arg(&sp), arg(&cp), arg(&vp), arg(&xp), arg(&tcp), arg(&tvp)],
        )?
    };
    let m = a.cols as u32;
    if a.cols > 0 {
        // SAFETY: transpose_sort(unsigned n, const unsigned* start, unsigned* columns,
        // f64* values): the transpose's a.cols + 1 row starts ending at nnz, its columns and
        // values; a thread per row.
        unsafe {
            gpu.launch(
                "transpose_sort",
                grid(a.cols)?,
                &[arg(&m), arg(&tsp), arg(&tcp), arg(&tvp)],
            )?
        };
    }
    Ok(DeviceCsr {
        rows: a.cols,
        cols: a.rows,
        row_start: starts,
        columns,
        values,
        exact: None,
        threads_per_row: threads_per_row(a.cols, nnz),
    })
}

/// The matrix with its values rounded to T (`values_from_f64_T`), the structure moved over;
/// with the f64 values kept when `keep_exact`.
fn to_precision<T: DeviceReal>(
    backend: &CudaBackend,
    m: DeviceCsr<f64>,
    keep_exact: bool,
) -> Result<DeviceCsr<T>> {
    let values = values_from_f64::<T>(backend, &m.values)?;
    if !keep_exact {
        // The f64 values are freed below: the conversion must have read them.
        backend.gpu.synchronize()?;
    }
    Ok(DeviceCsr {
        rows: m.rows,
        cols: m.cols,
        row_start: m.row_start,
        columns: m.columns,
        values,
        exact: keep_exact.then_some(m.values),
        threads_per_row: m.threads_per_row,
    })
}

/// `x` rounded to T on the device (a copy for T = f64).
fn values_from_f64<T: DeviceReal>(
    backend: &CudaBackend,
    x: &DeviceBuffer<f64>,
) -> Result<DeviceBuffer<T>> {
    // SAFETY: every entry written by the conversion below before anything reads it.
    let values = unsafe { uninitialized::<T>(backend, x.len())? };
    if !x.is_empty() {
        let (n64, xp, yp) = (x.len() as u64, address(x), address(&values));
        let kernel = format!("values_from_f64_{}", T::SUFFIX);
        // SAFETY: values_from_f64_T(u64 n, const f64* x, T* y), both of n entries; a thread
        // per entry. x outlives the launch: the caller holds it (and the stream is in order).
        unsafe { backend.gpu.launch(&kernel, grid(x.len())?, &[arg(&n64), arg(&xp), arg(&yp)])? };
    }
    Ok(values)
}

impl<T: DeviceReal> MultigridOps<T> for CudaBackend {
    type Csr = DeviceCsr<T>;
    type FaceTransfer = DeviceFaceTransfer<T>;

    /// Levels the device will coarsen go up in f64 (their products read it) and are rounded
    /// to T there; the rest are rounded on the host.
    fn upload_csr(&self, m: &HostCsr) -> Result<DeviceCsr<T>> {
        m.check_structure()?;
        let keep_exact = m.n == m.n_cols && self.coarsens_on_device(m.n, m.indices.len());
        let (values, exact) = if keep_exact {
            let exact = self.gpu.upload(&m.values)?;
            (values_from_f64::<T>(self, &exact)?, Some(exact))
        } else {
            let values: Vec<T> = m.values.par_iter().map(|&v| T::from_f64_lossy(v)).collect();
            (self.gpu.upload(&values)?, None)
        };
        Ok(DeviceCsr {
            rows: m.n,
            cols: m.n_cols,
            row_start: self.gpu.upload(&to_u32("row starts", &m.indptr)?)?,
            columns: self.gpu.upload(&to_u32("columns", &m.indices)?)?,
            values,
            exact,
            threads_per_row: threads_per_row(m.n, m.indices.len()),
        })
    }

    /// The products of smoothed aggregation on the device (kernels `smoothed_prolongator_*`,
    /// `transpose_*`, `sparse_product_*`) on levels of many short rows (see
    /// [`crate::CudaSettings::device_coarsening_rows`]): from A (kept in f64 at upload)
    /// and T, P, P^T and P^T A P in f64 with the host's operations in the host's order; P and
    /// P^T stay (rounded to T), P^T A P stays and comes back for the next aggregation. None
    /// (the host's products) on smaller levels and when a row is beyond the kernels'
    /// accumulator.
    fn coarsen(
        &self,
        fine: &HostCsr,
        fine_on_backend: &DeviceCsr<T>,
        tentative: &HostCsr,
        omega_over_rho: f64,
    ) -> Result<Option<Coarsening<DeviceCsr<T>>>> {
        let same_shape =
            (fine_on_backend.rows, fine_on_backend.cols, fine_on_backend.columns.len())
                == (fine.n, fine.n_cols, fine.indices.len());
        if fine.n != fine.n_cols
            || tentative.n != fine.n
            || tentative.indices.len() != fine.n
            || !same_shape
        {
            return Err(CoreError::InvalidParameter {
                name: "coarsening",
                reason: format!(
                    "a {} x {} matrix ({} on the device) with a tentative prolongator of {} \
                     rows and {} entries",
                    fine.n,
                    fine.n_cols,
                    fine_on_backend.rows,
                    tentative.n,
                    tentative.indices.len()
                ),
            });
        }
        tentative.check_structure()?;
        let Some(a) = fine_on_backend.exact_view() else { return Ok(None) };
        // Laps end on a synchronised stream, so that each phase holds its device work.
        let mut clock = PhaseClock::new("coarsening", self.settings().profile);
        let mut lap = |phase: &'static str| -> Result<()> {
            if self.settings().profile {
                self.gpu.synchronize()?;
            }
            clock.lap(phase);
            Ok(())
        };
        let aggregates = self.gpu.upload(&to_u32("aggregates", &tentative.indices)?)?;
        let weights = self.gpu.upload(&tentative.values)?;
        let (n, (asp, acp, avp)) = (fine.n as u32, a.addresses);
        let (gp, wp) = (address(&aggregates), address(&weights));
        lap("uploads")?;
        // SAFETY: smoothed_prolongator_count / _fill(unsigned n, const unsigned* a_start,
        // const unsigned* a_columns, const f64* a_values, const unsigned* aggregates,
        // const f64* tentative, f64 omega_over_rho, then gather_rows' outputs): A is n x n
        // (its structure checked at upload, its f64 values the same length), aggregates and
        // tentative have n entries (T has one entry per row), every aggregate
        // < tentative.n_cols (check_structure); a thread per row. The buffers outlive the call.
        let prolong = unsafe {
            gather_rows(
                self,
                (fine.n, tentative.n_cols),
                ("smoothed_prolongator_count", "smoothed_prolongator_fill"),
                &[
                    arg(&n),
                    arg(&asp),
                    arg(&acp),
                    arg(&avp),
                    arg(&gp),
                    arg(&wp),
                    arg(&omega_over_rho),
                ],
            )?
        };
        let Some(prolong) = prolong else { return Ok(None) };
        lap("P")?;
        let restrict = transpose(self, prolong.view())?;
        lap("P^T")?;
        let Some(ap) = sparse_product(self, a, prolong.view())? else { return Ok(None) };
        lap("A P")?;
        let Some(coarse) = sparse_product(self, restrict.view(), ap.view())? else {
            return Ok(None);
        };
        lap("P^T A P")?;
        let host = coarse.to_host(self)?;
        let keep_exact = self.coarsens_on_device(coarse.rows, coarse.columns.len());
        let coarsening = Coarsening {
            prolong: to_precision(self, prolong, false)?,
            restrict: to_precision(self, restrict, false)?,
            coarse: host,
            coarse_on_backend: Some(to_precision(self, coarse, keep_exact)?),
        };
        lap("rounding and download")?;
        clock.report();
        Ok(Some(coarsening))
    }

    /// The f64 values go: only the level's coarsening read them. So does the local memory of
    /// its kernels' row accumulators (a stack array; [`gather_rows`]).
    fn release_coarsening_values(&self, matrix: &mut DeviceCsr<T>) -> Result<()> {
        if let Some(exact) = matrix.exact.take() {
            // The coarsening's kernels must have read them before they are freed.
            self.gpu.synchronize()?;
            drop(exact);
        }
        self.gpu.release_local_memory()
    }

    fn csr_apply(
        &self,
        m: &DeviceCsr<T>,
        x: &DeviceVector<T>,
        y: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_lengths("csr_apply (x, y)", &[m.cols, m.rows], &[x.len(), y.len()])?;
        if m.rows == 0 {
            return Ok(());
        }
        let tpr = m.threads_per_row;
        let blocks = grid(m.rows * tpr as usize)?;
        let kernel = format!("csr_spmv_{}_{tpr}", T::SUFFIX);
        let (n, sp, cp, vp, xp, yp) = (
            m.rows as u32,
            address(&m.row_start),
            address(&m.columns),
            address(&m.values),
            x.address(),
            y.address(),
        );
        // SAFETY: csr_spmv_T_TPR(unsigned n_rows, const unsigned* row_start,
        // const unsigned* columns, const T* values, const T* x, T* y): row_start has n_rows + 1
        // entries ending at nnz, columns and values nnz, every column < cols = x.len(), y has
        // n_rows entries (structure checked at upload, lengths above); one group of TPR threads
        // per row (blocks * 256 >= rows * TPR). x and y are distinct (&x, &mut y).
        unsafe {
            self.gpu.launch(
                &kernel,
                blocks,
                &[arg(&n), arg(&sp), arg(&cp), arg(&vp), arg(&xp), arg(&yp)],
            )
        }
    }

    fn upload_face_transfer(&self, space: &VertexSpace) -> Result<DeviceFaceTransfer<T>> {
        let transfer: Vec<T> = space.face_transfer.iter().map(|&v| T::from_f64_lossy(v)).collect();
        Ok(DeviceFaceTransfer {
            n_rows: space.n_rows(),
            n_f: space.n_f,
            d: space.vertices_per_face,
            n_coarse: space.n_free_vertices,
            transfer: self.gpu.upload(&transfer)?,
            row_vertices: self.gpu.upload(&space.row_vertices)?,
            start: self.gpu.upload(&to_u32("incidence", &space.vertex_row_start)?)?,
            entries: self.gpu.upload(&space.vertex_rows)?,
        })
    }

    fn prolong_add(
        &self,
        e: &DeviceFaceTransfer<T>,
        coarse: &DeviceVector<T>,
        trace: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_lengths(
            "prolong_add (trace, coarse)",
            &[e.n_rows * e.n_f, e.n_coarse],
            &[trace.len(), coarse.len()],
        )?;
        if e.n_rows == 0 {
            return Ok(());
        }
        let kernel = format!("face_prolong_add_{}", T::SUFFIX);
        let (rows, nf, d) = (e.n_rows as u32, e.n_f as u32, e.d as u32);
        let (ep, vp, cp, tp) =
            (address(&e.transfer), address(&e.row_vertices), coarse.address(), trace.address());
        // SAFETY: face_prolong_add_T(unsigned n_rows, unsigned n_f, unsigned d, const T* e,
        // const unsigned* row_vertices, const T* coarse, T* trace): e has d * d entries,
        // row_vertices n_rows * d entries each NONE or < n_coarse = coarse.len() (built by
        // VertexSpace), trace n_rows * n_f entries (checked above); one thread per
        // (row, m < d).
        unsafe {
            self.gpu.launch(
                &kernel,
                grid(e.n_rows * e.d)?,
                &[arg(&rows), arg(&nf), arg(&d), arg(&ep), arg(&vp), arg(&cp), arg(&tp)],
            )
        }
    }

    fn restrict(
        &self,
        e: &DeviceFaceTransfer<T>,
        trace: &DeviceVector<T>,
        coarse: &mut DeviceVector<T>,
    ) -> Result<()> {
        check_lengths(
            "restrict (trace, coarse)",
            &[e.n_rows * e.n_f, e.n_coarse],
            &[trace.len(), coarse.len()],
        )?;
        if e.n_coarse == 0 {
            return Ok(());
        }
        let kernel = format!("face_restrict_{}", T::SUFFIX);
        let (n, nf, d) = (e.n_coarse as u32, e.n_f as u32, e.d as u32);
        let (ep, sp, xp, tp, cp) = (
            address(&e.transfer),
            address(&e.start),
            address(&e.entries),
            trace.address(),
            coarse.address(),
        );
        // SAFETY: face_restrict_T(unsigned n_coarse, unsigned n_f, unsigned d, const T* e,
        // const unsigned* start, const unsigned* entries, const T* trace, T* coarse): start
        // has n_coarse + 1 entries ending at entries.len(), every entry row * d + i with
        // row < n_rows (built by VertexSpace), trace n_rows * n_f and coarse n_coarse entries
        // (checked above); one thread per coarse unknown.
        unsafe {
            self.gpu.launch(
                &kernel,
                grid(e.n_coarse)?,
                &[arg(&n), arg(&nf), arg(&d), arg(&ep), arg(&sp), arg(&xp), arg(&tp), arg(&cp)],
            )
        }
    }
}

/// Largest basis [`DeviceDbf::project`] takes (rows and columns: d <= 3).
const MAX_BASIS: usize = 3;

impl<T: DeviceReal> DeviceDbf<T> {
    /// [`TraceOperator::project_blocks`] on the device: one thread per (slot, row) reads the
    /// leading rows x rows corner of its block; the result comes back to the host.
    pub(crate) fn project(&self, basis: &[f64], rows: usize, m: usize) -> Result<Vec<f64>> {
        let projected = self.project_on_device(basis, rows, m)?;
        self.backend().gpu.download(&projected)
    }

    /// The projected blocks of [`DeviceDbf::project`], left on the device.
    fn project_on_device(&self, basis: &[f64], rows: usize, m: usize) -> Result<DeviceBuffer<f64>> {
        if m == 0 || rows == 0 || rows > self.block_size() || basis.len() != rows * m {
            return Err(CoreError::InvalidParameter {
                name: "projection basis",
                reason: format!(
                    "{} values for {rows} rows of an {} x {m} basis",
                    basis.len(),
                    self.block_size()
                ),
            });
        }
        if rows > MAX_BASIS || m > MAX_BASIS {
            return Err(CoreError::InvalidParameter {
                name: "projection basis",
                reason: format!("{rows} x {m}: the device projection takes at most 3 x 3"),
            });
        }
        let (n_rows, slots) = (self.n_rows(), self.slots());
        let out = self.backend().gpu.zeros::<f64>(n_rows * slots * m * m)?;
        if n_rows > 0 {
            let basis_device = self.backend().gpu.upload(basis)?;
            let kernel = format!("dbf_project_blocks_{}", T::SUFFIX);
            let (nr, pitch, nf, s, r, mm) = (
                n_rows as u32,
                self.pitch() as u32,
                self.block_size() as u32,
                slots as u32,
                rows as u32,
                m as u32,
            );
            let (bp, vp, cp, op) = (
                address(&basis_device),
                address(self.values()),
                address(self.columns()),
                address(&out),
            );
            // SAFETY: dbf_project_blocks_T(unsigned n_rows, unsigned pitch, unsigned n_f,
            // unsigned slots, unsigned rows, unsigned m, const f64* basis, const T* values,
            // const unsigned* columns, f64* out): the planes of this matrix (slots * n_f^2 value
            // planes and slots column planes of `pitch` entries), a basis of rows * m <= 9
            // values, out of n_rows * slots * m * m values; one thread per (slot, row). The
            // basis buffer lives until the stream has been synchronised below.
            unsafe {
                self.backend().gpu.launch(
                    &kernel,
                    grid(n_rows * slots)?,
                    &[
                        arg(&nr),
                        arg(&pitch),
                        arg(&nf),
                        arg(&s),
                        arg(&r),
                        arg(&mm),
                        arg(&bp),
                        arg(&vp),
                        arg(&cp),
                        arg(&op),
                    ],
                )?
            };
            // The basis must outlive the kernel.
            self.backend().gpu.synchronize()?;
            drop(basis_device);
        }
        Ok(out)
    }

    /// The multigrid's vertex level ([`hdg_core::MultigridOperator::vertex_level`]): A_1
    /// gathered on the device stays there (rounded to T, and in f64 where the device coarsens
    /// it) besides coming to the host for the aggregation.
    pub(crate) fn device_vertex_level(
        &self,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<(HostCsr, Option<DeviceCsr<T>>)> {
        let backend = self.backend();
        let mut clock = PhaseClock::new("vertex level", backend.settings().profile);
        let gathered = self.gather_vertex_operator(space, topology, &mut clock)?;
        let level = match gathered {
            VertexLevel::Host(host) => (host, None),
            VertexLevel::Device(gathered) => {
                let host = gathered.to_host(backend)?;
                clock.lap("download");
                let keep_exact = backend.coarsens_on_device(gathered.rows, gathered.columns.len());
                let kept = to_precision(backend, gathered, keep_exact)?;
                if backend.settings().profile {
                    backend.gpu.synchronize()?;
                }
                clock.lap("rounding");
                (host, Some(kept))
            }
        };
        clock.report();
        Ok(level)
    }

    /// [`hdg_core::MultigridOperator::vertex_operator`] on the device ([`DeviceDbf::gather_vertex_operator`]),
    /// brought to the host.
    pub(crate) fn vertex_operator(
        &self,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<HostCsr> {
        let mut clock = PhaseClock::new("vertex level", false);
        match self.gather_vertex_operator(space, topology, &mut clock)? {
            VertexLevel::Device(matrix) => matrix.to_host(self.backend()),
            VertexLevel::Host(matrix) => Ok(matrix),
        }
    }

    /// A_1 = E^T A E on the device: the blocks projected onto E^ stay on the device, a thread
    /// per coarse unknown gathers its row (`vertex_operator_count`, then `vertex_operator_fill`
    /// at the row starts): the same sums in the same order as the host's assembly. A vertex
    /// row too long for the kernel's row buffer sends the whole product to the host's
    /// assembly.
    fn gather_vertex_operator(
        &self,
        space: &VertexSpace,
        topology: &TraceTopology,
        clock: &mut PhaseClock,
    ) -> Result<VertexLevel> {
        let d = space.vertices_per_face;
        let (n_rows, slots) = (self.n_rows(), self.slots());
        if topology.n_rows() != n_rows || space.n_rows() != n_rows || topology.slots != slots {
            return Err(CoreError::InvalidParameter {
                name: "vertex space",
                reason: format!(
                    "{} face rows in the space, {} in the topology ({} slots), {n_rows} in the \
                     operator ({slots} slots)",
                    space.n_rows(),
                    topology.n_rows(),
                    topology.slots
                ),
            });
        }
        let projected = self.project_on_device(&space.face_transfer, d, d)?;
        let profile = self.backend().settings().profile;
        if profile {
            self.backend().gpu.synchronize()?;
        }
        clock.lap("projection");
        let n_coarse = space.n_free_vertices;
        if n_coarse == 0 {
            return Ok(VertexLevel::Host(HostCsr {
                n: 0,
                n_cols: 0,
                indptr: vec![0],
                indices: vec![],
                values: vec![],
            }));
        }
        let backend = self.backend();
        let gpu = &backend.gpu;
        let start = gpu.upload(&to_u32("incidence", &space.vertex_row_start)?)?;
        let entries = gpu.upload(&space.vertex_rows)?;
        let row_vertices = gpu.upload(&space.row_vertices)?;
        clock.lap("incidence uploads");
        let (nc, dd, ss, pitch) = (n_coarse as u32, d as u32, slots as u32, self.pitch() as u32);
        let (sp, ep, rp, cp, pp) = (
            address(&start),
            address(&entries),
            address(&row_vertices),
            address(self.columns()),
            address(&projected),
        );
        // SAFETY: vertex_operator_count / _fill(unsigned n_coarse, unsigned d, unsigned slots,
        // unsigned pitch, const unsigned* start, const unsigned* entries,
        // const unsigned* row_vertices, const unsigned* dbf_columns, const f64* projected, then
        // the two-pass outputs of gather_rows): start has n_coarse + 1 entries ending at
        // entries.len(), every entry row * d + i with row < n_rows, row_vertices n_rows * d
        // entries each NONE or < n_coarse (a VertexSpace of this operator's rows, checked
        // above), the column planes slots * pitch entries, projected n_rows * slots * d * d
        // values (project_on_device); a thread per coarse unknown. The buffers outlive the call.
        let gathered = unsafe {
            gather_rows(
                backend,
                (n_coarse, n_coarse),
                ("vertex_operator_count", "vertex_operator_fill"),
                &[
                    arg(&nc),
                    arg(&dd),
                    arg(&ss),
                    arg(&pitch),
                    arg(&sp),
                    arg(&ep),
                    arg(&rp),
                    arg(&cp),
                    arg(&pp),
                ],
            )?
        };
        if profile {
            gpu.synchronize()?;
        }
        clock.lap("gather");
        // The row accumulator's local memory: the level may be the last, never coarsened (a
        // coarsening gives it back in MultigridOps::release_coarsening_values).
        gpu.release_local_memory()?;
        match gathered {
            Some(matrix) => Ok(VertexLevel::Device(matrix)),
            // A row beyond the kernel's accumulator: the host assembles from the same blocks.
            None => {
                let projected = gpu.download(&projected)?;
                hdg_core::auxiliary::vertex_operator(space, topology, &projected)
                    .map(VertexLevel::Host)
            }
        }
    }
}

/// The vertex level's operator where it was formed: gathered on the device, or assembled on
/// the host.
enum VertexLevel {
    Device(DeviceCsr<f64>),
    Host(HostCsr),
}

//! The multigrid preconditioner's backend operations on the device ([`MultigridOps`]):
//! CSR matrices and their product, the face-by-face transfer E between the trace and vertex
//! spaces, and the projection of the DBF blocks (kernels in `kernels/multigrid.cu`).
//!
//! # Layouts
//!
//! - [`DeviceCsr`]: plain CSR with 32-bit row starts and columns. The product runs a group of
//!   threads per row (4, or 32 for rows of 32 entries and more on average: the dense direct
//!   level), rows consecutive across a warp.
//! - The vertex operator E^T A E is gathered on the device into a CSR matrix and downloaded
//!   (the multigrid's aggregation runs on the host).
//! - [`DeviceFaceTransfer`]: E^ (d x d), each free face's d coarse unknowns (`row * d + i`), and
//!   the incidence of coarse unknowns in faces (CSR-like, entries `row * d + i`), as built by
//!   [`VertexSpace`]. Prolongation runs a thread per (face, mode < d) and touches only the first
//!   d coefficients of a face; restriction a thread per coarse unknown.
use cust::memory::DeviceBuffer;
use hdg_core::{
    check_lengths, CoreError, HostCsr, MultigridOps, Result, TraceOperator, TraceTopology,
    VertexSpace,
};
use rayon::prelude::*;

use crate::device::{address, arg, grid, CudaBackend, DeviceReal};
use crate::operator::dbf::DeviceDbf;
use crate::vector::{uninitialized, DeviceVector};

/// Average entries per row from which a CSR row gets a whole warp.
const WARP_ROW_ENTRIES: usize = 32;

/// A CSR matrix on the device (layout in the module documentation).
pub struct DeviceCsr<T: DeviceReal> {
    rows: usize,
    cols: usize,
    row_start: DeviceBuffer<u32>,
    columns: DeviceBuffer<u32>,
    values: DeviceBuffer<T>,
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

impl<T: DeviceReal> MultigridOps<T> for CudaBackend {
    type Csr = DeviceCsr<T>;
    type FaceTransfer = DeviceFaceTransfer<T>;

    fn upload_csr(&self, m: &HostCsr) -> Result<DeviceCsr<T>> {
        m.check_structure()?;
        let values: Vec<T> = m.values.par_iter().map(|&v| T::from_f64_lossy(v)).collect();
        let threads_per_row = if m.indices.len() >= WARP_ROW_ENTRIES * m.n.max(1) { 32 } else { 4 };
        Ok(DeviceCsr {
            rows: m.n,
            cols: m.n_cols,
            row_start: self.gpu.upload(&to_u32("row starts", &m.indptr)?)?,
            columns: self.gpu.upload(&to_u32("columns", &m.indices)?)?,
            values: self.gpu.upload(&values)?,
            threads_per_row,
        })
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

    /// [`TraceOperator::vertex_operator`] on the device: the blocks projected onto E^ stay on
    /// the device, a thread per coarse unknown gathers its row (`vertex_operator_count`, then
    /// `vertex_operator_fill` at the row starts), and only A_1 comes back: the same sums in the
    /// same order as the host's assembly. A vertex row too long for the kernel's row buffer
    /// sends the whole product to the host's assembly.
    pub(crate) fn vertex_operator(
        &self,
        space: &VertexSpace,
        topology: &TraceTopology,
    ) -> Result<HostCsr> {
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
        let n_coarse = space.n_free_vertices;
        if n_coarse == 0 {
            return Ok(HostCsr {
                n: 0,
                n_cols: 0,
                indptr: vec![0],
                indices: vec![],
                values: vec![],
            });
        }
        let gpu = &self.backend().gpu;
        let start = gpu.upload(&to_u32("incidence", &space.vertex_row_start)?)?;
        let entries = gpu.upload(&space.vertex_rows)?;
        let row_vertices = gpu.upload(&space.row_vertices)?;
        let count = gpu.zeros::<u32>(n_coarse)?;
        let (nc, dd, ss, pitch) = (n_coarse as u32, d as u32, slots as u32, self.pitch() as u32);
        let (sp, ep, rp, cp, pp, np) = (
            address(&start),
            address(&entries),
            address(&row_vertices),
            address(self.columns()),
            address(&projected),
            address(&count),
        );
        // The arguments both passes share.
        let gather = [
            arg(&nc),
            arg(&dd),
            arg(&ss),
            arg(&pitch),
            arg(&sp),
            arg(&ep),
            arg(&rp),
            arg(&cp),
            arg(&pp),
        ];
        // SAFETY: vertex_operator_count(unsigned n_coarse, unsigned d, unsigned slots,
        // unsigned pitch, const unsigned* start, const unsigned* entries,
        // const unsigned* row_vertices, const unsigned* dbf_columns, const f64* projected,
        // unsigned* count): start has n_coarse + 1 entries ending at entries.len(), every entry
        // row * d + i with row < n_rows, row_vertices n_rows * d entries (a VertexSpace of this
        // operator's rows, checked above), the column planes slots * pitch entries, projected
        // n_rows * slots * d * d values (project_on_device), count n_coarse; a thread per
        // coarse unknown. The buffers live until the download below synchronises.
        unsafe {
            gpu.launch(
                "vertex_operator_count",
                grid(n_coarse)?,
                &[&gather[..], &[arg(&np)]].concat(),
            )?
        };
        let counts = gpu.download(&count)?;
        if counts.contains(&u32::MAX) {
            // A row beyond the kernel's buffer: the host assembles from the same blocks.
            let projected = gpu.download(&projected)?;
            return hdg_core::auxiliary::vertex_operator(space, topology, &projected);
        }
        let mut indptr = Vec::with_capacity(n_coarse + 1);
        indptr.push(0usize);
        for &c in &counts {
            indptr.push(indptr[indptr.len() - 1] + c as usize);
        }
        let nnz = indptr[n_coarse];
        let row_start = gpu.upload(&to_u32("vertex operator", &indptr)?)?;
        // SAFETY: both written by the fill kernel below, every entry of every row (the counts
        // of the same gather), before the downloads read them.
        let columns = unsafe { uninitialized::<u32>(self.backend(), nnz)? };
        let values = unsafe { uninitialized::<f64>(self.backend(), nnz)? };
        let (op, ip, vp) = (address(&row_start), address(&columns), address(&values));
        // SAFETY: vertex_operator_fill(the nine arguments above, const unsigned* row_start,
        // unsigned* columns, f64* values): row_start has n_coarse + 1 entries, the prefix sums
        // of the counts just computed by the same gather, so row v's count[v] entries at
        // row_start[v] lie inside columns and values (nnz each).
        unsafe {
            gpu.launch(
                "vertex_operator_fill",
                grid(n_coarse)?,
                &[&gather[..], &[arg(&op), arg(&ip), arg(&vp)]].concat(),
            )?
        };
        let indices = gpu.download(&columns)?.into_iter().map(|c| c as usize).collect();
        let values = gpu.download(&values)?;
        Ok(HostCsr { n: n_coarse, n_cols: n_coarse, indptr, indices, values })
    }
}

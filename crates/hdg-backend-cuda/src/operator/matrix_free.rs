//! The matrix-free trace operator ([`MatrixFreeOperator`]): y = A x straight from the element
//! trace matrices K_e, never assembling the global trace matrix (the approach of the Exasim GPU
//! HDG code). Kernels in `kernels/matrix_free.cu`: triangles (n_f = 1..=[`MAX_BLOCK_SIZE`])
//! and tetrahedra (n_f = 3, 6, 10, 15, 21, 28: k = 1..=6).
//!
//! # Layout
//!
//! K_e (nl x nl, nl = F n_f with F faces per cell, symmetric) is stored once per element as
//! its packed upper triangle, element-fastest, one plane per packed entry with the cells
//! consecutive inside it:
//!
//! ```text
//! packed[p * pitch + e]           K_e(a, b), a <= b, p = a nl - a (a - 1) / 2 + (b - a)
//!                                 (row by row: (0,0) (0,1) .. (0,nl-1) (1,1) .. (nl-1,nl-1))
//! cell_rows[f * pitch + e]        free row (block row of the trace system) of local face
//!                                 f < F of cell e, NONE (u32::MAX) for a Dirichlet face
//! y_e[(f * pitch + e) * n_f + m]  (K_e x_e)_(f n_f + m): the scratch of one application
//! row_cell[side * n_rows + r]     cell `side` of block row r (NONE: no second cell), u32
//! row_local[side * n_rows + r]    local index of row r's face in that cell, u8
//! pitch                           n_cells rounded up to a multiple of 32
//! ```
//!
//! The 32 threads of a warp handle 32 consecutive cells, so every load of a K_e plane and of a
//! cell-row plane is one coalesced access; padding cells hold zeros and NONE and are never
//! used. nl (nl + 1) / 2 values per element instead of nl^2: 231 instead of 441 at k = 6. y_e
//! keeps each cell face's n_f values together (one plane per local face), so that the face
//! gather reads them in one piece; the element kernel's stores of a face plane together cover
//! whole segments (L2 merges them before they reach memory).
//!
//! # y = A x
//!
//! 1. `mf_element_apply` (one thread per cell): gathers the element's local trace vector x_e
//!    from the free-trace vector x through `cell_rows` (zero on Dirichlet faces: A is the
//!    free-free block, as the DBF assembly leaves Dirichlet columns out of the matrix and moves
//!    them into the right-hand side), forms y_e = K_e x_e from the packed triangle (each stored
//!    value loaded once and used for (a, b) and (b, a)) and writes y_e.
//! 2. `mf_face_gather` (one thread per output entry (r, m)): y[r n_f + m] is the sum, side 0
//!    first, of the y_e entries of row r's face in its one or two cells. No atomics: the same
//!    sums in the same order on every run, so the result is bitwise reproducible.
//!
//! The right-hand side (`mf_rhs`, at construction) is the DBF assembly's to the bit: the same
//! gather of b_e and subtraction of the Dirichlet columns, in the same operations and order.
//!
//! # Bytes per application
//!
//! [`MatrixFreeOperator::apply_bytes`] counts what one application must move at least, every
//! array once: the packed K_e, the cell-row table (4 B per cell face), x once, y_e written and
//! read back once, the row-cell tables (5 B per row and side), y once. (The gather reads x once
//! per cell face, about twice in all; caches absorb most of it; it is not counted, as the DBF
//! SpMV's byte count does not count its repeated x reads either.)
//!
//! # The rest of [`TraceOperator`]
//!
//! The diagonal and its blocks come from a small kernel (the sum, side 0 first, of the cells'
//! diagonal face blocks: the DBF's slot 0, bit for bit when K_e is exactly symmetric, as the
//! condensation makes it). Gershgorin bounds and [`TraceOperator::to_host_csr`] download the
//! packed matrices and rebuild, on the host, the very DBF blocks the assembly would produce, so
//! they give the DBF operator's numbers (`hdg_core::dbf`: the same Gershgorin bounds, the same CSR).
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use cust::memory::{AsyncCopyDestination, DeviceBuffer, DeviceCopy};
use hdg_core::dbf::{self, DbfEntries, DbfShape};
use hdg_core::{CoreError, DemoteOperator, HostCsr, Real, Result, TraceOperator, NONE};

use crate::design::MAX_BLOCK_SIZE;
use crate::device::{address, arg, cuda_error, elementwise_blocks, grid, CudaBackend, DeviceReal};
use crate::vector::{demote_buffer, uninitialized, DeviceVector};

/// Block sizes with compiled tetrahedron kernels (k = 1, 2, 3).
const TET_BLOCK_SIZES: [usize; 6] = [3, 6, 10, 15, 21, 28];

/// Cells of a plane are padded to a multiple of this.
const PITCH_ALIGN: usize = 32;

/// What the matrix-free operator reads of a device condensation (`DeviceCondensed`): the
/// element matrices and loads in the condensation's layouts, the Dirichlet data and the
/// assembly's topology planes (see `stages::prepare`).
pub(crate) struct CondensedParts<'a, T: DeviceCopy> {
    /// Cells.
    pub n_cells: usize,
    /// Block rows (free faces).
    pub n_rows: usize,
    /// DBF slots per row.
    pub slots: usize,
    /// Blocks the assembled DBF matrix would store (not padding, not Dirichlet).
    pub n_active_blocks: usize,
    /// K_e, `[(a * nl + b) * n_cells + e]`.
    pub trace_matrices: &'a DeviceBuffer<T>,
    /// b_e, `[a * n_cells + e]`.
    pub trace_loads: &'a DeviceBuffer<T>,
    /// Projected Dirichlet data, `[face * n_f + m]`.
    pub dirichlet: &'a DeviceBuffer<T>,
    /// `[side * n_rows + row]`.
    pub row_cell: &'a DeviceBuffer<u32>,
    /// `[side * n_rows + row]`.
    pub row_local: &'a DeviceBuffer<u8>,
    /// `[a * n_rows + row]`.
    pub slot_cell: &'a DeviceBuffer<u32>,
    /// `[a * n_rows + row]`.
    pub slot_row: &'a DeviceBuffer<u8>,
    /// `[a * n_rows + row]`.
    pub slot_col: &'a DeviceBuffer<u8>,
    /// `[a * n_rows + row]`.
    pub neighbours: &'a DeviceBuffer<u32>,
    /// `[a * n_rows + row]`.
    pub slot_face: &'a DeviceBuffer<u32>,
}

/// Addresses of the topology planes (`struct RhsTopology` in matrix_free.cu).
#[repr(C)]
#[derive(Clone, Copy)]
struct RhsTopology {
    row_cell: u64,
    row_local: u64,
    slot_cell: u64,
    slot_row: u64,
    slot_col: u64,
    neighbours: u64,
    slot_face: u64,
}

// SAFETY: plain old data (device addresses as integers).
unsafe impl DeviceCopy for RhsTopology {}

/// The index tables, shared by an operator and its f32 copy.
struct Indices {
    /// `[f * pitch + e]`.
    cell_rows: DeviceBuffer<u32>,
    /// `[side * n_rows + row]`.
    row_cell: DeviceBuffer<u32>,
    /// `[side * n_rows + row]`.
    row_local: DeviceBuffer<u8>,
    /// Last: the buffers are freed while the context lives.
    _backend: CudaBackend,
}

/// The trace operator applied from the packed element trace matrices (layout and algorithm in
/// the module documentation). Built by [`hdg_core::Assembler::assemble`] of a
/// [`CudaBackend`] set to [`crate::TraceOperatorKind::MatrixFree`].
pub struct MatrixFreeOperator<T: DeviceReal> {
    n_rows: usize,
    n_f: usize,
    /// Faces per cell (3: triangles, 4: tetrahedra).
    faces: usize,
    n_cells: usize,
    pitch: usize,
    slots: usize,
    n_active_blocks: usize,
    /// Packed K_e, `[p * pitch + e]`.
    packed: DeviceBuffer<T>,
    indices: Arc<Indices>,
    /// y_e, `[(f * pitch + e) * n_f + m]`: the scratch of an application (one at a time).
    scratch: Mutex<DeviceBuffer<T>>,
    /// Gershgorin bounds (unscaled, scaled), computed on first request.
    bounds: OnceLock<[(f64, f64); 2]>,
    /// Last: fields drop in order, and the buffers must be freed while the context lives.
    backend: CudaBackend,
}

/// A device-to-device copy of `src`.
fn duplicate<T: DeviceCopy>(
    backend: &CudaBackend,
    src: &DeviceBuffer<T>,
) -> Result<DeviceBuffer<T>> {
    // SAFETY: filled by the copy below, queued on the stream before any use.
    let mut out = unsafe { uninitialized::<T>(backend, src.len())? };
    if !src.is_empty() {
        // SAFETY: device-to-device copy of equal-length live buffers, stream-ordered.
        unsafe { out.async_copy_from(src, &backend.gpu.stream) }
            .map_err(|e| cuda_error("device-to-device copy failed", e))?;
    }
    Ok(out)
}

/// The kernel name suffix of a cell type: "" for triangles, "_tet" for tetrahedra.
fn cell_suffix(faces: usize) -> &'static str {
    if faces == 4 {
        "_tet"
    } else {
        "_tri"
    }
}

/// Entries of the packed upper triangle of an nl x nl matrix.
fn packed_len(nl: usize) -> usize {
    nl * (nl + 1) / 2
}

/// Position of (a, b), a <= b, in the packed upper triangle (`packed_index` in the kernels).
fn packed_index(nl: usize, a: usize, b: usize) -> usize {
    debug_assert!(a <= b && b < nl);
    a * nl - a * a.saturating_sub(1) / 2 + (b - a)
}

impl<T: DeviceReal> MatrixFreeOperator<T> {
    /// The plane pitch of `n_cells` cells (rounded up to 32).
    fn pitch_for(n_cells: usize) -> usize {
        n_cells.div_ceil(PITCH_ALIGN) * PITCH_ALIGN
    }

    /// Builds the operator from a device condensation (packing K_e on the device) and the
    /// right-hand side (the DBF assembly's, bit for bit).
    pub(crate) fn assemble(
        backend: &CudaBackend,
        n_f: usize,
        parts: &CondensedParts<'_, T>,
    ) -> Result<(Self, DeviceVector<T>)> {
        let (n_cells, n_rows, slots) = (parts.n_cells, parts.n_rows, parts.slots);
        // slots = 1 + 2 (faces - 1): 5 for triangles, 7 for tetrahedra.
        let faces = slots.div_ceil(2);
        let compiled = match (slots, faces) {
            (5, 3) => (1..=MAX_BLOCK_SIZE).contains(&n_f),
            (7, 4) => TET_BLOCK_SIZES.contains(&n_f),
            _ => false,
        };
        if !compiled {
            return Err(CoreError::InvalidParameter {
                name: "block size",
                reason: format!(
                    "the matrix-free kernels exist for triangles (n_f = 1..={MAX_BLOCK_SIZE}) \
                     and tetrahedra (n_f in {TET_BLOCK_SIZES:?}, k = 1..=6), not for {slots} DBF \
                     slots and n_f = {n_f}"
                ),
            });
        }
        let nl = faces * n_f;
        let cells = crate::stages::layout::condensed_cells::<T>(n_cells);
        if parts.trace_matrices.len() != cells * nl * nl
            || parts.trace_loads.len() != cells * nl
            || parts.row_cell.len() != 2 * n_rows
            || parts.row_local.len() != 2 * n_rows
        {
            return Err(CoreError::Backend(format!(
                "matrix-free operator: {} element matrix entries, {} loads, {} row cells do not \
                 fit {n_cells} cells of {nl} x {nl} and {n_rows} rows",
                parts.trace_matrices.len(),
                parts.trace_loads.len(),
                parts.row_cell.len()
            )));
        }
        let pitch = Self::pitch_for(n_cells);
        if n_cells >= u32::MAX as usize || n_rows >= u32::MAX as usize {
            return Err(CoreError::InvalidParameter {
                name: "mesh size",
                reason: format!("{n_cells} cells, {n_rows} rows: too many for 32-bit indices"),
            });
        }
        let np = packed_len(nl);
        // SAFETY (both): mf_pack writes every entry (all `pitch` cells of every plane).
        let packed = unsafe { uninitialized::<T>(backend, np * pitch)? };
        let cell_rows = unsafe { uninitialized::<u32>(backend, faces * pitch)? };
        // SAFETY: every entry a kernel reads (the real cells' planes) is written by
        // mf_element_apply before mf_face_gather reads it; the padding is never read.
        let scratch = unsafe { uninitialized::<T>(backend, nl * pitch)? };
        let row_cell = duplicate(backend, parts.row_cell)?;
        let row_local = duplicate(backend, parts.row_local)?;
        // SAFETY: mf_rhs writes all n_rows * n_f entries.
        let rhs = unsafe { uninitialized::<T>(backend, n_rows * n_f)? };
        if pitch > 0 {
            let (nc, p, f32_, nl32) = (n_cells as u64, pitch as u64, faces as u32, nl as u32);
            let (kp, pp, cp) =
                (address(parts.trace_matrices), address(&packed), address(&cell_rows));
            let kernel = format!("mf_pack_{}", T::SUFFIX);
            // SAFETY: mf_pack_T(u64 n_cells, u64 pitch, unsigned faces, unsigned nl,
            // const T* k, T* packed, unsigned* cell_rows): k holds n_cells * nl^2 entries
            // (checked above), packed nl (nl + 1) / 2 planes of `pitch` >= n_cells entries,
            // cell_rows `faces` planes; grid-stride over the pitch cells.
            unsafe {
                backend.gpu.launch(
                    &kernel,
                    elementwise_blocks(pitch),
                    &[arg(&nc), arg(&p), arg(&f32_), arg(&nl32), arg(&kp), arg(&pp), arg(&cp)],
                )?
            };
        }
        if n_rows > 0 {
            let (nr, p) = (n_rows as u64, pitch as u64);
            let (rc, rl, cp) = (address(&row_cell), address(&row_local), address(&cell_rows));
            // SAFETY: mf_cell_rows(u64 n_rows, u64 pitch, const unsigned* row_cell,
            // const u8* row_local, unsigned* cell_rows): row_cell and row_local hold 2 n_rows
            // entries (checked above), each cell < n_cells <= pitch and each local face < faces
            // (topology invariants), so every write is inside the planes of cell_rows; queued
            // after mf_pack (same stream), which set every entry to NONE first.
            unsafe {
                backend.gpu.launch(
                    "mf_cell_rows",
                    elementwise_blocks(2 * n_rows),
                    &[arg(&nr), arg(&p), arg(&rc), arg(&rl), arg(&cp)],
                )?
            };
            let (s, nc) = (slots as u32, n_cells as u64);
            let topology = RhsTopology {
                row_cell: address(parts.row_cell),
                row_local: address(parts.row_local),
                slot_cell: address(parts.slot_cell),
                slot_row: address(parts.slot_row),
                slot_col: address(parts.slot_col),
                neighbours: address(parts.neighbours),
                slot_face: address(parts.slot_face),
            };
            let (kp, bp, dp, rp) = (
                address(parts.trace_matrices),
                address(parts.trace_loads),
                address(parts.dirichlet),
                address(&rhs),
            );
            let kernel = format!("mf_rhs_{}_nf{n_f}{}", T::SUFFIX, cell_suffix(faces));
            // SAFETY: mf_rhs_T_nfNF_{tri,tet}(u64 n_rows, unsigned slots, u64 n_cells, RhsTopology,
            // const T* k, const T* b, const T* dirichlet, T* rhs): the topology planes hold
            // 2 (resp. slots) * n_rows entries, every cell index < n_cells and local face <
            // faces (the kernel's FACES, chosen by the suffix),
            // every Dirichlet slot face a mesh face (dirichlet has n_faces * n_f entries); k and
            // b hold n_cells * (nl^2, nl) entries (checked above); rhs n_rows * n_f; one thread
            // per block row.
            unsafe {
                backend.gpu.launch(
                    &kernel,
                    grid(n_rows)?,
                    &[
                        arg(&nr),
                        arg(&s),
                        arg(&nc),
                        arg(&topology),
                        arg(&kp),
                        arg(&bp),
                        arg(&dp),
                        arg(&rp),
                    ],
                )?
            };
        }
        let operator = MatrixFreeOperator {
            n_rows,
            n_f,
            faces,
            n_cells,
            pitch,
            slots,
            n_active_blocks: parts.n_active_blocks,
            packed,
            indices: Arc::new(Indices {
                cell_rows,
                row_cell,
                row_local,
                _backend: backend.clone(),
            }),
            scratch: Mutex::new(scratch),
            bounds: OnceLock::new(),
            backend: backend.clone(),
        };
        Ok((operator, DeviceVector { buffer: rhs }))
    }

    /// Block rows (free faces).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Cells (elements).
    pub fn n_cells(&self) -> usize {
        self.n_cells
    }

    /// Local trace unknowns per element, nl = 3 n_f.
    pub fn n_local(&self) -> usize {
        self.faces * self.n_f
    }

    /// Blocks the assembled DBF matrix of the same operator stores (not padding, not
    /// Dirichlet).
    pub fn n_active_blocks(&self) -> usize {
        self.n_active_blocks
    }

    /// Bytes one application must move at least (the module documentation): packed K_e, the
    /// cell-row table, x once, y_e written and read once, the row-cell tables, y once.
    pub fn apply_bytes(&self) -> usize {
        let t = std::mem::size_of::<T>();
        let nl = self.n_local();
        let dofs = self.n_rows * self.n_f;
        packed_len(nl) * self.n_cells * t
            + self.faces * self.n_cells * 4
            + dofs * t
            + 2 * nl * self.n_cells * t
            + 2 * self.n_rows * (4 + 1)
            + dofs * t
    }

    /// Device memory held: packed K_e, the y_e scratch and the index tables, padding included.
    pub fn memory_bytes(&self) -> usize {
        let t = std::mem::size_of::<T>();
        let scratch = self.scratch.lock().map(|s| s.len()).unwrap_or(0);
        (self.packed.len() + scratch) * t
            + self.indices.cell_rows.len() * 4
            + self.indices.row_cell.len() * 4
            + self.indices.row_local.len()
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

    fn scratch(&self) -> Result<MutexGuard<'_, DeviceBuffer<T>>> {
        self.scratch
            .lock()
            .map_err(|_| CoreError::Backend("matrix-free scratch poisoned by a panic".into()))
    }

    /// The diagonal blocks (`only_diagonal` false: n_rows * n_f^2 entries) or the diagonal
    /// (true: n_rows * n_f entries), in the host order.
    fn diagonal_part(&self, only_diagonal: bool) -> Result<DeviceVector<T>> {
        let per = if only_diagonal { self.n_f } else { self.n_f * self.n_f };
        let len = self.n_rows * per;
        // SAFETY: the kernel below writes all `len` entries before anything reads them.
        let out = unsafe { uninitialized::<T>(&self.backend, len)? };
        if len == 0 {
            return Ok(DeviceVector { buffer: out });
        }
        let (nr, p, faces, nf, only) = (
            self.n_rows as u64,
            self.pitch as u64,
            self.faces as u32,
            self.n_f as u32,
            only_diagonal as u32,
        );
        let (rc, rl, pp, op) = (
            address(&self.indices.row_cell),
            address(&self.indices.row_local),
            address(&self.packed),
            address(&out),
        );
        let kernel = format!("mf_diagonal_blocks_{}", T::SUFFIX);
        // SAFETY: mf_diagonal_blocks_T(u64 n_rows, u64 pitch, unsigned faces, unsigned nf,
        // unsigned only, const unsigned* row_cell, const u8* row_local, const T* packed,
        // T* out): the row tables hold 2 n_rows entries (cells < n_cells <= pitch, local faces
        // < faces), packed the nl (nl + 1) / 2 planes of `pitch` entries (nl = faces * nf),
        // out `len` entries; grid-stride.
        unsafe {
            self.backend.gpu.launch(
                &kernel,
                elementwise_blocks(len),
                &[
                    arg(&nr),
                    arg(&p),
                    arg(&faces),
                    arg(&nf),
                    arg(&only),
                    arg(&rc),
                    arg(&rl),
                    arg(&pp),
                    arg(&op),
                ],
            )?
        };
        Ok(DeviceVector { buffer: out })
    }

    /// A host copy of the packed matrices and the index tables.
    fn download(&self) -> Result<HostView<T>> {
        let gpu = &self.backend.gpu;
        Ok(HostView {
            n_rows: self.n_rows,
            n_f: self.n_f,
            slots: self.slots,
            faces: self.faces,
            pitch: self.pitch,
            packed: gpu.download(&self.packed)?,
            cell_rows: gpu.download(&self.indices.cell_rows)?,
            row_cell: gpu.download(&self.indices.row_cell)?,
            row_local: gpu.download(&self.indices.row_local)?,
        })
    }

    /// Gershgorin bounds (unscaled, scaled), computed from a download when not known yet.
    fn bounds(&self) -> Result<[(f64, f64); 2]> {
        if let Some(b) = self.bounds.get() {
            return Ok(*b);
        }
        let view = self.download()?;
        let b = [dbf::gershgorin_bounds(&view, false), dbf::gershgorin_bounds(&view, true)];
        Ok(*self.bounds.get_or_init(|| b))
    }
}

/// A downloaded operator, and the DBF blocks it stands for.
struct HostView<T> {
    n_rows: usize,
    n_f: usize,
    slots: usize,
    faces: usize,
    pitch: usize,
    packed: Vec<T>,
    cell_rows: Vec<u32>,
    row_cell: Vec<u32>,
    row_local: Vec<u8>,
}

/// One off-diagonal DBF slot: the cell it comes from, the local faces of the row and of the
/// column in that cell, and the column's block row.
#[derive(Clone, Copy)]
struct Slot {
    cell: usize,
    row_face: usize,
    col_face: usize,
    column: u32,
}

impl<T: Real> HostView<T> {
    /// K_e(a, b) of `cell`.
    fn k(&self, cell: usize, a: usize, b: usize) -> T {
        let nl = self.faces * self.n_f;
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        self.packed[packed_index(nl, lo, hi) * self.pitch + cell]
    }

    /// Cell and local face of side `side` of block row `row`.
    fn side(&self, row: usize, side: usize) -> Option<(usize, usize)> {
        let cell = self.row_cell[side * self.n_rows + row];
        (cell != NONE).then(|| (cell as usize, self.row_local[side * self.n_rows + row] as usize))
    }

    /// Slot `a` >= 1 of block row `row` in the DBF order (hdg_core::topology): the other faces
    /// of the first cell in increasing local order, then those of the second; `None` for
    /// padding and Dirichlet columns.
    fn slot(&self, row: usize, a: usize) -> Option<Slot> {
        let (side, index) = ((a - 1) / (self.faces - 1), (a - 1) % (self.faces - 1));
        let (cell, row_face) = self.side(row, side)?;
        let col_face = if index < row_face { index } else { index + 1 };
        let column = self.cell_rows[col_face * self.pitch + cell];
        (column != NONE).then_some(Slot { cell, row_face, col_face, column })
    }

    /// Entry (m, l) of slot `a` of block row `row`, as the DBF assembly computes it: slot 0 is
    /// (0 + side 0's diagonal block) + side 1's, in T.
    fn block_entry(&self, row: usize, a: usize, m: usize, l: usize) -> T {
        let nf = self.n_f;
        if a == 0 {
            let mut s = T::zero();
            for side in 0..2 {
                if let Some((cell, f)) = self.side(row, side) {
                    s += self.k(cell, f * nf + m, f * nf + l);
                }
            }
            s
        } else {
            match self.slot(row, a) {
                Some(s) => self.k(s.cell, s.row_face * nf + m, s.col_face * nf + l),
                None => T::zero(),
            }
        }
    }
}

/// The DBF blocks the packed element matrices stand for.
impl<T: Real> DbfEntries for HostView<T> {
    fn shape(&self) -> DbfShape {
        DbfShape { n_rows: self.n_rows, n_f: self.n_f, slots: self.slots }
    }
    fn column(&self, row: usize, a: usize) -> Option<u32> {
        if a == 0 {
            Some(row as u32)
        } else {
            self.slot(row, a).map(|s| s.column)
        }
    }
    fn entry(&self, row: usize, a: usize, m: usize, l: usize) -> f64 {
        self.block_entry(row, a, m, l).as_f64()
    }
}

impl<T: DeviceReal> TraceOperator<T> for MatrixFreeOperator<T> {
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
        // Held until both kernels are queued: another application queued in between (from
        // another thread) would overwrite y_e before the gather reads it.
        let scratch = self.scratch()?;
        let (nc, nr, p) = (self.n_cells as u64, self.n_rows as u64, self.pitch as u64);
        let (pp, cr, xp, ye) = (
            address(&self.packed),
            address(&self.indices.cell_rows),
            x.address(),
            address(&*scratch),
        );
        let kernel =
            format!("mf_element_apply_{}_nf{}{}", T::SUFFIX, self.n_f, cell_suffix(self.faces));
        // SAFETY: mf_element_apply_T_nfNF_{tri,tet}(u64 n_cells, u64 pitch, const T* packed,
        // const unsigned* cell_rows, const T* x, T* ye): packed holds nl (nl + 1) / 2 planes
        // and cell_rows `faces` planes of `pitch` >= n_cells entries (the kernel's FACES is
        // `faces`: the suffix), ye `faces` planes of pitch * n_f entries (nl * pitch: the
        // scratch's length); every cell row is NONE (not read) or a block row < n_rows, so the
        // gather stays inside x of n_rows * n_f entries (checked above); one thread per cell
        // (threads beyond n_cells return).
        unsafe {
            self.backend.gpu.launch(
                &kernel,
                grid(self.n_cells)?,
                &[arg(&nc), arg(&p), arg(&pp), arg(&cr), arg(&xp), arg(&ye)],
            )?
        };
        let (rc, rl, yp) =
            (address(&self.indices.row_cell), address(&self.indices.row_local), y.address());
        let kernel = format!("mf_face_gather_{}_nf{}", T::SUFFIX, self.n_f);
        // SAFETY: mf_face_gather_T_nfNF(u64 n_rows, u64 pitch, const unsigned* row_cell,
        // const u8* row_local, const T* ye, T* y): the row tables hold 2 n_rows entries (cells
        // < n_cells, local faces < faces), so every read of ye is a real cell's entry, written
        // by the launch above (same stream, before); y has n_rows * n_f entries (checked
        // above), one thread each (threads beyond return). x and y are distinct (&x, &mut y)
        // and neither is the scratch (owned by the operator).
        unsafe {
            self.backend.gpu.launch(
                &kernel,
                grid(entries)?,
                &[arg(&nr), arg(&p), arg(&rc), arg(&rl), arg(&ye), arg(&yp)],
            )?
        };
        drop(scratch);
        Ok(())
    }

    fn diagonal(&self) -> Result<DeviceVector<T>> {
        self.diagonal_part(true)
    }

    fn block_size(&self) -> usize {
        self.n_f
    }

    fn diagonal_blocks(&self) -> Result<DeviceVector<T>> {
        self.diagonal_part(false)
    }

    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        Ok(self.bounds()?[scaled as usize])
    }

    /// The matrix the operator applies, as the DBF export gives it (same pattern, same values).
    fn to_host_csr(&self) -> Result<HostCsr> {
        Ok(dbf::to_csr(&self.download()?))
    }
}

impl DemoteOperator<CudaBackend> for MatrixFreeOperator<f64> {
    type Low = MatrixFreeOperator<f32>;

    /// The packed matrices rounded to f32 on the device; the index tables are shared.
    fn demote(&self) -> Result<MatrixFreeOperator<f32>> {
        // SAFETY: the demote kernel below writes every entry before anything reads it.
        let mut packed = unsafe { uninitialized::<f32>(&self.backend, self.packed.len())? };
        demote_buffer(&self.backend, &self.packed, &mut packed)?;
        let scratch_len = self.scratch()?.len();
        // SAFETY: as the f64 scratch: written by mf_element_apply before any read.
        let scratch = unsafe { uninitialized::<f32>(&self.backend, scratch_len)? };
        Ok(MatrixFreeOperator {
            n_rows: self.n_rows,
            n_f: self.n_f,
            faces: self.faces,
            n_cells: self.n_cells,
            pitch: self.pitch,
            slots: self.slots,
            n_active_blocks: self.n_active_blocks,
            packed,
            indices: self.indices.clone(),
            scratch: Mutex::new(scratch),
            bounds: OnceLock::new(),
            backend: self.backend.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use hdg_backend_cpu::CpuBackend;
    use hdg_core::{
        Assembler, Coefficient, Discretization, LocalSolver, Manufactured, Problem, TraceOperator,
    };
    use hdg_mesh::{generate, Diagonal};

    use super::{packed_index, packed_len, HostView, MatrixFreeOperator};

    /// The host reconstruction of the DBF blocks (Gershgorin bounds, CSR export) from the
    /// packed layout, against the CPU backend's DBF matrix: the same CSR and the same bounds to
    /// the bit (no device needed: the packed layout is built here as the kernels build it).
    #[test]
    fn host_view_rebuilds_the_dbf_matrix() {
        let cases = [
            (false, 1, 2, Diagonal::Right),
            (false, 4, 1, Diagonal::Left),
            (false, 5, 3, Diagonal::Alternating),
            (true, 1, 1, Diagonal::Right),
            (true, 2, 2, Diagonal::Right),
        ];
        for (cube, n, k, diagonal) in cases {
            let mut mesh = if cube {
                generate::unit_cube(n).unwrap()
            } else {
                generate::unit_square(n, diagonal).unwrap()
            };
            if n > 1 {
                mesh = generate::perturb(&mesh, 0.2, 7).unwrap();
            }
            let cells = mesh.n_cells();
            let mut problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
            problem.kappa =
                Coefficient::PerCell((0..cells).map(|c| 1.0 + (c % 5) as f64).collect());
            let disc = Discretization::<f64>::new(&mesh, &problem, k).unwrap();
            let prep = CpuBackend.prepare(&disc).unwrap();
            let cond = CpuBackend.condense(&disc, &prep).unwrap();
            let (dbf, _) = CpuBackend.assemble(&disc, &prep, &cond).unwrap();
            let topo = &disc.topology;
            let (nf, n_rows) = (disc.tables.n_f, topo.n_rows());
            let faces = topo.faces_per_cell;
            let nl = faces * nf;
            let pitch = MatrixFreeOperator::<f64>::pitch_for(cells);
            let mut packed = vec![0.0; packed_len(nl) * pitch];
            let mut cell_rows = vec![super::NONE; faces * pitch];
            for e in 0..cells {
                for a in 0..nl {
                    for b in a..nl {
                        let v = cond.trace_matrices[(e * nl + a) * nl + b];
                        packed[packed_index(nl, a, b) * pitch + e] = v;
                    }
                }
                for (f, &face) in mesh.cell_faces(e).iter().enumerate() {
                    cell_rows[f * pitch + e] = topo.free_index[face];
                }
            }
            let mut row_cell = vec![super::NONE; 2 * n_rows];
            let mut row_local = vec![0u8; 2 * n_rows];
            for row in 0..n_rows {
                for side in 0..2 {
                    row_cell[side * n_rows + row] = topo.row_cells[row][side];
                    row_local[side * n_rows + row] = topo.row_local_face[row][side];
                }
            }
            let slots = topo.slots;
            let view = HostView {
                n_rows,
                n_f: nf,
                slots,
                faces,
                pitch,
                packed,
                cell_rows,
                row_cell,
                row_local,
            };
            assert_eq!(hdg_core::dbf::to_csr(&view), dbf.to_host_csr().unwrap(), "n {n} k {k}");
            for scaled in [false, true] {
                assert_eq!(
                    hdg_core::dbf::gershgorin_bounds(&view, scaled),
                    dbf.gershgorin_bounds(scaled).unwrap(),
                    "n {n} k {k} scaled {scaled}"
                );
            }
        }
    }

    #[test]
    fn packed_positions_enumerate_the_upper_triangle() {
        for nl in 1..=33 {
            let mut p = 0;
            for a in 0..nl {
                for b in a..nl {
                    assert_eq!(packed_index(nl, a, b), p, "nl {nl} ({a}, {b})");
                    p += 1;
                }
            }
            assert_eq!(p, packed_len(nl));
        }
    }
}

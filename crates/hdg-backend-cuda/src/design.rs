//! Which kernel design runs each element stage, and the launch sizes of the block design.
//!
//! # The designs
//!
//! - [`Design::Thread`]: one thread per element, its matrices in local memory (S n x n,
//!   P n x nl, A nl x nl: 56 KB per thread in f64 for a tetrahedron at k = 4). The CPU
//!   backend's kernels operation for operation, so it gives the CPU's numbers to the bit.
//!   Compiled where that scratch stays moderate: triangles k = 1..=8, tetrahedra k = 1..=4
//!   (recovery, whose scratch is O(n + nl), for tetrahedra k = 1..=8 too).
//! - [`Design::BlockShared`] and [`Design::BlockGlobal`]: one thread block per element (a
//!   persistent grid), the element's matrices in shared memory, cooperative algorithms:
//!   right-looking Cholesky with one barrier per column, triangular solves with one thread per
//!   right-hand-side column, the Schur complement K_e = A - W^T W parallel over its entries
//!   (`kernels/condense.cu`, `recover.cu` and `postprocess.cu` describe them). For the
//!   condensation, `BlockShared` keeps the n x (nl + 1) panel [P | F] in shared memory too,
//!   `BlockGlobal` keeps it in a global scratch (n (nl + 1) values per resident block) and only L
//!   in shared memory: it is the fallback for elements whose panel does not fit (f64 tetrahedra at
//!   k = 8: 350 KB, on a device whose blocks get less than the 226 KB that the bordered design's
//!   two passes need; a block of a compute capability 9.0 device gets at most 227 KB). Recovery and
//!   postprocessing have one block variant, [`Design::BlockShared`] (postprocessing at k = 8 in 3D:
//!   the bordered 220 x 220 matrix, packed, 194 KB in f64). Compiled for triangles and tetrahedra,
//!   k = 1..=8. Agrees with the CPU to rounding, not to the bit.
//! - [`Design::Bordered`] (condensation only): one thread block per element, the first n steps of a
//!   blocked Cholesky factorisation of the bordered matrix [[S, W], [W^T, *]] in shared memory (its
//!   rows below S become Y = W^T L^-T, so the forward substitution is part of the factorisation),
//!   NB = 4 or 8 columns per step with every warp busy, K_e = A - Y Y^T from register tiles, and a
//!   blocked back substitution for [Z | u0]. In f64 on GPUs with tensor cores (sm_80 on),
//!   K_e = A - Y Y^T runs on them (mma.m8n8k4), and for tetrahedra at k = 5..7 (f64) and 6..8 (f32,
//!   as 3xTF32: mma.m16n8k8 on the TF32 parts of each value, three products per tile, f32 accuracy)
//!   so do the factorisation, left-looking (each block column takes all its updates at once, its
//!   sums in registers), K_e and the back substitution (each warp takes its columns through all
//!   blocks, with no barrier), faster than the CUDA cores there
//!   (benchmarks/history/cuda-element-kernels.md, section 'Design choices of the CUDA element
//!   kernels: the figures behind `design.rs`'); for tetrahedra at k = 2..5 it condenses a sector's
//!   worth of consecutive elements in turn, stages their outputs (in shared memory at k = 2, in a
//!   global scratch per block at k = 3..5) and writes them side by side ([`bordered_output_group`])
//!   (`kernels/condense_bordered.cu`). The shared memory of `BlockShared` (plus the outputs staged
//!   there); agrees with the CPU to rounding. Compiled for triangles and tetrahedra, k = 1..=8. The
//!   f64 tetrahedron at k = 8, whose whole bordered matrix (350 KB) does not fit, takes W in two
//!   passes of 91 columns ([`bordered_panel_columns`]: 226 KB of shared memory, the first pass's Y
//!   in a global scratch; faster than `BlockGlobal`, same section).
//!
//! # Dispatch
//!
//! [`condensation_design`], [`recovery_design`] and [`postprocess_design`] give the design per
//! (cell type, order, precision), chosen from the timings of `condense-bench` (which prints
//! the table these functions encode). A design that does not fit the device (shared memory)
//! is replaced at launch: `BlockShared` and `Bordered` by `BlockGlobal` for the condensation
//! ([`fallback`]). `DevicePrepared::set_design` overrides the choice per stage (tests and
//! benchmarks force each design); `CudaSettings::design` (`crate::settings`) forces one design
//! on every discretization a backend prepares (for code that prepares internally, such as
//! `hdg_core::pipeline::solve`), on every stage where that design is compiled (`block-global`
//! means `block` for recovery and postprocessing).
//!
//! # Launch sizes of the block design
//!
//! The kernels' layouts need these sizes (each block kernel checks that it got them); the
//! bordered condensation's threads, output groups and passes are rows of the table in
//! `src/element_instances.rs`, from which build.rs generates its instantiations.
//!
//! | stage | threads per block | dynamic shared memory (values of T) |
//! | --- | --- | --- |
//! | condense, shared panel | (nl + 1) rounded up to 32, in [32, 256] | n(n+1)/2 + n + n(nl+1) |
//! | condense, global panel | the same | n(n+1)/2 + n (+ n(nl+1) per block in global memory) |
//! | recover | d n rounded up to 32, in [32, 256] | nl + n |
//! | postprocess | n' rounded up to 32, in [32, 256] | n'(n'+1)/2 + n' - 1 + d n |
//! | condense, bordered | [`bordered_threads`] (32 to 512) | n(n + nl + 1) - n(n-1)/2 + n, and G (nl^2 + nl + n nl + n) for a group of G staged in shared memory ([`bordered_output_group`]; staged in global memory: that many values per block in the scratch) |
use std::fmt;
use std::str::FromStr;

use hdg_core::CellType;

pub use crate::block_sizes::{MAX_BLOCK_SIZE, TETRAHEDRON_BLOCK_SIZES};
use crate::element_instances::{
    bordered_shared_values, bordered_tuning, condensation_outputs, condense_block_shared_values,
    polynomials, postprocess_block_shared_values, recover_block_shared_values, BorderedTuning,
};
pub use crate::element_instances::{
    OutputStaging, MAX_BLOCK_THREADS, MAX_ELEMENT_ORDER, MAX_THREAD_ORDER_TETRAHEDRON,
};

/// Whether the DBF SpMV and block-solve kernels exist for blocks of `n_f` and `slots` slots.
pub fn kernels_exist(n_f: usize, slots: usize) -> bool {
    (1..=MAX_BLOCK_SIZE).contains(&n_f) || (slots == 7 && TETRAHEDRON_BLOCK_SIZES.contains(&n_f))
}

/// Most threads per block of a block-design kernel, its `__launch_bounds__`: the bordered
/// condensation's own (`BorderedTuning::max_threads`), else [`MAX_BLOCK_THREADS`]. The
/// launch checks the loaded kernel's own bound as well.
pub fn max_threads(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> u32 {
    match bordered(stage, design, cell, k, precision) {
        Some(tuning) => tuning.max_threads,
        None => MAX_BLOCK_THREADS,
    }
}

/// The bordered condensation's row of the table in `src/element_instances.rs`, for a bordered
/// condensation that is compiled.
fn bordered(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> Option<&'static BorderedTuning> {
    let bordered = stage == ElementStage::Condense && design == Design::Bordered;
    bordered.then(|| bordered_tuning(precision.name(), cell_name(cell), k)).flatten()
}

/// A kernel design of the element stages (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Design {
    /// One thread per element, scratch in local memory; the CPU's numbers to the bit.
    Thread,
    /// One thread block per element, matrices in shared memory.
    BlockShared,
    /// One thread block per element, the condensation's n x (nl + 1) panel in a global scratch
    /// (condensation only).
    BlockGlobal,
    /// One thread block per element (condensation only): the first n steps of a blocked
    /// Cholesky factorisation of the bordered matrix [[S, W], [W^T, *]], all warps busy in
    /// every phase (`kernels/condense_bordered.cu`).
    Bordered,
}

impl Design {
    /// Every design.
    pub const ALL: [Design; 4] =
        [Design::Thread, Design::BlockShared, Design::BlockGlobal, Design::Bordered];

    /// Name in reports and in `HDG_CUDA_DESIGN`: "thread", "block", "block-global".
    pub fn name(self) -> &'static str {
        match self {
            Design::Thread => "thread",
            Design::BlockShared => "block",
            Design::BlockGlobal => "block-global",
            Design::Bordered => "bordered",
        }
    }

    /// Whether this is a block design.
    pub fn is_block(self) -> bool {
        !matches!(self, Design::Thread)
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Design {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL.into_iter().find(|d| d.name() == s).ok_or_else(|| {
            format!(
                "unknown element kernel design '{s}' (known: thread, block, block-global, \
                 bordered)"
            )
        })
    }
}

/// The stages of the pipeline ([`hdg_core::Stage`]) that run per element and have a choice of
/// kernel design: a subset of that one `Stage`, so that a design can only be asked for where
/// there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ElementStage {
    /// Static condensation.
    Condense,
    /// Recovery of u_h and q_h.
    Recover,
    /// Postprocessing to u*.
    Postprocess,
}

impl ElementStage {
    /// Every stage with a design choice.
    pub const ALL: [ElementStage; 3] =
        [ElementStage::Condense, ElementStage::Recover, ElementStage::Postprocess];

    /// The kernel name's stage part: the pipeline stage's name.
    pub fn name(self) -> &'static str {
        hdg_core::Stage::from(self).name()
    }

    /// Position in [`ElementStage::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl From<ElementStage> for hdg_core::Stage {
    fn from(stage: ElementStage) -> Self {
        match stage {
            ElementStage::Condense => hdg_core::Stage::Condense,
            ElementStage::Recover => hdg_core::Stage::Recover,
            ElementStage::Postprocess => hdg_core::Stage::Postprocess,
        }
    }
}

impl fmt::Display for ElementStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub use hdg_core::Precision;

/// Sizes of one (cell type, order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementSizes {
    /// Spatial dimension d.
    pub dim: usize,
    /// Faces per cell.
    pub faces: usize,
    /// Volume basis functions n.
    pub n: usize,
    /// Trace basis functions per face n_f.
    pub n_f: usize,
    /// Trace unknowns per element nl = faces n_f.
    pub nl: usize,
    /// Basis functions of the postprocessing space P_{k+1}, n'.
    pub n_post: usize,
}

impl ElementSizes {
    /// The sizes of cell type `cell` at order `k`.
    pub fn new(cell: CellType, k: usize) -> Self {
        let dim = cell.dim();
        let (n, n_f, n_post) =
            (polynomials(dim, k), polynomials(dim - 1, k), polynomials(dim, k + 1));
        let faces = cell.faces_per_cell();
        ElementSizes { dim, faces, n, n_f, nl: faces * n_f, n_post }
    }
}

/// The kernel names' cell part: "tri" or "tet".
pub(crate) fn cell_name(cell: CellType) -> &'static str {
    match cell {
        CellType::Triangle => "tri",
        CellType::Tetrahedron => "tet",
    }
}

/// Whether the kernel of `design` is compiled for (stage, cell, k) (module documentation).
pub fn compiled(stage: ElementStage, cell: CellType, k: usize, design: Design) -> bool {
    if !(1..=MAX_ELEMENT_ORDER).contains(&k) {
        return false;
    }
    match design {
        Design::Thread => match (stage, cell) {
            (ElementStage::Recover, _) | (_, CellType::Triangle) => true,
            (_, CellType::Tetrahedron) => k <= MAX_THREAD_ORDER_TETRAHEDRON,
        },
        Design::BlockShared => true,
        Design::BlockGlobal | Design::Bordered => stage == ElementStage::Condense,
    }
}

/// The kernel's name: `{stage}_{thread|block|block_global|bordered}_{f32|f64}_{tri|tet}{k}`.
pub fn kernel_name(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> String {
    let variant = match design {
        Design::Thread => "thread",
        Design::BlockShared => "block",
        Design::BlockGlobal => "block_global",
        Design::Bordered => "bordered",
    };
    format!("{}_{variant}_{}_{}{k}", stage.name(), precision.name(), cell_name(cell))
}

fn threads_for(work: usize) -> u32 {
    (work.div_ceil(32) * 32).clamp(32, MAX_BLOCK_THREADS as usize) as u32
}

/// Threads per block of a block-design kernel: one per panel column (condensation), per
/// gradient row (recovery) or per post-processing unknown, in whole warps.
///
/// One measured exception: the block condensation of tetrahedra at k = 5 in f32 runs faster with 64
/// threads than with the 96 of this rule; f64 and the neighbouring orders gain nothing from it
/// (condense-bench sweeps of `CudaSettings::condense_threads`; the figures are in
/// benchmarks/history/cuda-element-kernels.md, section 'Design choices of the CUDA element kernels:
/// the figures behind `design.rs`').
///
/// The bordered condensation of tetrahedra: [`bordered_threads`]; of triangles, one thread per
/// panel column as well.
pub fn block_threads(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> u32 {
    let s = ElementSizes::new(cell, k);
    match stage {
        ElementStage::Condense if design == Design::Bordered => {
            bordered_threads(cell, k, precision)
        }
        ElementStage::Condense
            if (cell, k, precision) == (CellType::Tetrahedron, 5, Precision::F32) =>
        {
            64
        }
        ElementStage::Condense => threads_for(s.nl + 1),
        ElementStage::Recover => threads_for(s.dim * s.n),
        ElementStage::Postprocess => threads_for(s.n_post),
    }
}

/// Threads per block of the bordered condensation: its row of the table in
/// `src/element_instances.rs` (chosen by condense-bench sweeps of `CudaSettings::condense_threads`
/// and `condense_blocks_per_sm`, together with the kernels' other parameters; the figures in
/// benchmarks/history/cuda-element-kernels.md, section 'Design choices of the CUDA element kernels:
/// the figures behind `design.rs`'), one thread per panel column where it has none.
///
/// No order caps its resident blocks at launch: the orders where a cap helped stage their
/// outputs per group of elements instead ([`bordered_output_group`]) and write whole sectors;
/// `CudaSettings::condense_blocks_per_sm` still caps for sweeps.
pub fn bordered_threads(cell: CellType, k: usize, precision: Precision) -> u32 {
    match bordered(ElementStage::Condense, Design::Bordered, cell, k, precision) {
        Some(tuning) => tuning.threads,
        None => threads_for(ElementSizes::new(cell, k).nl + 1),
    }
}

/// How the bordered condensation groups its outputs: `elements` consecutive elements are
/// condensed one after the other by one block, their K_e, b_e, Z and u0 staged (`staging`) and
/// then written with the elements side by side, so that every store fills whole 32-byte
/// sectors (a store instruction per 32 values instead of per value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputGroup {
    /// Elements per group: 1, or one sector's worth (8 in f32, 4 in f64).
    pub elements: usize,
    /// Where the group's outputs wait.
    pub staging: OutputStaging,
}

/// The output groups of the bordered condensation: its row of the table in
/// `src/element_instances.rs`, chosen by measurement (benchmarks/history/cuda-element-kernels.md,
/// section 'Design choices of the CUDA element kernels: the figures behind `design.rs`'): the
/// stores of K_e and Z took a large share of the kernel's time at k = 2..4. Tetrahedra at k = 2
/// stage in shared memory; at k = 3..5 (and 6 in f32) the staged outputs would cost shared memory
/// and so occupancy, so they are staged in global scratch instead. Elsewhere staging measured no
/// faster: direct stores.
pub fn bordered_output_group(cell: CellType, k: usize, precision: Precision) -> OutputGroup {
    match bordered(ElementStage::Condense, Design::Bordered, cell, k, precision) {
        Some(tuning) => OutputGroup { elements: tuning.output_group(), staging: tuning.staging },
        None => OutputGroup { elements: 1, staging: OutputStaging::Direct },
    }
}

/// Columns of W = [P | F] per pass of the bordered condensation (`PW` in
/// kernels/condense_bordered.cu): all nl + 1 at once, but where the table of
/// `src/element_instances.rs` gives fewer (the f64 tetrahedron at k = 8, whose whole bordered
/// matrix, 349928 B, does not fit a block's 227 KB: two passes of 91 columns, 231128 B, L kept
/// from the first, the first pass's Y kept in the global scratch for the second pass's Gram
/// product).
pub fn bordered_panel_columns(cell: CellType, k: usize, precision: Precision) -> usize {
    let all = ElementSizes::new(cell, k).nl + 1;
    match bordered(ElementStage::Condense, Design::Bordered, cell, k, precision) {
        Some(tuning) => tuning.panel_columns.unwrap_or(all),
        None => all,
    }
}

/// Dynamic shared memory (bytes) of a block-design kernel (0 for the thread design).
pub fn shared_bytes(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> usize {
    let s = ElementSizes::new(cell, k);
    let values = match (stage, design) {
        (_, Design::Thread) => 0,
        (ElementStage::Condense, Design::BlockShared) => {
            condense_block_shared_values(s.n, s.nl, true)
        }
        (ElementStage::Condense, Design::BlockGlobal) => {
            condense_block_shared_values(s.n, s.nl, false)
        }
        // The trapezoid of pw columns of W per pass (bordered_panel_columns), 1 / L(j, j), the
        // outputs of a group of elements where they are staged in shared memory, and the slack:
        // the bytes build.rs generates for the kernel, which checks its layout against them
        // (bordered_shared_values). Without a kernel, what one in one pass with direct stores
        // would take.
        (ElementStage::Condense, Design::Bordered) => {
            match bordered(stage, design, cell, k, precision) {
                Some(tuning) => return tuning.shared_bytes(),
                None => bordered_shared_values(s.n, s.nl, s.nl + 1, 0),
            }
        }
        (ElementStage::Recover, _) => recover_block_shared_values(s.n, s.nl),
        (ElementStage::Postprocess, _) => postprocess_block_shared_values(s.dim, s.n, s.n_post),
    };
    values * precision.bytes()
}

/// Values of T in the global scratch per resident block: the condensation's panel of
/// `BlockGlobal`, the staged outputs of a group of the bordered condensation
/// ([`OutputStaging::Global`]) or, where it takes its panel in passes, Y of the passes before
/// the last (n x pw each, [`bordered_panel_columns`]), 0 otherwise.
pub fn global_scratch_per_block(
    stage: ElementStage,
    design: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> usize {
    let s = ElementSizes::new(cell, k);
    match (stage, design) {
        (ElementStage::Condense, Design::BlockGlobal) => s.n * (s.nl + 1),
        (ElementStage::Condense, Design::Bordered) => {
            let group = bordered_output_group(cell, k, precision);
            let pw = bordered_panel_columns(cell, k, precision);
            let earlier_passes = (s.nl + 1).div_ceil(pw) - 1;
            let staged = match group.staging {
                OutputStaging::Global => group.elements * condensation_outputs(s.n, s.nl),
                OutputStaging::Direct | OutputStaging::Shared => 0,
            };
            staged + earlier_passes * pw * s.n
        }
        _ => 0,
    }
}

/// The condensation design for (cell, k, precision), chosen by measurement (condense-bench; its
/// selection table is in benchmarks/history/cuda-element-kernels.md, section 'Design choices of the
/// CUDA element kernels: the figures behind `design.rs`'). The thread design wins only where its
/// local-memory scratch is small (triangles k = 1, and k = 2 in f32; tetrahedra k = 1). The
/// bordered design wins for tetrahedra at k >= 2 (at k = 5 in f32 only since its outputs are staged
/// in global scratch) and for triangles in f64 at k >= 3; the block design for the other triangles.
/// The f64 tetrahedron at k = 8 runs the bordered design in two passes. Where the shared memory
/// does not suffice (`BlockShared` for tetrahedra at k = 8 in f64; on smaller devices the bordered
/// design too) they fall back to the global panel.
pub fn condensation_design(cell: CellType, k: usize, precision: Precision) -> Design {
    let f64 = precision == Precision::F64;
    match cell {
        CellType::Triangle if k == 1 || (k == 2 && !f64) => Design::Thread,
        CellType::Triangle if f64 && k >= 3 => Design::Bordered,
        CellType::Triangle => Design::BlockShared,
        CellType::Tetrahedron if k == 1 => Design::Thread,
        CellType::Tetrahedron => Design::Bordered,
    }
}

/// The recovery design for (cell, k, precision), by the same measurement as
/// [`condensation_design`]: recovery is a mat-vec with Z per element, which the thread design reads
/// coalesced; the block design wins only in f64 at a few orders (triangles k = 3, 4; tetrahedra
/// k = 2 and k >= 6; BENCHMARKS.md, section 'Element kernels: condensation, recovery,
/// postprocessing').
pub fn recovery_design(cell: CellType, k: usize, precision: Precision) -> Design {
    let f64 = precision == Precision::F64;
    match cell {
        CellType::Triangle if f64 && (3..=4).contains(&k) => Design::BlockShared,
        CellType::Tetrahedron if f64 && (k == 2 || k >= 6) => Design::BlockShared,
        _ => Design::Thread,
    }
}

/// The postprocessing design for (cell, k, precision), by the same measurement as
/// [`condensation_design`]: the thread design for triangles at k <= 2, and k <= 4 in f32
/// (and tetrahedra k = 1 in f32), the block design elsewhere. Since the block design forms its
/// right-hand side one thread per entry, it also wins the f32 triangles from k = 5
/// (benchmarks/history/cuda-element-kernels.md, section 'The block postprocessing's right-hand
/// side, one thread per entry').
pub fn postprocess_design(cell: CellType, k: usize, precision: Precision) -> Design {
    let f32 = precision == Precision::F32;
    match cell {
        CellType::Triangle if k <= 2 || (f32 && k <= 4) => Design::Thread,
        CellType::Tetrahedron if f32 && k == 1 => Design::Thread,
        _ => Design::BlockShared,
    }
}

/// The dispatch of `stage`.
pub fn default_design(
    stage: ElementStage,
    cell: CellType,
    k: usize,
    precision: Precision,
) -> Design {
    match stage {
        ElementStage::Condense => condensation_design(cell, k, precision),
        ElementStage::Recover => recovery_design(cell, k, precision),
        ElementStage::Postprocess => postprocess_design(cell, k, precision),
    }
}

/// The design that runs when `wanted` cannot: a block or bordered condensation whose shared
/// memory does not fit `max_shared` bytes falls back to the block design's global panel;
/// everything else runs as asked (and fails with a clear error if it cannot).
pub fn fallback(
    stage: ElementStage,
    wanted: Design,
    cell: CellType,
    k: usize,
    precision: Precision,
    max_shared: usize,
) -> Design {
    if stage == ElementStage::Condense
        && matches!(wanted, Design::BlockShared | Design::Bordered)
        && shared_bytes(stage, wanted, cell, k, precision) > max_shared
    {
        Design::BlockGlobal
    } else {
        wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_formulas_of_the_issue() {
        let s = ElementSizes::new(CellType::Tetrahedron, 8);
        assert_eq!((s.n, s.n_f, s.nl, s.n_post), (165, 45, 180, 220));
        let s = ElementSizes::new(CellType::Triangle, 8);
        assert_eq!((s.n, s.n_f, s.nl, s.n_post), (45, 9, 27, 55));
    }

    #[test]
    fn bordered_output_groups_cost_shared_or_global_memory() {
        let (tet, f64, f32) = (CellType::Tetrahedron, Precision::F64, Precision::F32);
        let bordered = |k, p| shared_bytes(ElementStage::Condense, Design::Bordered, tet, k, p);
        let scratch =
            |k, p| global_scratch_per_block(ElementStage::Condense, Design::Bordered, tet, k, p);
        // k = 2: (n, nl) = (10, 24), outputs 24^2 + 24 + 240 + 10 = 850 per element, a group
        // of one sector (4 in f64) staged after the 10 columns of order 35 and dinv, then the
        // 16 values of slack.
        let group = bordered_output_group(tet, 2, f64);
        assert_eq!(group, OutputGroup { elements: 4, staging: OutputStaging::Shared });
        assert_eq!(bordered(2, f64), 8 * (10 * 35 - 45 + 10 + 4 * 850 + 16));
        assert_eq!(scratch(2, f64), 0);
        // k = 3: (20, 40), outputs 1600 + 40 + 800 + 20 = 2460, staged in global memory: no
        // shared memory for them, 4 (f64) or 8 (f32) elements' worth of scratch per block.
        for (p, elements) in [(f64, 4), (f32, 8)] {
            let group = bordered_output_group(tet, 3, p);
            assert_eq!(group, OutputGroup { elements, staging: OutputStaging::Global });
            assert_eq!(bordered(3, p), p.bytes() * (20 * 61 - 190 + 20 + 16));
            assert_eq!(scratch(3, p), elements * 2460);
        }
        // Direct stores: neither.
        let group = bordered_output_group(tet, 6, f64);
        assert_eq!(group, OutputGroup { elements: 1, staging: OutputStaging::Direct });
        assert_eq!(scratch(6, f64), 0);
        let tri = bordered_output_group(CellType::Triangle, 3, f64);
        assert_eq!(tri.staging, OutputStaging::Direct);
        // The other designs' scratch is unchanged: only the global panel has one.
        let panel =
            global_scratch_per_block(ElementStage::Condense, Design::BlockGlobal, tet, 3, f64);
        assert_eq!(panel, 20 * 41);
        assert_eq!(
            global_scratch_per_block(ElementStage::Recover, Design::Bordered, tet, 3, f64),
            0
        );
    }

    #[test]
    fn shared_memory_needs() {
        // f64 tetrahedra at k = 8: the shared panel does not fit 227 KB, the global one does.
        let max = 227 * 1024;
        let shared = shared_bytes(
            ElementStage::Condense,
            Design::BlockShared,
            CellType::Tetrahedron,
            8,
            Precision::F64,
        );
        assert_eq!(shared, 8 * (165 * 166 / 2 + 165 + 165 * 181));
        assert!(shared > max);
        let d = fallback(
            ElementStage::Condense,
            Design::BlockShared,
            CellType::Tetrahedron,
            8,
            Precision::F64,
            max,
        );
        assert_eq!(d, Design::BlockGlobal);
        assert!(
            shared_bytes(ElementStage::Condense, d, CellType::Tetrahedron, 8, Precision::F64)
                <= max
        );
        // The bordered condensation: n columns of the order n + pw matrix, 1 / L(j, j) and 16
        // values of slack. All of W at once (pw = nl + 1 = 181) would take 349928 B at k = 8
        // in f64; two passes of pw = 91 take 231128 B (the kernel's generated size, which its
        // layout is checked against), which fits, with the first pass's Y (165 x 91) in the
        // global scratch.
        assert_eq!(8 * (165 * 346 - 165 * 164 / 2 + 165 + 16), 349_928);
        let tet8 = (CellType::Tetrahedron, 8, Precision::F64);
        assert_eq!(bordered_panel_columns(tet8.0, tet8.1, tet8.2), 91);
        let bordered =
            shared_bytes(ElementStage::Condense, Design::Bordered, tet8.0, tet8.1, tet8.2);
        assert_eq!(bordered, 8 * (165 * 256 - 165 * 164 / 2 + 165 + 16));
        assert_eq!(bordered, 231_128);
        let scratch = global_scratch_per_block(
            ElementStage::Condense,
            Design::Bordered,
            tet8.0,
            tet8.1,
            tet8.2,
        );
        assert_eq!(scratch, 165 * 91);
        let d = fallback(ElementStage::Condense, Design::Bordered, tet8.0, tet8.1, tet8.2, max);
        assert_eq!(d, Design::Bordered);
        // A device with less shared memory (163 KB per block) still falls back.
        let d =
            fallback(ElementStage::Condense, Design::Bordered, tet8.0, tet8.1, tet8.2, 163 * 1024);
        assert_eq!(d, Design::BlockGlobal);
        // Everywhere else W comes in one pass.
        assert_eq!(bordered_panel_columns(CellType::Tetrahedron, 8, Precision::F32), 181);
        assert_eq!(bordered_panel_columns(CellType::Tetrahedron, 7, Precision::F64), 145);
        let f32_fits = fallback(
            ElementStage::Condense,
            Design::Bordered,
            CellType::Tetrahedron,
            8,
            Precision::F32,
            max,
        );
        assert_eq!(f32_fits, Design::Bordered);
        // Postprocessing at k = 8 in 3D fits.
        let post = shared_bytes(
            ElementStage::Postprocess,
            Design::BlockShared,
            CellType::Tetrahedron,
            8,
            Precision::F64,
        );
        assert!(post <= max, "{post}");
        for cell in [CellType::Triangle, CellType::Tetrahedron] {
            for k in 1..=MAX_ELEMENT_ORDER {
                for p in [Precision::F32, Precision::F64] {
                    let f = fallback(ElementStage::Condense, Design::BlockShared, cell, k, p, max);
                    assert!(
                        shared_bytes(ElementStage::Condense, f, cell, k, p) <= max,
                        "{cell:?} {k}"
                    );
                    for stage in ElementStage::ALL {
                        let d = default_design(stage, cell, k, p);
                        assert!(compiled(stage, cell, k, d), "{stage} {cell:?} {k} {d}");
                        let t = block_threads(stage, d, cell, k, p);
                        let most = max_threads(stage, d, cell, k, p);
                        assert!((32..=most).contains(&t) && t.is_multiple_of(32), "{t}");
                    }
                }
            }
        }
    }

    #[test]
    fn bordered_shared_bytes_are_the_generated_ones() {
        // The launches' shared memory is what build.rs writes for every bordered kernel into
        // element_instances.cuh (BorderedTuning::shared_bytes, which the kernel checks its
        // layout against): the table's sizes are the cells', its passes and groups the
        // design's.
        let mut rows = 0;
        for cell in [CellType::Triangle, CellType::Tetrahedron] {
            for k in 1..=MAX_ELEMENT_ORDER {
                for p in [Precision::F32, Precision::F64] {
                    let Some(tuning) = bordered_tuning(p.name(), cell_name(cell), k) else {
                        continue;
                    };
                    let s = ElementSizes::new(cell, k);
                    assert_eq!(tuning.sizes(), (s.n, s.nl), "{cell:?} {k}");
                    let group = bordered_output_group(cell, k, p);
                    let staged = match group.staging {
                        OutputStaging::Shared => group.elements,
                        OutputStaging::Direct | OutputStaging::Global => 0,
                    };
                    let pw = bordered_panel_columns(cell, k, p);
                    let values = bordered_shared_values(s.n, s.nl, pw, staged);
                    let launched =
                        shared_bytes(ElementStage::Condense, Design::Bordered, cell, k, p);
                    assert_eq!(launched, values * p.bytes(), "{cell:?} {k} {p:?}");
                    rows += 1;
                }
            }
        }
        assert_eq!(rows, crate::element_instances::BORDERED.len());
    }

    #[test]
    fn names() {
        assert_eq!(
            kernel_name(
                ElementStage::Condense,
                Design::BlockGlobal,
                CellType::Tetrahedron,
                8,
                Precision::F64
            ),
            "condense_block_global_f64_tet8"
        );
        assert_eq!(
            kernel_name(
                ElementStage::Recover,
                Design::Thread,
                CellType::Triangle,
                3,
                Precision::F32
            ),
            "recover_thread_f32_tri3"
        );
        for d in Design::ALL {
            assert_eq!(d.name().parse::<Design>(), Ok(d));
        }
        assert!(compiled(ElementStage::Recover, CellType::Tetrahedron, 8, Design::Thread));
        assert!(!compiled(ElementStage::Condense, CellType::Tetrahedron, 5, Design::Thread));
        assert!(!compiled(ElementStage::Recover, CellType::Triangle, 3, Design::BlockGlobal));
        assert!(!compiled(ElementStage::Condense, CellType::Triangle, 9, Design::BlockShared));
        assert_eq!(
            kernel_name(
                ElementStage::Condense,
                Design::Bordered,
                CellType::Tetrahedron,
                6,
                Precision::F32
            ),
            "condense_bordered_f32_tet6"
        );
        assert!(!compiled(ElementStage::Recover, CellType::Tetrahedron, 3, Design::Bordered));
    }
}

//! Which element kernels are compiled, and how the bordered condensation is tuned per (precision,
//! cell, order): the one source for the Rust side ([`crate::design`]: dispatch and launch sizes)
//! and for the kernels, whose instantiations `build.rs` generates from this file
//! (`element_instances.cuh`, included by `kernels/condense.cu`, `recover.cu`, `postprocess.cu` and
//! `condense_bordered.cu`). Plain data with no dependencies: `build.rs` includes it with `#[path]`.
//! The measurements behind the choices are in benchmarks/history/cuda-element-kernels.md, section
//! 'Design choices of the CUDA element kernels: the figures behind `design.rs`'.

/// Highest order the element kernels are compiled for (both cell types).
pub const MAX_ELEMENT_ORDER: usize = 8;

/// Highest tetrahedron order of the thread design's condensation and postprocessing (their
/// local scratch grows as (n + nl)^2); the thread design's recovery, whose scratch is only
/// O(n + nl), and every order of triangles go up to [`MAX_ELEMENT_ORDER`].
pub const MAX_THREAD_ORDER_TETRAHEDRON: usize = 4;

/// Most threads per block (`__launch_bounds__`) of the element kernels, but for the bordered
/// condensation's own bounds (`BorderedTuning::max_threads`; [`crate::design::max_threads`]).
pub const MAX_BLOCK_THREADS: u32 = 256;

/// Values of slack at the end of the bordered condensation's shared memory: its tensor-core
/// tiles read whole tiles of rows (up to 15 past the last row of the last column), whose extra
/// rows only reach entries that are not written back; the slack keeps those reads inside the
/// allocation.
pub const BORDERED_SLACK: usize = 16;

/// Dimension of the polynomials of degree at most `k` in `d` variables, binomial(k + d, d): the
/// volume basis functions of a `d`-simplex at order `k` (and, with `d - 1`, those of a face).
pub const fn polynomials(d: usize, k: usize) -> usize {
    let mut p = 1;
    let mut i = 1;
    while i <= d {
        p = p * (k + i) / i;
        i += 1;
    }
    p
}

/// Values of one element's outputs of the condensation: K_e (nl x nl), b_e (nl), Z (n x nl)
/// and u0 (n).
pub const fn condensation_outputs(n: usize, nl: usize) -> usize {
    nl * nl + nl + n * nl + n
}

/// Values (of the precision) of dynamic shared memory of the bordered condensation of `n`
/// volume basis functions and `nl` trace unknowns, `pw` columns of W per pass: the first n
/// columns of the bordered matrix of order n + pw (column j holding its rows j..), 1 / L(j, j)
/// (n values), the outputs of `staged` elements where they wait in shared memory (the output
/// group with [`OutputStaging::Shared`], else 0), and [`BORDERED_SLACK`]. The one formula:
/// [`crate::design`] launches the kernels with it, and `build.rs` writes it for each of them
/// into `element_instances.cuh` ([`BorderedTuning::shared_bytes`]), where
/// `kernels/condense_bordered.cu` checks at compile time that its layout ends there.
pub const fn bordered_shared_values(n: usize, nl: usize, pw: usize, staged: usize) -> usize {
    n * (n + pw) - n * (n - 1) / 2 + n + staged * condensation_outputs(n, nl) + BORDERED_SLACK
}

/// Values (of the precision) of dynamic shared memory of the block condensation of `n` volume
/// basis functions and `nl` trace unknowns: L packed (n (n + 1) / 2), 1 / L(j, j) (n) and,
/// with `shared_panel`, the panel W = [P | F] (n (nl + 1)). The one formula, as
/// [`bordered_shared_values`] is for the bordered design: [`crate::design`] launches with it,
/// `build.rs` writes it for every order into `element_instances.cuh`, and `kernels/condense.cu`
/// checks at compile time that its layout ends there (the same for the next two).
pub const fn condense_block_shared_values(n: usize, nl: usize, shared_panel: bool) -> usize {
    n * (n + 1) / 2 + n + if shared_panel { n * (nl + 1) } else { 0 }
}

/// Values of global scratch per block of the weighted kernels (`kernels/weighted.cu`) in `dim`
/// dimensions with `points` coefficient points: the condensation's flux mass matrix (dim n)^2,
/// panel dim n (n + nl), S n^2, W n (nl + 1) and A nl^2, or, if more, the flux recovery's
/// mass matrix and panel, right-hand side (dim n) and values (max(n + nl, dim points)). The
/// kernels check that they got what they use.
// Only the device stages read it (a build without `cuda` has none).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub const fn weighted_scratch_values(dim: usize, n: usize, nl: usize, points: usize) -> usize {
    let dn = dim * n;
    let common = dn * dn + dn * (n + nl);
    let condense = common + n * n + n * (nl + 1) + nl * nl;
    let values = if n + nl > dim * points { n + nl } else { dim * points };
    let flux = common + dn + values;
    if condense > flux {
        condense
    } else {
        flux
    }
}

/// Values of dynamic shared memory of the block recovery: Lambda (nl) and U (n).
pub const fn recover_block_shared_values(n: usize, nl: usize) -> usize {
    nl + n
}

/// Values of dynamic shared memory of the block postprocessing in `dim` dimensions: the
/// bordered matrix of order n' = `n_post` (packed), 1 / L(j, j) (n' - 1) and q (dim n).
pub const fn postprocess_block_shared_values(dim: usize, n: usize, n_post: usize) -> usize {
    n_post * (n_post + 1) / 2 + n_post - 1 + dim * n
}

/// Where the bordered condensation keeps the outputs of a group of elements until it writes
/// them (`BorderedTuning::output_group`; [`crate::design::bordered_output_group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputStaging {
    /// No staging (groups of one element): every value goes straight to its place in the
    /// sector-blocked outputs.
    Direct,
    /// In shared memory, after the bordered matrix.
    Shared,
    /// In the block's own part of a global scratch (written and read back by the same block
    /// while it is still in L2), which costs no shared memory and so no occupancy.
    Global,
}

/// The compiled and launch parameters of one bordered condensation kernel
/// (`kernels/condense_bordered.cu` describes the phases they tune).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BorderedTuning {
    /// The kernel names' precision part: "f32" or "f64".
    pub precision: &'static str,
    /// The kernel names' cell part: "tri" or "tet".
    pub cell: &'static str,
    /// The order.
    pub k: usize,
    /// Threads per block of the launch.
    pub threads: u32,
    /// The launch bound's most threads per block: 512 in f32, whose register tiles are half
    /// the size of f64's, and for the f64 tetrahedra at k = 7, 8; 256 otherwise.
    pub max_threads: u32,
    /// The launch bound's least resident blocks per multiprocessor (0: none), which caps the
    /// registers so that more blocks are resident.
    pub min_blocks: u32,
    /// Columns per step of the right-looking factorisation and back substitution (NB).
    pub step_columns: usize,
    /// Warp groups of the trailing update and the back substitution (RW; one group where
    /// they do not divide the warps).
    pub warp_groups: usize,
    /// Rows per warp task of the CUDA-core Gram product K_e = A - Y Y^T (TR).
    pub gram_rows: usize,
    /// Where the outputs of a group wait ([`BorderedTuning::output_group`]).
    pub staging: OutputStaging,
    /// The factorisation, K_e and the back substitution left-looking on the tensor cores (on
    /// sm_80 and later; the CUDA-core paths elsewhere), where that measured faster; with it,
    /// `step_columns`, `warp_groups` and `gram_rows` set only the CUDA-core paths.
    pub left_looking: bool,
    /// Columns of W = [P | F] per pass (PW), where the whole bordered matrix does not fit a
    /// block's shared memory; None: all nl + 1 in one pass.
    pub panel_columns: Option<usize>,
}

impl BorderedTuning {
    /// Elements per output group: 1 with direct stores, else one 32-byte sector's worth (8 in
    /// f32, 4 in f64), condensed one after the other by the block, their K_e, b_e, Z and u0
    /// staged and then written side by side, so that every store fills whole sectors.
    pub fn output_group(&self) -> usize {
        match self.staging {
            OutputStaging::Direct => 1,
            OutputStaging::Shared | OutputStaging::Global => 32 / self.precision_bytes(),
        }
    }

    /// Bytes of one value.
    pub fn precision_bytes(&self) -> usize {
        if self.precision == "f32" {
            4
        } else {
            8
        }
    }

    /// Volume basis functions n and trace unknowns nl (faces x n_f) of the row's cell at its
    /// order.
    pub fn sizes(&self) -> (usize, usize) {
        let d = match self.cell {
            "tri" => 2,
            "tet" => 3,
            other => panic!("element_instances.rs: unknown cell {other}"),
        };
        (polynomials(d, self.k), (d + 1) * polynomials(d - 1, self.k))
    }

    /// Bytes of dynamic shared memory of the row's kernel ([`bordered_shared_values`]).
    pub fn shared_bytes(&self) -> usize {
        let (n, nl) = self.sizes();
        let pw = self.panel_columns.unwrap_or(nl + 1);
        let staged = match self.staging {
            OutputStaging::Shared => self.output_group(),
            OutputStaging::Direct | OutputStaging::Global => 0,
        };
        bordered_shared_values(n, nl, pw, staged) * self.precision_bytes()
    }
}

/// Triangles in f32 (the design dispatch runs the block design there, the bordered one is
/// compiled for tests and benchmarks): one warp (nl + 1 <= 28 panel columns), direct stores,
/// right-looking.
const TRI_F32: BorderedTuning = BorderedTuning {
    precision: "f32",
    cell: "tri",
    k: 0,
    threads: 32,
    max_threads: 512,
    min_blocks: 0,
    step_columns: 4,
    warp_groups: 1,
    gram_rows: 8,
    staging: OutputStaging::Direct,
    left_looking: false,
    panel_columns: None,
};
const TRI_F64: BorderedTuning =
    BorderedTuning { precision: "f64", max_threads: 256, gram_rows: 4, ..TRI_F32 };
const TET_F32: BorderedTuning = BorderedTuning { cell: "tet", ..TRI_F32 };
const TET_F64: BorderedTuning = BorderedTuning { cell: "tet", ..TRI_F64 };

/// Every bordered condensation kernel, chosen by measurement (condense-bench sweeps; the figures in
/// benchmarks/history/cuda-element-kernels.md, section 'Design choices of the CUDA element kernels:
/// the figures behind `design.rs`'). Tetrahedra: at k = 2 the outputs of a sector's worth of
/// elements are staged in shared memory; at k = 3..5 (and 6 in f32) in a global scratch per block,
/// with the registers capped (`min_blocks`: some spill, and still win) so that more blocks are
/// resident. Left-looking on the tensor cores at f64 k = 5..8 and f32 k = 6..8 (slower at f64
/// k <= 4 and f32 k <= 5). Two warp groups at f32 k = 8 and f64 k = 6 (one group is faster at the
/// neighbouring orders). The f64 tetrahedron at k = 7 holds one element per multiprocessor and runs
/// 16 warps (with 8 the schedulers idled; more threads spill); at k = 8 its whole bordered matrix
/// does not fit a block's 227 KB, so W comes in two passes of 91 columns.
pub const BORDERED: [BorderedTuning; 32] = [
    BorderedTuning { k: 1, ..TRI_F32 },
    BorderedTuning { k: 2, ..TRI_F32 },
    BorderedTuning { k: 3, ..TRI_F32 },
    BorderedTuning { k: 4, ..TRI_F32 },
    BorderedTuning { k: 5, ..TRI_F32 },
    BorderedTuning { k: 6, ..TRI_F32 },
    BorderedTuning { k: 7, ..TRI_F32 },
    BorderedTuning { k: 8, ..TRI_F32 },
    BorderedTuning { k: 1, ..TET_F32 },
    BorderedTuning { k: 2, threads: 128, staging: OutputStaging::Shared, ..TET_F32 },
    BorderedTuning { k: 3, threads: 64, min_blocks: 2, staging: OutputStaging::Global, ..TET_F32 },
    BorderedTuning { k: 4, threads: 64, min_blocks: 2, staging: OutputStaging::Global, ..TET_F32 },
    BorderedTuning { k: 5, threads: 128, min_blocks: 2, staging: OutputStaging::Global, ..TET_F32 },
    BorderedTuning {
        k: 6,
        threads: 256,
        min_blocks: 2,
        staging: OutputStaging::Global,
        left_looking: true,
        ..TET_F32
    },
    BorderedTuning { k: 7, threads: 256, step_columns: 8, left_looking: true, ..TET_F32 },
    BorderedTuning {
        k: 8,
        threads: 512,
        step_columns: 8,
        warp_groups: 2,
        gram_rows: 4,
        left_looking: true,
        ..TET_F32
    },
    BorderedTuning { k: 1, ..TRI_F64 },
    BorderedTuning { k: 2, ..TRI_F64 },
    BorderedTuning { k: 3, ..TRI_F64 },
    BorderedTuning { k: 4, ..TRI_F64 },
    BorderedTuning { k: 5, ..TRI_F64 },
    BorderedTuning { k: 6, ..TRI_F64 },
    BorderedTuning { k: 7, ..TRI_F64 },
    BorderedTuning { k: 8, ..TRI_F64 },
    BorderedTuning { k: 1, ..TET_F64 },
    BorderedTuning { k: 2, threads: 64, staging: OutputStaging::Shared, ..TET_F64 },
    BorderedTuning { k: 3, threads: 64, min_blocks: 3, staging: OutputStaging::Global, ..TET_F64 },
    BorderedTuning { k: 4, threads: 128, min_blocks: 4, staging: OutputStaging::Global, ..TET_F64 },
    BorderedTuning {
        k: 5,
        threads: 256,
        min_blocks: 4,
        gram_rows: 2,
        staging: OutputStaging::Global,
        left_looking: true,
        ..TET_F64
    },
    BorderedTuning { k: 6, threads: 256, warp_groups: 2, left_looking: true, ..TET_F64 },
    BorderedTuning {
        k: 7,
        threads: 512,
        max_threads: 512,
        step_columns: 8,
        left_looking: true,
        ..TET_F64
    },
    BorderedTuning {
        k: 8,
        threads: 512,
        max_threads: 512,
        step_columns: 8,
        left_looking: true,
        panel_columns: Some(91),
        ..TET_F64
    },
];

/// The bordered condensation kernel of (precision, cell, k) ("f32" or "f64", "tri" or "tet"),
/// if compiled.
pub fn bordered_tuning(precision: &str, cell: &str, k: usize) -> Option<&'static BorderedTuning> {
    BORDERED.iter().find(|t| t.precision == precision && t.cell == cell && t.k == k)
}

//! Generated CUDA kernels for constant operators, after GiMMiK's design.
//!
//! A constant operator `A` (m x k, row-major, computed in f64 by the reference element) is
//! applied to a panel of `n` elements: `C = A B` ([`Beta::Zero`]) or `C = A B + C`
//! ([`Beta::One`]). `B` holds k rows of n values with leading dimension `ldb` (the element index
//! is fastest, so the threads of a warp read consecutive elements: coalesced), `C` holds m rows
//! of n values with leading dimension `ldc`. Every kernel has the signature
//!
//! ```text
//! extern "C" __global__ void NAME(int n, const T* __restrict__ b, int ldb,
//!                                 T* __restrict__ c, int ldc)
//! ```
//!
//! and one thread computes one element column (of all rows of `C`, or of one chunk of rows).
//! The built-in kernels read `ldb` and `ldc` from their arguments ([`Strides::Arguments`]);
//! kernels compiled at run time for one panel shape have them compiled in ([`Strides::Fixed`],
//! [`generate_with`]), the arguments then ignored.
//! The generated source is host-independent text: this module has no CUDA types and is built
//! with and without the `cuda` feature, and build.rs includes it to generate the kernels the
//! backend carries ([`built_in_operators`], [`built_in_kernels`]).
//!
//! What the generator does (GiMMiK's design, and its answer to register pressure):
//!
//! - the entries of `A` are embedded as exact hexadecimal float literals ([`hex_f64`],
//!   [`hex_f32`]; an f32 kernel rounds each entry to f32 first);
//! - entries equal to zero (after that rounding; -0.0 included) are skipped, and rows of `B` that
//!   no nonzero uses are never loaded; each used row of `B` is loaded once (per row chunk) into a
//!   register before its products;
//! - rows of `A` that are all zero write 0 ([`Beta::Zero`]) or leave `C` as it is
//!   ([`Beta::One`]);
//! - [`Variant::Unrolled`]: one thread per column, fully unrolled, every used row of `B` live;
//! - [`Variant::UnrolledPairs`]: the same for two adjacent columns per thread, read and written
//!   as `float2`/`double2` (the last column of an odd n alone, in the scalar form);
//! - [`Variant::RowSplit`]: the rows of `A` split into chunks of `rows_per_thread`; a 2D launch
//!   whose `blockIdx.y` picks the chunk; the thread walks the chunk's used columns in order, loads
//!   the value of `B` and updates the chunk's accumulators, so that only `rows_per_thread`
//!   accumulators and one value of `B` are live whatever k is.
//!
//! **Summation order (what makes results bit-stable).** Every output is computed by the
//! operation sequence of [`hdg_core::constant_operator`] in both variants: with [`Beta::Zero`]
//! it starts from the product with the row's first nonzero, with [`Beta::One`] from the old
//! value of `C`, and it adds the row's remaining nonzero products in increasing column order of
//! `A`, each with an explicit fused multiply-add (`fma`/`fmaf`, so the compiler's contraction
//! choices cannot change it). The result is therefore the same bits from run to run, from one
//! variant to the other, on any host that implements `fma` correctly (the host emulation in the
//! tests included), and as the CPU backend's panel loop (`hdg_backend_cpu::constant_operator`).
//!
//! The choice of variant ([`choose`]) is a cost model that must be checked against measurement
//! (`scripts/operator_bench.py`).
use std::fmt::Write as _;

pub use hdg_core::constant_operator::{Beta, ConstOperator, OperatorError};
pub use hdg_core::Precision;

/// Threads per block along the element index (both variants).
pub const BLOCK_X: u32 = 128;

/// Rows of `A` per thread of the dense fallback (`kernels/dense_operator.cu`, for operators that
/// are not built in). With [`DENSE_COLUMNS`] the thread's register tile: `DENSE_ROWS x
/// DENSE_COLUMNS` accumulators, each value of `A` loaded serving `DENSE_COLUMNS` products and each
/// value of `B` `DENSE_ROWS`. Of the tiles tried, 8 x 8 is the one that stays close to the fastest
/// in both precisions (benchmarks/history/constant-operators.md, section 'The dense fallback of the
/// constant operators tiled in registers').
pub const DENSE_ROWS: usize = 8;

/// Element columns per thread of the dense fallback (see [`DENSE_ROWS`]).
pub const DENSE_COLUMNS: usize = 8;

/// Rows of `A` per chunk in the [`Variant::RowSplit`] kernels that [`choose`] picks.
pub const DEFAULT_ROWS_PER_THREAD: usize = 16;

/// The form of the generated kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One thread per element column, all rows, fully unrolled (GiMMiK's basic form).
    Unrolled,
    /// As [`Variant::Unrolled`] for two adjacent element columns per thread, read and written
    /// as `float2`/`double2` (GiMMiK's width-2 forms): half the memory instructions. Needs even
    /// `ldb` and `ldc` and `B`, `C` aligned to two values ([`GeneratedKernel::launchable`]).
    UnrolledPairs,
    /// Rows split into chunks of `rows_per_thread`; `blockIdx.y` picks the chunk.
    RowSplit {
        /// Rows of `A` per thread (at least 1).
        rows_per_thread: usize,
    },
}

impl Variant {
    /// Element columns per thread: 2 for [`Variant::UnrolledPairs`], else 1.
    pub fn columns_per_thread(self) -> u32 {
        match self {
            Variant::UnrolledPairs => 2,
            Variant::Unrolled | Variant::RowSplit { .. } => 1,
        }
    }

    /// "u" or "rsR" (kernel names, file names).
    pub fn tag(self) -> String {
        match self {
            Variant::Unrolled => "u".to_string(),
            Variant::UnrolledPairs => "u2".to_string(),
            Variant::RowSplit { rows_per_thread } => format!("rs{rows_per_thread}"),
        }
    }
}

/// Where a kernel takes the panel's leading dimensions from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strides {
    /// The `ldb` and `ldc` arguments: one kernel for every panel (the built-in kernels).
    Arguments,
    /// Compiled in, for panels of exactly these leading dimensions (the arguments are then
    /// ignored): every load and store is a base register plus an immediate offset where the
    /// run-time strides cost one address computation per row of `B` and `C`, a few percent of the
    /// kernel's time on narrow panels (benchmarks/history/constant-operators.md, section 'Narrow
    /// panels of the f64 36-column bases in one chunk of rows'). For kernels compiled at run time
    /// (NVRTC), per operator and panel shape.
    Fixed {
        /// Leading dimension of `B`.
        ldb: usize,
        /// Leading dimension of `C`.
        ldc: usize,
    },
}

/// Why no kernel could be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodegenError {
    /// The operator itself was refused.
    #[error(transparent)]
    Operator(#[from] OperatorError),
    /// A reference element of the pipeline's operators was refused.
    #[error(transparent)]
    Element(#[from] hdg_core::CoreError),
    /// `rows_per_thread` is zero.
    #[error("rows_per_thread must be at least 1")]
    RowsPerThread,
    /// Fixed leading dimensions of zero or beyond an `int`.
    #[error("fixed leading dimensions {ldb}, {ldc}: each must be between 1 and 2^31 - 1")]
    Strides {
        /// Leading dimension of `B`.
        ldb: usize,
        /// Leading dimension of `C`.
        ldc: usize,
    },
    /// The row chunks do not fit the launch grid's y extent.
    #[error("operator '{name}' ({m} x {k}) is too large for a generated kernel")]
    TooLarge {
        /// Operator name.
        name: String,
        /// Rows.
        m: usize,
        /// Columns.
        k: usize,
    },
}

/// A generated kernel and how to launch it.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratedKernel {
    /// The kernel's (extern "C") name: `hdg_op_<operator>_<f32|f64>_<b0|b1>_<u|rsR>`.
    pub name: String,
    /// CUDA C source of the one kernel (no includes; compiles with NVRTC and nvcc).
    pub source: String,
    /// Precision of `B`, `C` and the embedded constants.
    pub precision: Precision,
    /// Whether the old `C` is added.
    pub beta: Beta,
    /// The kernel's form.
    pub variant: Variant,
    /// Where the leading dimensions come from.
    pub strides: Strides,
    /// Rows of `A`.
    pub m: usize,
    /// Columns of `A`.
    pub k: usize,
    /// Threads per block (x, y).
    pub block: (u32, u32),
    /// Element columns per thread (2 for [`Variant::UnrolledPairs`], else 1).
    pub columns_per_thread: u32,
    /// The grid's y extent (row chunks; 1 for the unrolled forms); x is
    /// `ceil(n / (columns_per_thread block.0))`.
    pub grid_y: u32,
    /// Rows of `A` per thread (m for [`Variant::Unrolled`]).
    pub rows_per_thread: usize,
    /// Nonzero entries embedded (in this precision).
    pub nnz: usize,
    /// Useful floating-point operations per element column: 2 nnz.
    pub flops_per_column: usize,
    /// Loads of `B` per element column, over all row chunks.
    pub b_rows_loaded: usize,
    /// Distinct rows of `B` used (columns of `A` with a nonzero).
    pub b_rows_used: usize,
}

impl GeneratedKernel {
    /// The launch grid for a panel of `n` elements: `(ceil(n / (columns_per_thread block.0)),
    /// grid_y)`, or `None` if it exceeds CUDA's limits (x < 2^31, y < 2^16) or `n` exceeds an
    /// `int`.
    pub fn grid(&self, n: usize) -> Option<(u32, u32)> {
        if n > i32::MAX as usize || self.grid_y > 65_535 {
            return None;
        }
        let x = n.div_ceil(self.columns_per_thread as usize * self.block.0 as usize);
        Some((u32::try_from(x).ok()?.max(1), self.grid_y))
    }

    /// Whether the kernel may run on `B`, `C` at these byte addresses with these leading
    /// dimensions: [`Variant::UnrolledPairs`] reads and writes pairs of values, which must be
    /// aligned to twice the value's size (even leading dimensions, aligned bases).
    pub fn launchable(&self, b_address: u64, ldb: usize, c_address: u64, ldc: usize) -> bool {
        self.columns_per_thread == 1
            || pairs_launchable(self.precision, b_address, ldb, c_address, ldc)
    }
}

/// Whether a pair kernel ([`Variant::UnrolledPairs`]) in `precision` may read `B` and write `C`
/// at these byte addresses and leading dimensions: every pair aligned to twice the value's
/// size (even leading dimensions, aligned bases).
pub fn pairs_launchable(
    precision: Precision,
    b_address: u64,
    ldb: usize,
    c_address: u64,
    ldc: usize,
) -> bool {
    let pair = 2 * match precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    };
    ldb.is_multiple_of(2)
        && ldc.is_multiple_of(2)
        && b_address.is_multiple_of(pair)
        && c_address.is_multiple_of(pair)
}

/// Largest number of nonzeros for which [`choose`] keeps an f64 operator of 33 to 36 used
/// columns unrolled (see there).
pub const UNROLLED_WIDE_MAX_NNZ: usize = 4096;

/// Largest number of nonzeros for which [`choose`] takes [`Variant::UnrolledPairs`] in f32: the
/// break-even of the pair form's doubled code on wide panels (the tri error basis k = 6 of the
/// collapsed rule, 2800 nonzeros, is level with the plain kernel; the tet error basis k = 3, 2760,
/// still gains; benchmarks/history/constant-operators.md, section 'The constant operators timed
/// without the host's launch work').
pub const PAIRS_MAX_NNZ: usize = 2800;

/// Chooses the variant for an operator of m rows, k used columns (rows of `B` loaded) and
/// `nnz` nonzeros in `precision`.
///
/// The rule, a cost model fitted to the measurements of `scripts/operator_bench.py`
/// (benchmarks/history/constant-operators.md, sections 'Constant operators, second slice: f32 pair
/// kernels, the CPU loop against faer, the same bits on both' and 'The constant operators timed
/// without the host's launch work'):
/// - f32 with at most [`PAIRS_MAX_NNZ`] nonzeros and `2 k <= 64`: [`Variant::UnrolledPairs`]
///   (faster than [`Variant::Unrolled`] on wide panels; above [`PAIRS_MAX_NNZ`] nonzeros its
///   doubled code makes it slower). The caller falls back to
///   [`Variant::Unrolled`] where [`GeneratedKernel::launchable`] or [`wide_panel`] says no
///   (both are built in: [`built_in_kernels`]). In f64 the pair form gains nothing over the
///   plain one and is not chosen.
/// - otherwise the unrolled kernel, which keeps every used row of `B` in registers (`w k`
///   32-bit registers, w = 1 for f32, 2 for f64), while `w k <= 64`, or for at most
///   [`DEFAULT_ROWS_PER_THREAD`] rows, or in f64 up to 36 used columns while the code stays
///   small, at most [`UNROLLED_WIDE_MAX_NNZ`] nonzeros (the tri error basis k = 7, 79 x 36,
///   2715 nonzeros, runs faster unrolled than row-split; the tet error basis k = 4, 213 x 35,
///   7165 nonzeros, slower);
/// - otherwise [`Variant::RowSplit`] with [`DEFAULT_ROWS_PER_THREAD`] rows per thread, whose
///   live set is `w (rows_per_thread + 1)` registers whatever k is, at the price of loading `B`
///   once per row chunk.
///
/// This is the choice for wide panels; [`choose_narrow`] says where narrower ones differ.
pub fn choose(m: usize, k: usize, nnz: usize, precision: Precision) -> Variant {
    let w = match precision {
        Precision::F32 => 1,
        Precision::F64 => 2,
    };
    if precision == Precision::F32 && nnz <= PAIRS_MAX_NNZ && 2 * k <= 64 {
        Variant::UnrolledPairs
    } else if w * k <= 64
        || m <= DEFAULT_ROWS_PER_THREAD
        || (precision == Precision::F64 && k <= 36 && nnz <= UNROLLED_WIDE_MAX_NNZ)
    {
        Variant::Unrolled
    } else {
        Variant::RowSplit { rows_per_thread: DEFAULT_ROWS_PER_THREAD }
    }
}

/// The variant for panels narrower than the device's resident threads (where [`wide_panel`]
/// says no): [`choose`]'s, but for two classes of operators whose wide-panel form needs the
/// panel's width to pay.
/// - Where [`choose`] takes [`Variant::UnrolledPairs`]: [`Variant::Unrolled`] (the pairs' n / 2
///   threads would leave the device half empty; see [`wide_panel`]).
/// - The f64 operators that [`choose`] keeps unrolled with more than 32 used columns (`2 k > 64`:
///   the tri bases of P7, 36 columns): [`Variant::RowSplit`] with all m rows in one chunk, GiMMiK's
///   "bstream" form (each value of `B` loaded once and added to the live accumulators of the rows
///   that use it, stored as each row's last column passes). Its live set is the m accumulators
///   rather than the k values of `B` and their k addresses. On narrow panels it is faster than the
///   unrolled kernel and level with GiMMiK's best (its bstream) or ahead of it (the tri error basis
///   k = 7, 79 x 36, and the tri k = 6 postprocessing basis, 67 x 36); on wide panels the unrolled
///   kernel is faster ([`wide_panel`]; benchmarks/history/constant-operators.md, section 'Narrow
///   panels of the f64 36-column bases in one chunk of rows').
pub fn choose_narrow(m: usize, k: usize, nnz: usize, precision: Precision) -> Variant {
    match choose(m, k, nnz, precision) {
        Variant::UnrolledPairs => Variant::Unrolled,
        Variant::Unrolled
            if precision == Precision::F64 && 2 * k > 64 && m > DEFAULT_ROWS_PER_THREAD =>
        {
            Variant::RowSplit { rows_per_thread: m }
        }
        wide => wide,
    }
}

/// Nonzeros above which cuBLAS's GEMM applies an operator faster than our kernels, per
/// precision ([`gemm_wins`]).
///
/// - f64: 4096. From there cuBLAS (FP64 tensor cores) beats the generated kernels on wide
///   panels (tet error basis k = 4, 7165 nonzeros, and its postprocessing basis; tri error
///   basis k = 8, 6480) and is level with them or ahead on narrow ones, and it beats the dense
///   fallback above [`BUILT_IN_MAX_NNZ`].
/// - f32: [`BUILT_IN_MAX_NNZ`]. Every built-in f32 kernel beats cuBLAS (SGEMM on CUDA cores) or
///   is close to it; above, cuBLAS beats the dense fallback on the operators the pipeline
///   applies (tetrahedra from k = 5).
///
/// Measured with `gpu-bench --operators` (benchmarks/history/constant-operators.md, section
/// 'Constant operators through cuBLAS where it is faster, checked path by path').
pub const fn gemm_min_nnz(precision: Precision) -> usize {
    match precision {
        Precision::F64 => 4096,
        Precision::F32 => BUILT_IN_MAX_NNZ,
    }
}

/// Whether cuBLAS's GEMM should apply an operator of m rows, k used columns and `nnz`
/// nonzeros (in `precision`) rather than the generated or dense kernels: more than
/// [`gemm_min_nnz`] nonzeros, or, in f64, an operator whose generated kernel [`choose`] makes
/// [`Variant::RowSplit`], which loads `B` once per chunk of rows: cuBLAS beats it on wide panels
/// and is level on narrow ones (the tri k = 7 postprocessing basis, 79 x 45). Where the library
/// is not loaded the kernels apply it all the same ([`crate::CublasUse`]). cuBLAS sums in its
/// own order, so its results are not the bits of [`hdg_core::constant_operator`]'s sequence
/// (rounding-level differences).
pub fn gemm_wins(m: usize, k: usize, nnz: usize, precision: Precision) -> bool {
    nnz > gemm_min_nnz(precision)
        || (precision == Precision::F64
            && matches!(choose(m, k, nnz, precision), Variant::RowSplit { .. }))
}

/// Whether kernels compiled for a panel's shape (`DeviceOperator::compile_for_panel`, the strides
/// compiled in) replace cuBLAS on a panel of an operator that [`gemm_wins`] gives to cuBLAS: only
/// narrow panels ([`wide_panel`] false) in f32. In f32 the compiled kernels beat cuBLAS on narrow
/// panels (the tet error basis k = 5 and its postprocessing basis, 13485 and 20209 nonzeros), while
/// on wide panels cuBLAS is level or faster; in f64 they win narrowly on two operators of 35
/// columns (the tet postprocessing basis k = 3 and error basis k = 4) but lose on the tri error
/// basis k = 8 (45 columns) and clearly from 56 columns on, where DGEMM's tensor cores win: too few
/// points for a line, so cuBLAS keeps the f64 operators (benchmarks/history/constant-operators.md,
/// section 'Kernels compiled at run time for one panel shape (NVRTC)').
pub fn compiled_beats_gemm(precision: Precision, wide: bool) -> bool {
    !wide && precision == Precision::F32
}

/// Operators with more nonzeros than this are not compiled into the backend: their unrolled
/// kernels would cost minutes of ptxas and megabytes of code, and the pipeline applies them with
/// its loop kernels instead (tetrahedra from k = 5 on, for the error norms).
pub const BUILT_IN_MAX_NNZ: usize = 12_288;

/// The pipeline's operators that build.rs compiles into the backend (`C = A B` in f32 and f64,
/// [`built_in_kernels`]): the error norms' evaluation operators
/// ([`hdg_core::tables::error_evaluation_operators`]) of triangles and tetrahedra at k =
/// 1..=`max_order` whose two operators both have at most [`BUILT_IN_MAX_NNZ`] nonzeros.
pub fn built_in_operators(max_order: usize) -> Result<Vec<ConstOperator>, CodegenError> {
    use hdg_core::tables::error_evaluation_operators;
    use hdg_core::{ReferenceTetrahedron, ReferenceTriangle};
    let mut ops = Vec::new();
    for k in 1..=max_order {
        let elements: [[Box<dyn hdg_core::ReferenceElement>; 2]; 2] = [
            [Box::new(ReferenceTriangle::new(k)?), Box::new(ReferenceTriangle::new(k + 1)?)],
            [Box::new(ReferenceTetrahedron::new(k)?), Box::new(ReferenceTetrahedron::new(k + 1)?)],
        ];
        for [element, post] in elements {
            let pair = error_evaluation_operators(element.as_ref(), post.as_ref())?;
            if pair.iter().all(|op| op.nnz() <= BUILT_IN_MAX_NNZ) {
                ops.extend(pair);
            }
        }
    }
    Ok(ops)
}

/// The kernels of `op` that build.rs compiles into the backend, `C = A B`: per precision (f32,
/// then f64) the variant [`choose`] picks for wide panels, and before it, where it differs, the
/// one [`choose_narrow`] picks for narrow panels ([`wide_panel`]). Where the wide form is the
/// pair form, the narrow one ([`Variant::Unrolled`]) also takes the panels the pairs cannot
/// read: odd leading dimensions or unaligned bases ([`GeneratedKernel::launchable`]).
pub fn built_in_kernels(op: &ConstOperator) -> Result<Vec<GeneratedKernel>, CodegenError> {
    let mut kernels = Vec::new();
    for precision in [Precision::F32, Precision::F64] {
        let [wide, narrow] = choices(op, precision)?;
        if narrow != wide {
            kernels.push(generate(op, precision, Beta::Zero, narrow)?);
        }
        kernels.push(generate(op, precision, Beta::Zero, wide)?);
    }
    Ok(kernels)
}

/// The variants for `op` in `precision`, `[wide panels, narrow panels]`: [`choose`]'s and
/// [`choose_narrow`]'s for its rows, its used columns (rows of `B` loaded) and its nonzeros in
/// that precision.
pub fn choices(op: &ConstOperator, precision: Precision) -> Result<[Variant; 2], CodegenError> {
    let rows = op.rows(precision)?;
    let nnz = rows.iter().map(Vec::len).sum();
    let used = (0..op.k()).filter(|&j| rows.iter().any(|r| r.iter().any(|&(c, _)| c == j)));
    let k_used = used.count();
    Ok([choose(op.m(), k_used, nnz, precision), choose_narrow(op.m(), k_used, nnz, precision)])
}

/// The variants that kernels compiled for panels of leading dimensions `ldb` and `ldc`
/// ([`Strides::Fixed`]) take, `[wide panels, narrow panels]`: [`choices`], except that a pair
/// kernel can never read odd leading dimensions ([`pairs_launchable`]), so there the narrow
/// panels' form takes the wide ones too.
pub fn fixed_choices(
    op: &ConstOperator,
    precision: Precision,
    ldb: usize,
    ldc: usize,
) -> Result<[Variant; 2], CodegenError> {
    let [wide, narrow] = choices(op, precision)?;
    let pairs_readable = ldb.is_multiple_of(2) && ldc.is_multiple_of(2);
    Ok([if wide == Variant::UnrolledPairs && !pairs_readable { narrow } else { wide }, narrow])
}

/// Whether a panel of `n` elements is wide on a device that holds `resident_threads` threads at
/// once (SMs times threads per SM), so that it takes [`choose`]'s variant rather than
/// [`choose_narrow`]'s: from `n >= resident_threads` on. Measured on both classes that differ,
/// on devices of 270336 resident threads:
/// - the pair form's n / 2 threads: the pair kernels of the f32 error bases of up to 1803 nonzeros
///   are slower than the plain ones on panels well below the resident threads, mostly faster from
///   about that width on, and faster on the widest panels
///   (benchmarks/history/constant-operators.md, section 'The constant operators timed without the
///   host's launch work');
/// - the f64 bases of 36 columns, one chunk of rows against unrolled: the chunk is faster on narrow
///   panels, the unrolled kernel from about the resident threads on (on one device already a little
///   below the line), and clearly on the widest panels (benchmarks/history/constant-operators.md,
///   section 'Narrow panels of the f64 36-column bases in one chunk of rows').
pub fn wide_panel(n: usize, resident_threads: usize) -> bool {
    n >= resident_threads
}

/// The kernel name for an operator, precision, beta and variant.
pub fn kernel_name(
    op: &ConstOperator,
    precision: Precision,
    beta: Beta,
    variant: Variant,
) -> String {
    let mut ident: String =
        op.name().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    while ident.contains("__") {
        ident = ident.replace("__", "_");
    }
    let p = match precision {
        Precision::F32 => "f32",
        Precision::F64 => "f64",
    };
    format!("hdg_op_{}_{p}_{}_{}", ident.trim_matches('_'), beta.tag(), variant.tag())
}

/// Generates the kernel of `variant` for `op`, with the leading dimensions as arguments.
pub fn generate(
    op: &ConstOperator,
    precision: Precision,
    beta: Beta,
    variant: Variant,
) -> Result<GeneratedKernel, CodegenError> {
    generate_with(op, precision, beta, variant, Strides::Arguments)
}

/// Generates the kernel of `variant` for `op` with its leading dimensions from `strides`. With
/// [`Strides::Fixed`] the name ends in `_ld<ldb>x<ldc>` and the kernel is only correct for
/// panels of those leading dimensions; the operation sequence, and so the bits, are those of
/// the kernel with [`Strides::Arguments`].
pub fn generate_with(
    op: &ConstOperator,
    precision: Precision,
    beta: Beta,
    variant: Variant,
    strides: Strides,
) -> Result<GeneratedKernel, CodegenError> {
    let strides_code = match strides {
        Strides::Arguments => "ldb, sc = ldc".to_string(),
        Strides::Fixed { ldb, ldc } => {
            let int = 1..=i32::MAX as usize;
            if !int.contains(&ldb) || !int.contains(&ldc) {
                return Err(CodegenError::Strides { ldb, ldc });
            }
            format!("{ldb}, sc = {ldc}")
        }
    };
    let entries = op.entries(precision)?;
    let (m, k) = (op.m(), op.k());
    let rows_per_thread = match variant {
        Variant::Unrolled | Variant::UnrolledPairs => m,
        Variant::RowSplit { rows_per_thread: 0 } => return Err(CodegenError::RowsPerThread),
        Variant::RowSplit { rows_per_thread } => rows_per_thread.min(m),
    };
    let chunks = m.div_ceil(rows_per_thread);
    let grid_y = u32::try_from(chunks).map_err(|_| CodegenError::TooLarge {
        name: op.name().to_string(),
        m,
        k,
    })?;
    let (t, fma, lit): (&str, &str, fn(f64) -> String) = match precision {
        Precision::F64 => ("double", "fma", hex_f64),
        Precision::F32 => ("float", "fmaf", |v| hex_f32(v as f32)),
    };
    let name = match strides {
        Strides::Arguments => kernel_name(op, precision, beta, variant),
        Strides::Fixed { ldb, ldc } => {
            format!("{}_ld{ldb}x{ldc}", kernel_name(op, precision, beta, variant))
        }
    };
    let nnz = entries.iter().filter(|&&v| v != 0.0).count();
    let used = |rows: std::ops::Range<usize>| -> Vec<usize> {
        (0..k).filter(|&j| rows.clone().any(|i| entries[i * k + j] != 0.0)).collect()
    };
    let cols = used(0..m);
    let b_rows_used = cols.len();

    let mut s = String::new();
    let _ = writeln!(
        s,
        "// {} x {} constant operator '{}', {} nonzeros; C = A B{} over a panel of n elements.\n\
         // {}: generated by hdg_backend_cuda::codegen. Each output starts from {} and adds\n\
         // the products of its row's nonzeros in increasing column order with fma.",
        m,
        k,
        op.name().replace('\n', " "),
        nnz,
        if beta == Beta::One { " + C" } else { "" },
        match variant {
            Variant::Unrolled => "one thread per element, all rows".to_string(),
            Variant::UnrolledPairs =>
                "one thread per two adjacent elements (vector loads), all rows".to_string(),
            Variant::RowSplit { .. } =>
                format!("one thread per element and chunk of {rows_per_thread} rows (blockIdx.y)"),
        },
        if beta == Beta::One { "the old C" } else { "its first product" },
    );
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({BLOCK_X}) {name}(int n, const {t}* \
         __restrict__ b, int ldb, {t}* __restrict__ c, int ldc)\n{{"
    );
    let first_column = match variant {
        Variant::UnrolledPairs => "2 * (int)(blockIdx.x * blockDim.x + threadIdx.x)",
        _ => "(int)(blockIdx.x * blockDim.x + threadIdx.x)",
    };
    if let Strides::Fixed { ldb, ldc } = strides {
        let _ = writeln!(s, "    // Leading dimensions compiled in: {ldb} (B), {ldc} (C).");
    }
    let _ = writeln!(
        s,
        "    const int j = {first_column};\n    if (j >= n) return;\n    \
         const long long sb = {strides_code};\n    b += j;\n    c += j;"
    );
    let mut b_rows_loaded = 0;
    let body = Unrolled { entries: &entries, cols: &cols, m, k, beta, t, fma, lit };
    match variant {
        Variant::Unrolled => b_rows_loaded += body.write(&mut s, None, "    "),
        Variant::UnrolledPairs => {
            // Two columns per thread; the last one of an odd n alone, with the scalar form.
            s.push_str("    if (j + 1 < n) {\n");
            b_rows_loaded += body.write(&mut s, Some(&format!("{t}2")), "        ");
            s.push_str("    } else {\n");
            body.write(&mut s, None, "        ");
            s.push_str("    }\n");
        }
        Variant::RowSplit { .. } => {
            s.push_str("    switch (blockIdx.y) {\n");
            for chunk in 0..chunks {
                let rows = chunk * rows_per_thread..((chunk + 1) * rows_per_thread).min(m);
                let _ = writeln!(s, "    case {chunk}: {{");
                let mut started = vec![beta == Beta::One; rows.len()];
                for (r, i) in rows.clone().enumerate() {
                    match beta {
                        Beta::Zero => {
                            let _ = writeln!(s, "        {t} s{r} = 0;");
                        }
                        // A zero row with beta = 1 leaves C alone: not even loaded.
                        Beta::One if row_has_nonzero(&entries, k, i) => {
                            let _ = writeln!(s, "        {t} s{r} = c[{i} * sc];");
                        }
                        Beta::One => {}
                    }
                }
                let cols = used(rows.clone());
                b_rows_loaded += cols.len();
                for &col in &cols {
                    let _ = write!(s, "        {{ const {t} v = b[{col} * sb];");
                    for (r, i) in rows.clone().enumerate() {
                        let a = entries[i * k + col];
                        if a == 0.0 {
                            continue;
                        }
                        if started[r] {
                            let _ = write!(s, " s{r} = {fma}(v, {}, s{r});", lit(a));
                        } else {
                            let _ = write!(s, " s{r} = v * {};", lit(a));
                            started[r] = true;
                        }
                    }
                    s.push_str(" }\n");
                }
                for (r, i) in rows.clone().enumerate() {
                    // A zero row writes s = 0 with beta = 0 and leaves C alone with beta = 1.
                    if beta == Beta::Zero || row_has_nonzero(&entries, k, i) {
                        let _ = writeln!(s, "        c[{i} * sc] = s{r};");
                    }
                }
                s.push_str("        break;\n    }\n");
            }
            s.push_str("    default:\n        break;\n    }\n");
        }
    }
    s.push_str("}\n");
    Ok(GeneratedKernel {
        name,
        source: s,
        precision,
        beta,
        variant,
        strides,
        m,
        k,
        block: (BLOCK_X, 1),
        columns_per_thread: variant.columns_per_thread(),
        grid_y,
        rows_per_thread,
        nnz,
        flops_per_column: 2 * nnz,
        b_rows_loaded,
        b_rows_used,
    })
}

/// The body of the unrolled forms: the used rows of `B` loaded once, then each row of `C` by
/// the operation sequence.
struct Unrolled<'a> {
    entries: &'a [f64],
    /// The used columns of `A` (rows of `B` loaded).
    cols: &'a [usize],
    m: usize,
    k: usize,
    beta: Beta,
    t: &'a str,
    fma: &'a str,
    lit: fn(f64) -> String,
}

impl Unrolled<'_> {
    /// Writes the body for one column, or for two adjacent columns as the pair type `pair`
    /// (every statement once per lane, `.x` then `.y`). Returns the rows of `B` loaded.
    fn write(&self, s: &mut String, pair: Option<&str>, indent: &str) -> usize {
        let Unrolled { entries, cols, m, k, beta, t, fma, lit } = *self;
        let lanes: &[&str] = if pair.is_some() { &[".x", ".y"] } else { &[""] };
        for &col in cols {
            let _ = match pair {
                Some(p) => writeln!(s, "{indent}const {p} b{col} = *(const {p}*)(b + {col} * sb);"),
                None => writeln!(s, "{indent}const {t} b{col} = b[{col} * sb];"),
            };
        }
        for i in 0..m {
            let row = &entries[i * k..(i + 1) * k];
            let nz: Vec<usize> = (0..k).filter(|&j| row[j] != 0.0).collect();
            if nz.is_empty() && beta == Beta::One {
                continue;
            }
            let (decl, store) = match pair {
                Some(p) => (
                    match beta {
                        Beta::One => format!("{p} s = *({p}*)(c + {i} * sc);"),
                        Beta::Zero => format!("{p} s;"),
                    },
                    format!("*({p}*)(c + {i} * sc) = s;"),
                ),
                None => (
                    match beta {
                        Beta::One => format!("{t} s = c[{i} * sc];"),
                        Beta::Zero => format!("{t} s;"),
                    },
                    format!("c[{i} * sc] = s;"),
                ),
            };
            let _ = write!(s, "{indent}{{ {decl}");
            for lane in lanes {
                let rest = match (beta, nz.first()) {
                    (Beta::One, _) => &nz[..],
                    (Beta::Zero, None) => {
                        let _ = write!(s, " s{lane} = 0;");
                        &nz[..]
                    }
                    (Beta::Zero, Some(&first)) => {
                        let _ = write!(s, " s{lane} = b{first}{lane} * {};", lit(row[first]));
                        &nz[1..]
                    }
                };
                for &col in rest {
                    let _ =
                        write!(s, " s{lane} = {fma}(b{col}{lane}, {}, s{lane});", lit(row[col]));
                }
            }
            let _ = writeln!(s, " {store} }}");
        }
        cols.len()
    }
}

fn row_has_nonzero(entries: &[f64], k: usize, i: usize) -> bool {
    entries[i * k..(i + 1) * k].iter().any(|&v| v != 0.0)
}

/// The exact C99 hexadecimal literal of `v`: `0x1.921fb54442d18p+1` for pi, `0x1p-1` for 0.5,
/// `0x0.0000000000001p-1022` for the smallest subnormal, `0x0p+0` and `-0x0p+0` for the zeros,
/// `-` before negative values. Trailing zero digits are dropped. Infinities and NaN have no
/// literal: they are written `INFINITY`/`-INFINITY`/`NAN` (never produced by [`generate`],
/// which refuses them).
pub fn hex_f64(v: f64) -> String {
    let sign = match non_finite_or_sign(v) {
        Ok(sign) => sign,
        Err(literal) => return literal,
    };
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = bits & ((1 << 52) - 1);
    hex_literal(sign, exp, mant, 52, 1023, "")
}

/// The exact C99 hexadecimal literal of an f32, with the `f` suffix: `0x1.921fb6p+1f` for
/// pi rounded to f32 (see [`hex_f64`] for the form).
pub fn hex_f32(v: f32) -> String {
    // f32 -> f64 keeps NaN, the infinities and the sign.
    let sign = match non_finite_or_sign(f64::from(v)) {
        Ok(sign) => sign,
        Err(literal) => return literal,
    };
    let bits = v.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    // 23 fraction bits, shifted left by one to fill 6 hex digits.
    let mant = u64::from(bits & ((1 << 23) - 1)) << 1;
    hex_literal(sign, exp, mant, 24, 127, "f")
}

/// The sign prefix of a finite `v`, or the whole spelling of a NaN or an infinity.
fn non_finite_or_sign(v: f64) -> Result<&'static str, String> {
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v.is_nan() {
        Err("NAN".into())
    } else if v.is_infinite() {
        Err(format!("{sign}INFINITY"))
    } else {
        Ok(sign)
    }
}

/// `mant` holds `digits_bits` (a multiple of 4) fraction bits; `exp` is the biased exponent.
fn hex_literal(
    sign: &str,
    exp: i32,
    mant: u64,
    digits_bits: u32,
    bias: i32,
    suffix: &str,
) -> String {
    let (lead, e) = if exp == 0 {
        if mant == 0 {
            return format!("{sign}0x0p+0{suffix}");
        }
        (0, 1 - bias)
    } else {
        (1, exp - bias)
    };
    let mut frac = format!("{:0width$x}", mant, width = (digits_bits / 4) as usize);
    while frac.ends_with('0') {
        frac.pop();
    }
    let dot = if frac.is_empty() { String::new() } else { format!(".{frac}") };
    let esign = if e >= 0 { "+" } else { "-" };
    format!("{sign}0x{lead}{dot}p{esign}{}{suffix}", e.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is compiled in: both error evaluation operators of every triangle order and of the
    /// tetrahedra up to k = 4 (tetrahedra at k = 5 exceed the limit), each with one kernel per
    /// precision, and before it, where the narrow panels take another: in f32 the plain kernel
    /// before the small ones' pair kernel, in f64 one chunk of rows before the unrolled kernel
    /// of the 36-column bases.
    #[test]
    fn built_in_operators_and_their_kernels() {
        let ops = built_in_operators(crate::MAX_ELEMENT_ORDER).unwrap();
        let names: Vec<&str> = ops.iter().map(|op| op.name()).collect();
        let mut expected = Vec::new();
        for k in 1..=crate::MAX_ELEMENT_ORDER {
            let cells: &[&str] = if k <= 4 { &["tri", "tet"] } else { &["tri"] };
            for cell in cells {
                expected.push(format!("{cell}-k{k}-error-basis"));
                expected.push(format!("{cell}-k{k}-error-basis-post"));
            }
        }
        assert_eq!(names, expected);
        for op in &ops {
            assert!(op.nnz() <= BUILT_IN_MAX_NNZ, "{}", op.name());
            let kernels = built_in_kernels(op).unwrap();
            for precision in [Precision::F32, Precision::F64] {
                let of: Vec<&GeneratedKernel> =
                    kernels.iter().filter(|g| g.precision == precision).collect();
                let variants: Vec<Variant> = of.iter().map(|g| g.variant).collect();
                let pairs = variants.contains(&Variant::UnrolledPairs);
                let one_chunk = Variant::RowSplit { rows_per_thread: op.m() };
                if pairs {
                    assert_eq!(variants, [Variant::Unrolled, Variant::UnrolledPairs]);
                } else if variants.len() == 2 {
                    assert_eq!(variants, [one_chunk, Variant::Unrolled], "{}", op.name());
                    assert_eq!(
                        (precision, of[0].grid_y, of[1].b_rows_used),
                        (Precision::F64, 1, 36)
                    );
                } else {
                    assert_eq!(variants.len(), 1, "{}", op.name());
                }
                // The one-chunk narrow form: the tri bases of P7 in f64, and only they.
                let p7 = op.k() == 36 && op.name().starts_with("tri");
                assert_eq!(variants.contains(&one_chunk), p7 && precision == Precision::F64);
                // The pair forms are f32's, for the small operators.
                let small = op.nnz() <= 600 && op.k() <= 32;
                if precision == Precision::F64 || op.nnz() > PAIRS_MAX_NNZ {
                    assert!(!pairs, "{} {precision:?}", op.name());
                } else if small {
                    assert!(pairs, "{} {precision:?}", op.name());
                }
                assert!(of.iter().all(|g| g.beta == Beta::Zero && (g.m, g.k) == (op.m(), op.k())));
            }
        }
    }

    #[test]
    fn hex_literals_of_known_values() {
        assert_eq!(hex_f64(std::f64::consts::PI), "0x1.921fb54442d18p+1");
        assert_eq!(hex_f64(0.5), "0x1p-1");
        assert_eq!(hex_f64(-3.0), "-0x1.8p+1");
        assert_eq!(hex_f64(0.0), "0x0p+0");
        assert_eq!(hex_f64(-0.0), "-0x0p+0");
        assert_eq!(hex_f64(f64::from_bits(1)), "0x0.0000000000001p-1022");
        assert_eq!(hex_f64(f64::MAX), "0x1.fffffffffffffp+1023");
        assert_eq!(hex_f32(std::f32::consts::PI), "0x1.921fb6p+1f");
        assert_eq!(hex_f32(f32::from_bits(1)), "0x0.000002p-126f");
        assert_eq!(hex_f32(1.0), "0x1p+0f");
    }

    #[test]
    fn bad_operators_are_refused() {
        // The operator's own checks are hdg_core::constant_operator's (tested there); what the
        // generator adds: an f32 overflow, and zero rows per thread.
        let big = ConstOperator::new("big", 1, 1, vec![1e300]).unwrap();
        assert!(matches!(
            generate(&big, Precision::F32, Beta::Zero, Variant::Unrolled),
            Err(CodegenError::Operator(OperatorError::NotFinite { precision: Precision::F32, .. }))
        ));
        let one = ConstOperator::new("one", 1, 1, vec![1.0]).unwrap();
        assert_eq!(
            generate(&one, Precision::F64, Beta::Zero, Variant::RowSplit { rows_per_thread: 0 }),
            Err(CodegenError::RowsPerThread)
        );
    }

    /// Fixed strides change the stride line and the name, nothing else: the operation
    /// sequence (so the bits) is that of the kernel with strides as arguments.
    #[test]
    fn fixed_strides_are_compiled_in() {
        let op = ConstOperator::new("t", 3, 2, vec![1.0, 0.0, 0.5, -2.0, 0.0, 0.25]).unwrap();
        for variant in
            [Variant::Unrolled, Variant::UnrolledPairs, Variant::RowSplit { rows_per_thread: 2 }]
        {
            let free = generate(&op, Precision::F64, Beta::Zero, variant).unwrap();
            let fixed = Strides::Fixed { ldb: 1002, ldc: 1_000_004 };
            let g = generate_with(&op, Precision::F64, Beta::Zero, variant, fixed).unwrap();
            assert_eq!(g.name, format!("{}_ld1002x1000004", free.name));
            assert_eq!(g.strides, fixed);
            assert!(g.source.contains("const long long sb = 1002, sc = 1000004;"), "{}", g.source);
            let body = |k: &GeneratedKernel| {
                k.source
                    .lines()
                    .filter(|l| !l.contains("sb =") && !l.contains("__global__"))
                    .filter(|l| !l.contains("compiled in"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            };
            assert_eq!(body(&g), body(&free), "{variant:?}");
            assert_eq!(
                (g.grid_y, g.nnz, g.b_rows_loaded),
                (free.grid_y, free.nnz, free.b_rows_loaded)
            );
        }
        for (ldb, ldc) in [(0, 5), (5, 0), (1 << 31, 5)] {
            let fixed = Strides::Fixed { ldb, ldc };
            assert_eq!(
                generate_with(&op, Precision::F32, Beta::Zero, Variant::Unrolled, fixed),
                Err(CodegenError::Strides { ldb, ldc })
            );
        }
    }

    #[test]
    fn fixed_choices_take_pairs_only_on_even_strides() {
        let op = ConstOperator::new("t", 3, 2, vec![1.0, 0.0, 0.5, -2.0, 0.0, 0.25]).unwrap();
        let [wide, narrow] = choices(&op, Precision::F32).unwrap();
        assert_eq!((wide, narrow), (Variant::UnrolledPairs, Variant::Unrolled));
        assert_eq!(fixed_choices(&op, Precision::F32, 4, 6).unwrap(), [wide, narrow]);
        for (ldb, ldc) in [(5, 6), (4, 7)] {
            assert_eq!(fixed_choices(&op, Precision::F32, ldb, ldc).unwrap(), [narrow, narrow]);
        }
        let f64_choices = choices(&op, Precision::F64).unwrap();
        assert_eq!(fixed_choices(&op, Precision::F64, 5, 7).unwrap(), f64_choices);
    }

    #[test]
    fn choice_follows_the_documented_rule() {
        let split = Variant::RowSplit { rows_per_thread: 16 };
        let pairs = Variant::UnrolledPairs;
        assert_eq!(choose(4, 3, 12, Precision::F64), Variant::Unrolled);
        assert_eq!(choose(4, 3, 12, Precision::F32), pairs);
        // The measured cases: tetrahedron error basis k = 3, triangle error basis k = 7, 8.
        assert_eq!(choose(343, 20, 6692, Precision::F64), Variant::Unrolled);
        assert_eq!(choose(343, 20, 6692, Precision::F32), Variant::Unrolled);
        assert_eq!(choose(121, 36, 4212, Precision::F32), Variant::Unrolled);
        assert_eq!(choose(121, 36, 4212, Precision::F64), split);
        assert_eq!(choose(144, 45, 6480, Precision::F64), split);
        // The symmetric rules' shapes: tri error basis k = 7 unrolled (36 columns, 2715
        // nonzeros), tet error basis k = 4 and the tri k = 7 postprocessing basis split.
        assert_eq!(choose(79, 36, 2715, Precision::F64), Variant::Unrolled);
        assert_eq!(choose(79, 37, 2844, Precision::F64), split);
        assert_eq!(choose(213, 35, 7165, Precision::F64), split);
        assert_eq!(choose(79, 45, 3394, Precision::F64), split);
        // Tetrahedron face trace k = 6 (84 x 28) and k = 7 (120 x 36) in f32.
        assert_eq!(choose(84, 28, 2352, Precision::F32), pairs);
        assert_eq!(choose(120, 36, 4320, Precision::F32), Variant::Unrolled);
        assert_eq!(choose(40, 32, 1280, Precision::F32), pairs);
        assert_eq!(choose(40, 33, 1320, Precision::F32), Variant::Unrolled);
        assert_eq!(choose(40, 60, 2400, Precision::F32), Variant::Unrolled);
        assert_eq!(choose(40, 60, 2401, Precision::F64), split);
        assert_eq!(choose(40, 65, 2600, Precision::F32), split);
        assert_eq!(choose(16, 500, 8000, Precision::F64), Variant::Unrolled);
        // Up to 2800 nonzeros in pairs: the tet error basis k = 3 (145 x 20, 2760) is.
        assert_eq!(choose(145, 20, 2760, Precision::F32), pairs);
        assert_eq!(choose(100, 28, 2800, Precision::F32), pairs);
        assert_eq!(choose(100, 29, 2801, Precision::F32), Variant::Unrolled);
    }

    #[test]
    fn narrow_choice_follows_the_documented_rule() {
        // The pair forms' narrow panels take the plain kernel.
        assert_eq!(choose_narrow(145, 20, 2760, Precision::F32), Variant::Unrolled);
        assert_eq!(choose_narrow(4, 3, 12, Precision::F32), Variant::Unrolled);
        // The f64 bases kept unrolled with 33 to 36 columns: one chunk of all rows.
        assert_eq!(
            choose_narrow(79, 36, 2715, Precision::F64),
            Variant::RowSplit { rows_per_thread: 79 }
        );
        assert_eq!(
            choose_narrow(67, 33, 2211, Precision::F64),
            Variant::RowSplit { rows_per_thread: 67 }
        );
        // Elsewhere the wide panels' choice: 32 columns, at most 16 rows, f32, row-split.
        for (m, k, nnz, precision) in [
            (79, 32, 2528, Precision::F64),
            (16, 36, 576, Precision::F64),
            (79, 36, 2715, Precision::F32),
            (79, 37, 2844, Precision::F64),
            (213, 35, 7165, Precision::F64),
            (343, 20, 6692, Precision::F32),
        ] {
            assert_eq!(choose_narrow(m, k, nnz, precision), choose(m, k, nnz, precision));
        }
        assert!(!wide_panel(270_335, 270_336));
        assert!(wide_panel(270_336, 270_336));
    }
}

//! The constant-operator kernels the backend carries: build.rs generates them with
//! [`crate::codegen`] from the pipeline's operators (`codegen::built_in_operators`: today the
//! error norms' evaluation operators), compiles them as the `operators` module and writes the
//! table this module finds them in. A stage asks for an operator by name with its matrix
//! ([`PanelKernel::for_operator`]) and applies it to panels of elements
//! ([`PanelKernel::apply`]), on one of three paths ([`OperatorPath`]):
//!
//! - cuBLAS's GEMM for the large operators where it measured faster (`codegen::gemm_wins`),
//!   when the library is loaded (`crate::cublas`; who loads it: [`crate::CublasUse`]);
//! - else the operator's built-in generated kernel where there is one;
//! - else the dense fallback (`kernels/dense_operator.cu`: the matrix staged in device memory,
//!   one kernel for every operator), for operators with too many nonzeros to be built in
//!   (`codegen::BUILT_IN_MAX_NNZ`).
//!
//! The generated and dense kernels give the bits of `hdg_core::constant_operator`'s operation
//! sequence (the CPU's); cuBLAS sums in its own order.
//!
//! [`DeviceOperator`] is the same machinery as a public type, for tests and programs that apply
//! an operator to panels of their own. Such a program may also ask for the operator's kernels
//! compiled at run time for one panel shape ([`DeviceOperator::compile_for_panel`]: NVRTC,
//! `codegen::Strides::Fixed`), which then apply it to panels of those leading dimensions: the
//! built-in kernels' operation sequence (the same bits) with the strides compiled in.
use cust::memory::DeviceBuffer;
use hdg_core::{CoreError, Precision, Result};

use crate::codegen::{
    compiled_beats_gemm, fixed_choices, gemm_wins, generate_with, pairs_launchable, wide_panel,
    Beta, ConstOperator, Strides, Variant, BLOCK_X, DENSE_COLUMNS, DENSE_ROWS,
};
use crate::device::{address, arg, CudaBackend, DeviceReal};
use crate::settings::CublasUse;
use crate::vector::DeviceVector;

/// One compiled kernel of a built-in operator: `C = A B` (`codegen::Beta::Zero`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BuiltInKernel {
    /// The operator's name (`ConstOperator::name`).
    pub(crate) operator: &'static str,
    pub(crate) precision: Precision,
    /// The kernel's name in the `operators` module.
    pub(crate) name: &'static str,
    /// Rows and columns of `A`.
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) variant: Variant,
    /// The launch grid's y extent (row chunks of `Variant::RowSplit`, else 1).
    pub(crate) grid_y: u32,
}

/// Every built-in kernel, in build.rs's order (`codegen::built_in_kernels`: per operator and
/// precision the narrow panels' kernel where it differs, then the wide panels' one).
const BUILT_IN: &[BuiltInKernel] = &include!(concat!(env!("OUT_DIR"), "/operators_table.rs"));

/// A built-in operator in one precision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BuiltInOperator {
    /// `codegen::choose`'s kernel: wide panels.
    wide: &'static BuiltInKernel,
    /// `codegen::choose_narrow`'s kernel where it differs: narrow panels, and the panels that
    /// a pair kernel cannot read.
    narrow: Option<&'static BuiltInKernel>,
}

impl BuiltInOperator {
    /// The operator `name` in T's precision, if it is built in (and its kernels are what
    /// `codegen::built_in_kernels` makes: a pair kernel always has a plain one before it).
    pub(crate) fn find<T: DeviceReal>(name: &str) -> Option<BuiltInOperator> {
        let mut kernels =
            BUILT_IN.iter().filter(|g| g.operator == name && g.precision == T::PRECISION);
        let first = kernels.next()?;
        let (wide, narrow) = match kernels.next() {
            Some(second) => (second, Some(first)),
            None => (first, None),
        };
        let plain = narrow.is_some_and(|g| g.variant == Variant::Unrolled);
        (wide.variant != Variant::UnrolledPairs || plain)
            .then_some(BuiltInOperator { wide, narrow })
    }

    /// Rows and columns of `A`.
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.wide.m, self.wide.k)
    }

    /// The kernel for a panel of `n` elements with `B` and `C` at these addresses: the wide
    /// panels' kernel where the panel is wide (`codegen::wide_panel`) and, for a pair kernel,
    /// aligned (`codegen::pairs_launchable`), else the narrow panels' one.
    fn kernel_for(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        ldb: usize,
        c: u64,
        ldc: usize,
    ) -> &'static BuiltInKernel {
        match self.narrow {
            Some(narrow)
                if !takes_wide(
                    backend,
                    self.wide.variant,
                    self.wide.precision,
                    n,
                    b,
                    ldb,
                    c,
                    ldc,
                ) =>
            {
                narrow
            }
            _ => self.wide,
        }
    }

    /// Queues `C = A B` (see [`PanelKernel::apply`]).
    ///
    /// # Safety
    /// As [`PanelKernel::apply`].
    unsafe fn apply(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        ldb: usize,
        c: u64,
        ldc: usize,
    ) -> Result<()> {
        let kernel = self.kernel_for(backend, n, b, ldb, c, ldc);
        // SAFETY: forwarded to the caller; kernel_for gives a pair kernel only an aligned panel
        // of even leading dimensions.
        unsafe {
            launch_generated(backend, kernel.name, kernel.variant, kernel.grid_y, n, b, ldb, c, ldc)
        }
    }
}

/// Whether a panel of `n` elements with `B` and `C` at these addresses takes the wide panels'
/// kernel, of form `wide`, rather than the narrow panels' one: where the panel is wide
/// (`codegen::wide_panel`) and, for a pair kernel, aligned (`codegen::pairs_launchable`).
#[allow(clippy::too_many_arguments)]
fn takes_wide(
    backend: &CudaBackend,
    wide: Variant,
    precision: Precision,
    n: usize,
    b: u64,
    ldb: usize,
    c: u64,
    ldc: usize,
) -> bool {
    wide_panel(n, backend.gpu.resident_threads)
        && (wide != Variant::UnrolledPairs || pairs_launchable(precision, b, ldb, c, ldc))
}

/// Queues the generated kernel `name` (of form `variant`, `grid_y` row chunks) over a panel.
///
/// # Safety
/// As [`PanelKernel::apply`]; a pair kernel ([`Variant::UnrolledPairs`]) only on a panel that
/// `codegen::pairs_launchable` accepts, a kernel with fixed strides only on a panel of its
/// leading dimensions.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_generated(
    backend: &CudaBackend,
    name: &str,
    variant: Variant,
    grid_y: u32,
    n: usize,
    b: u64,
    ldb: usize,
    c: u64,
    ldc: usize,
) -> Result<()> {
    let columns_per_thread = variant.columns_per_thread() as usize;
    let Some((n32, ldb32, ldc32, grid_x)) =
        panel(name, n, ldb, ldc, BLOCK_X as usize * columns_per_thread, 1)?
    else {
        return Ok(());
    };
    // SAFETY: NAME(int n, const T* b, int ldb, T* c, int ldc) (codegen's signature) with the
    // caller's panel, BLOCK_X threads (the kernels' launch bound) and the kernel's own grid
    // (columns_per_thread element columns per thread, the last column of an odd n alone in a
    // pair kernel; the caller's guarantees on pairs and strides).
    unsafe {
        backend.gpu.launch_shaped(
            name,
            (grid_x, grid_y),
            BLOCK_X,
            &[arg(&n32), arg(&b), arg(&ldb32), arg(&c), arg(&ldc32)],
        )
    }
}

/// A kernel compiled at run time for one panel shape (`codegen::Strides::Fixed`).
#[derive(Clone, Debug)]
struct CompiledKernel {
    /// The key it is registered under with the backend's kernels (`Gpu::add_compiled`): its
    /// name and a hash of its source, so that two operators given the same name never share a
    /// kernel unless their entries are the same.
    name: String,
    variant: Variant,
    grid_y: u32,
}

/// An operator's kernels compiled for panels of leading dimensions `ldb` and `ldc`: the forms
/// of the built-in kernels (`codegen::choices`), the narrow one where it differs.
#[derive(Clone, Debug)]
struct CompiledPanel {
    ldb: usize,
    ldc: usize,
    wide: CompiledKernel,
    narrow: Option<CompiledKernel>,
}

impl CompiledPanel {
    /// The kernel for a panel of `n` elements (as `BuiltInOperator::kernel_for`).
    fn kernel_for<T: DeviceReal>(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        c: u64,
    ) -> &CompiledKernel {
        match &self.narrow {
            Some(narrow)
                if !takes_wide(
                    backend,
                    self.wide.variant,
                    T::PRECISION,
                    n,
                    b,
                    self.ldb,
                    c,
                    self.ldc,
                ) =>
            {
                narrow
            }
            _ => &self.wide,
        }
    }
}

/// The launch sizes of a panel of `n` elements: n, ldb and ldc as ints and the grid's x extent,
/// `row_chunks` blocks per `columns_per_block` element columns; None for an empty panel; an
/// error for leading dimensions below n or sizes beyond an int.
fn panel(
    name: &str,
    n: usize,
    ldb: usize,
    ldc: usize,
    columns_per_block: usize,
    row_chunks: u32,
) -> Result<Option<(i32, i32, i32, u32)>> {
    if n == 0 {
        return Ok(None);
    }
    if ldb < n || ldc < n {
        return Err(CoreError::InvalidParameter {
            name: "panel",
            reason: format!("{name}: leading dimensions {ldb}, {ldc} below {n} elements"),
        });
    }
    let too_large = || CoreError::InvalidParameter {
        name: "panel",
        reason: format!("{n} elements (leading dimensions {ldb}, {ldc}): too many for {name}"),
    };
    let int = |v: usize| i32::try_from(v).map_err(|_| too_large());
    let blocks = n
        .div_ceil(columns_per_block)
        .checked_mul(row_chunks as usize)
        .and_then(|b| i32::try_from(b).ok())
        .ok_or_else(too_large)? as u32;
    Ok(Some((int(n)?, int(ldb)?, int(ldc)?, blocks)))
}

/// An operator that is not built in, for the dense fallback: `A` transposed and padded on the
/// device (`at[j * m_pad + i] = A[i][j]`, zero rows up to a multiple of [`DENSE_ROWS`]).
pub(crate) struct DenseOperator<T: DeviceReal> {
    m: usize,
    m_pad: usize,
    k: usize,
    at: DeviceBuffer<T>,
}

impl<T: DeviceReal> DenseOperator<T> {
    /// Stages `a` (m x k, row-major, in T) for the kernel.
    fn upload(backend: &CudaBackend, m: usize, k: usize, a: &[T]) -> Result<Self> {
        let m_pad = m.div_ceil(DENSE_ROWS) * DENSE_ROWS;
        let mut at = vec![T::zero(); k * m_pad];
        for (i, row) in a.chunks_exact(k).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                at[j * m_pad + i] = v;
            }
        }
        Ok(DenseOperator { m, m_pad, k, at: backend.gpu.upload(&at)? })
    }

    /// Queues `C = A B` (see [`PanelKernel::apply`]).
    ///
    /// # Safety
    /// As [`PanelKernel::apply`].
    unsafe fn apply(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        ldb: usize,
        c: u64,
        ldc: usize,
    ) -> Result<()> {
        let name = format!("dense_operator_{}", T::SUFFIX);
        let too_large =
            || CoreError::Backend(format!("{name}: a {} x {} operator", self.m, self.k));
        let row_chunks = u32::try_from(self.m_pad / DENSE_ROWS).map_err(|_| too_large())?;
        let columns_per_block = BLOCK_X as usize * DENSE_COLUMNS;
        let Some((n32, ldb32, ldc32, blocks)) =
            panel(&name, n, ldb, ldc, columns_per_block, row_chunks)?
        else {
            return Ok(());
        };
        let (m, m_pad, k) = (
            i32::try_from(self.m).map_err(|_| too_large())?,
            i32::try_from(self.m_pad).map_err(|_| too_large())?,
            i32::try_from(self.k).map_err(|_| too_large())?,
        );
        let at = address(&self.at);
        // SAFETY: dense_operator_T(int m, int m_pad, int k, const T* at, int n, const T* b, int
        // ldb, T* c, int ldc): at holds k * m_pad values (upload), the caller's panel; BLOCK_X
        // threads (the kernel's launch bound, OPERATOR_BLOCK_X) of DENSE_COLUMNS columns each
        // and m_pad / DENSE_ROWS row chunks per column block (the kernel derives both from
        // blockIdx.x).
        unsafe {
            backend.gpu.launch_shaped(
                &name,
                (blocks, 1),
                BLOCK_X,
                &[
                    arg(&m),
                    arg(&m_pad),
                    arg(&k),
                    arg(&at),
                    arg(&n32),
                    arg(&b),
                    arg(&ldb32),
                    arg(&c),
                    arg(&ldc32),
                ],
            )
        }
    }
}

/// An operator for cuBLAS's GEMM: `A` (m x k, row-major) on the device.
pub(crate) struct GemmOperator<T: DeviceReal> {
    m: usize,
    k: usize,
    a: DeviceBuffer<T>,
}

impl<T: DeviceReal> GemmOperator<T> {
    /// Queues `C = A B` (see [`PanelKernel::apply`]) with the backend's cuBLAS handle.
    ///
    /// # Safety
    /// As [`PanelKernel::apply`].
    unsafe fn apply(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        ldb: usize,
        c: u64,
        ldc: usize,
    ) -> Result<()> {
        let Some((n32, ldb32, ldc32, _)) = panel("cuBLAS GEMM", n, ldb, ldc, 1, 1)? else {
            return Ok(());
        };
        let too_large = || CoreError::Backend(format!("a {} x {} operator", self.m, self.k));
        let m = i32::try_from(self.m).map_err(|_| too_large())?;
        let k = i32::try_from(self.k).map_err(|_| too_large())?;
        let cublas = backend.cublas()?;
        backend.gpu.bind()?;
        // SAFETY: the context is current (bind); `a` holds m k values of T (upload), b and c
        // the caller's panel (k rows of ldb >= n, m rows of ldc >= n, c overlapping neither,
        // untouched by the host until the stream is synchronised), sizes checked to fit an int.
        unsafe { cublas.gemm(T::PRECISION, (m, k, n32), address(&self.a), b, ldb32, c, ldc32) }
    }
}

/// How a stage applies one constant operator to panels of elements.
pub(crate) enum PanelKernel<T: DeviceReal> {
    /// Its built-in generated kernel.
    BuiltIn(BuiltInOperator),
    /// The dense fallback.
    Dense(DenseOperator<T>),
    /// cuBLAS's GEMM.
    Gemm(GemmOperator<T>),
}

/// Which code applies a constant operator on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperatorPath {
    /// The operator's built-in generated kernel (`codegen`: constants in the code, zeros
    /// skipped).
    Generated,
    /// The dense fallback kernel (the matrix in device memory).
    Dense,
    /// cuBLAS's GEMM (`crate::CublasUse`).
    Cublas,
    /// The generated kernels compiled at run time for the panel's leading dimensions
    /// ([`DeviceOperator::compile_for_panel`]).
    Compiled,
}

impl std::fmt::Display for OperatorPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OperatorPath::Generated => "generated",
            OperatorPath::Dense => "dense",
            OperatorPath::Cublas => "cuBLAS",
            OperatorPath::Compiled => "compiled",
        })
    }
}

impl<T: DeviceReal> PanelKernel<T> {
    /// The operator `name` with matrix `a` (m x k, row-major, in T): cuBLAS where the settings
    /// ([`CublasUse`]) and `codegen::gemm_wins` say so and it is loaded (or loads), else its
    /// built-in kernel where there is one, else the dense fallback with `a`. An error where the
    /// built-in kernel was generated for another shape (a build out of step with the core), or
    /// where cuBLAS is forced ([`CublasUse::Always`]) and does not load.
    pub(crate) fn for_operator(
        backend: &CudaBackend,
        name: &str,
        m: usize,
        k: usize,
        a: &[T],
    ) -> Result<Self> {
        if a.len() != m * k || m == 0 || k == 0 {
            return Err(CoreError::InvalidParameter {
                name: "operator",
                reason: format!("{name}: {} values for a {m} x {k} matrix", a.len()),
            });
        }
        let nnz = a.iter().filter(|&&v| v != T::zero()).count();
        let used = (0..k).filter(|&j| a.iter().skip(j).step_by(k).any(|&v| v != T::zero()));
        let wins = || gemm_wins(m, used.count(), nnz, T::PRECISION);
        let gemm = match backend.settings().cublas {
            CublasUse::Never => false,
            CublasUse::Always => true,
            CublasUse::Load => wins(),
            CublasUse::Auto => backend.cublas_loaded() && wins(),
        };
        if gemm {
            match backend.cublas() {
                Ok(_) => {
                    let a = backend.gpu.upload(a)?;
                    return Ok(PanelKernel::Gemm(GemmOperator { m, k, a }));
                }
                Err(e) if backend.settings().cublas == CublasUse::Always => return Err(e),
                // Load: the kernels apply it all the same (the path says which).
                Err(_) => {}
            }
        }
        match BuiltInOperator::find::<T>(name) {
            Some(op) if op.shape() == (m, k) => Ok(PanelKernel::BuiltIn(op)),
            Some(op) => Err(CoreError::Backend(format!(
                "the built-in kernel of {name} is {:?}, the operator {m} x {k}: rebuild the CUDA \
                 backend",
                op.shape()
            ))),
            None => Ok(PanelKernel::Dense(DenseOperator::upload(backend, m, k, a)?)),
        }
    }

    /// Which code applies it.
    pub(crate) fn path(&self) -> OperatorPath {
        match self {
            PanelKernel::BuiltIn(_) => OperatorPath::Generated,
            PanelKernel::Dense(_) => OperatorPath::Dense,
            PanelKernel::Gemm(_) => OperatorPath::Cublas,
        }
    }

    /// Queues `C = A B` over `n` elements: `B` at device address `b`, k rows of leading
    /// dimension `ldb`; `C` at `c`, m rows of leading dimension `ldc` (codegen's layout: the
    /// element index fastest).
    ///
    /// # Safety
    /// `b` must address k rows of `ldb >= n` values of T and `c` m rows of `ldc >= n` values of
    /// T in live allocations of the backend's context, and `c` must not overlap `b` nor be used
    /// by the host before the stream is synchronised.
    pub(crate) unsafe fn apply(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: u64,
        ldb: usize,
        c: u64,
        ldc: usize,
    ) -> Result<()> {
        // SAFETY: forwarded to the caller.
        unsafe {
            match self {
                PanelKernel::BuiltIn(op) => op.apply(backend, n, b, ldb, c, ldc),
                PanelKernel::Dense(op) => op.apply(backend, n, b, ldb, c, ldc),
                PanelKernel::Gemm(op) => op.apply(backend, n, b, ldb, c, ldc),
            }
        }
    }
}

/// A constant operator on the device, applied to panels of elements (`C = A B`, the element
/// index fastest: `B` k rows of `ldb` values, `C` m rows of `ldc`) by the path the backend's
/// settings and the cost model choose ([`DeviceOperator::path`]).
pub struct DeviceOperator<T: DeviceReal> {
    kernel: PanelKernel<T>,
    /// The operator, as given (in T, exactly representable in f64), for kernels compiled at run
    /// time.
    operator: ConstOperator,
    /// Kernels compiled for panel shapes ([`DeviceOperator::compile_for_panel`]).
    compiled: Vec<CompiledPanel>,
    m: usize,
    k: usize,
}

impl CudaBackend {
    /// The operator `name` with matrix `a` (m x k, row-major): the built-in generated kernel of
    /// that name where the build carries one of this shape (`codegen::built_in_operators`'
    /// names, e.g. "tri-k3-error-basis"), cuBLAS where [`crate::CudaSettings::cublas`] and
    /// `codegen::gemm_wins` say so (by default only once it is loaded:
    /// [`CudaBackend::load_cublas`]), the dense kernel otherwise. Errors: `a` not m x k, a
    /// built-in kernel of another shape, cuBLAS forced and missing.
    pub fn constant_operator<T: DeviceReal>(
        &self,
        name: &str,
        m: usize,
        k: usize,
        a: &[T],
    ) -> Result<DeviceOperator<T>> {
        let kernel = PanelKernel::for_operator(self, name, m, k, a)?;
        let values = a.iter().map(|v| v.to_f64().unwrap_or(f64::NAN)).collect();
        let operator = ConstOperator::new(name, m, k, values)
            .map_err(|e| CoreError::InvalidParameter { name: "operator", reason: e.to_string() })?;
        Ok(DeviceOperator { kernel, operator, compiled: Vec::new(), m, k })
    }
}

impl<T: DeviceReal> DeviceOperator<T> {
    /// Rows and columns of `A`.
    pub fn shape(&self) -> (usize, usize) {
        (self.m, self.k)
    }

    /// Which code applies it.
    pub fn path(&self) -> OperatorPath {
        self.kernel.path()
    }

    /// Compiles the operator's kernels for panels of leading dimensions `ldb` and `ldc` at run
    /// time (NVRTC, loaded on first use: [`crate::CudaSettings::nvrtc_library`]), with the
    /// strides compiled in (`codegen::Strides::Fixed`). From then on [`DeviceOperator::apply`]
    /// launches them on panels of exactly these leading dimensions, except where cuBLAS applies
    /// the operator and measured faster (`codegen::compiled_beats_gemm`: wide panels, and f64;
    /// for an operator that cuBLAS keeps on every panel nothing is compiled); other
    /// panels keep [`DeviceOperator::path`]. The results have the bits of
    /// the built-in kernels (the same operation sequence). The forms are those of the built-in
    /// kernels (`codegen::fixed_choices`), also for an operator that is not built in.
    ///
    /// Compiling costs far more than it saves per application (a few percent; BENCHMARKS.md,
    /// section 'Constant operators'): worth it for panels of one shape applied many times. A kernel
    /// that another operator with the same entries already compiled on this device is reused.
    /// Errors: NVRTC missing or failing, leading dimensions of zero or beyond an `int`.
    pub fn compile_for_panel(
        &mut self,
        backend: &CudaBackend,
        ldb: usize,
        ldc: usize,
    ) -> Result<()> {
        let cublas_everywhere = matches!(self.kernel, PanelKernel::Gemm(_))
            && !compiled_beats_gemm(T::PRECISION, false);
        if cublas_everywhere || self.compiled.iter().any(|p| (p.ldb, p.ldc) == (ldb, ldc)) {
            return Ok(());
        }
        let strides = Strides::Fixed { ldb, ldc };
        let invalid = |e: crate::codegen::CodegenError| CoreError::InvalidParameter {
            name: "panel",
            reason: e.to_string(),
        };
        let [wide, narrow] =
            fixed_choices(&self.operator, T::PRECISION, ldb, ldc).map_err(invalid)?;
        let compile = |variant: Variant| -> Result<CompiledKernel> {
            let kernel = generate_with(&self.operator, T::PRECISION, Beta::Zero, variant, strides)
                .map_err(invalid)?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&kernel.source, &mut hasher);
            let key = format!("{}#{:016x}", kernel.name, std::hash::Hasher::finish(&hasher));
            if !backend.gpu.has_kernel(&key) {
                let cubin = backend.nvrtc()?.compile_cubin(
                    &kernel.name,
                    &kernel.source,
                    backend.gpu.compute_capability,
                )?;
                backend.gpu.add_compiled(&key, &kernel.name, &cubin)?;
            }
            Ok(CompiledKernel { name: key, variant, grid_y: kernel.grid_y })
        };
        let narrow = if narrow != wide { Some(compile(narrow)?) } else { None };
        let wide = compile(wide)?;
        self.compiled.push(CompiledPanel { ldb, ldc, wide, narrow });
        Ok(())
    }

    /// The kernels compiled for this panel's leading dimensions, where they apply it (see
    /// [`DeviceOperator::compile_for_panel`]).
    fn compiled_for(
        &self,
        backend: &CudaBackend,
        n: usize,
        ldb: usize,
        ldc: usize,
    ) -> Option<&CompiledPanel> {
        let panel = self.compiled.iter().find(|p| (p.ldb, p.ldc) == (ldb, ldc))?;
        let wide = wide_panel(n, backend.gpu.resident_threads);
        let cublas_wins =
            matches!(self.kernel, PanelKernel::Gemm(_)) && !compiled_beats_gemm(T::PRECISION, wide);
        (!cublas_wins).then_some(panel)
    }

    /// Which code [`DeviceOperator::apply`] runs for a panel of `n` elements of these leading
    /// dimensions: [`OperatorPath::Compiled`] where kernels were compiled for them and apply
    /// (see [`DeviceOperator::compile_for_panel`]), else [`DeviceOperator::path`].
    pub fn path_for_panel(
        &self,
        backend: &CudaBackend,
        n: usize,
        ldb: usize,
        ldc: usize,
    ) -> OperatorPath {
        match self.compiled_for(backend, n, ldb, ldc) {
            Some(_) => OperatorPath::Compiled,
            None => self.path(),
        }
    }

    /// On the generated and compiled paths, the form of the kernel that
    /// [`DeviceOperator::apply`] launches for this panel (`codegen::choose` on wide panels,
    /// `codegen::choose_narrow` on narrow ones and on those a pair kernel cannot read); `None`
    /// on the dense and cuBLAS paths.
    pub fn generated_variant(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: &DeviceVector<T>,
        ldb: usize,
        c: &DeviceVector<T>,
        ldc: usize,
    ) -> Option<Variant> {
        if let Some(panel) = self.compiled_for(backend, n, ldb, ldc) {
            return Some(panel.kernel_for::<T>(backend, n, b.address(), c.address()).variant);
        }
        match &self.kernel {
            PanelKernel::BuiltIn(op) => {
                Some(op.kernel_for(backend, n, b.address(), ldb, c.address(), ldc).variant)
            }
            PanelKernel::Dense(_) | PanelKernel::Gemm(_) => None,
        }
    }

    /// Queues `C = A B` over the first `n` element columns on `backend`'s stream (the backend
    /// that made the operator, or a clone): `b` holds k rows of `ldb >= n` values, `c` m rows
    /// of `ldc >= n` (the values between n and the leading dimension are left as they are). An
    /// error where the vectors are too short for that.
    pub fn apply(
        &self,
        backend: &CudaBackend,
        n: usize,
        b: &DeviceVector<T>,
        ldb: usize,
        c: &mut DeviceVector<T>,
        ldc: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let need = |rows: usize, ld: usize| (rows - 1).checked_mul(ld)?.checked_add(n);
        for (what, len, rows, ld) in [("B", b.len(), self.k, ldb), ("C", c.len(), self.m, ldc)] {
            if ld < n || need(rows, ld).is_none_or(|need| len < need) {
                return Err(CoreError::InvalidParameter {
                    name: "panel",
                    reason: format!(
                        "{what}: {len} values for {rows} rows of {n} elements at leading \
                         dimension {ld}"
                    ),
                });
            }
        }
        let (b, c) = (b.address(), c.address());
        if let Some(panel) = self.compiled_for(backend, n, ldb, ldc) {
            let kernel = panel.kernel_for::<T>(backend, n, b, c);
            // SAFETY: as below; the kernel was compiled for these leading dimensions, and a pair
            // kernel is only given an aligned panel (kernel_for).
            return unsafe {
                launch_generated(
                    backend,
                    &kernel.name,
                    kernel.variant,
                    kernel.grid_y,
                    n,
                    b,
                    ldb,
                    c,
                    ldc,
                )
            };
        }
        // SAFETY: b and c are live vectors of this backend large enough for their rows
        // (checked above); c is borrowed mutably, so it overlaps neither b nor anything the
        // host reads before the stream is synchronised (every download synchronises first).
        unsafe { self.kernel.apply(backend, n, b, ldb, c, ldc) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table holds what codegen says build.rs compiles: every operator of
    /// `built_in_operators`, in both precisions, with the kernels' names and shapes.
    #[test]
    fn the_table_is_codegens_list() {
        let ops = crate::codegen::built_in_operators(crate::MAX_ELEMENT_ORDER).unwrap();
        let mut expected = Vec::new();
        for op in &ops {
            for g in crate::codegen::built_in_kernels(op).unwrap() {
                expected.push((op.name().to_string(), g.precision, g.name, g.m, g.k, g.variant));
            }
        }
        let table: Vec<_> = BUILT_IN
            .iter()
            .map(|g| (g.operator.to_string(), g.precision, g.name.to_string(), g.m, g.k, g.variant))
            .collect();
        assert_eq!(table, expected);
        // Every pair kernel follows its operator's plain kernel, and only in f32.
        for (i, g) in BUILT_IN.iter().enumerate() {
            if g.variant == Variant::UnrolledPairs {
                let plain = &BUILT_IN[i - 1];
                assert_eq!((plain.operator, plain.variant), (g.operator, Variant::Unrolled));
                assert_eq!(g.precision, Precision::F32);
            }
        }
        let tri = BuiltInOperator::find::<f32>("tri-k2-error-basis").unwrap();
        assert_eq!(tri.wide.variant, Variant::UnrolledPairs);
        assert_eq!(tri.narrow.map(|g| g.variant), Some(Variant::Unrolled));
        assert!(BuiltInOperator::find::<f64>("tri-k2-error-basis").unwrap().narrow.is_none());
        // The f64 bases of 36 columns: unrolled on wide panels, one chunk of rows on narrow ones.
        for name in ["tri-k7-error-basis", "tri-k6-error-basis-post"] {
            let op = BuiltInOperator::find::<f64>(name).unwrap();
            assert_eq!((op.wide.variant, op.shape().1), (Variant::Unrolled, 36), "{name}");
            let rows_per_thread = op.shape().0;
            assert_eq!(
                op.narrow.map(|g| (g.variant, g.grid_y)),
                Some((Variant::RowSplit { rows_per_thread }, 1)),
                "{name}"
            );
            assert!(BuiltInOperator::find::<f32>(name).unwrap().narrow.is_none(), "{name}");
        }
        let op = BuiltInOperator::find::<f32>("tet-k3-error-basis-post").unwrap();
        assert_eq!((op.wide.precision, op.shape()), (Precision::F32, (145, 35)));
        assert!(BuiltInOperator::find::<f64>("tet-k5-error-basis").is_none());
    }
}

//! The multigrid preconditioner of the trace system: an auxiliary-space V-cycle whose
//! iteration counts do not grow as the mesh is refined.
//!
//! **Levels.** Level 0 is the trace system itself (any [`MultigridOperator`]: a trace operator with
//! stored blocks). Level 1 is the continuous P1 space on the vertices of the same mesh, reached
//! through the face-by-face transfer E of [`hdg_core::auxiliary`] (around a vertex, cells whose
//! kappa differ by more than [`MultigridSettings::split_ratio`] get separate unknowns); its
//! operator is the Galerkin product A_1 = E^T A E ([`MultigridOperator::vertex_operator`]), so
//! per-cell coefficients, tau and unstructured meshes need nothing special. Levels 2, 3, ...
//! coarsen A_1 algebraically by smoothed aggregation ([`aggregation`]); the last level (at most
//! [`MultigridSettings::max_direct`] unknowns) is solved exactly by a dense inverse applied as one
//! more sparse product. The setup's graph work (strength, aggregates) runs on the host, on a
//! thread of its own beside the backend's work on the same level (its upload, smoother and
//! spectrum estimate); the products of each coarsening (P, P^T, P^T A P) run on the backend
//! where it has them ([`MultigridOps::coarsen`]: the CUDA backend's kernels, the same numbers to
//! the bit), else on the host ([`aggregation::galerkin_products`]), and every matrix reaches the
//! backend once.
//!
//! **A level split among processes** (a distributed run's first vertex level,
//! [`MultigridOps::split_level`]): each process holds the rows it owns. Its strength graph is
//! gathered whole on every process and aggregated there as on one process (the same
//! aggregates whatever the partition); each process forms its share of the coarsening from its
//! rows, with P's ghost rows from their owners ([`aggregation`]'s `split_galerkin_products`),
//! and the coarse level, summed over the processes, is whole on each. Its smoother's Jacobi
//! treats the rows other processes own as identity rows (their entries stay zero), its
//! spectrum bound is the largest over the processes. A split level solved exactly is
//! gathered and joined.
//!
//! **Cycle.** A symmetric V-cycle: on every level l above the last,
//!
//! ```text
//! z = S_l r;   z += P_l cycle_{l+1}(P_l^T (r - A_l z));   z += S_l (r - A_l z)
//! ```
//!
//! with S_l a Chebyshev polynomial in M_l^-1 A_l ([`crate::ChebyshevPreconditioner`]'s
//! recurrence, no inner products), M_0 the block diagonal of the trace matrix (one n_f x n_f
//! block per face, what [`crate::BlockJacobi`] inverts) and M_l (l >= 1) the diagonal. The
//! polynomial targets [lambda_max / range, lambda_max]: the smoother damps the upper part of
//! the spectrum, the coarse level the rest. lambda_max must not be under-estimated (a Chebyshev
//! smoother amplifies what lies above its interval): on the trace level it is at most
//! faces_per_cell (proof at [`Multigrid::new`]), used as it is in 2D and as the cap of a
//! Lanczos estimate in 3D; on the vertex levels a Lanczos estimate capped by the Gershgorin
//! bound. Pre- and post-smoothing are the same symmetric polynomial and every transfer pair is
//! (P, P^T), so the cycle is a symmetric positive definite operator, fixed from call to call: a
//! valid CG preconditioner. On the trace level the smoothing polynomial may run on a copy of
//! the operator with cheaper entries ([`MultigridOperator::smoothing_copy`]: the CPU's DBF in
//! bfloat16, half the bytes of the f32 products that bound the cycle's time) while the two
//! residuals that feed the coarse correction use the operator itself. The cycle stays
//! symmetric positive definite: the copy A~ rounds every entry on its own, so it is
//! symmetric; the smoother S = q(M^-1 A~) M^-1 is then symmetric, and positive definite since
//! the Chebyshev quotient q(t) = (1 - p(t)) / t is positive on and below the interval; the
//! cycle is S (2 S^-1 - A) S + (I - S A) C (I - A S), C the coarse correction, positive
//! definite while the eigenvalues of S A stay below 2, which rounding each entry by at most
//! 0.4% moves little. It uses only backend vector operations, the trace operator's
//! product and [`MultigridOps`]: the CUDA backend runs this very code. In an f64 solve the
//! whole cycle runs in f32 on a rounded copy of the trace matrix (`SinglePrecision`, chosen by
//! [`MultigridSettings::single_precision`]).
//!
//! **Why this design** (measurements in BENCHMARKS.md, section 'The multigrid preconditioner'):
//! the trace space's smooth error is the trace of a smooth function, which the P1 space
//! represents (Kronbichler & Wall, SISC 40, 2018; Cockburn, Dubois, Gopalakrishnan & Tan, IMA
//! JNA 2014: an auxiliary P1 space gives condition numbers independent of h for HDG).
//! Algebraic multigrid straight on the trace matrix is not h-robust (pyamg's iteration counts
//! grow with every refinement), because its aggregates ignore the face blocks' polynomial
//! modes; the P1 matrix is the kind of matrix smoothed aggregation handles well. With the P1
//! space solved exactly the two-level method's iteration counts stay flat under refinement;
//! the V-cycle below it adds a few. Chebyshev degree 3 on [lambda_max / 30, lambda_max] was
//! chosen over degree 1 and 2 (solve times level with each other): fewer iterations, fewer
//! global reductions, and counts that stay within 20% of each other from square:16 to
//! square:128.
//!
//! **Limits** (measured: benchmarks/history/multigrid.md, section 'The multigrid preconditioner
//! `pcg-mg`', subsection 'Iteration counts do not grow with the mesh'): a kappa checkerboard of
//! jump 1e4 stays within 2x the constant-kappa iterations with 2 x 2 and 4 x 4 checkers, not
//! with 8 x 8: the vertex space with split unknowns is right (its exact solve takes as many
//! iterations as constant kappa), but smoothed aggregation below it loses the 32 high-kappa
//! islands on its coarse levels.
pub mod aggregation;
mod level;
mod sparse;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use hdg_core::{
    check_lengths, Coarsening, CoreError, HostCsr, MultigridOperator, MultigridOps, Preconditioner,
    Real, Result, SmoothingCopy, SplitLevel, TraceOperator, TraceTopology, VertexSpace,
};

use crate::chebyshev::{product_update, SmoothingPolynomial};
use crate::spectrum::pseudo_random;
use crate::{lanczos_estimate, BlockJacobi, Jacobi};
use aggregation::{
    aggregate, galerkin_products, split_galerkin_products, strong_neighbours, tentative_prolongator,
};
use level::CsrOperator;

/// How the trace level combines its smoother with the coarse correction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cycle {
    /// Smooth, correct from the coarse levels with the new residual, smooth again: two more
    /// trace-operator products per cycle than [`Cycle::Additive`], fewer iterations.
    Multiplicative,
    /// z = S r + E cycle(E^T r): no residual update on the trace level.
    Additive,
}

/// The tuning of the multigrid preconditioner; [`MultigridSettings::auto`] is what the
/// measurements chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MultigridSettings {
    /// Degree of the Chebyshev smoother on the trace level (block Jacobi inside).
    pub trace_smoothing_degree: usize,
    /// The trace smoother targets [lambda_max / range, lambda_max].
    pub trace_smoothing_range: f64,
    /// Degree of the Chebyshev smoother on the vertex levels (Jacobi inside).
    pub vertex_smoothing_degree: usize,
    /// The vertex smoothers target [lambda_max / range, lambda_max].
    pub vertex_smoothing_range: f64,
    /// Lanczos steps of the trace level's lambda_max estimate; 0 takes the bound
    /// faces_per_cell itself (see [`Multigrid::new`]).
    pub trace_lanczos_steps: usize,
    /// Lanczos steps of each vertex level's lambda_max estimate (at least 2).
    pub lanczos_steps: usize,
    /// lambda_max estimates are multiplied by this (Ritz values lie inside the spectrum).
    pub lambda_safety: f64,
    /// Strength of connection theta of the aggregation (see [`aggregation`]).
    pub strength_threshold: f64,
    /// A level with at most this many unknowns is the last, solved exactly.
    pub max_direct: usize,
    /// Most levels, the trace level included.
    pub max_levels: usize,
    /// The cycle on the trace level (the vertex levels are always multiplicative).
    pub trace_cycle: Cycle,
    /// Around a vertex, cells whose kappa differ by more than this factor get separate vertex
    /// unknowns ([`VertexSpace::from_parts`]).
    pub split_ratio: f64,
    /// In an f64 solve, run the whole V-cycle in f32 on a rounded copy of the trace operator
    /// (half the memory traffic; the copy costs half the f64 matrix's memory).
    pub single_precision: bool,
    /// Smooth the trace level with the operator's cheaper copy where its backend has one
    /// ([`MultigridOperator::smoothing_copy`]: the CPU's DBF in bfloat16). The residuals that
    /// reach the coarse levels still use the operator itself. Not for singular operators.
    pub compressed_smoothing: bool,
    /// The operator has the constants as its null space (pure Neumann with c = 0,
    /// `Discretization::constant_null_space`): the coarsest level, whose P1 operator is then
    /// singular too, is inverted on the complement of its null space (a pseudo-inverse), so
    /// that the cycle stays symmetric and maps consistent residuals to consistent corrections.
    pub singular: bool,
}

impl MultigridSettings {
    /// The settings the measurements chose for a problem in `dim` dimensions at order `order`.
    pub fn auto(dim: usize, order: usize) -> Self {
        let _ = order;
        MultigridSettings {
            // In 2D the bound costs one iteration and saves the trace-operator products of
            // setup; in 3D it lies far above the spectrum (4 against about 2.2) and costs 4.
            // 10 steps estimate 1-2% below 20 (the safety factor covers it) and took as many
            // iterations or one fewer, for half the products.
            trace_lanczos_steps: if dim == 2 { 0 } else { 10 },
            trace_smoothing_degree: 3,
            trace_smoothing_range: 30.0,
            vertex_smoothing_degree: 2,
            vertex_smoothing_range: 10.0,
            lanczos_steps: 20,
            lambda_safety: 1.15,
            strength_threshold: 0.08,
            max_direct: 500,
            max_levels: 20,
            trace_cycle: Cycle::Multiplicative,
            split_ratio: hdg_core::auxiliary::DEFAULT_SPLIT_RATIO,
            single_precision: true,
            compressed_smoothing: true,
            singular: false,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad =
            |name: &'static str, reason: String| Err(CoreError::InvalidParameter { name, reason });
        if self.trace_smoothing_degree == 0 || self.vertex_smoothing_degree == 0 {
            return bad("multigrid smoothing degree", "must be at least 1".into());
        }
        if !(self.trace_smoothing_range > 1.0 && self.vertex_smoothing_range > 1.0) {
            return bad("multigrid smoothing range", "must be above 1".into());
        }
        if !(self.lambda_safety >= 1.0 && self.lambda_safety.is_finite()) {
            return bad("multigrid lambda safety", format!("{} is below 1", self.lambda_safety));
        }
        if self.lanczos_steps < 2
            || self.trace_lanczos_steps == 1
            || self.max_levels < 2
            || self.max_direct == 0
        {
            return bad(
                "multigrid settings",
                "need at least 2 Lanczos steps (0 on the trace level), 2 levels and a direct \
                 level of 1 unknown"
                    .into(),
            );
        }
        if !(0.0..1.0).contains(&self.strength_threshold) {
            return bad(
                "strength threshold",
                format!("{} is not in [0, 1)", self.strength_threshold),
            );
        }
        Ok(())
    }
}

/// Restriction and prolongation between a level and the next coarser one.
enum Transfer<T: Real, B: MultigridOps<T>> {
    /// Trace level to vertex level: E face by face.
    Faces(B::FaceTransfer),
    /// Between vertex levels: the smoothed-aggregation prolongator P and P^T.
    Csr { restrict: B::Csr, prolong: B::Csr },
}

/// A level below the trace level: its matrix and the Jacobi inside its smoother.
struct VertexLevel<'a, T: Real, B: MultigridOps<T>> {
    operator: CsrOperator<'a, T, B>,
    jacobi: Jacobi<B::Vector>,
}

/// The vectors one level's part of the cycle works in: its residual and correction, the
/// smoother's four, and the next level's right-hand side and solution.
struct Work<V> {
    residual: V,
    correction: V,
    smoother: [V; 4],
    coarse_rhs: V,
    coarse_solution: V,
}

/// The auxiliary-space multigrid V-cycle as a [`Preconditioner`] (see the module
/// documentation).
pub struct Multigrid<'a, T: Real, B: MultigridOps<T>> {
    backend: &'a B,
    trace: &'a dyn TraceOperator<T, Vector = B::Vector>,
    /// The trace operator's copy that the trace level smooths with, if any.
    trace_smoothing: Option<SmoothingCopy<'a, T, B::Vector>>,
    trace_smoother: BlockJacobi<B::Vector>,
    /// Levels 1, 2, ...: the last is solved by `direct`. None when the vertex space is empty
    /// (every vertex on the Dirichlet boundary: a mesh of one or two cells per side), and the
    /// cycle is then the trace smoother alone.
    levels: Vec<VertexLevel<'a, T, B>>,
    /// `transfers[l]` joins level l to level l + 1.
    transfers: Vec<Transfer<T, B>>,
    /// The smoother of every level but the last.
    smoothing: Vec<SmoothingPolynomial>,
    /// The last level's inverse, dense, as a CSR matrix (None without levels).
    direct: Option<B::Csr>,
    work: Vec<Mutex<Work<B::Vector>>>,
    trace_cycle: Cycle,
    notes: Vec<String>,
}

/// A level whose aggregation leaves more than 1 / SLOW_COARSENING of its unknowns is
/// aggregated again with every coupling strong.
const SLOW_COARSENING: usize = 3;

/// The aggregates of a level and their number ([`aggregation`], step 2).
fn aggregates_of(matrix: &HostCsr, settings: &MultigridSettings) -> Result<(Vec<usize>, usize)> {
    let (start, neighbours) = strong_neighbours(matrix, settings.strength_threshold)?;
    let first = aggregate(&start, &neighbours);
    or_every_coupling_strong(first, matrix.n, || strong_neighbours(matrix, 0.0))
}

/// `aggregates` (of a level of `n` unknowns, their number), or where they coarsen slower
/// than SLOW_COARSENING (weak couplings everywhere: on SA's denser coarse levels in 3D, which
/// would stay large and dense) the aggregates of the graph with every coupling strong
/// (whole neighbourhoods), if fewer.
fn or_every_coupling_strong(
    aggregates: (Vec<usize>, usize),
    n: usize,
    every_coupling: impl FnOnce() -> Result<(Vec<usize>, Vec<u32>)>,
) -> Result<(Vec<usize>, usize)> {
    if aggregates.1 * SLOW_COARSENING <= n {
        return Ok(aggregates);
    }
    let (start, neighbours) = every_coupling()?;
    let all = aggregate(&start, &neighbours);
    Ok(if all.1 < aggregates.1 { all } else { aggregates })
}

/// The strength graph of a level split among processes (`matrix` holding this process's
/// rows), whole on every process: each process finds its rows' strong couplings (with the
/// whole diagonal, summed over the processes) and the rows are gathered. Collective. The
/// aggregation that reads it is then the one-process run's, whatever the partition:
/// aggregates inside each process (uncoupled, as hypre and MueLu offer) cost 4 to 6
/// iterations on METIS parts of structured meshes, where index order packs the aggregates
/// regularly and a part's jagged edge shifts that packing (`benchmarks/history/distributed.md`).
fn split_strength_graph(
    level: &dyn SplitLevel,
    matrix: &HostCsr,
    theta: f64,
) -> Result<(Vec<usize>, Vec<u32>)> {
    let whole_diagonal = level.sum_vector(&aggregation::diagonal(matrix))?;
    let (start, neighbours) = aggregation::strong_neighbours_with(matrix, theta, &whole_diagonal)?;
    level.gather_graph(&start, &neighbours)
}

/// A level's aggregation on a host thread of its own, so that the backend's work on the level
/// (its upload, smoother and spectrum estimate) runs meanwhile: the aggregation reads only the
/// host matrix (or a split level's gathered graph), the backend only its own copy.
struct PendingAggregation(Option<std::thread::JoinHandle<Result<Aggregates>>>);

/// The aggregate of every unknown, their number, and the seconds it took to find them.
type Aggregates = (Vec<usize>, usize, f64);

impl PendingAggregation {
    /// Starts the aggregation of `matrix` if `wanted` (not for a last level). On a level split
    /// among processes (`split`) its strength graph is gathered first, here (collective), and
    /// the thread aggregates it; the slow-coarsening retry is then the caller's
    /// ([`or_every_coupling_strong`] with [`split_strength_graph`]).
    fn start(
        matrix: &Arc<HostCsr>,
        settings: &MultigridSettings,
        wanted: bool,
        split: Option<&dyn SplitLevel>,
    ) -> Result<Self> {
        if !wanted {
            return Ok(PendingAggregation(None));
        }
        let started = Instant::now();
        let graph = match split {
            Some(level) => Some(split_strength_graph(level, matrix, settings.strength_threshold)?),
            None => None,
        };
        let (matrix, settings) = (Arc::clone(matrix), *settings);
        Ok(PendingAggregation(Some(std::thread::spawn(move || {
            let (aggregates, count) = match graph {
                Some((start, neighbours)) => aggregate(&start, &neighbours),
                None => aggregates_of(&matrix, &settings)?,
            };
            Ok((aggregates, count, started.elapsed().as_secs_f64()))
        }))))
    }

    /// The aggregates, their number and the seconds the aggregation took.
    fn finish(&mut self) -> Result<Aggregates> {
        let thread = self.0.take().ok_or_else(|| {
            CoreError::Solver("multigrid: a level's aggregation was not started".into())
        })?;
        thread
            .join()
            .map_err(|_| CoreError::Solver("multigrid: the aggregation's thread panicked".into()))?
    }
}

/// lambda_max of M^-1 A: Lanczos from a pseudo-random start, times the safety factor, capped
/// by `bound`, an upper bound of the spectrum (the estimate converges slowly where the top of
/// the spectrum is dense, and a smoother built on an under-estimate amplifies what lies
/// above it); `bound` where Lanczos cannot run (it converged at once: a tiny or trivial level).
fn lambda_max<T: Real, B: MultigridOps<T>>(
    backend: &B,
    operator: &dyn TraceOperator<T, Vector = B::Vector>,
    inner: &dyn Preconditioner<T, B>,
    (steps, safety): (usize, f64),
    bound: f64,
    seed: u64,
    owned: Option<&[bool]>,
) -> Result<f64> {
    if steps == 0 {
        return Ok(bound);
    }
    let mut start = pseudo_random::<T>(operator.dim(), seed);
    if let Some(owned) = owned {
        // A split level's vectors are zero in the rows other processes own.
        start.iter_mut().zip(owned.iter()).filter(|(_, &o)| !o).for_each(|(x, _)| *x = T::zero());
    }
    let start = backend.copy_from_host(&start)?;
    match lanczos_estimate(backend, operator, inner, &start, steps) {
        Ok(estimate) => Ok((estimate.lambda_max * safety).min(bound)),
        Err(CoreError::Solver(_)) => Ok(bound),
        Err(e) => Err(e),
    }
}

/// Eigenvalues below this fraction of the largest are the null space of a singular coarsest
/// level. A P1 Neumann operator of at most `max_direct` = 500 unknowns has its smallest nonzero
/// eigenvalue near 1e-3 of its largest; its null eigenvalue came out at 5e-8 of it on
/// square:16 k = 1.
const PSEUDO_INVERSE_CUTOFF: f64 = 1e-6;

/// The dense inverse of a small SPD matrix, as a CSR matrix with every entry; with `singular`,
/// the pseudo-inverse of a symmetric positive semi-definite one (from its eigenvectors).
///
/// On one thread: at these sizes (at most `max_direct` unknowns) faer's parallel kernels spend
/// longer waking a machine's threads than computing (see the benchmark document).
fn dense_inverse(a: &HostCsr, singular: bool) -> Result<HostCsr> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt;
    use faer::{Accum, Mat, Par};
    let n = a.n;
    let mut dense = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for p in a.indptr[i]..a.indptr[i + 1] {
            dense[(i, a.indices[p])] = a.values[p];
        }
    }
    let par = Par::Seq;
    let mut inverse = Mat::<f64>::zeros(n, n);
    if singular {
        let mut s = faer::diag::Diag::<f64>::zeros(n);
        let mut u = Mat::<f64>::zeros(n, n);
        let scratch = faer::linalg::evd::self_adjoint_evd_scratch::<f64>(
            n,
            faer::linalg::evd::ComputeEigenvectors::Yes,
            par,
            Default::default(),
        );
        faer::linalg::evd::self_adjoint_evd(
            dense.as_ref(),
            s.as_mut(),
            Some(u.as_mut()),
            par,
            MemStack::new(&mut MemBuffer::new(scratch)),
            Default::default(),
        )
        .map_err(|e| {
            CoreError::Solver(format!(
                "multigrid: no eigendecomposition of the coarsest level ({n} unknowns): {e:?}"
            ))
        })?;
        let s = s.column_vector();
        let largest = (0..n).map(|i| s[i]).fold(0.0f64, f64::max);
        let kept: Vec<usize> = (0..n).filter(|&k| s[k] > PSEUDO_INVERSE_CUTOFF * largest).collect();
        // U_kept diag(1 / s_kept) U_kept^T.
        let basis = Mat::from_fn(n, kept.len(), |i, c| u[(i, kept[c])]);
        let scaled = Mat::from_fn(n, kept.len(), |i, c| u[(i, kept[c])] / s[kept[c]]);
        faer::linalg::matmul::matmul(
            inverse.as_mut(),
            Accum::Replace,
            scaled.as_ref(),
            basis.transpose(),
            1.0,
            par,
        );
    } else {
        let scratch = llt::factor::cholesky_in_place_scratch::<f64>(n, par, Default::default())
            .or(llt::inverse::inverse_scratch::<f64>(n, par));
        let mut buffer = MemBuffer::new(scratch);
        llt::factor::cholesky_in_place(
            dense.as_mut(),
            Default::default(),
            par,
            MemStack::new(&mut buffer),
            Default::default(),
        )
        .map_err(|e| {
            CoreError::Solver(format!(
                "multigrid: the coarsest level ({n} unknowns) is not positive definite ({e:?})"
            ))
        })?;
        // The lower triangle of (L L^T)^-1, mirrored.
        llt::inverse::inverse(inverse.as_mut(), dense.as_ref(), par, MemStack::new(&mut buffer));
        for j in 0..n {
            for i in 0..j {
                inverse[(i, j)] = inverse[(j, i)];
            }
        }
    }
    Ok(HostCsr {
        n,
        n_cols: n,
        indptr: (0..=n).map(|i| i * n).collect(),
        indices: (0..n * n).map(|p| p % n).collect(),
        values: (0..n * n).map(|p| inverse[(p / n, p % n)]).collect(),
    })
}

/// A coarsening computed on the host, its transfers uploaded.
fn upload_coarsening<T: Real, B: MultigridOps<T>>(
    backend: &B,
    host: Coarsening<HostCsr>,
) -> Result<Coarsening<B::Csr>> {
    Ok(Coarsening {
        prolong: backend.upload_csr(&host.prolong)?,
        restrict: backend.upload_csr(&host.restrict)?,
        coarse: host.coarse,
        coarse_on_backend: None,
    })
}

impl<'a, T: Real, B: MultigridOps<T>> Multigrid<'a, T, B> {
    /// Builds the hierarchy for `trace`, the operator assembled on `topology`, with the vertex
    /// space `space` of the same discretization.
    ///
    /// The trace level's bound: A = sum_K A_K and D = sum_K blockdiag(A_K), with every A_K
    /// positive semi-definite of faces_per_cell face blocks (the element trace matrix K_e on
    /// the free faces), and M <= m blockdiag(M) for a positive semi-definite M of m blocks
    /// (Cauchy-Schwarz on the sum of its block components); so A <= faces_per_cell D and the
    /// spectrum of D^-1 A lies below faces_per_cell.
    ///
    /// Errors: an operator without stored blocks, a space of another discretization, invalid
    /// settings, a vertex level that is not positive definite or cannot be coarsened.
    pub fn new<O: MultigridOperator<T, B>>(
        backend: &'a B,
        trace: &'a O,
        space: &VertexSpace,
        topology: &TraceTopology,
        settings: &MultigridSettings,
    ) -> Result<Self> {
        settings.validate()?;
        let started = Instant::now();
        let mut notes = Vec::new();
        let mut timed = |what: &str, since: Instant| {
            notes.push(format!("{what}: {:.1} ms", since.elapsed().as_secs_f64() * 1e3));
        };
        if trace.dim() != space.n_rows() * space.n_f {
            return Err(CoreError::InvalidParameter {
                name: "vertex space",
                reason: format!(
                    "{} trace unknowns in the space, {} in the operator",
                    space.n_rows() * space.n_f,
                    trace.dim()
                ),
            });
        }
        // The vertex level first: its temporaries (the blocks projected onto the vertex space)
        // are freed before the smoothing copy and the smoother's factors exist, so the device
        // never holds all of them at once.
        let t = Instant::now();
        let (matrix, mut uploaded) = trace.vertex_level(backend, space, topology)?;
        let galerkin_ms = t.elapsed().as_secs_f64() * 1e3;
        // Each level's aggregation runs on the host beside the backend's work on that level (and
        // on the first, beside the trace level's), except on the last level (solved exactly, not
        // aggregated): a small or deep enough one.
        let is_last =
            |n: usize, depth: usize| n <= settings.max_direct || depth + 2 >= settings.max_levels;
        let mut matrix = Arc::new(matrix);
        let wanted = !is_last(matrix.n, 0);
        let mut pending =
            PendingAggregation::start(&matrix, settings, wanted, backend.split_level(matrix.n))?;
        let mut transfers = vec![Transfer::Faces(backend.upload_face_transfer(space)?)];
        timed(&format!("vertex level: E^T A E {galerkin_ms:.1} ms, and the transfers"), t);
        let t = Instant::now();
        let trace_smoothing = match settings.compressed_smoothing && !settings.singular {
            true => trace.smoothing_copy()?,
            false => None,
        };
        if trace_smoothing.is_some() {
            timed("trace level: its copy for smoothing", t);
        }
        let t = Instant::now();
        let trace_smoother = BlockJacobi::new(backend, trace)?;
        // The spectrum of D^-1 A lies below faces_per_cell (see above).
        let trace_lambda = lambda_max(
            backend,
            trace,
            &trace_smoother,
            (settings.trace_lanczos_steps, settings.lambda_safety),
            topology.faces_per_cell as f64,
            1,
            None,
        )?;
        timed("trace level: block factors and lambda_max", t);

        let mut levels: Vec<VertexLevel<'a, T, B>> = Vec::new();
        let mut smoothing = vec![SmoothingPolynomial {
            degree: settings.trace_smoothing_degree,
            lambda_min: trace_lambda / settings.trace_smoothing_range,
            lambda_max: trace_lambda,
        }];
        let t = Instant::now();
        let mut nonzeros = Vec::new();
        // Seconds spent on: uploads, lambda estimates, aggregation, sparse products.
        let mut phases = [0.0f64; 4];
        let mut host_aggregation = 0.0;
        let mut lap = Instant::now();
        let mut split = |phase: usize| {
            phases[phase] += lap.elapsed().as_secs_f64();
            lap = Instant::now();
        };
        let mut split_note = None;
        while matrix.n > 0 {
            let last = is_last(matrix.n, levels.len());
            let mut parts = backend.split_level(matrix.n);
            if let (Some(level), true) = (parts, last) {
                // Solved exactly: the level whole on every process.
                matrix = Arc::new(level.sum(&matrix)?);
                level.join();
                parts = None;
                split_note = Some("whole on every process (the last level)".to_string());
            }
            nonzeros.push(matrix.indices.len());
            let owned = parts.map(|level| Arc::clone(level.owned()));
            let mut operator =
                CsrOperator::new(backend, &matrix, uploaded.take(), owned.as_deref())?;
            let jacobi = Jacobi::new(backend, &operator)?;
            split(0);
            if last {
                levels.push(VertexLevel { operator, jacobi });
                break;
            }
            let mut gershgorin = operator.gershgorin_bounds(true)?.1;
            if let Some(level) = parts {
                gershgorin = level.max(gershgorin)?;
            }
            let seed = 2 + levels.len() as u64;
            let steps = (settings.lanczos_steps, settings.lambda_safety);
            let rho =
                lambda_max(backend, &operator, &jacobi, steps, gershgorin, seed, owned.as_deref())?;
            split(1);
            let (aggregates, count, seconds) = pending.finish()?;
            host_aggregation += seconds;
            let (aggregates, count) = match parts {
                Some(level) => {
                    let every_coupling = || split_strength_graph(level, &matrix, 0.0);
                    let (aggregates, count) =
                        or_every_coupling_strong((aggregates, count), matrix.n, every_coupling)?;
                    split_note = Some(format!(
                        "coarsened where it lies, its strength graph gathered for the \
                         one-process aggregation ({count} aggregates)"
                    ));
                    (aggregates, count)
                }
                None => (aggregates, count),
            };
            if count == 0 || count * 10 > matrix.n * 9 {
                return Err(CoreError::Solver(format!(
                    "multigrid: aggregation cannot coarsen a level of {} unknowns ({count} \
                     aggregates)",
                    matrix.n
                )));
            }
            split(2);
            smoothing.push(SmoothingPolynomial {
                degree: settings.vertex_smoothing_degree,
                lambda_min: rho / settings.vertex_smoothing_range,
                lambda_max: rho,
            });
            let tentative = tentative_prolongator(&aggregates, count);
            // rho carries the safety factor: the smoothing step stays on the safe side.
            let omega_over_rho = 4.0 / 3.0 / rho;
            // A split level's products on the host with its ghost rows; else the backend's own
            // products where it has them, else the host's (the same bits).
            let coarsened = match parts {
                Some(level) => {
                    let host = split_galerkin_products(level, &matrix, &tentative, omega_over_rho)?;
                    Some(upload_coarsening(backend, host)?)
                }
                None => backend.coarsen(&matrix, operator.matrix(), &tentative, omega_over_rho)?,
            };
            let Coarsening { prolong, restrict, coarse, coarse_on_backend } = match coarsened {
                Some(on_backend) => on_backend,
                None => upload_coarsening(
                    backend,
                    galerkin_products(&matrix, &tentative, omega_over_rho),
                )?,
            };
            uploaded = coarse_on_backend;
            operator.coarsened()?;
            split(3);
            transfers.push(Transfer::Csr { restrict, prolong });
            levels.push(VertexLevel { operator, jacobi });
            matrix = Arc::new(coarse);
            let wanted = !is_last(matrix.n, levels.len());
            let parts = backend.split_level(matrix.n);
            pending = PendingAggregation::start(&matrix, settings, wanted, parts)?;
        }
        let direct = match matrix.n {
            0 => None,
            _ => Some(backend.upload_csr(&dense_inverse(&matrix, settings.singular)?)?),
        };
        split(0);
        let [uploads, estimates, waited, products] = phases.map(|p| p * 1e3);
        let aggregation = host_aggregation * 1e3;
        timed(
            &format!(
                "vertex hierarchy (smoothed aggregation; uploads {uploads:.1} ms, lambda \
                 estimates {estimates:.1} ms, aggregation {aggregation:.1} ms on the host beside \
                 them ({waited:.1} ms waited for), products P, P^T A P {products:.1} ms)"
            ),
            t,
        );

        if let Some(note) = split_note {
            notes.push(format!("first vertex level split among the processes: {note}"));
        }
        let mut sizes = vec![trace.dim()];
        sizes.extend(levels.iter().map(|l| l.operator.dim()));
        let work = (0..sizes.len().max(2) - 1)
            .map(|l| {
                let (n, nc) = (sizes[l], sizes.get(l + 1).copied().unwrap_or(0));
                Ok(Mutex::new(Work {
                    residual: backend.zeros(n)?,
                    correction: backend.zeros(n)?,
                    smoother: [
                        backend.zeros(n)?,
                        backend.zeros(n)?,
                        backend.zeros(n)?,
                        backend.zeros(n)?,
                    ],
                    coarse_rhs: backend.zeros(nc)?,
                    coarse_solution: backend.zeros(nc)?,
                }))
            })
            .collect::<Result<Vec<_>>>()?;
        notes.push(format!(
            "multigrid levels (unknowns): {sizes:?}, vertex levels' nonzeros {nonzeros:?}; trace smoother: Chebyshev degree {} on [{:.3e}, {:.3e}] with block Jacobi; setup {:.1} ms",
            smoothing[0].degree,
            smoothing[0].lambda_min,
            smoothing[0].lambda_max,
            started.elapsed().as_secs_f64() * 1e3
        ));
        Ok(Multigrid {
            backend,
            trace,
            trace_smoothing,
            trace_smoother,
            levels,
            transfers,
            smoothing,
            direct,
            work,
            trace_cycle: settings.trace_cycle,
            notes,
        })
    }

    /// Unknowns per level, the trace level first.
    pub fn level_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![self.trace.dim()];
        sizes.extend(self.levels.iter().map(|l| l.operator.dim()));
        sizes
    }

    /// What the setup did and how long each part took.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    fn operator(&self, level: usize) -> &dyn TraceOperator<T, Vector = B::Vector> {
        if level == 0 {
            self.trace
        } else {
            &self.levels[level - 1].operator
        }
    }

    /// The operator level `level` smooths with: the trace level's copy where there is one.
    fn smoothing_operator(&self, level: usize) -> &dyn TraceOperator<T, Vector = B::Vector> {
        match (level, &self.trace_smoothing) {
            (0, Some(copy)) => copy.as_ref(),
            _ => self.operator(level),
        }
    }

    fn inner(&self, level: usize) -> &dyn Preconditioner<T, B> {
        if level == 0 {
            &self.trace_smoother
        } else {
            &self.levels[level - 1].jacobi
        }
    }

    /// coarse = P_l^T fine.
    fn restrict(&self, level: usize, fine: &B::Vector, coarse: &mut B::Vector) -> Result<()> {
        match &self.transfers[level] {
            Transfer::Faces(e) => self.backend.restrict(e, fine, coarse),
            Transfer::Csr { restrict, .. } => self.backend.csr_apply(restrict, fine, coarse),
        }
    }

    /// fine += P_l coarse (`scratch`: a fine-level vector the CSR product goes through).
    fn prolong_add(
        &self,
        level: usize,
        coarse: &B::Vector,
        fine: &mut B::Vector,
        scratch: &mut B::Vector,
    ) -> Result<()> {
        match &self.transfers[level] {
            Transfer::Faces(e) => self.backend.prolong_add(e, coarse, fine),
            Transfer::Csr { prolong, .. } => {
                self.backend.csr_apply(prolong, coarse, scratch)?;
                self.backend.axpy(T::one(), scratch, fine)
            }
        }
    }

    /// z = cycle_l(r).
    fn cycle(&self, level: usize, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        let backend = self.backend;
        if let (true, Some(direct)) = (level == self.levels.len(), &self.direct) {
            return backend.csr_apply(direct, r, z);
        }
        let mut guard = self.work[level]
            .lock()
            .map_err(|_| CoreError::Solver("multigrid workspace poisoned".into()))?;
        let Work { residual, correction, smoother, coarse_rhs, coarse_solution } = &mut *guard;
        let [s0, s1, s2, s3] = smoother;
        let (operator, inner) = (self.operator(level), self.inner(level));
        let smoothing_operator = self.smoothing_operator(level);
        let polynomial = &self.smoothing[level];
        polynomial.apply(backend, smoothing_operator, inner, [s0, s1, s2, s3], r, z)?;
        if self.levels.is_empty() {
            return Ok(());
        }
        if level == 0 && self.trace_cycle == Cycle::Additive {
            self.restrict(level, r, coarse_rhs)?;
            self.cycle(level + 1, coarse_rhs, coarse_solution)?;
            return self.prolong_add(level, coarse_solution, z, correction);
        }
        // residual = r - A z (`correction` is scratch until the post-smoothing writes it)
        product_update(backend, operator, -T::one(), z, Some(r), residual, correction)?;
        self.restrict(level, residual, coarse_rhs)?;
        self.cycle(level + 1, coarse_rhs, coarse_solution)?;
        self.prolong_add(level, coarse_solution, z, correction)?;
        product_update(backend, operator, -T::one(), z, Some(r), residual, correction)?;
        polynomial.apply(
            backend,
            smoothing_operator,
            inner,
            [s0, s1, s2, s3],
            residual,
            correction,
        )?;
        backend.axpy(T::one(), correction, z)
    }
}

impl<T: Real, B: MultigridOps<T>> Preconditioner<T, B> for Multigrid<'_, T, B> {
    fn name(&self) -> String {
        "mg".into()
    }

    fn apply(&self, backend: &B, r: &B::Vector, z: &mut B::Vector) -> Result<()> {
        let n = self.trace.dim();
        check_lengths("multigrid (r, z)", &[n, n], &[backend.len(r), backend.len(z)])?;
        self.cycle(0, r, z)
    }

    /// Trace-operator products per cycle (the vertex levels' products are not counted).
    fn operator_applications(&self) -> usize {
        let smoothing = self.smoothing[0].degree - 1;
        match (self.levels.is_empty(), self.trace_cycle) {
            (true, _) | (false, Cycle::Additive) => smoothing,
            (false, Cycle::Multiplicative) => 2 * smoothing + 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path graph's Laplacian on n vertices plus `shift` on the diagonal, as CSR.
    fn path_laplacian(n: usize, shift: f64) -> HostCsr {
        let (mut indptr, mut indices, mut values) = (vec![0], Vec::new(), Vec::new());
        for i in 0..n {
            let row = i.saturating_sub(1)..(i + 2).min(n);
            let degree = (row.len() - 1) as f64;
            for j in row {
                indices.push(j);
                values.push(if j == i { degree + shift } else { -1.0 });
            }
            indptr.push(indices.len());
        }
        HostCsr { n, n_cols: n, indptr, indices, values }
    }

    fn dense(m: &HostCsr) -> Vec<Vec<f64>> {
        let mut d = vec![vec![0.0; m.n_cols]; m.n];
        for (i, row) in d.iter_mut().enumerate() {
            for p in m.indptr[i]..m.indptr[i + 1] {
                row[m.indices[p]] = m.values[p];
            }
        }
        d
    }

    fn product(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let n = a.len();
        (0..n).map(|i| (0..n).map(|j| (0..n).map(|k| a[i][k] * b[k][j]).sum()).collect()).collect()
    }

    #[test]
    fn dense_inverse_inverts_and_is_symmetric() {
        for n in [1, 2, 37, 130] {
            let a = path_laplacian(n, 0.5);
            let inverse = dense_inverse(&a, false).unwrap();
            assert_eq!((inverse.n, inverse.indices.len()), (n, n * n));
            let x = dense(&inverse);
            let identity = product(&dense(&a), &x);
            for i in 0..n {
                for j in 0..n {
                    // Both triangles: the factorisation's inverse holds one, mirrored.
                    assert_eq!(x[i][j].to_bits(), x[j][i].to_bits(), "n = {n}: ({i}, {j})");
                    let expected = if i == j { 1.0 } else { 0.0 };
                    assert!(
                        (identity[i][j] - expected).abs() < 1e-12,
                        "n = {n}: A A^-1 ({i}, {j})"
                    );
                }
            }
        }
    }

    #[test]
    fn dense_inverse_of_a_singular_level_is_its_pseudo_inverse() {
        // A Neumann Laplacian: the constants are its null space.
        let n = 60;
        let a = path_laplacian(n, 0.0);
        let pinv = dense(&dense_inverse(&a, true).unwrap());
        let ad = dense(&a);
        let apa = product(&product(&ad, &pinv), &ad);
        for i in 0..n {
            let row_sum: f64 = pinv[i].iter().sum();
            assert!(row_sum.abs() < 1e-9, "the pseudo-inverse maps the constants to zero");
            for j in 0..n {
                assert!((apa[i][j] - ad[i][j]).abs() < 1e-10, "A A^+ A = A at ({i}, {j})");
                assert!((pinv[i][j] - pinv[j][i]).abs() < 1e-10);
            }
        }
    }

    #[test]
    fn dense_inverse_reports_an_indefinite_level() {
        let mut a = path_laplacian(5, 0.5);
        a.values.iter_mut().for_each(|v| *v = -*v);
        let err = dense_inverse(&a, false).unwrap_err().to_string();
        assert!(err.contains("not positive definite"), "{err}");
    }
}

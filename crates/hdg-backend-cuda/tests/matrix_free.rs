//! The matrix-free trace operator of the CUDA backend against the assembled DBF operator (on the
//! device and on the CPU): applications to random vectors, the right-hand side, the diagonal and
//! its blocks, the exported matrix and its Gershgorin bounds, the f32 demotion, and whole
//! pipeline solves, on random perturbed meshes with random coefficients: triangles of orders
//! 1..=8, tetrahedra of orders 1..=3.
//!
//! Every test needs a GPU, so every test is `#[ignore]`d (reported as ignored, never as passed,
//! on a machine without one). On a GPU machine: `matrix_free-<hash> --ignored --test-threads 1`.
use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_backend_cuda::{
    CudaBackend, DeviceReal, DeviceTraceOperator, DeviceVector, MatrixFreeOperator,
    TraceOperatorKind,
};
use hdg_core::pipeline::{self, PipelineOptions, PipelineOutput, Silent};
use hdg_core::{
    Assembler, Coefficient, DemoteOperator, Discretization, Krylov, LocalSolver, Manufactured,
    Problem, TraceOperator, TraceSolver, VectorOps,
};
use hdg_linalg::{MixedPrecisionRefinement, SolverChoice, Suite};
use hdg_mesh::{generate, Diagonal, Mesh};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn gpu() -> CudaBackend {
    match CudaBackend::new() {
        Ok(b) => {
            eprintln!("device: {}", b.describe());
            b
        }
        Err(e) => panic!("no usable CUDA device: {e}"),
    }
}

/// The backend `g` (same device state) building operators of `kind`.
fn with(g: &CudaBackend, kind: TraceOperatorKind) -> CudaBackend {
    g.clone().with_trace_operator(kind)
}

fn random<T: DeviceReal>(n: usize, seed: u64) -> Vec<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| T::from_f64_lossy(rng.gen_range(-1.0..1.0))).collect()
}

fn upload<T: DeviceReal>(b: &CudaBackend, v: &[T]) -> DeviceVector<T> {
    b.copy_from_host(v).unwrap()
}

fn download<T: DeviceReal>(b: &CudaBackend, v: &DeviceVector<T>) -> Vec<T> {
    VectorOps::<T>::to_host(b, v).unwrap()
}

fn max_abs<T: DeviceReal>(v: &[T]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.as_f64().abs()))
}

/// max |a - b| / max |b| (0 when both are zero).
fn rel_diff<T: DeviceReal>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len(), "lengths");
    let err = a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x.as_f64() - y.as_f64()).abs()));
    let scale = max_abs(b);
    if scale == 0.0 {
        err
    } else {
        err / scale
    }
}

fn assert_rel<T: DeviceReal>(what: &str, got: &[T], want: &[T], tol: f64) {
    assert!(got.iter().all(|v| v.as_f64().is_finite()), "{what} ({}): non-finite values", T::NAME);
    let e = rel_diff(got, want);
    assert!(e <= tol, "{what} ({}): relative difference {e:e} > {tol:e}", T::NAME);
}

fn bits<T: DeviceReal>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.as_f64().to_bits()).collect()
}

/// A random case: perturbed mesh (or the 1 x 1 square: one free face), order k, random tau,
/// per-cell random kappa and c, the sine problem's source and Dirichlet data.
struct Case {
    mesh: Mesh,
    problem: Problem,
    k: usize,
    label: String,
}

fn random_case(index: usize, k: usize) -> Case {
    let mut rng = StdRng::seed_from_u64(7000 + index as u64);
    let n = if index % 9 == 8 { 1 } else { rng.gen_range(3..=9) };
    let diagonal = [Diagonal::Right, Diagonal::Left, Diagonal::Alternating][rng.gen_range(0..3)];
    let amplitude = rng.gen_range(0.0..0.3);
    let mesh_seed = rng.gen_range(0..1000u64);
    let mut mesh = generate::unit_square(n, diagonal).unwrap();
    if n > 1 {
        mesh = generate::perturb(&mesh, amplitude, mesh_seed).unwrap();
    }
    let cells = mesh.n_cells();
    let mut problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let tau = rng.gen_range(0.3..5.0);
    problem.tau = hdg_core::Tau::Constant(tau);
    problem.kappa = Coefficient::PerCell((0..cells).map(|_| rng.gen_range(0.2..5.0)).collect());
    problem.reaction = Coefficient::PerCell((0..cells).map(|_| rng.gen_range(0.0..3.0)).collect());
    let label = format!(
        "case {index}: k = {k}, {n}x{n} {diagonal:?}, perturb {amplitude:.3} seed {mesh_seed}, \
         tau {tau:.3}"
    );
    Case { mesh, problem, k, label }
}

/// A random tetrahedral case: the unit cube cut into n^3 boxes of 6 tetrahedra (n = 1, or 2
/// perturbed), order k, random tau, kappa and c.
fn tet_case(index: usize, k: usize) -> Case {
    let mut rng = StdRng::seed_from_u64(9000 + index as u64);
    let n = 1 + index % 2;
    let mut mesh = generate::unit_cube(n).unwrap();
    let amplitude = rng.gen_range(0.0..0.2);
    if n > 1 {
        mesh = generate::perturb(&mesh, amplitude, rng.gen_range(0..1000u64)).unwrap();
    }
    let cells = mesh.n_cells();
    let mut problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let tau = rng.gen_range(0.3..5.0);
    problem.tau = hdg_core::Tau::Constant(tau);
    problem.kappa = Coefficient::PerCell((0..cells).map(|_| rng.gen_range(0.2..5.0)).collect());
    problem.reaction = Coefficient::PerCell((0..cells).map(|_| rng.gen_range(0.0..3.0)).collect());
    let label =
        format!("tet case {index}: k = {k}, cube {n}, perturb {amplitude:.3}, tau {tau:.3}");
    Case { mesh, problem, k, label }
}

/// The triangle cases: every k = 1..=6 on random perturbed meshes, two more, k = 7, 8 (the
/// highest orders the condensation has), and every k = 1..=6 on the 1 x 1 square (index 8
/// mod 9).
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (i, k) in [1, 2, 3, 4, 5, 6, 3, 6].into_iter().enumerate() {
        out.push(random_case(i, k));
    }
    for k in 1..=6 {
        out.push(random_case(9 * k + 8, k));
    }
    for k in [7, 8] {
        out.push(random_case(9 * k, k));
    }
    out
}

/// Tetrahedra: k = 1..=3 (n_f = 3, 6, 10: the block sizes the DBF SpMV exists for), on one and
/// on eight perturbed boxes.
fn tet_cases() -> Vec<Case> {
    (1..=3).flat_map(|k| [tet_case(2 * k, k), tet_case(2 * k + 1, k)]).collect()
}

/// Every case.
fn all_cases() -> Vec<Case> {
    let mut out = cases();
    out.extend(tet_cases());
    out
}

/// The three operators of one case, built from the same device condensation: the device DBF,
/// the device matrix-free operator, and the CPU DBF assembled from the device's K_e and b_e
/// (so that all three stand for the very same matrix).
struct Operators<T: DeviceReal> {
    dbf: DeviceTraceOperator<T>,
    dbf_rhs: DeviceVector<T>,
    mf: DeviceTraceOperator<T>,
    mf_rhs: DeviceVector<T>,
    cpu: DbfMatrix<T>,
    cpu_rhs: Vec<T>,
}

fn operators<T: DeviceReal>(g: &CudaBackend, case: &Case) -> Operators<T> {
    let disc = Discretization::<T>::new(&case.mesh, &case.problem, case.k).unwrap();
    let prep = LocalSolver::<T>::prepare(g, &disc).unwrap();
    let cond = LocalSolver::<T>::condense(g, &disc, &prep).unwrap();
    let (dbf, dbf_rhs) =
        Assembler::<T>::assemble(&with(g, TraceOperatorKind::Dbf), &disc, &prep, &cond).unwrap();
    let (mf, mf_rhs) =
        Assembler::<T>::assemble(&with(g, TraceOperatorKind::MatrixFree), &disc, &prep, &cond)
            .unwrap();
    assert_eq!(dbf.kind(), TraceOperatorKind::Dbf);
    assert_eq!(mf.kind(), TraceOperatorKind::MatrixFree);
    let host = g.condensed_to_host(&cond).unwrap();
    let cpu_prep = LocalSolver::<T>::prepare(&CpuBackend, &disc).unwrap();
    let (cpu, cpu_rhs) = CpuBackend.assemble(&disc, &cpu_prep, &host).unwrap();
    Operators { dbf, dbf_rhs, mf, mf_rhs, cpu, cpu_rhs }
}

/// The matrix-free operator against both DBF operators: sizes, right-hand side, A x for random
/// x (and its bitwise reproducibility), the exported matrix and the Gershgorin bounds.
fn apply_matches<T: DeviceReal>(g: &CudaBackend, case: &Case, tol: f64) {
    let what = |s: &str| format!("{} [{s}]", case.label);
    let ops = operators::<T>(g, case);
    let dim = ops.cpu.dim();
    assert_eq!(ops.mf.dim(), dim, "{}", what("dim"));
    assert_eq!(ops.dbf.dim(), dim, "{}", what("dim"));
    assert_eq!(ops.mf.block_size(), ops.cpu.block_size(), "{}", what("block size"));
    assert_eq!(ops.mf.n_active_blocks(), ops.cpu.n_active_blocks(), "{}", what("blocks"));
    let mf = ops.mf.as_matrix_free().expect("a matrix-free operator");
    assert_eq!(mf.n_rows() * ops.cpu.block_size(), dim);
    assert!(mf.apply_bytes() > 0 && mf.memory_bytes() > 0);

    // The right-hand side: the DBF assembly's (computed the same way: the same bits).
    let mf_rhs = download(g, &ops.mf_rhs);
    let dbf_rhs = download(g, &ops.dbf_rhs);
    eprintln!(
        "{}: n = {dim}, rhs bitwise equal to the DBF's: {}",
        what("rhs"),
        bits(&mf_rhs) == bits(&dbf_rhs)
    );
    assert_rel(&what("rhs vs device DBF"), &mf_rhs, &dbf_rhs, tol);
    assert_rel(&what("rhs vs CPU DBF"), &mf_rhs, &ops.cpu_rhs, tol);

    for seed in [21, 22, 23] {
        let x = random::<T>(dim, seed);
        let dx = upload(g, &x);
        let mut y_cpu = vec![T::zero(); dim];
        ops.cpu.apply(&x, &mut y_cpu).unwrap();
        let mut dy = upload(g, &vec![T::nan(); dim]);
        ops.dbf.apply(&dx, &mut dy).unwrap();
        let y_dbf = download(g, &dy);
        let mut dy = upload(g, &vec![T::nan(); dim]);
        ops.mf.apply(&dx, &mut dy).unwrap();
        let y_mf = download(g, &dy);
        eprintln!(
            "{}: seed {seed}: vs device DBF {:e}, vs CPU DBF {:e}",
            what("A x"),
            rel_diff(&y_mf, &y_dbf),
            rel_diff(&y_mf, &y_cpu)
        );
        assert_rel(&what("A x vs device DBF"), &y_mf, &y_dbf, tol);
        assert_rel(&what("A x vs CPU DBF"), &y_mf, &y_cpu, tol);
        // No atomics: the same bits on every application.
        for _ in 0..3 {
            let mut again = upload(g, &vec![T::nan(); dim]);
            ops.mf.apply(&dx, &mut again).unwrap();
            assert_eq!(bits(&download(g, &again)), bits(&y_mf), "{}", what("reproducible"));
        }
    }

    // The exported matrix: the DBF's pattern and values.
    let (mcsr, ccsr) = (ops.mf.to_host_csr().unwrap(), ops.cpu.to_host_csr().unwrap());
    let dcsr = ops.dbf.to_host_csr().unwrap();
    assert_eq!(mcsr.n, ccsr.n, "{}", what("csr size"));
    assert_eq!(mcsr.indptr, ccsr.indptr, "{}", what("csr pattern"));
    assert_eq!(mcsr.indices, ccsr.indices, "{}", what("csr pattern"));
    assert_eq!(mcsr.indices, dcsr.indices, "{}", what("csr pattern"));
    assert_rel(&what("csr values vs CPU"), &mcsr.values, &ccsr.values, tol);
    assert_rel(&what("csr values vs device DBF"), &mcsr.values, &dcsr.values, tol);

    for scaled in [false, true] {
        let (ml, mh) = ops.mf.gershgorin_bounds(scaled).unwrap();
        for (name, (l, h)) in [
            ("device DBF", ops.dbf.gershgorin_bounds(scaled).unwrap()),
            ("CPU DBF", ops.cpu.gershgorin_bounds(scaled).unwrap()),
        ] {
            let scale = l.abs().max(h.abs());
            assert!(
                (ml - l).abs() <= tol * scale && (mh - h).abs() <= tol * scale,
                "{}: ({ml}, {mh}) vs {name} ({l}, {h})",
                what(&format!("gershgorin, scaled {scaled}"))
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn backend_selects_the_trace_operator() {
    let g = gpu();
    assert_eq!(g.trace_operator(), TraceOperatorKind::Dbf, "the default is the DBF matrix");
    let mf = g.clone().with_trace_operator(TraceOperatorKind::MatrixFree);
    assert_eq!(mf.trace_operator(), TraceOperatorKind::MatrixFree);
    assert_eq!(g.trace_operator(), TraceOperatorKind::Dbf, "a clone's choice is its own");
    let case = random_case(0, 2);
    let disc = Discretization::<f64>::new(&case.mesh, &case.problem, case.k).unwrap();
    let prep = LocalSolver::<f64>::prepare(&g, &disc).unwrap();
    let cond = LocalSolver::<f64>::condense(&g, &disc, &prep).unwrap();
    let (op, _) = Assembler::<f64>::assemble(&g, &disc, &prep, &cond).unwrap();
    assert!(op.as_dbf().is_some() && op.as_matrix_free().is_none());
    let (op, _) = Assembler::<f64>::assemble(&mf, &disc, &prep, &cond).unwrap();
    assert!(op.as_dbf().is_none() && op.as_matrix_free().is_some());
    let low = op.demote().unwrap();
    assert_eq!(low.kind(), TraceOperatorKind::MatrixFree, "demotion keeps the kind");
}

/// The multigrid preconditioner needs the operator's stored blocks: on the matrix-free operator
/// `pcg-mg` is refused with an error that says so, and the DBF operator of the same
/// condensation builds it.
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn multigrid_refuses_the_matrix_free_operator() {
    let g = gpu();
    let case = random_case(1, 2);
    let disc = Discretization::<f64>::new(&case.mesh, &case.problem, case.k).unwrap();
    let prep = LocalSolver::<f64>::prepare(&g, &disc).unwrap();
    let cond = LocalSolver::<f64>::condense(&g, &disc, &prep).unwrap();
    let pcg_mg = Suite::new(SolverChoice::PcgMg, 1e-8, 500);
    for kind in TraceOperatorKind::ALL {
        let backend = with(&g, kind);
        let (op, rhs) = Assembler::<f64>::assemble(&backend, &disc, &prep, &cond).unwrap();
        let mut x = VectorOps::<f64>::zeros(&backend, disc.trace_dofs()).unwrap();
        let solved =
            TraceSolver::<f64, CudaBackend>::solve(&pcg_mg, &backend, &disc, &op, &rhs, &mut x);
        match kind {
            TraceOperatorKind::Dbf => assert!(solved.unwrap().converged),
            TraceOperatorKind::MatrixFree => {
                let err = solved.expect_err("no blocks to project").to_string();
                assert!(err.contains("assembled DBF"), "{err}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_apply_matches_dbf_f64() {
    let g = gpu();
    for case in all_cases() {
        apply_matches::<f64>(&g, &case, 1e-12);
    }
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_apply_matches_dbf_f32() {
    let g = gpu();
    for case in all_cases() {
        apply_matches::<f32>(&g, &case, 1e-5);
    }
}

/// The diagonal and the diagonal blocks: the DBF's slot 0 (the same two values summed in the
/// same order; equal to the bit when K_e is exactly symmetric, as the condensation makes it,
/// hence the tolerance of a few roundings).
fn diagonal_blocks_match<T: DeviceReal>(g: &CudaBackend, case: &Case) {
    let what = |s: &str| format!("{} [{s}]", case.label);
    let tol = 4.0 * T::UNIT_ROUNDOFF;
    let ops = operators::<T>(g, case);
    let blocks = download(g, &ops.mf.diagonal_blocks().unwrap());
    let dbf_blocks = download(g, &ops.dbf.diagonal_blocks().unwrap());
    eprintln!(
        "{}: bitwise equal to the DBF's: {}",
        what("diagonal blocks"),
        bits(&blocks) == bits(&dbf_blocks)
    );
    assert_rel(&what("diagonal blocks vs device DBF"), &blocks, &dbf_blocks, tol);
    assert_rel(
        &what("diagonal blocks vs CPU DBF"),
        &blocks,
        &ops.cpu.diagonal_blocks().unwrap(),
        tol,
    );
    let diagonal = download(g, &ops.mf.diagonal().unwrap());
    assert_rel(
        &what("diagonal vs device DBF"),
        &diagonal,
        &download(g, &ops.dbf.diagonal().unwrap()),
        tol,
    );
    assert_rel(
        &what("diagonal vs CPU DBF"),
        &diagonal,
        &TraceOperator::diagonal(&ops.cpu).unwrap(),
        tol,
    );
    // The diagonal is the blocks' diagonal.
    let nf = ops.mf.block_size();
    let from_blocks: Vec<T> =
        (0..diagonal.len()).map(|t| blocks[(t / nf) * nf * nf + (t % nf) * (nf + 1)]).collect();
    assert_eq!(bits(&diagonal), bits(&from_blocks), "{}", what("diagonal within the blocks"));
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_diagonal_blocks_equal_dbf() {
    let g = gpu();
    for case in all_cases() {
        diagonal_blocks_match::<f64>(&g, &case);
        diagonal_blocks_match::<f32>(&g, &case);
    }
}

/// The f32 copies (mixed precision): the demoted matrix-free operator against the demoted
/// device DBF and the demoted CPU DBF (the DBF rounds the summed diagonal block, the
/// matrix-free operator each cell's part: the same to f32 rounding).
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_demotes_like_dbf() {
    let g = gpu();
    for case in all_cases() {
        let what = |s: &str| format!("{} [{s}]", case.label);
        let ops = operators::<f64>(&g, &case);
        let mf: DeviceTraceOperator<f32> = DemoteOperator::<CudaBackend>::demote(&ops.mf).unwrap();
        let dbf: DeviceTraceOperator<f32> =
            DemoteOperator::<CudaBackend>::demote(&ops.dbf).unwrap();
        let cpu = DemoteOperator::<CpuBackend>::demote(&ops.cpu).unwrap();
        assert_eq!(mf.kind(), TraceOperatorKind::MatrixFree);
        let dim = mf.dim();
        for seed in [31, 32] {
            let x = random::<f32>(dim, seed);
            let dx = upload(&g, &x);
            let mut y_cpu = vec![0.0f32; dim];
            cpu.apply(&x, &mut y_cpu).unwrap();
            let mut dy = upload(&g, &vec![f32::NAN; dim]);
            dbf.apply(&dx, &mut dy).unwrap();
            let y_dbf = download(&g, &dy);
            let mut dy = upload(&g, &vec![f32::NAN; dim]);
            mf.apply(&dx, &mut dy).unwrap();
            let y_mf = download(&g, &dy);
            assert_rel(&what("demoted A x vs device DBF"), &y_mf, &y_dbf, 1e-5);
            assert_rel(&what("demoted A x vs CPU DBF"), &y_mf, &y_cpu, 1e-5);
        }
        // The f32 copy's bounds are those of its own (rounded) values.
        let (l, h) = mf.gershgorin_bounds(true).unwrap();
        let (dl, dh) = dbf.gershgorin_bounds(true).unwrap();
        let scale = dl.abs().max(dh.abs());
        assert!(
            (l - dl).abs() <= 1e-5 * scale && (h - dh).abs() <= 1e-5 * scale,
            "{}",
            what("bounds")
        );
    }
}

/// One pipeline run with the backend `g` set to `kind`.
fn run_pipeline<S: TraceSolver<f64, CudaBackend>>(
    g: &CudaBackend,
    kind: TraceOperatorKind,
    case: &Case,
    solver: &S,
) -> PipelineOutput<f64, CudaBackend> {
    pipeline::solve::<f64, CudaBackend>(
        &with(g, kind),
        &case.mesh,
        &case.problem,
        case.k,
        solver,
        PipelineOptions::default(),
        &mut Silent,
    )
    .unwrap()
}

/// The pipeline with the matrix-free operator and with the DBF matrix, the same solver: the
/// trace solution, the fields and the L2 errors agree. Two Krylov solves whose operators differ
/// by round-off agree to round-off in the trace (checked relative, 1e-11), so the errors agree
/// absolutely to 1e-11 (as the CPU-vs-GPU pipeline test checks them; relative to an error of
/// 1e-9 at k = 6 that would not be round-off).
fn pipelines_agree<S: TraceSolver<f64, CudaBackend>>(
    g: &CudaBackend,
    case: &Case,
    solver: &S,
    trace_tol: f64,
    error_tol: f64,
) {
    let what = |s: &str| format!("{} [{s}]", case.label);
    let d = run_pipeline(g, TraceOperatorKind::Dbf, case, solver);
    let m = run_pipeline(g, TraceOperatorKind::MatrixFree, case, solver);
    assert!(d.report.solve.converged && m.report.solve.converged, "{}", what("converged"));
    let (dt, mt) = (download(g, &d.trace), download(g, &m.trace));
    let (de, me) = (d.report.errors.unwrap(), m.report.errors.unwrap());
    eprintln!(
        "{} ({}): iterations dbf {} matrix-free {}, trace difference {:e}; errors dbf \
         ({:.6e}, {:.6e}, {:.6e}) matrix-free ({:.6e}, {:.6e}, {:.6e})",
        case.label,
        d.report.solver,
        d.report.solve.iterations,
        m.report.solve.iterations,
        rel_diff(&mt, &dt),
        de.u,
        de.q,
        de.u_star,
        me.u,
        me.q,
        me.u_star
    );
    assert_rel(&what("trace"), &mt, &dt, trace_tol);
    let (dh, mh) = (
        LocalSolver::<f64>::fields_to_host(g, &d.fields).unwrap(),
        LocalSolver::<f64>::fields_to_host(g, &m.fields).unwrap(),
    );
    assert_rel(&what("u_h"), &mh.u, &dh.u, trace_tol);
    assert_rel(&what("q_h"), &mh.q, &dh.q, trace_tol);
    for (name, a, b) in [("u", me.u, de.u), ("q", me.q, de.q), ("u*", me.u_star, de.u_star)] {
        assert!(
            (a - b).abs() <= error_tol,
            "{}: matrix-free {a:e}, dbf {b:e}, difference {:e} > {error_tol:e}",
            what(&format!("||{name} - {name}_h||")),
            (a - b).abs()
        );
    }
}

#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_pipeline_matches_dbf_f64() {
    let g = gpu();
    for choice in [SolverChoice::PcgBlockJacobi, SolverChoice::PcgJacobi] {
        let suite = Suite::new(choice, 1e-12, 50_000);
        // Orders 1..=6 on triangles (the range), 1..=3 on tetrahedra.
        for case in all_cases().into_iter().filter(|c| c.k <= 6) {
            pipelines_agree(&g, &case, &Krylov::<f64, CudaBackend>(&suite), 1e-11, 1e-11);
        }
    }
}

/// Mixed-precision refinement (the operator demoted to f32 for the inner solves): converges
/// with the matrix-free operator to the DBF run's solution (the inner f32 operators differ by
/// f32 rounding, so the two refinements take different paths to the same tolerance).
#[test]
#[ignore = "needs a CUDA device; run with --ignored on a GPU machine"]
fn matrix_free_mixed_precision_pipeline_converges() {
    let g = gpu();
    let mixed =
        MixedPrecisionRefinement { tolerance: 1e-12, ..MixedPrecisionRefinement::default() };
    for case in cases().into_iter().take(8) {
        pipelines_agree(&g, &case, &mixed, 1e-8, 1e-9);
    }
}

/// The operator's own type is public (for benchmarks that build it through the backend).
#[allow(dead_code)]
fn _public_type(op: &MatrixFreeOperator<f64>) -> usize {
    op.apply_bytes()
}

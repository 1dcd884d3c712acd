//! The multigrid preconditioner's parts against their definitions: the Galerkin coarse
//! operator, the face transfers, and the V-cycle as an SPD operator.
mod support;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{
    Discretization, HostCsr, MultigridOperator, MultigridOps, Preconditioner, TraceOperator,
    VectorOps, VertexSpace,
};
use hdg_linalg::{Cycle, Multigrid, MultigridSettings};
use rand::{Rng, SeedableRng};
use support::{assemble, hdg_inputs};

fn sprs(a: &HostCsr) -> sprs::CsMat<f64> {
    sprs::CsMat::new((a.n, a.n_cols), a.indptr.clone(), a.indices.clone(), a.values.clone())
}

fn dense(a: &sprs::CsMat<f64>) -> Vec<Vec<f64>> {
    let mut out = vec![vec![0.0; a.cols()]; a.rows()];
    for (v, (i, j)) in a.iter() {
        out[i][j] += *v;
    }
    out
}

#[test]
fn coarse_operator_is_the_galerkin_product() {
    for k in [1, 3] {
        let (mesh, problem) = hdg_inputs(5);
        let disc = Discretization::<f64>::new(&mesh, &problem, k).unwrap();
        let (op, _) = assemble(&disc);
        let space = VertexSpace::new(&disc, 10.0).unwrap();
        let coarse = op.vertex_operator(&space, &disc.topology).unwrap();
        let e = sprs(&space.prolongation());
        let a = sprs(&op.to_host_csr().unwrap());
        let et = e.transpose_view().to_csr();
        let product = &et * &(&a * &e);
        let (want, got) = (dense(&product), dense(&sprs(&coarse)));
        let scale = want.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs()));
        for i in 0..want.len() {
            for j in 0..want.len() {
                assert!((want[i][j] - got[i][j]).abs() <= 1e-13 * scale, "k = {k} ({i}, {j})");
                assert!((got[i][j] - got[j][i]).abs() <= 1e-13 * scale);
            }
        }
    }
}

#[test]
fn face_transfers_are_e_and_its_transpose() {
    let (mesh, problem) = hdg_inputs(6);
    let disc = Discretization::<f64>::new(&mesh, &problem, 2).unwrap();
    let space = VertexSpace::new(&disc, 10.0).unwrap();
    let e = sprs(&space.prolongation());
    let b = CpuBackend;
    let transfer = MultigridOps::<f64>::upload_face_transfer(&b, &space).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
    let coarse: Vec<f64> = (0..e.cols()).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let trace: Vec<f64> = (0..e.rows()).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let mut fine = trace.clone();
    b.prolong_add(&transfer, &coarse, &mut fine).unwrap();
    let ex = product(&e, &coarse);
    for i in 0..fine.len() {
        assert!((fine[i] - trace[i] - ex[i]).abs() < 1e-14);
    }
    let mut restricted = vec![0.0; coarse.len()];
    b.restrict(&transfer, &trace, &mut restricted).unwrap();
    let etx = product(&e.transpose_view().to_csr(), &trace);
    for i in 0..restricted.len() {
        assert!((restricted[i] - etx[i]).abs() < 1e-13);
    }
    let mut short = vec![0.0; coarse.len() - 1];
    assert!(b.restrict(&transfer, &trace, &mut short).is_err());
}

/// A x, by the definition.
fn product(a: &sprs::CsMat<f64>, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; a.rows()];
    for (v, (i, j)) in a.iter() {
        y[i] += v * x[j];
    }
    y
}

/// x . M y for the V-cycle M.
fn form(m: &dyn Preconditioner<f64, CpuBackend>, x: &[f64], y: &[f64]) -> f64 {
    let mut z = vec![0.0; y.len()];
    m.apply(&CpuBackend, &y.to_vec(), &mut z).unwrap();
    x.iter().zip(&z).map(|(a, b)| a * b).sum()
}

#[test]
fn the_cycle_is_symmetric_positive_definite() {
    for (n, k) in [(12, 1), (20, 2), (9, 4)] {
        let (mesh, problem) = hdg_inputs(n);
        let disc = Discretization::<f64>::new(&mesh, &problem, k).unwrap();
        let (op, _) = assemble(&disc);
        let space = VertexSpace::new(&disc, 10.0).unwrap();
        let variants = [Cycle::Multiplicative, Cycle::Additive].map(|c| [(c, true), (c, false)]);
        for (cycle, compressed_smoothing) in variants.into_iter().flatten() {
            // A small direct level, so that the hierarchy has vertex levels below the first;
            // smoothing with the bfloat16 copy and with the operator itself.
            let settings = MultigridSettings {
                trace_cycle: cycle,
                max_direct: 20,
                compressed_smoothing,
                ..MultigridSettings::auto(2, k)
            };
            let mg = Multigrid::new(&CpuBackend, &op, &space, &disc.topology, &settings).unwrap();
            assert!(mg.level_sizes().len() >= 3, "{:?}", mg.level_sizes());
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(n as u64);
            for _ in 0..5 {
                let x: Vec<f64> = (0..op.dim()).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let y: Vec<f64> = (0..op.dim()).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let (xy, yx) = (form(&mg, &x, &y), form(&mg, &y, &x));
                let (xx, yy) = (form(&mg, &x, &x), form(&mg, &y, &y));
                assert!(
                    (xy - yx).abs() <= 1e-12 * (xx * yy).sqrt(),
                    "{cycle:?}, compressed {compressed_smoothing}: {xy} vs {yx}"
                );
                assert!(xx > 0.0 && yy > 0.0);
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let (mesh, problem) = hdg_inputs(4);
    let disc = Discretization::<f64>::new(&mesh, &problem, 2).unwrap();
    let space = VertexSpace::new(&disc, 10.0).unwrap();
    let settings = MultigridSettings::auto(2, 2);
    // An operator without stored blocks does not implement MultigridOperator: the multigrid
    // cannot be asked to build on it (the CUDA matrix-free operator, which shares a type with
    // the DBF, refuses at run time: its GPU tests).
    let n = disc.trace_dofs();
    // The space of another discretization.
    let (op, _) = assemble(&Discretization::<f64>::new(&mesh, &problem, 3).unwrap());
    assert!(Multigrid::new(&CpuBackend, &op, &space, &disc.topology, &settings).is_err());
    // Nonsense settings.
    let (op, _) = assemble(&disc);
    let bad = MultigridSettings { trace_smoothing_degree: 0, ..settings };
    assert!(Multigrid::new(&CpuBackend, &op, &space, &disc.topology, &bad).is_err());
    let bad = MultigridSettings { trace_smoothing_range: 1.0, ..settings };
    assert!(Multigrid::new(&CpuBackend, &op, &space, &disc.topology, &bad).is_err());
    let mut x = vec![0.0; n];
    let mg = Multigrid::new(&CpuBackend, &op, &space, &disc.topology, &settings).unwrap();
    assert!(mg.apply(&CpuBackend, &vec![1.0; n + 1], &mut x).is_err());
    let _ = VectorOps::<f64>::len(&CpuBackend, &x);
}

/// `pcg-mg` with its vertex space made ahead (TraceSolver::plan, what the pipeline runs while
/// the backend prepares, condenses and assembles) is the same solve as without: the same
/// iterations and the same trace values to the bit; and the pipeline does use the plan (its
/// note says so).
#[test]
fn a_solve_with_its_plan_made_ahead_is_the_same_solve() {
    use hdg_core::{pipeline, PipelineOptions, Silent, TraceSolver};
    use hdg_linalg::{SolverChoice, Suite};
    let (mesh, problem) = hdg_inputs(12);
    let disc = Discretization::<f64>::new(&mesh, &problem, 2).unwrap();
    let (op, rhs) = assemble(&disc);
    let suite = Suite::new(SolverChoice::PcgMg, 1e-10, 500);
    let solve = |plan| {
        let mut x = CpuBackend.zeros(disc.trace_dofs()).unwrap();
        let report = suite.solve_planned(&CpuBackend, &disc, plan, &op, &rhs, &mut x).unwrap();
        (x, report)
    };
    let (x, report) = solve(None);
    let work = TraceSolver::<f64, CpuBackend>::plan(&suite, &disc).expect("pcg-mg plans ahead");
    let (x_planned, report_planned) = solve(Some(work().unwrap()));
    assert_eq!(report.iterations, report_planned.iterations);
    assert!(x.iter().zip(&x_planned).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(report_planned.notes.iter().any(|n| n.contains("alongside the element stages")));
    assert!(!report.notes.iter().any(|n| n.contains("alongside")));

    let out = pipeline::solve::<f64, _>(
        &CpuBackend,
        &mesh,
        &problem,
        2,
        &suite,
        PipelineOptions::default(),
        &mut Silent,
    )
    .unwrap();
    assert_eq!(out.report.solve.iterations, report.iterations);
    assert!(out.report.solve.notes.iter().any(|n| n.contains("alongside the element stages")));
    let plain = Suite { choice: SolverChoice::Cg, ..suite };
    assert!(TraceSolver::<f64, CpuBackend>::plan(&plain, &disc).is_none());
}

//! Every solver of the suite, run as the pipeline's trace solver, reaches 1e-10 on 2D HDG trace
//! systems for k = 1..4 and agrees with the sparse direct solve to 1e-8.
use hdg_backend_cpu::CpuBackend;
use hdg_core::{solve, Manufactured, PipelineOptions, Problem, Silent, TraceSolver};
use hdg_linalg::{MixedPrecisionRefinement, SolverChoice, Suite};
use hdg_mesh::{generate, Diagonal};

#[test]
fn every_solver_matches_the_direct_solve() {
    let mesh = generate::perturb(&generate::unit_square(6, Diagonal::Alternating).unwrap(), 0.2, 8)
        .unwrap();
    for k in 1..=4 {
        let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.5);
        let run = |choice: SolverChoice| {
            let suite = Suite::new(choice, 1e-10, 50_000);
            let mixed = MixedPrecisionRefinement { tolerance: 1e-10, ..Default::default() };
            let solver: &dyn TraceSolver<f64, CpuBackend> =
                if choice == SolverChoice::Mixed { &mixed } else { &suite };
            solve::<f64, CpuBackend>(
                &CpuBackend,
                &mesh,
                &problem,
                k,
                solver,
                PipelineOptions::default(),
                &mut Silent,
            )
            .unwrap_or_else(|e| panic!("{} at k = {k}: {e}", choice.name()))
        };
        let direct = run(SolverChoice::Direct);
        let norm = direct.trace.iter().map(|v| v * v).sum::<f64>().sqrt();
        for choice in SolverChoice::ALL {
            let out = run(choice);
            let report = &out.report.solve;
            let diff = out
                .trace
                .iter()
                .zip(&direct.trace)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
                .sqrt();
            println!(
                "k = {k} {:<17} iterations {:>5} residual {:.1e} |x - x_direct| / |x_direct| {:.1e}",
                choice.name(),
                report.iterations,
                report.relative_residual,
                diff / norm
            );
            assert!(report.converged, "{} at k = {k}: {report:?}", choice.name());
            assert!(
                report.relative_residual <= 1e-10,
                "{} at k = {k}: residual {:e}",
                choice.name(),
                report.relative_residual
            );
            assert!(
                diff <= 1e-8 * norm,
                "{} at k = {k}: differs from direct by {:e}",
                choice.name(),
                diff / norm
            );
        }
    }
}

//! Precision and numbering must not change the answer beyond round-off.
use hdg_core::{Manufactured, Problem};
use hdg_mesh::{generate, Diagonal};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tests::{per_backend, Runs};

per_backend! {
    fn f32_agrees_with_f64_to_f32_accuracy(backend) {
        let mesh =
            generate::perturb(&generate::unit_square(8, Diagonal::Alternating).unwrap(), 0.2, 1)
                .unwrap();
        for k in [1, 2, 3] {
            let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
            let o64 = backend.run::<f64>(&mesh, &problem, k);
            let o32 = backend.run::<f32>(&mesh, &problem, k);
            let scale = o64.fields.u.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = o64
                .fields
                .u
                .iter()
                .zip(&o32.fields.u)
                .fold(0.0f64, |m, (a, b)| m.max((a - *b as f64).abs()));
            let (e64, e32) = (o64.report.errors.unwrap(), o32.report.errors.unwrap());
            println!(
                "k = {k}: max |u64 - u32| / max |u| = {:.2e}; errors f64 {e64:?} f32 {e32:?}",
                diff / scale
            );
            assert!(diff <= 1e-4 * scale, "k = {k}: {diff:e}");
            // | |u - u_32| - |u - u_64| | <= |u_32 - u_64|: the errors differ by at most the
            // (f32-sized) difference of the solutions; |u| ~ 1 and |q| ~ pi here.
            assert!((e64.u - e32.u).abs() <= 1e-4, "k = {k}");
            assert!((e64.q - e32.q).abs() <= 4e-4, "k = {k}");
            assert!((e64.u_star - e32.u_star).abs() <= 1e-4, "k = {k}");
        }
    }

    fn random_cell_renumbering_changes_errors_only_by_round_off(backend) {
        let mesh = generate::perturb(&generate::unit_square(6, Diagonal::Right).unwrap(), 0.25, 4)
            .unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        let mut perm: Vec<usize> = (0..mesh.n_cells()).collect();
        perm.shuffle(&mut rng);
        let renumbered = mesh.renumber_cells(&perm).unwrap();
        let mut vperm: Vec<usize> = (0..mesh.n_vertices()).collect();
        vperm.shuffle(&mut rng);
        let both = renumbered.renumber_vertices(&vperm).unwrap();
        for k in [1, 2, 4] {
            let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
            let base = backend.run::<f64>(&mesh, &problem, k).report.errors.unwrap();
            for m in [&renumbered, &both] {
                let e = backend.run::<f64>(m, &problem, k).report.errors.unwrap();
                for (a, b) in [(base.u, e.u), (base.q, e.q), (base.u_star, e.u_star)] {
                    // Round-off, and the trace solve's tolerance (1e-12) seen through a
                    // different order of operations.
                    assert!((a - b).abs() <= 1e-9 * a + 1e-12, "k = {k}: {a:e} vs {b:e}");
                }
            }
        }
    }
}

/// The CPU error norms are summed in a fixed order: the same bits on one thread and on three
/// (a parallel reduction that splits where threads steal work gives different last bits).
#[test]
fn error_norms_do_not_depend_on_the_thread_count() {
    use hdg_backend_cpu::CpuBackend;
    use hdg_core::{LocalSolver, Postprocessor};
    let mesh =
        generate::perturb(&generate::unit_square(40, Diagonal::Alternating).unwrap(), 0.3, 2)
            .unwrap();
    let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.5);
    let out = tests::Backend::Cpu.run::<f64>(&mesh, &problem, 3);
    let disc = tests::discretization::<f64>(&mesh, &problem, 3);
    let backend = CpuBackend::new();
    let prep = backend.prepare(&disc).unwrap();
    let exact = problem.exact.as_ref().unwrap();
    let bits = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let e = pool.install(|| {
            backend.error_norms(&disc, &prep, &out.fields, &out.u_star, exact).unwrap()
        });
        [e.u, e.q, e.u_star].map(f64::to_bits)
    };
    let one = bits(1);
    for _ in 0..4 {
        assert_eq!(bits(3), one);
    }
}

//! The facade as an embedding uses it: the solution it returns, evaluated at points and on
//! faces against exact values computed here from formulas, and the failures it reports.
use hdg::mesh::Diagonal;
use hdg::{generate, Error, ExactSolution, Manufactured, Problem, Solver, SolverChoice};

/// A polynomial of degree k is reproduced exactly by u_h, q_h and the trace (`docs/formulation.md`,
/// section 'What a correct solution shows'), so every evaluation of the solution must give the
/// exact values: the check of the point locator, the reference-to-physical map, the basis
/// evaluation and the face parametrisation together, against the formula of the polynomial itself.
#[test]
fn evaluation_and_trace_reproduce_a_polynomial() {
    for (mesh, k) in [
        (
            generate::perturb(&generate::unit_square(5, Diagonal::Right).unwrap(), 0.3, 7).unwrap(),
            3,
        ),
        (generate::unit_cube(2).unwrap(), 2),
    ] {
        let d = mesh.dim();
        let problem = Problem::manufactured(Manufactured::Polynomial(k), 1.0, 0.0);
        let exact = problem.exact.clone().unwrap();
        let solution = Solver::new(mesh, problem).order(k).solve().unwrap();
        let mesh = solution.mesh();
        assert_eq!(solution.cells().len(), mesh.n_cells());
        assert_eq!(solution.faces().len(), mesh.n_faces());
        // Points inside cells, on faces and at vertices.
        let mut points = Vec::new();
        for i in 0..200 {
            let t = i as f64 / 200.0;
            points.extend(
                [(t * 7.31).fract(), (t * 3.77 + 0.05).fract(), (t * 5.13 + 0.5).fract()]
                    .iter()
                    .take(d),
            );
        }
        for v in 0..mesh.n_vertices() {
            points.extend_from_slice(mesh.vertex(v));
        }
        let values = solution.evaluate_many(&points).unwrap();
        for (x, value) in points.chunks(d).zip(&values) {
            let value = value.expect("a point of the unit square or cube is in the mesh");
            let mut grad = [0.0; 3];
            let u = exact.u_and_gradient(x, &mut grad[..d]);
            let scale = 1.0 + u.abs();
            assert!((value.u - u).abs() < 1e-9 * scale, "u_h at {x:?}: {} vs {u}", value.u);
            assert!((value.u_star - u).abs() < 1e-9 * scale, "u* at {x:?}");
            for r in 0..d {
                assert!((value.q[r] + grad[r]).abs() < 1e-8 * (1.0 + grad[r].abs()), "q at {x:?}");
            }
            assert_eq!(solution.evaluate(x).unwrap(), Some(value));
        }
        // The trace on every face, boundary faces included, at the face's centroid and at a
        // point off it, in the canonical parametrisation of the module docs.
        let params: &[&[f64]] =
            if d == 2 { &[&[0.0], &[0.6]] } else { &[&[-1.0 / 3.0, -1.0 / 3.0], &[0.2, -0.7]] };
        let mut boundary = 0;
        for face in solution.faces() {
            boundary += face.boundary_tag.is_some() as usize;
            for s in params {
                let mut lambda = [0.0; 3];
                hdg::core::reference::face_parameter_barycentric(s, &mut lambda[..d]);
                let mut x = [0.0; 3];
                for (i, &v) in face.vertices.iter().enumerate() {
                    for r in 0..d {
                        x[r] += lambda[i] * mesh.vertex(v)[r];
                    }
                }
                let u = exact.u(&x[..d]);
                let trace = solution.trace_at(face.index, s);
                assert!((trace - u).abs() < 1e-9 * (1.0 + u.abs()), "trace on face {}", face.index);
            }
        }
        assert_eq!(boundary, mesh.n_boundary_faces());
        // Outside the domain: nothing; a point of the wrong dimension: an error.
        assert_eq!(solution.evaluate(&vec![1.5; d]).unwrap(), None);
        assert!(solution.evaluate_many(&[0.5; 5]).is_err() || d == 5);
    }
}

/// The solution's own error norms against a closure agree with the backend's, computed in the
/// pipeline from the manufactured description; `errors_against` (u only) gives the same u and
/// u* errors and NaN for q.
#[test]
fn error_norms_against_closures_match_the_pipeline() {
    let mesh = generate::unit_square(8, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
    let exact = problem.exact.clone().unwrap();
    let solution = Solver::new(mesh, problem).order(2).solve().unwrap();
    let pipeline = solution.report().errors.unwrap();
    let closures = solution.errors(&exact.to_closures()).unwrap();
    // The pipeline evaluates the manufactured u with vectorised sin and cos (hdg_core::lanes),
    // the closures with libm's: u differs by a few ulp of |u| <= e, so an error norm by about
    // that much in absolute terms (1e-17 seen), not relative to the small error itself.
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a + 1e-14;
    for (a, b) in
        [(pipeline.u, closures.u), (pipeline.q, closures.q), (pipeline.u_star, closures.u_star)]
    {
        assert!(same(a, b), "{a} vs {b}");
    }
    let u_only = solution.errors_against(move |x| exact.u(x)).unwrap();
    assert!(same(u_only.u, pipeline.u));
    assert!(u_only.q.is_nan());
    let cells = solution.cell_errors(&ExactSolution::Manufactured(Manufactured::ExpSin)).unwrap();
    let total: f64 = cells.iter().map(|c| c[0]).sum();
    assert!((total.sqrt() - pipeline.u).abs() <= 1e-12 * pipeline.u);
}

/// An iterative solve capped below what it needs is an error that carries the solution it
/// reached, with the report saying so.
#[test]
fn an_unconverged_solve_is_an_error_with_the_partial_solution() {
    let mesh = generate::unit_square(16, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let result =
        Solver::new(mesh, problem).order(2).solver(SolverChoice::Cg).max_iterations(5).solve();
    match result {
        Err(Error::NotConverged(solution)) => {
            let report = solution.report();
            assert!(!report.solve.converged);
            assert!(report.solve.iterations <= 5);
            assert!(report.solve.relative_residual > 1e-10);
            assert!(solution.u().iter().all(|v| v.is_finite()));
            let message = Error::NotConverged(solution).to_string();
            assert!(message.contains("did not converge"), "{message}");
        }
        other => panic!("expected NotConverged, got {other:?}"),
    }
}

/// Failures in user code and bad data are errors that say which closure and where.
#[test]
fn user_code_failures_are_named_errors() {
    let mesh = || generate::unit_square(4, Diagonal::Right).unwrap();
    let source_panics = Problem::builder().source(|_| panic!("no source here")).build();
    let err = Solver::new(mesh(), source_panics).solve().unwrap_err().to_string();
    assert!(err.contains("source") && err.contains("no source here"), "{err}");

    let nan_dirichlet =
        Problem::builder().dirichlet(|x| if x[0] > 0.99 { f64::NAN } else { 0.0 }).build();
    let err = Solver::new(mesh(), nan_dirichlet).solve().unwrap_err().to_string();
    assert!(err.contains("Dirichlet") && err.contains("face"), "{err}");

    let bad_kappa = Problem::builder().kappa(hdg::Coefficient::field(|x| x[0] - 0.5)).build();
    let err = Solver::new(mesh(), bad_kappa).solve().unwrap_err().to_string();
    assert!(err.contains("kappa") && err.contains("cell"), "{err}");

    let err = Solver::new(mesh(), Problem::builder().build()).order(0).solve().unwrap_err();
    assert!(matches!(err, Error::Core(hdg::CoreError::InvalidOrder { .. })), "{err}");

    // The exact solution panicking while errors are computed after the solve.
    let exact_panics = Problem::builder().exact(|_| panic!("no exact")).build();
    let err = Solver::new(mesh(), exact_panics).solve().unwrap_err().to_string();
    assert!(err.contains("exact solution panicked"), "{err}");
}

/// Per-tag Dirichlet data: each tag's faces get their own g_D, seen in the full trace.
#[test]
fn dirichlet_data_per_tag_reach_their_faces() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem =
        Problem::builder().dirichlet(|_| 1.0).dirichlet_on(hdg::mesh::TAG_LEFT, |_| 5.0).build();
    let solution = Solver::new(mesh, problem).order(1).solve().unwrap();
    for face in solution.faces().filter(|f| f.boundary_tag.is_some()) {
        let expected = if face.boundary_tag == Some(hdg::mesh::TAG_LEFT) { 5.0 } else { 1.0 };
        let s: &[f64] = &[0.3];
        assert!((solution.trace_at(face.index, s) - expected).abs() < 1e-12);
    }
}

/// The same solve on the CUDA backend gives the same solution as on the CPU (to round-off),
/// full trace included, and the same point values.
#[test]
#[ignore = "needs a CUDA GPU and the cuda feature"]
fn the_cuda_backend_gives_the_cpu_solution() {
    use hdg::Backend;
    let mesh =
        generate::perturb(&generate::unit_square(12, Diagonal::Right).unwrap(), 0.2, 3).unwrap();
    let problem =
        Problem::manufactured(Manufactured::ExpSin, 1.0, 0.5).with_mixed_boundary(2, 1.0).unwrap();
    let solve = |backend| {
        Solver::new(mesh.clone(), problem.clone()).order(3).backend(backend).solve().unwrap()
    };
    let (cpu, cuda) = (solve(Backend::Cpu), solve(Backend::Cuda));
    assert_eq!(cuda.report().backend, "cuda");
    let close = |what: &str, a: &[f64], b: &[f64]| {
        let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(err <= 1e-9 * scale, "{what}: {err:e} (scale {scale:e})");
    };
    close("u", cpu.u(), cuda.u());
    close("q", cpu.q(), cuda.q());
    close("u*", cpu.u_star(), cuda.u_star());
    close("trace", cpu.trace(), cuda.trace());
    let points = [0.1, 0.2, 0.5, 0.5, 0.93, 0.71];
    for (a, b) in
        cpu.evaluate_many(&points).unwrap().iter().zip(cuda.evaluate_many(&points).unwrap())
    {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!((a.u - b.u).abs() < 1e-9 && (a.u_star - b.u_star).abs() < 1e-9);
    }
}

/// A backend started ahead of the run (`Backend::start`, here while the mesh is built) is the
/// run's: the solver takes its kind, and the solution is the one of a solver that creates its
/// backend itself. Without the CUDA feature, a CUDA start says so when waited for.
#[test]
fn a_started_backend_runs_the_solve() {
    use hdg::Backend;
    let start = Backend::Cpu.start();
    let mesh = generate::unit_square(6, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let started = start.wait().unwrap();
    assert_eq!((started.backend(), started.seconds()), (Backend::Cpu, 0.0));
    // `on_started` sets the backend: a solver set up for CUDA runs on the CPU it was given.
    let solver = Solver::new(mesh.clone(), problem.clone()).backend(Backend::Cuda);
    let solver = solver.on_started(started).order(2);
    assert_eq!(solver.backend_choice(), Backend::Cpu);
    let given = solver.solve().unwrap();
    let own = Solver::new(mesh, problem).order(2).solve().unwrap();
    assert_eq!(given.report().backend, "cpu");
    assert_eq!(given.trace(), own.trace());
    #[cfg(not(feature = "cuda"))]
    {
        let refused = Backend::Cuda.start().wait().unwrap_err().to_string();
        assert!(refused.contains("no CUDA support"), "{refused}");
    }
}

/// The CUDA backend started on its own thread while the mesh is built runs the solve: the
/// same solution as a solver that creates its backend on the calling thread, and two solvers
/// given clones of one started backend share its device.
#[test]
#[ignore = "needs a CUDA GPU and the cuda feature"]
fn a_cuda_backend_started_beside_the_mesh_runs_the_solve() {
    use hdg::Backend;
    let start = Backend::Cuda.start();
    let mesh = generate::unit_square(16, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::ExpSin, 1.0, 0.0);
    let started = start.wait().unwrap();
    assert_eq!(started.backend(), Backend::Cuda);
    assert!(started.seconds() > 0.0);
    let own = Solver::new(mesh.clone(), problem.clone()).order(3).backend(Backend::Cuda);
    let own = own.solve().unwrap();
    for _ in 0..2 {
        let given = Solver::new(mesh.clone(), problem.clone()).order(3).on_started(started.clone());
        let given = given.solve().unwrap();
        assert_eq!(given.report().backend, "cuda");
        assert_eq!(given.report().solve.iterations, own.report().solve.iterations);
        assert_eq!(given.trace(), own.trace());
    }
}

/// `Solver::run` is the whole run as a program reports it: it keeps what it is asked to (the
/// trace matrix, square and symmetric, of the report's size; no solution when told not to),
/// reports a capped solve instead of failing, and refuses what the chosen backend cannot do.
#[test]
fn a_run_keeps_what_it_is_asked_to_and_reports_a_capped_solve() {
    use hdg::{Precision, Silent, TraceOperatorKind};
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let solver = Solver::new(mesh, problem).order(2);
    let run = solver.clone().keep_operator(true).keep_solution(false).run(&mut Silent).unwrap();
    assert!(run.solution.is_none() && run.device_memory.is_none());
    assert!(run.report.solve.converged);
    // 4 x 4 squares: 56 edges, 16 of them on the (Dirichlet) boundary, 3 unknowns per edge.
    let a = run.trace_matrix.as_ref().expect("the trace matrix was asked for");
    assert_eq!((a.n, a.n_cols, run.report.trace_dofs), (120, 120, 120));
    let entry = |i: usize, j: usize| {
        (a.indptr[i]..a.indptr[i + 1]).find(|&p| a.indices[p] == j).map_or(0.0, |p| a.values[p])
    };
    for i in 0..a.n {
        for p in a.indptr[i]..a.indptr[i + 1] {
            let j = a.indices[p];
            assert!((a.values[p] - entry(j, i)).abs() <= 1e-12 * a.values[p].abs().max(1.0));
        }
    }
    let json = hdg::json::run(&run);
    assert_eq!(json["operator"], "dbf");
    assert_eq!(json["trace_dofs"], 120);

    let capped = solver.clone().solver(SolverChoice::Cg).max_iterations(2).run(&mut Silent);
    let capped = capped.expect("a capped solve is reported, not an error");
    assert!(!capped.report.solve.converged && capped.report.solve.iterations == 2);
    assert!(capped.solution.is_some(), "the solution is kept by default");

    let refused = solver.clone().operator(TraceOperatorKind::MatrixFree).run(&mut Silent);
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("CUDA backend only"), "{message}");
    let refused = solver.precision(Precision::F32).solver(SolverChoice::Mixed).run(&mut Silent);
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("refines an f64 solution"), "{message}");
}

/// `Solver::compare_solvers` runs each solver on one assembled system: every row converges to
/// the solver's tolerance and recovers the same discretisation error.
#[test]
fn solvers_compared_on_one_system_agree() {
    let mesh = generate::unit_square(6, Diagonal::Right).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let choices = [SolverChoice::Direct, SolverChoice::PcgMg, SolverChoice::Cg];
    let mut seen = Vec::new();
    let comparison = Solver::new(mesh, problem)
        .order(2)
        .compare_solvers(&choices, &mut hdg::Silent, &mut |row| seen.push(row.solver.clone()))
        .unwrap();
    assert_eq!(seen, ["direct", "pcg-mg", "cg"]);
    assert_eq!(comparison.rows.len(), 3);
    let reference = comparison.rows[0].error_u;
    for row in &comparison.rows {
        assert!(row.converged && row.relative_residual <= 1e-10, "{row:?}");
        assert!((row.error_u - reference).abs() <= 1e-8 * reference, "{row:?}");
    }
}

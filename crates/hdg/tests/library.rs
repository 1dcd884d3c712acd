//! What a new user of the library meets first: mistakes that must be errors (a condition on a
//! boundary tag the mesh lacks, a point of the wrong dimension), a panicking closure that must
//! be an error and print nothing, closures as coefficients, the report's summary, and the
//! functionals of a solution against values computed by hand.
use std::f64::consts::PI;

use hdg::functionals::{Boundary, Field};
use hdg::mesh::{Diagonal, TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP};
use hdg::{functionals, generate, Coefficient, Mesh, Problem, Solution, Solver};

/// -lap u = f for u = sin(pi x) sin(pi y), u = 0 on the boundary of the unit square.
fn sine_problem() -> Problem {
    Problem::builder()
        .source(|x| 2.0 * PI * PI * (PI * x[0]).sin() * (PI * x[1]).sin())
        .exact(|x| (PI * x[0]).sin() * (PI * x[1]).sin())
        .build()
}

/// u = x^2 y: -lap u = -2 y, Dirichlet data u; order 3 reproduces it exactly.
fn polynomial_solution() -> Solution {
    let mesh =
        generate::perturb(&generate::unit_square(6, Diagonal::Right).unwrap(), 0.3, 5).unwrap();
    let problem = Problem::builder()
        .polynomial_source(1, |x| -2.0 * x[1])
        .dirichlet(|x| x[0] * x[0] * x[1])
        .build();
    Solver::new(mesh, problem).order(3).solve().unwrap()
}

#[test]
fn a_condition_on_a_tag_the_mesh_lacks_is_refused() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::builder().neumann(9, |_, _| 1.0).build();
    let err = Solver::new(mesh.clone(), problem).solve().unwrap_err().to_string();
    assert!(
        err.contains("Neumann condition is given on boundary tag 9")
            && err.contains("its boundary tags: 1, 2, 3, 4"),
        "{err}"
    );
    let problem = Problem::builder().robin(0, 1.0, |_, _| 1.0).build();
    let err = Solver::new(mesh, problem).solve().unwrap_err().to_string();
    assert!(err.contains("Robin condition is given on boundary tag 0"), "{err}");
}

/// The test binary runs itself with `HDG_LIBRARY_PANIC_CHILD` set; the child's closures panic
/// in every place a solve runs user code (on Rayon's workers too), and each panic must come
/// back as an error with its message and leave nothing on stderr. A panic outside the library
/// still prints: the hook hands it on.
#[test]
fn a_panicking_closure_is_an_error_and_prints_nothing() {
    if std::env::var_os("HDG_LIBRARY_PANIC_CHILD").is_some() {
        panicking_closures();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["a_panicking_closure_is_an_error_and_prints_nothing", "--exact", "--nocapture"])
        .env("HDG_LIBRARY_PANIC_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 passed"), "the child ran no test: {stdout}");
    let printed: Vec<&str> = stderr.lines().filter(|l| l.contains("panicked")).collect();
    assert_eq!(printed.len(), 1, "{stderr}");
    assert!(stderr.contains("outside the library"), "{stderr}");
}

/// The child's part of [`a_panicking_closure_is_an_error_and_prints_nothing`].
fn panicking_closures() {
    let mesh = generate::unit_square(16, Diagonal::Right).unwrap();
    let solve = |problem: Problem| {
        Solver::new(mesh.clone(), problem).order(2).solve().unwrap_err().to_string()
    };
    let cases = [
        (
            Problem::builder()
                .kappa(|x: &[f64]| if x[0] > 0.7 { panic!("kappa fails at x > 0.7") } else { 1.0 })
                .build(),
            "kappa fails at x > 0.7",
        ),
        (
            Problem::builder().source(|x| if x[1] > 0.6 { panic!("f fails") } else { 1.0 }).build(),
            "f fails",
        ),
        (
            Problem::builder()
                .neumann(TAG_TOP, |x, _| if x[0] > 0.5 { panic!("g fails") } else { 0.0 })
                .build(),
            "g fails",
        ),
        (
            Problem::builder()
                .dirichlet(|x| if x[0] > 0.5 { panic!("g_D fails") } else { 0.0 })
                .build(),
            "g_D fails",
        ),
        (
            Problem::builder().exact(|x| if x[0] > 0.5 { panic!("u fails") } else { 0.0 }).build(),
            "u fails",
        ),
    ];
    for (problem, message) in cases {
        let err = solve(problem);
        assert!(err.contains("panicked") && err.contains(message), "{err}");
    }
    // A panic of the program's own, outside the library: printed as always.
    let unrelated = std::thread::spawn(|| panic!("outside the library")).join();
    assert!(unrelated.is_err());
}

#[test]
fn a_point_of_the_wrong_dimension_is_an_error() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let solution = Solver::new(mesh, Problem::builder().source(|_| 1.0).build()).solve().unwrap();
    let err = solution.evaluate(&[0.5, 0.5, 0.5]).unwrap_err().to_string();
    assert!(err.contains("has 3 coordinates, but the mesh is 2D"), "{err}");
    assert!(solution.evaluate(&[0.5]).is_err());
    assert!(solution.evaluate(&[f64::NAN, 0.5]).is_err());
    assert_eq!(solution.evaluate(&[1.5, 0.5]).unwrap(), None);
    assert!(solution.evaluate(&[0.5, 0.5]).unwrap().is_some());
}

/// A closure is a kappa: the same solve, to the bit, as with `Coefficient::field`.
#[test]
fn a_closure_is_a_coefficient() {
    let mesh = generate::unit_square(6, Diagonal::Right).unwrap();
    let with = |kappa: Coefficient| {
        let problem = Problem::builder().kappa(kappa).source(|_| 1.0).build();
        Solver::new(mesh.clone(), problem).order(2).solve().unwrap()
    };
    let closure = {
        let problem =
            Problem::builder().kappa(|x: &[f64]| 1.0 + x[0] * x[1]).source(|_| 1.0).build();
        Solver::new(mesh.clone(), problem).order(2).solve().unwrap()
    };
    let field = with(Coefficient::field(|x| 1.0 + x[0] * x[1]));
    let constant = with(Coefficient::Constant(1.0));
    assert_eq!(closure.u(), field.u());
    assert_ne!(closure.u(), constant.u(), "the closure was not used");
}

/// A mesh is a value: a clone solves the same problem to the same bits.
#[test]
fn a_mesh_is_clone() {
    let mesh: Mesh = generate::unit_square(5, Diagonal::Alternating).unwrap();
    let copy = mesh.clone();
    let a = Solver::new(mesh, sine_problem()).order(2).solve().unwrap();
    let b = Solver::new(copy, sine_problem()).order(2).solve().unwrap();
    assert_eq!(a.u(), b.u());
    assert_eq!(a.mesh().vertices(), b.mesh().vertices());
}

#[test]
fn the_report_has_a_summary() {
    let mesh = generate::unit_square(8, Diagonal::Right).unwrap();
    let solution = Solver::new(mesh, sine_problem()).order(2).solve().unwrap();
    let report = solution.report();
    let text = report.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert_eq!(
        lines[0],
        format!("128 cells, order 2, {} trace unknowns (cpu, f64)", report.trace_dofs)
    );
    assert!(
        lines[1].starts_with(&format!(
            "trace solve: pcg-mg, {} iterations, relative residual",
            report.solve.iterations
        )) && lines[1].ends_with("(converged)"),
        "{text}"
    );
    let errors = report.errors.unwrap();
    assert_eq!(
        lines[2],
        format!("L2 errors: u_h {:.1e}, q_h -, u* {:.1e}", errors.u, errors.u_star)
    );
    assert!(
        lines[3].starts_with(&format!("time: {:.3} s (setup ", report.timings.total)),
        "{text}"
    );
}

/// The integral of u_h and u* for u = sin(pi x) sin(pi y): 4 / pi^2; the outward flux of q
/// over the boundary is the integral of f = 2 pi^2 u, 8, and 2 through each side by symmetry;
/// u_h lies between 0 (at the boundary) and 1 (at the centre, a vertex of the mesh).
#[test]
fn functionals_of_the_sine_solution() {
    let mesh = generate::unit_square(16, Diagonal::Right).unwrap();
    let solution = Solver::new(mesh, sine_problem()).order(3).solve().unwrap();
    let exact = 4.0 / (PI * PI);
    let u = functionals::integral(&solution, Field::U);
    let u_star = functionals::integral(&solution, Field::UStar);
    assert!((u - exact).abs() < 1e-7, "{u} vs {exact}");
    assert!((u_star - exact).abs() < 1e-7, "{u_star} vs {exact}");
    // The method conserves the numerical flux: the total agrees with the integral of f to the
    // solver's tolerance and the quadrature of f, far below the discretisation error.
    let total = functionals::boundary_flux(&solution, Boundary::All).unwrap();
    assert!((total - 8.0).abs() < 1e-8, "{total}");
    let mut sides = 0.0;
    for tag in [TAG_BOTTOM, TAG_RIGHT, TAG_TOP, TAG_LEFT] {
        let side = functionals::boundary_flux(&solution, Boundary::Tag(tag)).unwrap();
        assert!((side - 2.0).abs() < 1e-5, "tag {tag}: {side}");
        sides += side;
    }
    assert!((sides - total).abs() < 1e-12);
    let range = functionals::extrema(&solution, Field::U);
    assert!(range.min.value.abs() < 1e-5, "{range:?}");
    assert!((range.max.value - 1.0).abs() < 1e-5, "{range:?}");
    assert!((range.max.at[0] - 0.5).abs() < 1e-12 && (range.max.at[1] - 0.5).abs() < 1e-12);
    let err = functionals::boundary_flux(&solution, Boundary::Tag(7)).unwrap_err().to_string();
    assert!(err.contains("no boundary tag 7"), "{err}");
}

/// u = x^2 y, reproduced exactly at order 3: its integral is 1/6 (1/48 over x < 1/2); the
/// outward flux of q = -grad u is -1 through x = 1 (-2 y), 0 through x = 0, -1/3 through
/// y = 1 (-x^2) and 1/3 through y = 0, -1 in all (the integral of f = -2 y); its values lie
/// in [0, 1], taken at the corners (0, 0) ... and (1, 1).
#[test]
fn functionals_of_a_reproduced_polynomial_are_exact() {
    let solution = polynomial_solution();
    let mesh = solution.mesh();
    for field in [Field::U, Field::UStar] {
        let total = functionals::integral(&solution, field);
        assert!((total - 1.0 / 6.0).abs() < 1e-12, "{field:?}: {total}");
    }
    let regions: Vec<u32> = (0..mesh.n_cells())
        .map(|c| {
            let x: f64 = mesh.cell_vertices(c).iter().map(|&v| mesh.vertex(v)[0]).sum::<f64>();
            if x / 3.0 < 0.5 {
                1
            } else {
                2
            }
        })
        .collect();
    // The perturbation moves interior vertices: the region boundary is not x = 1/2, so the
    // region integrals are compared with their own sum and the unperturbed value is not used.
    let left = functionals::region_integral(&solution, Field::U, &regions, 1).unwrap();
    let right = functionals::region_integral(&solution, Field::U, &regions, 2).unwrap();
    assert!((left + right - 1.0 / 6.0).abs() < 1e-12 && left > 0.0 && right > left);
    assert!(functionals::region_integral(&solution, Field::U, &regions, 3).is_err());
    assert!(functionals::region_integral(&solution, Field::U, &regions[1..], 1).is_err());
    for (tag, flux) in
        [(TAG_RIGHT, -1.0), (TAG_LEFT, 0.0), (TAG_TOP, -1.0 / 3.0), (TAG_BOTTOM, 1.0 / 3.0)]
    {
        let computed = functionals::boundary_flux(&solution, Boundary::Tag(tag)).unwrap();
        assert!((computed - flux).abs() < 1e-10, "tag {tag}: {computed} vs {flux}");
    }
    let total = functionals::boundary_flux(&solution, Boundary::All).unwrap();
    assert!((total + 1.0).abs() < 1e-10, "{total}");
    let range = functionals::extrema(&solution, Field::U);
    assert!(range.min.value.abs() < 1e-12 && (range.max.value - 1.0).abs() < 1e-12, "{range:?}");
    assert!((range.max.at[0] - 1.0).abs() < 1e-12 && (range.max.at[1] - 1.0).abs() < 1e-12);
}

/// The unperturbed square, where x < 1/2 is a union of cells: the integral of x^2 y there is
/// 1/48; and on the unit cube, u = x y z (harmonic) has integral 1/8.
#[test]
fn region_and_three_dimensional_integrals() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let problem = Problem::builder()
        .polynomial_source(1, |x| -2.0 * x[1])
        .dirichlet(|x| x[0] * x[0] * x[1])
        .build();
    let solution = Solver::new(mesh, problem).order(3).solve().unwrap();
    let mesh = solution.mesh();
    let left = |c: usize| mesh.cell_vertices(c).iter().all(|&v| mesh.vertex(v)[0] <= 0.5);
    let value = functionals::integral_over(&solution, Field::U, left);
    assert!((value - 1.0 / 48.0).abs() < 1e-12, "{value}");

    let cube = generate::unit_cube(2).unwrap();
    let problem = Problem::builder().dirichlet(|x| x[0] * x[1] * x[2]).build();
    let solution = Solver::new(cube, problem).order(3).solve().unwrap();
    let value = functionals::integral(&solution, Field::U);
    assert!((value - 0.125).abs() < 1e-10, "{value}");
    // div q = 0: no net flux.
    let flux = functionals::boundary_flux(&solution, Boundary::All).unwrap();
    assert!(flux.abs() < 1e-9, "{flux}");
}

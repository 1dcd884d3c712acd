//! Coefficients that vary inside cells (`hdg_core::coefficients`): kappa(x), an anisotropic
//! SPD tensor kappa(x), c(x), and the tau options.
//!
//! The exact solution, its derivatives, the coefficients' divergences and so the sources and
//! boundary data are written out by hand here, independently of the library:
//! `f = -sum_s (sum_r d_r K_rs) d_s u - sum_rs K_rs d_rs u + c u`, Neumann data `(K grad u) . n`,
//! Robin data `(K grad u) . n + alpha u`.
use std::f64::consts::PI;
use std::sync::Arc;

use hdg_core::{
    BoundaryCondition, Coefficient, CoreError, ErrorNorms, ExactSolution, Manufactured, Problem,
    Source, Tau,
};
use hdg_mesh::generate::{
    TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP, TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1,
};
use hdg_mesh::{generate, Diagonal, Mesh};
use tests::{assert_rates, per_backend, Backend, Runs, TraceSolve};

/// u = sin(pi x + 0.2) sin(0.7 pi y + 0.1) exp(z / 2) (without the last factor in 2D): value,
/// gradient and Hessian (row-major d x d).
fn solution(x: &[f64]) -> (f64, [f64; 3], [f64; 9]) {
    let (a, b) = (PI, 0.7 * PI);
    let (sa, ca) = ((a * x[0] + 0.2).sin(), (a * x[0] + 0.2).cos());
    let (sb, cb) = ((b * x[1] + 0.1).sin(), (b * x[1] + 0.1).cos());
    let c = if x.len() == 3 { (0.5 * x[2]).exp() } else { 1.0 };
    let u = sa * sb * c;
    let grad = [a * ca * sb * c, b * sa * cb * c, 0.5 * u];
    let (uxx, uyy, uxy) = (-a * a * u, -b * b * u, a * b * ca * cb * c);
    let hessian = if x.len() == 3 {
        let (uxz, uyz, uzz) = (0.5 * grad[0], 0.5 * grad[1], 0.25 * u);
        [uxx, uxy, uxz, uxy, uyy, uyz, uxz, uyz, uzz]
    } else {
        [uxx, uxy, uxy, uyy, 0.0, 0.0, 0.0, 0.0, 0.0]
    };
    (u, grad, hessian)
}

/// A diffusion coefficient: K(x) (row-major) and its divergence `sum_r d_r K_rs`.
#[derive(Clone, Copy, Debug)]
enum Diffusion {
    /// kappa = 1 + x^2 + y / 2 (+ 0.3 z) times the identity.
    Scalar,
    /// [[2 + x^2, xy/2, z/5], [xy/2, 1 + y, 1/10], [z/5, 1/10, 3/2 + xz]] (2D: the top-left
    /// block): diagonally dominant, so SPD on the unit square and cube.
    Tensor,
}

impl Diffusion {
    fn at(self, x: &[f64]) -> ([f64; 9], [f64; 3]) {
        let d = x.len();
        let z = if d == 3 { x[2] } else { 0.0 };
        let mut k = [0.0; 9];
        match self {
            Diffusion::Scalar => {
                let kappa = 1.0 + x[0] * x[0] + 0.5 * x[1] + 0.3 * z;
                for r in 0..d {
                    k[r * d + r] = kappa;
                }
                (k, [2.0 * x[0], 0.5, 0.3])
            }
            Diffusion::Tensor if d == 2 => {
                let xy = 0.5 * x[0] * x[1];
                (
                    [2.0 + x[0] * x[0], xy, xy, 1.0 + x[1], 0.0, 0.0, 0.0, 0.0, 0.0],
                    [2.5 * x[0], 0.5 * x[1] + 1.0, 0.0],
                )
            }
            Diffusion::Tensor => {
                let xy = 0.5 * x[0] * x[1];
                (
                    [
                        2.0 + x[0] * x[0],
                        xy,
                        0.2 * z,
                        xy,
                        1.0 + x[1],
                        0.1,
                        0.2 * z,
                        0.1,
                        1.5 + x[0] * z,
                    ],
                    [2.5 * x[0] + 0.2, 0.5 * x[1] + 1.0, x[0]],
                )
            }
        }
    }

    fn coefficient(self) -> Coefficient {
        match self {
            Diffusion::Scalar => Coefficient::field(move |x| self.at(x).0[0]),
            Diffusion::Tensor => Coefficient::tensor(move |x, out| {
                let d = x.len();
                out.copy_from_slice(&self.at(x).0[..d * d]);
            }),
        }
    }
}

/// (K grad u)(x) . n
fn conormal_derivative(diffusion: Diffusion, x: &[f64], n: &[f64]) -> f64 {
    let d = x.len();
    let (k, _) = diffusion.at(x);
    let (_, grad, _) = solution(x);
    (0..d).map(|r| n[r] * (0..d).map(|s| k[r * d + s] * grad[s]).sum::<f64>()).sum()
}

fn reaction(x: &[f64]) -> f64 {
    1.0 + x[0] * x[1]
}

/// The problem with the hand-written source and data: `mixed` puts Dirichlet on x = 0, Robin
/// (alpha = 1) on x = 1 and Neumann on the other sides (`hdg solve --bc mixed`), else
/// Dirichlet everywhere; `with_reaction` adds c(x) = 1 + xy.
fn problem(dim: usize, diffusion: Diffusion, with_reaction: bool, mixed: bool) -> Problem {
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.kappa = diffusion.coefficient();
    if with_reaction {
        p.reaction = Coefficient::field(reaction);
    }
    p.source = Source::closure(move |x| {
        let d = x.len();
        let (u, grad, hessian) = solution(x);
        let (k, div_k) = diffusion.at(x);
        let first: f64 = (0..d).map(|s| div_k[s] * grad[s]).sum();
        let second: f64 = (0..d * d).map(|i| k[i] * hessian[i]).sum();
        let c = if with_reaction { reaction(x) } else { 0.0 };
        -first - second + c * u
    });
    p.dirichlet = Arc::new(|x| solution(x).0);
    p.exact = Some(ExactSolution::Closures {
        u: Arc::new(|x| solution(x).0),
        grad_u: Arc::new(|x, g| {
            let d = x.len();
            g.copy_from_slice(&solution(x).1[..d]);
        }),
    });
    if mixed {
        let (robin, neumann): (u32, &[u32]) = if dim == 2 {
            (TAG_RIGHT, &[TAG_BOTTOM, TAG_TOP])
        } else {
            (TAG_X1, &[TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1])
        };
        let _ = (TAG_LEFT, TAG_X0); // Dirichlet: every tag not listed.
        p = p.with_boundary(
            robin,
            BoundaryCondition::Robin {
                alpha: 1.0,
                data: Arc::new(move |x, n| conormal_derivative(diffusion, x, n) + solution(x).0),
            },
        );
        for &tag in neumann {
            p = p.with_boundary(
                tag,
                BoundaryCondition::Neumann {
                    data: Arc::new(move |x, n| conormal_derivative(diffusion, x, n)),
                },
            );
        }
    }
    p
}

fn square(n: usize) -> Mesh {
    generate::unit_square(n, Diagonal::Alternating).unwrap()
}

fn errors(backend: Backend, mesh: &Mesh, problem: &Problem, k: usize, direct: bool) -> ErrorNorms {
    let run = if direct {
        backend.run_direct::<f64>(mesh, problem, k)
    } else {
        backend.run::<f64>(mesh, problem, k)
    };
    run.report.errors.unwrap()
}

/// A NaN or a non-positive kappa, an indefinite tensor or a negative c at a quadrature point
/// is refused; the message names the field, the cell, the point and how many cells.
#[test]
fn bad_coefficients_at_points_are_refused_naming_field_and_cell() {
    let mesh = generate::unit_square(4, Diagonal::Right).unwrap();
    let refused = |p: &Problem| -> String {
        match Backend::Cpu.try_run::<f64>(&mesh, p, 2, &TraceSolve::cg::<f64>(), false) {
            Err(e @ CoreError::InvalidParameter { .. }) => e.to_string(),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    };
    let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    p.kappa = Coefficient::field(|x| if x[0] > 0.8 { f64::NAN } else { 1.0 });
    let message = refused(&p);
    println!("{message}");
    assert!(message.starts_with("invalid kappa:"), "{message}");
    assert!(message.contains("cell ") && message.contains("NaN"), "{message}");
    // The cells right of x = 0.75 (8 of 32) all have points with x > 0.8.
    assert!(message.contains("8 of 32 cells"), "{message}");
    assert!(message.contains("and 3 more cells"), "{message}");

    p.kappa = Coefficient::field(|x| x[0] - 0.5);
    assert!(refused(&p).contains("(kappa must be finite and > 0)"));
    p.kappa = Coefficient::tensor(|_, k| k.copy_from_slice(&[1.0, 2.0, 2.0, 1.0]));
    assert!(refused(&p).contains("symmetric positive definite"));
    p.kappa = Coefficient::tensor(|_, k| k.copy_from_slice(&[1.0, 0.5, 0.0, 1.0]));
    assert!(refused(&p).contains("symmetric positive definite"));
    p.kappa = Coefficient::Constant(1.0);
    p.reaction = Coefficient::field(|x| x[1] - 0.5);
    let message = refused(&p);
    assert!(message.starts_with("invalid reaction coefficient c:"), "{message}");
    p.reaction = Coefficient::tensor(|_, k| k.fill(1.0));
    assert!(refused(&p).contains("a tensor is a diffusion coefficient"));
}

per_backend! {
    /// Rates k+1, k+1, k+2 with kappa(x) and c(x) and every kind of boundary, k = 1..=4 (2D).
    fn rates_with_a_smooth_kappa_and_mixed_conditions_in_2d(backend) {
        for k in 1..=4usize {
            let sizes: [usize; 2] = if k <= 2 { [8, 16] } else { [12, 24] };
            let p = problem(2, Diffusion::Scalar, true, true);
            let e: Vec<_> = sizes.iter().map(|&n| errors(backend, &square(n), &p, k, false)).collect();
            assert_rates("kappa(x), c(x), mixed 2D", k, e[0], e[1]);
        }
    }

    /// The same with the anisotropic tensor.
    fn rates_with_an_anisotropic_tensor_and_mixed_conditions_in_2d(backend) {
        for k in 1..=4usize {
            let sizes: [usize; 2] = if k <= 2 { [8, 16] } else { [12, 24] };
            let p = problem(2, Diffusion::Tensor, false, true);
            let e: Vec<_> = sizes.iter().map(|&n| errors(backend, &square(n), &p, k, false)).collect();
            assert_rates("tensor kappa(x), mixed 2D", k, e[0], e[1]);
        }
    }

    /// 3D, kappa(x) and the tensor with mixed conditions: cube:2 -> cube:4 is not asymptotic for u*
    /// at k >= 2 (as with constant coefficients, `boundary.rs`), so u and q there.
    fn rates_with_variable_kappa_and_mixed_conditions_in_3d(backend) {
        for diffusion in [Diffusion::Scalar, Diffusion::Tensor] {
            for k in 1..=3usize {
                let sizes: [usize; 2] = if k == 1 { [3, 6] } else { [2, 4] };
                let p = problem(3, diffusion, true, true);
                let e: Vec<_> = sizes
                    .iter()
                    .map(|&n| errors(backend, &generate::unit_cube(n).unwrap(), &p, k, true))
                    .collect();
                if k == 1 {
                    assert_rates(&format!("{diffusion:?} 3D"), k, e[0], e[1]);
                } else {
                    let rate = |a: f64, b: f64| (a / b).log2();
                    for (name, r) in [("u", rate(e[0].u, e[1].u)), ("q", rate(e[0].q, e[1].q))] {
                        println!("{diffusion:?} 3D k={k}: rate of {name} {r:.3}");
                        assert!((r - (k + 1) as f64).abs() <= 0.3, "{diffusion:?} k={k}: {name} {r}");
                    }
                }
            }
        }
    }

    /// A constant given as a function of x takes the quadrature path and must give the constant's
    /// solution to rounding; a scalar given as a tensor kappa I the scalar's.
    fn functions_of_x_reduce_to_constants_and_scalars(backend) {
        let cube = generate::perturb(&generate::unit_cube(2).unwrap(), 0.2, 5).unwrap();
        let perturbed = generate::perturb(&square(4), 0.3, 5).unwrap();
        for (mesh, k) in [(&perturbed, 1), (&perturbed, 3), (&perturbed, 5), (&cube, 1), (&cube, 3)] {
            let dim = mesh.dim();
            let base = Problem::manufactured(Manufactured::Sine, 2.5, 0.7)
                .with_mixed_boundary(dim, 2.5)
                .unwrap();
            let mut as_fields = base.clone();
            as_fields.kappa = Coefficient::field(|_| 2.5);
            as_fields.reaction = Coefficient::field(|_| 0.7);
            let mut as_tensor = base.clone();
            as_tensor.kappa = Coefficient::tensor(|x, k| {
                let d = x.len();
                k.fill(0.0);
                (0..d).for_each(|r| k[r * d + r] = 2.5);
            });
            let runs: Vec<_> = [&base, &as_fields, &as_tensor]
                .iter()
                .map(|p| backend.run_direct::<f64>(mesh, p, k))
                .collect();
            for (label, run) in [("fields", &runs[1]), ("tensor", &runs[2])] {
                let diff = |a: &[f64], b: &[f64]| {
                    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
                        / a.iter().fold(0.0f64, |m, x| m.max(x.abs()))
                };
                let (trace, q, u_star) = (
                    diff(&runs[0].trace, &run.trace),
                    diff(&runs[0].fields.q, &run.fields.q),
                    diff(&runs[0].u_star, &run.u_star),
                );
                println!("{dim}D k = {k}, {label}: trace {trace:.1e}, q {q:.1e}, u* {u_star:.1e}");
                assert!(trace < 1e-11 && q < 1e-11 && u_star < 1e-11, "k = {k}, {label}");
            }
        }
    }

    /// tau per face keeps the rates k+1, k+1, k+2 (and changes the answer); tau = kappa / h is
    /// the O(1/h) choice of interior-penalty methods: u keeps k+1 while q drops to k and u* to
    /// k+1, the known behaviour of LDG-H with tau ~ 1/h (Cockburn, Gopalakrishnan & Sayas 2010),
    /// which a tau left at O(1) would not show.
    fn tau_options_give_their_rates(backend) {
        let k = 2;
        let e: Vec<_> = [8, 16]
            .iter()
            .map(|&n| {
                let mesh = square(n);
                let mut p = problem(2, Diffusion::Scalar, false, true);
                // tau between 0.5 and 4, different on the two sides of a face.
                p.tau = Tau::PerFace(
                    (0..mesh.n_cells() * 3)
                        .map(|i| 0.5 + 3.5 * ((i * 7919) % 13) as f64 / 12.0)
                        .collect(),
                );
                errors(backend, &mesh, &p, k, false)
            })
            .collect();
        assert_rates("tau per face", k, e[0], e[1]);
        let mut one = problem(2, Diffusion::Scalar, false, true);
        one.tau = Tau::Constant(1.0);
        assert!((errors(backend, &square(8), &one, k, false).u - e[0].u).abs() > 1e-3 * e[0].u);

        for scale in [1.0, 4.0] {
            let mut p = problem(2, Diffusion::Scalar, false, true);
            p.tau = Tau::KappaOverH { scale };
            let e: Vec<_> = [8, 16, 32].iter().map(|&n| errors(backend, &square(n), &p, k, false)).collect();
            let rate = |a: f64, b: f64| (a / b).log2();
            let rates = [rate(e[1].u, e[2].u), rate(e[1].q, e[2].q), rate(e[1].u_star, e[2].u_star)];
            println!("tau = {scale} kappa/h, k = {k}: errors {:?}, rates {rates:?}", e[2]);
            for (name, r, expected) in
                [("u", rates[0], 3.0), ("q", rates[1], 2.0), ("u*", rates[2], 3.0)]
            {
                assert!((r - expected).abs() <= 0.25, "tau = {scale} kappa/h: rate of {name} {r}");
            }
        }
    }

    /// Local conservation holds to round-off in every cell with a tensor kappa(x) and c(x): the
    /// reaction term of the check integrates c u_h by the rule the local solver used.
    fn local_conservation_holds_with_coefficients_at_points(backend) {
        use hdg_core::diagnostics::{conservation_defects, full_trace};
        let mesh = generate::perturb(&square(5), 0.3, 11).unwrap();
        for k in [1, 2, 4] {
            let p = problem(2, Diffusion::Tensor, true, false);
            let out = backend.run::<f64>(&mesh, &p, k);
            let disc = tests::discretization::<f64>(&mesh, &p, k);
            let defects = conservation_defects(&disc, &out.fields, &full_trace(&disc, &out.trace));
            let worst = defects.iter().cloned().fold(0.0, f64::max);
            println!("k = {k}: worst relative conservation defect {worst:.2e}");
            assert!(worst < 1e-11, "k = {k}: {worst:e}");
        }
    }
}

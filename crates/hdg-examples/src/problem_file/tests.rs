//! Unit tests of problem files: expressions, parsing, the documented example.
use super::*;
use std::f64::consts::PI;

fn compile(text: &str) -> Result<Expression, String> {
    Expression::parse(text, POINT_AND_NORMAL)
}

fn at(text: &str, x: &[f64]) -> f64 {
    compile(text).unwrap_or_else(|e| panic!("{text}: {e}")).evaluate(x, &[0.6, 0.8, 0.0])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-14 * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn expressions_evaluate_with_the_usual_precedence() {
    let (x, y, z): (f64, f64, f64) = (0.3, -0.7, 1.9);
    let p = [x, y, z];
    let cases: [(&str, f64); 16] = [
        ("1 + 2*3", 7.0),
        ("2^3*2", 16.0),
        ("2*3^2", 18.0),
        ("-2*3", -6.0),
        ("x^-2", x.powf(-2.0)),
        ("-(x^2)", -(x * x)),
        ("(-y)^2", y * y),
        ("sin(x)^2 + cos(x)^2", 1.0),
        ("1.5e-3 * x + 2E2", 1.5e-3 * x + 200.0),
        ("exp(-(x^2))", (-(x * x)).exp()),
        ("pi * e", PI * std::f64::consts::E),
        ("atan2(y, x) + min(x, y) - max(x, z)", y.atan2(x) + x.min(y) - x.max(z)),
        ("sqrt(abs(y)) / ln(z) - log10(z)", y.abs().sqrt() / z.ln() - z.log10()),
        ("x - y - z", x - y - z),
        ("x / y / z", x / y / z),
        ("nx * x + ny * y + nz * z", 0.6 * x + 0.8 * y),
    ];
    for (text, expected) in cases {
        let value = at(text, &p);
        assert!(close(value, expected), "{text}: {value} != {expected}");
    }
    // A point of fewer dimensions: a variable beyond it is NaN, not a panic.
    assert!(compile("z").unwrap().evaluate(&[0.1, 0.2], &[]).is_nan());
}

#[test]
fn ambiguous_and_malformed_expressions_are_refused_with_reasons() {
    let cases = [
        ("-x^2", "sign before a power"),
        ("exp(-x^2)", "sign before a power"),
        ("2*-sin(x)^2", "sign before a power"),
        ("2^x^2", "a^(b^c)"),
        ("x^-y^2", "a^(b^c)"),
        ("sin x", "parentheses"),
        ("1 + * x", "value is expected"),
        ("3x", "operator is missing"),
        ("(x + 1", "not closed"),
        ("x + 1)", "unmatched"),
        ("atan2(x)", "2 arguments"),
        ("sin(x, y)", "1 argument"),
        ("r^2", "unknown name `r`"),
        ("x % 2", "unexpected character"),
        ("", "empty"),
        ("x +", "ends"),
    ];
    for (text, needle) in cases {
        match compile(text) {
            Ok(_) => panic!("{text} should be refused"),
            Err(e) => assert!(e.contains(needle), "{text}: {e}"),
        }
    }
    let e = Expression::parse("nx * x", POINT).err().unwrap();
    assert!(e.contains("Neumann and Robin"), "{e}");
}

/// Derived gradients against central differences of the expression itself.
#[test]
fn derived_gradients_match_finite_differences() {
    let p = [0.37, 0.61, 0.23];
    for text in [
        "sin(pi*x) * cos(pi*y) * exp(z)",
        "(x^2 + y^2)^(1/3) + x*y*z",
        "x^3 - 3*x*y^2 + sqrt(1 + z^2)",
        "ln(1 + x) / (2 + y) - tanh(z)",
        "-(x^2) + 2^x",
        "7",
    ] {
        let e = compile(text).unwrap();
        for slot in 0..3 {
            let d = e.derivative(slot).unwrap().evaluate(&p, &[]);
            let h = 1e-6;
            let (mut plus, mut minus) = (p, p);
            plus[slot] += h;
            minus[slot] -= h;
            let fd = (e.evaluate(&plus, &[]) - e.evaluate(&minus, &[])) / (2.0 * h);
            assert!((d - fd).abs() < 1e-6 * (1.0 + fd.abs()), "{text}, d/d{slot}: {d} vs {fd}");
        }
    }
    assert!(compile("abs(x)").unwrap().derivative(0).is_err());
}

#[test]
fn compiled_expressions_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Expression>();
    shared::<FlatEx<f64>>();
}

const SQUARE: &str = r#"
[mesh]
generate = "square:6"
perturb = 0.2

[equation]
kappa = "1 + x*y"
reaction = "1 + x"
source = """
(1 + x*y) * 2*pi^2 * sin(pi*x) * cos(pi*y)
  - y * (pi*cos(pi*x)*cos(pi*y) + 1) + x * pi*sin(pi*x)*sin(pi*y)
  + (1 + x) * (sin(pi*x)*cos(pi*y) + x)"""

[boundary]
default = "sin(pi*x) * cos(pi*y) + x"
bottom = { neumann = "(1 + x*y) * (nx * (pi*cos(pi*x)*cos(pi*y) + 1) - ny * pi*sin(pi*x)*sin(pi*y))" }
right = { robin = "(1 + x*y) * (nx * (pi*cos(pi*x)*cos(pi*y) + 1) - ny * pi*sin(pi*x)*sin(pi*y)) + 2 * (sin(pi*x)*cos(pi*y) + x)", alpha = 2 }

[exact]
u = "sin(pi*x) * cos(pi*y) + x"

[discretization]
order = 2

[solver]
method = "direct"
"#;

/// The problem a file describes with expressions is the one written in Rust with closures:
/// the same errors to rounding.
#[test]
fn expressions_give_the_solution_of_the_same_closures() {
    let file = ProblemFile::parse(SQUARE, Path::new("square.toml")).unwrap();
    let setup = file.build().unwrap();
    let u = |x: &[f64]| (PI * x[0]).sin() * (PI * x[1]).cos() + x[0];
    let grad = |x: &[f64]| {
        [
            PI * (PI * x[0]).cos() * (PI * x[1]).cos() + 1.0,
            -PI * (PI * x[0]).sin() * (PI * x[1]).sin(),
        ]
    };
    let kappa = |x: &[f64]| 1.0 + x[0] * x[1];
    let flux = move |x: &[f64], n: &[f64]| {
        let g = grad(x);
        kappa(x) * (g[0] * n[0] + g[1] * n[1])
    };
    let rust = Problem::builder()
        .kappa(Coefficient::field(kappa))
        .reaction(Coefficient::field(|x| 1.0 + x[0]))
        .source(move |x| {
            let (s, c) = ((PI * x[0]).sin(), (PI * x[1]).cos());
            kappa(x) * 2.0 * PI * PI * s * c - x[1] * (PI * (PI * x[0]).cos() * c + 1.0)
                + x[0] * PI * s * (PI * x[1]).sin()
                + (1.0 + x[0]) * u(x)
        })
        .dirichlet(u)
        .neumann(generate_tag("bottom"), flux)
        .robin(generate_tag("right"), 2.0, move |x, n| flux(x, n) + 2.0 * u(x))
        .exact_with_gradient(u, move |x, out| out.copy_from_slice(&grad(x)))
        .build();
    let solve = |problem: &Problem| {
        let solver = setup.solver.clone().with_problem(problem.clone());
        solver.run(&mut hdg::Silent).unwrap().report.errors.unwrap()
    };
    let (ours, theirs) = (solve(setup.solver.problem()), solve(&rust));
    for (a, b, name) in
        [(ours.u, theirs.u, "u"), (ours.q, theirs.q, "q"), (ours.u_star, theirs.u_star, "u*")]
    {
        assert!((a - b).abs() <= 1e-12 * b, "{name}: {a:e} from the file, {b:e} from Rust");
        // and the problem is the manufactured one: the errors are discretization errors
        assert!(b < 1e-2, "{name}: {b:e}");
    }
}

fn generate_tag(side: &str) -> u32 {
    build::generated_sides(2).iter().find(|(n, _)| *n == side).unwrap().1
}

/// The example of the module documentation is a valid file whose problem solves.
#[test]
fn the_documented_example_parses_and_builds() {
    let source = include_str!("mod.rs");
    let start = source.find("//! ```toml\n").unwrap() + "//! ```toml\n".len();
    let end = start + source[start..].find("//! ```\n").unwrap();
    let text: String = source[start..end]
        .lines()
        .map(|l| l.strip_prefix("//!").unwrap_or(l).strip_prefix(' ').unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/problems");
    let file = ProblemFile::parse(&text, &folder.join("doc.toml")).unwrap();
    assert_eq!(file.order(), 3);
    assert_eq!(file.outputs().json, Some(folder.join("l-shape.json")));
    let setup = file.build().unwrap();
    assert!(setup.solver.problem().exact.as_ref().is_some_and(|e| e.has_gradient()));
    assert_eq!(setup.solver.problem().condition(1).name(), "Dirichlet");
}

/// Where u uses a function without a derivative, the errors of u and u* are still
/// reported, q's is not, and the summary says why; a given gradient of the wrong length is
/// refused.
#[test]
fn an_exact_u_without_a_derivative_gives_the_errors_of_u_only() {
    let head = "[mesh]\ngenerate = \"square:2\"\n[discretization]\norder = 1\n";
    let text = format!("{head}[exact]\nu = \"abs(x - 0.5)\"\n");
    let setup = ProblemFile::parse(&text, Path::new("abs.toml")).unwrap().build().unwrap();
    assert!(setup.solver.problem().exact.as_ref().is_some_and(|e| !e.has_gradient()));
    assert!(setup.notes.iter().any(|n| n.contains("could not be derived")), "{:?}", setup.notes);
    let text = format!("{head}[exact]\nu = \"x\"\ngradient = [\"1\"]\n");
    let refused = ProblemFile::parse(&text, Path::new("g.toml")).unwrap().build().err().unwrap();
    assert!(refused.to_string().contains("g.toml, line 7: the exact gradient has 1 entries"));
}

#[test]
fn lines_and_columns_are_counted_from_one() {
    let text = "a = 1\nbé = 2\n";
    assert_eq!(line_and_column(text, 0), (1, 1));
    assert_eq!(line_and_column(text, 6), (2, 1));
    assert_eq!(line_and_column(text, text.find('=').unwrap()), (1, 3));
    assert_eq!(line_and_column(text, text.rfind('=').unwrap()), (2, 4));
    assert_eq!(line_and_column(text, 1000), (3, 1));
}

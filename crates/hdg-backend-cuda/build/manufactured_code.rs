//! The device code of the manufactured solutions (`manufactured_solutions.cuh`), generated from
//! their one description, `hdg_core::manufactured`.
//!
//! The build script evaluates each solution with [`Recorded`] numbers: every operation on them
//! is recorded instead of performed (operations on two constants are performed, in f64 as the
//! host does), and the record of each output is printed as straight-line CUDA. Arithmetic is
//! printed as `element_common.cuh`'s `add`, `sub` and `mul`, which nvcc never fuses into
//! multiply-adds, so the device rounds every operation as the host does; `powi` is expanded
//! into the host's binary powering. Only the transcendental functions are the device's own.
//!
//! The generated header defines, for `DIM` = 2 and 3, with `solution` a number of
//! `src/solution_numbers.rs`:
//! - `f64 manufactured_solution<DIM>(unsigned solution, const f64* x, f64* grad)`: u at x,
//!   grad u into `grad` (`Manufactured::evaluate`);
//! - `f64 manufactured_source<DIM>(unsigned solution, const f64* x, f64 kappa, f64 reaction)`:
//!   `-kappa lap u + reaction u` at x (`Manufactured::source`).
//!
//! An unknown number gives NaN.
use std::cell::RefCell;
use std::fmt::Write;
use std::ops::{Add, Mul, Neg, Sub};

use super::solution_numbers::{solution_number, solutions_with_device_code};
use super::{Arithmetic, Manufactured};

/// A recorded number: a constant, or the result of the recorded operation of that index.
#[derive(Clone, Copy, Debug)]
pub enum Recorded {
    Constant(f64),
    Operation(usize),
}

/// One operation of the record.
#[derive(Clone, Debug)]
enum Operation {
    /// An argument of the generated function (a C expression).
    Input(String),
    /// `add`, `sub` or `mul` of element_common.cuh.
    Binary(&'static str, Recorded, Recorded),
    Negate(Recorded),
    /// A math library function of one argument.
    Call(&'static str, Recorded),
}

thread_local! {
    /// The operations recorded since the last [`take_record`].
    static RECORD: RefCell<Vec<Operation>> = const { RefCell::new(Vec::new()) };
}

/// Records `operation`, or returns the recorded operation that is the same (the same function
/// of the same operands, constants compared as printed): the description recomputes shared
/// factors (pi x in sin(pi x) and in cos(pi x)), the generated code computes each once.
fn record(operation: Operation) -> Recorded {
    RECORD.with(|r| {
        let mut r = r.borrow_mut();
        let key = format!("{operation:?}");
        if let Some(i) = r.iter().position(|o| format!("{o:?}") == key) {
            return Recorded::Operation(i);
        }
        r.push(operation);
        Recorded::Operation(r.len() - 1)
    })
}

fn take_record() -> Vec<Operation> {
    RECORD.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// A binary operation: performed when both operands are constants (f64, as on the host),
/// recorded otherwise.
fn binary(name: &'static str, a: Recorded, b: Recorded, host: fn(f64, f64) -> f64) -> Recorded {
    match (a, b) {
        (Recorded::Constant(a), Recorded::Constant(b)) => Recorded::Constant(host(a, b)),
        _ => record(Operation::Binary(name, a, b)),
    }
}

impl Add for Recorded {
    type Output = Recorded;
    fn add(self, other: Recorded) -> Recorded {
        binary("add", self, other, |a, b| a + b)
    }
}

impl Sub for Recorded {
    type Output = Recorded;
    fn sub(self, other: Recorded) -> Recorded {
        binary("sub", self, other, |a, b| a - b)
    }
}

impl Mul for Recorded {
    type Output = Recorded;
    fn mul(self, other: Recorded) -> Recorded {
        binary("mul", self, other, |a, b| a * b)
    }
}

impl Neg for Recorded {
    type Output = Recorded;
    fn neg(self) -> Recorded {
        match self {
            Recorded::Constant(a) => Recorded::Constant(-a),
            _ => record(Operation::Negate(self)),
        }
    }
}

impl Arithmetic for Recorded {
    fn constant(value: f64) -> Recorded {
        Recorded::Constant(value)
    }
    fn sin(self) -> Recorded {
        record(Operation::Call("sin", self))
    }
    fn cos(self) -> Recorded {
        record(Operation::Call("cos", self))
    }
    fn exp(self) -> Recorded {
        record(Operation::Call("exp", self))
    }
    fn sinh(self) -> Recorded {
        record(Operation::Call("sinh", self))
    }
    fn cosh(self) -> Recorded {
        record(Operation::Call("cosh", self))
    }
    /// The host's `powi` (compiler-rt's `__powidf2`): the product, in increasing order, of
    /// the repeated squares that the exponent's bits select (1 * a is a, so it starts there).
    fn powi(self, exponent: u32) -> Recorded {
        let (mut product, mut square, mut rest) = (None, self, exponent);
        loop {
            if rest & 1 == 1 {
                product = Some(match product {
                    None => square,
                    Some(p) => p * square,
                });
            }
            rest >>= 1;
            if rest == 0 {
                break;
            }
            square = square * square;
        }
        product.unwrap_or(Recorded::Constant(1.0))
    }
}

/// The inputs `x[0] .. x[D - 1]`.
fn coordinates<const D: usize>() -> [Recorded; D] {
    std::array::from_fn(|r| record(Operation::Input(format!("x[{r}]"))))
}

/// A recorded solution: its operations and its outputs.
struct Code {
    operations: Vec<Operation>,
    /// (C destination, value): `return` for the returned value.
    outputs: Vec<(String, Recorded)>,
}

/// u and grad u of `solution` (`manufactured_solution`).
fn solution_code<const D: usize>(solution: Manufactured) -> Code {
    let fields = solution.evaluate(&coordinates::<D>());
    let mut outputs: Vec<(String, Recorded)> =
        (0..D).map(|r| (format!("grad[{r}]"), fields.grad[r])).collect();
    outputs.push(("return".into(), fields.u));
    Code { operations: take_record(), outputs }
}

/// The source of `solution` (`manufactured_source`).
fn source_code<const D: usize>(solution: Manufactured) -> Code {
    let x = coordinates::<D>();
    let kappa = record(Operation::Input("kappa".into()));
    let reaction = record(Operation::Input("reaction".into()));
    let f = solution.source(&x, kappa, reaction);
    Code { operations: take_record(), outputs: vec![("return".into(), f)] }
}

/// A C double literal that reads back as `value` (Rust prints the shortest such digits).
fn literal(value: f64) -> String {
    assert!(value.is_finite(), "a manufactured solution has the constant {value}");
    let digits = format!("{value:?}");
    if value.is_sign_negative() {
        format!("({digits})")
    } else {
        digits
    }
}

impl Code {
    /// The C statements: the operations the outputs need, then the outputs.
    fn statements(&self, indent: &str) -> String {
        let mut needed = vec![false; self.operations.len()];
        let mut pending: Vec<usize> = self.outputs.iter().filter_map(|(_, v)| index(*v)).collect();
        while let Some(i) = pending.pop() {
            if !std::mem::replace(&mut needed[i], true) {
                pending.extend(self.operands(i).into_iter().filter_map(index));
            }
        }
        let value = |v: Recorded| match v {
            Recorded::Constant(c) => literal(c),
            Recorded::Operation(i) => match &self.operations[i] {
                Operation::Input(name) => name.clone(),
                _ => format!("v{i}"),
            },
        };
        // sin and cos of one argument are one sincos (one argument reduction).
        let partner = |i: usize| match &self.operations[i] {
            Operation::Call(name @ ("sin" | "cos"), a) => {
                let other = if *name == "sin" { "cos" } else { "sin" };
                (0..self.operations.len()).find(|&j| {
                    needed[j]
                        && matches!(&self.operations[j],
                            Operation::Call(n, b) if *n == other && index(*b) == index(*a)
                                && index(*a).is_some())
                })
            }
            _ => None,
        };
        let mut out = String::new();
        let mut written = vec![false; self.operations.len()];
        for (i, operation) in self.operations.iter().enumerate() {
            if !needed[i] {
                continue;
            }
            if let (Some(j), Operation::Call(name, a)) = (partner(i), operation) {
                if !written[i] {
                    let (sin, cos) = if *name == "sin" { (i, j) } else { (j, i) };
                    writeln!(out, "{indent}f64 v{sin}, v{cos};").unwrap();
                    writeln!(out, "{indent}sincos({}, &v{sin}, &v{cos});", value(*a)).unwrap();
                    written[i] = true;
                    written[j] = true;
                }
                continue;
            }
            let expression = match operation {
                Operation::Input(_) => continue,
                Operation::Binary(name, a, b) => format!("{name}({}, {})", value(*a), value(*b)),
                Operation::Negate(a) => format!("-{}", value(*a)),
                Operation::Call(name, a) => format!("{name}({})", value(*a)),
            };
            writeln!(out, "{indent}const f64 v{i} = {expression};").unwrap();
        }
        for (destination, v) in &self.outputs {
            match destination.as_str() {
                "return" => writeln!(out, "{indent}return {};", value(*v)),
                _ => writeln!(out, "{indent}{destination} = {};", value(*v)),
            }
            .unwrap();
        }
        out
    }

    fn operands(&self, i: usize) -> Vec<Recorded> {
        match &self.operations[i] {
            Operation::Input(_) => vec![],
            Operation::Binary(_, a, b) => vec![*a, *b],
            Operation::Negate(a) | Operation::Call(_, a) => vec![*a],
        }
    }
}

fn index(v: Recorded) -> Option<usize> {
    match v {
        Recorded::Operation(i) => Some(i),
        Recorded::Constant(_) => None,
    }
}

/// One function template per output, on the dimension and the solution's number, each
/// solution's code in its own `if constexpr` branch: a kernel instantiated for one solution
/// holds that solution's code alone, not a switch over all of them in its quadrature loop.
fn function(signature: &str, generate: &dyn Fn(usize, Manufactured) -> Code) -> String {
    let mut out = format!(
        "template <int DIM, unsigned SOLUTION>\n__device__ __forceinline__ {signature} {{\n"
    );
    for dim in [2, 3] {
        let keyword = if dim == 2 { "if constexpr (DIM == 2)" } else { "else" };
        writeln!(out, "    {keyword} {{").unwrap();
        for (i, solution) in solutions_with_device_code().enumerate() {
            let number = solution_number(solution).expect("a solution with device code");
            let branch = if i == 0 { "if" } else { "} else if" };
            writeln!(out, "        {branch} constexpr (SOLUTION == {number}) {{  // {solution:?}")
                .unwrap();
            out += &generate(dim, solution).statements("            ");
        }
        out += "        } else {\n            return nan(\"\");\n        }\n    }\n";
    }
    out + "}\n"
}

/// `manufactured_solutions.cuh`.
pub fn header() -> String {
    let solution = function("f64 manufactured_solution(const f64* x, f64* grad)", &|dim, s| {
        if dim == 2 {
            solution_code::<2>(s)
        } else {
            solution_code::<3>(s)
        }
    });
    let source =
        function("f64 manufactured_source(const f64* x, f64 kappa, f64 reaction)", &|dim, s| {
            if dim == 2 {
                source_code::<2>(s)
            } else {
                source_code::<3>(s)
            }
        });
    let each: Vec<String> = solutions_with_device_code()
        .map(|s| format!("X(__VA_ARGS__, {})", solution_number(s).expect("device code")))
        .collect();
    let each = each.join(" ");
    format!(
        "// Generated by build.rs (build/manufactured_code.rs) from crates/hdg-core/src/\n\
         // manufactured.rs and src/solution_numbers.rs: do not edit.\n\
         #pragma once\n\
         #include \"element_common.cuh\"\n\n\
         // X(..., number) for every solution with device code.\n\
         #define FOR_EACH_SOLUTION(X, ...) {each}\n\n\
         // u at x, and grad u into grad, of the solution numbered SOLUTION.\n{solution}\n\
         // f = -kappa lap u + reaction u at x, of the solution numbered SOLUTION.\n{source}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Code {
        /// The outputs computed from the record in f64, as the generated code computes them
        /// (the math functions are the host's here).
        fn replay(&self, inputs: &[(&str, f64)]) -> Vec<f64> {
            let mut values = Vec::with_capacity(self.operations.len());
            let get = |values: &Vec<f64>, v: Recorded| match v {
                Recorded::Constant(c) => c,
                Recorded::Operation(i) => values[i],
            };
            for operation in &self.operations {
                let v = match operation {
                    Operation::Input(name) => {
                        inputs.iter().find(|(n, _)| n == name).expect("an input").1
                    }
                    Operation::Binary(name, a, b) => {
                        let (a, b) = (get(&values, *a), get(&values, *b));
                        match *name {
                            "add" => a + b,
                            "sub" => a - b,
                            _ => a * b,
                        }
                    }
                    Operation::Negate(a) => -get(&values, *a),
                    Operation::Call(name, a) => {
                        let a = get(&values, *a);
                        match *name {
                            "sin" => a.sin(),
                            "cos" => a.cos(),
                            "exp" => a.exp(),
                            "sinh" => a.sinh(),
                            _ => a.cosh(),
                        }
                    }
                };
                values.push(v);
            }
            self.outputs.iter().map(|(_, v)| get(&values, *v)).collect()
        }
    }

    /// The record of every solution, replayed, gives the host's values to the bit: the
    /// generated code performs the host's operations in the host's order.
    #[test]
    fn records_replay_the_host_to_the_bit() {
        let points = [[0.3, 0.7, 0.45], [0.91, 0.15, 0.6], [0.05, 0.999, 0.5]];
        for solution in solutions_with_device_code() {
            for p in points {
                let inputs = [
                    ("x[0]", p[0]),
                    ("x[1]", p[1]),
                    ("x[2]", p[2]),
                    ("kappa", 1.7),
                    ("reaction", 0.6),
                ];
                let in_2d = solution.evaluate(&[p[0], p[1]]);
                let mut expected = in_2d.grad.to_vec();
                expected.push(in_2d.u);
                assert_eq!(solution_code::<2>(solution).replay(&inputs), expected, "{solution:?}");
                let in_3d = solution.evaluate(&p);
                let mut expected = in_3d.grad.to_vec();
                expected.push(in_3d.u);
                assert_eq!(solution_code::<3>(solution).replay(&inputs), expected, "{solution:?}");
                let f = solution.source(&[p[0], p[1]], 1.7, 0.6);
                assert_eq!(source_code::<2>(solution).replay(&inputs), [f], "{solution:?}");
                let f = solution.source(&p, 1.7, 0.6);
                assert_eq!(source_code::<3>(solution).replay(&inputs), [f], "{solution:?}");
            }
        }
    }

    /// Every number has a case, and the header is what the kernels expect to include.
    #[test]
    fn header_has_a_case_per_solution() {
        let header = header();
        for solution in solutions_with_device_code() {
            let number = solution_number(solution).unwrap();
            let case = format!("constexpr (SOLUTION == {number}) {{  // {solution:?}");
            assert_eq!(header.matches(&case).count(), 4, "{case}");
            assert_eq!(header.matches(&format!("X(__VA_ARGS__, {number})")).count(), 1);
        }
        assert!(header.contains("f64 manufactured_source(const f64* x"));
    }

    #[test]
    fn literals_read_back() {
        for v in [0.2, -0.5, std::f64::consts::PI, 1e-7, 2.0, 12.0] {
            let text = literal(v);
            assert_eq!(text.trim_matches(['(', ')']).parse::<f64>().unwrap(), v);
        }
        assert_eq!(literal(-0.5), "(-0.5)");
    }
}

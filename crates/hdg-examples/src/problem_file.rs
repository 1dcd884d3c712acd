//! Problem files: `hdg run problem.toml` solves the problem a TOML file describes.
//!
//! A problem file names the mesh, the coefficients and source of
//! `-div(kappa grad u) + c u = f`, the boundary condition of each boundary group, optionally
//! the exact solution (then the L2 errors are reported), the discretization, the solver and
//! the outputs. Every value is checked when the file is loaded or when it meets its mesh, and
//! a refusal names the file and the line: unknown keys and values of the wrong type (as TOML
//! reports them), expressions that do not parse or use names they may not, physical groups the
//! mesh does not have, regions without a coefficient value, a missing mesh file.
//!
//! # A complete example
//!
//! Every section but `[mesh]` and `[discretization]` may be left out, and so may every key
//! but `order` and one of `file` or `generate`: the defaults are those shown.
//!
//! ```toml
//! title = "Poisson on the L-shape"      # optional; printed in the summary
//!
//! [mesh]
//! file = "../meshes/l-shape-2.msh"      # a Gmsh file, relative to this file's folder;
//! # generate = "square:16"              # or a generated mesh: square:N or cube:N
//! perturb = 0.0                         # random moves of the inner vertices, 0 to 0.4 of
//! seed = 1                              #   the local edge length, and their seed
//!
//! [equation]                            # -div(kappa grad u) + c u = f
//! kappa = 1.0                           # a number, an expression, or one number per
//!                                       #   region: { plate = 1.0, ring = 100.0 }
//! reaction = 0.0                        # c, in the same forms as kappa
//! source = "0"                          # f: a number or an expression
//! mean_zero = false                     # with Neumann data everywhere and c = 0: fix the
//!                                       #   free constant by mean(u_h) = 0
//!
//! [boundary]
//! default = 0.0                         # g_D on every boundary group not listed below
//! reentrant = { dirichlet = "0" }
//! outer = { dirichlet = "(x^2 + y^2)^(1/3) * sin(2/3 * (atan2(-y, -x) + pi))" }
//! # hole = { neumann = "nx * x" }       # kappa grad u . n = g (g may use nx, ny, nz)
//! # "3" = { robin = "1 + x", alpha = 2.0 }  # kappa grad u . n + alpha u = g, by tag number
//!
//! [exact]                               # optional: the L2 errors are reported
//! u = "(x^2 + y^2)^(1/3) * sin(2/3 * (atan2(-y, -x) + pi))"
//! gradient = [                          # optional: derived from u where every function
//!   "-2/3 * (x^2 + y^2)^(-1/6) * sin(1/3 * (atan2(-y, -x) + pi))",  # of u has a
//!   "2/3 * (x^2 + y^2)^(-1/6) * cos(1/3 * (atan2(-y, -x) + pi))",   # derivative
//! ]
//!
//! [discretization]
//! order = 3                             # polynomial order k
//! tau = 1.0                             # or "kappa-over-h", "kappa-over-h:SCALE"
//!
//! [solver]
//! method = "pcg-mg"                     # a solver of `hdg solve --solver`
//! tolerance = 1e-10                     # relative residual (default 1e-6 in f32)
//! max_iterations = 100000
//! backend = "cpu"                       # or "cuda"
//! precision = "f64"                     # or "f32"
//! operator = "dbf"                      # or "matrix-free" (cuda only)
//!
//! [output]                              # paths relative to this file's folder
//! json = "l-shape.json"                 # the report of `hdg solve --json`
//! vtu = "l-shape.vtu"                  # u_h, q_h, u* for ParaView (hdg::vtu)
//! png = "l-shape.png"                   # a picture of u* (2D only)
//! ```
//!
//! # Boundary groups
//!
//! The keys of `[boundary]` (other than `default`) are the boundary's physical groups: by
//! name on a mesh file (its physical groups of lines in 2D, surfaces in 3D), or by tag number
//! given as a string (`"3" = { ... }`). Generated meshes name their sides `left`, `right`,
//! `bottom`, `top` (square: x = 0, x = 1, y = 0, y = 1) and `x0`, `x1`, `y0`, `y1`, `z0`, `z1`
//! (cube). Each group has exactly one of `dirichlet`, `neumann` or `robin` (the latter with
//! `alpha` > 0); groups not listed, and faces in no group, get Dirichlet data `default`. A
//! physical group named `default` is reached by its tag number.
//!
//! # Expressions
//!
//! Values may be numbers or expressions, strings in `x`, `y`, `z` (and `nx`, `ny`, `nz`, the
//! outward unit normal, in Neumann and Robin data) with `+ - * / ^`, parentheses, the
//! constants `pi` (also `PI`, `π`) and `e` (also `E`), the functions `sin cos tan asin acos
//! atan sinh cosh tanh asinh acosh atanh exp ln log (= ln) log2 log10 sqrt cbrt abs signum
//! floor ceil round trunc fract` and the two-argument `atan2(y, x)`, `min(a, b)`, `max(a, b)`.
//! Numbers may have exponents (`1.5e-3`). They are compiled once (by the `exmex` crate) and
//! evaluated at every quadrature point.
//!
//! Two forms that readers take differently are refused: a sign in front of a power (`-x^2`:
//! write `-(x^2)`, or `(-x)^2`) and chained powers (`2^x^2`: write `2^(x^2)` or `(2^x)^2`);
//! functions take parentheses (`sin(x)`, not `sin x`). Otherwise the usual precedence holds:
//! `^` before `*` and `/`, before `+` and `-`, and `sin(x)^2` is the square of `sin(x)`.
//!
//! A coefficient or source without variables is a constant. Without `gradient`, the gradient
//! of the exact u is derived symbolically (exmex's partial derivatives); where u uses a
//! function without one (`abs`, `atan2`, `min`, `max`, `floor`, ...), the error of q is not
//! computed, and the summary says so.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use exmex::prelude::*;
use hdg_core::{Coefficient, CoreError, Problem, Progress, ScalarField, Tau, MAX_ORDER, MIN_ORDER};
use hdg_linalg::SolverChoice;
use hdg_mesh::{Diagonal, Mesh};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use crate::{
    measured_json, parse_solver, parse_tau, print_memory, print_report, solve_measured,
    BackendKind, BuiltMesh, CudaSettings, Measured, MeshSpec, Precision, SolveSettings,
    TraceOperatorKind,
};

// ---------------------------------------------------------------------------------------------
// The file as TOML gives it.

/// A number or an expression string.
#[derive(Clone, Debug)]
enum FieldValue {
    Number(f64),
    Expression(String),
}

impl<'de> Deserialize<'de> for FieldValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FieldValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or an expression string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldValue, E> {
                Ok(FieldValue::Expression(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A coefficient: a number, an expression, or numbers per region.
#[derive(Clone, Debug)]
enum CoefficientValue {
    Field(FieldValue),
    PerRegion(Vec<(String, Spanned<f64>)>),
}

impl<'de> Deserialize<'de> for CoefficientValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CoefficientValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, an expression string or a table of values per region")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Expression(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CoefficientValue, A::Error> {
                let mut values = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    values.push((key, map.next_value::<Spanned<f64>>()?));
                }
                Ok(CoefficientValue::PerRegion(values))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    title: Option<String>,
    mesh: Spanned<RawMesh>,
    #[serde(default)]
    equation: RawEquation,
    #[serde(default)]
    boundary: RawBoundary,
    exact: Option<Spanned<RawExact>>,
    discretization: Spanned<RawDiscretization>,
    #[serde(default)]
    solver: RawSolver,
    #[serde(default)]
    output: RawOutput,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMesh {
    file: Option<Spanned<String>>,
    generate: Option<Spanned<String>>,
    perturb: Option<Spanned<f64>>,
    seed: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEquation {
    kappa: Option<Spanned<CoefficientValue>>,
    reaction: Option<Spanned<CoefficientValue>>,
    source: Option<Spanned<FieldValue>>,
    mean_zero: Option<bool>,
}

/// `[boundary]`: `default` and one condition per group (any other key).
#[derive(Default)]
struct RawBoundary {
    default: Option<Spanned<FieldValue>>,
    groups: Vec<(String, Spanned<RawCondition>)>,
}

impl<'de> Deserialize<'de> for RawBoundary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBoundary;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of boundary groups")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawBoundary, A::Error> {
                let mut raw = RawBoundary::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "default" {
                        raw.default = Some(map.next_value()?);
                    } else {
                        raw.groups.push((key, map.next_value()?));
                    }
                }
                Ok(raw)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    dirichlet: Option<Spanned<FieldValue>>,
    neumann: Option<Spanned<FieldValue>>,
    robin: Option<Spanned<FieldValue>>,
    alpha: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExact {
    u: Spanned<FieldValue>,
    gradient: Option<Spanned<Vec<Spanned<FieldValue>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiscretization {
    order: Spanned<u64>,
    tau: Option<Spanned<FieldValue>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BackendName {
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum PrecisionName {
    F32,
    F64,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSolver {
    method: Option<Spanned<String>>,
    tolerance: Option<Spanned<f64>>,
    max_iterations: Option<Spanned<u64>>,
    backend: Option<BackendName>,
    precision: Option<PrecisionName>,
    operator: Option<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutput {
    json: Option<String>,
    vtu: Option<String>,
    png: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Expressions.

/// The variables of expressions, in the order of [`Expression::evaluate`]'s slots: the point,
/// then the outward unit normal (boundary fluxes only).
const VARIABLES: [&str; 6] = ["x", "y", "z", "nx", "ny", "nz"];
/// Variables of fields of the point alone.
const POINT: &[&str] = &["x", "y", "z"];
/// Variables of boundary data that may depend on the normal.
const POINT_AND_NORMAL: &[&str] = &VARIABLES;
/// Functions of one argument (exmex's names).
const FUNCTIONS: [&str; 26] = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "exp", "ln", "log", "log2", "log10", "sqrt", "cbrt", "abs", "signum", "floor", "ceil", "round",
    "trunc", "fract",
];
/// Functions of two arguments, `name(a, b)`.
const FUNCTIONS_2: [&str; 3] = ["atan2", "min", "max"];
/// Constants, with the names exmex knows them by.
const CONSTANTS: [(&str, &str); 5] =
    [("pi", "PI"), ("PI", "PI"), ("π", "PI"), ("e", "E"), ("E", "E")];

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Name(String),
    Op(char),
    Open,
    Close,
    Comma,
}

/// Splits an expression into tokens with their byte offsets.
fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(at, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() || c == '.' {
            // digits [. digits] [e [+-] digits]
            let mut end = at;
            let bytes = text.as_bytes();
            while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
                end += 1;
            }
            if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
                let mut e = end + 1;
                if e < bytes.len() && (bytes[e] == b'+' || bytes[e] == b'-') {
                    e += 1;
                }
                if e < bytes.len() && bytes[e].is_ascii_digit() {
                    while e < bytes.len() && bytes[e].is_ascii_digit() {
                        e += 1;
                    }
                    end = e;
                }
            }
            let literal = &text[at..end];
            let value: f64 = literal.parse().map_err(|_| format!("`{literal}` is no number"))?;
            tokens.push((Token::Number(value), at));
            while chars.peek().is_some_and(|&(i, _)| i < end) {
                chars.next();
            }
        } else if c.is_alphabetic() || c == '_' {
            let mut end = at;
            while let Some(&(i, c)) = chars.peek() {
                if c.is_alphanumeric() || c == '_' {
                    end = i + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            tokens.push((Token::Name(text[at..end].to_string()), at));
        } else {
            let token = match c {
                '+' | '-' | '*' | '/' | '^' => Token::Op(c),
                '(' => Token::Open,
                ')' => Token::Close,
                ',' => Token::Comma,
                _ => return Err(format!("unexpected character `{c}`")),
            };
            tokens.push((token, at));
            chars.next();
        }
    }
    Ok(tokens)
}

/// Checks an expression's grammar and names before exmex compiles it, so that mistakes are
/// named plainly and the two forms exmex reads unlike most readers are refused (module docs).
struct Checker<'a> {
    text: &'a str,
    tokens: &'a [(Token, usize)],
    at: usize,
    allowed: &'a [&'a str],
}

impl Checker<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn peek_op(&self, ops: &[char]) -> bool {
        matches!(self.peek(), Some(Token::Op(c)) if ops.contains(c))
    }

    /// The text from token `i` on (shortened), for messages.
    fn from(&self, i: usize) -> String {
        match self.tokens.get(i) {
            Some(&(_, offset)) => {
                let rest: String = self.text[offset..].chars().take(16).collect();
                format!("at `{rest}`")
            }
            None => "at the end".into(),
        }
    }

    /// The text of tokens `start..=end`.
    fn span(&self, start: usize, end: usize) -> &str {
        let from = self.tokens[start].1;
        let to = self.tokens.get(end + 1).map_or(self.text.len(), |t| t.1);
        self.text[from..to].trim()
    }

    fn expression(&mut self) -> Result<(), String> {
        self.term()?;
        while self.peek_op(&['+', '-']) {
            self.at += 1;
            self.term()?;
        }
        Ok(())
    }

    fn term(&mut self) -> Result<(), String> {
        self.factor()?;
        while self.peek_op(&['*', '/']) {
            self.at += 1;
            self.factor()?;
        }
        Ok(())
    }

    fn factor(&mut self) -> Result<(), String> {
        if self.peek_op(&['+', '-']) {
            self.signed()
        } else {
            self.power()
        }
    }

    /// `-a` or `+a`: exmex binds the sign tighter than `^`, so `-a^b` is refused.
    fn signed(&mut self) -> Result<(), String> {
        let start = self.at;
        self.at += 1;
        if self.peek_op(&['+', '-']) {
            return self.signed();
        }
        self.primary()?;
        if self.peek_op(&['^']) {
            let shown = self.span(start, self.at);
            return Err(format!(
                "`{shown}...`: a sign before a power is ambiguous (this syntax reads -a^b as \
                 (-a)^b): write -(a^b) or (-a)^b"
            ));
        }
        Ok(())
    }

    /// `a` or `a^b`; exmex reads `a^b^c` as (a^b)^c, which most readers do not: refused.
    fn power(&mut self) -> Result<(), String> {
        let start = self.at;
        self.primary()?;
        if self.peek_op(&['^']) {
            self.at += 1;
            while self.peek_op(&['+', '-']) {
                self.at += 1;
            }
            self.primary()?;
            if self.peek_op(&['^']) {
                let shown = self.span(start, self.at);
                return Err(format!(
                    "`{shown}...` is ambiguous: write a^(b^c) or (a^b)^c for a^b^c"
                ));
            }
        }
        Ok(())
    }

    fn primary(&mut self) -> Result<(), String> {
        let Some((token, _)) = self.tokens.get(self.at).cloned() else {
            return Err("the expression ends where a value is expected".into());
        };
        let here = self.from(self.at);
        self.at += 1;
        match token {
            Token::Number(_) => Ok(()),
            Token::Open => {
                self.expression()?;
                self.close(&here)
            }
            Token::Name(name) if CONSTANTS.iter().any(|(c, _)| *c == name) => Ok(()),
            Token::Name(name) if FUNCTIONS.contains(&name.as_str()) => self.call(&name, 1),
            Token::Name(name) if FUNCTIONS_2.contains(&name.as_str()) => self.call(&name, 2),
            Token::Name(name) if self.allowed.contains(&name.as_str()) => Ok(()),
            Token::Name(name) if VARIABLES.contains(&name.as_str()) => Err(format!(
                "`{name}` (the outward normal) is known in Neumann and Robin data only; \
                 here the variables are {}",
                self.allowed.join(", ")
            )),
            Token::Name(name) => Err(format!(
                "unknown name `{name}`: the variables are {}, the constants pi and e; \
                 functions: {}, {}",
                self.allowed.join(", "),
                FUNCTIONS.join(" "),
                FUNCTIONS_2.join(" ")
            )),
            Token::Close => Err(format!("a value is expected {here}")),
            Token::Op(c) => Err(format!("a value is expected before `{c}` {here}")),
            Token::Comma => Err(format!("unexpected `,` {here}")),
        }
    }

    fn call(&mut self, name: &str, arguments: usize) -> Result<(), String> {
        if self.peek() != Some(&Token::Open) {
            return Err(format!(
                "the function `{name}` takes its argument in parentheses: {name}(...)"
            ));
        }
        let here = self.from(self.at);
        self.at += 1;
        self.expression()?;
        for _ in 1..arguments {
            if self.peek() != Some(&Token::Comma) {
                return Err(format!("`{name}` takes {arguments} arguments: {name}(a, b)"));
            }
            self.at += 1;
            self.expression()?;
        }
        if self.peek() == Some(&Token::Comma) {
            return Err(format!(
                "`{name}` takes {arguments} argument{}",
                if arguments == 1 { "" } else { "s" }
            ));
        }
        self.close(&here)
    }

    fn close(&mut self, opened: &str) -> Result<(), String> {
        if self.peek() == Some(&Token::Close) {
            self.at += 1;
            Ok(())
        } else if self.at >= self.tokens.len() {
            Err(format!("the parenthesis opened {opened} is not closed"))
        } else {
            Err(format!("`)` expected {}", self.from(self.at)))
        }
    }
}

/// An expression compiled once, evaluated at points (and normals).
#[derive(Clone)]
struct Expression {
    /// As written, for messages.
    text: String,
    flat: FlatEx<f64>,
    /// For each of the compiled expression's variables (exmex orders them by name), its slot
    /// in [`VARIABLES`].
    slots: Vec<usize>,
}

impl Expression {
    /// Checks and compiles `text`, which may use the variables `allowed`; evaluates it once.
    fn parse(text: &str, allowed: &[&str]) -> Result<Expression, String> {
        let tokens = tokenize(text)?;
        if tokens.is_empty() {
            return Err("the expression is empty".into());
        }
        let mut checker = Checker { text, tokens: &tokens, at: 0, allowed };
        checker.expression()?;
        if checker.at < tokens.len() {
            let what = if tokens[checker.at].0 == Token::Close {
                "unmatched `)`"
            } else {
                "an operator is missing"
            };
            return Err(format!("{what} {}", checker.from(checker.at)));
        }
        // What exmex reads: numbers in plain decimals (it knows no exponents: `e` is Euler's
        // number), constants by its names.
        let normalized: Vec<String> = tokens
            .iter()
            .map(|(t, _)| match t {
                Token::Number(v) => format!("{v}"),
                Token::Name(n) => CONSTANTS
                    .iter()
                    .find(|(c, _)| c == n)
                    .map_or_else(|| n.clone(), |(_, exmex)| exmex.to_string()),
                Token::Op(c) => c.to_string(),
                Token::Open => "(".into(),
                Token::Close => ")".into(),
                Token::Comma => ",".into(),
            })
            .collect();
        let flat = FlatEx::<f64>::parse(&normalized.join(" "))
            .map_err(|e| format!("cannot compile it: {e}"))?;
        let expression = Expression::from_flat(text.to_string(), flat)?;
        // Once at a point, so that an evaluation error shows now rather than mid-solve.
        let n = expression.slots.len();
        expression
            .flat
            .eval(&[0.31, 0.47, 0.53, 0.6, 0.8, 0.0][..n])
            .map_err(|e| format!("cannot evaluate it: {e}"))?;
        Ok(expression)
    }

    fn from_flat(text: String, flat: FlatEx<f64>) -> Result<Expression, String> {
        let slots = flat
            .var_names()
            .iter()
            .map(|name| {
                VARIABLES
                    .iter()
                    .position(|v| v == name)
                    .ok_or_else(|| format!("unknown variable `{name}`"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Expression { text, flat, slots })
    }

    /// The value at `x` with outward normal `n` (empty off the boundary): NaN where the
    /// expression cannot be evaluated, which the pipeline's checks of user data report.
    fn evaluate(&self, x: &[f64], n: &[f64]) -> f64 {
        let mut values = [0.0; 6];
        for (value, &slot) in values.iter_mut().zip(&self.slots) {
            let given = if slot < 3 { x.get(slot) } else { n.get(slot - 3) };
            *value = given.copied().unwrap_or(f64::NAN);
        }
        self.flat.eval(&values[..self.slots.len()]).unwrap_or(f64::NAN)
    }

    /// Whether the expression uses the variable of slot `slot`.
    fn uses(&self, slot: usize) -> bool {
        self.slots.contains(&slot)
    }

    /// The derivative with respect to the variable of slot `slot` (x, y or z).
    fn derivative(&self, slot: usize) -> Result<Expression, String> {
        let text = format!("d/d{} of {}", VARIABLES[slot], self.text);
        match self.slots.iter().position(|&s| s == slot) {
            None => {
                let zero = FlatEx::<f64>::parse("0").map_err(|e| e.to_string())?;
                Expression::from_flat(text, zero)
            }
            Some(index) => {
                let flat = self.flat.clone().partial(index).map_err(|e| e.to_string())?;
                Expression::from_flat(text, flat)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The checked file.

/// A number or a compiled expression, with where the file gives it.
#[derive(Clone)]
struct Field {
    kind: FieldKind,
    span: Range<usize>,
}

#[derive(Clone)]
enum FieldKind {
    Constant(f64),
    Expression(Arc<Expression>),
}

impl Field {
    fn constant(value: f64) -> Field {
        Field { kind: FieldKind::Constant(value), span: 0..0 }
    }

    /// The value as a function of the point.
    fn scalar(&self) -> ScalarField {
        match &self.kind {
            FieldKind::Constant(v) => {
                let v = *v;
                Arc::new(move |_| v)
            }
            FieldKind::Expression(e) => {
                let e = e.clone();
                Arc::new(move |x| e.evaluate(x, &[]))
            }
        }
    }

    /// The value as a function of the point and the outward normal.
    fn face(&self) -> hdg_core::FaceField {
        match &self.kind {
            FieldKind::Constant(v) => {
                let v = *v;
                Arc::new(move |_, _| v)
            }
            FieldKind::Expression(e) => {
                let e = e.clone();
                Arc::new(move |x, n| e.evaluate(x, n))
            }
        }
    }

    /// The constant value, for a number or an expression without variables.
    fn as_constant(&self) -> Option<f64> {
        match &self.kind {
            FieldKind::Constant(v) => Some(*v),
            FieldKind::Expression(e) if e.slots.is_empty() => Some(e.evaluate(&[], &[])),
            FieldKind::Expression(_) => None,
        }
    }

    fn expression(&self) -> Option<&Expression> {
        match &self.kind {
            FieldKind::Expression(e) => Some(e),
            FieldKind::Constant(_) => None,
        }
    }
}

#[derive(Clone)]
enum CoefficientSpec {
    Field(Field),
    PerRegion { values: Vec<(String, f64, Range<usize>)>, span: Range<usize> },
}

#[derive(Clone)]
enum ConditionKind {
    Dirichlet(Field),
    Neumann(Field),
    Robin { alpha: f64, data: Field },
}

#[derive(Clone)]
struct GroupCondition {
    /// The group's key in `[boundary]`: a physical name, a side's name or a tag number.
    key: String,
    span: Range<usize>,
    kind: ConditionKind,
}

#[derive(Clone)]
struct ExactSpec {
    u: Field,
    gradient: Option<(Vec<Field>, Range<usize>)>,
}

#[derive(Clone)]
enum MeshSource {
    Generated(MeshSpec),
    File { given: String, path: PathBuf },
}

/// What a problem file asks to write besides the summary (paths resolved against the file's
/// folder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    /// The JSON report (that of `hdg solve --json`, with the file's notes).
    pub json: Option<PathBuf>,
    /// The solution as a VTK unstructured grid ([`hdg::vtu`]), with the mesh file's regions.
    pub vtu: Option<PathBuf>,
    /// A picture of u* (2D only: [`crate::plot::solution_png`]).
    pub png: Option<PathBuf>,
}

/// A problem file, parsed and checked as far as it can be without its mesh: every
/// expression is compiled, every name and number is known ([`ProblemFile::build`] checks the
/// rest against the mesh).
#[derive(Clone)]
pub struct ProblemFile {
    path: PathBuf,
    text: String,
    title: Option<String>,
    mesh: MeshSource,
    mesh_span: Range<usize>,
    perturb: f64,
    seed: u64,
    kappa: CoefficientSpec,
    reaction: CoefficientSpec,
    source: Field,
    mean_zero: bool,
    dirichlet_default: Field,
    boundary: Vec<GroupCondition>,
    exact: Option<ExactSpec>,
    order: usize,
    tau: Tau,
    solver: SolverChoice,
    tolerance: f64,
    max_iterations: usize,
    backend: BackendKind,
    precision: Precision,
    operator: TraceOperatorKind,
    outputs: Outputs,
}

/// A problem file made ready to solve: the mesh, the problem, the settings.
pub struct Setup {
    /// The mesh, with its summary lines.
    pub mesh: BuiltMesh,
    /// The problem.
    pub problem: Problem,
    /// Order, solver, tolerance, trace operator.
    pub settings: SolveSettings,
    /// The backend.
    pub backend: BackendKind,
    /// The precision.
    pub precision: Precision,
    /// What to write.
    pub outputs: Outputs,
    /// Summary lines about the problem: the condition of each boundary group, how the exact
    /// gradient is known.
    pub notes: Vec<String>,
}

/// A solved problem file, to report.
pub struct Solved {
    path: PathBuf,
    title: Option<String>,
    mesh: String,
    operator: TraceOperatorKind,
    precision: Precision,
    tolerance: f64,
    outputs: Outputs,
    lines: Vec<String>,
    regions: Option<Vec<u32>>,
    /// The run's report and memory figures.
    pub measured: Measured,
}

/// The line (1-based) and column (1-based, in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Reads and checks a problem file ([`ProblemFile::load`]).
///
/// # Errors
/// Those of [`ProblemFile::load`].
pub fn load(path: &Path) -> Result<ProblemFile, CoreError> {
    ProblemFile::load(path)
}

/// `hdg run FILE`: loads the file, solves (reporting stages to `progress`), writes the outputs
/// and prints the summary (or, with `json`, the JSON report); whether the trace solve
/// converged.
///
/// # Errors
/// Those of [`ProblemFile::load`], [`ProblemFile::build`], the solve, and writing the outputs.
pub fn run(path: &Path, json: bool, progress: &mut dyn Progress) -> Result<bool, CoreError> {
    ProblemFile::load(path)?.solve(progress)?.finish(json)
}

impl ProblemFile {
    /// Reads the problem file at `path` and checks it ([`ProblemFile::parse`]).
    ///
    /// # Errors
    /// [`CoreError::Io`] if the file cannot be read; those of [`ProblemFile::parse`].
    pub fn load(path: &Path) -> Result<ProblemFile, CoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CoreError::Io(format!("cannot read {}: {e}", path.display())))?;
        ProblemFile::parse(&text, path)
    }

    /// Parses problem file text; `path` names it in messages, and relative paths in it are
    /// taken from its folder.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] (`problem file`) naming the file and the line of the
    /// first unknown key, value of the wrong type, expression that does not compile or uses a
    /// name it may not, or value out of range.
    pub fn parse(text: &str, path: &Path) -> Result<ProblemFile, CoreError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let (line, column) = line_and_column(text, e.span().map_or(0, |s| s.start));
            problem_error(path, format!("line {line}, column {column}: {}", e.message().trim()))
        })?;
        let at = |span: Range<usize>, message: String| -> CoreError {
            let (line, _) = line_and_column(text, span.start);
            problem_error(path, format!("line {line}: {message}"))
        };
        let field = |value: &Spanned<FieldValue>, what: &str, allowed: &[&str]| {
            compile_field(value, allowed).map_err(|m| at(value.span(), format!("{what}: {m}")))
        };
        let folder = path.parent().unwrap_or(Path::new(""));

        // [mesh]
        let mut mesh_span = raw.mesh.span();
        let raw_mesh = raw.mesh.into_inner();
        let mesh = match (raw_mesh.file, raw_mesh.generate) {
            (Some(file), None) => {
                mesh_span = file.span();
                MeshSource::File { path: folder.join(file.get_ref()), given: file.into_inner() }
            }
            (None, Some(generate)) => {
                let spec: MeshSpec = match generate.get_ref().parse() {
                    Ok(spec @ MeshSpec::Generated { .. }) => spec,
                    Ok(MeshSpec::File(_)) => {
                        return Err(at(
                            generate.span(),
                            "generate names square:N or cube:N; a mesh file is `file = ...`".into(),
                        ))
                    }
                    Err(e) => return Err(at(generate.span(), format!("generate: {e}"))),
                };
                mesh_span = generate.span();
                MeshSource::Generated(spec)
            }
            (Some(_), Some(generate)) => {
                return Err(at(generate.span(), "[mesh] has `file` or `generate`, not both".into()))
            }
            (None, None) => {
                return Err(at(
                    mesh_span.clone(),
                    "[mesh] needs `file = \"NAME.msh\"` or `generate = \"square:N\"` (or cube:N)"
                        .into(),
                ))
            }
        };
        let perturb = match raw_mesh.perturb {
            Some(p) if !(0.0..=0.4).contains(p.get_ref()) => {
                return Err(at(p.span(), format!("perturb {} is not in [0, 0.4]", p.get_ref())))
            }
            Some(p) => p.into_inner(),
            None => 0.0,
        };

        // [equation]
        let coefficient = |value: Option<Spanned<CoefficientValue>>, what: &str, default: f64| {
            let Some(value) = value else {
                return Ok(CoefficientSpec::Field(Field::constant(default)));
            };
            let span = value.span();
            match value.into_inner() {
                CoefficientValue::Field(f) => {
                    field(&Spanned::new(span.clone(), f), what, POINT).map(CoefficientSpec::Field)
                }
                CoefficientValue::PerRegion(values) if values.is_empty() => {
                    Err(at(span, format!("{what}: the table of values per region is empty")))
                }
                CoefficientValue::PerRegion(values) => Ok(CoefficientSpec::PerRegion {
                    values: values
                        .into_iter()
                        .map(|(name, v)| (name, *v.get_ref(), v.span()))
                        .collect(),
                    span,
                }),
            }
        };
        let equation = raw.equation;
        let kappa = coefficient(equation.kappa, "kappa", 1.0)?;
        let reaction = coefficient(equation.reaction, "reaction", 0.0)?;
        let source = match &equation.source {
            Some(s) => field(s, "source", POINT)?,
            None => Field::constant(0.0),
        };

        // [boundary]
        let dirichlet_default = match &raw.boundary.default {
            Some(d) => field(d, "boundary default", POINT)?,
            None => Field::constant(0.0),
        };
        let mut boundary = Vec::new();
        for (key, condition) in raw.boundary.groups {
            let span = condition.span();
            let c = condition.into_inner();
            let what = |kind: &str| format!("boundary `{key}`, {kind}");
            let kind = match (c.dirichlet, c.neumann, c.robin) {
                (Some(d), None, None) => {
                    ConditionKind::Dirichlet(field(&d, &what("dirichlet"), POINT)?)
                }
                (None, Some(n), None) => {
                    ConditionKind::Neumann(field(&n, &what("neumann"), POINT_AND_NORMAL)?)
                }
                (None, None, Some(r)) => {
                    let Some(alpha) = c.alpha.as_ref() else {
                        return Err(at(
                            span,
                            format!("boundary `{key}`: robin needs `alpha` (> 0)"),
                        ));
                    };
                    let a = *alpha.get_ref();
                    if !(a.is_finite() && a > 0.0) {
                        return Err(at(
                            alpha.span(),
                            format!("boundary `{key}`: alpha = {a} is not a positive number"),
                        ));
                    }
                    ConditionKind::Robin {
                        alpha: a,
                        data: field(&r, &what("robin"), POINT_AND_NORMAL)?,
                    }
                }
                _ => {
                    return Err(at(
                        span,
                        format!("boundary `{key}` needs exactly one of dirichlet, neumann, robin"),
                    ))
                }
            };
            if let (Some(alpha), false) = (&c.alpha, matches!(kind, ConditionKind::Robin { .. })) {
                return Err(at(
                    alpha.span(),
                    format!("boundary `{key}`: alpha belongs to robin conditions"),
                ));
            }
            boundary.push(GroupCondition { key, span, kind });
        }

        // [exact]
        let exact = match raw.exact {
            None => None,
            Some(exact) => {
                let exact = exact.into_inner();
                let u = field(&exact.u, "exact u", POINT)?;
                let gradient = match exact.gradient {
                    None => None,
                    Some(g) => {
                        let span = g.span();
                        let fields = g
                            .into_inner()
                            .iter()
                            .enumerate()
                            .map(|(i, c)| field(c, &format!("exact gradient[{i}]"), POINT))
                            .collect::<Result<Vec<_>, _>>()?;
                        Some((fields, span))
                    }
                };
                Some(ExactSpec { u, gradient })
            }
        };

        // [discretization]
        let discretization = raw.discretization.into_inner();
        let order = *discretization.order.get_ref();
        if !(MIN_ORDER as u64..=MAX_ORDER as u64).contains(&order) {
            return Err(at(
                discretization.order.span(),
                format!("order {order} is not in {MIN_ORDER}..={MAX_ORDER}"),
            ));
        }
        let tau = match discretization.tau {
            None => Tau::Constant(1.0),
            Some(t) => {
                let parsed = match t.get_ref() {
                    FieldValue::Number(v) => parse_tau(&v.to_string()),
                    FieldValue::Expression(s) => parse_tau(s),
                };
                parsed.map_err(|e| at(t.span(), format!("tau: {e}")))?
            }
        };

        // [solver]
        let s = raw.solver;
        let precision = match s.precision {
            Some(PrecisionName::F32) => Precision::F32,
            Some(PrecisionName::F64) | None => Precision::F64,
        };
        let backend = match s.backend {
            Some(BackendName::Cuda) => BackendKind::Cuda,
            Some(BackendName::Cpu) | None => BackendKind::Cpu,
        };
        let solver = match &s.method {
            Some(m) => parse_solver(m.get_ref()).map_err(|e| at(m.span(), e))?,
            None => SolverChoice::PcgMg,
        };
        let tolerance = match &s.tolerance {
            Some(t) if !(*t.get_ref() > 0.0 && *t.get_ref() < 1.0) => {
                return Err(at(t.span(), format!("tolerance {} is not in (0, 1)", t.get_ref())))
            }
            Some(t) => *t.get_ref(),
            None if precision == Precision::F32 => 1e-6,
            None => 1e-10,
        };
        let max_iterations = match &s.max_iterations {
            Some(m) if *m.get_ref() == 0 => {
                return Err(at(m.span(), "max_iterations must be at least 1".into()))
            }
            Some(m) => usize::try_from(*m.get_ref()).unwrap_or(usize::MAX),
            None => 100_000,
        };
        let operator = match &s.operator {
            Some(o) => o.get_ref().parse().map_err(|e: String| at(o.span(), e))?,
            None => TraceOperatorKind::Dbf,
        };

        // [output]
        let resolve = |p: &Option<String>| p.as_ref().map(|p| folder.join(p));
        let outputs = Outputs {
            json: resolve(&raw.output.json),
            vtu: resolve(&raw.output.vtu),
            png: resolve(&raw.output.png),
        };

        Ok(ProblemFile {
            path: path.to_path_buf(),
            text: text.to_string(),
            title: raw.title,
            mesh,
            mesh_span,
            perturb,
            seed: raw_mesh.seed.unwrap_or(1),
            kappa,
            reaction,
            source,
            mean_zero: equation.mean_zero.unwrap_or(false),
            dirichlet_default,
            boundary,
            exact,
            order: order as usize,
            tau,
            solver,
            tolerance,
            max_iterations,
            backend,
            precision,
            operator,
            outputs,
        })
    }

    /// The backend the file asks for.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The precision the file asks for.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The polynomial order.
    pub fn order(&self) -> usize {
        self.order
    }

    /// The title, if the file gives one.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// The outputs the file asks for.
    pub fn outputs(&self) -> &Outputs {
        &self.outputs
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A refusal naming this file and the line of `span`.
    fn error_at(&self, span: &Range<usize>, message: impl fmt::Display) -> CoreError {
        let (line, _) = line_and_column(&self.text, span.start);
        problem_error(&self.path, format!("line {line}: {message}"))
    }

    /// The mesh as the summary names it.
    fn mesh_name(&self) -> String {
        match &self.mesh {
            MeshSource::Generated(spec) => spec.to_string(),
            MeshSource::File { given, .. } => given.clone(),
        }
    }

    /// Builds (reads) the mesh and the problem, checking the file against the mesh: the
    /// dimension of expressions, boundary groups and regions by name, coefficient values and
    /// the finiteness of every expression at one point of the domain (or of its group).
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] naming the file and the line; a generated mesh too
    /// large for the host ([`MeshSpec::check_size`]); [`CoreError::Io`] if the CUDA settings
    /// in the environment are malformed.
    pub fn build(&self) -> Result<Setup, CoreError> {
        let built = self.build_mesh()?;
        let mesh = &built.mesh;
        let dim = mesh.dim();
        let mut notes = Vec::new();

        // Expressions against the dimension, and at a point of the domain.
        let inside = cell_centroid(mesh, 0);
        for (what, f) in self.point_fields() {
            self.check_dimension(what, f, dim)?;
        }
        let kappa = self.coefficient("kappa", &self.kappa, &built, true, &inside)?;
        let reaction = self.coefficient("reaction", &self.reaction, &built, false, &inside)?;
        self.check_finite("source", &self.source, &inside, &[])?;
        let source = self.source.scalar();

        let mut builder = Problem::builder().kappa(kappa).reaction(reaction);
        builder = match self.source.as_constant() {
            Some(v) => builder.polynomial_source(0, move |_| v),
            None => builder.source(move |x| source(x)),
        };
        let default = self.dirichlet_default.scalar();
        builder =
            builder.dirichlet(move |x| default(x)).tau(self.tau.clone()).mean_zero(self.mean_zero);

        // Boundary groups.
        let tags: Vec<u32> = mesh.boundary_tag_counts().iter().map(|&(t, _)| t).collect();
        let mut seen: BTreeMap<u32, &str> = BTreeMap::new();
        let mut conditions = Vec::new();
        for group in &self.boundary {
            let tag = self.boundary_tag(&group.key, &built, &tags).map_err(|m| {
                self.error_at(&group.span, format!("boundary `{}`: {m}", group.key))
            })?;
            if let Some(other) = seen.insert(tag, &group.key) {
                return Err(self.error_at(
                    &group.span,
                    format!("boundary `{}` is `{other}` (tag {tag}) again", group.key),
                ));
            }
            let face = boundary_point(mesh, tag);
            let name = tag_name(&built, tag);
            let (kind, data) = match &group.kind {
                ConditionKind::Dirichlet(data) => ("Dirichlet", data),
                ConditionKind::Neumann(data) => ("Neumann", data),
                ConditionKind::Robin { data, .. } => ("Robin", data),
            };
            let what = format!("boundary `{}`, {}", group.key, kind.to_lowercase());
            self.check_dimension(&what, data, dim)?;
            if let Some((x, n)) = &face {
                self.check_finite(&what, data, x, n)?;
            }
            let g = data.face();
            builder = match &group.kind {
                ConditionKind::Dirichlet(data) => {
                    let g = data.scalar();
                    builder.dirichlet_on(tag, move |x| g(x))
                }
                ConditionKind::Neumann(_) => builder.neumann(tag, move |x, n| g(x, n)),
                ConditionKind::Robin { alpha, .. } => {
                    builder.robin(tag, *alpha, move |x, n| g(x, n))
                }
            };
            conditions.push((
                tag,
                match &group.kind {
                    ConditionKind::Robin { alpha, .. } => {
                        format!("Robin (alpha {alpha}) on {name}")
                    }
                    _ => format!("{kind} on {name}"),
                },
            ));
        }
        let rest: Vec<String> =
            tags.iter().filter(|t| !seen.contains_key(t)).map(|&t| tag_name(&built, t)).collect();
        if let Some(&tag) = tags.iter().find(|t| !seen.contains_key(t)) {
            if let Some((x, _)) = boundary_point(mesh, tag) {
                self.check_finite("boundary default", &self.dirichlet_default, &x, &[])?;
            }
            conditions.push((tag, format!("Dirichlet (default data) on {}", rest.join(", "))));
        }
        conditions.sort_by_key(|(tag, _)| *tag);
        let conditions: Vec<String> = conditions.into_iter().map(|(_, c)| c).collect();
        notes.push(format!("boundary conditions: {}", conditions.join("; ")));

        // The exact solution.
        if let Some(exact) = &self.exact {
            self.check_finite("exact u", &exact.u, &inside, &[])?;
            let u = exact.u.scalar();
            let gradient: Result<Vec<Field>, String> = match &exact.gradient {
                Some((g, span)) if g.len() != dim => {
                    return Err(self.error_at(
                        span,
                        format!("the exact gradient has {} entries for a {dim}D mesh", g.len()),
                    ))
                }
                Some((g, _)) => {
                    for (i, f) in g.iter().enumerate() {
                        self.check_finite(&format!("exact gradient[{i}]"), f, &inside, &[])?;
                    }
                    notes.push("exact solution: u and its gradient as given".into());
                    Ok(g.clone())
                }
                None => match exact.u.expression() {
                    None => Ok(vec![Field::constant(0.0); dim]),
                    Some(e) => (0..dim)
                        .map(|slot| {
                            e.derivative(slot).map(|d| Field {
                                kind: FieldKind::Expression(Arc::new(d)),
                                span: exact.u.span.clone(),
                            })
                        })
                        .collect(),
                },
            };
            match gradient {
                Ok(g) => {
                    if exact.gradient.is_none() {
                        notes.push("exact solution: u as given, its gradient derived".into());
                    }
                    let g: Vec<ScalarField> = g.iter().map(Field::scalar).collect();
                    builder = builder.exact_with_gradient(
                        move |x| u(x),
                        move |x, out| {
                            for (o, g) in out.iter_mut().zip(&g) {
                                *o = g(x);
                            }
                        },
                    );
                }
                Err(why) => {
                    notes.push(format!(
                        "exact solution: u only (its gradient could not be derived: {why}; give \
                         [exact] gradient for the error of q)"
                    ));
                    builder = builder.exact(move |x| u(x));
                }
            }
        }

        let settings = SolveSettings {
            order: self.order,
            tolerance: self.tolerance,
            max_iterations: self.max_iterations,
            solver: self.solver,
            operator: self.operator,
            cuda: CudaSettings::from_environment()?,
            keep_solution: self.outputs.vtu.is_some() || self.outputs.png.is_some(),
        };
        Ok(Setup {
            mesh: built,
            problem: builder.build(),
            settings,
            backend: self.backend,
            precision: self.precision,
            outputs: self.outputs.clone(),
            notes,
        })
    }

    /// Builds the problem and solves it, reporting stages to `progress`.
    ///
    /// # Errors
    /// Those of [`ProblemFile::build`] and of the solve.
    pub fn solve(&self, progress: &mut dyn Progress) -> Result<Solved, CoreError> {
        let setup = self.build()?;
        let measured = solve_measured(
            setup.backend,
            &setup.mesh.mesh,
            &setup.problem,
            &setup.settings,
            setup.precision,
            None,
            progress,
        )?;
        let mut lines = setup.mesh.summary;
        let regions = setup.mesh.regions;
        lines.extend(setup.notes);
        Ok(Solved {
            path: self.path.clone(),
            title: self.title.clone(),
            mesh: self.mesh_name(),
            operator: self.operator,
            precision: self.precision,
            tolerance: self.tolerance,
            outputs: setup.outputs,
            lines,
            regions,
            measured,
        })
    }

    fn build_mesh(&self) -> Result<BuiltMesh, CoreError> {
        let spec = match &self.mesh {
            MeshSource::Generated(spec) => {
                spec.check_size(self.order, self.backend, self.precision)?;
                spec.clone()
            }
            MeshSource::File { given, path } => {
                if !path.is_file() {
                    let resolved = if path.as_path() == Path::new(given) {
                        String::new()
                    } else {
                        format!(" ({})", path.display())
                    };
                    return Err(self.error_at(
                        &self.mesh_span,
                        format!(
                            "the mesh file {given}{resolved} does not exist (a relative path is \
                             taken from the problem file's folder)"
                        ),
                    ));
                }
                MeshSpec::File(path.clone())
            }
        };
        spec.build(Diagonal::Right, self.perturb, self.seed)
            .map_err(|e| self.error_at(&self.mesh_span, format!("mesh {spec}: {e}")))
    }

    /// Every field of the point (not boundary data), with its name.
    fn point_fields(&self) -> Vec<(String, &Field)> {
        let mut fields = Vec::new();
        for (name, c) in [("kappa", &self.kappa), ("reaction", &self.reaction)] {
            if let CoefficientSpec::Field(f) = c {
                fields.push((name.to_string(), f));
            }
        }
        fields.push(("source".into(), &self.source));
        fields.push(("boundary default".into(), &self.dirichlet_default));
        if let Some(exact) = &self.exact {
            fields.push(("exact u".into(), &exact.u));
            for (i, g) in exact.gradient.iter().flat_map(|(g, _)| g.iter()).enumerate() {
                fields.push((format!("exact gradient[{i}]"), g));
            }
        }
        fields
    }

    /// Refuses an expression that uses z (nz) on a 2D mesh.
    fn check_dimension(
        &self,
        what: impl fmt::Display,
        f: &Field,
        dim: usize,
    ) -> Result<(), CoreError> {
        if let Some(e) = f.expression() {
            if dim == 2 && (e.uses(2) || e.uses(5)) {
                let name = if e.uses(2) { "z" } else { "nz" };
                return Err(self.error_at(
                    &f.span,
                    format!("{what}: `{}` uses {name}, but the mesh is 2D", e.text),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a field whose value at `x` (normal `n`) is not finite.
    fn check_finite(&self, what: &str, f: &Field, x: &[f64], n: &[f64]) -> Result<(), CoreError> {
        let value = f.face()(x, n);
        if value.is_finite() {
            return Ok(());
        }
        let text = f.expression().map_or_else(String::new, |e| format!(" `{}`", e.text));
        Err(self
            .error_at(&f.span, format!("{what}{text} is {value} at {x:?}, a point of the mesh")))
    }

    /// A coefficient against the mesh: constants' sign, expressions at a point of the domain,
    /// regions by name with a value for each region the mesh has.
    fn coefficient(
        &self,
        name: &'static str,
        spec: &CoefficientSpec,
        built: &BuiltMesh,
        positive: bool,
        inside: &[f64],
    ) -> Result<Coefficient, CoreError> {
        let rule = if positive { "> 0" } else { ">= 0" };
        let bad = |v: f64| !v.is_finite() || if positive { v <= 0.0 } else { v < 0.0 };
        match spec {
            CoefficientSpec::Field(f) => {
                if let Some(v) = f.as_constant() {
                    if bad(v) {
                        return Err(self.error_at(&f.span, format!("{name} = {v} is not {rule}")));
                    }
                    return Ok(Coefficient::Constant(v));
                }
                let value = f.scalar()(inside);
                if bad(value) {
                    let text = f.expression().map_or_else(String::new, |e| e.text.clone());
                    return Err(self.error_at(
                        &f.span,
                        format!("{name} `{text}` is {value} at {inside:?}, a point of the mesh: not {rule}"),
                    ));
                }
                let g = f.scalar();
                Ok(Coefficient::field(move |x| g(x)))
            }
            CoefficientSpec::PerRegion { values, span } => {
                let (Some(groups), Some(regions)) = (&built.file, &built.regions) else {
                    return Err(self.error_at(
                        span,
                        format!(
                            "{name} per region needs a mesh file with regions (physical groups \
                             of cells); a generated mesh has none"
                        ),
                    ));
                };
                let mut by_tag = BTreeMap::new();
                for (region, value, value_span) in values {
                    let tag = match region.parse::<u32>() {
                        Ok(tag) => tag,
                        Err(_) => groups.region(region).map_err(|e| {
                            self.error_at(value_span, format!("{name}: {}", mesh_message(e)))
                        })?,
                    };
                    if bad(*value) {
                        return Err(self.error_at(
                            value_span,
                            format!("{name} = {value} on region `{region}` is not {rule}"),
                        ));
                    }
                    by_tag.insert(tag, *value);
                }
                let present: BTreeSet<u32> = regions.iter().copied().collect();
                let missing: Vec<String> = present
                    .iter()
                    .filter(|t| !by_tag.contains_key(t))
                    .map(|&t| match groups.name(groups.dim, t) {
                        Some(n) => format!("`{n}` ({t})"),
                        None if t == 0 => "0 (cells in no physical group)".to_string(),
                        None => t.to_string(),
                    })
                    .collect();
                if !missing.is_empty() {
                    return Err(self.error_at(
                        span,
                        format!(
                            "{name} has no value for region {} of the mesh",
                            missing.join(", ")
                        ),
                    ));
                }
                Coefficient::per_region(name, regions, &by_tag)
            }
        }
    }

    /// The boundary tag of a `[boundary]` key: a tag number, a physical group's name, or a
    /// generated mesh's side.
    fn boundary_tag(&self, key: &str, built: &BuiltMesh, tags: &[u32]) -> Result<u32, String> {
        let listed = || tags.iter().map(|&t| tag_name(built, t)).collect::<Vec<_>>().join(", ");
        if let Ok(tag) = key.parse::<u32>() {
            return if tags.contains(&tag) {
                Ok(tag)
            } else {
                Err(format!("no boundary face has tag {tag} (the mesh's tags: {})", listed()))
            };
        }
        match &built.file {
            Some(groups) => groups.boundary_tag(key).map_err(mesh_message),
            None => generated_sides(built.mesh.dim())
                .iter()
                .find(|(name, _)| *name == key)
                .map(|&(_, tag)| tag)
                .ok_or_else(|| {
                    format!(
                        "unknown boundary `{key}` of the generated {}: its sides are {}",
                        self.mesh_name(),
                        listed()
                    )
                }),
        }
    }
}

/// The names of the sides of generated meshes (`hdg_mesh::generate`'s tags).
fn generated_sides(dim: usize) -> &'static [(&'static str, u32)] {
    use hdg_mesh::generate::{
        TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP, TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1,
    };
    if dim == 2 {
        &[("left", TAG_LEFT), ("right", TAG_RIGHT), ("bottom", TAG_BOTTOM), ("top", TAG_TOP)]
    } else {
        &[
            ("x0", TAG_X0),
            ("x1", TAG_X1),
            ("y0", TAG_Y0),
            ("y1", TAG_Y1),
            ("z0", TAG_Z0),
            ("z1", TAG_Z1),
        ]
    }
}

/// A boundary tag as the summary names it: `outer (2)`, `left (4)`, `untagged` or `7`.
fn tag_name(built: &BuiltMesh, tag: u32) -> String {
    let dim = built.mesh.dim();
    if tag == hdg_mesh::gmsh::UNTAGGED {
        return "untagged faces".into();
    }
    let name = match &built.file {
        Some(groups) => groups.name(dim - 1, tag).map(str::to_string),
        None => generated_sides(dim).iter().find(|(_, t)| *t == tag).map(|(n, _)| n.to_string()),
    };
    match name {
        Some(name) => format!("{name} ({tag})"),
        None => tag.to_string(),
    }
}

/// The centroid of cell `c`.
fn cell_centroid(mesh: &Mesh, c: usize) -> Vec<f64> {
    let d = mesh.dim();
    let vertices = mesh.cell_vertices(c);
    let mut x = vec![0.0; d];
    for &v in vertices {
        for (xi, p) in x.iter_mut().zip(mesh.vertex(v)) {
            *xi += p / vertices.len() as f64;
        }
    }
    x
}

/// The midpoint of a boundary face tagged `tag` and its outward unit normal.
fn boundary_point(mesh: &Mesh, tag: u32) -> Option<(Vec<f64>, Vec<f64>)> {
    let d = mesh.dim();
    let f =
        (0..mesh.n_faces()).find(|&f| mesh.is_boundary_face(f) && mesh.boundary_tag(f) == tag)?;
    let corners: Vec<&[f64]> = mesh.face_vertices(f).iter().map(|&v| mesh.vertex(v)).collect();
    let mid: Vec<f64> =
        (0..d).map(|i| corners.iter().map(|p| p[i]).sum::<f64>() / corners.len() as f64).collect();
    let mut n = if d == 2 {
        vec![corners[1][1] - corners[0][1], corners[0][0] - corners[1][0]]
    } else {
        let a: Vec<f64> = (0..3).map(|i| corners[1][i] - corners[0][i]).collect();
        let b: Vec<f64> = (0..3).map(|i| corners[2][i] - corners[0][i]).collect();
        vec![a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    };
    let inside = cell_centroid(mesh, mesh.face_cells(f)[0]);
    let outward: f64 = n.iter().zip(mid.iter().zip(&inside)).map(|(n, (m, c))| n * (m - c)).sum();
    let length = n.iter().map(|v| v * v).sum::<f64>().sqrt();
    let sign = if outward < 0.0 { -1.0 } else { 1.0 };
    n.iter_mut().for_each(|v| *v *= sign / length);
    Some((mid, n))
}

/// Compiles a number or an expression in the variables `allowed`.
fn compile_field(value: &Spanned<FieldValue>, allowed: &[&str]) -> Result<Field, String> {
    let kind = match value.get_ref() {
        FieldValue::Number(v) => FieldKind::Constant(*v),
        FieldValue::Expression(text) => FieldKind::Expression(Arc::new(
            Expression::parse(text, allowed).map_err(|m| format!("`{text}`: {m}"))?,
        )),
    };
    Ok(Field { kind, span: value.span() })
}

fn problem_error(path: &Path, message: String) -> CoreError {
    CoreError::InvalidParameter {
        name: "problem file",
        reason: format!("{}, {message}", path.display()),
    }
}

impl Solved {
    /// Writes the JSON report where the file asks for it, and prints the summary (or, with
    /// `json`, the JSON report on standard output); whether the trace solve converged within
    /// the tolerance.
    ///
    /// # Errors
    /// [`CoreError::Io`] if the JSON report cannot be written.
    pub fn finish(self, json: bool) -> Result<bool, CoreError> {
        let report = self.json();
        if let Some(path) = &self.outputs.json {
            let text = serde_json::to_string_pretty(&report)
                .map_err(|e| CoreError::Io(format!("JSON report: {e}")))?;
            std::fs::write(path, text + "\n")
                .map_err(|e| CoreError::Io(format!("cannot write {}: {e}", path.display())))?;
        }
        let files =
            crate::SolutionOutputs { vtu: self.outputs.vtu.clone(), png: self.outputs.png.clone() };
        let pending = match &self.measured.solution {
            Some(solution) => files.write(solution, self.regions.as_deref())?,
            None => Vec::new(),
        };
        let r = &self.measured.report;
        if json {
            println!("{report}");
            for line in &pending {
                eprintln!("hdg: {line}");
            }
        } else {
            let title = self.title.as_ref().map_or_else(String::new, |t| format!(" ({t})"));
            println!(
                "hdg run: {}{title}, mesh {}, order {}",
                self.path.display(),
                self.mesh,
                r.order
            );
            print_report(r, self.operator, &self.lines);
            print_memory(&self.measured);
            if let Some(path) = &self.outputs.json {
                println!("  output         {} (JSON report)", path.display());
            }
            for line in &pending {
                println!("  {line}");
            }
        }
        let floor = 1e-6;
        if self.precision == Precision::F32 && self.tolerance < floor {
            eprintln!(
                "hdg: warning: tolerance {:e} is below what f32 reaches (about {floor:e}); the \
                 solve stopped at relative residual {:.3e} (use precision = \"f64\")",
                self.tolerance, r.solve.relative_residual
            );
            return Ok(false);
        }
        Ok(r.solve.converged)
    }

    /// The JSON report: that of `hdg solve --json` ([`measured_json`]) with `operator`,
    /// `mesh_notes` (the summary's lines about the mesh and the problem), `problem_file`,
    /// `title` and `mesh`.
    pub fn json(&self) -> serde_json::Value {
        let mut json = measured_json(&self.measured);
        json["operator"] = self.operator.name().into();
        json["mesh_notes"] = serde_json::json!(self.lines);
        json["problem_file"] = self.path.display().to_string().into();
        json["title"] = serde_json::json!(self.title);
        json["mesh"] = self.mesh.clone().into();
        json
    }
}

/// A mesh error's message without its kind (the message of a problem file names the context).
fn mesh_message(e: hdg_mesh::MeshError) -> String {
    match e {
        hdg_mesh::MeshError::InvalidParameter(m) => m,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
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
            crate::solve_on(
                BackendKind::Cpu,
                &setup.mesh.mesh,
                problem,
                &setup.settings,
                Precision::F64,
                None,
                &mut hdg_core::Silent,
            )
            .unwrap()
            .errors
            .unwrap()
        };
        let (ours, theirs) = (solve(&setup.problem), solve(&rust));
        for (a, b, name) in
            [(ours.u, theirs.u, "u"), (ours.q, theirs.q, "q"), (ours.u_star, theirs.u_star, "u*")]
        {
            assert!((a - b).abs() <= 1e-12 * b, "{name}: {a:e} from the file, {b:e} from Rust");
            // and the problem is the manufactured one: the errors are discretization errors
            assert!(b < 1e-2, "{name}: {b:e}");
        }
    }

    fn generate_tag(side: &str) -> u32 {
        generated_sides(2).iter().find(|(n, _)| *n == side).unwrap().1
    }

    /// The example of the module documentation is a valid file whose problem solves.
    #[test]
    fn the_documented_example_parses_and_builds() {
        let source = include_str!("problem_file.rs");
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
        assert!(setup.problem.exact.as_ref().is_some_and(|e| e.has_gradient()));
        assert_eq!(setup.problem.condition(1).name(), "Dirichlet");
    }

    /// Where u uses a function without a derivative, the errors of u and u* are still
    /// reported, q's is not, and the summary says why; a given gradient of the wrong length is
    /// refused.
    #[test]
    fn an_exact_u_without_a_derivative_gives_the_errors_of_u_only() {
        let head = "[mesh]\ngenerate = \"square:2\"\n[discretization]\norder = 1\n";
        let text = format!("{head}[exact]\nu = \"abs(x - 0.5)\"\n");
        let setup = ProblemFile::parse(&text, Path::new("abs.toml")).unwrap().build().unwrap();
        assert!(setup.problem.exact.as_ref().is_some_and(|e| !e.has_gradient()));
        assert!(
            setup.notes.iter().any(|n| n.contains("could not be derived")),
            "{:?}",
            setup.notes
        );
        let text = format!("{head}[exact]\nu = \"x\"\ngradient = [\"1\"]\n");
        let refused =
            ProblemFile::parse(&text, Path::new("g.toml")).unwrap().build().err().unwrap();
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
}

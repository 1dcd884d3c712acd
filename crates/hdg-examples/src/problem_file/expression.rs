//! Expressions in x, y, z (and nx, ny, nz for boundary data): checked, then compiled by exmex.
use super::*;

// ---------------------------------------------------------------------------------------------
// Expressions.

/// The variables of expressions, in the order of [`Expression::evaluate`]'s slots: the point,
/// then the outward unit normal (boundary fluxes only).
pub(super) const VARIABLES: [&str; 6] = ["x", "y", "z", "nx", "ny", "nz"];
/// Variables of fields of the point alone.
pub(super) const POINT: &[&str] = &["x", "y", "z"];
/// Variables of boundary data that may depend on the normal.
pub(super) const POINT_AND_NORMAL: &[&str] = &VARIABLES;
/// Functions of one argument (exmex's names).
pub(super) const FUNCTIONS: [&str; 26] = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "exp", "ln", "log", "log2", "log10", "sqrt", "cbrt", "abs", "signum", "floor", "ceil", "round",
    "trunc", "fract",
];
/// Functions of two arguments, `name(a, b)`.
pub(super) const FUNCTIONS_2: [&str; 3] = ["atan2", "min", "max"];
/// Constants, with the names exmex knows them by.
pub(super) const CONSTANTS: [(&str, &str); 5] =
    [("pi", "PI"), ("PI", "PI"), ("π", "PI"), ("e", "E"), ("E", "E")];

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Token {
    Number(f64),
    Name(String),
    Op(char),
    Open,
    Close,
    Comma,
}

/// Splits an expression into tokens with their byte offsets.
pub(super) fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, String> {
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
pub(super) struct Checker<'a> {
    pub(super) text: &'a str,
    pub(super) tokens: &'a [(Token, usize)],
    pub(super) at: usize,
    pub(super) allowed: &'a [&'a str],
}

impl Checker<'_> {
    pub(super) fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    pub(super) fn peek_op(&self, ops: &[char]) -> bool {
        matches!(self.peek(), Some(Token::Op(c)) if ops.contains(c))
    }

    /// The text from token `i` on (shortened), for messages.
    pub(super) fn from(&self, i: usize) -> String {
        match self.tokens.get(i) {
            Some(&(_, offset)) => {
                let rest: String = self.text[offset..].chars().take(16).collect();
                format!("at `{rest}`")
            }
            None => "at the end".into(),
        }
    }

    /// The text of tokens `start..=end`.
    pub(super) fn span(&self, start: usize, end: usize) -> &str {
        let from = self.tokens[start].1;
        let to = self.tokens.get(end + 1).map_or(self.text.len(), |t| t.1);
        self.text[from..to].trim()
    }

    pub(super) fn expression(&mut self) -> Result<(), String> {
        self.term()?;
        while self.peek_op(&['+', '-']) {
            self.at += 1;
            self.term()?;
        }
        Ok(())
    }

    pub(super) fn term(&mut self) -> Result<(), String> {
        self.factor()?;
        while self.peek_op(&['*', '/']) {
            self.at += 1;
            self.factor()?;
        }
        Ok(())
    }

    pub(super) fn factor(&mut self) -> Result<(), String> {
        if self.peek_op(&['+', '-']) {
            self.signed()
        } else {
            self.power()
        }
    }

    /// `-a` or `+a`: exmex binds the sign tighter than `^`, so `-a^b` is refused.
    pub(super) fn signed(&mut self) -> Result<(), String> {
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
    pub(super) fn power(&mut self) -> Result<(), String> {
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

    pub(super) fn primary(&mut self) -> Result<(), String> {
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

    pub(super) fn call(&mut self, name: &str, arguments: usize) -> Result<(), String> {
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

    pub(super) fn close(&mut self, opened: &str) -> Result<(), String> {
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
pub(super) struct Expression {
    /// As written, for messages.
    pub(super) text: String,
    pub(super) flat: FlatEx<f64>,
    /// For each of the compiled expression's variables (exmex orders them by name), its slot
    /// in [`VARIABLES`].
    pub(super) slots: Vec<usize>,
}

impl Expression {
    /// Checks and compiles `text`, which may use the variables `allowed`; evaluates it once.
    pub(super) fn parse(text: &str, allowed: &[&str]) -> Result<Expression, String> {
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

    pub(super) fn from_flat(text: String, flat: FlatEx<f64>) -> Result<Expression, String> {
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
    pub(super) fn evaluate(&self, x: &[f64], n: &[f64]) -> f64 {
        let mut values = [0.0; 6];
        for (value, &slot) in values.iter_mut().zip(&self.slots) {
            let given = if slot < 3 { x.get(slot) } else { n.get(slot - 3) };
            *value = given.copied().unwrap_or(f64::NAN);
        }
        self.flat.eval(&values[..self.slots.len()]).unwrap_or(f64::NAN)
    }

    /// Whether the expression uses the variable of slot `slot`.
    pub(super) fn uses(&self, slot: usize) -> bool {
        self.slots.contains(&slot)
    }

    /// The derivative with respect to the variable of slot `slot` (x, y or z).
    pub(super) fn derivative(&self, slot: usize) -> Result<Expression, String> {
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

/// Compiles a number or an expression in the variables `allowed`.
pub(super) fn compile_field(
    value: &Spanned<FieldValue>,
    allowed: &[&str],
) -> Result<Field, String> {
    let kind = match value.get_ref() {
        FieldValue::Number(v) => FieldKind::Constant(*v),
        FieldValue::Expression(text) => FieldKind::Expression(Arc::new(
            Expression::parse(text, allowed).map_err(|m| format!("`{text}`: {m}"))?,
        )),
    };
    Ok(Field { kind, span: value.span() })
}

//! Constant operators applied to panels of elements: `C = A B` or `C = A B + C` (after
//! GiMMiK's generated kernels for small constant matrices).
//!
//! `A` is a small m x k matrix that the reference element computes once in f64 (a basis at
//! quadrature points, a face trace, a derivative); `B` holds k rows of n values, one value per
//! element and row, with the element index fastest (leading dimension `ldb >= n`); `C` holds m
//! rows the same way (`ldc >= n`). Each backend applies it with a kernel of its own (CUDA:
//! source generated per operator, `hdg_backend_cuda::codegen`; CPU: a SIMD loop over elements,
//! `hdg_backend_cpu::constant_operator`); this module is what they share: the checked operator,
//! its entries in a precision, and the operation sequence that makes their results the same bits.
//!
//! **Operation sequence.** Output (i, e) starts from the product with the first nonzero of row i
//! ([`Beta::Zero`]) or from the old value of C ([`Beta::One`]) and adds the products of the
//! row's remaining nonzeros in increasing column order, each with a fused multiply-add. A row of
//! zeros writes +0 ([`Beta::Zero`]) or leaves C alone ([`Beta::One`]). The entries are those of
//! [`ConstOperator::rows`]: rounded to the precision first, zeros (-0.0 included) skipped.
use crate::Precision;

/// Whether the product adds the old value of `C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Beta {
    /// `C = A B`: `C` is only written.
    Zero,
    /// `C = A B + C`.
    One,
}

impl Beta {
    /// Both, `Zero` first.
    pub const ALL: [Beta; 2] = [Beta::Zero, Beta::One];

    /// "b0" or "b1" (kernel names, file names).
    pub fn tag(self) -> &'static str {
        match self {
            Beta::Zero => "b0",
            Beta::One => "b1",
        }
    }
}

/// Why an operator was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OperatorError {
    /// m or k is zero.
    #[error("operator '{name}' is empty ({m} x {k})")]
    Empty {
        /// Operator name.
        name: String,
        /// Rows.
        m: usize,
        /// Columns.
        k: usize,
    },
    /// The values do not hold m x k entries.
    #[error("operator '{name}' is {m} x {k} but has {len} values")]
    Shape {
        /// Operator name.
        name: String,
        /// Rows.
        m: usize,
        /// Columns.
        k: usize,
        /// Number of values given.
        len: usize,
    },
    /// An entry is NaN or infinite (or overflows f32 for an f32 kernel).
    #[error("operator '{name}': entry ({row}, {col}) = {value} is not finite in {precision:?}")]
    NotFinite {
        /// Operator name.
        name: String,
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: usize,
        /// The f64 value.
        value: f64,
        /// The precision it was converted to.
        precision: Precision,
    },
    /// The name has no character usable in an identifier.
    #[error("operator name '{0}' has no letter or digit")]
    Name(String),
    /// m or k is beyond 2^20 (row offsets and launch grids are sized for less).
    #[error("operator '{name}' ({m} x {k}) is too large")]
    TooLarge {
        /// Operator name.
        name: String,
        /// Rows.
        m: usize,
        /// Columns.
        k: usize,
    },
}

/// A constant operator: name, shape and row-major f64 values, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstOperator {
    name: String,
    m: usize,
    k: usize,
    values: Vec<f64>,
}

/// The nonzeros of one row of `A` in a precision: (column, entry) in increasing column order,
/// the entry rounded to the precision (and held in f64, exactly).
pub type OperatorRow = Vec<(usize, f64)>;

impl ConstOperator {
    /// Checks the shape (1 <= m, k <= 2^20, m * k values), that every value is finite and that
    /// the name has a letter or digit (it becomes part of kernel names).
    pub fn new(
        name: &str,
        m: usize,
        k: usize,
        values: Vec<f64>,
    ) -> Result<ConstOperator, OperatorError> {
        if m == 0 || k == 0 {
            return Err(OperatorError::Empty { name: name.into(), m, k });
        }
        if m > 1 << 20 || k > 1 << 20 {
            return Err(OperatorError::TooLarge { name: name.into(), m, k });
        }
        if m * k != values.len() {
            return Err(OperatorError::Shape { name: name.into(), m, k, len: values.len() });
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(OperatorError::NotFinite {
                name: name.into(),
                row: i / k,
                col: i % k,
                value: values[i],
                precision: Precision::F64,
            });
        }
        if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
            return Err(OperatorError::Name(name.into()));
        }
        Ok(ConstOperator { name: name.into(), m, k, values })
    }

    /// The name given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Rows of `A` (rows of `C`).
    pub fn m(&self) -> usize {
        self.m
    }

    /// Columns of `A` (rows of `B`).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The row-major values.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Entries different from zero in f64 (-0.0 counts as zero).
    pub fn nnz(&self) -> usize {
        self.values.iter().filter(|&&v| v != 0.0).count()
    }

    /// The entries in `precision`, row-major: f64 as they are, f32 rounded to nearest (an
    /// error if one overflows).
    pub fn entries(&self, precision: Precision) -> Result<Vec<f64>, OperatorError> {
        match precision {
            Precision::F64 => Ok(self.values.clone()),
            Precision::F32 => self
                .values
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let r = v as f32;
                    if r.is_finite() {
                        Ok(f64::from(r))
                    } else {
                        Err(OperatorError::NotFinite {
                            name: self.name.clone(),
                            row: i / self.k,
                            col: i % self.k,
                            value: v,
                            precision,
                        })
                    }
                })
                .collect(),
        }
    }

    /// The nonzeros of every row in `precision` (after rounding), in the order of the operation
    /// sequence (module documentation).
    pub fn rows(&self, precision: Precision) -> Result<Vec<OperatorRow>, OperatorError> {
        let entries = self.entries(precision)?;
        Ok(entries
            .chunks_exact(self.k)
            .map(|row| {
                row.iter().enumerate().filter(|(_, &a)| a != 0.0).map(|(j, &a)| (j, a)).collect()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_operator_and_the_entry() {
        assert!(matches!(ConstOperator::new("a", 0, 3, vec![]), Err(OperatorError::Empty { .. })));
        assert!(matches!(
            ConstOperator::new("a", 2, 2, vec![1.0; 3]),
            Err(OperatorError::Shape { len: 3, .. })
        ));
        assert!(matches!(
            ConstOperator::new("a", 1, 2, vec![1.0, f64::NAN]),
            Err(OperatorError::NotFinite { row: 0, col: 1, .. })
        ));
        assert!(matches!(ConstOperator::new("--", 1, 1, vec![1.0]), Err(OperatorError::Name(_))));
        let big = ConstOperator::new("big", 1, 1, vec![1e300]).unwrap();
        assert!(matches!(
            big.rows(Precision::F32),
            Err(OperatorError::NotFinite { precision: Precision::F32, .. })
        ));
    }

    #[test]
    fn rows_skip_zeros_after_rounding_and_keep_column_order() {
        // 1e-50 rounds to 0 in f32; -0.0 is a zero in both.
        let op = ConstOperator::new("r", 2, 3, vec![0.5, -0.0, 1e-50, 0.0, 0.0, 0.0]).unwrap();
        assert_eq!(op.rows(Precision::F64).unwrap(), vec![vec![(0, 0.5), (2, 1e-50)], vec![]]);
        assert_eq!(op.rows(Precision::F32).unwrap(), vec![vec![(0, 0.5)], vec![]]);
        assert_eq!(op.nnz(), 2);
    }
}

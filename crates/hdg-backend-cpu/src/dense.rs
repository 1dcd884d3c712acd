//! Small dense kernels for one element's matrices (n = 3..66 for triangles, k <= 10).
//!
//! At these sizes a general library's per-call set-up costs more than the arithmetic, so the
//! condensation uses these plain row-major loops (the benchmark compares them with faer). Each
//! works on slices with explicit leading dimensions so that it runs inside caller-owned scratch,
//! on one element's numbers or on several elements' at once (lanes: [`hdg_core::lanes`]).
pub use hdg_core::lanes::Dense;
use hdg_core::Real;

/// In-place Cholesky factorisation of the n x n SPD matrix `a` (row-major): on return the lower
/// triangle holds L with A = L L^T (the strict upper triangle is left as it was).
/// Returns `Err((pivot, value))` if a pivot is not positive.
pub fn cholesky<T: Dense>(n: usize, a: &mut [T]) -> Result<(), (usize, T)> {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if d.not_positive() {
            return Err((j, d));
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        let inv = T::one() / d;
        // Column j below the diagonal: L[i][j] = (A[i][j] - sum_k L[i][k] L[j][k]) / L[j][j].
        for i in j + 1..n {
            let (upper, lower) = a.split_at_mut(i * n);
            let row_j = &upper[j * n..j * n + j];
            let row_i = &mut lower[..n];
            let mut s = row_i[j];
            for k in 0..j {
                s -= row_i[k] * row_j[k];
            }
            row_i[j] = s * inv;
        }
    }
    Ok(())
}

/// Solves L Y = B in place for `m` right-hand sides stored as the columns of the n x m
/// row-major `b` (L from [`cholesky`]).
pub fn forward_substitution<T: Dense>(n: usize, m: usize, l: &[T], b: &mut [T]) {
    for i in 0..n {
        let (done, rest) = b.split_at_mut(i * m);
        let row_i = &mut rest[..m];
        for k in 0..i {
            let lik = l[i * n + k];
            let row_k = &done[k * m..(k + 1) * m];
            for c in 0..m {
                row_i[c] -= lik * row_k[c];
            }
        }
        let inv = T::one() / l[i * n + i];
        for v in row_i.iter_mut() {
            *v *= inv;
        }
    }
}

/// Solves L^T X = B in place for `m` right-hand sides (columns of the n x m row-major `b`).
pub fn backward_substitution<T: Dense>(n: usize, m: usize, l: &[T], b: &mut [T]) {
    for i in (0..n).rev() {
        let (head, rest) = b.split_at_mut((i + 1) * m);
        let row_i = &mut head[i * m..];
        for k in i + 1..n {
            let lki = l[k * n + i];
            let row_k = &rest[(k - i - 1) * m..(k - i) * m];
            for c in 0..m {
                row_i[c] -= lki * row_k[c];
            }
        }
        let inv = T::one() / l[i * n + i];
        for v in row_i.iter_mut() {
            *v *= inv;
        }
    }
}

/// C -= W^T W for the n x m row-major `w` and the m x m row-major `c`; only the upper
/// triangle is computed and then mirrored, so C stays exactly symmetric.
pub fn subtract_gram<T: Dense>(n: usize, m: usize, w: &[T], c: &mut [T]) {
    for k in 0..n {
        let row = &w[k * m..(k + 1) * m];
        for i in 0..m {
            let wi = row[i];
            let c_row = &mut c[i * m..(i + 1) * m];
            for j in i..m {
                c_row[j] -= wi * row[j];
            }
        }
    }
    for i in 0..m {
        for j in 0..i {
            c[i * m + j] = c[j * m + i];
        }
    }
}

/// y = A^T x for the n x m row-major `a` (y has m entries, overwritten).
pub fn transpose_times<T: Dense>(n: usize, m: usize, a: &[T], x: &[T], y: &mut [T]) {
    y[..m].iter_mut().for_each(|v| *v = T::zero());
    for k in 0..n {
        let xk = x[k];
        for (yj, &akj) in y.iter_mut().zip(&a[k * m..(k + 1) * m]) {
            *yj += akj * xk;
        }
    }
}

/// y += alpha A x for the n x m row-major `a`.
pub fn add_times<T: Dense>(n: usize, m: usize, alpha: T, a: &[T], x: &[T], y: &mut [T]) {
    for i in 0..n {
        let row = &a[i * m..(i + 1) * m];
        let mut s = T::zero();
        for (&aij, &xj) in row.iter().zip(x) {
            s += aij * xj;
        }
        y[i] += alpha * s;
    }
}

/// Replaces the factor L of [`cholesky`] (lower triangle of `a`) by the inverse of A = L L^T,
/// whole (symmetric), in place: X = L^-1 column by column from the left (column j of X needs
/// L's columns >= j only), then X^T X row by row from the top, each row's diagonal last (entry
/// (i, j) needs X's rows >= i only). The CUDA backend's block Jacobi does the same operations.
pub fn invert_from_cholesky<T: Real>(n: usize, a: &mut [T]) {
    for j in 0..n {
        a[j * n + j] = T::one() / a[j * n + j];
        for i in j + 1..n {
            let mut s = T::zero();
            for k in j..i {
                s += a[i * n + k] * a[k * n + j];
            }
            a[i * n + j] = -s / a[i * n + i];
        }
    }
    for i in 0..n {
        for j in 0..=i {
            let mut s = T::zero();
            for k in i..n {
                s += a[k * n + i] * a[k * n + j];
            }
            a[i * n + j] = s;
        }
        for j in 0..i {
            a[j * n + i] = a[i * n + j];
        }
    }
}

/// Flop count of [`cholesky`] of size n.
pub fn cholesky_flops(n: usize) -> f64 {
    let n = n as f64;
    n * n * n / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::linalg::solvers::Solve;
    use hdg_core::lanes::Batch;

    fn spd(n: usize) -> Vec<f64> {
        // A = B B^T + n I with a fixed pseudo-random B.
        let b: Vec<f64> = (0..n * n).map(|i| ((i * 7919 % 101) as f64 / 50.0) - 1.0).collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>();
            }
            a[i * n + i] += n as f64;
        }
        a
    }

    #[test]
    fn cholesky_and_solves_agree_with_faer() {
        for n in [1, 3, 10, 21, 66] {
            let a = spd(n);
            let m = 4;
            let rhs: Vec<f64> = (0..n * m).map(|i| (i as f64).sin()).collect();
            let mut l = a.clone();
            cholesky(n, &mut l).unwrap();
            let mut x = rhs.clone();
            forward_substitution(n, m, &l, &mut x);
            backward_substitution(n, m, &l, &mut x);
            let fa = faer::Mat::<f64>::from_fn(n, n, |i, j| a[i * n + j]);
            let fb = faer::Mat::<f64>::from_fn(n, m, |i, j| rhs[i * m + j]);
            let chol = fa.llt(faer::Side::Lower).unwrap();
            let fx = chol.solve(&fb);
            for i in 0..n {
                for j in 0..m {
                    assert!((x[i * m + j] - fx[(i, j)]).abs() < 1e-12, "n={n}");
                }
            }
        }
    }

    /// A times the in-place inverse is the identity, and the inverse is stored whole.
    #[test]
    fn inverse_from_cholesky() {
        for n in [1, 2, 5, 21, 45] {
            let a = spd(n);
            let mut inv = a.clone();
            cholesky(n, &mut inv).unwrap();
            invert_from_cholesky(n, &mut inv);
            for i in 0..n {
                for j in 0..n {
                    let p: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((p - want).abs() < 1e-12, "n = {n} ({i}, {j}): {p}");
                    assert_eq!(inv[i * n + j], inv[j * n + i]);
                }
            }
        }
    }

    #[test]
    fn cholesky_rejects_indefinite() {
        let mut a = vec![1.0, 2.0, 2.0, 1.0];
        assert_eq!(cholesky(2, &mut a).unwrap_err().0, 1);
    }

    #[test]
    fn gram_is_symmetric_and_correct() {
        let (n, m) = (5, 4);
        let w: Vec<f64> = (0..n * m).map(|i| (i as f64 * 0.37).cos()).collect();
        let mut c = vec![0.0; m * m];
        subtract_gram(n, m, &w, &mut c);
        for i in 0..m {
            for j in 0..m {
                let expect: f64 = -(0..n).map(|k| w[k * m + i] * w[k * m + j]).sum::<f64>();
                assert!((c[i * m + j] - expect).abs() < 1e-14);
                assert_eq!(c[i * m + j], c[j * m + i]);
            }
        }
    }

    /// A batch of SPD matrices factored and solved on lanes gives each matrix's scalar results
    /// to the bit; a batch with one bad matrix reports a failed pivot.
    fn same_bits<T: Real>() {
        let n = 9;
        let w = <T::Lanes as Batch<T>>::WIDTH;
        let matrix = |e: usize| -> Vec<T> {
            (0..n * n)
                .map(|p| {
                    let (i, j) = (p / n, p % n);
                    let v = if i == j {
                        n as f64 + 1.0 + e as f64 * 0.37
                    } else {
                        1.0 / (1.0 + (i as f64 - j as f64).abs() + 0.1 * e as f64)
                    };
                    T::from_f64_lossy(v)
                })
                .collect()
        };
        let rhs = |e: usize| -> Vec<T> {
            (0..n * 3).map(|p| T::from_f64_lossy(((p + 7 * e) as f64 * 0.3).sin())).collect()
        };
        let pack = |values: &dyn Fn(usize) -> Vec<T>, len: usize| -> Vec<T::Lanes> {
            (0..len)
                .map(|p| T::Lanes::pack(&(0..w).map(|e| values(e)[p]).collect::<Vec<_>>()))
                .collect()
        };
        let (mut a, mut b) = (pack(&matrix, n * n), pack(&rhs, n * 3));
        cholesky(n, &mut a).unwrap();
        forward_substitution(n, 3, &a, &mut b);
        backward_substitution(n, 3, &a, &mut b);
        for e in 0..w {
            let (mut ae, mut be) = (matrix(e), rhs(e));
            cholesky(n, &mut ae).unwrap();
            forward_substitution(n, 3, &ae, &mut be);
            backward_substitution(n, 3, &ae, &mut be);
            for p in 0..n * n {
                assert_eq!(a[p].lane(e).as_f64().to_bits(), ae[p].as_f64().to_bits());
            }
            for p in 0..n * 3 {
                assert_eq!(b[p].lane(e).as_f64().to_bits(), be[p].as_f64().to_bits());
            }
        }
        // The last element not positive definite: the batch says so.
        let bad = |e: usize| {
            let mut m = matrix(e);
            if e == w - 1 {
                m[4 * n + 4] = T::from_f64_lossy(-1.0);
            }
            m
        };
        let mut a = pack(&bad, n * n);
        assert!(cholesky(n, &mut a).is_err());
    }

    #[test]
    fn lanes_give_the_scalar_bits() {
        same_bits::<f64>();
        same_bits::<f32>();
    }
}

//! Element matrices when kappa or c varies inside cells (`hdg_core::coefficients`): the
//! weighted mass matrices are formed by quadrature and q is eliminated through their Cholesky
//! factor instead of a diagonal.
//!
//! With B = D^T stacked over r (dn x n: `B[(r,i)][j] = D_r[j][i]`), C = G_r stacked over r
//! (dn x nl: `C[(r,i)][(f,m)] = n_{f,r} |f| G^_{f,o}[i][m]`) and M_k = L L^T (dn x dn, or the
//! same n x n block d times for a scalar kappa), equation (1) (`docs/formulation.md`, section
//! 'The local problem') gives Q = M_k^-1 (B U - C Lambda) and the condensation of
//! `docs/formulation.md`, section 'Coefficients at quadrature points', becomes
//!
//! ```text
//! X = L^-1 [B | C]
//! S = M_c + sum_f tau_f |f| E^_f + X_B^T X_B
//! P = X_B^T X_C + tau G
//! A = X_C^T X_C + tau H
//! ```
//!
//! the same S, P, A as [`super::condense::form_element_matrices`] gives for a constant kappa
//! (M_k = det / kappa I), which the tests check. Everything after the formation (Cholesky of S,
//! K_e = A - W^T W, ...) is the constant-coefficient code.
use hdg_core::geometry::GeometryLayout;
use hdg_core::{ElementTables, Real};

use super::prepare::{ElementInput, ElementPoints};
use crate::dense;

/// Work space of the weighted forms.
pub struct WeightedScratch<T> {
    mass: Vec<T>,
    panel: Vec<T>,
    gram: Vec<T>,
}

impl<T: Real> WeightedScratch<T> {
    /// Work space for the given tables (tensor-sized: it serves both kinds of kappa).
    pub fn new(t: &ElementTables<T>) -> Self {
        let (dn, cols) = (t.dim * t.n, t.n + t.n_local_trace());
        WeightedScratch {
            mass: vec![T::zero(); dn * dn],
            panel: vec![T::zero(); dn * cols],
            gram: vec![T::zero(); cols * cols],
        }
    }
}

/// The weighted mass matrix M = det sum_q w_q weight(q) phi_i(q) phi_j(q) (n x n) into `out`,
/// `weight(q)` read at `weights[q * stride + offset]`.
fn weighted_mass<T: Real>(
    t: &ElementTables<T>,
    det: T,
    weights: &[T],
    stride: usize,
    offset: usize,
    out: &mut [T],
    ld: usize,
) {
    let n = t.n;
    let rule = &t.coefficient_rule;
    for i in 0..n {
        out[i * ld..i * ld + n].iter_mut().for_each(|v| *v = T::zero());
    }
    for q in 0..rule.n_points() {
        let w = T::from_f64_lossy(rule.weights[q]) * det * weights[q * stride + offset];
        let phi = &t.coefficient_basis[q * n..(q + 1) * n];
        for i in 0..n {
            let wi = w * phi[i];
            for (o, &pj) in out[i * ld..i * ld + n].iter_mut().zip(phi) {
                *o += wi * pj;
            }
        }
    }
}

/// M_k (scalar kappa: the n x n block; tensor: dn x dn), factored: `Err` if not SPD.
/// Returns the order of the factor.
fn factor_flux_mass<T: Real>(
    t: &ElementTables<T>,
    det: T,
    points: &ElementPoints<'_, T>,
    mass: &mut [T],
) -> Result<usize, (usize, T)> {
    let (d, n) = (t.dim, t.n);
    let m = if points.tensor {
        let dn = d * n;
        for r in 0..d {
            for s in 0..d {
                // The (r, s) block, n x n, at rows r n.., columns s n.. (leading dimension dn).
                let block = &mut mass[r * n * dn + s * n..];
                weighted_mass(t, det, points.inverse_kappa, d * d, r * d + s, block, dn);
            }
        }
        dn
    } else {
        weighted_mass(t, det, points.inverse_kappa, 1, 0, mass, n);
        n
    };
    dense::cholesky(m, &mut mass[..m * m])?;
    Ok(m)
}

/// The rows (r, i) of [B | C] (module documentation) into `panel` (dn x (n + nl)).
fn flux_panel<T: Real>(t: &ElementTables<T>, input: &ElementInput<'_, T>, panel: &mut [T]) {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (d, n, nf) = (t.dim, t.n, t.n_f);
    let cols = n + t.n_local_trace();
    let g = input.geometry;
    let det = g[layout.det()];
    let jinv = &g[layout.inverse_jacobian()..layout.inverse_jacobian() + d * d];
    for r in 0..d {
        for i in 0..n {
            let row = &mut panel[(r * n + i) * cols..(r * n + i + 1) * cols];
            for j in 0..n {
                row[j] =
                    (0..d).map(|s| jinv[s * d + r] * t.derivative(s)[j * n + i]).sum::<T>() * det;
            }
            for f in 0..t.n_faces {
                let coef = g[layout.normal() + f * d + r] * g[layout.face_jacobian() + f];
                let gt = t.face_trace(f, input.orientations[f] as usize);
                for m in 0..nf {
                    row[n + f * nf + m] = coef * gt[i * nf + m];
                }
            }
        }
    }
}

/// L^-1 applied to the panel: per direction with the n x n factor (scalar kappa), at once with
/// the dn x dn one (tensor).
fn solve_panel<T: Real>(t: &ElementTables<T>, m: usize, mass: &[T], panel: &mut [T]) {
    let (dn, cols) = (t.dim * t.n, t.n + t.n_local_trace());
    for block in panel[..dn * cols].chunks_mut(m * cols) {
        dense::forward_substitution(m, cols, &mass[..m * m], block);
    }
}

/// S (n x n), P (n x nl) and A (nl x nl) of one element whose coefficients vary inside it
/// (module documentation); the outputs of [`super::condense::form_element_matrices`].
/// Returns the failing pivot if M_k is not positive definite.
pub fn form_weighted_element_matrices<T: Real>(
    t: &ElementTables<T>,
    input: &ElementInput<'_, T>,
    points: &ElementPoints<'_, T>,
    scratch: &mut WeightedScratch<T>,
    s_mat: &mut [T],
    p: &mut [T],
    a: &mut [T],
) -> Result<(), (usize, T)> {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (d, n, nf, nl) = (t.dim, t.n, t.n_f, t.n_local_trace());
    let cols = n + nl;
    let det = input.geometry[layout.det()];
    let m = factor_flux_mass(t, det, points, &mut scratch.mass)?;
    flux_panel(t, input, &mut scratch.panel);
    solve_panel(t, m, &scratch.mass, &mut scratch.panel);

    // X^T X, upper triangle (rows of X in order: the same sums for S, P and A).
    let gram = &mut scratch.gram;
    gram.iter_mut().for_each(|v| *v = T::zero());
    for row in scratch.panel[..d * n * cols].chunks_exact(cols) {
        for i in 0..cols {
            let xi = row[i];
            for (g, &xj) in gram[i * cols + i..(i + 1) * cols].iter_mut().zip(&row[i..]) {
                *g += xi * xj;
            }
        }
    }
    let x_tx = |i: usize, j: usize| if i <= j { gram[i * cols + j] } else { gram[j * cols + i] };

    // S = M_c + sum_f tau_f |f| E^_f + X_B^T X_B
    weighted_mass(t, det, points.reaction, 1, 0, s_mat, n);
    for f in 0..t.n_faces {
        let coef = input.tau[f] * input.geometry[layout.face_jacobian() + f];
        for (sv, &ev) in s_mat.iter_mut().zip(t.face_mass(f)) {
            *sv += coef * ev;
        }
    }
    for i in 0..n {
        for j in 0..n {
            s_mat[i * n + j] += x_tx(i, j);
        }
    }
    // P = X_B^T X_C + tau G,  A = X_C^T X_C + tau H
    for i in 0..n {
        for c in 0..nl {
            p[i * nl + c] = x_tx(i, n + c);
        }
    }
    for a_row in 0..nl {
        for c in 0..nl {
            a[a_row * nl + c] = x_tx(n + a_row, n + c);
        }
    }
    for f in 0..t.n_faces {
        let tau_f = input.tau[f] * input.geometry[layout.face_jacobian() + f];
        let gt = t.face_trace(f, input.orientations[f] as usize);
        for i in 0..n {
            for m in 0..nf {
                p[i * nl + f * nf + m] += tau_f * gt[i * nf + m];
            }
        }
        for m in 0..nf {
            a[(f * nf + m) * nl + f * nf + m] += tau_f;
        }
    }
    Ok(())
}

/// Q = M_k^-1 (B U - C Lambda) (equation (1)) of one element whose kappa varies inside it, into
/// `q` (`[r * n + i]`). Returns the failing pivot if M_k is not positive definite.
pub fn recover_weighted_flux<T: Real>(
    t: &ElementTables<T>,
    input: &ElementInput<'_, T>,
    points: &ElementPoints<'_, T>,
    scratch: &mut WeightedScratch<T>,
    u: &[T],
    lambda: &[T],
    q: &mut [T],
) -> Result<(), (usize, T)> {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (dn, n, cols) = (t.dim * t.n, t.n, t.n + t.n_local_trace());
    let det = input.geometry[layout.det()];
    let m = factor_flux_mass(t, det, points, &mut scratch.mass)?;
    flux_panel(t, input, &mut scratch.panel);
    for (row, qv) in scratch.panel[..dn * cols].chunks_exact(cols).zip(q.iter_mut()) {
        let bu: T = row[..n].iter().zip(u).map(|(&b, &x)| b * x).sum();
        let cl: T = row[n..].iter().zip(lambda).map(|(&c, &x)| c * x).sum();
        *qv = bu - cl;
    }
    for block in q[..dn].chunks_mut(m) {
        dense::forward_substitution(m, 1, &scratch.mass[..m * m], block);
        dense::backward_substitution(m, 1, &scratch.mass[..m * m], block);
    }
    Ok(())
}

/// The L2 projection onto \[P_k\]^d of kappa^-1 q_h, `[r * n + i]`: what the postprocessing's
/// right-hand side -(kappa^-1 q_h, grad w) needs (grad w of w in P_{k+1} lies in \[P_k\]^d).
/// The reference mass matrix is the identity, so the projection is sum_q w_q phi_i(q)
/// (kappa^-1 q_h)(q).
pub fn projected_inverse_kappa_flux<T: Real>(
    t: &ElementTables<T>,
    points: &ElementPoints<'_, T>,
    q: &[T],
    out: &mut [T],
) {
    let (d, n) = (t.dim, t.n);
    let rule = &t.coefficient_rule;
    out[..d * n].iter_mut().for_each(|v| *v = T::zero());
    let mut qh = [T::zero(); 3];
    for qp in 0..rule.n_points() {
        let phi = &t.coefficient_basis[qp * n..(qp + 1) * n];
        for (r, v) in qh.iter_mut().enumerate().take(d) {
            *v = phi.iter().zip(&q[r * n..(r + 1) * n]).map(|(&p, &c)| p * c).sum();
        }
        let w = T::from_f64_lossy(rule.weights[qp]);
        for r in 0..d {
            let kq: T = if points.tensor {
                (0..d).map(|s| points.inverse_kappa[qp * d * d + r * d + s] * qh[s]).sum()
            } else {
                points.inverse_kappa[qp] * qh[r]
            };
            let wk = w * kq;
            for (o, &p) in out[r * n..(r + 1) * n].iter_mut().zip(phi) {
                *o += wk * p;
            }
        }
    }
}

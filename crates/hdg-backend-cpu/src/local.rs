//! Per-element recovery and postprocessing kernels.
use hdg_core::geometry::{metric, GeometryLayout};
use hdg_core::{ElementTables, Real};

use hdg_core::lanes::{Batch, Dense};

use crate::dense;

/// Recovery: U = u0 + Z Lambda, then Q_r = kappa/det (det sum_s (J^-1)_{sr} D^_s^T U
/// - sum_f n_{f,r} |f| G^_{f,o} Lambda_f).
#[allow(clippy::too_many_arguments)]
pub fn recover_element<T: Real>(
    t: &ElementTables<T>,
    geometry: &[T],
    orientations: &[u8],
    kappa: T,
    recovery_operator: &[T],
    recovery_load: &[T],
    lambda: &[T],
    u: &mut [T],
    q: &mut [T],
) {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (d, n, nf) = (t.dim, t.n, t.n_f);
    let nl = t.n_local_trace();
    u.copy_from_slice(recovery_load);
    dense::add_times(n, nl, T::one(), recovery_operator, lambda, u);
    let det = geometry[layout.det()];
    let jinv = &geometry[layout.inverse_jacobian()..];
    let scale = kappa / det;
    q.iter_mut().for_each(|v| *v = T::zero());
    for r in 0..d {
        let qr = &mut q[r * n..(r + 1) * n];
        for s in 0..d {
            // (D^_s^T U)_j = sum_i D^_s[i][j] U_i
            let coef = det * jinv[s * d + r];
            let dmat = t.derivative(s);
            for i in 0..n {
                let ci = coef * u[i];
                for (qj, &dij) in qr.iter_mut().zip(&dmat[i * n..(i + 1) * n]) {
                    *qj += ci * dij;
                }
            }
        }
        for f in 0..t.n_faces {
            let coef =
                -geometry[layout.normal() + f * d + r] * geometry[layout.face_jacobian() + f];
            let gt = t.face_trace(f, orientations[f] as usize);
            dense::add_times(n, nf, coef, gt, &lambda[f * nf..(f + 1) * nf], qr);
        }
        qr.iter_mut().for_each(|v| *v *= scale);
    }
}

/// Postprocessing: u* in P_{k+1} with (grad u*, grad w) = -(kappa^-1 q_h, grad w) for w in
/// P_{k+1} and the same mean as u_h. The basis is orthonormal and hierarchical, so the mean
/// condition fixes the constant coefficient (u*_0 = U_0) and the rest is an SPD system of size
/// n' - 1. `work` holds at least (n'-1)^2 + n' values. `kappa`: `Some(kappa)` with `q` = q_h
/// for a kappa constant in the element, `None` with `q` = the L2 projection of kappa^-1 q_h
/// ([`crate::weighted::projected_inverse_kappa_flux`]) where it varies.
#[allow(clippy::too_many_arguments)]
pub fn postprocess_element<T: Real>(
    t: &ElementTables<T>,
    geometry: &[T],
    kappa: Option<T>,
    u: &[T],
    q: &[T],
    work: &mut [T],
    u_star: &mut [T],
) -> Result<(), (usize, T)> {
    let m = t.n_post - 1;
    let (stiffness, flux) = postprocess_coefficients(t, geometry, kappa);
    solve_postprocess(t, |v| v, &stiffness, &flux, q, work)?;
    u_star[0] = u[0];
    u_star[1..].copy_from_slice(&work[m * m..m * m + m]);
    Ok(())
}

/// [`postprocess_element`] for a batch of [`Batch::WIDTH`] consecutive elements with kappa constant
/// in each, one element per SIMD lane ([`hdg_core::lanes`]): the same operations on every lane,
/// the same bits. `geometry`, `kappa`, `u`, `q` and `u_star` hold the batch's elements one
/// after the other; `work` holds (n'-1)^2 + n' + d n lanes. Err(pivot) if an element's system
/// is not positive definite (then [`postprocess_element`] says which element).
#[allow(clippy::too_many_arguments)]
pub fn postprocess_batch<T: Real>(
    t: &ElementTables<T>,
    geometry: &[T],
    geometry_stride: usize,
    kappa: &[T],
    u: &[T],
    q: &[T],
    work: &mut [T::Lanes],
    u_star: &mut [T],
) -> Result<(), usize> {
    let (w, d, n, np) = (<T::Lanes as Batch<T>>::WIDTH, t.dim, t.n, t.n_post);
    let m = np - 1;
    let per_element: Vec<([T; 9], [T; 9])> = (0..w)
        .map(|e| {
            let g = &geometry[e * geometry_stride..(e + 1) * geometry_stride];
            postprocess_coefficients(t, g, Some(kappa[e]))
        })
        .collect();
    let stiffness: [T::Lanes; 9] =
        core::array::from_fn(|i| T::Lanes::gather(|e| per_element[e].0[i]));
    let flux: [T::Lanes; 9] = core::array::from_fn(|i| T::Lanes::gather(|e| per_element[e].1[i]));
    let (system, q_lanes) = work.split_at_mut(m * m + m);
    for (p, qp) in q_lanes[..d * n].iter_mut().enumerate() {
        *qp = T::Lanes::gather(|e| q[e * d * n + p]);
    }
    solve_postprocess(t, T::Lanes::splat, &stiffness, &flux, q_lanes, system)
        .map_err(|(pivot, _)| pivot)?;
    for e in 0..w {
        let out = &mut u_star[e * np..(e + 1) * np];
        out[0] = u[e * n];
        for (j, v) in out[1..].iter_mut().enumerate() {
            *v = system[m * m + j].lane(e);
        }
    }
    Ok(())
}

/// The element's factors of the postprocessing system: `stiffness[s * d + t]` = det B_st
/// (B = J^-1 J^-T) weighs the reference stiffness K_st, and `flux[r * d + s]` =
/// -det (J^-1)_sr / kappa (without the 1/kappa where q is already kappa^-1 q_h) weighs q_r
/// against the derivative tables D'_s.
fn postprocess_coefficients<T: Real>(
    t: &ElementTables<T>,
    geometry: &[T],
    kappa: Option<T>,
) -> ([T; 9], [T; 9]) {
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let d = t.dim;
    let det = geometry[layout.det()];
    let jinv = &geometry[layout.inverse_jacobian()..layout.inverse_jacobian() + d * d];
    let b = metric(d, jinv);
    let mut stiffness = [T::zero(); 9];
    let mut flux = [T::zero(); 9];
    for s in 0..d {
        for tt in 0..d {
            stiffness[s * d + tt] = det * b[s * d + tt];
        }
    }
    for r in 0..d {
        for s in 0..d {
            flux[r * d + s] = match kappa {
                Some(kappa) => -det * jinv[s * d + r] / kappa,
                None => -det * jinv[s * d + r],
            };
        }
    }
    (stiffness, flux)
}

/// Forms and solves the postprocessing system from the factors of
/// [`postprocess_coefficients`], for one element (`L` = `T`) or a batch (`L` = lanes, with
/// `splat` broadcasting a table entry): A = sum_st stiffness_st K_st on the coefficients
/// 1..n', rhs_j = sum_rs flux_rs sum_l q_r[l] D'_s[l][j]; the solution lands in
/// `work[m * m..m * m + m]` (m = n' - 1).
fn solve_postprocess<T: Real, L: Dense>(
    t: &ElementTables<T>,
    splat: impl Fn(T) -> L,
    stiffness: &[L],
    flux: &[L],
    q: &[L],
    work: &mut [L],
) -> Result<(), (usize, L)> {
    let (d, n, np) = (t.dim, t.n, t.n_post);
    let m = np - 1;
    let (a, rhs) = work.split_at_mut(m * m);
    a.iter_mut().for_each(|v| *v = L::zero());
    for s in 0..d {
        for tt in 0..d {
            let coef = stiffness[s * d + tt];
            let k = t.post_stiffness(s, tt);
            for i in 0..m {
                for j in 0..m {
                    a[i * m + j] += coef * splat(k[(i + 1) * np + j + 1]);
                }
            }
        }
    }
    let rhs = &mut rhs[..m];
    rhs.iter_mut().for_each(|v| *v = L::zero());
    for r in 0..d {
        for s in 0..d {
            let coef = flux[r * d + s];
            let dp = t.post_derivative(s);
            for l in 0..n {
                let c = coef * q[r * n + l];
                for j in 0..m {
                    rhs[j] += c * splat(dp[l * np + j + 1]);
                }
            }
        }
    }
    dense::cholesky(m, a)?;
    dense::forward_substitution(m, 1, a, rhs);
    dense::backward_substitution(m, 1, a, rhs);
    Ok(())
}

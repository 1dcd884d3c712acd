//! Per-element recovery and postprocessing kernels.
use hdg_core::geometry::{metric, GeometryLayout};
use hdg_core::{ElementTables, Real};

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
    let layout = GeometryLayout { dim: t.dim, n_faces: t.n_faces };
    let (d, n, np) = (t.dim, t.n, t.n_post);
    let m = np - 1;
    let det = geometry[layout.det()];
    let jinv = &geometry[layout.inverse_jacobian()..layout.inverse_jacobian() + d * d];
    let b = metric(d, jinv);
    let (a, rhs) = work.split_at_mut(m * m);
    a.iter_mut().for_each(|v| *v = T::zero());
    for s in 0..d {
        for tt in 0..d {
            let coef = det * b[s * d + tt];
            let k = t.post_stiffness(s, tt);
            for i in 0..m {
                for j in 0..m {
                    a[i * m + j] += coef * k[(i + 1) * np + j + 1];
                }
            }
        }
    }
    // rhs_j = -(1/kappa) sum_r sum_l Q_r[l] det sum_s (J^-1)_{sr} D'^_s[l][j]
    let rhs = &mut rhs[..m];
    rhs.iter_mut().for_each(|v| *v = T::zero());
    for r in 0..d {
        for s in 0..d {
            let coef = match kappa {
                Some(kappa) => -det * jinv[s * d + r] / kappa,
                None => -det * jinv[s * d + r],
            };
            let dp = t.post_derivative(s);
            for l in 0..n {
                let c = coef * q[r * n + l];
                for j in 0..m {
                    rhs[j] += c * dp[l * np + j + 1];
                }
            }
        }
    }
    dense::cholesky(m, a)?;
    dense::forward_substitution(m, 1, a, rhs);
    dense::backward_substitution(m, 1, a, rhs);
    u_star[0] = u[0];
    u_star[1..].copy_from_slice(rhs);
    Ok(())
}

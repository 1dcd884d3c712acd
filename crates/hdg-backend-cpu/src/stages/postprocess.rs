//! Postprocessing: u* in P_{k+1} of every element from u_h and q_h, and the L2 error norms.
use hdg_core::error_norms;
use hdg_core::geometry::metric;
use hdg_core::geometry::GeometryLayout;
use hdg_core::lanes::{Batch, Dense};
use hdg_core::{
    CoreError, Discretization, ElementTables, ErrorNorms, ExactSolution, HostFields, Real,
};
use rayon::prelude::*;

use super::not_spd;
use super::prepare::{element_points, CpuPrepared};
use super::weighted;
use crate::dense;

/// Postprocessing: u* in P_{k+1} with (grad u*, grad w) = -(kappa^-1 q_h, grad w) for w in
/// P_{k+1} and the same mean as u_h. The basis is orthonormal and hierarchical, so the mean
/// condition fixes the constant coefficient (u*_0 = U_0) and the rest is an SPD system of size
/// n' - 1. `work` holds at least (n'-1)^2 + n' values. `kappa`: `Some(kappa)` with `q` = q_h
/// for a kappa constant in the element, `None` with `q` = the L2 projection of kappa^-1 q_h
/// ([`super::weighted::projected_inverse_kappa_flux`]) where it varies.
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

/// The stage: batches of [`Batch::WIDTH`] elements on SIMD lanes where kappa is constant in
/// each, element by element elsewhere.
pub(crate) fn postprocess<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
    fields: &HostFields<T>,
) -> hdg_core::Result<Vec<T>> {
    let t = &disc.tables;
    let (n, d, np) = (t.n, t.dim, t.n_post);
    let stride = prep.layout.stride();
    let n_cells = disc.mesh.n_cells();
    let mut u_star = vec![T::zero(); n_cells * np];
    let width = <T::Lanes as Batch<T>>::WIDTH;
    let lane_work = (np - 1) * (np - 1) + np + d * n;
    // Batches of `width` elements, one per SIMD lane (hdg_core::lanes: the same bits as one
    // at a time); a batch with a coefficient varying inside a cell, a partial batch, or a
    // batch that fails goes element by element (which says which element failed).
    u_star.par_chunks_mut(np * width).enumerate().with_min_len(16).try_for_each_init(
        || {
            let lanes = vec![<T::Lanes as Dense>::zero(); lane_work];
            (lanes, vec![T::zero(); np * np], vec![T::zero(); d * n])
        },
        |(lanes, work, flux), (batch, us)| {
            let first = batch * width;
            let count = us.len() / np;
            let constant = (first..first + count).all(|e| element_points(disc, e).is_none());
            if count == width && constant {
                let cells = first..first + width;
                let batched = postprocess_batch(
                    t,
                    &prep.geometry[cells.start * stride..cells.end * stride],
                    stride,
                    &disc.kappa[cells.clone()],
                    &fields.u[cells.start * n..cells.end * n],
                    &fields.q[cells.start * d * n..cells.end * d * n],
                    lanes,
                    us,
                );
                if batched.is_ok() {
                    return Ok::<(), CoreError>(());
                }
            }
            for (i, us) in us.chunks_exact_mut(np).enumerate() {
                let e = first + i;
                let q = &fields.q[e * d * n..(e + 1) * d * n];
                let (kappa, q) = match element_points(disc, e) {
                    None => (Some(disc.kappa[e]), q),
                    Some(points) => {
                        weighted::projected_inverse_kappa_flux(t, &points, q, flux);
                        (None, &flux[..])
                    }
                };
                postprocess_element(
                    t,
                    &prep.geometry[e * stride..(e + 1) * stride],
                    kappa,
                    &fields.u[e * n..(e + 1) * n],
                    q,
                    work,
                    us,
                )
                .map_err(|p| not_spd(e, p))?;
            }
            Ok(())
        },
    )?;
    Ok(u_star)
}

/// The L2 errors of u_h, q_h and u* against `exact` (`hdg_core::error_norms`).
pub(crate) fn error_norms<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
    fields: &HostFields<T>,
    u_star: &[T],
    exact: &ExactSolution,
) -> hdg_core::Result<ErrorNorms> {
    Ok(error_norms::error_norms(disc, &prep.geometry, &prep.cell_vertices, fields, u_star, exact))
}

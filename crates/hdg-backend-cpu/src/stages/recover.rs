//! Recovery: u_h and q_h of every element from its trace (the free values solved for, the
//! projected data on Dirichlet faces), U = u0 + Z Lambda and Q from U and Lambda.
use hdg_core::geometry::GeometryLayout;
use hdg_core::{Discretization, ElementTables, HostCondensed, HostFields, Real, Result, NONE};
use rayon::prelude::*;

use super::not_spd;
use super::prepare::{element_points, CpuPrepared};
use super::weighted::{self, WeightedScratch};
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

/// The stage, element by element in parallel.
pub(crate) fn recover<T: Real>(
    disc: &Discretization<'_, T>,
    prep: &CpuPrepared<T>,
    condensed: &HostCondensed<T>,
    trace: &[T],
) -> Result<HostFields<T>> {
    let t = &disc.tables;
    let (n, nf, d, fpc) = (t.n, t.n_f, t.dim, t.n_faces);
    let nl = t.n_local_trace();
    let stride = prep.layout.stride();
    let n_cells = disc.mesh.n_cells();
    let mut fields =
        HostFields { u: vec![T::zero(); n_cells * n], q: vec![T::zero(); n_cells * d * n] };
    let topology = &disc.topology;
    fields
        .u
        .par_chunks_mut(n)
        .zip(fields.q.par_chunks_mut(d * n))
        .enumerate()
        .with_min_len(64)
        .try_for_each_init(
            || (vec![T::zero(); nl], None),
            |(lambda, weighted), (e, (u, q))| {
                for (f, &face) in disc.mesh.cell_faces(e).iter().enumerate() {
                    let free = topology.free_index[face];
                    let src = if free == NONE {
                        &disc.dirichlet_values[face * nf..(face + 1) * nf]
                    } else {
                        &trace[free as usize * nf..(free as usize + 1) * nf]
                    };
                    lambda[f * nf..(f + 1) * nf].copy_from_slice(src);
                }
                recover_element(
                    t,
                    &prep.geometry[e * stride..(e + 1) * stride],
                    &prep.orientations[e * fpc..(e + 1) * fpc],
                    disc.kappa[e],
                    &condensed.recovery_operator[e * n * nl..(e + 1) * n * nl],
                    &condensed.recovery_load[e * n..(e + 1) * n],
                    lambda,
                    u,
                    q,
                );
                let Some(points) = element_points(disc, e) else { return Ok(()) };
                // kappa varies in the element: Q from the weighted flux mass matrix.
                let input = prep.element_input(disc, e);
                let scratch = weighted.get_or_insert_with(|| WeightedScratch::new(t));
                weighted::recover_weighted_flux(t, &input, &points, scratch, u, lambda, q)
                    .map_err(|p| not_spd(e, p))
            },
        )?;
    Ok(fields)
}

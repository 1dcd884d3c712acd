//! Host-side checks of a computed solution that do not depend on the backend: the full trace
//! vector and the local conservation defect of every cell.
use crate::backend::HostFields;
use crate::discretization::Discretization;
use crate::geometry::{cell_geometry, GeometryLayout};
use crate::real::Real;
use crate::topology::NONE;

/// Trace values on every global face (`[f * n_f + m]`): the solved values on free faces, the
/// projected data on Dirichlet faces.
pub fn full_trace<T: Real>(disc: &Discretization<'_, T>, free_trace: &[T]) -> Vec<T> {
    let nf = disc.tables.n_f;
    let mut full = disc.dirichlet_values.clone();
    for (f, &free) in disc.topology.free_index.iter().enumerate() {
        if free != NONE {
            let free = free as usize;
            full[f * nf..(f + 1) * nf].copy_from_slice(&free_trace[free * nf..(free + 1) * nf]);
        }
    }
    full
}

/// Relative local conservation defect of every cell:
/// |sum_F <q^.n, 1>_F - (f - c u_h, 1)_K| / (sum_F |<q^.n, 1>_F| + |(f, 1)_K| + |(c u_h, 1)_K|),
/// with q^.n = q_h.n + tau (u_h - u^) (the HDG numerical flux). The local solver enforces it
/// for any trace, so it must vanish to round-off.
pub fn conservation_defects<T: Real>(
    disc: &Discretization<'_, T>,
    fields: &HostFields<T>,
    full_trace: &[T],
) -> Vec<f64> {
    let t = &disc.tables;
    let mesh = disc.mesh;
    let (d, n, nf, nfaces) = (t.dim, t.n, t.n_f, t.n_faces);
    let layout = GeometryLayout::new(mesh.cell_type());
    let mut geometry = vec![0.0f64; layout.stride()];
    let mut vertices = vec![0.0; (d + 1) * d];
    let mut x = vec![0.0; d];
    // The trace basis is orthonormal on the parameter domain: mu_0 is the constant
    // 1 / sqrt(|F^|), so the parameter integral of u^ is Lambda_0 sqrt(|F^|).
    let mu0_integral = t.face_parameter_measure.sqrt();
    (0..mesh.n_cells())
        .map(|c| {
            for (i, &v) in mesh.cell_vertices(c).iter().enumerate() {
                vertices[i * d..(i + 1) * d].copy_from_slice(mesh.vertex(v));
            }
            cell_geometry(mesh.cell_type(), &vertices, t.face_parameter_measure, &mut geometry);
            let det = geometry[layout.det()];
            let u = &fields.u[c * n..(c + 1) * n];
            let q = &fields.q[c * d * n..(c + 1) * d * n];
            let (mut flux, mut scale) = (0.0, 0.0);
            for f in 0..nfaces {
                let fj = geometry[layout.face_jacobian() + f];
                let normal = &geometry[layout.normal() + f * d..layout.normal() + (f + 1) * d];
                let phi_int = &t.face_basis_integral[f * n..(f + 1) * n];
                let qn: f64 = (0..n)
                    .map(|i| {
                        (0..d).map(|r| normal[r] * q[r * n + i].as_f64()).sum::<f64>() * phi_int[i]
                    })
                    .sum();
                let uh: f64 = (0..n).map(|i| u[i].as_f64() * phi_int[i]).sum();
                let face = mesh.cell_faces(c)[f];
                let uhat = full_trace[face * nf].as_f64() * mu0_integral;
                let tau = disc.tau[c * nfaces + f].as_f64();
                let face_flux = fj * (qn + tau * (uh - uhat));
                flux += face_flux;
                scale += face_flux.abs();
            }
            let rule = &t.load_rule;
            let mut source = 0.0;
            for qp in 0..rule.n_points() {
                let xi = rule.point(qp);
                for r in 0..d {
                    x[r] = vertices[r]
                        + (0..d)
                            .map(|s| {
                                0.5 * (vertices[(s + 1) * d + r] - vertices[r]) * (xi[s] + 1.0)
                            })
                            .sum::<f64>();
                }
                source += rule.weights[qp] * det * disc.problem.source.evaluate(&x);
            }
            let reaction = match &disc.point_coefficients {
                // (c u_h, 1)_K by the coefficient rule, exact for the weighted mass matrix's
                // degree: what the local solver integrated.
                Some(pc) => {
                    let (rule, basis) = (&t.coefficient_rule, &t.coefficient_basis);
                    (0..rule.n_points())
                        .map(|qp| {
                            let uh: f64 = (0..n).map(|i| (basis[qp * n + i] * u[i]).as_f64()).sum();
                            rule.weights[qp] * det * pc.reaction_of(c)[qp].as_f64() * uh
                        })
                        .sum()
                }
                // int phi_0 over K = det * sqrt(|K^|) (phi_0 = 1/sqrt(|K^|)); other phi_i
                // integrate to 0.
                None => {
                    disc.reaction[c].as_f64() * det * u[0].as_f64() * t.reference_measure.sqrt()
                }
            };
            (flux - (source - reaction)).abs() / (scale + source.abs() + reaction.abs())
        })
        .collect()
}

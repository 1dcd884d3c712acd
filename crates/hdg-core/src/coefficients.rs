//! Coefficients at quadrature points: kappa and c given as functions of x.
//!
//! A constant or per-cell kappa scales the reference matrices (M_k = det / kappa I for the
//! orthonormal basis, `docs/formulation.md`, section 'Element matrices'); a kappa that varies
//! inside a cell does not (section 'Coefficients at quadrature points'), and
//! the element matrices become weighted mass matrices formed per element by quadrature:
//!
//! ```text
//! M_k[(r,i),(s,j)] = det sum_q w_q (kappa^-1)_rs(x_q) phi_i(x_q) phi_j(x_q)
//! M_c[i][j]        = det sum_q w_q c(x_q) phi_i(x_q) phi_j(x_q)
//! ```
//!
//! This module evaluates the coefficients once, at the points of the tables' coefficient rule
//! ([`ElementTables::coefficient_rule`], exact to degree 2k + 1, so a constant given as a
//! function gives the constant's matrices to rounding), checks them point by point (kappa
//! finite and positive, a tensor symmetric positive definite, c finite and >= 0; the error
//! names the field, the cell and the point) and stores kappa^-1 and c per point for the
//! backends' element kernels. It also gives every cell one representative value (the cell
//! mean of kappa, of trace(kappa) / d for a tensor, and of c): what the preconditioner's
//! coefficient regions, tau = kappa / h and the solvability check read.
use hdg_mesh::Mesh;
use rayon::prelude::*;

use crate::error::{CoreError, Result};
use crate::geometry::map_point;
use crate::problem::{Coefficient, Problem};
use crate::real::Real;
use crate::tables::ElementTables;

/// Offending cells named in full in a coefficient error (all are counted).
const CELLS_NAMED: usize = 5;

/// kappa^-1 and c at the coefficient points of every cell.
#[derive(Clone, Debug)]
pub struct PointCoefficients<T> {
    /// Points per cell (of [`ElementTables::coefficient_rule`]).
    pub points: usize,
    /// Values of kappa^-1 per point: 1 (a scalar) or d x d (a tensor, row-major, symmetric).
    pub kappa_components: usize,
    /// kappa^-1 at the points: `[cell][q][component]`.
    pub inverse_kappa: Vec<T>,
    /// c at the points: `[cell][q]`.
    pub reaction: Vec<T>,
}

impl<T: Real> PointCoefficients<T> {
    /// kappa^-1 at the points of cell `c`: `[q][component]`.
    pub fn inverse_kappa_of(&self, c: usize) -> &[T] {
        let per = self.points * self.kappa_components;
        &self.inverse_kappa[c * per..(c + 1) * per]
    }

    /// c at the points of cell `c`.
    pub fn reaction_of(&self, c: usize) -> &[T] {
        &self.reaction[c * self.points..(c + 1) * self.points]
    }

    /// Whether kappa is a tensor (else a scalar at each point).
    pub fn is_tensor(&self) -> bool {
        self.kappa_components > 1
    }
}

/// What [`evaluate`] gives: per-point values where a coefficient varies inside cells, and one
/// representative value per cell always.
pub struct EvaluatedCoefficients<T> {
    /// kappa^-1 and c at the points, when kappa or c is a function of x.
    pub at_points: Option<PointCoefficients<T>>,
    /// kappa per cell (its cell mean where it varies; trace / d for a tensor).
    pub kappa: Vec<f64>,
    /// c per cell (its cell mean where it varies).
    pub reaction: Vec<f64>,
}

/// One cell's values: kappa^-1 and c at its points, its mean kappa and mean c.
type CellValues<T> = (Vec<T>, Vec<T>, f64, f64);

/// A point where a coefficient is not what the method needs.
struct BadPoint {
    cell: usize,
    field: &'static str,
    reason: String,
}

/// Evaluates `problem`'s kappa and c on `mesh` (see the module documentation).
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the field, the first offending cells (with the point
/// and value) and how many cells are affected, if kappa is not finite and positive (a tensor:
/// not symmetric positive definite) or c not finite and >= 0 at some point.
pub fn evaluate<T: Real>(
    mesh: &Mesh,
    problem: &Problem,
    tables: &ElementTables<T>,
) -> Result<EvaluatedCoefficients<T>> {
    let n_cells = mesh.n_cells();
    let (kappa, reaction) = (&problem.kappa, &problem.reaction);
    if !kappa.varies_in_cells() && !reaction.varies_in_cells() {
        let per_cell = |c: &Coefficient| -> Vec<f64> {
            (0..n_cells).into_par_iter().map(|e| c.cell_value(e).unwrap_or(f64::NAN)).collect()
        };
        return Ok(EvaluatedCoefficients {
            at_points: None,
            kappa: per_cell(kappa),
            reaction: per_cell(reaction),
        });
    }
    let d = mesh.dim();
    let rule = &tables.coefficient_rule;
    let points = rule.n_points();
    let components = if matches!(kappa, Coefficient::Tensor(_)) { d * d } else { 1 };
    let measure: f64 = rule.weights.iter().sum();
    let capture = crate::user_code::Capture::current();
    let per_cell: Vec<std::result::Result<CellValues<T>, BadPoint>> = (0..n_cells)
        .into_par_iter()
        .map(|cell| {
            capture.within(|| {
                let vertices: Vec<f64> = mesh
                    .cell_vertices(cell)
                    .iter()
                    .flat_map(|&v| mesh.vertex(v).to_vec())
                    .collect();
                let mut inverse_kappa = Vec::with_capacity(points * components);
                let mut reactions = Vec::with_capacity(points);
                let (mut kappa_mean, mut reaction_mean) = (0.0, 0.0);
                let mut x = [0.0; 3];
                let mut tensor = [0.0; 9];
                for q in 0..points {
                    map_point(d, &vertices, rule.point(q), &mut x[..d]);
                    let x = &x[..d];
                    let at = |field, value: String, rule: &str| BadPoint {
                        cell,
                        field,
                        reason: format!("{field}{x:?} = {value} ({field} must be {rule})"),
                    };
                    let w = rule.weights[q] / measure;
                    match kappa {
                        Coefficient::Tensor(k) => {
                            k(x, &mut tensor[..d * d]);
                            let inverse = spd_inverse(d, &tensor[..d * d]).ok_or_else(|| {
                                at(
                                    "kappa",
                                    format!("{:?}", &tensor[..d * d]),
                                    "symmetric positive definite",
                                )
                            })?;
                            inverse_kappa
                                .extend(inverse[..d * d].iter().map(|&v| T::from_f64_lossy(v)));
                            kappa_mean +=
                                w * (0..d).map(|r| tensor[r * d + r]).sum::<f64>() / d as f64;
                        }
                        _ => {
                            let k = match kappa {
                                Coefficient::Field(k) => k(x),
                                other => other.cell_value(cell).unwrap_or(f64::NAN),
                            };
                            if !(k.is_finite() && k > 0.0) {
                                return Err(at("kappa", k.to_string(), "finite and > 0"));
                            }
                            inverse_kappa.push(T::from_f64_lossy(1.0 / k));
                            kappa_mean += w * k;
                        }
                    }
                    let c = match reaction {
                        Coefficient::Field(c) => c(x),
                        other => other.cell_value(cell).unwrap_or(f64::NAN),
                    };
                    if !(c.is_finite() && c >= 0.0) {
                        return Err(at("c", c.to_string(), "finite and >= 0"));
                    }
                    reactions.push(T::from_f64_lossy(c));
                    reaction_mean += w * c;
                }
                Ok((inverse_kappa, reactions, kappa_mean, reaction_mean))
            })
        })
        .collect();
    let bad: Vec<&BadPoint> = per_cell.iter().filter_map(|r| r.as_ref().err()).collect();
    if let Some(first) = bad.first() {
        let named: Vec<String> = bad
            .iter()
            .take(CELLS_NAMED)
            .map(|b| format!("cell {}: {}", b.cell, b.reason))
            .collect();
        let more = if bad.len() > CELLS_NAMED {
            format!("; and {} more cells", bad.len() - CELLS_NAMED)
        } else {
            String::new()
        };
        return Err(CoreError::InvalidParameter {
            name: if first.field == "kappa" { "kappa" } else { "reaction coefficient c" },
            reason: format!(
                "{} of {n_cells} cells have a bad value at a quadrature point; {}{more}",
                bad.len(),
                named.join("; ")
            ),
        });
    }
    let mut out = PointCoefficients {
        points,
        kappa_components: components,
        inverse_kappa: Vec::with_capacity(n_cells * points * components),
        reaction: Vec::with_capacity(n_cells * points),
    };
    let (mut kappa_cells, mut reaction_cells) = (Vec::new(), Vec::new());
    for (inverse_kappa, reactions, k, c) in per_cell.into_iter().flatten() {
        out.inverse_kappa.extend(inverse_kappa);
        out.reaction.extend(reactions);
        kappa_cells.push(k);
        reaction_cells.push(c);
    }
    Ok(EvaluatedCoefficients { at_points: Some(out), kappa: kappa_cells, reaction: reaction_cells })
}

/// The inverse of a symmetric positive definite d x d matrix (row-major), or `None` if it is
/// not finite, not symmetric (to 1e-12 of its largest entry) or not positive definite.
fn spd_inverse(d: usize, m: &[f64]) -> Option<[f64; 9]> {
    let scale = m.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if !m.iter().all(|v| v.is_finite()) || scale == 0.0 {
        return None;
    }
    for r in 0..d {
        for s in 0..r {
            if (m[r * d + s] - m[s * d + r]).abs() > 1e-12 * scale {
                return None;
            }
        }
    }
    // Cholesky (positive pivots <=> SPD), then the inverse column by column.
    let mut l = [0.0; 9];
    for j in 0..d {
        let p = m[j * d + j] - (0..j).map(|k| l[j * d + k] * l[j * d + k]).sum::<f64>();
        if p <= 1e-14 * scale {
            return None;
        }
        l[j * d + j] = p.sqrt();
        for i in j + 1..d {
            l[i * d + j] = (m[i * d + j]
                - (0..j).map(|k| l[i * d + k] * l[j * d + k]).sum::<f64>())
                / l[j * d + j];
        }
    }
    let mut inverse = [0.0; 9];
    for c in 0..d {
        let mut y = [0.0; 3];
        for i in 0..d {
            let e = if i == c { 1.0 } else { 0.0 };
            y[i] = (e - (0..i).map(|k| l[i * d + k] * y[k]).sum::<f64>()) / l[i * d + i];
        }
        for i in (0..d).rev() {
            y[i] = (y[i] - (i + 1..d).map(|k| l[k * d + i] * y[k]).sum::<f64>()) / l[i * d + i];
        }
        for i in 0..d {
            inverse[i * d + c] = y[i];
        }
    }
    Some(inverse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spd_inverse_inverts_and_refuses() {
        let m = [4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0];
        let inv = spd_inverse(3, &m).unwrap();
        for r in 0..3 {
            for c in 0..3 {
                let v: f64 = (0..3).map(|k| m[r * 3 + k] * inv[k * 3 + c]).sum();
                assert!((v - if r == c { 1.0 } else { 0.0 }).abs() < 1e-14, "{r} {c}: {v}");
            }
        }
        assert!(spd_inverse(2, &[1.0, 2.0, 2.0, 1.0]).is_none(), "indefinite");
        assert!(spd_inverse(2, &[1.0, 0.5, 0.0, 1.0]).is_none(), "not symmetric");
        assert!(spd_inverse(2, &[1.0, 0.0, 0.0, f64::NAN]).is_none(), "NaN");
        assert!(spd_inverse(2, &[0.0; 4]).is_none(), "zero");
    }
}

//! Problem description: coefficients, data and (optionally) the exact solution of
//! `-div(kappa grad u) + c u = f` with Dirichlet data on the whole boundary.
use std::f64::consts::PI;
use std::sync::Arc;

use crate::error::{CoreError, Result};

/// A scalar field of the physical coordinates.
pub type ScalarField = Arc<dyn Fn(&[f64]) -> f64 + Send + Sync>;
/// A vector field of the physical coordinates, written into the second argument.
pub type VectorField = Arc<dyn Fn(&[f64], &mut [f64]) + Send + Sync>;

/// A coefficient that is constant or given per cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Coefficient {
    /// The same value on every cell.
    Constant(f64),
    /// One value per cell (in the mesh's cell numbering).
    PerCell(Vec<f64>),
}

impl Coefficient {
    /// The value on cell `c`.
    pub fn on_cell(&self, c: usize) -> f64 {
        match self {
            Coefficient::Constant(v) => *v,
            Coefficient::PerCell(v) => v[c],
        }
    }

    fn validate(&self, name: &'static str, n_cells: usize, positive: bool) -> Result<()> {
        let bad = |v: f64| !v.is_finite() || if positive { v <= 0.0 } else { v < 0.0 };
        let rule = if positive { "> 0" } else { ">= 0" };
        match self {
            Coefficient::Constant(v) if bad(*v) => Err(CoreError::InvalidParameter {
                name,
                reason: format!("{v} is not finite and {rule}"),
            }),
            Coefficient::PerCell(v) if v.len() != n_cells => Err(CoreError::InvalidParameter {
                name,
                reason: format!("{} values given for {} cells", v.len(), n_cells),
            }),
            Coefficient::PerCell(v) => match v.iter().position(|&x| bad(x)) {
                Some(c) => Err(CoreError::InvalidParameter {
                    name,
                    reason: format!("value {} on cell {c} is not finite and {rule}", v[c]),
                }),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

/// The exact solution, for error norms.
#[derive(Clone)]
pub struct ExactSolution {
    /// u
    pub u: ScalarField,
    /// grad u (the flux is q = -kappa grad u)
    pub grad_u: VectorField,
}

/// `-div(kappa grad u) + c u = f` in the domain, `u = g_D` on the boundary.
#[derive(Clone)]
pub struct Problem {
    /// Diffusion coefficient kappa > 0.
    pub kappa: Coefficient,
    /// Reaction coefficient c >= 0 (0: Poisson).
    pub reaction: Coefficient,
    /// Stabilisation tau > 0, the same on every (cell, face) pair.
    pub tau: f64,
    /// Source f.
    pub source: ScalarField,
    /// Dirichlet data g_D.
    pub dirichlet: ScalarField,
    /// Exact solution, when known.
    pub exact: Option<ExactSolution>,
    /// Polynomial degree of f if it is a polynomial: lets loads use the exact quadrature.
    pub source_degree: Option<usize>,
    /// What `source`, `dirichlet` and `exact` were built from, when [`Problem::manufactured`]
    /// built them: lets a backend evaluate them itself (the CUDA backend computes the element
    /// loads and the error norms on the device from it). A backend that does checks its own
    /// evaluation against the closures at sample points first, and uses the closures when
    /// they disagree, so replacing `source` or `exact` after construction stays correct;
    /// setting this to `None` makes every backend use the closures. Changing `kappa` or
    /// `reaction` afterwards does not make it stale: `source` keeps the values it was built
    /// with, and so does this description.
    pub manufactured: Option<ManufacturedSpec>,
}

/// The description of a manufactured problem (see [`Problem::manufactured`]):
/// `source = -kappa lap(u) + reaction u` and `dirichlet = exact = u` for the solution u.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ManufacturedSpec {
    /// The exact solution u.
    pub solution: Manufactured,
    /// The kappa the source was built with.
    pub kappa: f64,
    /// The reaction coefficient the source was built with.
    pub reaction: f64,
}

impl std::fmt::Debug for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Problem")
            .field("kappa", &self.kappa)
            .field("reaction", &self.reaction)
            .field("tau", &self.tau)
            .field("has_exact", &self.exact.is_some())
            .finish()
    }
}

impl Problem {
    /// Checks coefficients against the mesh: kappa > 0, c >= 0, tau > 0, all finite.
    pub fn validate(&self, n_cells: usize) -> Result<()> {
        self.kappa.validate("kappa", n_cells, true)?;
        self.reaction.validate("reaction coefficient c", n_cells, false)?;
        if !(self.tau.is_finite() && self.tau > 0.0) {
            return Err(CoreError::InvalidParameter {
                name: "tau",
                reason: format!("{} is not finite and > 0", self.tau),
            });
        }
        Ok(())
    }

    /// A manufactured problem: `f` and `g_D` computed from a known `u`, for constant kappa and c.
    pub fn manufactured(solution: Manufactured, kappa: f64, reaction: f64) -> Problem {
        let (u, grad_u, laplacian, degree) = solution.fields();
        let (u_f, lap_f) = (u.clone(), laplacian);
        Problem {
            kappa: Coefficient::Constant(kappa),
            reaction: Coefficient::Constant(reaction),
            tau: 1.0,
            source: Arc::new(move |x| -kappa * lap_f(x) + reaction * u_f(x)),
            dirichlet: u.clone(),
            exact: Some(ExactSolution { u, grad_u }),
            source_degree: degree,
            manufactured: Some(ManufacturedSpec { solution, kappa, reaction }),
        }
    }
}

/// Known solutions for verification, on the unit square or cube (they are defined everywhere).
///
/// Every solution is defined in 2D and 3D: the fields look at the number of coordinates they
/// are given, so the same [`Problem`] serves triangle and tetrahedron meshes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manufactured {
    /// u = sin(pi x) sin(pi y) (times sin(pi z) in 3D): symmetric, zero on the boundary of the
    /// unit square (cube).
    Sine,
    /// u = exp(x) sin(2 y) (times cosh(z) in 3D): not symmetric, non-zero boundary data.
    ExpSin,
    /// A full polynomial of the given degree (two powers of oblique linear forms and a mixed
    /// monomial, plus a second one in 3D), which a method of that order must reproduce to
    /// round-off.
    Polynomial(usize),
}

type Fields = (ScalarField, VectorField, ScalarField, Option<usize>);

impl Manufactured {
    /// u, grad u, the Laplacian of u, and the polynomial degree of the Laplacian if any.
    fn fields(self) -> Fields {
        match self {
            Manufactured::Sine => (
                Arc::new(|x| x.iter().map(|xd| (PI * xd).sin()).product()),
                // One sin_cos per coordinate, not one sin or cos per (component, coordinate):
                // the error norms call this at every quadrature point of every cell.
                Arc::new(|x, g| {
                    let mut sin = [0.0; 3];
                    let mut cos = [0.0; 3];
                    for (e, &xe) in x.iter().enumerate() {
                        (sin[e], cos[e]) = (PI * xe).sin_cos();
                    }
                    for d in 0..x.len() {
                        g[d] = (0..x.len())
                            .map(|e| if e == d { PI * cos[e] } else { sin[e] })
                            .product();
                    }
                }),
                Arc::new(|x| {
                    -(x.len() as f64)
                        * PI
                        * PI
                        * x.iter().map(|xd| (PI * xd).sin()).product::<f64>()
                }),
                None,
            ),
            Manufactured::ExpSin => (
                Arc::new(|x| x[0].exp() * (2.0 * x[1]).sin() * z_factor(x)),
                Arc::new(|x, g| {
                    let z = z_factor(x);
                    g[0] = x[0].exp() * (2.0 * x[1]).sin() * z;
                    g[1] = 2.0 * x[0].exp() * (2.0 * x[1]).cos() * z;
                    if x.len() == 3 {
                        g[2] = x[0].exp() * (2.0 * x[1]).sin() * x[2].sinh();
                    }
                }),
                // (1 - 4) u in 2D, (1 - 4 + 1) u in 3D.
                Arc::new(|x| {
                    let factor = if x.len() == 3 { -2.0 } else { -3.0 };
                    factor * x[0].exp() * (2.0 * x[1]).sin() * z_factor(x)
                }),
                None,
            ),
            Manufactured::Polynomial(k) => polynomial_fields(k),
        }
    }
}

/// The third factor of [`Manufactured::ExpSin`]: cosh(z) in 3D, 1 in 2D.
fn z_factor(x: &[f64]) -> f64 {
    if x.len() == 3 {
        x[2].cosh()
    } else {
        1.0
    }
}

/// u = (a0 + a.x)^k + (b0 + b.x)^k + x y^(k-1) (+ y z^(k-1) in 3D): degree exactly k, no
/// symmetry.
fn polynomial_fields(k: usize) -> Fields {
    // Coefficients keep |u| = O(1) on the unit square and cube for every k, so absolute error
    // thresholds mean the same at k = 1 and k = 8.
    const A: [f64; 4] = [0.2, 0.5, 0.3, 0.2];
    const B: [f64; 4] = [0.6, -0.5, 0.4, -0.3];
    let ki = k as i32;
    let kf = k as f64;
    let pow = |base: f64, e: i32| if e < 0 { 0.0 } else { base.powi(e) };
    // In 2D exactly c0 + c1 x + c2 y (the 2D numbers do not depend on the 3D extension).
    let lin = |c: &[f64; 4], x: &[f64]| {
        let v = c[0] + c[1] * x[0] + c[2] * x[1];
        if x.len() == 3 {
            v + c[3] * x[2]
        } else {
            v
        }
    };
    let grad_sq = |c: &[f64; 4], dim: usize| c[1..=dim].iter().map(|a| a * a).sum::<f64>();
    let u: ScalarField = Arc::new(move |x| {
        let v = pow(lin(&A, x), ki) + pow(lin(&B, x), ki) + x[0] * pow(x[1], ki - 1);
        if x.len() == 3 {
            v + x[1] * pow(x[2], ki - 1)
        } else {
            v
        }
    });
    let grad: VectorField = Arc::new(move |x, g| {
        let (la, lb) = (lin(&A, x), lin(&B, x));
        let (da, db) = (kf * pow(la, ki - 1), kf * pow(lb, ki - 1));
        g[0] = da * A[1] + db * B[1] + pow(x[1], ki - 1);
        g[1] = da * A[2] + db * B[2] + x[0] * (kf - 1.0) * pow(x[1], ki - 2);
        if x.len() == 3 {
            g[1] += pow(x[2], ki - 1);
            g[2] = da * A[3] + db * B[3] + x[1] * (kf - 1.0) * pow(x[2], ki - 2);
        }
    });
    let lap: ScalarField = Arc::new(move |x| {
        let (la, lb) = (lin(&A, x), lin(&B, x));
        let c2 = kf * (kf - 1.0);
        let dim = x.len();
        let v = c2 * grad_sq(&A, dim) * pow(la, ki - 2)
            + c2 * grad_sq(&B, dim) * pow(lb, ki - 2)
            + x[0] * (kf - 1.0) * (kf - 2.0) * pow(x[1], ki - 3);
        if dim == 3 {
            v + x[1] * (kf - 1.0) * (kf - 2.0) * pow(x[2], ki - 3)
        } else {
            v
        }
    });
    (u, grad, lap, Some(k.saturating_sub(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The analytic gradient and Laplacian of each manufactured solution against central
    /// differences: a wrong derivative would make every convergence test meaningless.
    #[test]
    fn manufactured_derivatives_match_finite_differences() {
        let cases = [
            Manufactured::Sine,
            Manufactured::ExpSin,
            Manufactured::Polynomial(1),
            Manufactured::Polynomial(2),
            Manufactured::Polynomial(3),
            Manufactured::Polynomial(5),
        ];
        for m in cases {
            let (u, grad, lap, _) = m.fields();
            let points: [&[f64]; 5] =
                [&[0.3, 0.7], &[0.91, 0.15], &[0.5, 0.5], &[0.3, 0.7, 0.45], &[0.8, 0.1, 0.95]];
            for x in points {
                let dim = x.len();
                let h = 1e-4;
                let mut g = [0.0; 3];
                grad(x, &mut g[..dim]);
                for d in 0..dim {
                    let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
                    xp[d] += h;
                    xm[d] -= h;
                    let fd = (u(&xp) - u(&xm)) / (2.0 * h);
                    assert!((fd - g[d]).abs() < 1e-6 * (1.0 + g[d].abs()), "{m:?} grad {d}");
                }
                let h = 1e-3;
                let mut fd_lap = 0.0;
                for d in 0..dim {
                    let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
                    xp[d] += h;
                    xm[d] -= h;
                    fd_lap += (u(&xp) - 2.0 * u(x) + u(&xm)) / (h * h);
                }
                let l = lap(x);
                assert!(
                    (fd_lap - l).abs() < 1e-4 * (1.0 + l.abs()),
                    "{m:?} laplacian {fd_lap} {l}"
                );
            }
        }
    }

    #[test]
    fn invalid_coefficients_are_rejected() {
        let mut p = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
        assert!(p.validate(4).is_ok());
        p.kappa = Coefficient::Constant(0.0);
        assert!(p.validate(4).is_err());
        p.kappa = Coefficient::PerCell(vec![1.0, 1.0, f64::NAN, 1.0]);
        assert!(matches!(p.validate(4), Err(CoreError::InvalidParameter { name: "kappa", .. })));
        p.kappa = Coefficient::PerCell(vec![1.0; 3]);
        assert!(p.validate(4).is_err());
        p.kappa = Coefficient::Constant(1.0);
        p.reaction = Coefficient::Constant(-1.0);
        assert!(p.validate(4).is_err());
        p.reaction = Coefficient::Constant(0.0);
        p.tau = 0.0;
        assert!(p.validate(4).is_err());
    }
}

//! Problem description: coefficients, data and (optionally) the exact solution of
//! `-div(kappa grad u) + c u = f` with Dirichlet data on the whole boundary.
//!
//! The source and the exact solution are values that say what they are: built from a
//! [`Manufactured`] solution ([`Source::Manufactured`], [`ExactSolution::Manufactured`]), which a
//! backend may evaluate with code of its own generated from the same description (the CUDA
//! backend computes the loads and the error norms on the device), or closures, which only the
//! host runs. Replacing either after [`Problem::manufactured`] replaces the description with
//! it, so no backend can evaluate a function the problem no longer has.
use std::sync::Arc;

use crate::error::{CoreError, Result};
use crate::manufactured::Fields;
pub use crate::manufactured::Manufactured;

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
pub enum ExactSolution {
    /// A manufactured solution: every backend may evaluate it with its own code.
    Manufactured(Manufactured),
    /// Closures, run on the host.
    Closures {
        /// u
        u: ScalarField,
        /// grad u (the flux is q = -kappa grad u)
        grad_u: VectorField,
    },
}

impl ExactSolution {
    /// u at `x`.
    pub fn u(&self, x: &[f64]) -> f64 {
        match self {
            ExactSolution::Manufactured(m) => {
                manufactured_at(x, |x| m.evaluate(x).u, |x| m.evaluate(x).u)
            }
            ExactSolution::Closures { u, .. } => u(x),
        }
    }

    /// u at `x`, with grad u written into `grad` (as many entries as `x`).
    #[inline]
    pub fn u_and_gradient(&self, x: &[f64], grad: &mut [f64]) -> f64 {
        /// u, with grad u copied into `grad`.
        fn split<const D: usize>(fields: Fields<f64, D>, grad: &mut [f64]) -> f64 {
            grad.copy_from_slice(&fields.grad);
            fields.u
        }
        match self {
            ExactSolution::Manufactured(m) => match *x {
                [x0, x1] => split(m.evaluate(&[x0, x1]), grad),
                [x0, x1, x2] => split(m.evaluate(&[x0, x1, x2]), grad),
                _ => f64::NAN,
            },
            ExactSolution::Closures { u, grad_u } => {
                grad_u(x, grad);
                u(x)
            }
        }
    }

    /// The same function as closures: what a backend's own evaluation of a manufactured
    /// solution is compared with, and a way to have every backend use the host.
    pub fn to_closures(&self) -> ExactSolution {
        match self {
            ExactSolution::Manufactured(_) => {
                let (u, grad) = (self.clone(), self.clone());
                ExactSolution::Closures {
                    u: Arc::new(move |x| u.u(x)),
                    grad_u: Arc::new(move |x, g| {
                        grad.u_and_gradient(x, g);
                    }),
                }
            }
            ExactSolution::Closures { .. } => self.clone(),
        }
    }
}

/// The source f of the equation.
#[derive(Clone)]
pub enum Source {
    /// `f = -kappa lap u + c u` of a manufactured u for constant kappa and c: every backend
    /// may evaluate it with its own code.
    Manufactured(ManufacturedSpec),
    /// Any f, run on the host.
    Closure {
        /// f
        f: ScalarField,
        /// The polynomial degree of f if it is a polynomial: lets loads use the exact
        /// quadrature.
        degree: Option<usize>,
    },
}

impl Source {
    /// A source given by a closure, of no known polynomial degree.
    pub fn closure(f: impl Fn(&[f64]) -> f64 + Send + Sync + 'static) -> Source {
        Source::Closure { f: Arc::new(f), degree: None }
    }

    /// f at `x`.
    #[inline]
    pub fn evaluate(&self, x: &[f64]) -> f64 {
        match self {
            Source::Manufactured(spec) => spec.source(x),
            Source::Closure { f, .. } => f(x),
        }
    }

    /// The polynomial degree of f, when it is a known polynomial.
    pub fn degree(&self) -> Option<usize> {
        match self {
            Source::Manufactured(spec) => spec.solution.laplacian_degree(),
            Source::Closure { degree, .. } => *degree,
        }
    }

    /// The same function (and degree) as a closure: what a backend's own evaluation of a
    /// manufactured source is compared with, and a way to have every backend use the host.
    pub fn to_closure(&self) -> Source {
        match self {
            Source::Manufactured(spec) => {
                let spec = *spec;
                Source::Closure { f: Arc::new(move |x| spec.source(x)), degree: self.degree() }
            }
            Source::Closure { .. } => self.clone(),
        }
    }
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
    /// Source f. A manufactured source keeps the kappa and c it was built with: changing
    /// `kappa` or `reaction` afterwards changes the equation, not f.
    pub source: Source,
    /// Dirichlet data g_D.
    pub dirichlet: ScalarField,
    /// Exact solution, when known.
    pub exact: Option<ExactSolution>,
}

/// What a manufactured source is built from (see [`Problem::manufactured`]):
/// `source = -kappa lap(u) + reaction u` for the solution u.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ManufacturedSpec {
    /// The exact solution u.
    pub solution: Manufactured,
    /// The kappa the source was built with.
    pub kappa: f64,
    /// The reaction coefficient the source was built with.
    pub reaction: f64,
}

impl ManufacturedSpec {
    /// The source at `x`.
    #[inline]
    pub fn source(&self, x: &[f64]) -> f64 {
        let (m, kappa, reaction) = (self.solution, self.kappa, self.reaction);
        manufactured_at(x, |x| m.source(x, kappa, reaction), |x| m.source(x, kappa, reaction))
    }
}

/// `in_2d` or `in_3d` of the point `x`; NaN for a point of another dimension (no mesh has one:
/// the NaN reaches the loads' or the norms' checks rather than a panic).
#[inline]
fn manufactured_at(
    x: &[f64],
    in_2d: impl FnOnce(&[f64; 2]) -> f64,
    in_3d: impl FnOnce(&[f64; 3]) -> f64,
) -> f64 {
    match *x {
        [x0, x1] => in_2d(&[x0, x1]),
        [x0, x1, x2] => in_3d(&[x0, x1, x2]),
        _ => f64::NAN,
    }
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
        let exact = ExactSolution::Manufactured(solution);
        let boundary = exact.clone();
        Problem {
            kappa: Coefficient::Constant(kappa),
            reaction: Coefficient::Constant(reaction),
            tau: 1.0,
            source: Source::Manufactured(ManufacturedSpec { solution, kappa, reaction }),
            dirichlet: Arc::new(move |x| boundary.u(x)),
            exact: Some(exact),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The source of a manufactured problem against `-kappa lap u + c u` with the Laplacian
    /// of the exact solution by central differences: a source that does not belong to its
    /// solution would make every convergence test meaningless.
    #[test]
    fn manufactured_source_is_the_equation_applied_to_the_solution() {
        let (kappa, reaction) = (1.7, 0.6);
        for m in [Manufactured::Sine, Manufactured::ExpSin, Manufactured::Polynomial(4)] {
            let p = Problem::manufactured(m, kappa, reaction);
            let exact = p.exact.as_ref().unwrap();
            for x in [&[0.3, 0.7][..], &[0.91, 0.15], &[0.3, 0.7, 0.45], &[0.8, 0.1, 0.95]] {
                let h = 1e-3;
                let mut laplacian = 0.0;
                for d in 0..x.len() {
                    let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
                    xp[d] += h;
                    xm[d] -= h;
                    laplacian += (exact.u(&xp) - 2.0 * exact.u(x) + exact.u(&xm)) / (h * h);
                }
                let expected = -kappa * laplacian + reaction * exact.u(x);
                let f = p.source.evaluate(x);
                assert!((f - expected).abs() < 1e-4 * (1.0 + f.abs()), "{m:?} at {x:?}: {f}");
                assert_eq!((p.dirichlet)(x), exact.u(x), "{m:?}: g_D is u");
            }
        }
    }

    /// The closure forms evaluate what the descriptions do, to the bit, and replacing the
    /// source or the exact solution leaves no description behind.
    #[test]
    fn closures_replace_descriptions() {
        let mut p = Problem::manufactured(Manufactured::Polynomial(3), 2.0, 1.0);
        let exact = p.exact.clone().unwrap();
        let closures = exact.to_closures();
        let source = p.source.to_closure();
        assert_eq!(source.degree(), Some(1));
        for x in [&[0.3, 0.7][..], &[0.8, 0.1, 0.95]] {
            let (mut g, mut gc) = ([0.0; 3], [0.0; 3]);
            let d = x.len();
            assert_eq!(
                exact.u_and_gradient(x, &mut g[..d]),
                closures.u_and_gradient(x, &mut gc[..d])
            );
            assert_eq!(g, gc);
            assert_eq!(p.source.evaluate(x), source.evaluate(x));
        }
        assert!(matches!(closures, ExactSolution::Closures { .. }));
        p.source = Source::closure(|_| f64::NAN);
        assert!(matches!(p.source, Source::Closure { degree: None, .. }));
        assert!(p.source.evaluate(&[0.5, 0.5]).is_nan());
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

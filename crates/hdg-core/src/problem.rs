//! Problem description: coefficients, data and (optionally) the exact solution of
//! `-div(kappa grad u) + c u = f` with Dirichlet, Neumann or Robin data per boundary tag.
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

/// A symmetric positive definite d x d tensor field of the physical coordinates, written
/// row-major into the second argument (d x d entries).
pub type TensorField = Arc<dyn Fn(&[f64], &mut [f64]) + Send + Sync>;

/// A coefficient: constant, one value per cell, or a function of x evaluated at quadrature
/// points (a scalar, or for kappa an anisotropic SPD tensor).
///
/// Constants and values per cell enter the element matrices as factors of the reference
/// matrices; functions of x make the element mass matrices weighted ones, formed per element
/// by quadrature ([`crate::coefficients`]).
#[derive(Clone)]
pub enum Coefficient {
    /// The same value on every cell.
    Constant(f64),
    /// One value per cell (in the mesh's cell numbering).
    PerCell(Vec<f64>),
    /// A scalar function of x, evaluated at quadrature points.
    Field(ScalarField),
    /// A symmetric positive definite tensor function of x (kappa only), evaluated at
    /// quadrature points.
    Tensor(TensorField),
}

impl std::fmt::Debug for Coefficient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Coefficient::Constant(v) => write!(f, "Constant({v})"),
            Coefficient::PerCell(v) => write!(f, "PerCell({} values)", v.len()),
            Coefficient::Field(_) => write!(f, "Field(function of x)"),
            Coefficient::Tensor(_) => write!(f, "Tensor(function of x)"),
        }
    }
}

impl Coefficient {
    /// A scalar function of x.
    pub fn field(f: impl Fn(&[f64]) -> f64 + Send + Sync + 'static) -> Coefficient {
        Coefficient::Field(Arc::new(f))
    }

    /// A tensor function of x (row-major d x d, symmetric positive definite).
    pub fn tensor(f: impl Fn(&[f64], &mut [f64]) + Send + Sync + 'static) -> Coefficient {
        Coefficient::Tensor(Arc::new(f))
    }

    /// The value on cell `c`, or `None` for a function of x (which varies inside a cell).
    pub fn cell_value(&self, c: usize) -> Option<f64> {
        match self {
            Coefficient::Constant(v) => Some(*v),
            Coefficient::PerCell(v) => Some(v[c]),
            Coefficient::Field(_) | Coefficient::Tensor(_) => None,
        }
    }

    /// Whether the coefficient is a function of x (evaluated at quadrature points).
    pub fn varies_in_cells(&self) -> bool {
        matches!(self, Coefficient::Field(_) | Coefficient::Tensor(_))
    }

    /// `out = K v` at `x` on cell `c` (`out` and `v` of the dimension of `x`): the flux
    /// `-kappa grad u` of a known u is `-apply(grad u)`.
    pub fn apply(&self, c: usize, x: &[f64], v: &[f64], out: &mut [f64]) {
        let d = x.len();
        let scalar = match self {
            Coefficient::Constant(k) => *k,
            Coefficient::PerCell(k) => k[c],
            Coefficient::Field(k) => k(x),
            Coefficient::Tensor(k) => {
                let mut m = [0.0; 9];
                k(x, &mut m[..d * d]);
                for r in 0..d {
                    out[r] = (0..d).map(|s| m[r * d + s] * v[s]).sum();
                }
                return;
            }
        };
        for r in 0..d {
            out[r] = scalar * v[r];
        }
    }

    /// One value per region: `values` gives each region's value (a region is a cell's tag,
    /// such as the physical group a mesh file puts it in: `hdg_mesh::gmsh::GmshMesh`).
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] naming the first cell whose region has no value.
    pub fn per_region(
        name: &'static str,
        regions: &[u32],
        values: &std::collections::BTreeMap<u32, f64>,
    ) -> Result<Coefficient> {
        let per_cell = regions
            .iter()
            .enumerate()
            .map(|(c, r)| {
                values.get(r).copied().ok_or_else(|| CoreError::InvalidParameter {
                    name,
                    reason: format!(
                        "no value for region {r} (of cell {c}); values are given for regions {:?}",
                        values.keys().collect::<Vec<_>>()
                    ),
                })
            })
            .collect::<Result<Vec<f64>>>()?;
        Ok(Coefficient::PerCell(per_cell))
    }

    fn validate(&self, name: &'static str, n_cells: usize, positive: bool) -> Result<()> {
        let bad = |v: f64| !v.is_finite() || if positive { v <= 0.0 } else { v < 0.0 };
        let rule = if positive { "> 0" } else { ">= 0" };
        // The short name for "(kappa must be ...)": "reaction coefficient c" says "c".
        let symbol = name.rsplit(' ').next().unwrap_or(name);
        match self {
            Coefficient::Constant(v) if bad(*v) => Err(CoreError::InvalidParameter {
                name,
                reason: format!("{v} ({symbol} must be finite and {rule})"),
            }),
            Coefficient::PerCell(v) if v.len() != n_cells => Err(CoreError::InvalidParameter {
                name,
                reason: format!("{} values given for {} cells", v.len(), n_cells),
            }),
            Coefficient::PerCell(v) => match v.iter().position(|&x| bad(x)) {
                Some(c) => Err(CoreError::InvalidParameter {
                    name,
                    reason: format!(
                        "value {} on cell {c} ({symbol} must be finite and {rule})",
                        v[c]
                    ),
                }),
                None => Ok(()),
            },
            Coefficient::Tensor(_) if !positive => Err(CoreError::InvalidParameter {
                name,
                reason: "a tensor is a diffusion coefficient; this coefficient is a scalar".into(),
            }),
            // Functions of x are checked where they are evaluated, point by point.
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
    /// u alone, run on the host: the errors of u_h and u* are computed, that of q_h is NaN
    /// (there is no gradient to compare with).
    Value {
        /// u
        u: ScalarField,
    },
}

impl ExactSolution {
    /// u at `x`.
    pub fn u(&self, x: &[f64]) -> f64 {
        match self {
            ExactSolution::Manufactured(m) => {
                manufactured_at(x, |x| m.evaluate(x).u, |x| m.evaluate(x).u)
            }
            ExactSolution::Closures { u, .. } | ExactSolution::Value { u } => u(x),
        }
    }

    /// Whether grad u is known (the error of q_h can be computed).
    pub fn has_gradient(&self) -> bool {
        !matches!(self, ExactSolution::Value { .. })
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
            ExactSolution::Value { u } => {
                grad.fill(f64::NAN);
                u(x)
            }
        }
    }

    /// u and grad u at the `u.len()` points of `points` (d coordinates each, point-major),
    /// into `u[p]` and `grad[p * d..][..d]`: [`ExactSolution::u_and_gradient`] point by point,
    /// except that a manufactured solution is evaluated four points at a time
    /// ([`crate::lanes`]; its sin and cos may differ from libm's in the last bits).
    pub fn u_and_gradient_at(&self, d: usize, points: &[f64], u: &mut [f64], grad: &mut [f64]) {
        let n = u.len();
        let (points, grad) = (&points[..n * d], &mut grad[..n * d]);
        match (self, d) {
            (ExactSolution::Manufactured(m), 2) => {
                crate::lanes::for_each_point::<2>(*m, points, |p, f| {
                    u[p] = f.u;
                    grad[2 * p..2 * p + 2].copy_from_slice(&f.grad);
                })
            }
            (ExactSolution::Manufactured(m), 3) => {
                crate::lanes::for_each_point::<3>(*m, points, |p, f| {
                    u[p] = f.u;
                    grad[3 * p..3 * p + 3].copy_from_slice(&f.grad);
                })
            }
            _ => {
                for (p, (up, g)) in u.iter_mut().zip(grad.chunks_exact_mut(d.max(1))).enumerate() {
                    *up = self.u_and_gradient(&points[p * d..(p + 1) * d], g);
                }
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
            ExactSolution::Closures { .. } | ExactSolution::Value { .. } => self.clone(),
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

    /// f at the `out.len()` points of `points` (d coordinates each, point-major):
    /// [`Source::evaluate`] point by point, except that a manufactured source is evaluated
    /// four points at a time ([`crate::lanes`]; its sin and cos may differ from libm's in the
    /// last bits).
    pub fn evaluate_at(&self, d: usize, points: &[f64], out: &mut [f64]) {
        let points = &points[..out.len() * d];
        match (self, d) {
            (Source::Manufactured(spec), 2) => {
                crate::lanes::source_at::<2>(spec.solution, spec.kappa, spec.reaction, points, out)
            }
            (Source::Manufactured(spec), 3) => {
                crate::lanes::source_at::<3>(spec.solution, spec.kappa, spec.reaction, points, out)
            }
            _ => {
                for (p, f) in out.iter_mut().enumerate() {
                    *f = self.evaluate(&points[p * d..(p + 1) * d]);
                }
            }
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

/// Boundary data on a face: a function of the point and the face's outward unit normal (data
/// built from an exact solution need the normal; a user's data may ignore it).
pub type FaceField = Arc<dyn Fn(&[f64], &[f64]) -> f64 + Send + Sync>;

/// The condition on the boundary faces of one tag (signs of `docs/formulation.md`, section 'The
/// global (transmission) condition').
#[derive(Clone)]
pub enum BoundaryCondition {
    /// `u = g_D`, with g_D the problem's [`Problem::dirichlet`]: the faces' traces are fixed.
    Dirichlet,
    /// `kappa grad u . n = g` (the outward flux of kappa grad u): the faces' traces are
    /// unknowns, and `<g, mu>_F` joins the right-hand side.
    Neumann {
        /// g
        data: FaceField,
    },
    /// `kappa grad u . n + alpha u = g`, alpha > 0: the faces' traces are unknowns,
    /// `alpha H_F` joins the trace matrix (which stays SPD) and `<g, mu>_F` the right-hand side.
    Robin {
        /// alpha > 0
        alpha: f64,
        /// g
        data: FaceField,
    },
}

impl BoundaryCondition {
    /// Neumann data of a known solution: `g = kappa grad u . n`.
    pub fn neumann_of(exact: &ExactSolution, kappa: f64) -> Self {
        let exact = exact.clone();
        BoundaryCondition::Neumann {
            data: Arc::new(move |x, n| kappa * normal_derivative(&exact, x, n)),
        }
    }

    /// Robin data of a known solution: `g = kappa grad u . n + alpha u`.
    pub fn robin_of(exact: &ExactSolution, kappa: f64, alpha: f64) -> Self {
        let exact = exact.clone();
        BoundaryCondition::Robin {
            alpha,
            data: Arc::new(move |x, n| {
                let mut grad = [0.0; 3];
                let u = exact.u_and_gradient(x, &mut grad[..x.len()]);
                kappa * grad.iter().zip(n).map(|(g, n)| g * n).sum::<f64>() + alpha * u
            }),
        }
    }

    /// Dirichlet, Neumann or Robin.
    pub fn name(&self) -> &'static str {
        match self {
            BoundaryCondition::Dirichlet => "Dirichlet",
            BoundaryCondition::Neumann { .. } => "Neumann",
            BoundaryCondition::Robin { .. } => "Robin",
        }
    }
}

/// `grad u . n` of a known solution.
fn normal_derivative(exact: &ExactSolution, x: &[f64], n: &[f64]) -> f64 {
    let mut grad = [0.0; 3];
    exact.u_and_gradient(x, &mut grad[..x.len()]);
    grad.iter().zip(n).map(|(g, n)| g * n).sum()
}

/// The stabilisation tau of the numerical flux, per (cell, face) pair (`docs/formulation.md`,
/// section 'The stabilisation tau'; the flux: section 'The local problem', equation (3)). Any
/// tau > 0 gives the rates k+1, k+1, k+2; tau = O(kappa / h) keeps the balance between the flux and
/// the jump terms where kappa is far from 1.
#[derive(Clone, Debug, PartialEq)]
pub enum Tau {
    /// The same tau everywhere.
    Constant(f64),
    /// One tau per (cell, local face): `[c * faces_per_cell + f]`.
    PerFace(Vec<f64>),
    /// `scale * kappa_K / h_K`, with kappa_K the cell's kappa (for a function of x, its mean
    /// over the cell; for a tensor, the mean of its trace / d) and h_K the cell's longest edge.
    KappaOverH {
        /// The factor in front.
        scale: f64,
    },
}

impl Tau {
    fn validate(&self, n_cells: usize) -> Result<()> {
        let bad = |v: &f64| !(v.is_finite() && *v > 0.0);
        let reason = match self {
            Tau::Constant(v) if bad(v) => format!("{v} (tau must be finite and > 0)"),
            Tau::KappaOverH { scale } if bad(scale) => {
                format!("scale {scale} of kappa/h (the scale must be finite and > 0)")
            }
            Tau::PerFace(v) if v.len() % n_cells.max(1) != 0 || v.len() < n_cells => {
                format!("{} values given for {n_cells} cells (one per cell and face)", v.len())
            }
            Tau::PerFace(v) => match v.iter().position(bad) {
                Some(i) => format!("value {} at position {i} (tau must be finite and > 0)", v[i]),
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        Err(CoreError::InvalidParameter { name: "tau", reason })
    }
}

/// `-div(kappa grad u) + c u = f` in the domain, with a [`BoundaryCondition`] per boundary tag
/// (Dirichlet where none is given).
#[derive(Clone)]
pub struct Problem {
    /// Diffusion coefficient kappa > 0.
    pub kappa: Coefficient,
    /// Reaction coefficient c >= 0 (0: Poisson).
    pub reaction: Coefficient,
    /// Stabilisation tau > 0 on every (cell, face) pair.
    pub tau: Tau,
    /// Source f. A manufactured source keeps the kappa and c it was built with: changing
    /// `kappa` or `reaction` afterwards changes the equation, not f.
    pub source: Source,
    /// Dirichlet data g_D (on the faces whose tag has [`BoundaryCondition::Dirichlet`] and no
    /// entry in `dirichlet_by_tag`).
    pub dirichlet: ScalarField,
    /// Dirichlet data of single boundary tags, in place of `dirichlet` on their faces.
    pub dirichlet_by_tag: std::collections::BTreeMap<u32, ScalarField>,
    /// The condition of each boundary tag; tags not listed are Dirichlet.
    pub boundary: std::collections::BTreeMap<u32, BoundaryCondition>,
    /// Exact solution, when known.
    pub exact: Option<ExactSolution>,
    /// Fix the free constant of a problem that has none fixed otherwise (Neumann data on the
    /// whole boundary and c = 0) by asking the mean of u_h to vanish. Without it such a
    /// problem is refused. Ignored when a Dirichlet or Robin face or c > 0 fixes u.
    pub mean_zero: bool,
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
        for (tag, condition) in &self.boundary {
            if let BoundaryCondition::Robin { alpha, .. } = condition {
                if !(alpha.is_finite() && *alpha > 0.0) {
                    return Err(CoreError::InvalidParameter {
                        name: "Robin alpha",
                        reason: format!(
                            "{alpha} on boundary tag {tag} (alpha must be finite and > 0)"
                        ),
                    });
                }
            }
        }
        self.tau.validate(n_cells)?;
        Ok(())
    }

    /// [`Problem::validate`] on `mesh`, and every boundary tag given a condition or Dirichlet
    /// data of its own is one of the mesh's: a condition on a tag the mesh does not have is a
    /// mistake (a tag from another mesh file, a typo) that would otherwise leave those faces
    /// Dirichlet without a word.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] naming the condition, the tag and the mesh's tags.
    pub fn validate_on(&self, mesh: &hdg_mesh::Mesh) -> Result<()> {
        self.validate(mesh.n_cells())?;
        let tags: Vec<u32> = mesh.boundary_tag_counts().into_iter().map(|(t, _)| t).collect();
        let missing = self
            .boundary
            .iter()
            .map(|(&tag, condition)| (tag, condition.name()))
            .chain(self.dirichlet_by_tag.keys().map(|&tag| (tag, "Dirichlet")))
            .find(|(tag, _)| tags.binary_search(tag).is_err());
        match missing {
            Some((tag, condition)) => Err(CoreError::InvalidParameter {
                name: "boundary conditions",
                reason: format!(
                    "a {condition} condition is given on boundary tag {tag}, which the mesh does \
                     not have (its boundary tags: {})",
                    tags.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                ),
            }),
            None => Ok(()),
        }
    }

    /// The problem on the cells `cells` of its mesh (a mesh part's cells, in the part's order):
    /// values given per cell (kappa, c, tau per face) are taken for those cells; everything
    /// else is shared.
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] if a cell is not one of the values' (validate first).
    pub fn restricted_to(&self, cells: &[usize], faces_per_cell: usize) -> Result<Problem> {
        let out_of_range = |what: &'static str, len: usize| {
            let bad = cells.iter().find(|&&c| (c + 1) * faces_per_cell.max(1) > len);
            match bad {
                Some(c) => Err(CoreError::InvalidParameter {
                    name: what,
                    reason: format!("cell {c} has no value (values for {len} entries)"),
                }),
                None => Ok(()),
            }
        };
        let restrict = |coefficient: &Coefficient, what: &'static str| -> Result<Coefficient> {
            Ok(match coefficient {
                Coefficient::PerCell(v) => {
                    out_of_range(what, v.len() * faces_per_cell.max(1))?;
                    Coefficient::PerCell(cells.iter().map(|&c| v[c]).collect())
                }
                other => other.clone(),
            })
        };
        let tau = match &self.tau {
            Tau::PerFace(v) => {
                out_of_range("tau", v.len())?;
                Tau::PerFace(
                    cells
                        .iter()
                        .flat_map(|&c| {
                            v[c * faces_per_cell..(c + 1) * faces_per_cell].iter().copied()
                        })
                        .collect(),
                )
            }
            other => other.clone(),
        };
        Ok(Problem {
            kappa: restrict(&self.kappa, "kappa")?,
            reaction: restrict(&self.reaction, "reaction coefficient c")?,
            tau,
            ..self.clone()
        })
    }

    /// A manufactured problem: `f` and `g_D` computed from a known `u`, for constant kappa and c.
    pub fn manufactured(solution: Manufactured, kappa: f64, reaction: f64) -> Problem {
        let exact = ExactSolution::Manufactured(solution);
        let boundary = exact.clone();
        Problem {
            kappa: Coefficient::Constant(kappa),
            reaction: Coefficient::Constant(reaction),
            tau: Tau::Constant(1.0),
            source: Source::Manufactured(ManufacturedSpec { solution, kappa, reaction }),
            dirichlet: Arc::new(move |x| boundary.u(x)),
            boundary: Default::default(),
            dirichlet_by_tag: Default::default(),
            exact: Some(exact),
            mean_zero: false,
        }
    }

    /// The problem with `condition` on the boundary faces tagged `tag`.
    pub fn with_boundary(mut self, tag: u32, condition: BoundaryCondition) -> Problem {
        self.boundary.insert(tag, condition);
        self
    }

    /// The mixed conditions of `hdg solve --bc mixed` on the generated unit square (cube),
    /// with data from the problem's exact solution and constant kappa `kappa`: Dirichlet on
    /// x = 0, Robin (alpha = 1) on x = 1, Neumann on the other sides (y = 0, 1 and z = 0, 1).
    ///
    /// # Errors
    /// [`CoreError::InvalidParameter`] if the problem has no exact solution.
    pub fn with_mixed_boundary(self, dim: usize, kappa: f64) -> Result<Problem> {
        use hdg_mesh::generate::{
            TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP, TAG_X0, TAG_X1, TAG_Y0, TAG_Y1, TAG_Z0,
            TAG_Z1,
        };
        let exact = self.exact.clone().ok_or_else(|| CoreError::InvalidParameter {
            name: "boundary conditions",
            reason: "mixed boundary data come from the exact solution, and this problem has none"
                .into(),
        })?;
        let (dirichlet, robin, neumann): (u32, u32, &[u32]) = if dim == 2 {
            (TAG_LEFT, TAG_RIGHT, &[TAG_BOTTOM, TAG_TOP])
        } else {
            (TAG_X0, TAG_X1, &[TAG_Y0, TAG_Y1, TAG_Z0, TAG_Z1])
        };
        let mut p = self
            .with_boundary(dirichlet, BoundaryCondition::Dirichlet)
            .with_boundary(robin, BoundaryCondition::robin_of(&exact, kappa, 1.0));
        for &tag in neumann {
            p = p.with_boundary(tag, BoundaryCondition::neumann_of(&exact, kappa));
        }
        Ok(p)
    }

    /// The condition on the faces tagged `tag`.
    pub fn condition(&self, tag: u32) -> &BoundaryCondition {
        self.boundary.get(&tag).unwrap_or(&BoundaryCondition::Dirichlet)
    }

    /// g_D on the faces tagged `tag` (when they are Dirichlet faces).
    pub fn dirichlet_on(&self, tag: u32) -> &ScalarField {
        self.dirichlet_by_tag.get(&tag).unwrap_or(&self.dirichlet)
    }

    /// A problem built step by step from defaults: kappa = 1, c = 0, tau = 1, f = 0, g_D = 0
    /// and Dirichlet conditions on the whole boundary.
    ///
    /// ```
    /// use hdg_core::Problem;
    /// let pi = std::f64::consts::PI;
    /// let problem = Problem::builder()
    ///     .kappa(2.0)
    ///     .source(move |x| 4.0 * pi * pi * (pi * x[0]).sin() * (pi * x[1]).sin())
    ///     .neumann(2, move |x, n| 2.0 * pi * (pi * x[0]).cos() * (pi * x[1]).sin() * n[0])
    ///     .exact(move |x| (pi * x[0]).sin() * (pi * x[1]).sin())
    ///     .build();
    /// assert_eq!(problem.condition(2).name(), "Neumann");
    /// assert_eq!(problem.condition(1).name(), "Dirichlet");
    /// ```
    pub fn builder() -> ProblemBuilder {
        ProblemBuilder {
            problem: Problem {
                kappa: Coefficient::Constant(1.0),
                reaction: Coefficient::Constant(0.0),
                tau: Tau::Constant(1.0),
                source: Source::Closure { f: Arc::new(|_| 0.0), degree: Some(0) },
                dirichlet: Arc::new(|_| 0.0),
                dirichlet_by_tag: Default::default(),
                boundary: Default::default(),
                exact: None,
                mean_zero: false,
            },
        }
    }
}

impl From<f64> for Coefficient {
    fn from(value: f64) -> Coefficient {
        Coefficient::Constant(value)
    }
}

impl From<Vec<f64>> for Coefficient {
    fn from(per_cell: Vec<f64>) -> Coefficient {
        Coefficient::PerCell(per_cell)
    }
}

/// A scalar function of x: `.kappa(|x: &[f64]| 1.0 + x[0])` ([`Coefficient::field`]).
impl<F: Fn(&[f64]) -> f64 + Send + Sync + 'static> From<F> for Coefficient {
    fn from(f: F) -> Coefficient {
        Coefficient::field(f)
    }
}

impl From<f64> for Tau {
    fn from(value: f64) -> Tau {
        Tau::Constant(value)
    }
}

/// Builds a [`Problem`] from defaults ([`Problem::builder`]); each method sets one part.
/// Values are checked when the problem meets its mesh (at the solve), where cell counts and
/// boundary tags are known.
#[must_use]
pub struct ProblemBuilder {
    problem: Problem,
}

impl ProblemBuilder {
    /// kappa: a number, one value per cell (`Vec<f64>`), a function of x (a closure
    /// `|x: &[f64]| ...`) or any [`Coefficient`].
    pub fn kappa(mut self, kappa: impl Into<Coefficient>) -> Self {
        self.problem.kappa = kappa.into();
        self
    }

    /// The reaction coefficient c: a number, one value per cell, a function of x (a closure
    /// `|x: &[f64]| ...`) or any [`Coefficient`].
    pub fn reaction(mut self, c: impl Into<Coefficient>) -> Self {
        self.problem.reaction = c.into();
        self
    }

    /// The stabilisation tau: a number or any [`Tau`].
    pub fn tau(mut self, tau: impl Into<Tau>) -> Self {
        self.problem.tau = tau.into();
        self
    }

    /// The source f.
    pub fn source(mut self, f: impl Fn(&[f64]) -> f64 + Send + Sync + 'static) -> Self {
        self.problem.source = Source::closure(f);
        self
    }

    /// The source f, a polynomial of degree `degree` (its loads then use exact quadrature).
    pub fn polynomial_source(
        mut self,
        degree: usize,
        f: impl Fn(&[f64]) -> f64 + Send + Sync + 'static,
    ) -> Self {
        self.problem.source = Source::Closure { f: Arc::new(f), degree: Some(degree) };
        self
    }

    /// g_D on every Dirichlet face without data of its own ([`Self::dirichlet_on`]).
    pub fn dirichlet(mut self, g: impl Fn(&[f64]) -> f64 + Send + Sync + 'static) -> Self {
        self.problem.dirichlet = Arc::new(g);
        self
    }

    /// Dirichlet conditions with data `g` on the faces tagged `tag`.
    pub fn dirichlet_on(
        mut self,
        tag: u32,
        g: impl Fn(&[f64]) -> f64 + Send + Sync + 'static,
    ) -> Self {
        self.problem.boundary.insert(tag, BoundaryCondition::Dirichlet);
        self.problem.dirichlet_by_tag.insert(tag, Arc::new(g));
        self
    }

    /// Neumann conditions `kappa grad u . n = g(x, n)` on the faces tagged `tag`.
    pub fn neumann(
        mut self,
        tag: u32,
        g: impl Fn(&[f64], &[f64]) -> f64 + Send + Sync + 'static,
    ) -> Self {
        self.problem.boundary.insert(tag, BoundaryCondition::Neumann { data: Arc::new(g) });
        self
    }

    /// Robin conditions `kappa grad u . n + alpha u = g(x, n)` on the faces tagged `tag`.
    pub fn robin(
        mut self,
        tag: u32,
        alpha: f64,
        g: impl Fn(&[f64], &[f64]) -> f64 + Send + Sync + 'static,
    ) -> Self {
        self.problem.boundary.insert(tag, BoundaryCondition::Robin { alpha, data: Arc::new(g) });
        self
    }

    /// Any [`BoundaryCondition`] on the faces tagged `tag`.
    pub fn boundary(mut self, tag: u32, condition: BoundaryCondition) -> Self {
        self.problem.boundary.insert(tag, condition);
        self
    }

    /// The exact u, known without its gradient: the errors of u_h and u* are reported.
    pub fn exact(mut self, u: impl Fn(&[f64]) -> f64 + Send + Sync + 'static) -> Self {
        self.problem.exact = Some(ExactSolution::Value { u: Arc::new(u) });
        self
    }

    /// The exact u with its gradient: the error of q_h is reported too.
    pub fn exact_with_gradient(
        mut self,
        u: impl Fn(&[f64]) -> f64 + Send + Sync + 'static,
        grad_u: impl Fn(&[f64], &mut [f64]) + Send + Sync + 'static,
    ) -> Self {
        self.problem.exact =
            Some(ExactSolution::Closures { u: Arc::new(u), grad_u: Arc::new(grad_u) });
        self
    }

    /// Asks mean(u_h) = 0 where nothing else fixes the constant ([`Problem::mean_zero`]).
    pub fn mean_zero(mut self, mean_zero: bool) -> Self {
        self.problem.mean_zero = mean_zero;
        self
    }

    /// The problem.
    pub fn build(self) -> Problem {
        self.problem
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
        p.tau = Tau::Constant(0.0);
        assert!(p.validate(4).is_err());
        p.tau = Tau::PerFace(vec![1.0; 11]);
        assert!(p.validate(4).is_err());
        p.tau = Tau::PerFace(vec![1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0, 1.0]);
        assert!(p.validate(4).is_err());
        p.tau = Tau::KappaOverH { scale: f64::NAN };
        assert!(p.validate(4).is_err());
    }

    /// The message says the value, then the rule in parentheses.
    #[test]
    fn invalid_values_read_value_then_rule() {
        let message = |p: &Problem| p.validate(4).unwrap_err().to_string();
        let p = Problem::builder().kappa(-1.0).build();
        assert_eq!(message(&p), "invalid kappa: -1 (kappa must be finite and > 0)");
        let p = Problem::builder().reaction(vec![0.0, 0.0, -2.0, 0.0]).build();
        assert_eq!(
            message(&p),
            "invalid reaction coefficient c: value -2 on cell 2 (c must be finite and >= 0)"
        );
        let p = Problem::builder().tau(f64::NAN).build();
        assert_eq!(message(&p), "invalid tau: NaN (tau must be finite and > 0)");
        let p = Problem::builder().robin(3, 0.0, |_, _| 0.0).build();
        assert_eq!(
            message(&p),
            "invalid Robin alpha: 0 on boundary tag 3 (alpha must be finite and > 0)"
        );
    }

    /// A condition (or Dirichlet data) on a tag the mesh does not have is refused, naming the
    /// tag and the mesh's tags; conditions on the mesh's own tags pass.
    #[test]
    fn conditions_on_missing_boundary_tags_are_refused() {
        let mesh = hdg_mesh::unit_square(2, hdg_mesh::Diagonal::Right).unwrap();
        let on_mesh = Problem::builder()
            .neumann(hdg_mesh::TAG_RIGHT, |_, _| 0.0)
            .robin(hdg_mesh::TAG_TOP, 1.0, |_, _| 0.0)
            .dirichlet_on(hdg_mesh::TAG_LEFT, |_| 1.0)
            .build();
        assert!(on_mesh.validate_on(&mesh).is_ok());
        let tags = "(its boundary tags: 1, 2, 3, 4)";
        for (problem, condition) in [
            (Problem::builder().neumann(7, |_, _| 0.0).build(), "Neumann"),
            (Problem::builder().robin(7, 1.0, |_, _| 0.0).build(), "Robin"),
            (Problem::builder().dirichlet_on(7, |_| 0.0).build(), "Dirichlet"),
        ] {
            let err = problem.validate_on(&mesh).unwrap_err();
            assert!(matches!(err, CoreError::InvalidParameter { name: "boundary conditions", .. }));
            let expected = format!(
                "a {condition} condition is given on boundary tag 7, which the mesh does not \
                 have {tags}"
            );
            assert!(err.to_string().contains(&expected), "{err}");
        }
        // Through the discretization, as every solve builds it.
        let p = Problem::builder().neumann(9, |_, _| 0.0).build();
        let err = crate::Discretization::<f64>::new(&mesh, &p, 1).err().unwrap();
        assert!(err.to_string().contains("boundary tag 9"), "{err}");
    }

    /// A closure is a coefficient (a function of x) without `Coefficient::field`; numbers and
    /// per-cell values still are what they were.
    #[test]
    fn closures_are_coefficients() {
        let p = Problem::builder().kappa(|x: &[f64]| 1.0 + x[0]).reaction(2.0).build();
        match &p.kappa {
            Coefficient::Field(k) => assert_eq!(k(&[0.5, 0.0]), 1.5),
            other => panic!("kappa is {other:?}"),
        }
        assert!(matches!(p.reaction, Coefficient::Constant(2.0)));
        let c: Coefficient = vec![1.0, 2.0].into();
        assert!(matches!(c, Coefficient::PerCell(ref v) if v.len() == 2));
        let k = 3.0;
        let p = Problem::builder().reaction(move |x: &[f64]| k * x[1]).build();
        assert_eq!(p.reaction.cell_value(0), None);
    }
}

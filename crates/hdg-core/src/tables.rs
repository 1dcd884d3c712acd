//! Element tables: every constant matrix the per-element kernels need, in the working precision.
//!
//! On affine simplices each element matrix of the formulation (`docs/formulation.md`, section
//! 'Element matrices') is a constant reference matrix
//! times a few geometric factors (|det J|, J^{-1}, face measures and normals). The products of
//! reference matrices that the condensation needs (D^_s D^_t^T, D^_s G^_{f,o}, G^T G) are formed
//! here once, in f64, so that a kernel only forms linear combinations of them and never
//! multiplies two reference matrices per element. Every backend consumes these same tables (the
//! CUDA backend uploads them): this is the one place where they are defined.
//!
//! All matrices are row-major; the index order of each array is written next to it.
use ndarray::Array2;

use crate::constant_operator::{ConstOperator, OperatorError};
use crate::real::Real;
use crate::reference::{QuadratureRule, ReferenceElement};
use crate::CellType;

/// Constant data for one (cell type, order, precision).
#[derive(Clone, Debug)]
pub struct ElementTables<T: Real> {
    /// Cell type.
    pub cell_type: CellType,
    /// Polynomial order k.
    pub order: usize,
    /// Spatial dimension d.
    pub dim: usize,
    /// Volume basis functions per element, n.
    pub n: usize,
    /// Trace basis functions per face, n_f.
    pub n_f: usize,
    /// Faces per element.
    pub n_faces: usize,
    /// Orientations a face can be met in.
    pub n_orientations: usize,
    /// Measure of the reference cell.
    pub reference_measure: f64,
    /// Measure of the face parameter domain.
    pub face_parameter_measure: f64,
    /// `D^_s[i][j] = int phi_i d_s phi_j`: `[s][i][j]`.
    pub derivative: Vec<T>,
    /// `(D^_s D^_t^T)[i][j]`: `[s*d + t][i][j]`.
    pub derivative_products: Vec<T>,
    /// E^_f: `[f][i][j]`.
    pub face_mass: Vec<T>,
    /// G^_{f,o}: `[f][o][i][m]`.
    pub face_trace: Vec<T>,
    /// D^_s G^_{f,o}: `[s][f][o][i][m]`.
    pub derivative_trace: Vec<T>,
    /// G^_{f,o}^T G^_{g,p}: `[f][o][g][p][m][l]`.
    pub trace_products: Vec<T>,
    /// Rule for element loads (f, phi_i).
    pub load_rule: QuadratureRule,
    /// Basis values at the load points: `[q][i]`.
    pub load_basis: Vec<T>,
    /// Rule for element matrices with coefficients that vary inside cells
    /// ([`crate::coefficients`]): exact to degree 2k + 1.
    pub coefficient_rule: QuadratureRule,
    /// Basis values at the coefficient points: `[q][i]`.
    pub coefficient_basis: Vec<T>,
    /// Rule for error norms (degree >= 2k + 4).
    pub error_rule: QuadratureRule,
    /// Order-k basis at the error points: `[q][i]`.
    pub error_basis: Vec<T>,
    /// Order-(k+1) basis at the error points: `[q][j]`.
    pub error_basis_post: Vec<T>,
    /// Basis functions of the postprocessing space P_{k+1}, n'.
    pub n_post: usize,
    /// int d_s phi'_i d_t phi'_j over the reference cell: `[s*d + t][i][j]`, n' x n'.
    pub post_stiffness: Vec<T>,
    /// int phi_l d_s phi'_j over the reference cell: `[s][l][j]`, n x n'.
    pub post_derivative: Vec<T>,
    /// int over the face parameter domain of phi_i(x_f(s)) ds: `[f][i]` (conservation checks).
    pub face_basis_integral: Vec<f64>,
}

fn push_matrix<T: Real>(out: &mut Vec<T>, m: &Array2<f64>) {
    out.extend(m.iter().map(|&v| T::from_f64_lossy(v)));
}

/// Values of all basis functions of `element` at the points of `rule`: `[q][i]`.
/// The polynomial degree the error norms' rule integrates exactly at order k
/// ([`ElementTables::error_rule`]).
pub fn error_rule_degree(k: usize) -> usize {
    2 * k + 6
}

/// The names of [`error_evaluation_operators`] for (cell type, k): `{cell}-k{k}-error-basis`
/// and `{cell}-k{k}-error-basis-post`, cell `tri` or `tet`.
pub fn error_evaluation_names(cell_type: CellType, k: usize) -> [String; 2] {
    let cell = match cell_type {
        CellType::Triangle => "tri",
        CellType::Tetrahedron => "tet",
    };
    [format!("{cell}-k{k}-error-basis"), format!("{cell}-k{k}-error-basis-post")]
}

/// The error norms' evaluation operators of an order-k element, with `post_element` of order
/// k + 1: the volume basis at the points of the error rule (`{cell}-k{k}-error-basis`, points x
/// n, [`ElementTables::error_basis`]) and the postprocessing basis at the same points
/// (`{cell}-k{k}-error-basis-post`, points x n', [`ElementTables::error_basis_post`]), in f64.
/// Applied to a panel of coefficients (one element per column) they give the fields at the
/// points; the backends' generated kernels are built from these.
pub fn error_evaluation_operators(
    element: &dyn ReferenceElement,
    post_element: &dyn ReferenceElement,
) -> Result<[ConstOperator; 2], OperatorError> {
    let k = element.order();
    let [basis_name, post_name] = error_evaluation_names(element.cell_type(), k);
    let rule = element.cell_quadrature(error_rule_degree(k));
    let basis = ConstOperator::new(
        &basis_name,
        rule.n_points(),
        element.n_volume(),
        basis_at(element, &rule),
    )?;
    let post = ConstOperator::new(
        &post_name,
        rule.n_points(),
        post_element.n_volume(),
        basis_at(post_element, &rule),
    )?;
    Ok([basis, post])
}

fn basis_at(element: &dyn ReferenceElement, rule: &QuadratureRule) -> Vec<f64> {
    let n = element.n_volume();
    let mut out = vec![0.0; rule.n_points() * n];
    for q in 0..rule.n_points() {
        element.eval_basis(rule.point(q), &mut out[q * n..(q + 1) * n], None);
    }
    out
}

impl<T: Real> ElementTables<T> {
    /// Builds the tables from the order-k element and the order-(k+1) element of the same cell
    /// type (for postprocessing). `load_degree` is the polynomial degree the load rule must
    /// integrate exactly.
    pub fn new(
        element: &dyn ReferenceElement,
        post_element: &dyn ReferenceElement,
        load_degree: usize,
    ) -> Self {
        let cell_type = element.cell_type();
        let dim = cell_type.dim();
        let (k, n, n_f) = (element.order(), element.n_volume(), element.n_face());
        let n_faces = cell_type.faces_per_cell();
        let n_orientations = cell_type.n_orientations();
        assert_eq!(post_element.order(), k + 1, "postprocessing element must have order k+1");

        let mut derivative = Vec::new();
        let mut derivative_products = Vec::new();
        for s in 0..dim {
            push_matrix(&mut derivative, element.derivative(s));
            for t in 0..dim {
                let p = element.derivative(s).dot(&element.derivative(t).t());
                push_matrix(&mut derivative_products, &p);
            }
        }
        let mut face_mass = Vec::new();
        let mut face_trace = Vec::new();
        for f in 0..n_faces {
            push_matrix(&mut face_mass, element.face_mass(f));
            for o in 0..n_orientations {
                push_matrix(&mut face_trace, element.face_trace(f, o));
            }
        }
        let mut derivative_trace = Vec::new();
        for s in 0..dim {
            for f in 0..n_faces {
                for o in 0..n_orientations {
                    let p = element.derivative(s).dot(element.face_trace(f, o));
                    push_matrix(&mut derivative_trace, &p);
                }
            }
        }
        let mut trace_products = Vec::new();
        for f in 0..n_faces {
            for o in 0..n_orientations {
                for g in 0..n_faces {
                    for p in 0..n_orientations {
                        let m = element.face_trace(f, o).t().dot(element.face_trace(g, p));
                        push_matrix(&mut trace_products, &m);
                    }
                }
            }
        }

        let load_rule = element.cell_quadrature(load_degree.max(2 * k));
        let load_basis = basis_at(element, &load_rule).into_iter().map(T::from_f64_lossy).collect();
        let coefficient_rule = element.cell_quadrature(2 * k + 1);
        let coefficient_basis =
            basis_at(element, &coefficient_rule).into_iter().map(T::from_f64_lossy).collect();
        let error_rule = element.cell_quadrature(error_rule_degree(k));
        let error_basis =
            basis_at(element, &error_rule).into_iter().map(T::from_f64_lossy).collect();
        let error_basis_post =
            basis_at(post_element, &error_rule).into_iter().map(T::from_f64_lossy).collect();

        // Postprocessing matrices from the order-(k+1) basis, with a rule exact for them.
        let n_post = post_element.n_volume();
        let rule = post_element.cell_quadrature(2 * (k + 1));
        let mut values = vec![0.0; n_post];
        let mut grads = vec![0.0; dim * n_post];
        let mut stiffness = vec![0.0; dim * dim * n_post * n_post];
        for q in 0..rule.n_points() {
            post_element.eval_basis(rule.point(q), &mut values, Some(&mut grads));
            let w = rule.weights[q];
            for s in 0..dim {
                for t in 0..dim {
                    let block = &mut stiffness[(s * dim + t) * n_post * n_post..];
                    for i in 0..n_post {
                        let gi = w * grads[s * n_post + i];
                        for j in 0..n_post {
                            block[i * n_post + j] += gi * grads[t * n_post + j];
                        }
                    }
                }
            }
        }
        // The order-k basis is the first n functions of the hierarchical order-(k+1) basis, so
        // int phi_l d_s phi'_j is the top n rows of the order-(k+1) derivative matrix.
        let mut post_derivative = Vec::new();
        for s in 0..dim {
            let d = post_element.derivative(s);
            for l in 0..n {
                post_derivative.extend(d.row(l).iter().map(|&v| T::from_f64_lossy(v)));
            }
        }

        let face_rule = element.face_quadrature(k);
        let mut face_basis_integral = vec![0.0; n_faces * n];
        let mut xi = vec![0.0; dim];
        let mut phi = vec![0.0; n];
        for f in 0..n_faces {
            for q in 0..face_rule.n_points() {
                element.face_point(f, face_rule.point(q), &mut xi);
                element.eval_basis(&xi, &mut phi, None);
                for i in 0..n {
                    face_basis_integral[f * n + i] += face_rule.weights[q] * phi[i];
                }
            }
        }

        ElementTables {
            cell_type,
            order: k,
            dim,
            n,
            n_f,
            n_faces,
            n_orientations,
            reference_measure: element.reference_measure(),
            face_parameter_measure: element.face_parameter_measure(),
            derivative,
            derivative_products,
            face_mass,
            face_trace,
            derivative_trace,
            trace_products,
            load_rule,
            load_basis,
            coefficient_rule,
            coefficient_basis,
            error_rule,
            error_basis,
            error_basis_post,
            n_post,
            post_stiffness: stiffness.into_iter().map(T::from_f64_lossy).collect(),
            post_derivative,
            face_basis_integral,
        }
    }

    /// Trace unknowns of one element, n_faces * n_f.
    pub fn n_local_trace(&self) -> usize {
        self.n_faces * self.n_f
    }

    /// D^_s as a row-major slice.
    pub fn derivative(&self, s: usize) -> &[T] {
        let nn = self.n * self.n;
        &self.derivative[s * nn..(s + 1) * nn]
    }

    /// D^_s D^_t^T.
    pub fn derivative_product(&self, s: usize, t: usize) -> &[T] {
        let nn = self.n * self.n;
        let idx = s * self.dim + t;
        &self.derivative_products[idx * nn..(idx + 1) * nn]
    }

    /// E^_f.
    pub fn face_mass(&self, f: usize) -> &[T] {
        let nn = self.n * self.n;
        &self.face_mass[f * nn..(f + 1) * nn]
    }

    /// G^_{f,o}.
    pub fn face_trace(&self, f: usize, o: usize) -> &[T] {
        let sz = self.n * self.n_f;
        let idx = f * self.n_orientations + o;
        &self.face_trace[idx * sz..(idx + 1) * sz]
    }

    /// D^_s G^_{f,o}.
    pub fn derivative_trace(&self, s: usize, f: usize, o: usize) -> &[T] {
        let sz = self.n * self.n_f;
        let idx = (s * self.n_faces + f) * self.n_orientations + o;
        &self.derivative_trace[idx * sz..(idx + 1) * sz]
    }

    /// G^_{f,o}^T G^_{g,p}.
    pub fn trace_product(&self, f: usize, o: usize, g: usize, p: usize) -> &[T] {
        let sz = self.n_f * self.n_f;
        let no = self.n_orientations;
        let idx = ((f * no + o) * self.n_faces + g) * no + p;
        &self.trace_products[idx * sz..(idx + 1) * sz]
    }

    /// int d_s phi'_i d_t phi'_j.
    pub fn post_stiffness(&self, s: usize, t: usize) -> &[T] {
        let nn = self.n_post * self.n_post;
        let idx = s * self.dim + t;
        &self.post_stiffness[idx * nn..(idx + 1) * nn]
    }

    /// int phi_l d_s phi'_j (n x n').
    pub fn post_derivative(&self, s: usize) -> &[T] {
        let sz = self.n * self.n_post;
        &self.post_derivative[s * sz..(s + 1) * sz]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReferenceTetrahedron, ReferenceTriangle};

    /// The generated kernels are built from `error_evaluation_operators`, the error norms read
    /// `ElementTables`: both must be the same matrices, with the same names the kernels carry.
    #[test]
    fn error_evaluation_operators_are_the_tables_error_bases() {
        for k in 1..=4 {
            let pairs: [[Box<dyn ReferenceElement>; 2]; 2] = [
                [
                    Box::new(ReferenceTriangle::new(k).unwrap()),
                    Box::new(ReferenceTriangle::new(k + 1).unwrap()),
                ],
                [
                    Box::new(ReferenceTetrahedron::new(k).unwrap()),
                    Box::new(ReferenceTetrahedron::new(k + 1).unwrap()),
                ],
            ];
            for ([element, post], cell) in pairs.into_iter().zip(["tri", "tet"]) {
                let t = ElementTables::<f64>::new(element.as_ref(), post.as_ref(), 2 * k + 4);
                let [basis, basis_post] =
                    error_evaluation_operators(element.as_ref(), post.as_ref()).unwrap();
                assert_eq!(basis.name(), format!("{cell}-k{k}-error-basis"));
                assert_eq!(basis_post.name(), format!("{cell}-k{k}-error-basis-post"));
                assert_eq!((basis.m(), basis.k()), (t.error_rule.n_points(), t.n));
                assert_eq!((basis_post.m(), basis_post.k()), (t.error_rule.n_points(), t.n_post));
                assert_eq!(basis.values(), &t.error_basis[..]);
                assert_eq!(basis_post.values(), &t.error_basis_post[..]);
            }
        }
    }
}

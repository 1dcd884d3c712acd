//! The pipeline's constant operators that the issue-21 benchmarks apply to panels of elements:
//! for triangles and tetrahedra at k = 1..=8, the volume basis at the error quadrature points
//! (`ElementTables::error_basis`, points x n, named `tri-k3-error-basis`) and the reference face
//! trace matrices of orientation 0 (`face_trace(f, 0)`, n x n_f, `tet-k5-face-trace-f0`).
//! One list for the CUDA kernel export (`operator-kernels`) and the CPU benchmark
//! (`operator-cpu-bench`).
use hdg_core::constant_operator::{ConstOperator, OperatorError};
use hdg_core::{ElementTables, ReferenceElement, ReferenceTetrahedron, ReferenceTriangle};

/// The operators, in order (k, then triangle before tetrahedron, error basis before the faces);
/// `all_faces` = false keeps face 0 only.
pub fn pipeline_operators(
    all_faces: bool,
) -> Result<Vec<ConstOperator>, Box<dyn std::error::Error>> {
    let mut ops = Vec::new();
    for k in 1..=8 {
        let tri = tables(&ReferenceTriangle::new(k)?, &ReferenceTriangle::new(k + 1)?, k);
        let tet = tables(&ReferenceTetrahedron::new(k)?, &ReferenceTetrahedron::new(k + 1)?, k);
        for (cell, t) in [("tri", tri), ("tet", tet)] {
            ops.push(ConstOperator::new(
                &format!("{cell}-k{k}-error-basis"),
                t.error_rule.n_points(),
                t.n,
                t.error_basis.clone(),
            )?);
            let faces = if all_faces { t.n_faces } else { 1 };
            for f in 0..faces {
                ops.push(face_trace(&t, cell, k, f)?);
            }
        }
    }
    Ok(ops)
}

fn face_trace(
    t: &ElementTables<f64>,
    cell: &str,
    k: usize,
    f: usize,
) -> Result<ConstOperator, OperatorError> {
    ConstOperator::new(
        &format!("{cell}-k{k}-face-trace-f{f}"),
        t.n,
        t.n_f,
        t.face_trace(f, 0).to_vec(),
    )
}

fn tables(
    element: &dyn ReferenceElement,
    post: &dyn ReferenceElement,
    k: usize,
) -> ElementTables<f64> {
    ElementTables::new(element, post, 2 * k + 4)
}

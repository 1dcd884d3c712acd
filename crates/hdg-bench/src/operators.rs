//! The pipeline's constant operators that the operator benchmarks apply to panels of elements:
//! for triangles and tetrahedra at k = 1..=8, the volume basis at the error quadrature points
//! (`ElementTables::error_basis`, points x n, named `tri-k3-error-basis`) and the reference face
//! trace matrices of orientation 0 (`face_trace(f, 0)`, n x n_f, `tet-k5-face-trace-f0`), and on
//! request the postprocessing basis at the same points (`tri-k3-error-basis-post`).
//! One list for the CUDA kernel export (`operator-kernels`) and the CPU benchmark
//! (`operator-cpu-bench`).
use hdg_core::constant_operator::{ConstOperator, OperatorError};
use hdg_core::tables::error_evaluation_operators;
use hdg_core::{ElementTables, ReferenceElement, ReferenceTetrahedron, ReferenceTriangle};

/// An element and its postprocessing element.
pub type ElementPair = [Box<dyn ReferenceElement>; 2];

/// The reference triangle and tetrahedron of order k, each with its postprocessing element (order
/// k + 1), as the error norms' operators take them (`error_evaluation_operators`).
pub fn element_pairs(k: usize) -> Result<[ElementPair; 2], Box<dyn std::error::Error>> {
    Ok([
        [Box::new(ReferenceTriangle::new(k)?), Box::new(ReferenceTriangle::new(k + 1)?)],
        [Box::new(ReferenceTetrahedron::new(k)?), Box::new(ReferenceTetrahedron::new(k + 1)?)],
    ])
}

/// The operators, in order (k, then triangle before tetrahedron, error basis, with `post_bases`
/// the postprocessing basis, then the faces); `all_faces` = false keeps face 0 only.
pub fn pipeline_operators(
    all_faces: bool,
    post_bases: bool,
) -> Result<Vec<ConstOperator>, Box<dyn std::error::Error>> {
    let mut ops = Vec::new();
    for k in 1..=8 {
        for ([element, post], cell) in element_pairs(k)?.into_iter().zip(["tri", "tet"]) {
            let [error_basis, post_basis] =
                error_evaluation_operators(element.as_ref(), post.as_ref())?;
            ops.push(error_basis);
            if post_bases {
                ops.push(post_basis);
            }
            let t = ElementTables::<f64>::new(element.as_ref(), post.as_ref(), 2 * k + 4);
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

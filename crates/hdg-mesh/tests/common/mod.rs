//! Shared consistency checks for the integration tests.
#![allow(dead_code)]

use hdg_mesh::{CellType, Mesh, NO_CELL};

/// Sum of the cell measures.
pub fn total_measure(mesh: &Mesh) -> f64 {
    (0..mesh.n_cells()).map(|c| mesh.cell_measure(c)).sum()
}

/// Number of boundary faces with each tag `0..=max_tag` (index 0: interior faces).
pub fn tag_counts(mesh: &Mesh, max_tag: u32) -> Vec<usize> {
    let mut counts = vec![0; max_tag as usize + 1];
    for f in 0..mesh.n_faces() {
        counts[mesh.boundary_tag(f) as usize] += 1;
    }
    counts
}

/// Checks that cell_faces, face_cells, face_local_index, face_vertices and the orientation codes
/// agree with each other and with the cell connectivity.
pub fn check_consistency(mesh: &Mesh) {
    let ct = mesh.cell_type();
    let fpc = ct.faces_per_cell();
    let mut incidences = vec![0usize; mesh.n_faces()];
    for c in 0..mesh.n_cells() {
        let cv = mesh.cell_vertices(c);
        assert_eq!(cv.len(), ct.vertices_per_cell());
        assert_eq!(mesh.cell_faces(c).len(), fpc);
        for l in 0..fpc {
            let f = mesh.cell_faces(c)[l];
            incidences[f] += 1;
            let local: Vec<usize> = ct.face_vertices(l).iter().map(|&i| cv[i]).collect();
            let mut sorted = local.clone();
            sorted.sort_unstable();
            assert_eq!(mesh.face_vertices(f), &sorted[..], "cell {c} local face {l}");
            assert_eq!(
                mesh.cell_face_orientations(c)[l],
                ct.orientation(&local),
                "cell {c} local face {l}"
            );
            let fc = mesh.face_cells(f);
            let side = if fc[0] == c {
                0
            } else {
                assert_eq!(fc[1], c, "face {f} does not list cell {c}");
                1
            };
            assert_eq!(mesh.face_local_index(f)[side] as usize, l);
        }
    }
    let mut n_boundary = 0;
    for (f, &incidence) in incidences.iter().enumerate() {
        let fv = mesh.face_vertices(f);
        assert!(fv.windows(2).all(|w| w[0] < w[1]), "face {f} not sorted");
        let [c0, c1] = mesh.face_cells(f);
        assert_ne!(c0, NO_CELL);
        if c1 == NO_CELL {
            n_boundary += 1;
            assert!(mesh.is_boundary_face(f));
            assert!(mesh.boundary_tag(f) >= 1);
            assert_eq!(incidence, 1);
        } else {
            assert!(c0 < c1, "face {f}: cells {c0}, {c1} not ascending");
            assert!(!mesh.is_boundary_face(f));
            assert_eq!(mesh.boundary_tag(f), 0);
            assert_eq!(incidence, 2);
        }
        assert!(mesh.face_measure(f) > 0.0);
    }
    assert_eq!(n_boundary, mesh.n_boundary_faces());
    for c in 0..mesh.n_cells() {
        assert!(mesh.cell_measure(c) > 0.0, "cell {c}");
    }
}

/// For triangles: every interior edge is met with different orientation codes by its two cells
/// (positively oriented cells traverse a shared edge in opposite directions).
pub fn check_opposite_edge_orientations(mesh: &Mesh) {
    assert_eq!(mesh.cell_type(), CellType::Triangle);
    for f in 0..mesh.n_faces() {
        let [c0, c1] = mesh.face_cells(f);
        if c1 == NO_CELL {
            continue;
        }
        let [l0, l1] = mesh.face_local_index(f);
        let o0 = mesh.cell_face_orientations(c0)[l0 as usize];
        let o1 = mesh.cell_face_orientations(c1)[l1 as usize];
        assert_ne!(o0, o1, "face {f}: cells {c0}, {c1} share orientation {o0}");
    }
}

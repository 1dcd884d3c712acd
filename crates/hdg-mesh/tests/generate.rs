//! Structured generators and perturbation.
mod common;

use approx::assert_relative_eq;
use common::{check_consistency, check_opposite_edge_orientations, tag_counts, total_measure};
use hdg_mesh::{
    box_mesh, perturb, rectangle, unit_cube, unit_square, CellType, Diagonal, Mesh, MeshError,
    TAG_BOTTOM, TAG_LEFT, TAG_RIGHT, TAG_TOP, TAG_X0,
};
use proptest::prelude::*;

const DIAGONALS: [Diagonal; 3] = [Diagonal::Right, Diagonal::Left, Diagonal::Alternating];

fn face_centroid(mesh: &Mesh, f: usize) -> [f64; 2] {
    let fv = mesh.face_vertices(f);
    let (a, b) = (mesh.vertex(fv[0]), mesh.vertex(fv[1]));
    [0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1])]
}

/// Checks the boundary tags of a rectangle mesh against the face centroids.
fn check_rectangle_tags(mesh: &Mesh, x: [f64; 2], y: [f64; 2]) {
    for f in 0..mesh.n_faces() {
        let [cx, cy] = face_centroid(mesh, f);
        let expected = if !mesh.is_boundary_face(f) {
            0
        } else if cy == y[0] {
            TAG_BOTTOM
        } else if cx == x[1] {
            TAG_RIGHT
        } else if cy == y[1] {
            TAG_TOP
        } else {
            assert_eq!(cx, x[0], "boundary face {f} at ({cx}, {cy}) on no side");
            TAG_LEFT
        };
        assert_eq!(mesh.boundary_tag(f), expected, "face {f} at ({cx}, {cy})");
        // Interior faces are not on the boundary lines.
        if expected == 0 {
            let on_side = cx == x[0] || cx == x[1] || cy == y[0] || cy == y[1];
            assert!(!on_side, "interior face {f} on the boundary");
        }
    }
}

#[test]
fn unit_square_counts_areas_tags_orientations() {
    for diagonal in DIAGONALS {
        for n in [1, 2, 3, 7] {
            let mesh = unit_square(n, diagonal).unwrap();
            assert_eq!(mesh.cell_type(), CellType::Triangle);
            assert_eq!(mesh.n_vertices(), (n + 1) * (n + 1));
            assert_eq!(mesh.n_cells(), 2 * n * n);
            assert_eq!(mesh.n_faces(), 3 * n * n + 2 * n);
            assert_eq!(mesh.n_boundary_faces(), 4 * n);
            assert_eq!(
                tag_counts(&mesh, 4),
                vec![3 * n * n - 2 * n, n, n, n, n],
                "{diagonal:?} n = {n}"
            );
            assert_relative_eq!(total_measure(&mesh), 1.0, epsilon = 1e-14);
            for c in 0..mesh.n_cells() {
                assert_relative_eq!(
                    mesh.cell_measure(c),
                    0.5 / (n * n) as f64,
                    max_relative = 1e-12
                );
            }
            assert_relative_eq!(mesh.h_max(), 2f64.sqrt() / n as f64, max_relative = 1e-14);
            check_rectangle_tags(&mesh, [0.0, 1.0], [0.0, 1.0]);
            check_consistency(&mesh);
            check_opposite_edge_orientations(&mesh);
        }
    }
}

#[test]
fn diagonals_have_the_documented_direction() {
    // One square: the shared (interior) face is the diagonal.
    let diag = |d| {
        let mesh = unit_square(1, d).unwrap();
        let f = (0..mesh.n_faces()).find(|&f| !mesh.is_boundary_face(f)).unwrap();
        let fv = mesh.face_vertices(f);
        (mesh.vertex(fv[0]).to_vec(), mesh.vertex(fv[1]).to_vec())
    };
    assert_eq!(diag(Diagonal::Right), (vec![0.0, 0.0], vec![1.0, 1.0]));
    assert_eq!(diag(Diagonal::Left), (vec![1.0, 0.0], vec![0.0, 1.0]));
    // Alternating: square (0, 0) Right, square (1, 0) Left.
    let mesh = rectangle(2, 1, [0.0, 2.0], [0.0, 1.0], Diagonal::Alternating).unwrap();
    let mut diagonals: Vec<[f64; 2]> = (0..mesh.n_faces())
        .filter(|&f| !mesh.is_boundary_face(f) && mesh.face_measure(f) > 1.1)
        .map(|f| {
            let fv = mesh.face_vertices(f);
            let (a, b) = (mesh.vertex(fv[0]), mesh.vertex(fv[1]));
            [(b[0] - a[0]) * (b[1] - a[1]), a[0] + b[0]]
        })
        .collect();
    diagonals.sort_by(|a, b| a[1].partial_cmp(&b[1]).unwrap());
    // Slope sign +1 (Right) in the left square, -1 (Left) in the right square.
    assert_eq!(diagonals, vec![[1.0, 1.0], [-1.0, 3.0]]);
}

#[test]
fn rectangle_general_box() {
    let (x, y) = ([-1.0, 2.0], [0.5, 1.5]);
    for diagonal in DIAGONALS {
        let mesh = rectangle(5, 3, x, y, diagonal).unwrap();
        assert_eq!(mesh.n_cells(), 30);
        assert_eq!(mesh.n_faces(), 3 * 15 + 5 + 3);
        assert_eq!(tag_counts(&mesh, 4), vec![3 * 15 - 5 - 3, 5, 3, 5, 3]);
        assert_relative_eq!(total_measure(&mesh), 3.0, epsilon = 1e-13);
        check_rectangle_tags(&mesh, x, y);
        check_consistency(&mesh);
        check_opposite_edge_orientations(&mesh);
        let boundary_length: f64 = (0..mesh.n_faces())
            .filter(|&f| mesh.is_boundary_face(f))
            .map(|f| mesh.face_measure(f))
            .sum();
        assert_relative_eq!(boundary_length, 8.0, epsilon = 1e-13);
    }
}

#[test]
fn generator_parameter_errors() {
    let invalid = |r: Result<Mesh, MeshError>| matches!(r, Err(MeshError::InvalidParameter(_)));
    assert!(invalid(unit_square(0, Diagonal::Right)));
    assert!(invalid(rectangle(0, 3, [0.0, 1.0], [0.0, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(3, 0, [0.0, 1.0], [0.0, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(3, 3, [1.0, 1.0], [0.0, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(3, 3, [0.0, 1.0], [2.0, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(3, 3, [0.0, f64::NAN], [0.0, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(3, 3, [0.0, 1.0], [f64::NEG_INFINITY, 1.0], Diagonal::Left)));
    assert!(invalid(rectangle(usize::MAX, 3, [0.0, 1.0], [0.0, 1.0], Diagonal::Left)));
    let mesh = unit_square(2, Diagonal::Right).unwrap();
    assert!(invalid(perturb(&mesh, -0.1, 0)));
    assert!(invalid(perturb(&mesh, 0.41, 0)));
    assert!(invalid(perturb(&mesh, f64::NAN, 0)));
}

fn boundary_vertices(mesh: &Mesh) -> Vec<bool> {
    let mut on = vec![false; mesh.n_vertices()];
    for f in 0..mesh.n_faces() {
        if mesh.is_boundary_face(f) {
            for &v in mesh.face_vertices(f) {
                on[v] = true;
            }
        }
    }
    on
}

/// Checks that `p` is a valid perturbation of `mesh`: same topology and tags, boundary fixed,
/// cells valid (and still accepted by `Mesh::new`), same total measure.
fn check_perturbed(mesh: &Mesh, p: &Mesh, amplitude: f64) {
    assert_eq!(p.n_faces(), mesh.n_faces());
    for c in 0..mesh.n_cells() {
        assert_eq!(p.cell_vertices(c), mesh.cell_vertices(c));
        assert_eq!(p.cell_faces(c), mesh.cell_faces(c));
        assert_eq!(p.cell_face_orientations(c), mesh.cell_face_orientations(c));
        assert!(p.cell_measure(c) >= 0.2 * mesh.cell_measure(c) * (1.0 - 1e-12), "cell {c}");
    }
    for f in 0..mesh.n_faces() {
        assert_eq!(p.face_cells(f), mesh.face_cells(f));
        assert_eq!(p.boundary_tag(f), mesh.boundary_tag(f));
    }
    let on = boundary_vertices(mesh);
    for (v, &on_boundary) in on.iter().enumerate() {
        if on_boundary {
            assert_eq!(p.vertex(v), mesh.vertex(v), "boundary vertex {v} moved");
        } else {
            // At most amplitude * (shortest edge at v) per coordinate; the shortest edge is at
            // most h_max.
            for k in 0..mesh.dim() {
                assert!((p.vertex(v)[k] - mesh.vertex(v)[k]).abs() <= amplitude * mesh.h_max());
            }
        }
    }
    let rebuilt = Mesh::new(
        mesh.cell_type(),
        p.vertices().to_vec(),
        (0..p.n_cells()).flat_map(|c| p.cell_vertices(c).to_vec()).collect(),
        |_| 1,
    )
    .expect("perturbed mesh validates");
    assert_relative_eq!(total_measure(&rebuilt), total_measure(mesh), epsilon = 1e-12);
    check_consistency(p);
}

#[test]
fn perturb_is_deterministic_and_moves_interior_vertices() {
    for diagonal in DIAGONALS {
        let mesh = unit_square(8, diagonal).unwrap();
        let a = perturb(&mesh, 0.3, 42).unwrap();
        let b = perturb(&mesh, 0.3, 42).unwrap();
        let c = perturb(&mesh, 0.3, 43).unwrap();
        assert_eq!(a.vertices(), b.vertices());
        assert_ne!(a.vertices(), c.vertices());
        check_perturbed(&mesh, &a, 0.3);
        check_perturbed(&mesh, &c, 0.3);
        let on = boundary_vertices(&mesh);
        let n_interior = on.iter().filter(|&&b| !b).count();
        assert_eq!(n_interior, 49);
        let moved =
            (0..mesh.n_vertices()).filter(|&v| !on[v] && a.vertex(v) != mesh.vertex(v)).count();
        assert_eq!(moved, n_interior, "every interior vertex should move");
        assert_relative_eq!(total_measure(&a), 1.0, epsilon = 1e-13);
        // Amplitude 0 changes nothing.
        assert_eq!(perturb(&mesh, 0.0, 1).unwrap().vertices(), mesh.vertices());
    }
}

#[test]
fn perturb_keeps_cells_valid_at_maximal_amplitude() {
    // Repeated maximal perturbations stress the shrinking safeguard.
    let mut mesh = unit_square(10, Diagonal::Alternating).unwrap();
    for seed in 0..10 {
        let p = perturb(&mesh, 0.4, seed).unwrap();
        check_perturbed(&mesh, &p, 0.4);
        mesh = p;
    }
    assert_relative_eq!(total_measure(&mesh), 1.0, epsilon = 1e-12);
}

#[test]
fn perturb_works_on_tetrahedra() {
    // A cube of 6 Kuhn cells has no interior vertex; add one by splitting into a star around the
    // centre: 12 boundary triangles coned to the centre vertex 8.
    let mut vertices = Vec::new();
    for v in 0..8usize {
        vertices.extend([(v & 1) as f64, ((v >> 1) & 1) as f64, ((v >> 2) & 1) as f64]);
    }
    vertices.extend([0.5, 0.5, 0.5]);
    // Each cube face as two triangles, listed with outward normals.
    let quads = [
        [0, 2, 3, 1], // z = 0, normal -z
        [4, 5, 7, 6], // z = 1
        [0, 1, 5, 4], // y = 0
        [2, 6, 7, 3], // y = 1
        [0, 4, 6, 2], // x = 0
        [1, 3, 7, 5], // x = 1
    ];
    let mut cells = Vec::new();
    for q in quads {
        // Outward triangle (a, b, c) plus the interior apex: (apex, a, b, c) is positive when
        // (a, b, c) is counter-clockwise seen from outside.
        for t in [[q[0], q[1], q[2]], [q[0], q[2], q[3]]] {
            cells.extend([8, t[0], t[1], t[2]]);
        }
    }
    let mesh = Mesh::new(CellType::Tetrahedron, vertices, cells, |_| 1).unwrap();
    assert_eq!(mesh.n_cells(), 12);
    assert_eq!(mesh.n_boundary_faces(), 12);
    assert_eq!(mesh.n_faces(), 12 + 18);
    let p = perturb(&mesh, 0.4, 7).unwrap();
    assert_ne!(p.vertex(8), mesh.vertex(8));
    assert_eq!(&p.vertices()[..24], &mesh.vertices()[..24]);
    let total: f64 = (0..p.n_cells()).map(|c| p.cell_measure(c)).sum();
    assert_relative_eq!(total, 1.0, epsilon = 1e-14);
    assert!((0..p.n_cells()).all(|c| p.cell_measure(c) > 0.0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn perturbed_meshes_validate(
        n in 1usize..12,
        seed in any::<u64>(),
        amplitude in 0.0f64..0.4,
        d in 0usize..3,
    ) {
        let mesh = unit_square(n, DIAGONALS[d]).unwrap();
        let p = perturb(&mesh, amplitude, seed).unwrap();
        check_perturbed(&mesh, &p, amplitude);
        prop_assert!((total_measure(&p) - 1.0).abs() < 1e-12);
        prop_assert!((0..p.n_cells()).all(|c| p.cell_measure(c) > 0.0));
    }
}

/// Timing of a large build (several million cells): `cargo test --release -- --ignored`.
#[test]
#[ignore]
fn large_unit_square_builds() {
    let start = std::time::Instant::now();
    let mesh = unit_square(1500, Diagonal::Alternating).unwrap();
    let built = start.elapsed();
    assert_eq!(mesh.n_cells(), 2 * 1500 * 1500);
    assert_eq!(mesh.n_faces(), 3 * 1500 * 1500 + 2 * 1500);
    let p = perturb(&mesh, 0.3, 1).unwrap();
    let perturbed = start.elapsed() - built;
    assert_eq!(p.n_faces(), mesh.n_faces());
    let r = mesh.renumber_vertices(&(0..mesh.n_vertices()).rev().collect::<Vec<_>>()).unwrap();
    assert_eq!(r.n_boundary_faces(), 4 * 1500);
    eprintln!("4.5M cells: build {built:?}, perturb {perturbed:?}, total {:?}", start.elapsed());
}

/// Counts, volumes, tags and consistency (each interior face shared by exactly two cells, so
/// the Kuhn split of neighbouring boxes matches face to face).
#[test]
fn unit_cube_counts_volumes_tags_and_conformity() {
    for n in [1usize, 2, 3, 5] {
        let mesh = unit_cube(n).unwrap();
        assert_eq!(mesh.cell_type(), CellType::Tetrahedron);
        assert_eq!(mesh.n_cells(), 6 * n * n * n);
        assert_eq!(mesh.n_vertices(), (n + 1).pow(3));
        // 12 n^2 boundary triangles; every interior face is shared by two cells.
        assert_eq!(mesh.n_boundary_faces(), 12 * n * n);
        assert_eq!(mesh.n_faces(), (4 * mesh.n_cells() + 12 * n * n) / 2);
        check_consistency(&mesh);
        let volume = 1.0 / (6 * n * n * n) as f64;
        for c in 0..mesh.n_cells() {
            assert_relative_eq!(mesh.cell_measure(c), volume, max_relative = 1e-12);
        }
        assert_relative_eq!(total_measure(&mesh), 1.0, epsilon = 1e-12);
        let counts = tag_counts(&mesh, 6);
        assert_eq!(&counts[1..], &[2 * n * n; 6], "n = {n}");
        // Each tagged face lies on its side of the cube.
        for f in (0..mesh.n_faces()).filter(|&f| mesh.is_boundary_face(f)) {
            let tag = mesh.boundary_tag(f);
            let d = ((tag - TAG_X0) / 2) as usize;
            let side = [0.0, 1.0][((tag - TAG_X0) % 2) as usize];
            for &v in mesh.face_vertices(f) {
                assert_eq!(mesh.vertex(v)[d], side, "face {f} tag {tag}");
            }
        }
    }
}

#[test]
fn box_mesh_general_bounds_and_errors() {
    let mesh = box_mesh([2, 3, 1], [-1.0, 1.0], [0.0, 3.0], [2.0, 2.5]).unwrap();
    assert_eq!(mesh.n_cells(), 36);
    check_consistency(&mesh);
    assert_relative_eq!(total_measure(&mesh), 2.0 * 3.0 * 0.5, epsilon = 1e-12);
    assert_eq!(&tag_counts(&mesh, 6)[1..], &[6, 6, 4, 4, 12, 12]);
    for bad in [
        box_mesh([0, 1, 1], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]),
        box_mesh([1, 1, 1], [1.0, 1.0], [0.0, 1.0], [0.0, 1.0]),
        box_mesh([1, 1, 1], [0.0, 1.0], [0.0, f64::NAN], [0.0, 1.0]),
        box_mesh([usize::MAX / 2, 4, 4], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]),
        unit_cube(0),
    ] {
        assert!(matches!(bad, Err(MeshError::InvalidParameter(_))), "{bad:?}");
    }
}

#[test]
fn perturbed_cube_keeps_cells_valid() {
    let mesh = unit_cube(4).unwrap();
    let p = perturb(&mesh, 0.3, 11).unwrap();
    check_perturbed(&mesh, &p, 0.3);
    check_consistency(&p);
    assert_relative_eq!(total_measure(&p), 1.0, epsilon = 1e-12);
    let moved = (0..p.n_vertices()).filter(|&v| p.vertex(v) != mesh.vertex(v)).count();
    assert_eq!(moved, 27, "every interior vertex of a 4^3 grid moves");
}

/// Random vertex renumbering makes cells meet their faces in all 6 orientations (the structured
/// numbering uses few), and the mesh stays consistent.
#[test]
fn renumbered_cube_meets_faces_in_all_six_orientations() {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mesh = unit_cube(3).unwrap();
    let mut perm: Vec<usize> = (0..mesh.n_vertices()).collect();
    perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(5));
    let r = mesh.renumber_vertices(&perm).unwrap();
    check_consistency(&r);
    let mut seen = [0usize; 6];
    for c in 0..r.n_cells() {
        for &o in r.cell_face_orientations(c) {
            seen[o as usize] += 1;
        }
    }
    assert!(seen.iter().all(|&s| s > 0), "orientation counts {seen:?}");
}

//! Mesh construction, validation errors, renumbering and tetrahedra.
mod common;

use approx::assert_relative_eq;
use common::{check_consistency, check_opposite_edge_orientations, tag_counts, total_measure};
use hdg_mesh::{perturb, unit_square, CellType, Diagonal, Mesh, MeshError, NO_CELL};

fn tri(vertices: Vec<f64>, cells: Vec<usize>) -> Result<Mesh, MeshError> {
    Mesh::new(CellType::Triangle, vertices, cells, |_| 1)
}

/// The unit square as two triangles.
fn two_triangles() -> (Vec<f64>, Vec<usize>) {
    (vec![0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0], vec![0, 1, 2, 0, 2, 3])
}

#[test]
fn two_triangles_faces_and_numbering() {
    let (v, c) = two_triangles();
    let mesh = tri(v, c).unwrap();
    assert_eq!(mesh.n_faces(), 5);
    assert_eq!(mesh.n_boundary_faces(), 4);
    // First appearance: cell 0 local faces 0, 1, 2 = edges {1,2}, {0,2}, {0,1}; then cell 1
    // local face 0 = {2,3}, local face 1 = {0,2} (shared), local face 2 = {0,3}.
    assert_eq!(mesh.face_vertices(0), &[1, 2]);
    assert_eq!(mesh.face_vertices(1), &[0, 2]);
    assert_eq!(mesh.face_vertices(2), &[0, 1]);
    assert_eq!(mesh.face_vertices(3), &[2, 3]);
    assert_eq!(mesh.face_vertices(4), &[0, 3]);
    assert_eq!(mesh.cell_faces(1), &[3, 4, 1]);
    assert_eq!(mesh.face_cells(1), [0, 1]);
    assert_eq!(mesh.face_local_index(1), [1, 2]);
    assert_eq!(mesh.face_cells(0), [0, NO_CELL]);
    // Cell 0 local face 1 is [2, 0] (reversed), cell 1 local face 2 is [0, 2] (canonical).
    assert_eq!(mesh.cell_face_orientations(0)[1], 1);
    assert_eq!(mesh.cell_face_orientations(1)[2], 0);
    assert_relative_eq!(mesh.face_measure(1), 2f64.sqrt(), epsilon = 1e-15);
    assert_relative_eq!(mesh.h_max(), 2f64.sqrt(), epsilon = 1e-15);
    assert_relative_eq!(total_measure(&mesh), 1.0, epsilon = 1e-15);
    assert_eq!(mesh.dim(), 2);
    assert_eq!(mesh.n_vertices(), 4);
    assert_eq!(mesh.vertex(2), &[1.0, 1.0]);
    assert_eq!(mesh.vertices().len(), 8);
    check_consistency(&mesh);
    check_opposite_edge_orientations(&mesh);
}

#[test]
fn boundary_tag_zero_is_clamped_to_one_and_centroids_passed() {
    let (v, c) = two_triangles();
    let mesh = Mesh::new(CellType::Triangle, v, c, |p| {
        // Bottom edge midpoint (0.5, 0) -> 7, everything else -> 0 (clamped to 1).
        if p == [0.5, 0.0] {
            7
        } else {
            0
        }
    })
    .unwrap();
    assert_eq!(tag_counts(&mesh, 7), vec![1, 3, 0, 0, 0, 0, 0, 1]);
}

#[test]
fn degenerate_cell_is_rejected_with_its_index() {
    // Cell 1 has three collinear vertices.
    let v = vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 2.0, 0.0];
    let err = tri(v, vec![0, 1, 2, 0, 1, 3]).unwrap_err();
    match err {
        MeshError::NonPositiveMeasure { cell, vertices, .. } => {
            assert_eq!(cell, 1);
            assert_eq!(vertices, vec![0, 1, 3]);
        }
        e => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn every_bad_cell_is_counted_and_the_first_ten_named() {
    // 12 degenerate triangles: three consecutive points of a line each.
    let v: Vec<f64> = (0..14).flat_map(|i| [i as f64, 0.0]).collect();
    let cells: Vec<usize> = (0..12).flat_map(|i| [i, i + 1, i + 2]).collect();
    let err = tri(v, cells).unwrap_err();
    let message = err.to_string();
    match err {
        MeshError::NonPositiveMeasure { cell, total, more_cells, .. } => {
            assert_eq!((cell, total), (0, 12));
            assert_eq!(more_cells, (1..10).collect::<Vec<_>>());
        }
        e => panic!("unexpected error {e:?}"),
    }
    assert!(message.contains("12 such cells in all") && message.contains(", ..."), "{message}");
}

#[test]
fn nearly_degenerate_cell_is_rejected() {
    let v = vec![0.0, 0.0, 1.0, 0.0, 0.5, 1e-15];
    assert!(matches!(tri(v, vec![0, 1, 2]), Err(MeshError::NonPositiveMeasure { cell: 0, .. })));
    // Tiny but well-shaped cells are fine.
    let v = vec![0.0, 0.0, 1e-9, 0.0, 0.0, 1e-9];
    assert!(tri(v, vec![0, 1, 2]).is_ok());
}

/// A clockwise cell is flipped (its last two vertices swapped) and counted, as a mesh file's
/// are; the mesh is the one given counter-clockwise.
#[test]
fn clockwise_cell_is_flipped_and_counted() {
    let (v, _) = two_triangles();
    let mesh = tri(v.clone(), vec![0, 1, 2, 0, 3, 2]).unwrap();
    assert_eq!(mesh.flipped_cells(), 1);
    assert_eq!(mesh.cell_vertices(1), &[0, 2, 3]);
    assert_relative_eq!(mesh.cell_measure(1), 0.5, epsilon = 1e-15);
    let counter_clockwise = tri(v, vec![0, 1, 2, 0, 2, 3]).unwrap();
    assert_eq!(counter_clockwise.flipped_cells(), 0);
    assert_eq!(mesh.cells(), counter_clockwise.cells());
    assert_eq!(mesh.n_faces(), counter_clockwise.n_faces());
    check_consistency(&mesh);
    // Renumbering keeps the count of the mesh as given.
    assert_eq!(mesh.renumber_cells(&[1, 0]).unwrap().flipped_cells(), 1);
}

#[test]
fn three_cells_on_one_edge_are_non_manifold() {
    // Edge {0, 1} shared by three triangles (cells 0, 1 and 2; cell 1 lies below the edge).
    let v = vec![0.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.5, -1.0, 0.5, 2.0];
    let err = tri(v, vec![0, 1, 2, 1, 0, 3, 0, 1, 4]).unwrap_err();
    match err {
        MeshError::NonManifoldFace { vertices, cells } => {
            assert_eq!(vertices, vec![0, 1]);
            assert_eq!(cells, vec![0, 1, 2]);
        }
        e => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn out_of_range_vertex_names_the_cell() {
    let (v, _) = two_triangles();
    assert_eq!(
        tri(v, vec![0, 1, 2, 0, 2, 4]).unwrap_err(),
        MeshError::VertexOutOfRange { cell: 1, vertex: 4, n_vertices: 4 }
    );
}

#[test]
fn repeated_vertex_is_rejected() {
    let (v, _) = two_triangles();
    assert_eq!(
        tri(v, vec![0, 1, 2, 0, 2, 2]).unwrap_err(),
        MeshError::RepeatedVertex { cell: 1, vertex: 2 }
    );
}

#[test]
fn bad_array_lengths_are_rejected() {
    let (v, c) = two_triangles();
    let mut short_v = v.clone();
    short_v.pop();
    assert!(matches!(
        tri(short_v, c.clone()),
        Err(MeshError::BadArrayLength { what: "vertices", len: 7, multiple: 2 })
    ));
    let mut short_c = c;
    short_c.pop();
    assert!(matches!(
        tri(v, short_c),
        Err(MeshError::BadArrayLength { what: "cells", len: 5, multiple: 3 })
    ));
}

#[test]
fn empty_mesh_is_rejected() {
    let (v, _) = two_triangles();
    assert_eq!(tri(v, vec![]).unwrap_err(), MeshError::Empty);
}

#[test]
fn nan_coordinate_is_rejected() {
    let (mut v, c) = two_triangles();
    v[5] = f64::NAN;
    assert_eq!(tri(v, c).unwrap_err(), MeshError::NonFiniteCoordinate { vertex: 2 });
    let (mut v, c) = two_triangles();
    v[6] = f64::INFINITY;
    assert_eq!(tri(v, c).unwrap_err(), MeshError::NonFiniteCoordinate { vertex: 3 });
}

/// A deterministic pseudo-random permutation of `0..n`.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    for i in (1..n).rev() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let j = ((s >> 33) as usize) % (i + 1);
        p.swap(i, j);
    }
    p
}

#[test]
fn renumber_cells_keeps_geometry_faces_and_tags() {
    for diagonal in [Diagonal::Right, Diagonal::Left, Diagonal::Alternating] {
        let mesh = perturb(&unit_square(6, diagonal).unwrap(), 0.3, 5).unwrap();
        let perm = shuffled(mesh.n_cells(), 11);
        let new = mesh.renumber_cells(&perm).unwrap();
        check_consistency(&new);
        check_opposite_edge_orientations(&new);
        assert_eq!(new.n_cells(), mesh.n_cells());
        assert_eq!(new.n_faces(), mesh.n_faces());
        assert_eq!(new.n_boundary_faces(), mesh.n_boundary_faces());
        assert_relative_eq!(total_measure(&new), 1.0, epsilon = 1e-13);
        assert_eq!(tag_counts(&new, 4), tag_counts(&mesh, 4));
        for (i, &p) in perm.iter().enumerate() {
            assert_eq!(new.cell_vertices(i), mesh.cell_vertices(p));
            assert_eq!(new.cell_measure(i), mesh.cell_measure(p));
            assert_eq!(new.cell_face_orientations(i), mesh.cell_face_orientations(p));
            // Each face keeps its tag.
            for l in 0..3 {
                assert_eq!(
                    new.boundary_tag(new.cell_faces(i)[l]),
                    mesh.boundary_tag(mesh.cell_faces(p)[l])
                );
            }
        }
    }
}

#[test]
fn renumber_vertices_keeps_geometry_faces_and_tags() {
    for diagonal in [Diagonal::Right, Diagonal::Left, Diagonal::Alternating] {
        let mesh = perturb(&unit_square(6, diagonal).unwrap(), 0.3, 9).unwrap();
        let perm = shuffled(mesh.n_vertices(), 3);
        let new = mesh.renumber_vertices(&perm).unwrap();
        check_consistency(&new);
        check_opposite_edge_orientations(&new);
        assert_eq!(new.n_faces(), mesh.n_faces());
        assert_eq!(new.n_boundary_faces(), mesh.n_boundary_faces());
        assert_relative_eq!(total_measure(&new), 1.0, epsilon = 1e-13);
        assert_eq!(tag_counts(&new, 4), tag_counts(&mesh, 4));
        for (v, &p) in perm.iter().enumerate() {
            assert_eq!(new.vertex(p), mesh.vertex(v));
        }
        let mut changed = 0;
        for c in 0..mesh.n_cells() {
            let expected: Vec<usize> = mesh.cell_vertices(c).iter().map(|&v| perm[v]).collect();
            assert_eq!(new.cell_vertices(c), &expected[..]);
            assert_eq!(new.cell_measure(c), mesh.cell_measure(c));
            for l in 0..3 {
                let local: Vec<usize> =
                    CellType::Triangle.face_vertices(l).iter().map(|&i| expected[i]).collect();
                assert_eq!(
                    new.cell_face_orientations(c)[l],
                    CellType::Triangle.orientation(&local)
                );
                if new.cell_face_orientations(c)[l] != mesh.cell_face_orientations(c)[l] {
                    changed += 1;
                }
                assert_eq!(
                    new.boundary_tag(new.cell_faces(c)[l]),
                    mesh.boundary_tag(mesh.cell_faces(c)[l])
                );
            }
        }
        assert!(changed > 0, "a shuffle should change some orientation codes");
    }
}

#[test]
fn renumbering_rejects_non_permutations() {
    let mesh = unit_square(2, Diagonal::Right).unwrap();
    assert!(matches!(mesh.renumber_cells(&[0, 1, 2]), Err(MeshError::InvalidParameter(_))));
    assert!(matches!(
        mesh.renumber_cells(&[0, 1, 2, 3, 4, 4, 6, 7]),
        Err(MeshError::InvalidParameter(_))
    ));
    assert!(matches!(
        mesh.renumber_vertices(&[0, 1, 2, 3, 4, 5, 6, 7, 9]),
        Err(MeshError::InvalidParameter(_))
    ));
    let identity: Vec<usize> = (0..9).collect();
    let same = mesh.renumber_vertices(&identity).unwrap();
    for f in 0..mesh.n_faces() {
        assert_eq!(same.face_vertices(f), mesh.face_vertices(f));
        assert_eq!(same.boundary_tag(f), mesh.boundary_tag(f));
    }
}

/// The unit cube cut into 6 tetrahedra around its main diagonal (Kuhn triangulation), each
/// positively oriented.
fn kuhn_cube() -> (Vec<f64>, Vec<usize>) {
    let mut vertices = Vec::new();
    for v in 0..8usize {
        vertices.extend([(v & 1) as f64, ((v >> 1) & 1) as f64, ((v >> 2) & 1) as f64]);
    }
    let mut cells = Vec::new();
    // Path 0 -> e_a -> e_a + e_b -> (1, 1, 1): the volume has the sign of the axis permutation.
    for (a, b, even) in
        [(0, 1, true), (0, 2, false), (1, 0, false), (1, 2, true), (2, 0, true), (2, 1, false)]
    {
        let p1 = 1 << a;
        let p2 = p1 | (1 << b);
        let tet = [0, p1, p2, 7];
        if even {
            cells.extend(tet);
        } else {
            cells.extend([tet[0], tet[2], tet[1], tet[3]]);
        }
    }
    (vertices, cells)
}

#[test]
fn tetrahedra_two_sharing_a_face() {
    let vertices = vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0];
    // Tet 1 is on the other side of face {1, 2, 3}.
    let mesh =
        Mesh::new(CellType::Tetrahedron, vertices, vec![0, 1, 2, 3, 4, 2, 1, 3], |_| 1).unwrap();
    assert_eq!(mesh.dim(), 3);
    assert_eq!(mesh.n_faces(), 7);
    assert_eq!(mesh.n_boundary_faces(), 6);
    assert_relative_eq!(mesh.cell_measure(0), 1.0 / 6.0, epsilon = 1e-15);
    assert_relative_eq!(mesh.cell_measure(1), 1.0 / 3.0, epsilon = 1e-15);
    assert_eq!(mesh.face_vertices(0), &[1, 2, 3]);
    assert_eq!(mesh.face_cells(0), [0, 1]);
    assert_eq!(mesh.face_local_index(0), [0, 0]);
    assert_relative_eq!(mesh.face_measure(0), 3f64.sqrt() / 2.0, epsilon = 1e-15);
    check_consistency(&mesh);

    // The mirrored (negatively oriented) tet is flipped and counted.
    let vertices = vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let mirrored = Mesh::new(CellType::Tetrahedron, vertices, vec![0, 2, 1, 3], |_| 1).unwrap();
    assert_eq!(mirrored.flipped_cells(), 1);
    assert_eq!(mirrored.cell_vertices(0), &[0, 2, 3, 1]);
    assert_relative_eq!(mirrored.cell_measure(0), 1.0 / 6.0, epsilon = 1e-15);
}

#[test]
fn tetrahedra_cube_into_six() {
    let (vertices, cells) = kuhn_cube();
    let mesh = Mesh::new(CellType::Tetrahedron, vertices, cells, |p| {
        // Tag by the axis of the cube face: 1 + axis.
        (0..3)
            .find(|&k| p[k].abs() < 1e-12 || (p[k] - 1.0).abs() < 1e-12)
            .map_or(0, |k| k as u32 + 1)
    })
    .unwrap();
    assert_eq!(mesh.n_cells(), 6);
    assert_eq!(mesh.n_faces(), 18);
    assert_eq!(mesh.n_boundary_faces(), 12);
    assert_eq!(tag_counts(&mesh, 3), vec![6, 4, 4, 4]);
    assert_relative_eq!(total_measure(&mesh), 1.0, epsilon = 1e-14);
    assert_relative_eq!(mesh.h_max(), 3f64.sqrt(), epsilon = 1e-15);
    let boundary_area: f64 = (0..mesh.n_faces())
        .filter(|&f| mesh.is_boundary_face(f))
        .map(|f| mesh.face_measure(f))
        .sum();
    assert_relative_eq!(boundary_area, 6.0, epsilon = 1e-14);
    check_consistency(&mesh);
    // Renumbering works in 3D as well.
    let new = mesh.renumber_vertices(&[7, 6, 5, 4, 3, 2, 1, 0]).unwrap();
    check_consistency(&new);
    assert_eq!(tag_counts(&new, 3), vec![6, 4, 4, 4]);
    let new = mesh.renumber_cells(&[5, 4, 3, 2, 1, 0]).unwrap();
    check_consistency(&new);
    assert_eq!(tag_counts(&new, 3), vec![6, 4, 4, 4]);
}

//! Partitions and mesh parts: every cell and face owned exactly once, owned faces complete in
//! their part, faces and orientations as in the whole mesh, boundary and interface tags.
mod common;

use std::collections::HashSet;

use approx::assert_relative_eq;
use common::check_consistency;
use hdg_mesh::{
    unit_cube, unit_square, Diagonal, Mesh, MeshError, MeshPart, Partition, INTERFACE_TAG, NO_CELL,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The meshes the partitions are tested on: triangles with each diagonal kind, tetrahedra.
fn meshes() -> Vec<(&'static str, Mesh)> {
    vec![
        ("square 6 right", unit_square(6, Diagonal::Right).unwrap()),
        ("square 7 alternating", unit_square(7, Diagonal::Alternating).unwrap()),
        ("cube 3", unit_cube(3).unwrap()),
    ]
}

/// Every cell in a part drawn at random (fixed seed).
fn random_partition(n_cells: usize, n_parts: usize, seed: u64) -> Partition {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Partition::new((0..n_cells).map(|_| rng.gen_range(0..n_parts as u32)).collect(), n_parts)
        .unwrap()
}

/// Edge cut counted from scratch: pairs of cells that share a face's worth of vertices.
fn brute_force_edge_cut(mesh: &Mesh, partition: &Partition) -> usize {
    let vpf = mesh.cell_type().vertices_per_face();
    let mut cut = 0;
    for a in 0..mesh.n_cells() {
        for b in a + 1..mesh.n_cells() {
            let shared =
                mesh.cell_vertices(a).iter().filter(|v| mesh.cell_vertices(b).contains(v)).count();
            if shared == vpf && partition.part_of(a) != partition.part_of(b) {
                cut += 1;
            }
        }
    }
    cut
}

/// Extracts every part and checks everything a part promises against the whole mesh.
fn check_partition(name: &str, mesh: &Mesh, partition: &Partition) -> Vec<MeshPart> {
    let n_parts = partition.n_parts();
    let parts: Vec<MeshPart> =
        (0..n_parts).map(|r| MeshPart::new(mesh, partition, r).unwrap()).collect();
    let mut cell_owned = vec![0usize; mesh.n_cells()];
    let mut face_owned = vec![0usize; mesh.n_faces()];
    let counts = partition.cells_per_part();
    for (rank, part) in parts.iter().enumerate() {
        let what = format!("{name}, {n_parts} parts, rank {rank}");
        assert_eq!(part.rank, rank);
        assert_eq!(part.owned_cells, counts[rank], "{what}");
        assert_eq!(part.ghost_cells(), part.global_cells.len() - part.owned_cells);
        let Some(local) = &part.mesh else {
            // A rank with no cells has nothing at all.
            assert_eq!(part.owned_cells, 0, "{what}");
            assert!(part.global_cells.is_empty() && part.global_vertices.is_empty());
            assert!(part.global_faces.is_empty() && part.face_owner.is_empty());
            assert_eq!(part.owned_faces(), 0);
            continue;
        };
        check_consistency(local);
        assert_eq!(local.flipped_cells(), 0);
        assert_eq!(local.n_cells(), part.global_cells.len(), "{what}");
        assert_eq!(local.n_vertices(), part.global_vertices.len(), "{what}");
        assert_eq!(local.n_faces(), part.global_faces.len(), "{what}");
        assert_eq!(local.n_faces(), part.face_owner.len(), "{what}");

        // Cells: owned first, then ghosts, each in increasing global order, none twice.
        let (owned, ghosts) = part.global_cells.split_at(part.owned_cells);
        assert!(owned.windows(2).all(|w| w[0] < w[1]), "{what}");
        assert!(ghosts.windows(2).all(|w| w[0] < w[1]), "{what}");
        for &c in owned {
            assert_eq!(partition.part_of(c), rank, "{what}: owned cell {c}");
            cell_owned[c] += 1;
        }
        // Ghosts: exactly the cells of other parts across the faces this rank owns.
        let mut expected_ghosts: Vec<usize> = (0..mesh.n_faces())
            .filter(|&f| partition.face_owner(mesh, f) == rank)
            .map(|f| mesh.face_cells(f)[1])
            .filter(|&c| c != NO_CELL && partition.part_of(c) != rank)
            .collect();
        expected_ghosts.sort_unstable();
        expected_ghosts.dedup();
        assert_eq!(ghosts, &expected_ghosts[..], "{what}");
        let in_part: HashSet<usize> = part.global_cells.iter().copied().collect();

        // Vertices: strictly increasing, exactly those of the part's cells, same coordinates.
        assert!(part.global_vertices.windows(2).all(|w| w[0] < w[1]), "{what}");
        let used: HashSet<usize> =
            part.global_cells.iter().flat_map(|&c| mesh.cell_vertices(c)).copied().collect();
        assert_eq!(used.len(), part.global_vertices.len(), "{what}");
        for (lv, &gv) in part.global_vertices.iter().enumerate() {
            assert!(used.contains(&gv));
            assert_eq!(local.vertex(lv), mesh.vertex(gv), "{what}: vertex {lv}");
        }

        // Cells: same vertices in the same local order, same measure, same faces and
        // orientation codes.
        for (lc, &gc) in part.global_cells.iter().enumerate() {
            let mapped: Vec<usize> =
                local.cell_vertices(lc).iter().map(|&v| part.global_vertices[v]).collect();
            assert_eq!(mapped, mesh.cell_vertices(gc), "{what}: cell {lc}");
            assert_relative_eq!(
                local.cell_measure(lc),
                mesh.cell_measure(gc),
                max_relative = 1e-14
            );
            assert_eq!(
                local.cell_face_orientations(lc),
                mesh.cell_face_orientations(gc),
                "{what}: cell {lc}"
            );
            let faces: Vec<usize> =
                local.cell_faces(lc).iter().map(|&f| part.global_faces[f]).collect();
            assert_eq!(faces, mesh.cell_faces(gc), "{what}: cell {lc}");
        }

        // Faces: distinct, same vertices, owner, tags.
        let distinct: HashSet<usize> = part.global_faces.iter().copied().collect();
        assert_eq!(distinct.len(), part.global_faces.len(), "{what}");
        let mut n_interface = 0;
        let mut n_owned = 0;
        for (lf, &gf) in part.global_faces.iter().enumerate() {
            let mapped: Vec<usize> =
                local.face_vertices(lf).iter().map(|&v| part.global_vertices[v]).collect();
            assert_eq!(mapped, mesh.face_vertices(gf), "{what}: face {lf}");
            assert_relative_eq!(
                local.face_measure(lf),
                mesh.face_measure(gf),
                max_relative = 1e-14
            );
            let owner = partition.face_owner(mesh, gf);
            assert_eq!(part.face_owner[lf] as usize, owner, "{what}: face {lf}");
            let [g0, g1] = mesh.face_cells(gf);
            let cells_in_part =
                [g0, g1].iter().filter(|&&c| c != NO_CELL && in_part.contains(&c)).count();
            if owner == rank {
                n_owned += 1;
                face_owned[gf] += 1;
                // Both cells of an owned face are in the part, and the face has as many cells
                // locally as globally.
                assert_eq!(cells_in_part, if g1 == NO_CELL { 1 } else { 2 }, "{what}: face {lf}");
                assert_eq!(local.is_boundary_face(lf), mesh.is_boundary_face(gf));
            }
            let local_cells: Vec<usize> = local
                .face_cells(lf)
                .iter()
                .filter(|&&c| c != NO_CELL)
                .map(|&c| part.global_cells[c])
                .collect();
            assert_eq!(local_cells.len(), cells_in_part, "{what}: face {lf}");
            assert!(local_cells.iter().all(|c| [g0, g1].contains(c)));
            // Tags: the global tag on the whole mesh's boundary, INTERFACE_TAG where the other
            // cell lies outside the part, 0 inside.
            let tag = local.boundary_tag(lf);
            if mesh.is_boundary_face(gf) {
                assert_eq!(tag, mesh.boundary_tag(gf), "{what}: face {lf}");
                assert!(tag >= 1 && tag != INTERFACE_TAG);
            } else if cells_in_part == 1 {
                assert_eq!(tag, INTERFACE_TAG, "{what}: face {lf}");
                assert_ne!(owner, rank, "{what}: an owned face lacks a cell");
                n_interface += 1;
            } else {
                assert_eq!(tag, 0, "{what}: face {lf}");
            }
        }
        assert_eq!(part.owned_faces(), n_owned, "{what}");
        // Interface faces counted from the global side: faces of the part's cells whose other
        // cell is outside it.
        let mut expected_interface = HashSet::new();
        for &c in &part.global_cells {
            for &f in mesh.cell_faces(c) {
                let [a, b] = mesh.face_cells(f);
                let other = if a == c { b } else { a };
                if other != NO_CELL && !in_part.contains(&other) {
                    expected_interface.insert(f);
                }
            }
        }
        assert_eq!(n_interface, expected_interface.len(), "{what}");
        let tagged = local.boundary_tag_counts();
        let interface_count =
            tagged.iter().find(|&&(t, _)| t == INTERFACE_TAG).map_or(0, |&(_, n)| n);
        assert_eq!(interface_count, expected_interface.len(), "{what}");
    }
    assert!(
        cell_owned.iter().all(|&n| n == 1),
        "{name}, {n_parts} parts: cells owned {cell_owned:?}"
    );
    assert!(
        face_owned.iter().all(|&n| n == 1),
        "{name}, {n_parts} parts: faces owned {face_owned:?}"
    );
    assert_eq!(partition.edge_cut(mesh), brute_force_edge_cut(mesh, partition), "{name}");
    parts
}

#[test]
fn block_partitions() {
    for (name, mesh) in meshes() {
        for n_parts in 1..=5 {
            let partition = Partition::blocks(mesh.n_cells(), n_parts);
            let parts = check_partition(name, &mesh, &partition);
            if n_parts > 1 {
                assert!(parts.iter().all(|p| p.mesh.is_some()));
                assert!(partition.edge_cut(&mesh) > 0);
            }
        }
    }
}

#[test]
fn random_partitions() {
    for (name, mesh) in meshes() {
        for n_parts in 1..=5 {
            for seed in 0..3 {
                let partition = random_partition(mesh.n_cells(), n_parts, seed);
                check_partition(name, &mesh, &partition);
            }
        }
    }
}

#[test]
fn single_part_is_the_whole_mesh() {
    for (name, mesh) in meshes() {
        let parts = check_partition(name, &mesh, &Partition::single(mesh.n_cells()));
        let part = &parts[0];
        let local = part.mesh.as_ref().unwrap();
        assert_eq!(part.owned_cells, mesh.n_cells());
        assert_eq!(part.ghost_cells(), 0);
        // Same cells in the same order: same face numbering, no interface.
        assert_eq!(part.global_faces, (0..mesh.n_faces()).collect::<Vec<_>>());
        assert_eq!(part.owned_faces(), mesh.n_faces());
        assert_eq!(local.boundary_tag_counts(), mesh.boundary_tag_counts());
    }
}

#[test]
fn empty_parts() {
    let mesh = unit_square(3, Diagonal::Left).unwrap();
    // Parts 1 and 3 own nothing.
    let parts = (0..mesh.n_cells()).map(|c| if c % 3 == 0 { 2 } else { 0 }).collect();
    let partition = Partition::new(parts, 4).unwrap();
    let extracted = check_partition("square 3 left", &mesh, &partition);
    for rank in [1, 3] {
        assert!(extracted[rank].mesh.is_none());
        assert_eq!(extracted[rank].owned_cells, 0);
        assert_eq!(extracted[rank].ghost_cells(), 0);
    }
    assert!(extracted[0].mesh.is_some() && extracted[2].mesh.is_some());
    // More parts than cells.
    let mesh = unit_square(1, Diagonal::Right).unwrap();
    let extracted = check_partition("square 1", &mesh, &Partition::blocks(2, 5));
    assert_eq!(extracted.iter().filter(|p| p.mesh.is_none()).count(), 3);
}

#[test]
fn ghost_cells_of_a_two_triangle_split() {
    // Cell 0 in part 1, cell 1 in part 0: the shared face's first cell is cell 0, so part 1
    // owns it and holds cell 1 as a ghost, while part 0 sees the face as an interface.
    let mesh = unit_square(1, Diagonal::Right).unwrap();
    let partition = Partition::new(vec![1, 0], 2).unwrap();
    let parts = check_partition("two triangles", &mesh, &partition);
    assert_eq!(parts[1].global_cells, vec![0, 1]);
    assert_eq!((parts[1].owned_cells, parts[1].ghost_cells()), (1, 1));
    assert_eq!(parts[1].owned_faces(), 3);
    assert_eq!(parts[0].global_cells, vec![1]);
    assert_eq!(parts[0].ghost_cells(), 0);
    assert_eq!(parts[0].owned_faces(), 2);
    let local = parts[0].mesh.as_ref().unwrap();
    assert_eq!(local.boundary_tag_counts().last(), Some(&(INTERFACE_TAG, 1)));
}

#[test]
fn mesh_part_errors() {
    let mesh = unit_square(2, Diagonal::Right).unwrap();
    let e = MeshPart::new(&mesh, &Partition::single(3), 0).unwrap_err();
    assert!(matches!(e, MeshError::InvalidParameter(_)), "{e}");
    let e = MeshPart::new(&mesh, &Partition::blocks(mesh.n_cells(), 2), 2).unwrap_err();
    assert!(matches!(&e, MeshError::InvalidParameter(m) if m.contains("rank 2")), "{e}");
}

#[cfg(feature = "metis")]
mod metis {
    use super::*;

    #[test]
    fn metis_partitions() {
        for (name, mesh) in meshes() {
            for n_parts in 1..=5 {
                let partition = Partition::metis(&mesh, n_parts).unwrap();
                assert_eq!(partition.n_parts(), n_parts);
                check_partition(name, &mesh, &partition);
            }
        }
    }

    /// Whether the cells of `part` are connected through interior faces.
    fn part_is_connected(mesh: &Mesh, partition: &Partition, part: usize) -> bool {
        let cells: Vec<usize> =
            (0..mesh.n_cells()).filter(|&c| partition.part_of(c) == part).collect();
        let mut seen = HashSet::from([cells[0]]);
        let mut stack = vec![cells[0]];
        while let Some(c) = stack.pop() {
            for &f in mesh.cell_faces(c) {
                for d in mesh.face_cells(f) {
                    if d != NO_CELL && partition.part_of(d) == part && seen.insert(d) {
                        stack.push(d);
                    }
                }
            }
        }
        seen.len() == cells.len()
    }

    #[test]
    fn metis_cuts_far_fewer_faces_than_a_random_partition() {
        let mesh = unit_square(32, Diagonal::Right).unwrap();
        let a = Partition::metis(&mesh, 4).unwrap();
        let b = Partition::metis(&mesh, 4).unwrap();
        assert_eq!(a, b, "METIS is seeded: the same partition every time");
        let metis_cut = a.edge_cut(&mesh);
        let random_cut = random_partition(mesh.n_cells(), 4, 1).edge_cut(&mesh);
        // Ideal: two cuts across the square, about 2 * 2 * 32 faces; random: three quarters
        // of the interior faces.
        assert!(metis_cut * 10 < random_cut, "METIS cut {metis_cut}, random {random_cut}");
        assert!(metis_cut <= 200, "METIS cut {metis_cut}");
        // Balanced within METIS's tolerance, and each part in one piece.
        let counts = a.cells_per_part();
        let ideal = mesh.n_cells() / 4;
        assert!(
            counts.iter().all(|&n| n * 100 <= ideal * 104 && n * 100 >= ideal * 90),
            "{counts:?}"
        );
        for p in 0..4 {
            assert!(part_is_connected(&mesh, &a, p), "part {p} of {counts:?}");
        }
        check_partition("square 32", &mesh, &a);
    }

    #[test]
    fn metis_is_deterministic_across_threads() {
        // METIS's random generator is process-wide: without serialisation, concurrent calls
        // mix their random streams and give different partitions for the same seed.
        let mesh = unit_square(24, Diagonal::Alternating).unwrap();
        let reference = Partition::metis(&mesh, 5).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..8).map(|_| s.spawn(|| Partition::metis(&mesh, 5).unwrap())).collect();
            for h in handles {
                assert_eq!(h.join().unwrap(), reference);
            }
        });
    }

    #[test]
    fn metis_on_a_cube() {
        let mesh = unit_cube(6).unwrap();
        let partition = Partition::metis(&mesh, 8).unwrap();
        let random_cut = random_partition(mesh.n_cells(), 8, 2).edge_cut(&mesh);
        assert!(partition.edge_cut(&mesh) * 3 < random_cut);
        assert!(partition.cells_per_part().iter().all(|&n| n > 0));
    }

    #[test]
    fn metis_parameters() {
        let mesh = unit_square(1, Diagonal::Right).unwrap();
        assert_eq!(Partition::metis(&mesh, 1).unwrap(), Partition::single(2));
        let e = Partition::metis(&mesh, 3).unwrap_err();
        assert!(
            matches!(&e, MeshError::InvalidParameter(m) if m.contains("2 cells") && m.contains("3 parts")),
            "{e}"
        );
        assert!(matches!(Partition::metis(&mesh, 0), Err(MeshError::InvalidParameter(_))));
        let two = Partition::metis(&mesh, 2).unwrap();
        assert_eq!(two.cells_per_part(), vec![1, 1]);
    }

    #[test]
    fn metis_on_a_disconnected_mesh() {
        // Two separate squares: the contiguity option must be left off, not fail.
        let vertices = vec![
            0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, //
            3.0, 0.0, 4.0, 0.0, 4.0, 1.0, 3.0, 1.0,
        ];
        let cells = vec![0, 1, 2, 0, 2, 3, 4, 5, 6, 4, 6, 7];
        let mesh = Mesh::new(hdg_mesh::CellType::Triangle, vertices, cells, |_| 1).unwrap();
        let partition = Partition::metis(&mesh, 2).unwrap();
        assert_eq!(partition.cells_per_part(), vec![2, 2]);
        check_partition("two squares", &mesh, &partition);
    }
}

//! The Gmsh reader on the meshes shipped under `examples/meshes/`, against what Gmsh itself
//! reports about them (`gmsh-counts.json`, written by `scripts/make-meshes.py` through Gmsh's
//! API, not by this library), and on broken files.
use std::path::{Path, PathBuf};

use hdg_mesh::gmsh::{self, UNTAGGED};
use hdg_mesh::MeshError;
use proptest::prelude::*;
use serde_json::Value;

fn meshes() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/meshes")
}

fn counts() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(meshes().join("gmsh-counts.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap().as_object().unwrap().clone()
}

#[test]
fn every_shipped_mesh_reads_with_the_counts_and_tags_gmsh_reports() {
    let mut checked = 0;
    for (file, expected) in counts() {
        if file.starts_with("square-crack") {
            continue;
        }
        let read = gmsh::read(&meshes().join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mesh = &read.mesh;
        let n = |key: &str| expected[key].as_u64().unwrap() as usize;
        assert_eq!(mesh.n_vertices(), n("nodes"), "{file}: nodes");
        assert_eq!(mesh.n_cells(), n("cells"), "{file}: cells");
        assert_eq!(read.flipped_cells, n("negatively_oriented_cells"), "{file}: flipped");
        let measure: f64 = (0..mesh.n_cells()).map(|c| mesh.cell_measure(c)).sum();
        let gmsh_measure = expected["measure"].as_f64().unwrap();
        assert!((measure - gmsh_measure).abs() <= 1e-12 * gmsh_measure, "{file}: measure");

        // Physical groups: the same tags and names, cells per region as Gmsh counts them.
        let groups = expected["physical_groups"].as_array().unwrap();
        assert_eq!(read.groups.groups.len(), groups.len(), "{file}: groups");
        for g in groups {
            let (dim, tag) = (g["dim"].as_u64().unwrap() as usize, g["tag"].as_u64().unwrap());
            let name = g["name"].as_str().unwrap();
            assert_eq!(read.groups.name(dim, tag as u32), Some(name), "{file}: group {tag}");
            if dim == mesh.dim() {
                let region = read.groups.region(name).unwrap();
                let cells = read.cell_regions.iter().filter(|&&r| r == region).count();
                assert_eq!(cells as u64, g["elements"].as_u64().unwrap(), "{file}: {name}");
            }
        }
        // Boundary faces per group, and none left untagged (every shipped boundary is).
        let by_tag = mesh.boundary_tag_counts();
        let facets = expected["boundary_facets_by_group"].as_object().unwrap();
        for (name, count) in facets {
            let tag = read.groups.boundary_tag(name).unwrap();
            let ours = by_tag.iter().find(|(t, _)| *t == tag).map_or(0, |(_, c)| *c);
            assert_eq!(ours as u64, count.as_u64().unwrap(), "{file}: faces of {name}");
        }
        assert!(by_tag.iter().all(|(t, _)| *t != UNTAGGED), "{file}: {by_tag:?}");
        checked += 1;
    }
    assert_eq!(checked, 12);
}

#[test]
fn the_binary_and_ascii_files_of_one_mesh_read_the_same() {
    let ascii = gmsh::read(&meshes().join("l-shape-1.msh")).unwrap();
    let binary = gmsh::read(&meshes().join("l-shape-1-binary.msh")).unwrap();
    assert_eq!(ascii.mesh.cells(), binary.mesh.cells());
    assert_eq!(ascii.cell_regions, binary.cell_regions);
    assert_eq!(ascii.mesh.boundary_tag_counts(), binary.mesh.boundary_tag_counts());
    for (a, b) in ascii.mesh.vertices().iter().zip(binary.mesh.vertices()) {
        // ASCII prints 16 significant digits.
        assert!((a - b).abs() <= 1e-15, "{a} {b}");
    }
}

#[test]
fn clockwise_cells_are_flipped_and_counted() {
    let read = gmsh::read(&meshes().join("square-clockwise-0.msh")).unwrap();
    assert_eq!(read.flipped_cells, read.mesh.n_cells());
    assert!((0..read.mesh.n_cells()).all(|c| read.mesh.cell_measure(c) > 0.0));
}

#[test]
fn a_cracked_mesh_is_refused_naming_the_duplicated_vertices() {
    let err = gmsh::read(&meshes().join("square-crack-0.msh")).unwrap_err();
    let MeshError::NonConforming { total, shown } = &err else { panic!("{err}") };
    // The 5 nodes inside the crack and their copies, each on the other side's faces.
    assert_eq!(*total, 10, "{err}");
    assert!(shown.iter().all(|n| n.duplicate_of.is_some() && (n.point[1] - 0.5).abs() < 1e-12));
}

#[test]
fn an_unknown_physical_name_is_refused_listing_the_known_ones() {
    let read = gmsh::read(&meshes().join("l-shape-0.msh")).unwrap();
    let message = read.groups.boundary_tag("inlet").unwrap_err().to_string();
    assert!(message.contains("'inlet'") && message.contains("reentrant (1)"), "{message}");
    assert!(read.groups.region("outer").is_err(), "a boundary group is no region");
}

fn file_error(bytes: &[u8]) -> String {
    match gmsh::parse(bytes) {
        Err(MeshError::File(m)) => m,
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn wrong_versions_truncated_files_and_unsupported_elements_are_refused_with_a_message() {
    let ascii = std::fs::read(meshes().join("l-shape-0.msh")).unwrap();
    let text = String::from_utf8(ascii.clone()).unwrap();
    let v22 = text.replacen("4.1 0 8", "2.2 0 8", 1);
    assert!(file_error(v22.as_bytes()).contains("only 4.1"));
    assert!(file_error(b"hello").contains("$MeshFormat"));
    for cut in [ascii.len() / 3, ascii.len() / 2, ascii.len() - 20] {
        assert!(gmsh::parse(&ascii[..cut]).is_err(), "cut at {cut}");
    }
    let binary = std::fs::read(meshes().join("cube-with-hole-0.msh")).unwrap();
    for cut in [200, binary.len() / 2, binary.len() - 30] {
        assert!(gmsh::parse(&binary[..cut]).is_err(), "cut at {cut}");
    }

    // One quadrangle (type 3) and one second-order triangle (type 9).
    let quad = "$MeshFormat\n4.1 0 8\n$EndMeshFormat\n$Nodes\n1 6 1 6\n2 1 0 6\n1\n2\n3\n4\n5\n6\n\
                0 0 0\n1 0 0\n1 1 0\n0 1 0\n0.5 0 0\n0.5 0.5 0\n$EndNodes\n$Elements\n2 2 1 2\n\
                2 1 3 1\n1 1 2 3 4\n2 1 9 1\n2 1 2 3 5 6 4\n$EndElements\n";
    let message = file_error(quad.as_bytes());
    assert!(message.contains("type 3") && message.contains("type 9"), "{message}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Mutated real files (bytes overwritten, cut out or doubled, ASCII and binary) give an
    /// error or a valid mesh, never a panic.
    #[test]
    fn mutated_files_never_panic(
        binary in any::<bool>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>(), 1usize..40), 1..4),
    ) {
        let name = if binary { "cube-with-hole-0.msh" } else { "l-shape-0.msh" };
        let mut bytes = std::fs::read(meshes().join(name)).unwrap();
        for (at, kind, value, len) in edits {
            let i = at.index(bytes.len());
            let end = (i + len).min(bytes.len());
            match kind {
                0 => bytes[i..end].iter_mut().for_each(|b| *b = value),
                1 => { bytes.drain(i..end); }
                _ => { let copy = bytes[i..end].to_vec(); bytes.splice(i..i, copy); }
            }
            if bytes.is_empty() { bytes.push(value); }
        }
        if let Ok(read) = gmsh::parse(&bytes) {
            prop_assert!(read.mesh.n_cells() > 0);
        }
    }
}

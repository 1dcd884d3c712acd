//! hdg::vtu: the written files read back by readers other than the writer (roxmltree and
//! base64 here, meshio in Python) and compared with the solution: points and their
//! place in VTK's Lagrange node order, u_h, q_h and u* at every node, cell data, boundary
//! faces with their tags and orientation, sub-cells, and the refusals.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use hdg::core::CoreError;
use hdg::generate::{self, unit_cube, unit_square};
use hdg::mesh::Diagonal;
use hdg::vtu::{self, CellKind, Options};
use hdg::{Error, Manufactured, Mesh, Problem, Solution, Solver};

/// A file's unstructured grid as a reader gives it.
#[derive(Debug, Default)]
struct Grid {
    points: Vec<[f64; 3]>,
    types: Vec<u8>,
    connectivity: Vec<usize>,
    /// The end of each cell in `connectivity`.
    offsets: Vec<usize>,
    /// Name -> (components, values point-major).
    point_data: BTreeMap<String, (usize, Vec<f64>)>,
    cell_data: BTreeMap<String, Vec<f64>>,
}

impl Grid {
    fn cell(&self, i: usize) -> &[usize] {
        let start = if i == 0 { 0 } else { self.offsets[i - 1] };
        &self.connectivity[start..self.offsets[i]]
    }

    fn point_field(&self, name: &str) -> (usize, &[f64]) {
        let (components, values) =
            self.point_data.get(name).unwrap_or_else(|| panic!("no point data {name}"));
        (*components, values)
    }

    fn cell_field(&self, name: &str) -> &[f64] {
        self.cell_data.get(name).unwrap_or_else(|| panic!("no cell data {name}"))
    }
}

// VTK cell type numbers (vtkCellType.h).
const VTK_LINE: u8 = 3;
const VTK_TRIANGLE: u8 = 5;
const VTK_TETRA: u8 = 10;
const VTK_LAGRANGE_CURVE: u8 = 68;
const VTK_LAGRANGE_TRIANGLE: u8 = 69;
const VTK_LAGRANGE_TETRAHEDRON: u8 = 71;

/// Reads a `.vtu` of binary inline data arrays with roxmltree and base64: another XML parser
/// and base64 decoder than the writer's.
fn read_xml(path: &Path) -> Grid {
    use base64::Engine;
    let text = std::fs::read_to_string(path).expect("the file is readable");
    let document = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "VTKFile");
    assert_eq!(root.attribute("type"), Some("UnstructuredGrid"));
    assert_eq!(root.attribute("byte_order"), Some("LittleEndian"));
    assert_eq!(root.attribute("header_type"), Some("UInt64"));
    assert_eq!(root.attribute("compressor"), None);
    let piece = root.descendants().find(|n| n.has_tag_name("Piece")).expect("a piece");
    let count = |name: &str| piece.attribute(name).unwrap().parse::<usize>().unwrap();
    let (n_points, n_cells) = (count("NumberOfPoints"), count("NumberOfCells"));
    let mut grid = Grid::default();
    for array in piece.descendants().filter(|n| n.has_tag_name("DataArray")) {
        assert_eq!(array.attribute("format"), Some("binary"));
        let text: String = array.text().unwrap_or("").split_whitespace().collect();
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).expect("base64");
        let size = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let data = &bytes[8..];
        assert_eq!(data.len(), size, "the header gives the byte count");
        let values: Vec<f64> = match array.attribute("type").unwrap() {
            "Float64" => {
                data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect()
            }
            "Int64" => data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64)
                .collect(),
            "UInt32" => data
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as f64)
                .collect(),
            "UInt8" => data.iter().map(|&b| b as f64).collect(),
            other => panic!("unexpected data type {other}"),
        };
        let components: usize =
            array.attribute("NumberOfComponents").map_or(1, |c| c.parse().unwrap());
        let name = array.attribute("Name").unwrap_or("").to_string();
        let section = array.parent_element().unwrap().tag_name().name();
        match (section, name.as_str()) {
            ("Points", _) => {
                assert_eq!((components, values.len()), (3, 3 * n_points));
                grid.points = values.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect();
            }
            ("Cells", "connectivity") => {
                grid.connectivity = values.iter().map(|&v| v as usize).collect();
            }
            ("Cells", "offsets") => grid.offsets = values.iter().map(|&v| v as usize).collect(),
            ("Cells", "types") => grid.types = values.iter().map(|&v| v as u8).collect(),
            ("PointData", _) => {
                assert_eq!(values.len(), components * n_points, "{name}");
                grid.point_data.insert(name, (components, values));
            }
            ("CellData", _) => {
                assert_eq!((components, values.len()), (1, n_cells), "{name}");
                grid.cell_data.insert(name, values);
            }
            other => panic!("unexpected data array {other:?}"),
        }
    }
    assert_eq!(grid.types.len(), n_cells);
    grid
}

/// Reads a `.vtu` with meshio through scripts/check-vtu.py.
fn read_meshio(path: &Path) -> Grid {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check-vtu.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg("--json")
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "scripts/check-vtu.py failed (is meshio installed?): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let numbers = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
    };
    let mut grid = Grid {
        points: json["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let p = numbers(p);
                [p[0], p[1], p[2]]
            })
            .collect(),
        types: numbers(&json["types"]).iter().map(|&t| t as u8).collect(),
        connectivity: numbers(&json["connectivity"]).iter().map(|&i| i as usize).collect(),
        offsets: numbers(&json["offsets"]).iter().map(|&i| i as usize).collect(),
        ..Grid::default()
    };
    for (name, data) in json["point_data"].as_object().unwrap() {
        let components = data["components"].as_u64().unwrap() as usize;
        grid.point_data.insert(name.clone(), (components, numbers(&data["values"])));
    }
    for (name, values) in json["cell_data"].as_object().unwrap() {
        grid.cell_data.insert(name.clone(), numbers(values));
    }
    grid
}

/// VTK's number of the point with barycentric index `b` (`b[0]` the weight of vertex 1, `b[1]`
/// of vertex 2, `b[2]` of vertex 0, summing to `n`) in a Lagrange triangle of degree `n`, as
/// vtkHigherOrderTriangle::Index defines it: the corners, the edges (0-1, 1-2, 2-0), then the
/// inner triangle of degree n - 3 recursively.
fn vtk_triangle_index(b: [i64; 3], n: i64) -> usize {
    if n == 0 {
        return 0;
    }
    if b.iter().all(|&x| x > 0) {
        return 3 * n as usize + vtk_triangle_index(b.map(|x| x - 1), n - 3);
    }
    for v in 0..3 {
        if b[(v + 2) % 3] == n {
            return v;
        }
    }
    for e in 0..3 {
        if b[(e + 1) % 3] == 0 {
            return (3 + e as i64 * (n - 1) + b[e] - 1) as usize;
        }
    }
    unreachable!("a point of the boundary is a corner or on an edge")
}

/// VTK's number of the point with barycentric index `b` (`b[0..3]` the weights of vertices
/// 1, 2, 3, `b[3]` that of vertex 0) in a Lagrange tetrahedron of degree `n`, as
/// vtkHigherOrderTetra::Index defines it, with its tables.
fn vtk_tetrahedron_index(b: [i64; 4], n: i64) -> usize {
    const VERTEX_MAX_COORDS: [usize; 4] = [3, 0, 1, 2];
    const EDGE_MIN_COORDS: [[usize; 2]; 6] = [[1, 2], [2, 3], [0, 2], [0, 1], [1, 3], [0, 3]];
    const EDGE_COUNTING_COORD: [usize; 6] = [0, 1, 3, 2, 2, 2];
    const FACE_B_COORDS: [[usize; 3]; 4] = [[0, 2, 3], [2, 0, 1], [2, 1, 3], [1, 0, 3]];
    const FACE_MIN_COORD: [usize; 4] = [1, 3, 0, 2];
    if n == 0 {
        return 0;
    }
    if b.iter().all(|&x| x > 0) {
        return (2 * n * n + 2) as usize + vtk_tetrahedron_index(b.map(|x| x - 1), n - 4);
    }
    for v in 0..4 {
        if b[VERTEX_MAX_COORDS[v]] == n {
            return v;
        }
    }
    for e in 0..6 {
        if b[EDGE_MIN_COORDS[e][0]] == 0 && b[EDGE_MIN_COORDS[e][1]] == 0 {
            return (4 + e as i64 * (n - 1) + b[EDGE_COUNTING_COORD[e]] - 1) as usize;
        }
    }
    for f in 0..4 {
        if b[FACE_MIN_COORD[f]] == 0 {
            let projected = FACE_B_COORDS[f].map(|i| b[i]);
            let before = 4 + 6 * (n - 1) + f as i64 * ((n + 1) * (n + 2) / 2 - 3 * n);
            return (before + vtk_triangle_index(projected, n) as i64 - 3 * n) as usize;
        }
    }
    unreachable!("a point of the boundary is a corner, on an edge or on a face")
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

fn sub3(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dot3(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

/// Vertex `v` of `mesh` with z = 0 in 2D.
fn vertex3(mesh: &Mesh, v: usize) -> [f64; 3] {
    let mut x = [0.0; 3];
    x[..mesh.dim()].copy_from_slice(mesh.vertex(v));
    x
}

/// The coordinates `t` of `x = origin + sum_s t_s e_s` for `d` independent directions `e`
/// (least squares, exact for points of their span), by Cramer's rule on the normal equations.
fn coordinates(origin: [f64; 3], e: &[[f64; 3]], x: [f64; 3]) -> Vec<f64> {
    let r = sub3(x, origin);
    let g: Vec<Vec<f64>> = e.iter().map(|a| e.iter().map(|b| dot3(*a, *b)).collect()).collect();
    let rhs: Vec<f64> = e.iter().map(|a| dot3(*a, r)).collect();
    match e.len() {
        1 => vec![rhs[0] / g[0][0]],
        2 => {
            let det = g[0][0] * g[1][1] - g[0][1] * g[1][0];
            vec![
                (rhs[0] * g[1][1] - g[0][1] * rhs[1]) / det,
                (g[0][0] * rhs[1] - rhs[0] * g[1][0]) / det,
            ]
        }
        3 => {
            let det3 = |m: [[f64; 3]; 3]| dot3(m[0], cross(m[1], m[2]));
            let m = [e[0], e[1], e[2]];
            let det = det3(m);
            (0..3)
                .map(|s| {
                    let mut ms = m;
                    ms[s] = r;
                    det3(ms) / det
                })
                .collect()
        }
        _ => unreachable!(),
    }
}

/// Lattice coordinates (integers) of `t * n`, checking that they are integers.
fn lattice(t: &[f64], n: usize, what: &str) -> Vec<i64> {
    t.iter()
        .map(|&t| {
            let p = t * n as f64;
            assert!(
                (p - p.round()).abs() < 1e-8,
                "{what}: {t:?} is not on the lattice of degree {n}"
            );
            p.round() as i64
        })
        .collect()
}

/// Compares a read-back file with `solution`: every check of the module docs.
fn check(grid: &Grid, solution: &Solution, options: &Options, what: &str) {
    let mesh = solution.mesh();
    let (d, n_cells) = (mesh.dim(), mesh.n_cells());
    let degree = solution.order() + 1;
    let n_nodes = match d {
        2 => (degree + 1) * (degree + 2) / 2,
        _ => (degree + 1) * (degree + 2) * (degree + 3) / 6,
    };
    assert_eq!(grid.points.len(), n_cells * n_nodes, "{what}: points");
    let sub_per_cell = match options.cells {
        CellKind::Lagrange => 1,
        CellKind::Subcells => degree.pow(d as u32),
    };
    let n_volume = n_cells * sub_per_cell;
    let sub_per_face = match options.cells {
        CellKind::Lagrange => 1,
        CellKind::Subcells => degree.pow(d as u32 - 1),
    };
    let n_boundary =
        if options.boundary_faces { mesh.n_boundary_faces() * sub_per_face } else { 0 };
    assert_eq!(grid.types.len(), n_volume + n_boundary, "{what}: cells");
    assert_eq!(grid.offsets.len(), grid.types.len(), "{what}: offsets");

    let (uc, u) = grid.point_field("u_h");
    let (qc, q) = grid.point_field("q_h");
    let (sc, u_star) = grid.point_field("u_star");
    assert_eq!((uc, qc, sc), (1, 3, 1), "{what}: components");
    let owner = grid.cell_field("cell");

    // The points of each mesh cell: the lattice of degree k + 1, where evaluate_in_cell gives
    // the point data.
    for c in 0..n_cells {
        let verts: Vec<[f64; 3]> =
            mesh.cell_vertices(c).iter().map(|&v| vertex3(mesh, v)).collect();
        let edges: Vec<[f64; 3]> = (1..=d).map(|s| sub3(verts[s], verts[0])).collect();
        let mut seen = vec![false; n_nodes];
        for j in 0..n_nodes {
            let x = grid.points[c * n_nodes + j];
            let p = lattice(&coordinates(verts[0], &edges, x), degree, what);
            let rest = degree as i64 - p.iter().sum::<i64>();
            assert!(p.iter().all(|&p| p >= 0) && rest >= 0, "{what}: cell {c} point {j} outside");
            // Where VTK expects this lattice point (only checked for the Lagrange layout, whose
            // nodes the points are).
            let index = match d {
                2 => vtk_triangle_index([p[0], p[1], rest], degree as i64),
                _ => vtk_tetrahedron_index([p[0], p[1], p[2], rest], degree as i64),
            };
            assert_eq!(
                index, j,
                "{what}: cell {c}: the point at lattice {p:?} is VTK's node {index}"
            );
            assert!(!seen[j]);
            seen[j] = true;
            if j <= d {
                for r in 0..3 {
                    assert!(close(x[r], verts[j][r], 1e-14), "{what}: corner {j} of cell {c}");
                }
            }
            let xi: Vec<f64> = p.iter().map(|&p| -1.0 + 2.0 * p as f64 / degree as f64).collect();
            let value = solution.evaluate_in_cell(c, &xi);
            let i = c * n_nodes + j;
            assert!(
                close(u[i], value.u, 1e-12),
                "{what}: u_h at cell {c} node {j}: {} vs {}",
                u[i],
                value.u
            );
            assert!(close(u_star[i], value.u_star, 1e-12), "{what}: u* at cell {c} node {j}");
            for r in 0..3 {
                assert!(
                    close(q[3 * i + r], value.q[r], 1e-12),
                    "{what}: q_h[{r}] at cell {c} node {j}"
                );
            }
            if d == 2 {
                assert_eq!((x[2], q[3 * i + 2]), (0.0, 0.0), "{what}: z in 2D");
            }
        }
    }

    // The volume cells, cell after cell.
    for i in 0..n_volume {
        let c = i / sub_per_cell;
        assert_eq!(owner[i], c as f64, "{what}: cell data `cell`");
        let nodes = grid.cell(i);
        assert!(
            nodes.iter().all(|&p| p / n_nodes == c),
            "{what}: cell {i} uses points of cell {c}"
        );
        match options.cells {
            CellKind::Lagrange => {
                let expected =
                    if d == 2 { VTK_LAGRANGE_TRIANGLE } else { VTK_LAGRANGE_TETRAHEDRON };
                assert_eq!(grid.types[i], expected, "{what}: type");
                assert_eq!(nodes, (c * n_nodes..(c + 1) * n_nodes).collect::<Vec<_>>(), "{what}");
            }
            CellKind::Subcells => {
                assert_eq!(grid.types[i], if d == 2 { VTK_TRIANGLE } else { VTK_TETRA }, "{what}");
                assert_eq!(nodes.len(), d + 1);
            }
        }
    }
    if options.cells == CellKind::Subcells {
        // The sub-cells tile their cell: positive measures adding up to the cell's.
        for c in 0..n_cells {
            let mut total = 0.0;
            for i in c * sub_per_cell..(c + 1) * sub_per_cell {
                let x: Vec<[f64; 3]> = grid.cell(i).iter().map(|&p| grid.points[p]).collect();
                let measure = if d == 2 {
                    cross(sub3(x[1], x[0]), sub3(x[2], x[0]))[2] / 2.0
                } else {
                    dot3(sub3(x[1], x[0]), cross(sub3(x[2], x[0]), sub3(x[3], x[0]))) / 6.0
                };
                assert!(measure > 0.0, "{what}: sub-cell {i} of cell {c} has measure {measure}");
                total += measure;
            }
            assert!(close(total, mesh.cell_measure(c), 1e-12), "{what}: the sub-cells of {c}");
        }
    }

    // Boundary faces: one (Lagrange) or degree^(d-1) (sub-cells) cells per boundary face, in
    // face order, tagged, outward, on the points of their cell that lie on the face.
    if options.boundary_faces {
        let tag = grid.cell_field("boundary_tag");
        assert!(tag[..n_volume].iter().all(|&t| t == 0.0), "{what}: volume cells have tag 0");
        let faces: Vec<usize> = (0..mesh.n_faces()).filter(|&f| mesh.is_boundary_face(f)).collect();
        assert_eq!(faces.len(), mesh.n_boundary_faces());
        for (b, &f) in faces.iter().enumerate() {
            let c = mesh.face_cells(f)[0];
            let fv: Vec<[f64; 3]> =
                mesh.face_vertices(f).iter().map(|&v| vertex3(mesh, v)).collect();
            let centroid = |x: &[[f64; 3]]| {
                let mut m = [0.0; 3];
                for p in x {
                    for r in 0..3 {
                        m[r] += p[r] / x.len() as f64;
                    }
                }
                m
            };
            let cell_centroid = centroid(
                &mesh.cell_vertices(c).iter().map(|&v| vertex3(mesh, v)).collect::<Vec<_>>(),
            );
            let mut area = 0.0;
            for i in n_volume + b * sub_per_face..n_volume + (b + 1) * sub_per_face {
                assert_eq!(tag[i], mesh.boundary_tag(f) as f64, "{what}: tag of face {f}");
                assert_eq!(owner[i], c as f64, "{what}: `cell` of face {f}");
                let nodes = grid.cell(i);
                assert!(nodes.iter().all(|&p| p / n_nodes == c), "{what}: face {f} on its cell");
                let x: Vec<[f64; 3]> = nodes.iter().map(|&p| grid.points[p]).collect();
                // Outward: the normal points away from the cell's centroid.
                let normal = if d == 2 {
                    let t = sub3(x[1], x[0]);
                    [t[1], -t[0], 0.0]
                } else {
                    cross(sub3(x[1], x[0]), sub3(x[2], x[0]))
                };
                let out = dot3(normal, sub3(centroid(&x[..d]), cell_centroid));
                assert!(out > 0.0, "{what}: face {f} is not outward");
                area += dot3(normal, normal).sqrt() / if d == 2 { 1.0 } else { 2.0 };
                match options.cells {
                    CellKind::Lagrange => {
                        let expected =
                            if d == 2 { VTK_LAGRANGE_CURVE } else { VTK_LAGRANGE_TRIANGLE };
                        assert_eq!(grid.types[i], expected, "{what}: face type");
                        // The corners are the face's vertices.
                        for corner in &x[..d] {
                            assert!(
                                fv.iter().any(|v| (0..3).all(|r| close(corner[r], v[r], 1e-14))),
                                "{what}: a corner of face {f} is not one of its vertices"
                            );
                        }
                        // The nodes: the face's lattice in VTK's order.
                        let e: Vec<[f64; 3]> = (1..d).map(|s| sub3(x[s], x[0])).collect();
                        let face_nodes =
                            if d == 2 { degree + 1 } else { (degree + 1) * (degree + 2) / 2 };
                        assert_eq!(x.len(), face_nodes, "{what}: nodes of face {f}");
                        for (j, &xj) in x.iter().enumerate() {
                            let p = lattice(&coordinates(x[0], &e, xj), degree, what);
                            let rest = degree as i64 - p.iter().sum::<i64>();
                            let index = match d {
                                // VTK's Lagrange curve: the two ends, then the inner points
                                // from the first end.
                                2 => match p[0] {
                                    0 => 0,
                                    p if p == degree as i64 => 1,
                                    p => p as usize + 1,
                                },
                                _ => vtk_triangle_index([p[0], p[1], rest], degree as i64),
                            };
                            assert_eq!(index, j, "{what}: node {j} of face {f}");
                            let distance = dot3(sub3(xj, x[0]), normal).abs();
                            assert!(distance < 1e-12, "{what}: node {j} of face {f} off the face");
                        }
                    }
                    CellKind::Subcells => {
                        assert_eq!(grid.types[i], if d == 2 { VTK_LINE } else { VTK_TRIANGLE });
                        assert_eq!(x.len(), d);
                    }
                }
            }
            assert!(
                close(area, mesh.face_measure(f), 1e-12),
                "{what}: the cells of face {f} cover it"
            );
        }
    } else {
        assert!(!grid.cell_data.contains_key("boundary_tag"), "{what}: no boundary tags asked");
    }

    // Per-cell errors: their squares add up to the report's errors (computed by the backend).
    match solution.report().errors {
        Some(errors) => {
            let sum =
                |name: &str| grid.cell_field(name)[..n_volume].iter().map(|e| e * e).sum::<f64>();
            let scale = sub_per_cell as f64; // sub-cells repeat their cell's error
            assert!(close(sum("error_u") / scale, errors.u * errors.u, 1e-10), "{what}: error_u");
            assert!(
                close(sum("error_u_star") / scale, errors.u_star.powi(2), 1e-10),
                "{what}: error_u_star"
            );
            if errors.q.is_nan() {
                assert!(!grid.cell_data.contains_key("error_q"), "{what}: no gradient, no error_q");
            } else {
                assert!(
                    close(sum("error_q") / scale, errors.q * errors.q, 1e-10),
                    "{what}: error_q"
                );
            }
            for name in ["error_u", "error_u_star"] {
                let e = grid.cell_field(name);
                for i in n_volume..grid.types.len() {
                    let c = owner[i] as usize;
                    assert_eq!(e[i], e[c * sub_per_cell], "{what}: {name} of a face is its cell's");
                }
            }
        }
        None => {
            assert!(!grid.cell_data.keys().any(|k| k.starts_with("error")), "{what}: no errors")
        }
    }
    match &options.regions {
        Some(regions) => {
            let region = grid.cell_field("region");
            for (i, &c) in owner.iter().enumerate() {
                assert_eq!(region[i], regions[c as usize] as f64, "{what}: region of cell {i}");
            }
        }
        None => assert!(!grid.cell_data.contains_key("region"), "{what}: no regions asked"),
    }
}

/// The manufactured sine solution at order `k` on a perturbed unit square (n = 3) or cube
/// (n = 2): not the affine images of one another, so that the test sees the cell maps.
fn solve(dim: usize, k: usize) -> Solution {
    let mesh = match dim {
        2 => unit_square(3, Diagonal::Right).unwrap(),
        _ => unit_cube(2).unwrap(),
    };
    let mesh = generate::perturb(&mesh, 0.2, 7).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    Solver::new(mesh, problem).order(k).solve().expect("the solve converges")
}

fn temp_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hdg-vtu-test-{}-{name}.vtu", std::process::id()))
}

/// Writes, reads back with `read`, checks, removes the file.
fn round_trip(solution: &Solution, options: &Options, name: &str, read: fn(&Path) -> Grid) {
    let path = temp_file(name);
    vtu::write(solution, &path, options).expect("written");
    let grid = read(&path);
    if std::env::var_os("HDG_KEEP_VTU").is_none() {
        std::fs::remove_file(&path).ok();
    }
    check(&grid, solution, options, name);
}

#[test]
fn xml_reader_reads_back_lagrange_cells_in_2d_and_3d() {
    for (dim, k) in [(2, 1), (2, 3), (3, 1), (3, 3)] {
        let solution = solve(dim, k);
        round_trip(&solution, &Options::default(), &format!("xml-{dim}d-k{k}"), read_xml);
    }
}

#[test]
#[ignore = "needs python3 with meshio (.ci/run installs it and runs the ignored VTU tests)"]
fn meshio_reads_back_lagrange_cells_in_2d_and_3d() {
    for (dim, k) in [(2, 1), (2, 3), (3, 1), (3, 3)] {
        let solution = solve(dim, k);
        round_trip(&solution, &Options::default(), &format!("meshio-{dim}d-k{k}"), read_meshio);
    }
    let solution = solve(3, 2);
    let options = Options { cells: CellKind::Subcells, ..Options::default() };
    round_trip(&solution, &options, "meshio-subcells", read_meshio);
}

/// Degrees 2 to 7 (k = 1 to 6): the triangles' and tetrahedra's recursion into inner
/// triangles and tetrahedra (degree >= 6 and >= 4, 8 for two levels of faces), each point
/// where vtkHigherOrderTriangle/Tetra::Index puts it (the check above).
#[test]
fn lagrange_nodes_are_where_vtk_numbers_them_up_to_degree_7() {
    for k in 1..=6 {
        for dim in [2, 3] {
            let mesh = match dim {
                2 => unit_square(1, Diagonal::Right).unwrap(),
                _ => unit_cube(1).unwrap(),
            };
            let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
            let solution = Solver::new(mesh, problem).order(k).solve().unwrap();
            round_trip(&solution, &Options::default(), &format!("order-{dim}d-k{k}"), read_xml);
        }
    }
}

/// The quadratic (k = 1) layouts spelled out: VTK's Lagrange cells of degree 2 number their
/// nodes like VTK_QUADRATIC_TRIANGLE and VTK_QUADRATIC_TETRA (corners, then the midpoints of
/// edges 0-1, 1-2, 2-0 (0-3, 1-3, 2-3)); and the cubic triangle (k = 2): two points per edge
/// from its first corner, then the centroid.
#[test]
fn low_degree_layouts_are_vtks_quadratic_and_cubic_cells() {
    let reference = |solution: &Solution, path: &Path| -> Vec<Vec<f64>> {
        vtu::write(solution, path, &Options::default()).unwrap();
        let grid = read_xml(path);
        std::fs::remove_file(path).ok();
        // Cell 0's points in reference coordinates (its vertices are (0,0), (1,0), (1,1) for
        // the square's first triangle: map them back).
        let mesh = solution.mesh();
        let verts: Vec<[f64; 3]> =
            mesh.cell_vertices(0).iter().map(|&v| vertex3(mesh, v)).collect();
        let edges: Vec<[f64; 3]> = (1..=mesh.dim()).map(|s| sub3(verts[s], verts[0])).collect();
        grid.cell(0).iter().map(|&p| coordinates(verts[0], &edges, grid.points[p])).collect()
    };
    let same = |a: &[Vec<f64>], b: &[&[f64]]| {
        assert_eq!(a.len(), b.len());
        for (a, b) in a.iter().zip(b) {
            assert!(a.iter().zip(b.iter()).all(|(a, b)| (a - b).abs() < 1e-14), "{a:?} vs {b:?}");
        }
    };
    let problem = || Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let square = unit_square(1, Diagonal::Right).unwrap();
    let cube = unit_cube(1).unwrap();

    let s = Solver::new(square.clone(), problem()).order(1).solve().unwrap();
    let h = 0.5;
    same(
        &reference(&s, &temp_file("quadratic-triangle")),
        &[&[0.0, 0.0], &[1.0, 0.0], &[0.0, 1.0], &[h, 0.0], &[h, h], &[0.0, h]],
    );
    let s = Solver::new(cube, problem()).order(1).solve().unwrap();
    same(
        &reference(&s, &temp_file("quadratic-tetra")),
        &[
            &[0.0, 0.0, 0.0],
            &[1.0, 0.0, 0.0],
            &[0.0, 1.0, 0.0],
            &[0.0, 0.0, 1.0],
            &[h, 0.0, 0.0],
            &[h, h, 0.0],
            &[0.0, h, 0.0],
            &[0.0, 0.0, h],
            &[h, 0.0, h],
            &[0.0, h, h],
        ],
    );
    let s = Solver::new(square, problem()).order(2).solve().unwrap();
    let (a, b) = (1.0 / 3.0, 2.0 / 3.0);
    same(
        &reference(&s, &temp_file("cubic-triangle")),
        &[
            &[0.0, 0.0],
            &[1.0, 0.0],
            &[0.0, 1.0],
            &[a, 0.0],
            &[b, 0.0],
            &[b, a],
            &[a, b],
            &[0.0, b],
            &[0.0, a],
            &[a, a],
        ],
    );
}

#[test]
fn subcells_tile_every_cell_and_face() {
    for (dim, k) in [(2, 1), (2, 3), (3, 1), (3, 3)] {
        let solution = solve(dim, k);
        let options = Options { cells: CellKind::Subcells, ..Options::default() };
        round_trip(&solution, &options, &format!("subcells-{dim}d-k{k}"), read_xml);
    }
}

#[test]
fn boundary_faces_carry_their_tags_or_are_left_out() {
    for dim in [2, 3] {
        let solution = solve(dim, 2);
        // The generated meshes tag each side differently: 4 (6) tags.
        let tags: std::collections::BTreeSet<u32> = (0..solution.mesh().n_faces())
            .filter(|&f| solution.mesh().is_boundary_face(f))
            .map(|f| solution.mesh().boundary_tag(f))
            .collect();
        assert_eq!(tags.len(), 2 * dim);
        round_trip(&solution, &Options::default(), &format!("tags-{dim}d"), read_xml);
        let without = Options { boundary_faces: false, ..Options::default() };
        round_trip(&solution, &without, &format!("no-tags-{dim}d"), read_xml);
    }
}

#[test]
fn per_cell_errors_follow_the_exact_solution_given() {
    // Exact u without gradient: error_u and error_u_star, no error_q.
    let u = |x: &[f64]| x[0].exp() * x[1].sin();
    let mesh = unit_square(3, Diagonal::Right).unwrap();
    let problem = Problem::builder().source(|_| 0.0).dirichlet(u).exact(u).build();
    let solution = Solver::new(mesh.clone(), problem).order(2).solve().unwrap();
    assert!(solution.report().errors.unwrap().q.is_nan());
    round_trip(&solution, &Options::default(), "value-only", read_xml);
    // No exact solution: no error arrays.
    let problem = Problem::builder().source(|_| 0.0).dirichlet(u).build();
    let solution = Solver::new(mesh, problem).order(2).solve().unwrap();
    assert!(solution.report().errors.is_none());
    round_trip(&solution, &Options::default(), "no-exact", read_xml);
}

#[test]
fn regions_are_written_per_cell_and_a_wrong_length_is_refused() {
    let solution = solve(2, 1);
    let n = solution.mesh().n_cells();
    let regions: Vec<u32> = (0..n as u32).map(|c| 10 + c % 3).collect();
    let options = Options { regions: Some(regions), ..Options::default() };
    round_trip(&solution, &options, "regions", read_xml);

    let path = temp_file("wrong-regions");
    let options = Options { regions: Some(vec![1; n - 1]), ..Options::default() };
    let error = vtu::write(&solution, &path, &options).unwrap_err();
    assert!(
        matches!(error, Error::Core(CoreError::InvalidParameter { name: "regions", .. })),
        "{error}"
    );
    assert!(!path.exists(), "nothing is written");
}

#[test]
fn an_unwritable_path_is_an_output_error() {
    let solution = solve(2, 1);
    let path = std::env::temp_dir()
        .join(format!("hdg-vtu-no-such-directory-{}", std::process::id()))
        .join("solution.vtu");
    let error = vtu::write(&solution, &path, &Options::default()).unwrap_err();
    match error {
        Error::Output { path: p, reason } => {
            assert_eq!(p, path);
            assert!(!reason.is_empty());
        }
        other => panic!("expected Error::Output, got {other}"),
    }
}

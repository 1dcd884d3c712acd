//! VTK XML unstructured-grid output (`.vtu`) of a [`Solution`], for ParaView.
//!
//! # What the file holds
//!
//! The fields are discontinuous between cells, so every cell gets its own points: the
//! equispaced lattice of degree `k + 1` on the cell (`(k + 2)(k + 3)/2` points per triangle,
//! `(k + 2)(k + 3)(k + 4)/6` per tetrahedron), cell after cell, in VTK's Lagrange node order.
//! Point `j` of mesh cell `c` is point `c * n_nodes + j` of the file.
//!
//! * Cells ([`CellKind::Lagrange`], the default): one VTK Lagrange cell of degree `k + 1` per
//!   mesh cell (`VTK_LAGRANGE_TRIANGLE` = 69, `VTK_LAGRANGE_TETRAHEDRON` = 71), its corners
//!   first, in the mesh cell's vertex order, then the edge, face and interior nodes as VTK
//!   numbers them. u* has degree `k + 1` and u_h, q_h degree `k`, so ParaView interpolates all
//!   three exactly. [`CellKind::Subcells`]: the same points, joined by linear cells
//!   (`VTK_TRIANGLE`, `VTK_TETRA`), `(k + 1)^d` per mesh cell, for readers without Lagrange
//!   cells; the fields are then drawn piecewise linear between the points.
//! * Point data: `u_h` (scalar), `q_h` (3 components, 0 in z in 2D), `u_star` (scalar). Points
//!   of 2D meshes have z = 0.
//! * Cell data: `cell` (the mesh cell's number); when the problem has an exact solution the
//!   cell's L2 errors `error_u`, `error_q` (absent when the exact solution has no gradient) and
//!   `error_u_star` (the square roots of [`Solution::cell_errors`]); `region` when
//!   [`Options::regions`] is given; `boundary_tag` when [`Options::boundary_faces`] is on.
//! * Boundary faces ([`Options::boundary_faces`], on by default): after the volume cells, one
//!   cell per boundary face, in face order, of dimension `d - 1` (Lagrange: a
//!   `VTK_LAGRANGE_CURVE` (68) or `VTK_LAGRANGE_TRIANGLE` of degree `k + 1`; sub-cells:
//!   `VTK_LINE`, `VTK_TRIANGLE`), made of the points of the face's cell that lie on the face,
//!   so they carry that cell's values and draw exactly like its face. They are oriented with
//!   the outward normal (3D: counter-clockwise seen from outside; 2D: the domain on the left).
//!   Their `boundary_tag` is the face's tag (at least 1); volume cells have `boundary_tag` 0.
//!   Their other cell data (`cell`, errors, `region`) are those of the face's cell. Boundary
//!   tags live on cells of their own rather than in a second file so that one file holds the
//!   whole picture and a `Threshold` on `boundary_tag` separates the two kinds of cells.
//!
//! A run over MPI ranks writes one such file per rank, of the cells it owns, and a `.pvtu`
//! that lists them (`hdg::distributed::output::write_vtu`, feature `distributed`).
//!
//! # Format
//!
//! VTK XML format version 1.0 (read by VTK 8.1 and later, ParaView 5.5 and later, and meshio,
//! which takes versions 0.1 and 1.0 only), little-endian `binary` inline data arrays (base64
//! of a `UInt64` byte count followed by the values, in one stream, uncompressed). Binary,
//! because it is exact for `f64` (a reader gets the computed values bit for bit), about half
//! the size of decimal text and faster to parse. Points and fields are `Float64`;
//! connectivity and offsets `Int64` (VTK's `vtkIdType`); `types` `UInt8`; `cell` `Int64`;
//! `region` and `boundary_tag` `UInt32`. The whole file is built in memory before it is
//! written: about 3 times the size of the file.
//!
//! The XML is written here, by a small function of this module, not with the `vtkio`
//! crate: vtkio 0.6.3 writes connectivity and offsets as `UInt64` whatever the model asks,
//! and meshio 5.3 (with numpy 2) cannot read `UInt64` offsets of Lagrange cells (its reader
//! fails casting them); and vtkio pulls in nom 3 and quick-xml 0.22, which trigger Rust's
//! future-incompatibility lint `semicolon_in_expressions_from_macros` (rust-lang/rust#79813):
//! a later compiler will reject them. The format takes under a hundred lines.
//!
//! # Opening it in ParaView
//!
//! File > Open, Apply, and colour by `u_h`, `u_star` or `q_h`. ParaView draws a Lagrange cell
//! by cutting it into linear pieces: in the Properties panel (advanced properties, the gear
//! button) set "Nonlinear Subdivision Level" to 2 to 4 for smooth pictures (each level halves
//! the pieces). `Threshold` on `boundary_tag` between 0 and 0 keeps the volume cells, at least
//! 1 the boundary faces; `Warp By Scalar` on `u_h` gives a 2D solution as a surface.
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use hdg_core::{CoreError, ExactSolution};
use hdg_mesh::CellType;

use crate::{Error, Solution};

// VTK cell type numbers (vtkCellType.h).
const VTK_LINE: u8 = 3;
const VTK_TRIANGLE: u8 = 5;
const VTK_TETRA: u8 = 10;
const VTK_LAGRANGE_CURVE: u8 = 68;
const VTK_LAGRANGE_TRIANGLE: u8 = 69;
const VTK_LAGRANGE_TETRAHEDRON: u8 = 71;

/// How each mesh cell is drawn ([module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CellKind {
    /// One VTK Lagrange cell of degree `k + 1`: smooth in ParaView with its "Nonlinear
    /// Subdivision Level".
    #[default]
    Lagrange,
    /// `(k + 1)^d` linear cells on the same points, for readers without Lagrange cells.
    Subcells,
}

/// What [`write()`] puts in the file ([module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Lagrange cells (the default) or linear sub-cells.
    pub cells: CellKind,
    /// Whether the boundary faces are written as cells of their own with cell data
    /// `boundary_tag` (default: true).
    pub boundary_faces: bool,
    /// A region tag per mesh cell, written as cell data `region` (default: none). Its length
    /// must be the number of cells.
    pub regions: Option<Vec<u32>>,
}

impl Default for Options {
    fn default() -> Options {
        Options { cells: CellKind::Lagrange, boundary_faces: true, regions: None }
    }
}

/// Writes `solution` to `path` ([module docs](self) for what the file holds).
///
/// # Errors
/// [`Error::Core`] ([`CoreError::InvalidParameter`]) if [`Options::regions`] does not have
/// one entry per cell, or if the problem's exact solution fails in the per-cell errors;
/// [`Error::Output`] if the file name does not end in `.vtu` (the file is VTK XML, which
/// readers pick by that extension) or the file cannot be created or written.
pub fn write(solution: &Solution, path: &Path, options: &Options) -> Result<(), Error> {
    check_path(path)?;
    let grid = build(solution, options, &Selection::whole(solution))?;
    write_file(path, |w| grid.write_xml(w))
}

/// The cells a file holds and the numbers it gives them: every cell of the solution's mesh
/// ([`write`]), or a rank's owned cells numbered as in the whole mesh (a piece of a distributed
/// run's `.pvtu`: `crate::distributed::output`).
pub(crate) struct Selection<'a> {
    /// Cells `0..count` of the solution's mesh are written (a part's owned cells come first).
    pub count: usize,
    /// Each cell's number in the whole mesh: its `cell` data and its index into
    /// [`Options::regions`]. None: the cell's own number. Given, the part's interface faces
    /// ([`hdg_mesh::INTERFACE_TAG`]) are not boundary faces of the whole mesh and are left out.
    pub numbers: Option<&'a [usize]>,
    /// The number of cells of the whole mesh: the length [`Options::regions`] must have.
    pub total: usize,
    /// Written as cell data `rank` (UInt32) when given.
    pub rank: Option<u32>,
}

impl Selection<'_> {
    /// Every cell of `solution`'s mesh, by its own number.
    fn whole(solution: &Solution) -> Selection<'static> {
        let n = solution.mesh().n_cells();
        Selection { count: n, numbers: None, total: n, rank: None }
    }
}

/// Writes the cells `selection` picks from `solution` to `path` (no check of its name), and
/// returns what a `.pvtu` declares of such a piece: its `PPointData`, `PCellData` and `PPoints`
/// elements ([`write_pvtu`]).
///
/// # Errors
/// As [`write`].
#[cfg(feature = "distributed")]
pub(crate) fn write_piece(
    solution: &Solution,
    path: &Path,
    options: &Options,
    selection: &Selection<'_>,
) -> Result<String, Error> {
    let grid = build(solution, options, selection)?;
    let mut declarations = Vec::new();
    grid.write_declarations(&mut declarations).expect("writing to memory");
    write_file(path, |w| grid.write_xml(w))?;
    Ok(String::from_utf8(declarations).expect("ASCII XML"))
}

/// Writes a `.pvtu` (`PUnstructuredGrid`) that lists the pieces `sources` (paths relative to
/// the `.pvtu`'s folder), each holding the arrays `declarations` ([`write_piece`]) declares.
///
/// # Errors
/// [`Error::Output`] if the file cannot be created or written.
#[cfg(feature = "distributed")]
pub(crate) fn write_pvtu(path: &Path, declarations: &str, sources: &[String]) -> Result<(), Error> {
    write_file(path, |w| {
        writeln!(w, r#"<?xml version="1.0"?>"#)?;
        writeln!(
            w,
            r#"<VTKFile type="PUnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64">"#
        )?;
        writeln!(w, r#"<PUnstructuredGrid GhostLevel="0">"#)?;
        w.write_all(declarations.as_bytes())?;
        for source in sources {
            writeln!(w, r#"<Piece Source="{}"/>"#, xml_escape(source))?;
        }
        writeln!(w, "</PUnstructuredGrid>")?;
        writeln!(w, "</VTKFile>")
    })
}

/// `&`, `<`, `>` and `"` as XML entities (a file name in an attribute).
#[cfg(feature = "distributed")]
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Creates `path` and writes it with `write`, buffered.
fn write_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<(), Error> {
    let output = |e: io::Error| Error::Output { path: path.to_path_buf(), reason: e.to_string() };
    let mut writer = BufWriter::new(File::create(path).map_err(output)?);
    write(&mut writer).map_err(output)?;
    writer.flush().map_err(output)
}

/// Refuses a file name that does not end in `.vtu` (any case), before any work is done: the
/// file is VTK XML, which readers pick by that extension.
///
/// # Errors
/// [`Error::Output`] naming the file.
pub fn check_path(path: &Path) -> Result<(), Error> {
    if crate::has_extension(path, &["vtu"]) {
        return Ok(());
    }
    Err(Error::Output {
        path: path.to_path_buf(),
        reason: "the solution is written as VTK XML (.vtu); use a .vtu file name".into(),
    })
}

/// A point of the reference lattice of degree `N`: integer coordinates `p` with `p_s >= 0` and
/// `sum p_s <= N`, the reference point `xi_s = -1 + 2 p_s / N` (third entry 0 in 2D).
type Lattice = [i64; 3];

fn add(a: Lattice, b: Lattice) -> Lattice {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn sub(a: Lattice, b: Lattice) -> Lattice {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn scale(a: Lattice, t: i64) -> Lattice {
    [a[0] * t, a[1] * t, a[2] * t]
}

/// The lattice steps towards the reference vertices: vertex 0 is the origin, vertex `s + 1`
/// lies along axis `s`.
const UNIT: [Lattice; 4] = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]];

/// The edges of VTK's tetrahedron, each from its first to its second vertex: the order of the
/// edge nodes of `VTK_LAGRANGE_TETRAHEDRON`.
const TETRAHEDRON_EDGES: [[usize; 2]; 6] = [[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]];

/// The faces of VTK's Lagrange tetrahedron, in the order of their interior nodes, each as the
/// vertices its nodes are ordered from: the face's nodes follow the Lagrange triangle with
/// corners (first, second, third) (vtkHigherOrderTetra's `FaceBCoords`/`FaceMinCoord`, written
/// as vertices).
const TETRAHEDRON_FACES: [[usize; 3]; 4] = [[0, 1, 3], [2, 3, 1], [0, 3, 2], [0, 2, 1]];

/// Appends the points `origin + a e1 + b e2` (`a, b >= 0`, `a + b <= n`) in the order of VTK's
/// Lagrange triangle with corners `origin`, `origin + n e1`, `origin + n e2`: the corners, the
/// inner points of the edges (corner 0 to 1, 1 to 2, 2 to 0, each from its first corner), then
/// the inner points as a triangle of degree `n - 3` in the same order.
fn triangle_order(origin: Lattice, e1: Lattice, e2: Lattice, n: i64, out: &mut Vec<Lattice>) {
    let at = |a: i64, b: i64| add(origin, add(scale(e1, a), scale(e2, b)));
    if n == 0 {
        out.push(origin);
        return;
    }
    out.extend([at(0, 0), at(n, 0), at(0, n)]);
    out.extend((1..n).map(|t| at(t, 0)));
    out.extend((1..n).map(|t| at(n - t, t)));
    out.extend((1..n).map(|t| at(0, n - t)));
    if n >= 3 {
        triangle_order(at(1, 1), e1, e2, n - 3, out);
    }
}

/// Appends the lattice points of the tetrahedron with corners `origin + n UNIT[v]` in the order
/// of VTK's Lagrange tetrahedron: corners, the inner points of the edges
/// ([`TETRAHEDRON_EDGES`]), the inner points of the faces ([`TETRAHEDRON_FACES`]), then the
/// inner points as a tetrahedron of degree `n - 4` in the same order.
fn tetrahedron_order(origin: Lattice, n: i64, out: &mut Vec<Lattice>) {
    if n == 0 {
        out.push(origin);
        return;
    }
    let corner = |v: usize| add(origin, scale(UNIT[v], n));
    let step = |a: usize, b: usize| sub(UNIT[b], UNIT[a]);
    out.extend((0..4).map(corner));
    for [a, b] in TETRAHEDRON_EDGES {
        out.extend((1..n).map(|t| add(corner(a), scale(step(a, b), t))));
    }
    if n >= 3 {
        for [a, b, c] in TETRAHEDRON_FACES {
            let (s1, s2) = (step(a, b), step(a, c));
            triangle_order(add(corner(a), add(s1, s2)), s1, s2, n - 3, out);
        }
    }
    if n >= 4 {
        tetrahedron_order(add(origin, [1, 1, 1]), n - 4, out);
    }
}

/// Twice the signed area of the lattice triangle (a, b, c) in the first two coordinates.
fn signed_area(a: Lattice, b: Lattice, c: Lattice) -> i64 {
    let (u, v) = (sub(b, a), sub(c, a));
    u[0] * v[1] - u[1] * v[0]
}

/// Six times the signed volume of the lattice tetrahedron (a, b, c, d).
fn signed_volume(a: Lattice, b: Lattice, c: Lattice, d: Lattice) -> i64 {
    let (u, v, w) = (sub(b, a), sub(c, a), sub(d, a));
    u[0] * (v[1] * w[2] - v[2] * w[1]) - u[1] * (v[0] * w[2] - v[2] * w[0])
        + u[2] * (v[0] * w[1] - v[1] * w[0])
}

/// The cells of one mesh cell, and of each of its faces, as VTK cell types and node numbers
/// within the mesh cell's points: the same for every cell (the mesh's cells are all positively
/// oriented, so a face's outward orientation depends only on its local number).
struct Layout {
    /// The reference lattice points of one cell, in VTK's Lagrange order.
    nodes: Vec<Lattice>,
    /// The VTK cells of one mesh cell.
    volume: Vec<(u8, Vec<usize>)>,
    /// The VTK cells of each local face, outward oriented.
    faces: Vec<Vec<(u8, Vec<usize>)>>,
}

impl Layout {
    fn new(cell_type: CellType, degree: i64, kind: CellKind) -> Layout {
        let d = cell_type.dim();
        let mut nodes = Vec::new();
        match cell_type {
            CellType::Triangle => triangle_order([0; 3], UNIT[1], UNIT[2], degree, &mut nodes),
            CellType::Tetrahedron => tetrahedron_order([0; 3], degree, &mut nodes),
        }
        let index: HashMap<Lattice, usize> =
            nodes.iter().enumerate().map(|(j, &p)| (p, j)).collect();
        let number =
            |points: &[Lattice]| -> Vec<usize> { points.iter().map(|p| index[p]).collect() };
        let corner = |v: usize| scale(UNIT[v], degree);

        let volume = match (kind, cell_type) {
            (CellKind::Lagrange, CellType::Triangle) => {
                vec![(VTK_LAGRANGE_TRIANGLE, (0..nodes.len()).collect())]
            }
            (CellKind::Lagrange, CellType::Tetrahedron) => {
                vec![(VTK_LAGRANGE_TETRAHEDRON, (0..nodes.len()).collect())]
            }
            (CellKind::Subcells, CellType::Triangle) => {
                subtriangles([0; 3], UNIT[1], UNIT[2], degree)
                    .iter()
                    .map(|t| (VTK_TRIANGLE, number(t)))
                    .collect()
            }
            (CellKind::Subcells, CellType::Tetrahedron) => {
                subtetrahedra(degree).iter().map(|t| (VTK_TETRA, number(t))).collect()
            }
        };

        let faces = (0..cell_type.faces_per_cell())
            .map(|l| {
                let mut v = cell_type.face_vertices(l).to_vec();
                let opposite = (0..=d).find(|w| !v.contains(w)).unwrap_or(0);
                // Outward: 2D, the cell (its opposite vertex) on the left of the edge; 3D, the
                // normal (b - a) x (c - a) pointing away from the opposite vertex.
                let inward = match cell_type {
                    CellType::Triangle => {
                        signed_area(corner(v[0]), corner(v[1]), corner(opposite)) < 0
                    }
                    CellType::Tetrahedron => {
                        signed_volume(corner(v[0]), corner(v[1]), corner(v[2]), corner(opposite))
                            > 0
                    }
                };
                if inward {
                    v.swap(d - 2, d - 1);
                }
                let a = corner(v[0]);
                let s1 = sub(UNIT[v[1]], UNIT[v[0]]);
                match (kind, cell_type) {
                    (CellKind::Lagrange, CellType::Triangle) => {
                        let mut points = vec![a, corner(v[1])];
                        points.extend((1..degree).map(|t| add(a, scale(s1, t))));
                        vec![(VTK_LAGRANGE_CURVE, number(&points))]
                    }
                    (CellKind::Subcells, CellType::Triangle) => (0..degree)
                        .map(|t| {
                            let line = [add(a, scale(s1, t)), add(a, scale(s1, t + 1))];
                            (VTK_LINE, number(&line))
                        })
                        .collect(),
                    (CellKind::Lagrange, CellType::Tetrahedron) => {
                        let mut points = Vec::new();
                        triangle_order(a, s1, sub(UNIT[v[2]], UNIT[v[0]]), degree, &mut points);
                        vec![(VTK_LAGRANGE_TRIANGLE, number(&points))]
                    }
                    (CellKind::Subcells, CellType::Tetrahedron) => {
                        subtriangles(a, s1, sub(UNIT[v[2]], UNIT[v[0]]), degree)
                            .iter()
                            .map(|t| (VTK_TRIANGLE, number(t)))
                            .collect()
                    }
                }
            })
            .collect();
        Layout { nodes, volume, faces }
    }
}

/// The `n^2` triangles of the lattice triangle `origin + a e1 + b e2`, each oriented like
/// (`origin`, `origin + e1`, `origin + e2`).
fn subtriangles(origin: Lattice, e1: Lattice, e2: Lattice, n: i64) -> Vec<[Lattice; 3]> {
    let at = |a: i64, b: i64| add(origin, add(scale(e1, a), scale(e2, b)));
    let mut out = Vec::new();
    for b in 0..n {
        for a in 0..n - b {
            out.push([at(a, b), at(a + 1, b), at(a, b + 1)]);
            if a + b + 2 <= n {
                out.push([at(a + 1, b), at(a + 1, b + 1), at(a, b + 1)]);
            }
        }
    }
    out
}

/// The `n^3` positively oriented tetrahedra of the lattice tetrahedron of degree `n`: in the
/// coordinates `(x, x + y, x + y + z)` it is the simplex `0 <= a <= b <= c <= n`, the union of
/// the Kuhn tetrahedra (paths from a unit cube's lowest corner along the three axes in some
/// order) of the unit cubes that it contains.
fn subtetrahedra(n: i64) -> Vec<[Lattice; 4]> {
    const PATHS: [[usize; 3]; 6] =
        [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let inside = |p: Lattice| 0 <= p[0] && p[0] <= p[1] && p[1] <= p[2] && p[2] <= n;
    let back = |p: Lattice| [p[0], p[1] - p[0], p[2] - p[1]];
    let mut out = Vec::new();
    for a in 0..n {
        for b in 0..n {
            for c in 0..n {
                for path in PATHS {
                    let mut tet = [[a, b, c]; 4];
                    for (i, &axis) in path.iter().enumerate() {
                        tet[i + 1] = add(tet[i], UNIT[axis + 1]);
                    }
                    if tet.iter().all(|&p| inside(p)) {
                        let mut tet = tet.map(back);
                        if signed_volume(tet[0], tet[1], tet[2], tet[3]) < 0 {
                            tet.swap(2, 3);
                        }
                        out.push(tet);
                    }
                }
            }
        }
    }
    out
}

/// The VTK data set of the cells of `solution` that `selection` picks.
fn build(solution: &Solution, options: &Options, selection: &Selection<'_>) -> Result<Grid, Error> {
    let mesh = solution.mesh();
    let (d, n_cells) = (mesh.dim(), selection.count);
    if let Some(regions) = &options.regions {
        if regions.len() != selection.total {
            return Err(CoreError::InvalidParameter {
                name: "regions",
                reason: format!("{} region tags for {} cells", regions.len(), selection.total),
            }
            .into());
        }
    }
    let number = |c: usize| selection.numbers.map_or(c, |numbers| numbers[c]);
    let errors = match &solution.problem().exact {
        Some(exact) => {
            Some((solution.cell_errors(exact)?, !matches!(exact, ExactSolution::Value { .. })))
        }
        None => None,
    };

    let degree = solution.order() as i64 + 1;
    let layout = Layout::new(mesh.cell_type(), degree, options.cells);
    let n_nodes = layout.nodes.len();

    // Basis values at the reference nodes, node-major.
    let (element, post) = (solution.element(), solution.post_element());
    let (n, np) = (element.n_volume(), post.n_volume());
    let mut phi = vec![0.0; n_nodes * n];
    let mut psi = vec![0.0; n_nodes * np];
    let fractions: Vec<[f64; 3]> =
        layout.nodes.iter().map(|p| p.map(|p| p as f64 / degree as f64)).collect();
    for (j, lambda) in fractions.iter().enumerate() {
        let xi = lambda.map(|l| 2.0 * l - 1.0);
        element.eval_basis(&xi[..d], &mut phi[j * n..(j + 1) * n], None);
        post.eval_basis(&xi[..d], &mut psi[j * np..(j + 1) * np], None);
    }
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f64>();

    let n_points = n_cells * n_nodes;
    let mut points = Vec::with_capacity(3 * n_points);
    let mut u = Vec::with_capacity(n_points);
    let mut q = Vec::with_capacity(3 * n_points);
    let mut u_star = Vec::with_capacity(n_points);
    for c in 0..n_cells {
        let vertices: Vec<f64> =
            mesh.cell_vertices(c).iter().flat_map(|&v| mesh.vertex(v).iter().copied()).collect();
        let cell = solution.cell(c);
        for (j, lambda) in fractions.iter().enumerate() {
            let mut x = [0.0; 3];
            let xi = lambda.map(|l| 2.0 * l - 1.0);
            hdg_core::geometry::map_point(d, &vertices, &xi[..d], &mut x[..d]);
            points.extend(x);
            let phi = &phi[j * n..(j + 1) * n];
            u.push(dot(phi, cell.u));
            q.extend(
                (0..3).map(|r| if r < d { dot(phi, &cell.q[r * n..(r + 1) * n]) } else { 0.0 }),
            );
            u_star.push(dot(&psi[j * np..(j + 1) * np], cell.u_star));
        }
    }

    // The VTK cells: the volume cells of every mesh cell, then those of the boundary faces,
    // each with the mesh cell it belongs to and its boundary tag (0 for volume cells).
    let mut connectivity = Vec::new();
    let mut offsets = Vec::new();
    let mut types = Vec::new();
    let mut owner = Vec::new();
    let mut tags = Vec::new();
    let mut push = |cells: &[(u8, Vec<usize>)], c: usize, tag: u32| {
        for (kind, local) in cells {
            connectivity.extend(local.iter().map(|&j| (c * n_nodes + j) as i64));
            offsets.push(connectivity.len() as i64);
            types.push(*kind);
            owner.push(c);
            tags.push(tag);
        }
    };
    for c in 0..n_cells {
        push(&layout.volume, c, 0);
    }
    if options.boundary_faces {
        let part = selection.numbers.is_some();
        for f in (0..mesh.n_faces()).filter(|&f| mesh.is_boundary_face(f)) {
            let (c, tag) = (mesh.face_cells(f)[0], mesh.boundary_tag(f));
            if c >= n_cells || (part && tag == hdg_mesh::INTERFACE_TAG) {
                continue;
            }
            let l = usize::from(mesh.face_local_index(f)[0]);
            push(&layout.faces[l], c, tag);
        }
    }

    let mut cell_data =
        vec![("cell", Values::Int64(owner.iter().map(|&c| number(c) as i64).collect()))];
    if let Some((errors, with_q)) = &errors {
        let per_cell =
            |i: usize| Values::Float64(owner.iter().map(|&c| errors[c][i].sqrt()).collect());
        cell_data.push(("error_u", per_cell(0)));
        if *with_q {
            cell_data.push(("error_q", per_cell(1)));
        }
        cell_data.push(("error_u_star", per_cell(2)));
    }
    if let Some(regions) = &options.regions {
        let region = |c: usize| regions[number(c)];
        cell_data.push(("region", Values::UInt32(owner.iter().map(|&c| region(c)).collect())));
    }
    if options.boundary_faces {
        cell_data.push(("boundary_tag", Values::UInt32(tags)));
    }
    if let Some(rank) = selection.rank {
        cell_data.push(("rank", Values::UInt32(vec![rank; owner.len()])));
    }
    Ok(Grid {
        points,
        connectivity,
        offsets,
        types,
        point_data: vec![("u_h", 1, u), ("q_h", 3, q), ("u_star", 1, u_star)],
        cell_data,
    })
}

/// The values of one data array.
enum Values {
    Float64(Vec<f64>),
    Int64(Vec<i64>),
    UInt32(Vec<u32>),
    UInt8(Vec<u8>),
}

impl Values {
    /// The VTK type name.
    fn type_name(&self) -> &'static str {
        match self {
            Values::Float64(_) => "Float64",
            Values::Int64(_) => "Int64",
            Values::UInt32(_) => "UInt32",
            Values::UInt8(_) => "UInt8",
        }
    }

    /// The VTK type name and the values' little-endian bytes.
    fn bytes(&self) -> (&'static str, Vec<u8>) {
        let bytes = match self {
            Values::Float64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::Int64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::UInt32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Values::UInt8(v) => v.clone(),
        };
        (self.type_name(), bytes)
    }
}

/// An unstructured grid as the file holds it.
struct Grid {
    /// 3 coordinates per point.
    points: Vec<f64>,
    connectivity: Vec<i64>,
    /// The end of each cell in `connectivity`.
    offsets: Vec<i64>,
    types: Vec<u8>,
    /// Name, components, values (point-major).
    point_data: Vec<(&'static str, usize, Vec<f64>)>,
    cell_data: Vec<(&'static str, Values)>,
}

impl Grid {
    /// The elements of a `.pvtu` that declare this grid's arrays: `PPointData` and `PCellData`
    /// (names, types and components as [`Grid::write_xml`] writes them) and `PPoints`.
    #[cfg(feature = "distributed")]
    fn write_declarations(&self, w: &mut impl Write) -> io::Result<()> {
        let declare = |w: &mut dyn Write, kind: &str, name: Option<&str>, components: usize| {
            let name = name.map(|n| format!(r#" Name="{n}""#)).unwrap_or_default();
            writeln!(w, r#"<PDataArray type="{kind}"{name} NumberOfComponents="{components}"/>"#)
        };
        writeln!(w, r#"<PPointData Scalars="u_h" Vectors="q_h">"#)?;
        for (name, components, _) in &self.point_data {
            declare(w, "Float64", Some(name), *components)?;
        }
        writeln!(w, "</PPointData>")?;
        writeln!(w, r#"<PCellData Scalars="cell">"#)?;
        for (name, values) in &self.cell_data {
            declare(w, values.type_name(), Some(name), 1)?;
        }
        writeln!(w, "</PCellData>")?;
        writeln!(w, "<PPoints>")?;
        declare(w, "Float64", None, 3)?;
        writeln!(w, "</PPoints>")
    }

    /// Writes the grid as a VTK XML unstructured grid ([module docs](self), "Format").
    fn write_xml(self, w: &mut impl Write) -> io::Result<()> {
        writeln!(w, r#"<?xml version="1.0"?>"#)?;
        writeln!(
            w,
            r#"<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64">"#
        )?;
        writeln!(w, "<UnstructuredGrid>")?;
        writeln!(
            w,
            r#"<Piece NumberOfPoints="{}" NumberOfCells="{}">"#,
            self.points.len() / 3,
            self.types.len()
        )?;
        writeln!(w, r#"<PointData Scalars="u_h" Vectors="q_h">"#)?;
        for (name, components, values) in self.point_data {
            data_array(w, Some(name), components, &Values::Float64(values))?;
        }
        writeln!(w, "</PointData>")?;
        writeln!(w, r#"<CellData Scalars="cell">"#)?;
        for (name, values) in &self.cell_data {
            data_array(w, Some(name), 1, values)?;
        }
        writeln!(w, "</CellData>")?;
        writeln!(w, "<Points>")?;
        data_array(w, None, 3, &Values::Float64(self.points))?;
        writeln!(w, "</Points>")?;
        writeln!(w, "<Cells>")?;
        data_array(w, Some("connectivity"), 1, &Values::Int64(self.connectivity))?;
        data_array(w, Some("offsets"), 1, &Values::Int64(self.offsets))?;
        data_array(w, Some("types"), 1, &Values::UInt8(self.types))?;
        writeln!(w, "</Cells>")?;
        writeln!(w, "</Piece>")?;
        writeln!(w, "</UnstructuredGrid>")?;
        writeln!(w, "</VTKFile>")
    }
}

/// One `<DataArray>` in VTK's inline `binary` format: the base64 encoding of the byte count
/// (a little-endian `UInt64`) followed by the values' little-endian bytes, as one stream.
fn data_array(
    w: &mut impl Write,
    name: Option<&str>,
    components: usize,
    values: &Values,
) -> io::Result<()> {
    let (kind, bytes) = values.bytes();
    let name = name.map(|n| format!(r#" Name="{n}""#)).unwrap_or_default();
    writeln!(
        w,
        r#"<DataArray type="{kind}"{name} NumberOfComponents="{components}" format="binary">"#
    )?;
    let mut block = (bytes.len() as u64).to_le_bytes().to_vec();
    block.extend_from_slice(&bytes);
    w.write_all(base64(&block).as_bytes())?;
    writeln!(w, "\n</DataArray>")
}

/// Base64 (RFC 4648, standard alphabet, `=` padding).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_test_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        // All 64 letters: bytes 0, 16, 131, 16, 81, 135, ... spell the alphabet in order.
        let all: Vec<u8> = (0..64u32)
            .collect::<Vec<_>>()
            .chunks(4)
            .flat_map(|s| {
                let n = (s[0] << 18) | (s[1] << 12) | (s[2] << 6) | s[3];
                [(n >> 16) as u8, (n >> 8) as u8, n as u8]
            })
            .collect();
        assert_eq!(
            base64(&all),
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        );
    }

    #[test]
    fn a_data_array_is_the_byte_count_and_the_values_in_one_base64_stream() {
        // [1.0, -2.5] as Float64: 16 (8 bytes, LE), then 00..00 f0 3f and 00..00 04 c0; the
        // base64 of those 24 bytes, worked out by hand (and by Python's base64.b64encode).
        let mut out = Vec::new();
        data_array(&mut out, Some("x"), 2, &Values::Float64(vec![1.0, -2.5])).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<DataArray type=\"Float64\" Name=\"x\" NumberOfComponents=\"2\" format=\"binary\">\n\
             EAAAAAAAAAAAAAAAAADwPwAAAAAAAATA\n</DataArray>\n"
        );
    }
}

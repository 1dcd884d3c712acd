//! Gmsh meshes: `.msh` files of format 4.1, ASCII or binary, with their physical groups.
//!
//! The sections `$Entities`, `$Nodes` and `$Elements` are parsed by the `mshio` crate; this
//! module adds what it leaves out: the version check with a useful message, `$PhysicalNames`
//! (so groups can be named on the command line and in problem files), and the turn from
//! Gmsh's element blocks into a validated [`Mesh`]:
//!
//! - **cells**: linear triangles (type 2) when the file has no tetrahedra, else linear
//!   tetrahedra (type 4); a triangle mesh must lie in the plane z = 0. Cells with negative
//!   orientation (Gmsh writes them for surfaces defined by clockwise loops) are flipped, and
//!   the number flipped is reported. Nodes that no cell uses are dropped, the others keep the
//!   file's order.
//! - **boundary tags**: a boundary face takes the physical tag of the file's line (2D) or
//!   triangle (3D) with the same vertices; faces in no physical group get [`UNTAGGED`]. Tagged
//!   lines or triangles inside the domain (interfaces) are counted and otherwise ignored; one
//!   that is no face of any cell is refused.
//! - **regions**: each cell's physical tag (0 where its entity is in no physical group).
//! - anything else (second-order or mixed elements, quadrangles, hexahedra, ...) is refused
//!   with the element types and counts; points (type 15) and, in 3D, lines are ignored.
//!
//! Node tags: `mshio` keeps them only when they are sparse; dense tags are taken in the order
//! the nodes are written (how Gmsh and meshio write them).
//!
//! A malformed file gives a [`MeshError::File`] naming the section, never a panic: the parser
//! runs under `catch_unwind` as a last guard (the crate indexes and subtracts on values it
//! has not checked), and the fuzz test in `tests/mesh_files.rs` mutates real files.

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use mshio::{ElementType, MshFile};

use crate::{CellType, Mesh, MeshError};

/// The boundary tag of faces that are in no physical group.
pub const UNTAGGED: u32 = u32::MAX;

/// A physical group of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalGroup {
    /// Dimension of its entities (cells: the mesh dimension; boundary: one less).
    pub dim: usize,
    /// Its tag: a boundary face's tag or a cell's region.
    pub tag: u32,
    /// Its name from `$PhysicalNames`, if it has one.
    pub name: Option<String>,
}

/// The physical groups of a file, for lookups by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhysicalGroups {
    /// The mesh's dimension: cells' groups have it, boundary groups one less.
    pub dim: usize,
    /// The groups, by dimension and tag.
    pub groups: Vec<PhysicalGroup>,
}

impl PhysicalGroups {
    /// The boundary tag of the physical group `name` (of the boundary's dimension).
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] naming the known groups if there is none by that name.
    pub fn boundary_tag(&self, name: &str) -> Result<u32, MeshError> {
        self.group_tag(self.dim - 1, name, "boundary")
    }

    /// The region (cell tag) of the physical group `name` (of the mesh's dimension).
    ///
    /// # Errors
    /// [`MeshError::InvalidParameter`] naming the known groups if there is none by that name.
    pub fn region(&self, name: &str) -> Result<u32, MeshError> {
        self.group_tag(self.dim, name, "region")
    }

    /// The name of the physical group of dimension `dim` and tag `tag`, if it has one.
    pub fn name(&self, dim: usize, tag: u32) -> Option<&str> {
        self.groups.iter().find(|g| g.dim == dim && g.tag == tag).and_then(|g| g.name.as_deref())
    }

    fn group_tag(&self, dim: usize, name: &str, what: &str) -> Result<u32, MeshError> {
        let known: Vec<&PhysicalGroup> = self.groups.iter().filter(|g| g.dim == dim).collect();
        known.iter().find(|g| g.name.as_deref() == Some(name)).map(|g| g.tag).ok_or_else(|| {
            let names: Vec<String> = known
                .iter()
                .map(|g| format!("{} ({})", g.name.as_deref().unwrap_or("unnamed"), g.tag))
                .collect();
            MeshError::InvalidParameter(format!(
                "no {what} physical group named '{name}' (the file has: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ))
        })
    }
}

/// A mesh read from a Gmsh file, with what the file says beyond the geometry.
#[derive(Clone, Debug)]
pub struct GmshMesh {
    /// The validated mesh; boundary tags are the physical tags of the boundary elements.
    pub mesh: Mesh,
    /// Each cell's physical tag (0: none).
    pub cell_regions: Vec<u32>,
    /// The physical groups.
    pub groups: PhysicalGroups,
    /// How many cells were negatively oriented in the file and were flipped.
    pub flipped_cells: usize,
    /// What was read but not used (ignored element types, interface elements), for the user.
    pub notes: Vec<String>,
}

/// Reads a Gmsh `.msh` file (format 4.1, ASCII or binary); module docs for what is kept.
///
/// # Errors
/// [`MeshError::File`] if the file cannot be read or parsed, or holds unsupported elements;
/// the errors of [`Mesh::new`] if its cells do not make a valid conforming mesh.
pub fn read(path: &Path) -> Result<GmshMesh, MeshError> {
    let bytes = std::fs::read(path)
        .map_err(|e| MeshError::File(format!("cannot read {}: {e}", path.display())))?;
    parse(&bytes).map_err(|e| match e {
        MeshError::File(m) => MeshError::File(format!("{}: {m}", path.display())),
        other => other,
    })
}

/// [`read`] from the file's bytes.
///
/// # Errors
/// Those of [`read`].
pub fn parse(bytes: &[u8]) -> Result<GmshMesh, MeshError> {
    check_version(bytes)?;
    let names = physical_names(bytes)?;
    let msh = catch_unwind(AssertUnwindSafe(|| {
        mshio::parse_msh_bytes(bytes).map_err(|e| parser_message(&e.to_string()))
    }))
    .map_err(|_| MeshError::File("the file is malformed (the MSH parser gave up)".into()))?
    .map_err(MeshError::File)?;
    build(&msh, &names)
}

fn file_error(message: impl Into<String>) -> MeshError {
    MeshError::File(message.into())
}

/// The first lines of an `mshio` error, without its hex dump of the rest of the file.
fn parser_message(full: &str) -> String {
    let text = full.split("Hex dump").next().unwrap_or(full);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    format!("malformed MSH 4.1 data: {}", lines.join(" "))
}

/// Refuses files that are not MSH 4.1, saying how to write one.
fn check_version(bytes: &[u8]) -> Result<(), MeshError> {
    let head = &bytes[..bytes.len().min(256)];
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines().map(str::trim).skip_while(|l| l.is_empty());
    if lines.next() != Some("$MeshFormat") {
        return Err(file_error("not a Gmsh mesh file (it does not begin with $MeshFormat)"));
    }
    let version = lines.next().and_then(|l| l.split_whitespace().next()).unwrap_or("");
    if version != "4.1" {
        return Err(file_error(format!(
            "MSH format version '{version}' is not read; only 4.1 is (in Gmsh: \
             Mesh.MshFileVersion = 4.1, or gmsh FILE.geo -2 -format msh41)"
        )));
    }
    Ok(())
}

/// The `$PhysicalNames` section: (dim, tag) -> name. Always text, also in binary files.
fn physical_names(bytes: &[u8]) -> Result<HashMap<(usize, u32), String>, MeshError> {
    let mut names = HashMap::new();
    let Some(start) = find(bytes, b"$PhysicalNames") else { return Ok(names) };
    let rest = &bytes[start + b"$PhysicalNames".len()..];
    let end = find(rest, b"$EndPhysicalNames")
        .ok_or_else(|| file_error("$PhysicalNames has no $EndPhysicalNames"))?;
    let text =
        std::str::from_utf8(&rest[..end]).map_err(|_| file_error("$PhysicalNames is not text"))?;
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let count: usize = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| file_error("$PhysicalNames does not begin with its count"))?;
    for i in 0..count {
        let line = lines.next().ok_or_else(|| {
            file_error(format!("$PhysicalNames announces {count} names, has {i}"))
        })?;
        let bad = || file_error(format!("$PhysicalNames line '{line}' is not: dim tag \"name\""));
        let mut parts = line.splitn(3, char::is_whitespace);
        let dim: usize = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let tag: u32 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let name = parts.next().map(str::trim).ok_or_else(bad)?;
        let name = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')).ok_or_else(bad)?;
        if dim > 3 {
            return Err(bad());
        }
        names.insert((dim, tag), name.to_string());
    }
    Ok(names)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Gmsh's element type numbers (the file's), for messages.
fn type_number(t: ElementType) -> i32 {
    t as i32
}

fn build(
    msh: &MshFile<u64, i32, f64>,
    names: &HashMap<(usize, u32), String>,
) -> Result<GmshMesh, MeshError> {
    // Physical tags of each entity: (dim, entity tag) -> first physical tag.
    let mut entity_group: HashMap<(usize, i32), u32> = HashMap::new();
    let mut groups: BTreeMap<(usize, u32), ()> = BTreeMap::new();
    let mut notes = Vec::new();
    if let Some(entities) = &msh.data.entities {
        let mut add = |dim: usize, tag: i32, physical: &[i32]| {
            let positive: Vec<u32> = physical.iter().map(|&p| p.unsigned_abs()).collect();
            for &p in &positive {
                groups.insert((dim, p), ());
            }
            if let Some(&first) = positive.first() {
                entity_group.insert((dim, tag), first);
            }
            positive.len() > 1
        };
        let mut multiple = 0;
        for p in &entities.points {
            multiple += usize::from(add(0, p.tag, &p.physical_tags));
        }
        for c in &entities.curves {
            multiple += usize::from(add(1, c.tag, &c.physical_tags));
        }
        for s in &entities.surfaces {
            multiple += usize::from(add(2, s.tag, &s.physical_tags));
        }
        for v in &entities.volumes {
            multiple += usize::from(add(3, v.tag, &v.physical_tags));
        }
        if multiple > 0 {
            notes.push(format!(
                "{multiple} entities are in several physical groups; each takes its first"
            ));
        }
    }
    for &(dim, tag) in names.keys() {
        groups.insert((dim, tag), ());
    }

    // Nodes: tag -> (position in the file, coordinates).
    let nodes = msh.data.nodes.as_ref().ok_or_else(|| file_error("the file has no $Nodes"))?;
    let mut node_index: HashMap<u64, usize> = HashMap::new();
    let mut coords: Vec<[f64; 3]> = Vec::new();
    let mut next_dense_tag = nodes.min_node_tag;
    for block in &nodes.node_blocks {
        let tags: Vec<u64> = match &block.node_tags {
            Some(map) => {
                let mut tags = vec![0u64; block.nodes.len()];
                for (&tag, &i) in map {
                    if i < tags.len() {
                        tags[i] = tag;
                    }
                }
                tags
            }
            None => {
                let n = block.nodes.len() as u64;
                let end = next_dense_tag
                    .checked_add(n)
                    .ok_or_else(|| file_error("node tags overflow 64 bits"))?;
                let tags = (next_dense_tag..end).collect();
                next_dense_tag = end;
                tags
            }
        };
        for (node, tag) in block.nodes.iter().zip(tags) {
            if node_index.insert(tag, coords.len()).is_some() {
                return Err(file_error(format!("node {tag} is defined twice")));
            }
            coords.push([node.x, node.y, node.z]);
        }
    }

    // Elements by kind.
    let elements =
        msh.data.elements.as_ref().ok_or_else(|| file_error("the file has no $Elements"))?;
    let mut counts: BTreeMap<i32, (ElementType, usize)> = BTreeMap::new();
    for b in &elements.element_blocks {
        counts.entry(type_number(b.element_type)).or_insert((b.element_type, 0)).1 +=
            b.elements.len();
    }
    let has = |t: ElementType| counts.get(&type_number(t)).is_some_and(|c| c.1 > 0);
    let (cell_type, cell_kind, facet_kind) = if has(ElementType::Tet4) {
        (CellType::Tetrahedron, ElementType::Tet4, ElementType::Tri3)
    } else if has(ElementType::Tri3) {
        (CellType::Triangle, ElementType::Tri3, ElementType::Lin2)
    } else {
        return Err(file_error(format!(
            "the file has no linear triangles (type 2) or tetrahedra (type 4); it holds {}",
            describe(&counts)
        )));
    };
    let dim = cell_type.dim();
    let supported = |t: ElementType| {
        matches!(t, ElementType::Pnt | ElementType::Lin2 | ElementType::Tri3)
            || (dim == 3 && t == ElementType::Tet4)
    };
    let unsupported: BTreeMap<i32, (ElementType, usize)> =
        counts.iter().filter(|(_, (t, _))| !supported(*t)).map(|(&k, &v)| (k, v)).collect();
    if !unsupported.is_empty() {
        return Err(file_error(format!(
            "unsupported elements: {}; the library reads linear triangles (type 2) and \
             tetrahedra (type 4) with their boundary lines (1) or triangles (2)",
            describe(&unsupported)
        )));
    }
    for t in [ElementType::Pnt, ElementType::Lin2] {
        if t != facet_kind && has(t) {
            notes.push(format!(
                "ignored: {}",
                describe(
                    &counts.range(type_number(t)..=type_number(t)).map(|(&k, &v)| (k, v)).collect()
                )
            ));
        }
    }

    let vertices_of = |e: &mshio::Element<u64>, n: usize| -> Result<Vec<usize>, MeshError> {
        if e.nodes.len() != n {
            return Err(file_error(format!(
                "element {} has {} nodes, expected {n}",
                e.element_tag,
                e.nodes.len()
            )));
        }
        e.nodes
            .iter()
            .map(|t| {
                node_index.get(t).copied().ok_or_else(|| {
                    file_error(format!(
                        "element {} uses node {t}, which is not defined",
                        e.element_tag
                    ))
                })
            })
            .collect()
    };

    // Cells, in the file's order (`Mesh::new` flips those negatively oriented).
    let vpc = cell_type.vertices_per_cell();
    let mut cells: Vec<usize> = Vec::new();
    let mut cell_regions = Vec::new();
    for b in elements.element_blocks.iter().filter(|b| b.element_type == cell_kind) {
        let region = entity_group.get(&(dim, b.entity_tag)).copied().unwrap_or(0);
        for e in &b.elements {
            cells.extend(vertices_of(e, vpc)?);
            cell_regions.push(region);
        }
    }
    // Only the nodes cells use, in the file's order.
    let mut new_index = vec![usize::MAX; coords.len()];
    for &v in &cells {
        new_index[v] = 0;
    }
    let mut vertices = Vec::new();
    let mut n_used = 0;
    let extent = coords.iter().flat_map(|c| c.iter()).fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, c) in coords.iter().enumerate() {
        if new_index[i] == usize::MAX {
            continue;
        }
        if dim == 2 && c[2].abs() > 1e-12 * extent.max(1.0) {
            return Err(file_error(format!(
                "triangle node at {c:?} is off the plane z = 0: surface meshes in 3D are \
                 not supported"
            )));
        }
        new_index[i] = n_used;
        n_used += 1;
        vertices.extend_from_slice(&c[..dim]);
    }
    for v in &mut cells {
        *v = new_index[*v];
    }

    // Boundary elements: sorted vertices -> physical tag.
    let vpf = cell_type.vertices_per_face();
    let mut facets: HashMap<Vec<usize>, u32> = HashMap::new();
    for b in elements.element_blocks.iter().filter(|b| b.element_type == facet_kind) {
        let tag = entity_group.get(&(dim - 1, b.entity_tag)).copied().unwrap_or(UNTAGGED);
        for e in &b.elements {
            let mut key: Vec<usize> =
                vertices_of(e, vpf)?.into_iter().map(|v| new_index[v]).collect();
            if key.contains(&usize::MAX) {
                return Err(file_error(format!(
                    "boundary element {} (physical group {tag}) is no face of any cell",
                    e.element_tag
                )));
            }
            key.sort_unstable();
            facets.insert(key, tag);
        }
    }

    let mesh = Mesh::with_boundary_tags(cell_type, vertices, cells, |face, _| {
        facets.get(face).copied().unwrap_or(UNTAGGED)
    })?;

    // Every boundary element must be a face; those inside the domain are interfaces.
    let mut faces: HashMap<&[usize], bool> = HashMap::with_capacity(mesh.n_faces());
    for f in 0..mesh.n_faces() {
        faces.insert(mesh.face_vertices(f), mesh.is_boundary_face(f));
    }
    let mut interfaces = 0;
    for (key, tag) in &facets {
        match faces.get(key.as_slice()) {
            None => {
                return Err(file_error(format!(
                    "a boundary element of physical group {tag} (vertices {key:?}) is no face \
                     of any cell"
                )))
            }
            Some(false) if *tag != UNTAGGED => interfaces += 1,
            _ => {}
        }
    }
    if interfaces > 0 {
        notes.push(format!(
            "{interfaces} tagged faces lie inside the domain (interfaces); their tags are not used"
        ));
    }

    let groups = PhysicalGroups {
        dim,
        groups: groups
            .into_keys()
            .map(|(dim, tag)| PhysicalGroup { dim, tag, name: names.get(&(dim, tag)).cloned() })
            .collect(),
    };
    // Negatively oriented cells were flipped by `Mesh::with_boundary_tags`, as for any mesh.
    let flipped_cells = mesh.flipped_cells();
    Ok(GmshMesh { mesh, cell_regions, groups, flipped_cells, notes })
}

/// "120 x Tri6 (type 9), 4 x Pnt (type 15)".
fn describe(counts: &BTreeMap<i32, (ElementType, usize)>) -> String {
    counts
        .iter()
        .map(|(n, (t, c))| format!("{c} x {t:?} (type {n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

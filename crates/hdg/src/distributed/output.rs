//! What a distributed run leaves, as files and values: per-rank VTU pieces with a `.pvtu`,
//! point evaluation answered by the owning rank.
//!
//! Both are collective: every rank of the run calls them with the same arguments, and every
//! rank returns the same result or the same error.
//!
//! # Files
//!
//! [`write_vtu`] to `out/x.pvtu` writes
//!
//! ```text
//! out/x.pvtu          the file to open in ParaView (PUnstructuredGrid): it lists the pieces
//! out/x/x_0.vtu       rank 0's owned cells
//! out/x/x_1.vtu       rank 1's owned cells, ...
//! ```
//!
//! This is the layout of VTK's own parallel XML writers with pieces in a subdirectory
//! (`vtkXMLPDataObjectWriter`, `UseSubdirectory`: `<name>/<name>_<piece>.vtu`), so the folder
//! the user named gains one file to open and one folder, however many ranks ran; VTK's reader
//! finds the pieces relative to the `.pvtu`.
//!
//! Each piece is what [`crate::vtu::write`] writes, of the cells the rank owns (ghost cells are
//! left out: every cell is in exactly one piece): the same points, fields and cell data, with
//! `cell` the cell's number in the whole mesh and one more cell data array, `rank` (colour by
//! it in ParaView to see the partition). Boundary faces are those of the whole mesh; the faces
//! between ranks are not written. A rank without cells writes no piece and is not listed. The
//! `.pvtu` declares the pieces' arrays as the pieces hold them.
use std::path::{Path, PathBuf};

use hdg_core::distributed::mpi::collective::SystemOperation;
use hdg_core::distributed::mpi::topology::Communicator as _;
use hdg_core::distributed::mpi::traits::*;
use hdg_core::{CoreError, PointValue, Solution};
use hdg_mesh::Mesh;

use super::{rank, size, Communicator, DistributedRun};
use crate::vtu::{self, Selection};
use crate::Error;

/// How far outside a cell (in barycentric coordinates) a point may lie and still be taken as in
/// it: the point locator's tolerance (`hdg_mesh::locate`).
const INSIDE_TOLERANCE: f64 = 1e-10;

/// The `.pvtu` that [`write_vtu`] writes for `path`: `path` itself if it ends in `.pvtu`, the
/// same name with `.pvtu` if it ends in `.vtu` (so that a program's `--output x.vtu` works on
/// one process and over many).
///
/// # Errors
/// [`Error::Output`] for another extension.
pub fn pvtu_path(path: &Path) -> Result<PathBuf, Error> {
    if crate::has_extension(path, &["pvtu"]) {
        return Ok(path.to_path_buf());
    }
    if crate::has_extension(path, &["vtu"]) {
        return Ok(path.with_extension("pvtu"));
    }
    Err(Error::Output {
        path: path.to_path_buf(),
        reason: "a distributed solution is written as a parallel VTK XML file (.pvtu, with one \
                 .vtu piece per rank); use a .pvtu or .vtu file name"
            .into(),
    })
}

/// The piece of rank `rank` that [`write_vtu`] writes for `path`, and its name as the `.pvtu`
/// lists it (relative to the `.pvtu`'s folder): `x/x_<rank>.vtu` beside `x.pvtu`.
///
/// # Errors
/// As [`pvtu_path`].
pub fn piece_path(path: &Path, rank: usize) -> Result<(PathBuf, String), Error> {
    let pvtu = pvtu_path(path)?;
    let stem = pvtu.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let source = format!("{stem}/{stem}_{rank}.vtu");
    Ok((pvtu.with_file_name(&source), source))
}

/// Every rank's outcome of a step: the local one where all succeeded, else the lowest failing
/// rank's error on every rank ([`hdg_core::distributed::agree`]).
fn agreed<R>(comm: &Communicator, local: Result<R, Error>) -> Result<R, Error> {
    if size(comm) == 1 {
        return local;
    }
    Ok(hdg_core::distributed::agree(comm, local.map_err(Error::into_core))?)
}

/// Writes the solution of a distributed run for ParaView: each rank with cells its owned cells
/// as a piece, rank 0 the `.pvtu` that lists them ([module docs](self) for the names and what
/// the files hold). `path` names the `.pvtu` ([`pvtu_path`]: a `.vtu` name is written as
/// `.pvtu`); its folder must be one every rank can write to. [`vtu::Options::regions`], when
/// given, has one region per cell of the whole mesh.
///
/// Collective: every rank calls it with the same arguments.
///
/// # Errors
/// The same on every rank: [`Error::Output`] for a file name of another format; as
/// [`vtu::write`] (regions of another length, an exact solution that fails in the per-cell
/// errors, a file that cannot be written) on any rank.
pub fn write_vtu(
    comm: &Communicator,
    run: &DistributedRun,
    path: &Path,
    options: &vtu::Options,
) -> Result<(), Error> {
    let pvtu = pvtu_path(path)?;
    let total = run.report.report.cells;
    if let Some(regions) = &options.regions {
        if regions.len() != total {
            return Err(CoreError::InvalidParameter {
                name: "regions",
                reason: format!("{} region tags for {total} cells", regions.len()),
            }
            .into());
        }
    }
    kept(comm, run)?;
    let me = rank(comm);

    // The pieces' folder, made once, before any rank writes into it.
    let (mine, _) = piece_path(&pvtu, me)?;
    let folder = mine.parent().map(Path::to_path_buf).unwrap_or_default();
    let made = match me {
        0 => std::fs::create_dir_all(&folder)
            .map_err(|e| Error::Output { path: folder.clone(), reason: e.to_string() }),
        _ => Ok(()),
    };
    agreed(comm, made)?;

    // Each rank's owned cells, numbered as in the whole mesh.
    let written = match &run.solution {
        Some(solution) => {
            let selection = Selection {
                count: run.part.owned_cells,
                numbers: Some(&run.part.global_cells),
                total,
                rank: Some(me as u32),
            };
            vtu::write_piece(solution, &mine, options, &selection).map(Some)
        }
        None => Ok(None),
    };
    let declarations = agreed(comm, written)?;

    // The `.pvtu`, from the arrays of the lowest rank with cells (they are the same on all).
    let with_cells: Vec<usize> =
        run.report.ranks.iter().filter(|r| r.owned_cells > 0).map(|r| r.rank).collect();
    let first = with_cells.first().copied().unwrap_or(0);
    let mut declarations = match me == first {
        true => declarations.unwrap_or_default().into_bytes(),
        false => Vec::new(),
    };
    if first != 0 {
        let root = comm.process_at_rank(first as i32);
        let mut len = declarations.len() as u64;
        root.broadcast_into(&mut len);
        declarations.resize(len as usize, 0);
        root.broadcast_into(&mut declarations[..]);
    }
    let listed = match me {
        0 => (|| {
            let sources = with_cells
                .iter()
                .map(|&r| piece_path(&pvtu, r).map(|(_, source)| source))
                .collect::<Result<Vec<_>, _>>()?;
            vtu::write_pvtu(&pvtu, &String::from_utf8_lossy(&declarations), &sources)
        })(),
        _ => Ok(()),
    };
    agreed(comm, listed)
}

/// The fields at the point `x`, the same on every rank: the lowest rank whose owned cells hold
/// `x` evaluates it there ([`Solution::evaluate`] restricted to owned cells) and broadcasts its
/// value; `None` outside the mesh. The value's `cell` is the cell's number in the whole mesh.
/// The fields are discontinuous between cells: a point on a face takes the values of one of its
/// cells, of the lowest rank that owns one.
///
/// Collective: every rank calls it with the same point.
///
/// # Errors
/// The same on every rank: a point with other than `dim` coordinates or a coordinate that is
/// not finite ([`Solution::evaluate`]).
pub fn evaluate(
    comm: &Communicator,
    run: &DistributedRun,
    x: &[f64],
) -> Result<Option<PointValue>, Error> {
    kept(comm, run)?;
    let local = match &run.solution {
        Some(solution) => in_owned_cell(solution, run.part.owned_cells, x).map_err(Error::from),
        None => Ok(None),
    };
    let local = agreed(comm, local)?;

    let (me, ranks) = (rank(comm) as i32, size(comm) as i32);
    let candidate = if local.is_some() { me } else { ranks };
    let mut owner = ranks;
    comm.all_reduce_into(&candidate, &mut owner, SystemOperation::min());
    if owner == ranks {
        return Ok(None);
    }
    let mut value = [0.0; 6];
    if let Some(v) = local.filter(|_| me == owner) {
        // Cell numbers are exact in f64 up to 2^53.
        let cell = run.part.global_cells[v.cell] as f64;
        value = [cell, v.u, v.q[0], v.q[1], v.q[2], v.u_star];
    }
    comm.process_at_rank(owner).broadcast_into(&mut value[..]);
    Ok(Some(PointValue {
        cell: value[0] as usize,
        u: value[1],
        q: [value[2], value[3], value[4]],
        u_star: value[5],
    }))
}

/// The fields at `x` in one of the first `owned` cells of `solution`'s mesh (the cell the point
/// lies deepest in), or None. The point locator may find `x` in a ghost cell when it lies on
/// the face, edge or vertex it shares with an owned cell; the owned cells that share a vertex
/// with it are then tried.
fn in_owned_cell(
    solution: &Solution,
    owned: usize,
    x: &[f64],
) -> Result<Option<PointValue>, CoreError> {
    let Some(found) = solution.evaluate(x)? else { return Ok(None) };
    if found.cell < owned {
        return Ok(Some(found));
    }
    let mesh = solution.mesh();
    let d = mesh.dim();
    let ghost = mesh.cell_vertices(found.cell);
    let mut best: Option<(f64, usize, [f64; 4])> = None;
    for c in (0..owned).filter(|&c| mesh.cell_vertices(c).iter().any(|v| ghost.contains(v))) {
        let lambda = barycentric(mesh, c, x);
        let least = lambda[..=d].iter().copied().fold(f64::INFINITY, f64::min);
        if least >= -INSIDE_TOLERANCE && best.is_none_or(|(l, _, _)| least > l) {
            best = Some((least, c, lambda));
        }
    }
    Ok(best.map(|(_, c, lambda)| {
        let xi: Vec<f64> = (0..d).map(|s| 2.0 * lambda[s + 1] - 1.0).collect();
        solution.evaluate_in_cell(c, &xi)
    }))
}

/// Barycentric coordinates of `x` in cell `c` of `mesh`, in the cell's vertex order (Cramer's
/// rule on the affine map).
fn barycentric(mesh: &Mesh, c: usize, x: &[f64]) -> [f64; 4] {
    let d = mesh.dim();
    let v = mesh.cell_vertices(c);
    let origin = mesh.vertex(v[0]);
    let mut m = [[0.0; 3]; 3];
    let mut r = [0.0; 3];
    for i in 0..d {
        for s in 0..d {
            m[i][s] = mesh.vertex(v[s + 1])[i] - origin[i];
        }
        r[i] = x[i] - origin[i];
    }
    if d == 2 {
        m[2][2] = 1.0;
    }
    let det = |m: &[[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let whole = det(&m);
    let mut lambda = [0.0; 4];
    for s in 0..d {
        let mut replaced = m;
        for i in 0..3 {
            replaced[i][s] = r[i];
        }
        lambda[s + 1] = det(&replaced) / whole;
    }
    lambda[0] = 1.0 - lambda[1..=d].iter().sum::<f64>();
    lambda
}

/// An error on every rank unless every rank with cells kept its solution.
fn kept(comm: &Communicator, run: &DistributedRun) -> Result<(), Error> {
    let mine = match run.solution.is_none() && run.part.owned_cells > 0 {
        true => Err(CoreError::InvalidParameter {
            name: "solution",
            reason: "the run did not keep its solution (Solver::keep_solution(false))".into(),
        }
        .into()),
        false => Ok(()),
    };
    agreed(comm, mine)
}

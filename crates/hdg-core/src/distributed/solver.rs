//! The trace solvers of a distributed run ([`DistributedSolver`]): what they are given
//! besides the operator and vectors, and the vertex space the multigrid asks for.
use hdg_mesh::{Mesh, MeshPart};
use mpi::collective::SystemOperation;
use mpi::topology::Communicator as _;
use mpi::traits::*;

use super::{agree, Communicator, DistributedOperator, DistributedOps};
use crate::auxiliary::VertexSpace;
use crate::backend::{Backend, HaloOps, VectorOps};
use crate::discretization::Discretization;
use crate::error::Result;
use crate::problem::Problem;
use crate::real::Real;
use crate::solver::SolveReport;
use crate::topology::TraceTopology;

/// What a distributed trace solve is given besides the operator and the vectors.
pub struct DistributedSetup<'a> {
    /// The rank's trace topology (empty on a rank without cells).
    pub topology: &'a TraceTopology,
    /// The face of the whole mesh of each of the rank's trace rows (its free faces, in order):
    /// the rows' names across the ranks ([`super::GatheredRows`]).
    pub row_faces: &'a [u64],
    /// The whole vertex space seen from the rank's rows, where the solver asked for one
    /// ([`DistributedSolver::vertex_space`]).
    pub vertex_space: Option<&'a VertexSpace>,
    /// Space dimension.
    pub dim: usize,
    /// Polynomial order.
    pub order: usize,
    /// Where the operator is singular with the constants as its null space (pure Neumann with
    /// c = 0 and mean(u_h) = 0 asked for): the constant trace on the rank's rows, zero on its
    /// ghost rows (the right-hand side is already orthogonal to it).
    pub constant_trace: Option<&'a [f64]>,
}

/// A trace solver over the ranks of a distributed run, the same on every rank (`hdg-linalg`'s
/// `Suite` implements it).
pub trait DistributedSolver<T: Real, B: Backend<T> + HaloOps<T>> {
    /// Name in reports.
    fn name(&self) -> String;
    /// The split ratio of the vertex space it needs ([`VertexSpace::from_parts`]), if any.
    fn vertex_space(&self, dim: usize, order: usize) -> Option<f64> {
        let _ = (dim, order);
        None
    }
    /// Solves `operator x = rhs` from x (every rank calls it together).
    fn solve(
        &self,
        ops: &DistributedOps<'_, B, B::Indices>,
        operator: &DistributedOperator<'_, T, B, B::Operator>,
        setup: &DistributedSetup<'_>,
        rhs: &<B as VectorOps<T>>::Vector,
        x: &mut <B as VectorOps<T>>::Vector,
    ) -> Result<SolveReport>;
}

/// The vertex space of the whole mesh seen from this rank's rows (`local`: its part's
/// discretization, None without cells), its incidence on the rows it owns
/// ([`VertexSpace::restricted_to_rows`]); the coarse unknowns' numbering is the one-process
/// run's. Where kappa stays within `split_ratio` over the whole mesh (its extremes reduced
/// over the ranks), the space is plain P1 and is built on the rank's rows alone
/// ([`VertexSpace::plain_on_faces`]); otherwise every rank builds the whole space from the
/// whole mesh (kappa per cell gathered from the owners: the coefficient regions around a
/// vertex may span ranks) and restricts it. With the space, how it was built (for the notes).
pub fn part_vertex_space<T: Real>(
    comm: &Communicator,
    mesh: &Mesh,
    problem: &Problem,
    part: &MeshPart,
    local: Option<&Discretization<'_, T>>,
    order: usize,
    split_ratio: f64,
) -> Result<(VertexSpace, &'static str)> {
    let element = crate::reference::reference_element(mesh.cell_type(), order)?;
    let dirichlet = crate::boundary::dirichlet_faces(mesh, problem);
    let owned_cells = part.owned_cells;
    let kappa_of_part: Vec<f64> = local
        .map(|d| d.kappa[..owned_cells].iter().map(|k| k.as_f64()).collect())
        .unwrap_or_default();
    // This rank's rows: their faces of the whole mesh, and which of them it owns.
    let free_faces = local.map_or(&[][..], |d| &d.topology.free_faces[..]);
    let faces: Vec<usize> = free_faces.iter().map(|&f| part.global_faces[f as usize]).collect();
    let rank = comm.rank() as u32;
    let owned: Vec<bool> =
        free_faces.iter().map(|&f| part.face_owner[f as usize] == rank).collect();
    let (lo, hi) = crate::auxiliary::kappa_range(&kappa_of_part);
    let (mut min, mut max) = (0.0f64, 0.0f64);
    comm.all_reduce_into(&lo, &mut min, SystemOperation::min());
    comm.all_reduce_into(&hi, &mut max, SystemOperation::max());
    if crate::auxiliary::is_plain((min, max), split_ratio) {
        let space =
            VertexSpace::plain_on_faces(mesh, &dirichlet, element.as_ref(), &faces, &owned)?;
        return Ok((space, "built on each rank's rows"));
    }
    // The whole mesh's free faces and their rows (its trace numbering), without the DBF
    // structure the whole topology would build.
    let free_of_mesh: Vec<u32> =
        (0..mesh.n_faces() as u32).filter(|&f| !dirichlet[f as usize]).collect();
    let mut free_index = vec![crate::topology::NONE; mesh.n_faces()];
    free_of_mesh.iter().enumerate().for_each(|(row, &f)| free_index[f as usize] = row as u32);
    let cells: Vec<u64> = part.global_cells[..owned_cells].iter().map(|&c| c as u64).collect();
    let (all_cells, all_values) =
        (agree::gather_all(comm, &cells), agree::gather_all(comm, &kappa_of_part));
    let mut kappa = vec![0.0; mesh.n_cells()];
    all_cells.iter().zip(&all_values).for_each(|(&c, &k)| kappa[c as usize] = k);
    let space =
        VertexSpace::from_free_faces(mesh, &free_of_mesh, element.as_ref(), &kappa, split_ratio)?;
    let rows: Vec<usize> = faces.iter().map(|&f| free_index[f] as usize).collect();
    let how = "the whole mesh's on every rank: coefficient regions";
    Ok((space.restricted_to_rows(&rows, &owned), how))
}

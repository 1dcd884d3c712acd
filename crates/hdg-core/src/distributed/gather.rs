//! The trace system gathered on one rank, for the solvers that need the whole matrix in one
//! process (the sparse factorisation). Each rank sends rank 0 the rows it owns, their columns
//! named by face of the whole mesh and component, so that the ghost columns need no exchange;
//! rank 0 numbers the rows as the one-process run does (the owned faces of all ranks are the
//! whole mesh's free faces: in face order, each face's components in order), so the gathered
//! matrix is the one-process run's, entry for entry up to the assembly's rounding. Vectors
//! travel the same way, and a solution goes back to each row's owner. Rank 0 then holds the
//! whole matrix: the path is as limited by one process's memory as the one-process solve.
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::topology::Communicator as _;
use mpi::traits::*;
use mpi::Count;

use super::{agree, Communicator};
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};

/// The rank that holds the gathered system.
const ROOT: i32 = 0;

/// How the rows of a distributed trace system come together on rank 0 and go back: made once
/// by [`GatheredRows::gather`] (with the matrix), then used for the vectors.
pub struct GatheredRows<'a> {
    comm: &'a Communicator,
    /// The rank's trace length (owned and ghost rows).
    local_len: usize,
    /// The local rows this rank owns, in the order it sends them.
    owned_rows: Vec<usize>,
    /// On rank 0: each rank's number of owned rows, in rank order.
    counts: Vec<Count>,
    /// On rank 0: each gathered row's (in rank order) row of the whole system.
    place: Vec<usize>,
}

/// A row's name across the ranks: its face of the whole mesh and its component on the face.
fn key(face: u64, component: usize, block_size: usize) -> u64 {
    face * block_size as u64 + component as u64
}

/// Every rank's `local`, concatenated in rank order, on rank 0 (empty elsewhere), with the
/// counts it came in.
fn gather_on_root<V: Equivalence + Copy + Default>(
    comm: &Communicator,
    local: &[V],
) -> (Vec<V>, Vec<Count>) {
    let root = comm.process_at_rank(ROOT);
    let count = local.len() as Count;
    if comm.rank() != ROOT {
        root.gather_into(&count);
        root.gather_varcount_into(local);
        return (Vec::new(), Vec::new());
    }
    let mut counts: Vec<Count> = vec![0; comm.size() as usize];
    root.gather_into_root(&count, &mut counts[..]);
    let mut all = vec![V::default(); counts.iter().map(|&c| c as usize).sum()];
    let displacements = agree::displacements(&counts);
    root.gather_varcount_into_root(
        local,
        &mut PartitionMut::new(&mut all[..], &counts[..], displacements),
    );
    (all, counts)
}

impl<'a> GatheredRows<'a> {
    /// Gathers the rows this rank owns of its local matrix `local` (None on a rank without
    /// cells) on rank 0, as the whole system's matrix (None on the other ranks). `row_faces`
    /// names the face of the whole mesh of each block of `block_size` local rows, `owned`
    /// whether this rank owns it. Every rank calls it; every rank returns the same outcome.
    ///
    /// # Errors
    /// A row owned by two ranks, or a column into a row no rank owns (a partition's rows
    /// that do not fit together).
    pub fn gather(
        comm: &'a Communicator,
        local: Option<&HostCsr>,
        row_faces: &[u64],
        owned: &[bool],
        block_size: usize,
    ) -> Result<(Self, Option<HostCsr>)> {
        let local_len = local.map_or(0, |a| a.n);
        let key_of = |row: usize| key(row_faces[row / block_size], row % block_size, block_size);
        let owned_rows: Vec<usize> =
            (0..local_len).filter(|&row| owned[row / block_size]).collect();
        let (mut keys, mut lengths, mut columns, mut values) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        if let Some(a) = local {
            for &row in &owned_rows {
                let entries = a.indptr[row]..a.indptr[row + 1];
                keys.push(key_of(row));
                lengths.push(entries.len() as u64);
                columns.extend(a.indices[entries.clone()].iter().map(|&c| key_of(c)));
                values.extend_from_slice(&a.values[entries]);
            }
        }
        let (keys, counts) = gather_on_root(comm, &keys);
        let (lengths, _) = gather_on_root(comm, &lengths);
        let (columns, _) = gather_on_root(comm, &columns);
        let (values, _) = gather_on_root(comm, &values);
        let matrix = match comm.rank() == ROOT {
            true => assemble(&keys, &lengths, &columns, &values).map(Some),
            false => Ok(None),
        };
        let (place, matrix) = match agree::agree(comm, matrix)? {
            Some((place, matrix)) => (place, Some(matrix)),
            None => (Vec::new(), None),
        };
        Ok((GatheredRows { comm, local_len, owned_rows, counts, place }, matrix))
    }

    /// The ranks the rows come from.
    pub fn comm(&self) -> &'a Communicator {
        self.comm
    }

    /// This rank's owned entries of `local` (its trace length) on rank 0, as one vector of
    /// the whole system (None on the other ranks). Every rank calls it.
    pub fn vector(&self, local: &[f64]) -> Option<Vec<f64>> {
        let mine: Vec<f64> = self.owned_rows.iter().map(|&row| local[row]).collect();
        let (gathered, _) = gather_on_root(self.comm, &mine);
        (self.comm.rank() == ROOT).then(|| {
            let mut whole = vec![0.0; gathered.len()];
            self.place.iter().zip(&gathered).for_each(|(&p, &v)| whole[p] = v);
            whole
        })
    }

    /// A vector of the whole system (given on rank 0, ignored elsewhere; zeros where rank 0 has
    /// none) as this rank's trace vector: its owned rows from it, its ghost rows zero. Every
    /// rank calls it.
    pub fn scatter(&self, whole: Option<&[f64]>) -> Vec<f64> {
        let root = self.comm.process_at_rank(ROOT);
        let mut mine = vec![0.0; self.owned_rows.len()];
        if self.comm.rank() == ROOT {
            let send: Vec<f64> = match whole {
                Some(whole) => self.place.iter().map(|&p| whole[p]).collect(),
                None => vec![0.0; self.place.len()],
            };
            let displacements = agree::displacements(&self.counts);
            let send = Partition::new(&send[..], &self.counts[..], displacements);
            root.scatter_varcount_into_root(&send, &mut mine[..]);
        } else {
            root.scatter_varcount_into(&mut mine[..]);
        }
        let mut local = vec![0.0; self.local_len];
        self.owned_rows.iter().zip(mine).for_each(|(&row, v)| local[row] = v);
        local
    }
}

/// The whole matrix from the gathered rows (their keys, lengths, column keys and values, in
/// rank order), rows and columns numbered by key order; with each gathered row's place.
fn assemble(
    keys: &[u64],
    lengths: &[u64],
    columns: &[u64],
    values: &[f64],
) -> Result<(Vec<usize>, HostCsr)> {
    let n = keys.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&g| keys[g]);
    let sorted: Vec<u64> = order.iter().map(|&g| keys[g]).collect();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(CoreError::Solver(format!(
            "gathering the trace matrix: row {} is owned by two ranks",
            w[0]
        )));
    }
    let mut place = vec![0; n];
    order.iter().enumerate().for_each(|(row, &g)| place[g] = row);
    let mut starts = Vec::with_capacity(n + 1);
    starts.push(0usize);
    lengths.iter().for_each(|&l| starts.push(starts.last().unwrap() + l as usize));
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let mut indices = Vec::with_capacity(columns.len());
    let mut sorted_values = Vec::with_capacity(values.len());
    let mut entries = Vec::new();
    for &g in &order {
        entries.clear();
        for k in starts[g]..starts[g + 1] {
            let column = sorted.binary_search(&columns[k]).map_err(|_| {
                CoreError::Solver(format!(
                    "gathering the trace matrix: row {} has a column into row {}, which no rank \
                     owns",
                    keys[g], columns[k]
                ))
            })?;
            entries.push((column, values[k]));
        }
        entries.sort_unstable_by_key(|e| e.0);
        indices.extend(entries.iter().map(|e| e.0));
        sorted_values.extend(entries.iter().map(|e| e.1));
        indptr.push(indices.len());
    }
    let matrix = HostCsr { n, n_cols: n, indptr, indices, values: sorted_values };
    Ok((place, matrix))
}

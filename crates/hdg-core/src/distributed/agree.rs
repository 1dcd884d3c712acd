//! Every rank returns the same outcome: a step that fails on one rank (a closure's bad value on
//! its cells, a refused input) fails on all, with that rank's message, instead of leaving the
//! others waiting in the next collective operation.
use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::topology::Communicator as _;
use mpi::traits::*;
use mpi::Count;

use super::Communicator;
use crate::error::{CoreError, Result};
use crate::real::Real;

/// The outcome of a step on every rank: `local` where every rank succeeded, else the error of
/// the lowest failing rank, its message broadcast to all: [`CoreError::Distributed`] on every
/// rank (on one rank, the error itself). One allreduce when all succeed.
pub fn agree<R>(comm: &Communicator, local: Result<R>) -> Result<R> {
    let size = comm.size();
    if size == 1 {
        return local;
    }
    let mine = if local.is_err() { comm.rank() } else { size };
    let mut first = size;
    comm.all_reduce_into(&mine, &mut first, SystemOperation::min());
    if first == size {
        return local;
    }
    let message = match &local {
        Err(e) if comm.rank() == first => e.to_string(),
        _ => String::new(),
    };
    let message = broadcast_text(comm, first as usize, &message);
    Err(CoreError::Distributed { rank: first as usize, message })
}

/// `text` of rank `root` on every rank (what the others pass is ignored).
pub fn broadcast_text(comm: &Communicator, root: usize, text: &str) -> String {
    let root = comm.process_at_rank(root as i32);
    let mut bytes = text.as_bytes().to_vec();
    let mut len = bytes.len() as u64;
    root.broadcast_into(&mut len);
    bytes.resize(len as usize, 0);
    root.broadcast_into(&mut bytes[..]);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Every rank's `local`, concatenated in rank order, on every rank.
pub fn gather_all<V: Equivalence + Copy + Default>(comm: &Communicator, local: &[V]) -> Vec<V> {
    let size = comm.size() as usize;
    let mut counts: Vec<Count> = vec![0; size];
    comm.all_gather_into(&(local.len() as Count), &mut counts[..]);
    let mut all = vec![V::default(); counts.iter().sum::<Count>() as usize];
    comm.all_gather_varcount_into(
        local,
        &mut PartitionMut::new(&mut all[..], &counts[..], displacements(&counts)),
    );
    all
}

/// Where each rank's piece starts in a buffer of pieces of `counts`, in rank order.
pub(super) fn displacements(counts: &[Count]) -> Vec<Count> {
    counts.iter().scan(0, |acc, &c| Some(std::mem::replace(acc, *acc + c))).collect()
}

/// One all-to-all of variable counts: `send` in pieces of `send_counts` to the ranks in
/// order; returns what the ranks sent this one, `receive_counts` from each, in rank order.
pub(super) fn all_to_all<V: Equivalence + Copy + Default>(
    comm: &Communicator,
    send: &[V],
    send_counts: &[Count],
    receive_counts: &[Count],
) -> Vec<V> {
    let mut received = vec![V::default(); receive_counts.iter().map(|&c| c as usize).sum()];
    let sent = Partition::new(send, send_counts, displacements(send_counts));
    let mut into =
        PartitionMut::new(&mut received[..], receive_counts, displacements(receive_counts));
    comm.all_to_all_varcount_into(&sent, &mut into);
    received
}

/// The sum over ranks of each entry.
pub fn sum(comm: &Communicator, local: &[f64]) -> Vec<f64> {
    let mut global = vec![0.0; local.len()];
    comm.all_reduce_into(local, &mut global[..], SystemOperation::sum());
    global
}

/// `values` replaced by their sum over the ranks, in their own precision (f32 or f64).
pub fn sum_in_place<T: Real>(comm: &Communicator, values: &mut Vec<T>) {
    if comm.size() == 1 {
        return;
    }
    let any = values as &mut dyn std::any::Any;
    if let Some(v) = any.downcast_mut::<Vec<f32>>() {
        let local = v.clone();
        comm.all_reduce_into(&local[..], &mut v[..], SystemOperation::sum());
    } else if let Some(v) = any.downcast_mut::<Vec<f64>>() {
        let local = v.clone();
        comm.all_reduce_into(&local[..], &mut v[..], SystemOperation::sum());
    } else {
        let local: Vec<f64> = values.iter().map(|x| x.as_f64()).collect();
        *values = sum(comm, &local).into_iter().map(T::from_f64_lossy).collect();
    }
}

/// The sum over ranks of a count.
pub fn sum_count(comm: &Communicator, local: usize) -> usize {
    let mut global = 0u64;
    comm.all_reduce_into(&(local as u64), &mut global, SystemOperation::sum());
    global as usize
}

/// The least and greatest value over ranks.
pub fn min_max(comm: &Communicator, local: (f64, f64)) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0, 0.0);
    comm.all_reduce_into(&local.0, &mut lo, SystemOperation::min());
    comm.all_reduce_into(&local.1, &mut hi, SystemOperation::max());
    (lo, hi)
}

//! The halo of a rank's trace vector: the ghost rows (free faces of the rank's part that
//! another rank owns) and, for each neighbouring rank, which owned rows it needs and which
//! ghost rows it fills. Built once from each local row's global face and owner (one
//! all-to-all of counts and one of face numbers); each exchange then sends the owned values
//! a neighbour needs and receives the ghost values, neighbour by neighbour, with non-blocking
//! MPI operations.
use std::any::Any;
use std::sync::Mutex;

use mpi::datatype::Equivalence;
use mpi::topology::Communicator as _;
use mpi::traits::*;
use mpi::Count;
use rayon::prelude::*;

use super::Communicator;
use crate::backend::HaloOps;
use crate::csr::HostCsr;
use crate::error::{CoreError, Result};
use crate::real::Real;

/// The exchanges with one neighbouring rank: its share of the packed buffers.
struct Neighbour {
    rank: i32,
    /// Values this rank sends it (owned rows the neighbour holds as ghosts).
    send: std::ops::Range<usize>,
    /// Values this rank receives from it (its ghost rows the neighbour owns).
    receive: std::ops::Range<usize>,
}

/// A rank's halo for vectors of `n_f` entries per row. The values of an exchange are packed
/// neighbour after neighbour into one buffer each way, so that a backend moves them with one
/// gather and one scatter (on a GPU: one kernel and one copy each).
pub struct Halo<I> {
    neighbours: Vec<Neighbour>,
    /// Every entry sent, neighbour after neighbour.
    send: I,
    /// Every entry received, neighbour after neighbour.
    receive: I,
    /// Every ghost entry (to clear a vector's ghost rows).
    ghosts: I,
    ghost_rows: usize,
    /// Entries of the vectors it is the halo of.
    len: usize,
    /// Values sent per exchange by this rank.
    sent_values: usize,
    /// Values received per exchange by this rank.
    received_values: usize,
    /// The host buffers of the exchanges, kept from one to the next (outgoing, incoming).
    buffers: Mutex<Buffers>,
    /// The entries sent, each once (an entry another rank holds as a ghost may go to several).
    send_unique: I,
    send_unique_len: usize,
    /// For each value sent, its entry's place in `send_unique`.
    send_slot: Vec<u32>,
    /// `send` and `receive` on the host (the exchanges of sparse rows, [`Halo::exchange_rows`]).
    host_send: Vec<u32>,
    host_receive: Vec<u32>,
    /// Exchanges so far (both directions) and the nanoseconds they took, waits included.
    clock: super::CommClock,
}

/// The packed values of an exchange, per precision: messages carry the vectors' own type.
#[derive(Default)]
struct Buffers {
    f32: (Vec<f32>, Vec<f32>),
    f64: (Vec<f64>, Vec<f64>),
}

impl Buffers {
    /// The outgoing and incoming buffers for values of type T, of the given lengths.
    fn of<T: Real>(&mut self, sent: usize, received: usize) -> Option<&mut (Vec<T>, Vec<T>)> {
        let pair = match T::PRECISION {
            crate::real::Precision::F32 => &mut self.f32 as &mut dyn Any,
            crate::real::Precision::F64 => &mut self.f64 as &mut dyn Any,
        };
        let pair = pair.downcast_mut::<(Vec<T>, Vec<T>)>()?;
        pair.0.resize(sent, T::zero());
        pair.1.resize(received, T::zero());
        Some(pair)
    }
}

/// The entries of rows `rows` of a vector with `n_f` entries per row.
fn entries(rows: &[u32], n_f: usize) -> Vec<u32> {
    rows.iter().flat_map(|&r| (0..n_f as u32).map(move |m| r * n_f as u32 + m)).collect()
}

impl<I> Halo<I> {
    /// The halo of the rows whose global faces are `row_faces` and owners `row_owners` (a
    /// rank's free rows: owned ones and ghosts), vectors of `n_f` entries per row.
    ///
    /// # Errors
    /// A ghost row that its owner does not have as an owned row (inconsistent parts), or the
    /// backend's upload.
    pub fn new<T: Real, B: HaloOps<T, Indices = I>>(
        comm: &Communicator,
        backend: &B,
        row_faces: &[u64],
        row_owners: &[u32],
        n_f: usize,
    ) -> Result<Halo<I>> {
        Self::build::<T, B>(comm, backend, row_faces, row_owners, None, n_f, row_faces.len() * n_f)
    }

    /// The halo of vectors of `len` entries of which the listed rows are the ones this rank
    /// uses: row i has the global number `ids[i]`, the owner `owners[i]` and sits at entry
    /// `positions[i]` (one entry per row). A replicated-length vector of which each rank
    /// owns some entries (the vertex level of the multigrid) is distributed by such a halo.
    ///
    /// # Errors
    /// As [`Halo::new`].
    pub fn at_positions<T: Real, B: HaloOps<T, Indices = I>>(
        comm: &Communicator,
        backend: &B,
        ids: &[u64],
        owners: &[u32],
        positions: &[u32],
        len: usize,
    ) -> Result<Halo<I>> {
        Self::build::<T, B>(comm, backend, ids, owners, Some(positions), 1, len)
    }

    #[allow(clippy::too_many_arguments)]
    fn build<T: Real, B: HaloOps<T, Indices = I>>(
        comm: &Communicator,
        backend: &B,
        row_faces: &[u64],
        row_owners: &[u32],
        positions: Option<&[u32]>,
        n_f: usize,
        len: usize,
    ) -> Result<Halo<I>> {
        let (size, me) = (comm.size() as usize, comm.rank() as u32);
        // Ghost rows grouped by owner, each group in increasing global face order: the order
        // of the values in a message, which both sides derive from the face numbers.
        let mut wanted: Vec<Vec<(u64, u32)>> = vec![Vec::new(); size];
        for (row, (&face, &owner)) in row_faces.iter().zip(row_owners).enumerate() {
            if owner != me {
                wanted[owner as usize].push((face, positions.map_or(row as u32, |p| p[row])));
            }
        }
        wanted.iter_mut().for_each(|w| w.sort_unstable());
        let request_counts: Vec<Count> = wanted.iter().map(|w| w.len() as Count).collect();
        let mut reply_counts: Vec<Count> = vec![0; size];
        comm.all_to_all_into(&request_counts[..], &mut reply_counts[..]);
        let requests: Vec<u64> = wanted.iter().flatten().map(|&(face, _)| face).collect();
        let asked = super::agree::all_to_all(comm, &requests, &request_counts, &reply_counts);
        // The owned rows by global number, for the other ranks' requests (none: none needed),
        // sorted in parallel: a rank owns millions of rows.
        let n_rows = if asked.is_empty() { 0 } else { row_faces.len() };
        let mut owned: Vec<(u64, u32)> = (0..n_rows)
            .into_par_iter()
            .filter(|&row| row_owners[row] == me)
            .map(|row| (row_faces[row], positions.map_or(row as u32, |p| p[row])))
            .collect();
        owned.par_sort_unstable();
        let owned_row = |face: &u64| -> Option<u32> {
            owned.binary_search_by_key(face, |&(f, _)| f).ok().map(|i| owned[i].1)
        };
        let mut neighbours = Vec::new();
        let (mut send, mut receive) = (Vec::new(), Vec::new());
        let mut offset = 0;
        let mut problem = None;
        for rank in 0..size {
            let n_asked = reply_counts[rank] as usize;
            let send_rows: Vec<u32> = asked[offset..offset + n_asked]
                .iter()
                .map(|face| match owned_row(face) {
                    Some(row) => row,
                    None => {
                        problem.get_or_insert(format!(
                            "rank {rank} asks for face {face}, which rank {me} does not own"
                        ));
                        0
                    }
                })
                .collect();
            offset += n_asked;
            let receive_rows: Vec<u32> = wanted[rank].iter().map(|&(_, row)| row).collect();
            if send_rows.is_empty() && receive_rows.is_empty() {
                continue;
            }
            let (send_start, receive_start) = (send.len(), receive.len());
            send.extend(entries(&send_rows, n_f));
            receive.extend(entries(&receive_rows, n_f));
            neighbours.push(Neighbour {
                rank: rank as i32,
                send: send_start..send.len(),
                receive: receive_start..receive.len(),
            });
        }
        if let Some(reason) = problem {
            return Err(CoreError::InvalidParameter { name: "mesh partition", reason });
        }
        let ghost_rows: Vec<u32> = wanted.iter().flatten().map(|&(_, row)| row).collect();
        // The owned entries sent, each once, and where each sent value sits among them.
        let mut unique = send.clone();
        unique.sort_unstable();
        unique.dedup();
        let send_slot =
            send.iter().map(|e| unique.binary_search(e).expect("listed") as u32).collect();
        Ok(Halo {
            ghosts: backend.upload_indices(&entries(&ghost_rows, n_f))?,
            ghost_rows: ghost_rows.len(),
            len,
            send_unique: backend.upload_indices(&unique)?,
            send_unique_len: unique.len(),
            send_slot,
            clock: super::CommClock::default(),
            neighbours,
            sent_values: send.len(),
            received_values: receive.len(),
            buffers: Mutex::new(Buffers::default()),
            send: backend.upload_indices(&send)?,
            receive: backend.upload_indices(&receive)?,
            host_send: send,
            host_receive: receive,
        })
    }

    /// Entries of the vectors it is the halo of (the rank's rows times n_f).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vectors are empty (a rank without rows).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Ghost rows.
    pub fn ghost_rows(&self) -> usize {
        self.ghost_rows
    }

    /// Neighbouring ranks (those this rank sends to or receives from).
    pub fn neighbours(&self) -> usize {
        self.neighbours.len()
    }

    /// Exchanges so far and the seconds they took on this rank (waits for its neighbours
    /// included).
    pub fn exchanges(&self) -> (usize, f64) {
        self.clock.read()
    }

    /// Values this rank sends per exchange.
    pub fn sent_values(&self) -> usize {
        self.sent_values
    }

    /// Sets every ghost entry of `v` to zero.
    pub fn clear_ghosts<T: Real, B: HaloOps<T, Indices = I>>(
        &self,
        backend: &B,
        v: &mut B::Vector,
    ) -> Result<()> {
        backend.clear(&self.ghosts, v)
    }

    /// Fills the ghost entries of `v` with their owners' values: one gather of every value this
    /// rank sends, one message per neighbour each way (in the vectors' precision, from buffers
    /// kept between exchanges), one scatter of every value it receives.
    pub fn exchange<T: Real, B: HaloOps<T, Indices = I>>(
        &self,
        comm: &Communicator,
        backend: &B,
        v: &mut B::Vector,
    ) -> Result<()> {
        self.swap::<T, B>(comm, backend, v, false)
    }

    /// The reverse of [`Halo::exchange`]: each ghost entry's value is added to its owner's
    /// entry (the ghosts keep theirs). A rank's contributions to rows it does not own (a
    /// restriction from its own rows) so reach their owners.
    pub fn add_to_owners<T: Real, B: HaloOps<T, Indices = I>>(
        &self,
        comm: &Communicator,
        backend: &B,
        v: &mut B::Vector,
    ) -> Result<()> {
        self.swap::<T, B>(comm, backend, v, true)
    }

    /// One exchange: owned values to the ghosts (assigned), or with `reverse` ghost values to
    /// their owners (added; an entry several neighbours hold gets each one's value).
    fn swap<T: Real, B: HaloOps<T, Indices = I>>(
        &self,
        comm: &Communicator,
        backend: &B,
        v: &mut B::Vector,
        reverse: bool,
    ) -> Result<()> {
        if self.neighbours.is_empty() {
            return Ok(());
        }
        let _timed = self.clock.start();
        let mut buffers = self
            .buffers
            .lock()
            .map_err(|_| CoreError::Solver("the halo's exchange buffers are poisoned".into()))?;
        let (source, target) = match reverse {
            false => (&self.send, &self.receive),
            true => (&self.receive, &self.send),
        };
        let (n_out, n_in) = match reverse {
            false => (self.sent_values, self.received_values),
            true => (self.received_values, self.sent_values),
        };
        let Some((outgoing, incoming)) = buffers.of::<T>(n_out, n_in) else {
            return Err(CoreError::InvalidParameter {
                name: "halo exchange",
                reason: format!("values of type {} (f32 and f64 only)", T::NAME),
            });
        };
        backend.gather(v, source, outgoing)?;
        let any_out = &*outgoing as &dyn Any;
        let any_in = &mut *incoming as &mut dyn Any;
        if let (Some(o), Some(i)) =
            (any_out.downcast_ref::<Vec<f32>>(), any_in.downcast_mut::<Vec<f32>>())
        {
            self.transfer(comm, o, i, reverse);
        } else if let (Some(o), Some(i)) =
            (any_out.downcast_ref::<Vec<f64>>(), any_in.downcast_mut::<Vec<f64>>())
        {
            self.transfer(comm, o, i, reverse);
        }
        if !reverse {
            return backend.scatter(incoming, target, v);
        }
        let mut sums = vec![T::zero(); self.send_unique_len];
        backend.gather(v, &self.send_unique, &mut sums)?;
        for (&slot, &x) in self.send_slot.iter().zip(incoming.iter()) {
            sums[slot as usize] += x;
        }
        backend.scatter(&sums, &self.send_unique, v)
    }

    /// `rows`, a sparse row per entry of the vectors this is the halo of (one entry per row,
    /// as [`Halo::at_positions`] builds: a level split among the ranks), with every ghost row
    /// replaced by its owner's. The owned rows that neighbours hold as ghosts travel: one
    /// message per neighbour each way for their lengths, two for their entries.
    ///
    /// # Errors
    /// A halo of several entries per row, or a column beyond 32 bits.
    pub(super) fn exchange_rows(&self, comm: &Communicator, rows: &HostCsr) -> Result<HostCsr> {
        if rows.n != self.len || u32::try_from(rows.n_cols).is_err() {
            return Err(CoreError::InvalidParameter {
                name: "halo rows",
                reason: format!(
                    "{} x {} rows for a halo of {} entries (one per row, 32-bit columns)",
                    rows.n, rows.n_cols, self.len
                ),
            });
        }
        let row = |i: u32| rows.indptr[i as usize]..rows.indptr[i as usize + 1];
        let lengths: Vec<u32> = self.host_send.iter().map(|&i| row(i).len() as u32).collect();
        let mut received_lengths = vec![0u32; self.host_receive.len()];
        self.transfer(comm, &lengths, &mut received_lengths, false);
        // Each neighbour's entries, from its rows' lengths.
        let entry_ranges = |lengths: &[u32], rows: fn(&Neighbour) -> std::ops::Range<usize>| {
            let mut start = 0;
            self.neighbours
                .iter()
                .map(|n| {
                    let len: usize = lengths[rows(n)].iter().map(|&l| l as usize).sum();
                    start += len;
                    start - len..start
                })
                .collect::<Vec<_>>()
        };
        let sent = entry_ranges(&lengths, |n| n.send.clone());
        let received = entry_ranges(&received_lengths, |n| n.receive.clone());
        let total = received.last().map_or(0, |r| r.end);
        let columns: Vec<u32> = self
            .host_send
            .iter()
            .flat_map(|&i| rows.indices[row(i)].iter().map(|&c| c as u32))
            .collect();
        let values: Vec<f64> =
            self.host_send.iter().flat_map(|&i| rows.values[row(i)].iter().copied()).collect();
        let mut their_columns = vec![0u32; total];
        let mut their_values = vec![0.0f64; total];
        self.transfer_ranges(comm, (&columns, &sent), (&mut their_columns, &received));
        self.transfer_ranges(comm, (&values, &sent), (&mut their_values, &received));
        // Where each received row's entries start.
        let mut from = vec![u32::MAX; rows.n];
        self.host_receive.iter().enumerate().for_each(|(k, &i)| from[i as usize] = k as u32);
        let starts = crate::sparse_rows::prefix_sums(received_lengths.iter().map(|&l| l as usize));
        let mut filled = HostCsr { n: rows.n, n_cols: rows.n_cols, ..HostCsr::default() };
        filled.indptr.reserve(rows.n + 1);
        filled.indptr.push(0);
        for (i, &k) in from.iter().enumerate() {
            match k {
                u32::MAX => {
                    let r = rows.indptr[i]..rows.indptr[i + 1];
                    filled.indices.extend_from_slice(&rows.indices[r.clone()]);
                    filled.values.extend_from_slice(&rows.values[r]);
                }
                k => {
                    let r = starts[k as usize]..starts[k as usize + 1];
                    filled.indices.extend(their_columns[r.clone()].iter().map(|&c| c as usize));
                    filled.values.extend_from_slice(&their_values[r]);
                }
            }
            filled.indptr.push(filled.indices.len());
        }
        Ok(filled)
    }

    /// Sends each neighbour its share of `outgoing` and receives its share of `incoming`
    /// (non-blocking, all posted before any wait).
    /// `reverse`: the ghosts' values go to their owners instead.
    fn transfer<X: Equivalence>(
        &self,
        comm: &Communicator,
        outgoing: &[X],
        incoming: &mut [X],
        reverse: bool,
    ) {
        let sent = |n: &Neighbour| if reverse { n.receive.clone() } else { n.send.clone() };
        let received = |n: &Neighbour| if reverse { n.send.clone() } else { n.receive.clone() };
        let sent: Vec<_> = self.neighbours.iter().map(sent).collect();
        let received: Vec<_> = self.neighbours.iter().map(received).collect();
        self.transfer_ranges(comm, (outgoing, &sent), (incoming, &received));
    }

    /// Sends each neighbour its range of `outgoing` and receives its range of `incoming`
    /// (ranges in neighbour order; the incoming ones contiguous), non-blocking, all posted
    /// before any wait.
    fn transfer_ranges<X: Equivalence>(
        &self,
        comm: &Communicator,
        (outgoing, sent): (&[X], &[std::ops::Range<usize>]),
        (incoming, received): (&mut [X], &[std::ops::Range<usize>]),
    ) {
        mpi::request::scope(|scope| {
            let mut rest = incoming;
            let mut receives = Vec::with_capacity(self.neighbours.len());
            for (n, range) in self.neighbours.iter().zip(received) {
                let (buf, tail) = std::mem::take(&mut rest).split_at_mut(range.len());
                rest = tail;
                receives.push(comm.process_at_rank(n.rank).immediate_receive_into(scope, buf));
            }
            let sends: Vec<_> = self
                .neighbours
                .iter()
                .zip(sent)
                .map(|(n, range)| {
                    comm.process_at_rank(n.rank).immediate_send(scope, &outgoing[range.clone()])
                })
                .collect();
            receives.into_iter().for_each(|r| {
                r.wait();
            });
            sends.into_iter().for_each(|s| {
                s.wait();
            });
        });
    }
}

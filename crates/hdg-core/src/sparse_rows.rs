//! Sparse matrices and CSR-like arrays built row by row on the host, rows in parallel: the vertex
//! level's Galerkin operator ([`crate::auxiliary::vertex_operator`]) and the multigrid's sparse
//! products (`hdg-linalg`) both assemble this way.
//!
//! Why not sprs: its product runs its symbolic phase on one thread, and at a million vertex
//! unknowns the smoothed-aggregation setup spent most of its time there.
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicUsize};

use rayon::prelude::*;

use crate::csr::HostCsr;

/// Rows per parallel task at most.
const ROWS_PER_TASK: usize = 4096;

/// Tasks per thread at least, where the rows allow: a small matrix of long rows (a coarse
/// level's P^T (A P): some hundred rows of thousands of products each) would otherwise be one
/// task on one thread.
const TASKS_PER_THREAD: usize = 4;

/// Rows per task for `n` rows: [`ROWS_PER_TASK`], or fewer where that leaves threads idle. The
/// rows are independent, so the split changes no bit of the result.
fn rows_per_task(n: usize) -> usize {
    ROWS_PER_TASK.min(n.div_ceil(TASKS_PER_THREAD * rayon::current_num_threads())).max(1)
}

/// The rows of one task: its row lengths, columns and values.
struct RowBlock {
    lengths: Vec<usize>,
    indices: Vec<usize>,
    values: Vec<f64>,
}

/// Concatenates row blocks (in order) into a CSR matrix of `n_cols` columns, the copies in
/// parallel (one sequential copy of every entry cost as much as the products themselves, and
/// its fresh pages fault in on one thread).
fn concatenate(blocks: Vec<RowBlock>, n_cols: usize) -> HostCsr {
    let n: usize = blocks.iter().map(|b| b.lengths.len()).sum();
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0);
    let mut offsets = Vec::with_capacity(blocks.len() + 1);
    offsets.push(0);
    for block in &blocks {
        for &len in &block.lengths {
            indptr.push(indptr.last().copied().unwrap_or(0) + len);
        }
        offsets.push(offsets.last().copied().unwrap_or(0) + block.indices.len());
    }
    let nnz = offsets.last().copied().unwrap_or(0);
    let mut indices = vec![0usize; nnz];
    let mut values = vec![0.0; nnz];
    let index_parts = split_at_offsets(&mut indices, &offsets);
    let value_parts = split_at_offsets(&mut values, &offsets);
    blocks.par_iter().zip(index_parts).zip(value_parts).for_each(|((block, i), v)| {
        i.copy_from_slice(&block.indices);
        v.copy_from_slice(&block.values);
    });
    HostCsr { n, n_cols, indptr, indices, values }
}

/// Prefix sums of `counts`, starting at 0 (one more entry than `counts`): the starts of groups
/// of those sizes in a CSR-like array.
pub fn prefix_sums(counts: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut sums = vec![0usize];
    sums.extend(counts.scan(0usize, |total, count| {
        *total += count;
        Some(*total)
    }));
    sums
}

/// `slice` cut at `offsets` (non-decreasing, from 0 to `slice.len()`): piece p is
/// `slice[offsets[p]..offsets[p + 1]]`. For filling the rows of a CSR-like array in parallel.
pub fn split_at_offsets<'a, T>(mut slice: &'a mut [T], offsets: &[usize]) -> Vec<&'a mut [T]> {
    let mut parts = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (part, rest) = std::mem::take(&mut slice).split_at_mut(w[1] - w[0]);
        parts.push(part);
        slice = rest;
    }
    parts
}

/// A CSR matrix of `n` rows and `n_cols` columns whose row i is what `row(i, accumulator)`
/// adds to the accumulator (entries of one column summed in the order they are added),
/// rows in parallel.
pub fn assemble_rows(
    n: usize,
    n_cols: usize,
    row: impl Fn(usize, &mut Accumulator) + Sync,
) -> HostCsr {
    let per_task = rows_per_task(n);
    let blocks: Vec<RowBlock> = (0..n.div_ceil(per_task))
        .into_par_iter()
        .map(|task| {
            ACCUMULATOR.with_borrow_mut(|accumulator| {
                accumulator.reset(n_cols);
                let rows = task * per_task..((task + 1) * per_task).min(n);
                let mut block = RowBlock {
                    lengths: Vec::with_capacity(rows.len()),
                    indices: Vec::new(),
                    values: Vec::new(),
                };
                for i in rows {
                    row(i, accumulator);
                    let len = accumulator.drain_sorted(&mut block.indices, &mut block.values);
                    block.lengths.push(len);
                }
                block
            })
        })
        .collect();
    concatenate(blocks, n_cols)
}

/// A dense accumulator of one sparse row: values by column, which columns are in use, and
/// their list. Kept per thread (a fresh one per task would clear n_cols entries every time).
#[derive(Default)]
pub struct Accumulator {
    values: Vec<f64>,
    seen: Vec<bool>,
    columns: Vec<usize>,
}

impl Accumulator {
    /// Ready for rows of `n_cols` columns (grows, never shrinks; `seen` is all false between
    /// rows).
    fn reset(&mut self, n_cols: usize) {
        if self.seen.len() < n_cols {
            self.values.resize(n_cols, 0.0);
            self.seen.resize(n_cols, false);
        }
        self.columns.clear();
    }

    /// Adds `value` to column j of the row.
    pub fn add(&mut self, j: usize, value: f64) {
        if !self.seen[j] {
            self.seen[j] = true;
            self.values[j] = 0.0;
            self.columns.push(j);
        }
        self.values[j] += value;
    }

    /// Multiplies the row's entries so far by `factor`.
    pub fn scale(&mut self, factor: f64) {
        for &j in &self.columns {
            self.values[j] *= factor;
        }
    }

    /// Appends the row's entries in column order and clears it; returns their number.
    fn drain_sorted(&mut self, indices: &mut Vec<usize>, values: &mut Vec<f64>) -> usize {
        self.columns.sort_unstable();
        for &j in &self.columns {
            indices.push(j);
            values.push(self.values[j]);
            self.seen[j] = false;
        }
        let len = self.columns.len();
        self.columns.clear();
        len
    }
}

thread_local! {
    static ACCUMULATOR: std::cell::RefCell<Accumulator> = std::cell::RefCell::new(Accumulator::default());
}

/// Groups per parallel task in [`for_each_group`].
const GROUPS_PER_TASK: usize = 2048;

/// Calls `f(g, part, scratch)` for every group g of a CSR-like array (`data[start[g]..start[g +
/// 1]]` is `part`), groups in parallel, with a scratch vector reused within a task.
pub fn for_each_group<T: Send, S: Default>(
    data: &mut [T],
    start: &[usize],
    f: impl Fn(usize, &mut [T], &mut S) + Sync,
) {
    let n_groups = start.len() - 1;
    let task_offsets: Vec<usize> = (0..n_groups.div_ceil(GROUPS_PER_TASK))
        .map(|t| start[t * GROUPS_PER_TASK])
        .chain([start[n_groups]])
        .collect();
    split_at_offsets(data, &task_offsets).into_par_iter().enumerate().for_each(|(task, part)| {
        let mut scratch = S::default();
        let first = task * GROUPS_PER_TASK;
        let groups = first..(first + GROUPS_PER_TASK).min(n_groups);
        for (g, part) in groups.clone().zip(split_at_offsets(
            part,
            &start[groups.start..=groups.end].iter().map(|&s| s - start[first]).collect::<Vec<_>>(),
        )) {
            f(g, part, &mut scratch);
        }
    });
}

/// Inverts a map from entries to groups: the entries of each group in increasing order, group
/// g's at `entries[start[g]..start[g + 1]]` (`group(e)` None: entry e is in no group). Counted
/// and placed with atomics, then sorted per group, in parallel: the result does not depend on
/// the threads.
pub fn invert(
    n_entries: usize,
    n_groups: usize,
    group: impl Fn(usize) -> Option<usize> + Sync,
) -> (Vec<usize>, Vec<u32>) {
    let next: Vec<AtomicUsize> =
        (0..n_groups).into_par_iter().map(|_| AtomicUsize::new(0)).collect();
    (0..n_entries).into_par_iter().filter_map(&group).for_each(|g| {
        next[g].fetch_add(1, Relaxed);
    });
    let mut start = Vec::with_capacity(n_groups + 1);
    start.push(0);
    for count in &next {
        start.push(start[start.len() - 1] + count.load(Relaxed));
    }
    next.par_iter().zip(&start[..n_groups]).for_each(|(next, &s)| next.store(s, Relaxed));
    let entries: Vec<AtomicU32> =
        (0..start[n_groups]).into_par_iter().map(|_| AtomicU32::new(0)).collect();
    (0..n_entries).into_par_iter().for_each(|e| {
        if let Some(g) = group(e) {
            entries[next[g].fetch_add(1, Relaxed)].store(e as u32, Relaxed);
        }
    });
    let mut entries: Vec<u32> = entries.into_iter().map(AtomicU32::into_inner).collect();
    for_each_group(&mut entries, &start, |_, part, _: &mut ()| part.sort_unstable());
    (start, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A few long rows (as a coarse level's P^T (A P)) are split into tasks of one row, many
    /// rows into tasks of ROWS_PER_TASK; the matrix is the same, every bit, on one thread and
    /// on several, and its rows are the ones asked for.
    #[test]
    fn assembled_rows_do_not_depend_on_the_task_split() {
        let row = |i: usize, accumulator: &mut Accumulator| {
            for k in 0..500 {
                let j = (i * 31 + k * 17) % 97;
                accumulator.add(j, 1.0 / (1 + i + k) as f64);
            }
        };
        let pool = |threads| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        for n in [3, 40, 9000] {
            let one = pool(1).install(|| assemble_rows(n, 97, row));
            let several = pool(8).install(|| assemble_rows(n, 97, row));
            assert_eq!(
                (one.indptr.clone(), one.indices.clone()),
                (several.indptr, several.indices)
            );
            assert!(one
                .values
                .iter()
                .zip(&several.values)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert_eq!(one.n, n);
            let i = n - 1;
            let mut want = vec![0.0; 97];
            for k in 0..500 {
                want[(i * 31 + k * 17) % 97] += 1.0 / (1 + i + k) as f64;
            }
            for p in one.indptr[i]..one.indptr[i + 1] {
                assert_eq!(one.values[p], want[one.indices[p]]);
            }
        }
        assert_eq!(pool(8).install(|| rows_per_task(40)), 2);
        assert_eq!(pool(8).install(|| rows_per_task(1_000_000)), ROWS_PER_TASK);
    }

    #[test]
    fn inverting_a_map_lists_each_groups_entries_in_order() {
        // Entry e in group (7 e) mod 5000, every third entry in none; groups span several tasks.
        let n = 20_000;
        let group = |e: usize| (!e.is_multiple_of(3)).then_some(7 * e % 5000);
        let (start, entries) = invert(n, 5000, group);
        assert_eq!(start.len(), 5001);
        for g in 0..5000 {
            let want: Vec<u32> =
                (0..n).filter(|&e| group(e) == Some(g)).map(|e| e as u32).collect();
            assert_eq!(&entries[start[g]..start[g + 1]], &want[..], "group {g}");
        }
        // for_each_group hands every group its own part.
        let mut owner = vec![u32::MAX; entries.len()];
        for_each_group(&mut owner, &start, |g, part, _: &mut ()| part.fill(g as u32));
        for g in 0..5000 {
            assert!(owner[start[g]..start[g + 1]].iter().all(|&o| o == g as u32));
        }
    }
}

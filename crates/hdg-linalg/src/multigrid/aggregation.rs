//! Smoothed aggregation, the host half: which unknowns form an aggregate, and the prolongator
//! that interpolates from the aggregates (Vanek, Mandel & Brezina, Computing 56, 1996).
//!
//! 1. Strength: j is a strong neighbour of i when |a_ij| >= theta sqrt(|a_ii a_jj|).
//! 2. Aggregation, three passes over the unknowns in order (deterministic): an unknown whose
//!    strong neighbours are all free starts an aggregate with them; a leftover unknown joins an
//!    aggregate of the first pass that one of its strong neighbours is in; what is still left
//!    starts an aggregate with its free strong neighbours. Serial on purpose: the parallel
//!    aggregation of GPU multigrid codes (roots a distance-2 independent set with hashed
//!    priorities) took several more iterations on structured meshes, where index order packs
//!    the roots regularly (`benchmarks/history/multigrid.md`, 'A parallel aggregation tried
//!    and not taken').
//! 3. The tentative prolongator T interpolates the near null space (the constants) exactly:
//!    `T[i][agg(i)] = 1 / sqrt(|agg(i)|)` (orthonormal columns).
//! 4. The prolongator is T smoothed by one damped Jacobi step, P = (I - omega / rho D^-1 A) T
//!    with omega = 4/3 and rho an estimate of the spectral radius of D^-1 A; the coarse matrix
//!    is the Galerkin product P^T A P ([`galerkin_products`], through the sparse products of
//!    `multigrid/sparse.rs`).
use hdg_core::sparse_rows::{assemble_rows, for_each_group, prefix_sums};
use hdg_core::{Coarsening, CoreError, HostCsr, Result, SplitLevel};
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use super::sparse::{add_row_product, multiply, transpose};

/// Marks an unknown without aggregate.
const FREE: u32 = u32::MAX;

/// The strong neighbours of every unknown, as a CSR graph (no diagonal; 32-bit columns, half
/// the bytes that the aggregation's passes read), rows in parallel.
///
/// Errors: a matrix of 2^32 rows or more.
pub fn strong_neighbours(a: &HostCsr, theta: f64) -> Result<(Vec<usize>, Vec<u32>)> {
    if u32::try_from(a.n).is_err() {
        return Err(CoreError::Solver(format!(
            "multigrid: a level of {} unknowns, beyond 32-bit indices",
            a.n
        )));
    }
    let diagonal = &diagonal(a);
    let strong = |i: usize| {
        (a.indptr[i]..a.indptr[i + 1]).filter(move |&p| {
            let j = a.indices[p];
            j != i && a.values[p].abs() >= theta * (diagonal[i] * diagonal[j]).abs().sqrt()
        })
    };
    let counts: Vec<usize> = (0..a.n).into_par_iter().map(|i| strong(i).count()).collect();
    let start = prefix_sums(counts.into_iter());
    let mut neighbours = vec![0; start[a.n]];
    for_each_group(&mut neighbours, &start, |i, row, _: &mut ()| {
        for (slot, p) in row.iter_mut().zip(strong(i)) {
            // Below 2^32 (checked above).
            *slot = a.indices[p] as u32;
        }
    });
    Ok((start, neighbours))
}

/// The diagonal of a square CSR matrix (zero where not stored).
pub(crate) fn diagonal(a: &HostCsr) -> Vec<f64> {
    (0..a.n)
        .into_par_iter()
        .map(|i| {
            let cols = &a.indices[a.indptr[i]..a.indptr[i + 1]];
            cols.binary_search(&i).map_or(0.0, |p| a.values[a.indptr[i] + p])
        })
        .collect()
}

/// The aggregate of every unknown and the number of aggregates (standard aggregation, step 2 of
/// the [module docs](self)) of the strength graph `start`, `neighbours`. The first and third
/// passes run in order; the second reads only the first's result, so it runs in parallel.
pub fn aggregate(start: &[usize], neighbours: &[u32]) -> (Vec<usize>, usize) {
    let n = start.len() - 1;
    let strong = |i: usize| neighbours[start[i]..start[i + 1]].iter().map(|&j| j as usize);
    // 32-bit aggregates (fewer than the unknowns, which strong_neighbours keeps below 2^32):
    // the first pass's reads and writes are half the bytes.
    let mut first = vec![FREE; n];
    let mut count = 0;
    for i in 0..n {
        if first[i] == FREE && strong(i).all(|j| first[j] == FREE) {
            first[i] = count;
            for j in strong(i) {
                first[j] = count;
            }
            count += 1;
        }
    }
    let mut aggregate: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| match first[i] {
            FREE => strong(i).map(|j| first[j]).find(|&g| g != FREE).unwrap_or(FREE),
            g => g,
        })
        .collect();
    for i in 0..n {
        if aggregate[i] == FREE {
            aggregate[i] = count;
            for j in strong(i) {
                if aggregate[j] == FREE {
                    aggregate[j] = count;
                }
            }
            count += 1;
        }
    }
    (aggregate.into_par_iter().map(|g| g as usize).collect(), count as usize)
}

/// The aggregate of an unknown that this process does not aggregate (a row of a split
/// level that another process owns).
pub const NO_AGGREGATE: usize = usize::MAX;

/// `T[i][agg(i)] = 1 / sqrt(|agg(i)|)`: n x count, one entry per row, none in a row whose
/// aggregate is [`NO_AGGREGATE`] (an aggregate's size counts the rows listed here: on a split
/// level every aggregate lies within one process).
pub fn tentative_prolongator(aggregate: &[usize], count: usize) -> HostCsr {
    let size: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
    aggregate.par_iter().filter(|&&g| g != NO_AGGREGATE).for_each(|&g| {
        size[g].fetch_add(1, Relaxed);
    });
    let size: Vec<usize> = size.into_iter().map(AtomicUsize::into_inner).collect();
    let indices: Vec<usize> =
        aggregate.par_iter().copied().filter(|&g| g != NO_AGGREGATE).collect();
    HostCsr {
        n: aggregate.len(),
        n_cols: count,
        indptr: match indices.len() == aggregate.len() {
            true => (0..=aggregate.len()).into_par_iter().collect(),
            false => prefix_sums(aggregate.iter().map(|&g| (g != NO_AGGREGATE) as usize)),
        },
        values: indices.par_iter().map(|&g| 1.0 / (size[g] as f64).sqrt()).collect(),
        indices,
    }
}

/// The aggregates of the rows `owned` of a split level (`a` holding those rows), found on the
/// couplings among them alone (aggregation inside each process, "uncoupled" as hypre and
/// MueLu call it): `aggregates_of` applied to the owned block, numbered from 0, and
/// [`NO_AGGREGATE`] for the other rows; and their number.
pub(crate) fn owned_aggregates(
    a: &HostCsr,
    owned: &[bool],
    aggregates_of: impl Fn(&HostCsr) -> Result<(Vec<usize>, usize)>,
) -> Result<(Vec<usize>, usize)> {
    let rows: Vec<usize> = (0..a.n).filter(|&i| owned[i]).collect();
    let mut local = vec![NO_AGGREGATE; a.n];
    rows.iter().enumerate().for_each(|(k, &i)| local[i] = k);
    let block = assemble_rows(rows.len(), rows.len(), |k, accumulator| {
        let i = rows[k];
        for p in a.indptr[i]..a.indptr[i + 1] {
            if let Some(&j) = local.get(a.indices[p]).filter(|&&j| j != NO_AGGREGATE) {
                accumulator.add(j, a.values[p]);
            }
        }
    });
    let (block_aggregates, count) = aggregates_of(&block)?;
    let mut aggregates = vec![NO_AGGREGATE; a.n];
    rows.iter().zip(block_aggregates).for_each(|(&i, g)| aggregates[i] = g);
    Ok((aggregates, count))
}

/// P = (I - c D^-1 A) T, c = omega / rho, rows in parallel: row i is (A T)'s row i times
/// -c / a_ii, plus T's row i.
/// With `owned`, only those rows (the rest empty).
pub(crate) fn smooth_prolongator(
    a: &HostCsr,
    diagonal: &[f64],
    tentative: &HostCsr,
    omega_over_rho: f64,
    owned: Option<&[bool]>,
) -> HostCsr {
    debug_assert_eq!(a.n_cols, tentative.n);
    assemble_rows(a.n, tentative.n_cols, |i, accumulator| {
        if owned.is_some_and(|owned| !owned[i]) {
            return;
        }
        add_row_product(a, tentative, i, accumulator);
        accumulator.scale(-omega_over_rho / diagonal[i]);
        for q in tentative.indptr[i]..tentative.indptr[i + 1] {
            accumulator.add(tentative.indices[q], tentative.values[q]);
        }
    })
}

/// The products of one coarsening on the host: P (`smooth_prolongator` of `tentative`, step 4
/// of the [module docs](self)), P^T and P^T (A P). What [`hdg_core::MultigridOps::coarsen`]
/// computes where a backend does it itself, to the bit.
pub fn galerkin_products(
    a: &HostCsr,
    tentative: &HostCsr,
    omega_over_rho: f64,
) -> Coarsening<HostCsr> {
    let p = smooth_prolongator(a, &diagonal(a), tentative, omega_over_rho, None);
    let restrict = transpose(&p);
    let coarse = multiply(&restrict, &multiply(a, &p));
    Coarsening { prolong: p, restrict, coarse, coarse_on_backend: None }
}

/// [`galerkin_products`] of a level split among processes (`split`; `a` and `tentative`
/// holding this process's rows): each process forms P's owned rows, for which it needs the
/// tentative rows of its ghost unknowns (the columns of its rows of A), then A P's owned rows,
/// for which it needs P's ghost rows, and its share P_own^T (A P)_own of P^T A P; the shares
/// are summed over the processes, so that every process holds the whole coarse matrix. P and
/// P^T keep the owned rows (columns) only: the cycle's restriction sums them over the
/// processes, its prolongation keeps the owned entries.
pub(crate) fn split_galerkin_products(
    split: &dyn SplitLevel,
    a: &HostCsr,
    tentative: &HostCsr,
    omega_over_rho: f64,
) -> Result<Coarsening<HostCsr>> {
    let owned = split.owned();
    let tentative = split.fill_ghost_rows(tentative)?;
    let p = smooth_prolongator(a, &diagonal(a), &tentative, omega_over_rho, Some(owned));
    let product = multiply(a, &split.fill_ghost_rows(&p)?);
    let restrict = transpose(&p);
    let coarse = split.sum(&multiply(&restrict, &product))?;
    Ok(Coarsening { prolong: p, restrict, coarse, coarse_on_backend: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 1D Laplacian tridiag(-1, 2, -1) of size n.
    fn laplacian(n: usize) -> HostCsr {
        let mut a = HostCsr { n, n_cols: n, indptr: vec![0], ..Default::default() };
        for i in 0..n {
            for j in i.saturating_sub(1)..(i + 2).min(n) {
                a.indices.push(j);
                a.values.push(if i == j { 2.0 } else { -1.0 });
            }
            a.indptr.push(a.indices.len());
        }
        a
    }

    #[test]
    fn a_path_aggregates_in_threes() {
        let a = laplacian(9);
        let (start, neighbours) = strong_neighbours(&a, 0.25).unwrap();
        let (agg, count) = aggregate(&start, &neighbours);
        // 0 starts {0, 1}; 2 has a taken neighbour (1), so 3 starts {2, 3, 4}; 6 starts
        // {5, 6, 7}; 8 joins the first-pass aggregate of its neighbour 7.
        assert_eq!(agg, vec![0, 0, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(count, 3);
        let t = tentative_prolongator(&agg, count);
        // Columns orthonormal: T^T T = I.
        let tt = multiply(&transpose(&t), &t);
        for i in 0..tt.n {
            for p in tt.indptr[i]..tt.indptr[i + 1] {
                let want = if tt.indices[p] == i { 1.0 } else { 0.0 };
                assert!((tt.values[p] - want).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn owned_rows_aggregate_among_themselves() {
        // A path of 9 whose rows 3..6 another process owns: rows 0..3 and 6..9 aggregate on
        // their own couplings (the path's two ends, not joined through the rows between).
        let a = laplacian(9);
        let owned: Vec<bool> = (0..9).map(|i| !(3..6).contains(&i)).collect();
        let aggregates_of = |block: &HostCsr| {
            let (start, neighbours) = strong_neighbours(block, 0.25)?;
            Ok(aggregate(&start, &neighbours))
        };
        let (agg, count) = owned_aggregates(&a, &owned, aggregates_of).unwrap();
        // Block rows 0..6 (rows 0, 1, 2, 6, 7, 8): two paths of 3, one aggregate each.
        let none = NO_AGGREGATE;
        assert_eq!(agg, vec![0, 0, 0, none, none, none, 1, 1, 1]);
        assert_eq!(count, 2);
        let t = tentative_prolongator(&agg, count);
        assert_eq!(t.indptr, vec![0, 1, 2, 3, 3, 3, 3, 4, 5, 6]);
        assert_eq!(t.indices, vec![0, 0, 0, 1, 1, 1]);
        assert!(t.values.iter().all(|&v| (v - 1.0 / 3f64.sqrt()).abs() < 1e-15));
        // The smoothed prolongator keeps the rows it is given only.
        let p = smooth_prolongator(&a, &diagonal(&a), &t, 0.5, Some(&owned));
        assert!((3..6).all(|i| p.indptr[i] == p.indptr[i + 1]));
        assert!(p.indptr[3] > 0 && p.indptr[9] > p.indptr[6]);
    }

    #[test]
    fn weak_connections_are_dropped() {
        let mut a = laplacian(3);
        a.values[1] = -1e-3; // a_01
        a.values[2] = -1e-3; // a_10
        let (start, neighbours) = strong_neighbours(&a, 0.1).unwrap();
        assert_eq!(&neighbours[start[0]..start[1]], &[] as &[u32]);
        assert_eq!(&neighbours[start[1]..start[2]], &[2]);
    }

    #[test]
    fn smoothed_prolongator_keeps_constants_and_galerkin_is_symmetric() {
        let a = laplacian(12);
        let (start, neighbours) = strong_neighbours(&a, 0.0).unwrap();
        let (agg, count) = aggregate(&start, &neighbours);
        let t = tentative_prolongator(&agg, count);
        let p = smooth_prolongator(&a, &diagonal(&a), &t, 4.0 / 3.0 / 2.0, None);
        // Interior rows of P reproduce the constant that T does (A 1 = 0 away from the ends).
        let sizes: Vec<f64> =
            (0..count).map(|g| agg.iter().filter(|&&x| x == g).count() as f64).collect();
        let ones: Vec<f64> = sizes.iter().map(|s| s.sqrt()).collect();
        for i in 2..10 {
            let value: f64 =
                (p.indptr[i]..p.indptr[i + 1]).map(|q| p.values[q] * ones[p.indices[q]]).sum();
            assert!((value - 1.0).abs() < 1e-14, "row {i}: {value}");
        }
        let ac = multiply(&transpose(&p), &multiply(&a, &p));
        assert_eq!(ac.n, count);
        let dense = |i: usize, j: usize| {
            let cols = &ac.indices[ac.indptr[i]..ac.indptr[i + 1]];
            cols.binary_search(&j).map_or(0.0, |q| ac.values[ac.indptr[i] + q])
        };
        for i in 0..count {
            assert!(dense(i, i) > 0.0);
            for j in 0..count {
                assert!((dense(i, j) - dense(j, i)).abs() < 1e-14);
            }
        }
    }
}

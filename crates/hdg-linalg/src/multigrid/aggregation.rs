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
    strong_neighbours_with(a, theta, &diagonal(a))
}

/// [`strong_neighbours`] with the matrix's diagonal given: on a level split among processes,
/// `a` holds this process's rows (the others empty) and `diagonal` is the whole level's.
pub(crate) fn strong_neighbours_with(
    a: &HostCsr,
    theta: f64,
    diagonal: &[f64],
) -> Result<(Vec<usize>, Vec<u32>)> {
    if u32::try_from(a.n).is_err() {
        return Err(CoreError::Solver(format!(
            "multigrid: a level of {} unknowns, beyond 32-bit indices",
            a.n
        )));
    }
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

/// `T[i][agg(i)] = 1 / sqrt(|agg(i)|)`: n x count, one entry per row.
pub fn tentative_prolongator(aggregate: &[usize], count: usize) -> HostCsr {
    let size: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
    aggregate.par_iter().for_each(|&g| {
        size[g].fetch_add(1, Relaxed);
    });
    let size: Vec<usize> = size.into_iter().map(AtomicUsize::into_inner).collect();
    HostCsr {
        n: aggregate.len(),
        n_cols: count,
        indptr: (0..=aggregate.len()).into_par_iter().collect(),
        indices: aggregate.to_vec(),
        values: aggregate.par_iter().map(|&g| 1.0 / (size[g] as f64).sqrt()).collect(),
    }
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

/// [`galerkin_products`] of a level split among processes (`split`; `a` holding this
/// process's rows, `tentative` every row: the aggregates are the whole level's): each process
/// forms P's owned rows, then A P's owned rows, for which it needs P's ghost rows (from their
/// owners), and its share P_own^T (A P)_own of P^T A P; the shares are summed over the
/// processes, so that every process holds the whole coarse matrix. P and P^T keep the owned
/// rows (columns) only: the cycle's restriction sums them over the processes, its
/// prolongation keeps the owned entries.
pub(crate) fn split_galerkin_products(
    split: &dyn SplitLevel,
    a: &HostCsr,
    tentative: &HostCsr,
    omega_over_rho: f64,
) -> Result<Coarsening<HostCsr>> {
    let owned = Some(&split.owned()[..]);
    let p = smooth_prolongator(a, &diagonal(a), tentative, omega_over_rho, owned);
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

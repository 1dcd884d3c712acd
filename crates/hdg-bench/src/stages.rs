//! `hdg bench`: per-stage measurements of the CPU backend, with the baselines measured in the
//! same run (memory-copy bandwidth, CSR SpMV on the same matrix, faer on the same dense work).
use std::time::Instant;

use hdg_backend_cpu::stages::condense::condensation_flops;
use hdg_backend_cpu::{dense, CpuBackend};
use hdg_core::{
    Assembler, CoreError, Discretization, KrylovSolver, LocalSolver, Postprocessor, TraceOperator,
};
use hdg_linalg::{ConjugateGradient, Preconditioning};
use hdg_mesh::{generate, Diagonal, Mesh};
use rayon::prelude::*;
use serde::Serialize;

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Orders to measure.
    pub orders: Vec<usize>,
    /// Approximate trace unknowns per problem.
    pub target_dofs: usize,
    /// SpMV repetitions (the median is reported).
    pub spmv_repeats: usize,
    /// Whether to run the trace solve (the slowest part).
    pub solve: bool,
    /// Tolerance of the solve.
    pub tolerance: f64,
}

/// One order's measurements.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub order: usize,
    pub n: usize,
    pub cells: usize,
    pub trace_dofs: usize,
    pub setup_s: f64,
    pub condense_s: f64,
    pub condense_cells_per_s: f64,
    pub condense_gflops: f64,
    pub assemble_s: f64,
    pub dbf_spmv_s: f64,
    pub dbf_spmv_gbs: f64,
    pub dbf_fraction_of_copy: f64,
    pub csr_parallel_spmv_s: f64,
    pub csr_serial_spmv_s: f64,
    pub dbf_speedup_over_csr_parallel: f64,
    pub solve_iterations: Option<usize>,
    pub solve_s: Option<f64>,
    pub solve_relative_residual: Option<f64>,
    pub recover_s: f64,
    pub postprocess_s: f64,
    pub matrix_bytes_per_dof: f64,
    pub csr_bytes_per_dof: f64,
    pub recovery_bytes_per_dof: f64,
    pub error_u: f64,
    pub error_u_star: f64,
}

/// Small dense kernels against faer on the condensation's work, one order.
#[derive(Clone, Debug, Serialize)]
pub struct DenseRow {
    pub order: usize,
    pub n: usize,
    pub nl: usize,
    pub ours_us_per_element: f64,
    pub faer_us_per_element: f64,
    pub faer_over_ours: f64,
}

/// The element benchmarks' mesh (condense-bench, coefficient-bench): about `cells` cells of
/// dimension `dim`, perturbed, deterministic (triangles of a unit square, Kuhn tetrahedra of a
/// unit cube).
pub fn element_benchmark_mesh(dim: usize, cells: f64) -> hdg_core::Result<Mesh> {
    if dim == 2 {
        let n = ((cells / 2.0).sqrt().ceil() as usize).max(2);
        Ok(generate::perturb(&generate::unit_square(n, Diagonal::Alternating)?, 0.2, 7)?)
    } else {
        let n = ((cells / 6.0).cbrt().ceil() as usize).max(2);
        Ok(generate::perturb(&generate::unit_cube(n)?, 0.15, 7)?)
    }
}

/// Memory-copy bandwidth in GB/s (bytes read + bytes written), best of several copies of a
/// buffer far larger than the caches, on all threads.
pub fn copy_bandwidth() -> f64 {
    let len = 1 << 25; // 32 Mi doubles = 256 MiB
    let src: Vec<f64> = (0..len).into_par_iter().map(|i| i as f64).collect();
    let mut dst = vec![0.0f64; len];
    let mut best = f64::INFINITY;
    for _ in 0..6 {
        let start = Instant::now();
        dst.par_chunks_mut(1 << 16)
            .zip(src.par_chunks(1 << 16))
            .for_each(|(d, s)| d.copy_from_slice(s));
        best = best.min(start.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    2.0 * (len * 8) as f64 / best / 1e9
}

/// Streaming read bandwidth in GB/s (a sum over 256 MiB), best of 6, on all threads: the
/// ceiling of a read-dominated kernel such as an SpMV.
pub fn read_bandwidth() -> f64 {
    let len = 1 << 25;
    let src: Vec<f64> = (0..len).into_par_iter().map(|i| (i % 7) as f64).collect();
    let mut best = f64::INFINITY;
    for _ in 0..6 {
        let start = Instant::now();
        // Eight independent partial sums, so the adds do not serialise and the loop is
        // limited by memory, not by the latency of one accumulator.
        let s: f64 = src
            .par_chunks(1 << 16)
            .map(|c| {
                let mut acc = [0.0f64; 8];
                for v in c.chunks_exact(8) {
                    for (a, &x) in acc.iter_mut().zip(v) {
                        *a += x;
                    }
                }
                acc.iter().sum::<f64>()
            })
            .sum();
        std::hint::black_box(s);
        best = best.min(start.elapsed().as_secs_f64());
    }
    (len * 8) as f64 / best / 1e9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_repeated(repeats: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up: page faults, caches
    median(
        (0..repeats)
            .map(|_| {
                let s = Instant::now();
                f();
                s.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// y = A x for a CSR matrix, rows split over the Rayon pool (the fair comparison at equal
/// thread count: sprs's own product is serial).
fn csr_spmv_parallel(a: &sprs::CsMat<f64>, x: &[f64], y: &mut [f64]) {
    let (indptr, indices, data) = (a.indptr(), a.indices(), a.data());
    let indptr = indptr.raw_storage();
    y.par_chunks_mut(1024).enumerate().for_each(|(chunk, ys)| {
        for (r, yr) in ys.iter_mut().enumerate() {
            let row = chunk * 1024 + r;
            let (lo, hi) = (indptr[row], indptr[row + 1]);
            *yr = indices[lo..hi].iter().zip(&data[lo..hi]).map(|(&c, &v)| v * x[c]).sum();
        }
    });
}

/// Runs the per-order benchmark.
pub fn run(
    options: &BenchOptions,
    mut log: impl FnMut(&str),
) -> Result<(f64, Vec<BenchRow>), CoreError> {
    let backend = CpuBackend::new();
    let mut copy = copy_bandwidth();
    log(&format!(
        "memory copy bandwidth: {copy:.2} GB/s, streaming read: {:.2} GB/s",
        read_bandwidth()
    ));
    let mut rows = Vec::new();
    for &k in &options.orders {
        // trace dofs = (3 N^2 - 2 N)(k + 1) for the unit square
        let n = ((options.target_dofs as f64 / (3.0 * (k + 1) as f64)).sqrt()).ceil() as usize;
        let mesh = generate::unit_square(n, Diagonal::Right)?;
        let problem = hdg_core::Problem::manufactured(hdg_core::Manufactured::Sine, 1.0, 0.0);
        let s = Instant::now();
        let disc = Discretization::<f64>::new(&mesh, &problem, k)?;
        let prep = backend.prepare(&disc)?;
        let setup_s = s.elapsed().as_secs_f64();
        let s = Instant::now();
        let condensed = backend.condense(&disc, &prep)?;
        let condense_s = s.elapsed().as_secs_f64();
        let s = Instant::now();
        let (matrix, rhs) = backend.assemble(&disc, &prep, &condensed)?;
        let assemble_s = s.elapsed().as_secs_f64();
        let dofs = disc.trace_dofs();

        let x: Vec<f64> = (0..dofs).map(|i| ((i % 97) as f64).sin()).collect();
        let mut y = vec![0.0; dofs];
        let dbf_s = time_repeated(options.spmv_repeats, || matrix.spmv(&x, &mut y));
        let csr = hdg::matrix_market::to_sprs(matrix.to_host_csr()?);
        let mut y_csr = vec![0.0; dofs];
        let csr_par_s =
            time_repeated(options.spmv_repeats, || csr_spmv_parallel(&csr, &x, &mut y_csr));
        let diff = y.iter().zip(&y_csr).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        let scale = y.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(diff <= 1e-12 * scale, "DBF and CSR SpMV disagree: {diff:e}");
        let csr_ser_s = time_repeated(options.spmv_repeats.min(5), || {
            y_csr.iter_mut().for_each(|v| *v = 0.0);
            sprs::prod::mul_acc_mat_vec_csr(csr.view(), &x[..], &mut y_csr[..]);
        });
        copy = copy.max(copy_bandwidth());
        let gbs = matrix.spmv_bytes() as f64 / dbf_s / 1e9;
        let csr_bytes = (csr.nnz() * 16 + (dofs + 1) * 8) as f64;

        let (solve_iterations, solve_s, solve_rr, trace) = if options.solve {
            let cg = ConjugateGradient::new(
                options.tolerance,
                hdg::DEFAULT_MAX_ITERATIONS,
                Preconditioning::Jacobi,
            );
            let mut xs = vec![0.0; dofs];
            let s = Instant::now();
            let report = KrylovSolver::<f64, CpuBackend>::solve(
                &cg,
                &backend,
                &matrix as &dyn TraceOperator<f64, Vector = Vec<f64>>,
                &rhs,
                &mut xs,
            )?;
            (
                Some(report.iterations),
                Some(s.elapsed().as_secs_f64()),
                Some(report.relative_residual),
                xs,
            )
        } else {
            (None, None, None, vec![0.0; dofs])
        };
        let s = Instant::now();
        let fields = backend.recover(&disc, &prep, &condensed, &trace)?;
        let recover_s = s.elapsed().as_secs_f64();
        let s = Instant::now();
        let post = backend.postprocess(&disc, &prep, &fields)?;
        let errors =
            backend.error_norms(&disc, &prep, &fields, &post, problem.exact.as_ref().unwrap())?;
        let postprocess_s = s.elapsed().as_secs_f64();

        let flops = condensation_flops(&disc.tables) * mesh.n_cells() as f64;
        let row = BenchRow {
            order: k,
            n,
            cells: mesh.n_cells(),
            trace_dofs: dofs,
            setup_s,
            condense_s,
            condense_cells_per_s: mesh.n_cells() as f64 / condense_s,
            condense_gflops: flops / condense_s / 1e9,
            assemble_s,
            dbf_spmv_s: dbf_s,
            dbf_spmv_gbs: gbs,
            dbf_fraction_of_copy: gbs / copy,
            csr_parallel_spmv_s: csr_par_s,
            csr_serial_spmv_s: csr_ser_s,
            dbf_speedup_over_csr_parallel: csr_par_s / dbf_s,
            solve_iterations,
            solve_s,
            solve_relative_residual: solve_rr,
            recover_s,
            postprocess_s,
            matrix_bytes_per_dof: matrix.memory_bytes() as f64 / dofs as f64,
            csr_bytes_per_dof: csr_bytes / dofs as f64,
            recovery_bytes_per_dof: condensed.recovery_bytes() as f64 / dofs as f64,
            error_u: errors.u,
            error_u_star: errors.u_star,
        };
        log(&format!("{row:?}"));
        rows.push(row);
    }
    Ok((copy, rows))
}

/// Times the condensation's dense work (Cholesky of S, L^-1 P, A - W^T W, L^-T W) per element
/// with our kernels and with faer, on the same matrices.
pub fn dense_comparison(orders: &[usize], elements: usize) -> Vec<DenseRow> {
    use faer::linalg::matmul::matmul;
    use faer::linalg::triangular_solve::{
        solve_lower_triangular_in_place, solve_upper_triangular_in_place,
    };
    use faer::{Accum, Mat, MatRef, Par, Side};
    orders
        .iter()
        .map(|&k| {
            let n = (k + 1) * (k + 2) / 2;
            let nl = 3 * (k + 1);
            // SPD S = B B^T + n I, arbitrary P and A.
            let b: Vec<f64> = (0..n * n).map(|i| ((i * 7919 % 101) as f64 / 50.0) - 1.0).collect();
            let mut s = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    s[i * n + j] = (0..n).map(|l| b[i * n + l] * b[j * n + l]).sum::<f64>();
                }
                s[i * n + i] += n as f64;
            }
            let p: Vec<f64> = (0..n * nl).map(|i| (i as f64 * 0.37).cos()).collect();
            let a: Vec<f64> = (0..nl * nl).map(|i| (i as f64 * 0.11).sin()).collect();

            let start = Instant::now();
            let (mut sw, mut pw, mut aw) = (s.clone(), p.clone(), a.clone());
            for _ in 0..elements {
                sw.copy_from_slice(&s);
                pw.copy_from_slice(&p);
                aw.copy_from_slice(&a);
                dense::cholesky(n, &mut sw).unwrap();
                dense::forward_substitution(n, nl, &sw, &mut pw);
                dense::subtract_gram(n, nl, &pw, &mut aw);
                dense::backward_substitution(n, nl, &sw, &mut pw);
                std::hint::black_box((&aw, &pw));
            }
            let ours = start.elapsed().as_secs_f64() / elements as f64;

            let start = Instant::now();
            for _ in 0..elements {
                let sm = MatRef::from_row_major_slice(&s, n, n);
                let mut pm = Mat::from_fn(n, nl, |i, j| p[i * nl + j]);
                let mut am = Mat::from_fn(nl, nl, |i, j| a[i * nl + j]);
                let llt = sm.llt(Side::Lower).unwrap();
                let l = llt.L();
                solve_lower_triangular_in_place(l, pm.as_mut(), Par::Seq);
                matmul(am.as_mut(), Accum::Add, pm.transpose(), pm.as_ref(), -1.0, Par::Seq);
                solve_upper_triangular_in_place(l.transpose(), pm.as_mut(), Par::Seq);
                std::hint::black_box((&am, &pm));
            }
            let faer_t = start.elapsed().as_secs_f64() / elements as f64;
            DenseRow {
                order: k,
                n,
                nl,
                ours_us_per_element: ours * 1e6,
                faer_us_per_element: faer_t * 1e6,
                faer_over_ours: faer_t / ours,
            }
        })
        .collect()
}

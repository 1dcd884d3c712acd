//! Faster forms of CPU kernels that must give the bits of the plain ones: the multigrid
//! smoother's fusions (block Jacobi with the Chebyshev recurrence step, the DBF product with
//! the residual update) against the unfused sequences, the column-by-column block product
//! against a row-by-row one, and the postprocessing in batches of SIMD lanes against one
//! element at a time, and the condensation in batches against one element at a time. The solver's and the pipeline's results do not depend on which runs.
//! Also the multigrid's bfloat16 smoothing copy of the trace matrix: its rounding, its
//! symmetry and its product.
use hdg_backend_cpu::{Bf16, CpuBackend};
use hdg_core::{
    Assembler, BlockOps, DbfEntries, DemoteOperator, Discretization, LocalSolver, Manufactured,
    Problem, Real, RecurrenceStep, TraceOperator, VectorOps,
};
use hdg_mesh::{generate, Diagonal, Mesh};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.as_f64().to_bits()).collect()
}

fn random<T: Real>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f64_lossy(rng.gen_range(-1.0..1.0))).collect()
}

/// `n_blocks` random SPD blocks of size `b`: M M^T + b I, the product by faer.
fn spd_blocks<T: Real>(rng: &mut StdRng, b: usize, n_blocks: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(n_blocks * b * b);
    for _ in 0..n_blocks {
        let m = faer::Mat::<f64>::from_fn(b, b, |_, _| rng.gen_range(-1.0..1.0));
        let spd = &m * m.transpose() + faer::Mat::<f64>::identity(b, b) * faer::Scale(b as f64);
        // The lower triangle mirrored: exactly symmetric whatever order faer summed in.
        let (i, j) = (|ij: usize| ij / b, |ij: usize| ij % b);
        out.extend(
            (0..b * b).map(|ij| T::from_f64_lossy(spd[(i(ij).max(j(ij)), i(ij).min(j(ij)))])),
        );
    }
    out
}

fn block_jacobi_steps<T: Real>() {
    let backend = CpuBackend;
    let mut rng = StdRng::seed_from_u64(11);
    // Every size compiled on its own, and two that take the row-by-row loop; 600 blocks span
    // three parallel tasks.
    for b in (1..=13).chain([15]) {
        let n_blocks = 600;
        let n = b * n_blocks;
        let mut factors = spd_blocks::<T>(&mut rng, b, n_blocks);
        backend.factor_blocks(&mut factors, b).unwrap();
        let r = random::<T>(&mut rng, n);

        // Against a row-by-row product, summed in column order.
        let mut z = vec![T::zero(); n];
        backend.solve_blocks(&factors, b, &r, &mut z).unwrap();
        let rows: Vec<T> = (0..n)
            .map(|i| {
                let (block, row) = (i / b, i % b);
                let inverse = &factors[(block * b + row) * b..][..b];
                inverse.iter().zip(&r[block * b..][..b]).map(|(&a, &x)| a * x).sum()
            })
            .collect();
        assert_eq!(bits(&z), bits(&rows), "block size {b}: solve_blocks");

        // The fused step against solve_blocks and RecurrenceStep::update.
        let (alpha, beta) = (T::from_f64_lossy(0.37), T::from_f64_lossy(-0.21));
        for step in [RecurrenceStep::First { alpha }, RecurrenceStep::Next { alpha, beta }] {
            let (p0, x0) = (random::<T>(&mut rng, n), random::<T>(&mut rng, n));
            let (mut p, mut x, mut w) = (p0.clone(), x0.clone(), vec![T::zero(); n]);
            backend.solve_blocks_step(&factors, b, &r, &mut w, step, &mut p, &mut x).unwrap();
            let (mut p_ref, mut x_ref, mut w_ref) = (p0.clone(), x0.clone(), vec![T::zero(); n]);
            backend.solve_blocks(&factors, b, &r, &mut w_ref).unwrap();
            step.update(&backend, &w_ref, &mut p_ref, &mut x_ref).unwrap();
            assert_eq!(bits(&p), bits(&p_ref), "block size {b}, {step:?}: p");
            assert_eq!(bits(&x), bits(&x_ref), "block size {b}, {step:?}: x");
        }
    }
    // Shapes that do not fit are errors.
    let factors = vec![T::one(); 8];
    let (r, mut p, mut x, mut w) =
        (vec![T::one(); 4], vec![T::one(); 3], vec![T::one(); 4], vec![]);
    let step = RecurrenceStep::First { alpha: T::one() };
    assert!(backend.solve_blocks_step(&factors, 2, &r, &mut w, step, &mut p, &mut x).is_err());
}

#[test]
fn block_jacobi_step_has_the_bits_of_the_unfused_sequence() {
    block_jacobi_steps::<f64>();
    block_jacobi_steps::<f32>();
}

/// The DBF product with an update against `apply` followed by the vector operations, on an
/// assembled trace matrix (`mesh`, order `k`) in f64 and rounded to f32.
fn product_updates(mesh: &Mesh, k: usize) {
    let backend = CpuBackend;
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(mesh, &problem, k).unwrap();
    let prep = backend.prepare(&disc).unwrap();
    let condensed = backend.condense(&disc, &prep).unwrap();
    let (matrix, _) = backend.assemble(&disc, &prep, &condensed).unwrap();
    check_updates(&matrix, k);
    check_updates(&matrix.demote().unwrap(), k);
    check_updates(&matrix.demote().unwrap().to_bf16(), k);
}

fn check_updates<T: Real, O: TraceOperator<T, Vector = Vec<T>>>(matrix: &O, k: usize) {
    let backend = CpuBackend;
    let mut rng = StdRng::seed_from_u64(5);
    let n = matrix.dim();
    assert!(matrix.fuses_update());
    let (x, b, y0) = (random::<T>(&mut rng, n), random::<T>(&mut rng, n), random::<T>(&mut rng, n));
    let mut ax = vec![T::zero(); n];
    matrix.apply(&x, &mut ax).unwrap();
    for alpha in [-1.0, 0.73] {
        let alpha = T::from_f64_lossy(alpha);
        // y += alpha A x
        let mut y = y0.clone();
        matrix.apply_update(alpha, &x, None, &mut y).unwrap();
        let mut y_ref = y0.clone();
        backend.axpy(alpha, &ax, &mut y_ref).unwrap();
        assert_eq!(bits(&y), bits(&y_ref), "k = {k}, alpha {alpha:?}: y += alpha A x");
        // y = b + alpha A x
        let mut y = y0.clone();
        matrix.apply_update(alpha, &x, Some(&b), &mut y).unwrap();
        let mut y_ref = b.clone();
        backend.axpy(alpha, &ax, &mut y_ref).unwrap();
        assert_eq!(bits(&y), bits(&y_ref), "k = {k}, alpha {alpha:?}: y = b + alpha A x");
    }
    // y = b - A x is what xpby(b, -1, A x) gives.
    let mut y = y0.clone();
    matrix.apply_update(-T::one(), &x, Some(&b), &mut y).unwrap();
    let mut y_ref = ax.clone();
    backend.xpby(&b, -T::one(), &mut y_ref).unwrap();
    assert_eq!(bits(&y), bits(&y_ref), "k = {k}: b - A x");
    // Vectors of the wrong length are errors.
    let mut short = vec![T::zero(); n - 1];
    assert!(matrix.apply_update(T::one(), &x, None, &mut short).is_err());
    assert!(matrix.apply_update(T::one(), &x, Some(&short), &mut y).is_err());
}

#[test]
fn dbf_product_update_has_the_bits_of_the_unfused_sequence() {
    // Triangles k = 3 (n_f = 4, compiled on its own, several tasks of rows), and tetrahedra
    // k = 4 (n_f = 15, the loop for any block size).
    product_updates(&generate::unit_square(24, Diagonal::Right).unwrap(), 3);
    product_updates(&generate::unit_cube(2).unwrap(), 4);
}

#[test]
fn bf16_rounds_to_nearest_with_ties_to_even() {
    // Values with 8 significant bits are exact.
    for v in [1.0f32, -2.5, 3.0, 0.0, 2f32.powi(-100), -1.5 * 2f32.powi(100), 0.0078125] {
        assert_eq!(Bf16::from_f32(v).to_f32(), v);
    }
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: even (1) wins; 1 + 3 * 2^-8 goes up.
    assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).to_f32(), 1.0);
    assert_eq!(Bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).to_f32(), 1.0 + 2f32.powi(-6));
    // Just above the halfway point rounds up.
    assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8) + 2f32.powi(-20)).to_f32(), 1.0 + 2f32.powi(-7));
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..10_000 {
        let v: f32 = rng.gen_range(-1.0e6..1.0e6);
        let r = Bf16::from_f32(v).to_f32();
        assert!((r - v).abs() <= v.abs() * 2f32.powi(-8), "{v} -> {r}");
    }
}

/// The trace matrix's bfloat16 copy: every entry is the f32 entry rounded, so the copy of the
/// symmetric trace matrix is symmetric, and its product is the product of those entries.
#[test]
fn the_bf16_copy_is_the_rounded_symmetric_matrix() {
    let backend = CpuBackend;
    let square = generate::unit_square(12, Diagonal::Right).unwrap();
    let mesh = generate::perturb(&square, 0.3, 7).unwrap();
    let problem = Problem::manufactured(Manufactured::Sine, 1.0, 0.0);
    let disc = Discretization::<f64>::new(&mesh, &problem, 2).unwrap();
    let prep = backend.prepare(&disc).unwrap();
    let condensed = backend.condense(&disc, &prep).unwrap();
    let (matrix, _) = backend.assemble(&disc, &prep, &condensed).unwrap();
    let low = matrix.demote().unwrap();
    let copy = low.to_bf16();
    let shape = copy.shape();
    let n_f = shape.n_f;
    let mut checked = 0;
    for row in 0..shape.n_rows {
        for a in 0..shape.slots {
            let Some(column) = copy.column(row, a) else { continue };
            let back =
                (0..shape.slots).find(|&b| copy.column(column as usize, b) == Some(row as u32));
            let back = back.expect("the transposed block is stored");
            for i in 0..n_f {
                for j in 0..n_f {
                    let rounded = Bf16::from_f32(low.entry(row, a, i, j) as f32).to_f32() as f64;
                    assert_eq!(copy.entry(row, a, i, j), rounded);
                    assert_eq!(copy.entry(row, a, i, j), copy.entry(column as usize, back, j, i));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > shape.n_rows * n_f * n_f);
    // The product against the entries, summed in f64: within f32 rounding of the sums.
    let mut rng = StdRng::seed_from_u64(11);
    let x = random::<f32>(&mut rng, copy.dim());
    let mut y = vec![0f32; copy.dim()];
    copy.apply(&x, &mut y).unwrap();
    for row in 0..shape.n_rows {
        for i in 0..n_f {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for a in 0..shape.slots {
                if let Some(column) = copy.column(row, a) {
                    for j in 0..n_f {
                        let term = copy.entry(row, a, i, j) * x[column as usize * n_f + j] as f64;
                        sum += term;
                        magnitude += term.abs();
                    }
                }
            }
            let got = y[row * n_f + i] as f64;
            assert!((got - sum).abs() <= 1e-6 * magnitude, "row {row} {i}: {got} vs {sum}");
        }
    }
}

/// The postprocessing in batches of SIMD lanes (`hdg_core::lanes`) against one element at a
/// time, to the bit: a perturbed mesh whose cell count is not a multiple of the batch width
/// (the last elements go one at a time), random fields, f64 (4 lanes) and f32 (8).
fn batched_postprocessing<T: Real>() {
    use hdg_backend_cpu::stages::postprocess::postprocess_element;
    use hdg_core::{HostFields, Postprocessor};
    let backend = CpuBackend;
    let mesh =
        generate::perturb(&generate::unit_square(9, Diagonal::Left).unwrap(), 0.3, 4).unwrap();
    assert_ne!(mesh.n_cells() % 8, 0);
    let problem = Problem::manufactured(Manufactured::Sine, 1.7, 0.0);
    let disc = Discretization::<T>::new(&mesh, &problem, 3).unwrap();
    let prep = backend.prepare(&disc).unwrap();
    let t = &disc.tables;
    let (n, d, np) = (t.n, t.dim, t.n_post);
    let mut rng = StdRng::seed_from_u64(3);
    let cells = mesh.n_cells();
    let fields =
        HostFields { u: random::<T>(&mut rng, cells * n), q: random::<T>(&mut rng, cells * d * n) };
    let u_star = backend.postprocess(&disc, &prep, &fields).unwrap();
    let stride = prep.layout.stride();
    let mut work = vec![T::zero(); np * np];
    for e in 0..cells {
        let mut one = vec![T::zero(); np];
        postprocess_element(
            t,
            &prep.geometry[e * stride..(e + 1) * stride],
            Some(disc.kappa[e]),
            &fields.u[e * n..(e + 1) * n],
            &fields.q[e * d * n..(e + 1) * d * n],
            &mut work,
            &mut one,
        )
        .unwrap();
        assert_eq!(bits(&u_star[e * np..(e + 1) * np]), bits(&one), "{} element {e}", T::NAME);
    }
}

#[test]
fn batched_postprocessing_has_the_bits_of_one_element_at_a_time() {
    batched_postprocessing::<f64>();
    batched_postprocessing::<f32>();
}

/// The condensation in batches of SIMD lanes (`condense_batch`, what `LocalSolver::condense`
/// runs) against `condense_element` one element at a time, to the bit: perturbed meshes whose
/// cell counts are not multiples of the batch width (the last elements go one at a time), with
/// faces of both orientations in a batch, triangles and tetrahedra, f64 (4 lanes) and f32 (8).
fn batched_condensation<T: Real>() {
    use hdg_backend_cpu::stages::condense::{condense_element, CondenseScratch, CondensedElement};
    let backend = CpuBackend;
    let square =
        generate::perturb(&generate::unit_square(9, Diagonal::Left).unwrap(), 0.3, 4).unwrap();
    let cube = generate::perturb(&generate::unit_cube(3).unwrap(), 0.2, 5).unwrap();
    for (mesh, k) in [(&square, 3), (&cube, 2)] {
        assert_ne!(mesh.n_cells() % 8, 0);
        let problem = Problem::manufactured(Manufactured::Sine, 1.7, 0.3);
        let disc = Discretization::<T>::new(mesh, &problem, k).unwrap();
        let prep = backend.prepare(&disc).unwrap();
        let condensed = backend.condense(&disc, &prep).unwrap();
        let t = &disc.tables;
        let (n, nl, fpc) = (t.n, t.n_local_trace(), t.n_faces);
        let mut scratch = CondenseScratch::new(t);
        let (mut mixed_batches, width) = (0, <T::Lanes as hdg_core::lanes::Batch<T>>::WIDTH);
        for batch in prep.orientations.chunks(width * fpc) {
            let first = &batch[..fpc];
            mixed_batches += batch.chunks(fpc).any(|o| o != first) as usize;
        }
        assert!(mixed_batches > 0, "no batch mixes face orientations");
        for e in 0..mesh.n_cells() {
            let input = prep.element_input(&disc, e);
            let (mut k_e, mut b_e) = (vec![T::zero(); nl * nl], vec![T::zero(); nl]);
            let (mut z, mut u0) = (vec![T::zero(); n * nl], vec![T::zero(); n]);
            let out = CondensedElement {
                trace_matrix: &mut k_e,
                trace_load: &mut b_e,
                recovery_operator: &mut z,
                recovery_load: &mut u0,
            };
            condense_element(t, &input, &problem.source, &mut scratch, out).unwrap();
            let name = format!("{} d = {} element {e}", T::NAME, t.dim);
            let of = |v: &[T], size: usize| bits(&v[e * size..(e + 1) * size]);
            assert_eq!(of(&condensed.trace_matrices, nl * nl), bits(&k_e), "{name}: K_e");
            assert_eq!(of(&condensed.trace_loads, nl), bits(&b_e), "{name}: b_e");
            assert_eq!(of(&condensed.recovery_operator, n * nl), bits(&z), "{name}: Z");
            assert_eq!(of(&condensed.recovery_load, n), bits(&u0), "{name}: u0");
        }
    }
}

#[test]
fn batched_condensation_has_the_bits_of_one_element_at_a_time() {
    batched_condensation::<f64>();
    batched_condensation::<f32>();
}

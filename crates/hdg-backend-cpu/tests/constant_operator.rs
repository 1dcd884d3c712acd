//! The CPU panel loop for constant operators (`hdg_backend_cpu::constant_operator`): products
//! across several parallel tasks, bad shapes refused, the same bits on any number of threads,
//! and the sign of a zero first product. (Its bits against the generated CUDA kernels are checked
//! in hdg-backend-cuda's `codegen` test, through the host emulation of those kernels.)
use hdg_backend_cpu::constant_operator::{PanelError, PanelOperator, ELEMENTS_PER_TASK};
use hdg_core::constant_operator::{Beta, ConstOperator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn random_operator(rng: &mut StdRng, m: usize, k: usize) -> ConstOperator {
    let values =
        (0..m * k).map(|_| if rng.gen::<f64>() < 0.3 { 0.0 } else { rng.gen_range(-2.0..2.0) });
    ConstOperator::new("random", m, k, values.collect()).unwrap()
}

#[test]
fn products_over_several_tasks_match_the_f64_product() {
    let mut rng = StdRng::seed_from_u64(7);
    let op = random_operator(&mut rng, 13, 9);
    // Two full tasks and a third with a partial SIMD block.
    let n = 2 * ELEMENTS_PER_TASK + 45;
    let (ldb, ldc) = (n + 2, n + 7);
    let b: Vec<f64> = (0..op.k() * ldb).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let c0: Vec<f64> = (0..op.m() * ldc).map(|_| rng.gen_range(-1.0..1.0)).collect();
    for beta in Beta::ALL {
        let mut c = c0.clone();
        PanelOperator::<f64>::new(&op).unwrap().apply(beta, n, &b, ldb, &mut c, ldc).unwrap();
        let mut c32: Vec<f32> = c0.iter().map(|&v| v as f32).collect();
        let b32: Vec<f32> = b.iter().map(|&v| v as f32).collect();
        PanelOperator::<f32>::new(&op).unwrap().apply(beta, n, &b32, ldb, &mut c32, ldc).unwrap();
        for i in 0..op.m() {
            for e in 0..ldc {
                let (got, old) = (c[i * ldc + e], c0[i * ldc + e]);
                if e >= n {
                    assert_eq!(got.to_bits(), old.to_bits(), "padding column {e} written");
                    continue;
                }
                let mut exact = if beta == Beta::One { old } else { 0.0 };
                let mut scale = exact.abs();
                for j in 0..op.k() {
                    let p = op.values()[i * op.k() + j] * b[j * ldb + e];
                    exact += p;
                    scale += p.abs();
                }
                assert!((got - exact).abs() <= 1e-14 * scale, "C[{i}][{e}] {got} vs {exact}");
                let got32 = f64::from(c32[i * ldc + e]);
                assert!((got32 - exact).abs() <= 1e-5 * scale, "f32 C[{i}][{e}]");
            }
        }
    }
}

#[test]
fn bad_shapes_are_refused_not_panics() {
    let mut rng = StdRng::seed_from_u64(8);
    let op = PanelOperator::<f64>::new(&random_operator(&mut rng, 3, 4)).unwrap();
    let (b, mut c) = (vec![0.0; 4 * 10], vec![0.0; 3 * 10]);
    for (n, ldb, ldc, b_len, c_len) in
        [(11, 10, 10, 40, 30), (10, 9, 10, 40, 30), (10, 10, 10, 39, 30), (10, 10, 10, 40, 29)]
    {
        let r = op.apply(Beta::Zero, n, &b[..b_len], ldb, &mut c[..c_len], ldc);
        assert!(matches!(r, Err(PanelError::Shape { .. })), "n {n} ldb {ldb} ldc {ldc}");
    }
    assert!(op.apply(Beta::Zero, 0, &b, 10, &mut c, 10).is_ok());
    let huge = ConstOperator::new("huge", 1, 1, vec![1e300]).unwrap();
    assert!(PanelOperator::<f32>::new(&huge).is_err());
}

#[test]
fn the_same_bits_on_one_and_three_threads() {
    let mut rng = StdRng::seed_from_u64(9);
    let op = PanelOperator::<f64>::new(&random_operator(&mut rng, 20, 11)).unwrap();
    let n = 5000;
    let b: Vec<f64> = (0..11 * n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut c = vec![0.0; 20 * n];
        pool.install(|| op.apply(Beta::Zero, n, &b, n, &mut c, n)).unwrap();
        c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(3));
}

#[test]
fn a_zero_first_product_keeps_its_sign_and_zero_rows_write_plus_zero() {
    // Row 0: (-1) * (+0) = -0 exactly as a multiplication gives it; row 1 is all zeros.
    let op = ConstOperator::new("signs", 2, 1, vec![-1.0, 0.0]).unwrap();
    for n in [3, 100] {
        let b = vec![0.0f64; n];
        let mut c = vec![f64::NAN; 2 * n];
        PanelOperator::<f64>::new(&op).unwrap().apply(Beta::Zero, n, &b, n, &mut c, n).unwrap();
        assert!(c[..n].iter().all(|v| v.to_bits() == (-0.0f64).to_bits()), "n {n}");
        assert!(c[n..].iter().all(|v| v.to_bits() == 0.0f64.to_bits()), "n {n}");
    }
}

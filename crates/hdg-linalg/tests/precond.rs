//! Preconditioners on HDG trace systems: block Jacobi must beat plain CG and Jacobi.
mod support;

use hdg_backend_cpu::CpuBackend;
use hdg_core::{Preconditioner, TraceOperator, VectorOps};
use hdg_linalg::{run_cg, BlockJacobi, CgSettings, Flow, Identity, Jacobi};
use support::hdg_system;

fn iterations(
    op: &dyn TraceOperator<f64, Vector = Vec<f64>>,
    pc: &dyn Preconditioner<f64, CpuBackend>,
    rhs: &Vec<f64>,
) -> (usize, Vec<f64>) {
    let settings = CgSettings { tolerance: 1e-10, max_iterations: 10_000, true_residual_every: 0 };
    let mut x = vec![0.0; rhs.len()];
    let report =
        run_cg(&CpuBackend, op, pc, rhs, &mut x, &settings, &mut |_| Flow::Continue).unwrap();
    assert!(report.converged && report.relative_residual < 1e-9, "{report:?}");
    (report.iterations, x)
}

#[test]
fn block_jacobi_reduces_cg_iterations() {
    for k in 1..=4 {
        let (op, rhs) = hdg_system(12, k);
        let (plain, x_plain) = iterations(&op, &Identity, &rhs);
        let (jacobi, _) = iterations(&op, &Jacobi::new(&CpuBackend, &op).unwrap(), &rhs);
        let (block, x_block) = iterations(&op, &BlockJacobi::new(&CpuBackend, &op).unwrap(), &rhs);
        println!("k = {k}: CG {plain}, Jacobi {jacobi}, block Jacobi {block} iterations");
        assert!(block < plain, "k = {k}: block Jacobi {block} vs CG {plain}");
        assert!(block <= jacobi, "k = {k}: block Jacobi {block} vs Jacobi {jacobi}");
        let norm = x_plain.iter().map(|v| v * v).sum::<f64>().sqrt();
        let diff = x_plain.iter().zip(&x_block).map(|(a, b)| (a - b).powi(2)).sum::<f64>().sqrt();
        assert!(diff <= 1e-7 * norm, "k = {k}: solutions differ by {diff:e}");
    }
}

/// Block Jacobi applies exactly the inverse of the diagonal blocks: B (M^-1 r) = r blockwise.
#[test]
fn block_jacobi_inverts_the_diagonal_blocks() {
    let (op, _) = hdg_system(4, 3);
    let nb = op.block_size();
    let blocks = op.diagonal_blocks().unwrap();
    let pc = BlockJacobi::new(&CpuBackend, &op).unwrap();
    let r: Vec<f64> = (0..op.dim()).map(|i| (i as f64 * 0.7).sin()).collect();
    let mut z = CpuBackend.zeros(op.dim()).unwrap();
    pc.apply(&CpuBackend, &r, &mut z).unwrap();
    for (b, block) in blocks.chunks_exact(nb * nb).enumerate() {
        for i in 0..nb {
            let bz: f64 = (0..nb).map(|j| block[i * nb + j] * z[b * nb + j]).sum();
            assert!((bz - r[b * nb + i]).abs() < 1e-12 * (1.0 + r[b * nb + i].abs()));
        }
    }
}

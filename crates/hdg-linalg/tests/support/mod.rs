//! Test support: small dense operators on the CPU backend's vectors, and HDG trace systems.
#![allow(dead_code)]
use hdg_backend_cpu::{CpuBackend, DbfMatrix};
use hdg_core::{
    Assembler, Discretization, HostCsr, LocalSolver, Manufactured, Problem, Result, TraceOperator,
};
use hdg_mesh::{generate, Diagonal, Mesh};

/// A dense symmetric matrix as a trace operator (row-major).
pub struct Dense {
    pub n: usize,
    pub a: Vec<f64>,
}

impl TraceOperator<f64> for Dense {
    type Vector = Vec<f64>;
    fn dim(&self) -> usize {
        self.n
    }
    fn apply(&self, x: &Vec<f64>, y: &mut Vec<f64>) -> Result<()> {
        for i in 0..self.n {
            y[i] = (0..self.n).map(|j| self.a[i * self.n + j] * x[j]).sum();
        }
        Ok(())
    }
    fn diagonal(&self) -> Result<Vec<f64>> {
        Ok((0..self.n).map(|i| self.a[i * self.n + i]).collect())
    }
    fn block_size(&self) -> usize {
        1
    }
    fn diagonal_blocks(&self) -> Result<Vec<f64>> {
        self.diagonal()
    }
    fn gershgorin_bounds(&self, scaled: bool) -> Result<(f64, f64)> {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for i in 0..self.n {
            let c = self.a[i * self.n + i];
            let r: f64 =
                (0..self.n).filter(|&j| j != i).map(|j| self.a[i * self.n + j].abs()).sum();
            let (c, r) = if scaled { (1.0, r / c) } else { (c, r) };
            lo = lo.min(c - r);
            hi = hi.max(c + r);
        }
        Ok((lo, hi))
    }
    fn to_host_csr(&self) -> Result<HostCsr> {
        let mut csr = HostCsr { n: self.n, n_cols: self.n, indptr: vec![0], ..Default::default() };
        for i in 0..self.n {
            for j in 0..self.n {
                if self.a[i * self.n + j] != 0.0 {
                    csr.indices.push(j);
                    csr.values.push(self.a[i * self.n + j]);
                }
            }
            csr.indptr.push(csr.indices.len());
        }
        Ok(csr)
    }
}

/// 1D Laplacian with a variable scaling s_i: A = S L S.
pub fn scaled_laplacian(n: usize, scale: impl Fn(usize) -> f64) -> Dense {
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        a[i * n + i] = 2.0 * scale(i) * scale(i);
        if i + 1 < n {
            a[i * n + i + 1] = -scale(i) * scale(i + 1);
            a[(i + 1) * n + i] = -scale(i) * scale(i + 1);
        }
    }
    Dense { n, a }
}

/// The assembled HDG trace system of u = sin(pi x) sin(pi y) on an n x n unit square at order
/// k (perturbed mesh), with its right-hand side.
pub fn hdg_system(n: usize, k: usize) -> (DbfMatrix<f64>, Vec<f64>) {
    let (mesh, problem) = hdg_inputs(n);
    assemble(&Discretization::<f64>::new(&mesh, &problem, k).unwrap())
}

/// The mesh and problem of [`hdg_system`] (for solvers that need the discretization).
pub fn hdg_inputs(n: usize) -> (Mesh, Problem) {
    let mesh = generate::perturb(&generate::unit_square(n, Diagonal::Alternating).unwrap(), 0.2, 3)
        .unwrap();
    (mesh, Problem::manufactured(Manufactured::Sine, 1.0, 0.0))
}

/// The trace system of a discretization, assembled on the CPU.
pub fn assemble(disc: &Discretization<'_, f64>) -> (DbfMatrix<f64>, Vec<f64>) {
    let backend = CpuBackend;
    let prep = backend.prepare(disc).unwrap();
    let condensed = backend.condense(disc, &prep).unwrap();
    backend.assemble(disc, &prep, &condensed).unwrap()
}

/// All eigenvalues of a symmetric operator, ascending (dense, faer).
pub fn dense_eigenvalues(op: &dyn TraceOperator<f64, Vector = Vec<f64>>) -> Vec<f64> {
    let csr = op.to_host_csr().unwrap();
    let n = csr.n;
    let mut m = faer::Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for p in csr.indptr[i]..csr.indptr[i + 1] {
            m[(i, csr.indices[p])] = csr.values[p];
        }
    }
    let mut ev: Vec<f64> = m.self_adjoint_eigenvalues(faer::Side::Lower).unwrap();
    ev.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ev
}

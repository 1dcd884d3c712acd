//! The multigrid preconditioner's backend operations ([`MultigridOps`]): sparse matrices in
//! compressed sparse row form (its vertex levels and their transfers) with their product,
//! parallel over rows, and the face-by-face transfer between the trace and vertex spaces.
use hdg_core::{check_lengths, HostCsr, MultigridOps, Real, Result, VertexSpace, NONE};
use rayon::prelude::*;

use crate::CpuBackend;

/// Rows per parallel task of the product.
const ROWS_PER_TASK: usize = 1024;

/// A CSR matrix on the host, in the working precision; 32-bit column indices (half the index
/// traffic of `usize`: the product is bound by memory bandwidth).
#[derive(Clone, Debug)]
pub struct CsrMatrix<T> {
    n_cols: usize,
    row_start: Vec<usize>,
    columns: Vec<u32>,
    values: Vec<T>,
}

impl<T: Real> CsrMatrix<T> {
    /// The matrix of `host`, values rounded to T. Errors if the structure is inconsistent.
    pub fn new(host: &HostCsr) -> Result<Self> {
        host.check_structure()?;
        Ok(CsrMatrix {
            n_cols: host.n_cols,
            row_start: host.indptr.clone(),
            columns: host.indices.par_iter().map(|&c| c as u32).collect(),
            values: host.values.par_iter().map(|&v| T::from_f64_lossy(v)).collect(),
        })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.row_start.len() - 1
    }
}

/// The transfer E of a [`VertexSpace`]: its arrays in the working precision (see
/// `hdg_core::auxiliary` for what they mean).
#[derive(Clone, Debug)]
pub struct FaceTransfer<T> {
    n_f: usize,
    d: usize,
    transfer: Vec<T>,
    row_vertices: Vec<u32>,
    vertex_row_start: Vec<usize>,
    vertex_rows: Vec<u32>,
}

/// Faces (or vertices) per parallel task of the transfers.
const ITEMS_PER_TASK: usize = 2048;

impl<T: Real> MultigridOps<T> for CpuBackend {
    type Csr = CsrMatrix<T>;
    type FaceTransfer = FaceTransfer<T>;

    fn upload_face_transfer(&self, space: &VertexSpace) -> Result<FaceTransfer<T>> {
        Ok(FaceTransfer {
            n_f: space.n_f,
            d: space.vertices_per_face,
            transfer: space.face_transfer.iter().map(|&v| T::from_f64_lossy(v)).collect(),
            row_vertices: space.row_vertices.clone(),
            vertex_row_start: space.vertex_row_start.clone(),
            vertex_rows: space.vertex_rows.clone(),
        })
    }

    fn prolong_add(&self, t: &FaceTransfer<T>, coarse: &Vec<T>, trace: &mut Vec<T>) -> Result<()> {
        let (n_f, d) = (t.n_f, t.d);
        let rows = t.row_vertices.len() / d;
        check_lengths(
            "prolong_add (trace, coarse)",
            &[rows * n_f, t.vertex_row_start.len() - 1],
            &[trace.len(), coarse.len()],
        )?;
        trace
            .par_chunks_mut(n_f)
            .zip(t.row_vertices.par_chunks(d))
            .with_min_len(ITEMS_PER_TASK)
            .for_each(|(face, vertices)| {
                for (m, value) in face[..d].iter_mut().enumerate() {
                    *value += vertices
                        .iter()
                        .enumerate()
                        .filter(|&(_, &v)| v != NONE)
                        .map(|(i, &v)| t.transfer[m * d + i] * coarse[v as usize])
                        .sum::<T>();
                }
            });
        Ok(())
    }

    fn restrict(&self, t: &FaceTransfer<T>, trace: &Vec<T>, coarse: &mut Vec<T>) -> Result<()> {
        let (n_f, d) = (t.n_f, t.d);
        let rows = t.row_vertices.len() / d;
        check_lengths(
            "restrict (trace, coarse)",
            &[rows * n_f, t.vertex_row_start.len() - 1],
            &[trace.len(), coarse.len()],
        )?;
        coarse.par_iter_mut().enumerate().with_min_len(ITEMS_PER_TASK).for_each(|(v, value)| {
            let incidence = &t.vertex_rows[t.vertex_row_start[v]..t.vertex_row_start[v + 1]];
            *value = incidence
                .iter()
                .map(|&entry| {
                    let (row, i) = (entry as usize / d, entry as usize % d);
                    (0..d).map(|m| t.transfer[m * d + i] * trace[row * n_f + m]).sum::<T>()
                })
                .sum();
        });
        Ok(())
    }

    fn upload_csr(&self, matrix: &HostCsr) -> Result<CsrMatrix<T>> {
        CsrMatrix::new(matrix)
    }

    fn csr_apply(&self, matrix: &CsrMatrix<T>, x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        check_lengths("csr_apply (x, y)", &[matrix.n_cols, matrix.rows()], &[x.len(), y.len()])?;
        y.par_iter_mut().enumerate().with_min_len(ROWS_PER_TASK).for_each(|(row, yi)| {
            let range = matrix.row_start[row]..matrix.row_start[row + 1];
            *yi = matrix.columns[range.clone()]
                .iter()
                .zip(&matrix.values[range])
                .map(|(&c, &v)| v * x[c as usize])
                .sum();
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangular_product_and_bad_structure() {
        // [[1, 0, 2], [0, 3, 0]]
        let host = HostCsr {
            n: 2,
            n_cols: 3,
            indptr: vec![0, 2, 3],
            indices: vec![0, 2, 1],
            values: vec![1.0, 2.0, 3.0],
        };
        let a = MultigridOps::<f64>::upload_csr(&CpuBackend, &host).unwrap();
        let mut y = vec![0.0; 2];
        CpuBackend.csr_apply(&a, &vec![1.0, 10.0, 100.0], &mut y).unwrap();
        assert_eq!(y, vec![201.0, 30.0]);
        assert!(CpuBackend.csr_apply(&a, &vec![1.0, 2.0], &mut y).is_err());
        let mut bad = host.clone();
        bad.indices[1] = 3;
        assert!(MultigridOps::<f64>::upload_csr(&CpuBackend, &bad).is_err());
        let mut bad = host;
        bad.indptr = vec![0, 3, 2];
        assert!(MultigridOps::<f32>::upload_csr(&CpuBackend, &bad).is_err());
    }
}

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
        match d {
            2 => prolong_add_faces::<T, 2>(t, coarse, trace),
            3 => prolong_add_faces::<T, 3>(t, coarse, trace),
            _ => unreachable!("faces have 2 or 3 vertices (VertexSpace)"),
        }
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
        match d {
            2 => restrict_to_vertices::<T, 2>(t, trace, coarse),
            3 => restrict_to_vertices::<T, 3>(t, trace, coarse),
            _ => unreachable!("faces have 2 or 3 vertices (VertexSpace)"),
        }
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

/// trace += E coarse with D vertices per face known at compile time: the loops over a face's
/// vertices and modes unroll (with D a run-time value the transfers took 3 to 4 times as long
/// as the data they move allows).
fn prolong_add_faces<T: Real, const D: usize>(t: &FaceTransfer<T>, coarse: &[T], trace: &mut [T]) {
    let transfer = &t.transfer[..D * D];
    trace
        .par_chunks_mut(t.n_f)
        .zip(t.row_vertices.par_chunks_exact(D))
        .with_min_len(ITEMS_PER_TASK)
        .for_each(|(face, vertices)| {
            let values: [Option<T>; D] = std::array::from_fn(|i| {
                (vertices[i] != NONE).then(|| coarse[vertices[i] as usize])
            });
            for (m, value) in face[..D].iter_mut().enumerate() {
                *value +=
                    (0..D).filter_map(|i| values[i].map(|c| transfer[m * D + i] * c)).sum::<T>();
            }
        });
}

/// coarse = E^T trace with D vertices per face known at compile time.
fn restrict_to_vertices<T: Real, const D: usize>(
    t: &FaceTransfer<T>,
    trace: &[T],
    coarse: &mut [T],
) {
    let (n_f, transfer) = (t.n_f, &t.transfer[..D * D]);
    coarse.par_iter_mut().enumerate().with_min_len(ITEMS_PER_TASK).for_each(|(v, value)| {
        let incidence = &t.vertex_rows[t.vertex_row_start[v]..t.vertex_row_start[v + 1]];
        *value = incidence
            .iter()
            .map(|&entry| {
                let (row, i) = (entry as usize / D, entry as usize % D);
                let modes = &trace[row * n_f..][..D];
                (0..D).map(|m| transfer[m * D + i] * modes[m]).sum::<T>()
            })
            .sum();
    });
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

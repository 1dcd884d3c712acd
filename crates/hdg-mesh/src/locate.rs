//! Which cell holds a point: a uniform grid of bins over the mesh's bounding box, each bin
//! listing the cells whose bounding boxes meet it; a query tests the cells of one bin by their
//! barycentric coordinates.
//!
//! About one bin per cell, shaped after the bounding box, keeps a bin's list short on meshes of
//! roughly uniform size (the only kind the generators and the example meshes make); a strongly
//! graded mesh lengthens the lists of its fine bins, which costs time, never correctness.
use crate::{Mesh, MeshError};

/// How far outside a cell (in barycentric coordinates) a point may lie and still be taken as
/// in it: points on a face or a vertex, computed in floating point, land a few ulps outside
/// either neighbour.
const INSIDE_TOLERANCE: f64 = 1e-10;

/// A point found in a cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Located {
    /// The cell.
    pub cell: usize,
    /// Barycentric coordinates of the point with respect to the cell's vertices, in the
    /// cell's local vertex order (`dim + 1` entries used; they sum to 1).
    pub barycentric: [f64; 4],
}

impl Located {
    /// Coordinates of the point on the reference simplex with vertices
    /// `(-1,..,-1)` and `(-1,..,-1) + 2 e_s`: `xi_s = 2 lambda_{s+1} - 1`.
    pub fn reference_point(&self, dim: usize) -> [f64; 3] {
        let mut xi = [0.0; 3];
        for s in 0..dim {
            xi[s] = 2.0 * self.barycentric[s + 1] - 1.0;
        }
        xi
    }
}

/// Finds the cells that hold points ([`PointLocator::locate`]).
#[derive(Clone, Debug)]
pub struct PointLocator {
    dim: usize,
    low: [f64; 3],
    bin_size: [f64; 3],
    bins: [usize; 3],
    /// Cells of bin `b`: `bin_cells[bin_start[b]..bin_start[b + 1]]`.
    bin_start: Vec<usize>,
    bin_cells: Vec<u32>,
}

impl PointLocator {
    /// Bins the cells of `mesh`.
    pub fn new(mesh: &Mesh) -> PointLocator {
        let d = mesh.dim();
        let (mut low, mut high) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
        for v in 0..mesh.n_vertices() {
            for (r, &x) in mesh.vertex(v).iter().enumerate() {
                low[r] = low[r].min(x);
                high[r] = high[r].max(x);
            }
        }
        let extent: Vec<f64> = (0..d).map(|r| (high[r] - low[r]).max(f64::MIN_POSITIVE)).collect();
        // Bins per side proportional to the extent, about one bin per cell in all.
        let volume: f64 = extent.iter().product();
        let side = (volume / mesh.n_cells().max(1) as f64).powf(1.0 / d as f64);
        let (mut bins, mut bin_size) = ([1usize; 3], [1.0; 3]);
        for r in 0..d {
            bins[r] = ((extent[r] / side).ceil() as usize).clamp(1, 1 << 12);
            bin_size[r] = extent[r] / bins[r] as f64;
        }
        let mut locator = PointLocator {
            dim: d,
            low,
            bin_size,
            bins,
            bin_start: Vec::new(),
            bin_cells: Vec::new(),
        };
        let n_bins = bins[0] * bins[1] * bins[2];
        let mut counts = vec![0usize; n_bins + 1];
        let mut ranges = Vec::with_capacity(mesh.n_cells());
        for c in 0..mesh.n_cells() {
            let (mut lo, mut hi) = ([0usize; 3], [0usize; 3]);
            for r in 0..d {
                let coords = mesh.cell_vertices(c).iter().map(|&v| mesh.vertex(v)[r]);
                let (a, b) = coords
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
                lo[r] = locator.bin_of(r, a);
                hi[r] = locator.bin_of(r, b);
            }
            locator.for_each_bin(lo, hi, |b| counts[b + 1] += 1);
            ranges.push((lo, hi));
        }
        for b in 0..n_bins {
            counts[b + 1] += counts[b];
        }
        let mut next = counts.clone();
        let mut bin_cells = vec![0u32; counts[n_bins]];
        for (c, &(lo, hi)) in ranges.iter().enumerate() {
            locator.for_each_bin(lo, hi, |b| {
                bin_cells[next[b]] = c as u32;
                next[b] += 1;
            });
        }
        locator.bin_start = counts;
        locator.bin_cells = bin_cells;
        locator
    }

    fn bin_of(&self, r: usize, x: f64) -> usize {
        let i = ((x - self.low[r]) / self.bin_size[r]).floor();
        if i.is_nan() || i < 0.0 {
            0
        } else {
            (i as usize).min(self.bins[r] - 1)
        }
    }

    fn for_each_bin(&self, lo: [usize; 3], hi: [usize; 3], mut visit: impl FnMut(usize)) {
        for k in lo[2]..=hi[2] {
            for j in lo[1]..=hi[1] {
                for i in lo[0]..=hi[0] {
                    visit((k * self.bins[1] + j) * self.bins[0] + i);
                }
            }
        }
    }

    /// The cell of `mesh` (the mesh this locator was built for) that holds `x`, or `None` for
    /// a point outside the mesh. A point on a face shared by two cells is given to one of
    /// them; the solution's trace is single-valued there only up to the jump of the
    /// discontinuous fields.
    ///
    /// # Errors
    /// [`MeshError::PointDimension`] for a point with other than `dim` coordinates,
    /// [`MeshError::NonFinitePoint`] for a NaN or infinite coordinate.
    pub fn locate(&self, mesh: &Mesh, x: &[f64]) -> Result<Option<Located>, MeshError> {
        let d = self.dim;
        if x.len() != d {
            return Err(MeshError::PointDimension { point: x.to_vec(), dim: d });
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(MeshError::NonFinitePoint { point: x.to_vec() });
        }
        Ok(self.locate_checked(mesh, x))
    }

    /// [`PointLocator::locate`] of a point of the right dimension, with finite coordinates.
    fn locate_checked(&self, mesh: &Mesh, x: &[f64]) -> Option<Located> {
        let d = self.dim;
        let mut bin = [0usize; 3];
        for r in 0..d {
            let outside = self.bin_size[r] * 1e-9;
            if x[r] < self.low[r] - outside
                || x[r] > self.low[r] + self.bin_size[r] * self.bins[r] as f64 + outside
            {
                return None;
            }
            bin[r] = self.bin_of(r, x[r]);
        }
        let b = (bin[2] * self.bins[1] + bin[1]) * self.bins[0] + bin[0];
        // The cell the point is deepest in: inside one cell, the least barycentric coordinate
        // is >= 0 there and < 0 in every other.
        let mut best: Option<(f64, Located)> = None;
        for &c in &self.bin_cells[self.bin_start[b]..self.bin_start[b + 1]] {
            let lambda = barycentric(mesh, c as usize, x);
            let least = lambda[..=d].iter().copied().fold(f64::INFINITY, f64::min);
            if best.as_ref().is_none_or(|(l, _)| least > *l) {
                best = Some((least, Located { cell: c as usize, barycentric: lambda }));
                if least >= 0.0 {
                    break;
                }
            }
        }
        best.filter(|(least, _)| *least >= -INSIDE_TOLERANCE).map(|(_, located)| located)
    }
}

/// Barycentric coordinates of `x` in cell `c` (Cramer's rule on the affine map).
fn barycentric(mesh: &Mesh, c: usize, x: &[f64]) -> [f64; 4] {
    let d = mesh.dim();
    let v = mesh.cell_vertices(c);
    let v0 = mesh.vertex(v[0]);
    let mut jac = [[0.0; 3]; 3];
    let mut rhs = [0.0; 3];
    for r in 0..d {
        for s in 0..d {
            jac[r][s] = mesh.vertex(v[s + 1])[r] - v0[r];
        }
        rhs[r] = x[r] - v0[r];
    }
    let mut lambda = [0.0; 4];
    if d == 2 {
        let det = jac[0][0] * jac[1][1] - jac[0][1] * jac[1][0];
        lambda[1] = (rhs[0] * jac[1][1] - jac[0][1] * rhs[1]) / det;
        lambda[2] = (jac[0][0] * rhs[1] - rhs[0] * jac[1][0]) / det;
    } else {
        let det3 = |m: &[[f64; 3]; 3]| {
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
                - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
                + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        };
        let det = det3(&jac);
        for s in 0..3 {
            let mut m = jac;
            for r in 0..3 {
                m[r][s] = rhs[r];
            }
            lambda[s + 1] = det3(&m) / det;
        }
    }
    lambda[0] = 1.0 - lambda[1..=d].iter().sum::<f64>();
    lambda
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generate, Diagonal};

    /// Cell centroids are found in their own cell, and the barycentric coordinates rebuild
    /// the point; points outside the domain are not found.
    #[test]
    fn centroids_are_found_in_their_cells() {
        let square =
            generate::perturb(&generate::unit_square(7, Diagonal::Right).unwrap(), 0.3, 3).unwrap();
        for mesh in [square, generate::unit_cube(3).unwrap()] {
            let d = mesh.dim();
            let locator = PointLocator::new(&mesh);
            for c in 0..mesh.n_cells() {
                let vs = mesh.cell_vertices(c);
                let centroid: Vec<f64> = (0..d)
                    .map(|r| vs.iter().map(|&v| mesh.vertex(v)[r]).sum::<f64>() / vs.len() as f64)
                    .collect();
                let found = locator.locate(&mesh, &centroid).unwrap().expect("centroid not found");
                assert_eq!(found.cell, c);
                for r in 0..d {
                    let x: f64 =
                        vs.iter().zip(found.barycentric).map(|(&v, l)| l * mesh.vertex(v)[r]).sum();
                    assert!((x - centroid[r]).abs() < 1e-14);
                }
            }
            assert_eq!(locator.locate(&mesh, &vec![1.5; d]), Ok(None));
            assert_eq!(locator.locate(&mesh, &vec![-1e-6; d]), Ok(None));
            // Bad points are errors, not points outside.
            assert!(matches!(
                locator.locate(&mesh, &vec![f64::NAN; d]),
                Err(MeshError::NonFinitePoint { .. })
            ));
            assert!(matches!(
                locator.locate(&mesh, &[0.5]),
                Err(MeshError::PointDimension { dim, .. }) if dim == d
            ));
            let other = vec![0.5; 5 - d];
            let err = locator.locate(&mesh, &other).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("the point {other:?} has {} coordinates, but the mesh is {d}D", 5 - d)
            );
            // Every vertex (on faces of several cells, on the boundary) is found.
            for v in 0..mesh.n_vertices() {
                let found =
                    locator.locate(&mesh, mesh.vertex(v)).unwrap().expect("vertex not found");
                assert!(mesh.cell_vertices(found.cell).contains(&v));
            }
        }
    }
}
